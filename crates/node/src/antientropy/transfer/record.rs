//! `<data-dir>/COPY-<version>`: the sources a node finished copying from
//! for the transition to layout `version`, so a restart skips them and
//! redoes the others (a source's copy is idempotent: redoing one compares
//! trees again and fetches only what is still missing).
//!
//! The file is text, one source per line after a header:
//!
//! ```text
//! ataman-copy 1
//! done http://10.0.0.1:7000
//! ```
//!
//! It is written to `COPY-<version>.tmp`, fsynced, renamed over the file
//! and the directory fsynced, so a reader sees the old list or the new
//! one. A file that does not parse (it never should) is logged and read
//! as empty: every source is then copied again, which is always safe.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's first line.
const HEADER: &str = "ataman-copy 1";
/// The prefix of a finished source's line.
const DONE: &str = "done ";
/// Longest file read, bytes (256 members of at most 256 bytes each, and the header).
const FILE_BYTES_MAX: u64 = 80 * 1024;

/// The sources finished for one transition, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRecord {
    dir: PathBuf,
    version: u64,
    done: BTreeSet<String>,
}

/// The file name of the record of the transition to `version`.
pub fn file_name(version: u64) -> String {
    format!("COPY-{version}")
}

impl CopyRecord {
    /// The record of the transition to `version` in `dir` (empty when there is none).
    pub fn load(dir: &Path, version: u64) -> std::io::Result<CopyRecord> {
        let path = dir.join(file_name(version));
        let mut record = CopyRecord {
            dir: dir.to_path_buf(),
            version,
            done: BTreeSet::new(),
        };
        let text = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(record),
            Err(e) => return Err(e),
            Ok(m) if m.len() > FILE_BYTES_MAX => None,
            Ok(_) => String::from_utf8(std::fs::read(&path)?).ok(),
        };
        match text.as_deref().and_then(parse) {
            Some(done) => record.done = done,
            None => tracing::warn!(
                path = %path.display(),
                "copy record unreadable; copying from every source again"
            ),
        }
        Ok(record)
    }

    /// True when `source` is recorded finished.
    pub fn is_done(&self, source: &str) -> bool {
        self.done.contains(source)
    }

    /// Records `source` finished, durably, before returning.
    pub fn mark_done(&mut self, source: &str) -> std::io::Result<()> {
        self.done.insert(source.to_owned());
        let mut text = format!("{HEADER}\n");
        for url in &self.done {
            text.push_str(DONE);
            text.push_str(url);
            text.push('\n');
        }
        let name = file_name(self.version);
        let temp = self.dir.join(format!("{name}.tmp"));
        let mut file = File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, self.dir.join(name))?;
        File::open(&self.dir)?.sync_all()
    }
}

/// Removes the record of the transition to `version` (once the transition
/// is over: the driver's cleanup); no file is not an error.
pub fn remove(dir: &Path, version: u64) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(file_name(version))) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn parse(text: &str) -> Option<BTreeSet<String>> {
    let mut lines = text.lines();
    if lines.next()? != HEADER || !text.ends_with('\n') {
        return None;
    }
    lines
        .map(|l| {
            l.strip_prefix(DONE)
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks survive a reload; versions are apart; a damaged file reads
    /// as empty (copy everything again); remove forgets.
    #[test]
    fn marks_survive_and_damage_redoes() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = CopyRecord::load(dir.path(), 7).unwrap();
        assert!(!r.is_done("http://a:1"));
        r.mark_done("http://a:1").unwrap();
        r.mark_done("http://b:1").unwrap();
        let again = CopyRecord::load(dir.path(), 7).unwrap();
        assert!(again.is_done("http://a:1") && again.is_done("http://b:1"));
        assert!(
            !CopyRecord::load(dir.path(), 8)
                .unwrap()
                .is_done("http://a:1")
        );
        std::fs::write(dir.path().join("COPY-7"), "ataman-copy 1\ndone http://a:1").unwrap();
        assert!(
            !CopyRecord::load(dir.path(), 7)
                .unwrap()
                .is_done("http://a:1")
        );
        std::fs::write(dir.path().join("COPY-7"), "ataman-copy 1\nxx\n").unwrap();
        assert!(
            !CopyRecord::load(dir.path(), 7)
                .unwrap()
                .is_done("http://a:1")
        );
        remove(dir.path(), 7).unwrap();
        remove(dir.path(), 7).unwrap();
        assert!(!dir.path().join("COPY-7").exists());
    }
}
