//! `<data-dir>/DEAD-<version>`: the nodes the operator declared dead for
//! the transition to layout `version` (`super::history`, `dead`), so a
//! restart (even of every node at once) keeps the declaration; the
//! gossip spreads it to the nodes that missed it.
//!
//! The file is text (docs/FORMAT.md, "Dead declarations"):
//!
//! ```text
//! ataman-dead 1
//! http://127.0.0.1:7003
//! http://127.0.0.1:7004
//! ```
//!
//! a header line, then one URL a line (at most [`DEAD_NODES_MAX`]). It is
//! written to `DEAD-<version>.tmp`, fsynced, renamed over the file and the
//! directory fsynced; then the records of older versions are removed
//! (their transitions are over). A record that does not parse is an error
//! naming the file: the node starts without it and says so (the operator
//! declares again; the gossip may bring it back too).

use super::layout::{LAYOUT_NODES_MAX, URL_BYTES_MAX};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The file's first line.
const HEADER: &str = "ataman-dead 1";
/// The file name's prefix.
const PREFIX: &str = "DEAD-";
/// URLs a record holds at most: every member of a layout.
pub const DEAD_NODES_MAX: usize = LAYOUT_NODES_MAX;
/// Longest record read, bytes (the header and every URL with its newline).
const RECORD_BYTES_MAX: usize = HEADER.len() + 1 + DEAD_NODES_MAX * (URL_BYTES_MAX + 1);

/// The file name of the record for `version`.
pub fn file_name(version: u64) -> String {
    format!("{PREFIX}{version}")
}

/// Records `nodes` (at most [`DEAD_NODES_MAX`]) declared dead for the
/// transition to `version`, durably, then removes older records.
pub fn store(dir: &Path, version: u64, nodes: &[String]) -> std::io::Result<()> {
    if nodes.len() > DEAD_NODES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} dead nodes, more than {DEAD_NODES_MAX}", nodes.len()),
        ));
    }
    let mut text = format!("{HEADER}\n");
    for url in nodes {
        text.push_str(url);
        text.push('\n');
    }
    let name = file_name(version);
    let temp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&temp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join(&name))?;
    File::open(dir)?.sync_all()?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let older = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v < version);
        if older {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// The nodes recorded dead for `version` (empty without a record); a
/// record that is not the format above is an error naming the file.
pub fn load(dir: &Path, version: u64) -> Result<Vec<String>, String> {
    let path = dir.join(file_name(version));
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let bad = |why: &str| format!("{} is not a dead-node record: {why}", path.display());
    if bytes.len() > RECORD_BYTES_MAX {
        return Err(bad(&format!(
            "{} bytes, more than {RECORD_BYTES_MAX}",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8"))?;
    let body = text
        .strip_suffix('\n')
        .ok_or_else(|| bad("no final newline"))?;
    let mut lines = body.split('\n');
    if lines.next() != Some(HEADER) {
        return Err(bad(&format!("the first line is not {HEADER:?}")));
    }
    let nodes: Vec<String> = lines.map(str::to_owned).collect();
    if let Some(url) = nodes
        .iter()
        .find(|u| u.is_empty() || u.len() > URL_BYTES_MAX)
    {
        return Err(bad(&format!("a line is not a URL: {url:?}")));
    }
    if nodes.len() > DEAD_NODES_MAX {
        return Err(bad(&format!("more than {DEAD_NODES_MAX} URLs")));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored record loads back; a newer one removes the older; no
    /// record is an empty list.
    #[test]
    fn store_load_and_supersede() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path(), 2).unwrap(), Vec::<String>::new());
        let nodes = vec!["http://a:1".to_owned(), "http://b:2".to_owned()];
        store(dir.path(), 2, &nodes).unwrap();
        assert_eq!(load(dir.path(), 2).unwrap(), nodes);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("DEAD-2")).unwrap(),
            "ataman-dead 1\nhttp://a:1\nhttp://b:2\n"
        );
        store(dir.path(), 3, &nodes[..1]).unwrap();
        assert!(!dir.path().join("DEAD-2").exists());
        assert_eq!(load(dir.path(), 3).unwrap(), nodes[..1].to_vec());
        assert!(!dir.path().join("DEAD-3.tmp").exists());
    }

    /// Damaged records are errors naming the file, never a panic; a
    /// record at the node bound stores, one past it does not.
    #[test]
    fn damaged_records_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        for (bytes, why) in [
            (&b"ataman-dead 1\nhttp://a:1"[..], "no final newline"),
            (b"ataman-dead 2\n", "the first line"),
            (b"ataman-dead 1\n\n", "not a URL"),
            (b"\xff\n", "not UTF-8"),
        ] {
            std::fs::write(dir.path().join("DEAD-5"), bytes).unwrap();
            let e = load(dir.path(), 5).unwrap_err();
            assert!(e.contains("DEAD-5") && e.contains(why), "{e}");
        }
        let many: Vec<String> = (0..=DEAD_NODES_MAX)
            .map(|i| format!("http://n:{i}"))
            .collect();
        store(dir.path(), 6, &many[..DEAD_NODES_MAX]).unwrap();
        assert_eq!(load(dir.path(), 6).unwrap().len(), DEAD_NODES_MAX);
        assert!(store(dir.path(), 7, &many).is_err());
    }
}
