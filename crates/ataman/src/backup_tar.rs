//! `ataman backup create --to -`: the cluster backup written as one tar
//! stream (POSIX ustar) on stdout, so it can be piped to any storage; the
//! summary goes to stderr. The backup is taken into a temporary directory
//! first (checked whole there), then streamed, then removed: a stream that
//! ends is a complete backup (`tar -x` of it passes `ataman backup verify`).
//!
//! # Format
//! One 512-byte ustar header per directory and file (in a stable, sorted
//! order; `name` at most [`NAME_BYTES_MAX`] bytes, paths here are short),
//! each file's bytes padded to 512, then two zero blocks. Written here
//! rather than with a crate: the subset a backup needs is these forty lines.

use crate::backup_client::{Failed, NodeArgs, refused};
use crate::http_client::url::BaseUrl;
use std::io::Write;
use std::path::Path;

/// A tar block, bytes.
pub const BLOCK_BYTES: usize = 512;
/// The longest path a header's `name` field holds (no `prefix` used).
pub const NAME_BYTES_MAX: usize = 100;

/// Takes the backup into a temporary directory and streams it on stdout.
pub fn create_to_stdout(
    url: &BaseUrl,
    node: &NodeArgs,
    lease_s: Option<u64>,
    skew_ms: u64,
) -> Result<String, Failed> {
    let temp = std::env::temp_dir().join(format!(
        "ataman-backup-stream-{}-{}",
        std::process::id(),
        ataman_node::hlc::wall_ms()
    ));
    let to = temp.join("backup");
    let io = |e: std::io::Error| refused(format!("ataman backup create: {}: {e}", temp.display()));
    std::fs::create_dir_all(&temp).map_err(io)?;
    let ask = crate::backup_cluster::CreateAsk {
        node,
        to: &to,
        lease_s,
        skew_ms,
    };
    let result = crate::backup_cluster::create(url, &ask).and_then(|summary| {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        write_tree(&mut out, &to, "")
            .and_then(|()| out.write_all(&[0u8; 2 * BLOCK_BYTES]))
            .and_then(|()| out.flush())
            .map_err(|e| refused(format!("ataman backup create: writing the tar stream: {e}")))?;
        eprintln!("{summary}streamed as tar on stdout");
        Ok(String::new())
    });
    let _ = std::fs::remove_dir_all(&temp);
    result
}

/// Writes `dir`'s entries under `prefix`, sorted, directories first.
fn write_tree(out: &mut dyn Write, dir: &Path, prefix: &str) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            out.write_all(&header(&format!("{name}/"), 0, b'5')?)?;
            write_tree(out, &entry.path(), &format!("{name}/"))?;
        } else {
            let bytes = std::fs::read(entry.path())?;
            out.write_all(&header(&name, bytes.len() as u64, b'0')?)?;
            out.write_all(&bytes)?;
            let pad = (BLOCK_BYTES - bytes.len() % BLOCK_BYTES) % BLOCK_BYTES;
            out.write_all(&vec![0u8; pad])?;
        }
    }
    Ok(())
}

/// One ustar header: `kind` `b'0'` a file, `b'5'` a directory.
pub fn header(name: &str, size: u64, kind: u8) -> std::io::Result<[u8; BLOCK_BYTES]> {
    if name.len() > NAME_BYTES_MAX {
        return Err(std::io::Error::other(format!(
            "{name}: path too long for a tar header"
        )));
    }
    let mut h = [0u8; BLOCK_BYTES];
    let mut put = |at: usize, bytes: &[u8]| h[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, name.as_bytes());
    put(
        100,
        if kind == b'5' {
            b"0000755\0"
        } else {
            b"0000644\0"
        },
    );
    put(108, b"0000000\0");
    put(116, b"0000000\0");
    put(124, format!("{size:011o}\0").as_bytes());
    put(
        136,
        format!("{:011o}\0", ataman_node::hlc::wall_ms() / 1000).as_bytes(),
    );
    put(148, b"        ");
    put(156, &[kind]);
    put(257, b"ustar\0");
    put(263, b"00");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum covers the header with its own field as spaces; the
    /// size is octal; a too-long name is refused, not cut.
    #[test]
    fn header_fields_and_checksum() {
        let h = header("node-0/data/CLOCK", 19, b'0').unwrap();
        assert_eq!(&h[0..17], b"node-0/data/CLOCK");
        assert_eq!(&h[124..136], b"00000000023\0");
        let mut blank = h;
        blank[148..156].copy_from_slice(b"        ");
        let sum: u32 = blank.iter().map(|&b| u32::from(b)).sum();
        let said = std::str::from_utf8(&h[148..154]).unwrap();
        assert_eq!(u32::from_str_radix(said, 8).unwrap(), sum);
        assert!(header(&"x".repeat(101), 0, b'0').is_err());
    }
}
