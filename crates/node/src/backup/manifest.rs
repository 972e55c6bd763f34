//! `BACKUP-MANIFEST`: what a node checkpoint holds, every file with its
//! size and CRC-32C, and a last line that proves the list is whole
//! (docs/BACKUP.md, "The manifest").
//!
//! # Format
//! UTF-8 text, one item per line, `\n` ends every line:
//! ```text
//! ataman-checkpoint 1
//! name ckpt-1765080000000
//! created_ms 1765080000000
//! lease_until_ms 1765083600000
//! engine_seq 41235
//! hints_seq 0
//! pinned_bytes 1048576
//! file 9a1f03bc 1048576 data/000012.sst
//! file 0c5e2d11 53 data/MANIFEST
//! end 5d2a77e0
//! ```
//! `file CRC SIZE PATH`: the CRC-32C of the file's bytes in eight lower-case
//! hex digits, its size in decimal bytes, its path relative to the
//! checkpoint directory (`/`-separated, no `..`, no leading `/`, no
//! spaces). `end CRC`: the CRC-32C of every byte before the `end` line.
//! A manifest without its `end` line, or whose `end` does not match, is
//! torn: the checkpoint is not complete.
//!
//! Pure: parsing and rendering only; [`super::verify`] reads the files.

/// The manifest's file name inside a checkpoint directory.
pub const MANIFEST_FILE_NAME: &str = "BACKUP-MANIFEST";
/// The first line: the format and its version.
pub const MAGIC_LINE: &str = "ataman-checkpoint 1";
/// Files listed in one manifest, at most (a node's tables number in the
/// thousands; a manifest past this is refused as malformed).
pub const MANIFEST_FILES_MAX: usize = 1_000_000;

/// One file of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Path relative to the checkpoint directory.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32C of its bytes.
    pub crc32c: u32,
}

/// What a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// The checkpoint's name (its directory's name).
    pub name: String,
    /// When it was taken, Unix milliseconds.
    pub created_ms: u64,
    /// When its lease ends and the node removes it, Unix milliseconds.
    pub lease_until_ms: u64,
    /// The engine's last sequence number in it.
    pub engine_seq: u64,
    /// The hint store's last sequence number in it.
    pub hints_seq: u64,
    /// Bytes of SSTables it shares with the live store (hard links).
    pub pinned_bytes: u64,
    /// Every file, in the order written.
    pub files: Vec<FileEntry>,
}

impl Manifest {
    /// Total bytes of the files listed.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// The manifest as text (module header: the format).
    pub fn render(&self) -> String {
        let mut out = format!(
            "{MAGIC_LINE}\nname {}\ncreated_ms {}\nlease_until_ms {}\nengine_seq {}\nhints_seq {}\npinned_bytes {}\n",
            self.name,
            self.created_ms,
            self.lease_until_ms,
            self.engine_seq,
            self.hints_seq,
            self.pinned_bytes
        );
        for f in &self.files {
            out.push_str(&format!("file {:08x} {} {}\n", f.crc32c, f.bytes, f.path));
        }
        let crc = crc32c::crc32c(out.as_bytes());
        out.push_str(&format!("end {crc:08x}\n"));
        out
    }

    /// Parses a manifest; the first problem found, naming its line.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let Some(end_at) = text.rfind("end ") else {
            return Err("no `end` line: the manifest is torn".into());
        };
        if end_at > 0 && text.as_bytes()[end_at - 1] != b'\n' {
            return Err("no `end` line: the manifest is torn".into());
        }
        let (body, end) = (&text[..end_at], &text[end_at..]);
        let want = end
            .strip_prefix("end ")
            .and_then(|r| r.strip_suffix('\n'))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .ok_or("the `end` line is malformed")?;
        let got = crc32c::crc32c(body.as_bytes());
        if got != want {
            return Err(format!(
                "the manifest's checksum is {got:08x}, its `end` line says {want:08x}"
            ));
        }
        let mut lines = body.lines().enumerate();
        match lines.next() {
            Some((_, MAGIC_LINE)) => {}
            _ => return Err(format!("line 1 is not `{MAGIC_LINE}`")),
        }
        let mut m = Manifest::default();
        for (i, line) in lines {
            let no = i + 1;
            let (word, rest) = line.split_once(' ').ok_or(format!("line {no}: no value"))?;
            let number = || -> Result<u64, String> {
                rest.parse()
                    .map_err(|_| format!("line {no}: `{rest}` is not a number"))
            };
            match word {
                "name" => m.name = checked_name(rest).map_err(|e| format!("line {no}: {e}"))?,
                "created_ms" => m.created_ms = number()?,
                "lease_until_ms" => m.lease_until_ms = number()?,
                "engine_seq" => m.engine_seq = number()?,
                "hints_seq" => m.hints_seq = number()?,
                "pinned_bytes" => m.pinned_bytes = number()?,
                "file" => {
                    if m.files.len() >= MANIFEST_FILES_MAX {
                        return Err(format!("more than {MANIFEST_FILES_MAX} files"));
                    }
                    m.files
                        .push(parse_file(rest).map_err(|e| format!("line {no}: {e}"))?);
                }
                other => return Err(format!("line {no}: unknown item `{other}`")),
            }
        }
        if m.name.is_empty() {
            return Err("no `name` line".into());
        }
        Ok(m)
    }
}

fn parse_file(rest: &str) -> Result<FileEntry, String> {
    let mut parts = rest.splitn(3, ' ');
    let (Some(crc), Some(bytes), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("a file line is `file CRC SIZE PATH`".into());
    };
    let crc32c = u32::from_str_radix(crc, 16).map_err(|_| format!("`{crc}` is not a CRC"))?;
    let bytes = bytes
        .parse()
        .map_err(|_| format!("`{bytes}` is not a size"))?;
    Ok(FileEntry {
        path: checked_path(path)?.to_owned(),
        bytes,
        crc32c,
    })
}

/// A relative path inside the checkpoint: no `..`, no absolute path, no
/// empty component, no space.
pub fn checked_path(path: &str) -> Result<&str, String> {
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains(' ')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(path)
    } else {
        Err(format!(
            "`{path}` is not a relative path inside the checkpoint"
        ))
    }
}

/// A checkpoint's name: `[A-Za-z0-9._-]`, 1 to 64 bytes, not starting
/// with a dot (a temporary name starts with one).
pub fn checked_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!("{name:?} is not a checkpoint name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            name: "ckpt-1765080000000".into(),
            created_ms: 1_765_080_000_000,
            lease_until_ms: 1_765_083_600_000,
            engine_seq: 41_235,
            hints_seq: 0,
            pinned_bytes: 1_048_576,
            files: vec![
                FileEntry {
                    path: "data/000012.sst".into(),
                    bytes: 1_048_576,
                    crc32c: 0x9a1f_03bc,
                },
                FileEntry {
                    path: "data/MANIFEST".into(),
                    bytes: 53,
                    crc32c: 0x0c5e_2d11,
                },
            ],
        }
    }

    /// A rendered manifest parses back to itself.
    #[test]
    fn round_trip() {
        let m = sample();
        assert_eq!(Manifest::parse(&m.render()), Ok(m.clone()));
        assert_eq!(m.bytes(), 1_048_629);
    }

    /// Every prefix of a manifest (a torn write) and every one-byte change
    /// is refused.
    #[test]
    fn torn_or_changed_manifest_is_refused() {
        let text = sample().render();
        for cut in 0..text.len() {
            assert!(
                Manifest::parse(&text[..cut]).is_err(),
                "prefix {cut} parsed"
            );
        }
        let bytes = text.as_bytes();
        for at in 0..bytes.len() - 1 {
            let mut changed = bytes.to_vec();
            changed[at] ^= 0x01;
            if let Ok(s) = std::str::from_utf8(&changed) {
                assert!(Manifest::parse(s).is_err(), "changed byte {at} parsed");
            }
        }
    }

    /// Paths that would leave the checkpoint and malformed names are refused.
    #[test]
    fn paths_and_names_are_checked() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "data/../../x",
            "a//b",
            "a b",
            "./a",
        ] {
            assert!(checked_path(bad).is_err(), "{bad:?}");
        }
        assert!(checked_path("data/hints/000001.sst").is_ok());
        for bad in ["", ".tmp-x", "a/b", "a b", &"x".repeat(65)] {
            assert!(checked_name(bad).is_err(), "{bad:?}");
        }
        assert!(checked_name("ckpt-1765080000000").is_ok());
    }
}
