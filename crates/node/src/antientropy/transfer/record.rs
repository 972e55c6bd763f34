//! `<data-dir>/COPY-<version>`: how far a node got copying for the
//! transition to layout `version`, so a restart resumes:
//! - the sources it finished (their comparing pass), which a restart
//!   skips; the others are redone (a source's copy is idempotent: redoing
//!   one compares digests again and fetches only what is still missing);
//! - per source, how far the one-pass copy (`super::one_pass`) got with
//!   it: every key of its scope up to this one is merged here, durably (a
//!   restart resumes after it).
//!
//! The file is text, one line per fact after a header (keys in hex):
//!
//! ```text
//! ataman-copy 1
//! done http://10.0.0.1:7000
//! pass http://10.0.0.2:7000 6b6579303030313233
//! ```
//!
//! It is written to `COPY-<version>.tmp`, fsynced, renamed over the file
//! and the directory fsynced, so a reader sees the old list or the new
//! one. A file that does not parse (it never should) is logged and read
//! as empty: every source is then copied again, which is always safe.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's first line.
const HEADER: &str = "ataman-copy 1";
/// The prefix of a finished source's line.
const DONE: &str = "done ";
/// The prefix of a one-pass progress line: the URL, a space, the key.
const PASS: &str = "pass ";
/// Longest resume key recorded, bytes: a longer key is not recorded (the
/// pass resumes from the last shorter one), so the file stays small.
pub const RESUME_KEY_BYTES_MAX: usize = 1024;
/// Longest file read, bytes: 256 members, each with a URL of at most
/// 1 KiB on two lines and a resume key in hex, and the header.
const FILE_BYTES_MAX: u64 = 1024 * 1024;

/// How far one transition's copy got, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRecord {
    dir: PathBuf,
    version: u64,
    done: BTreeSet<String>,
    merged: BTreeMap<String, Vec<u8>>,
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
            merged: BTreeMap::new(),
        };
        let text = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(record),
            Err(e) => return Err(e),
            Ok(m) if m.len() > FILE_BYTES_MAX => None,
            Ok(_) => String::from_utf8(std::fs::read(&path)?).ok(),
        };
        match text.as_deref().and_then(parse) {
            Some((done, merged)) => (record.done, record.merged) = (done, merged),
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

    /// The key up to which the one-pass copy merged `source`'s scope
    /// (`None`: from the first key).
    pub fn merged(&self, source: &str) -> Option<&[u8]> {
        self.merged.get(source).map(Vec::as_slice)
    }

    /// Records `source` finished, durably, before returning.
    pub fn mark_done(&mut self, source: &str) -> std::io::Result<()> {
        self.done.insert(source.to_owned());
        self.store()
    }

    /// Records, durably before returning, that the one-pass copy merged
    /// every key up to `key` of each of `sources`' scopes (every version
    /// applied must be durable already). A key over
    /// [`RESUME_KEY_BYTES_MAX`] is not recorded.
    pub fn mark_merged(&mut self, sources: &[&str], key: &[u8]) -> std::io::Result<()> {
        if key.len() > RESUME_KEY_BYTES_MAX {
            return Ok(());
        }
        for source in sources {
            self.merged.insert((*source).to_owned(), key.to_vec());
        }
        self.store()
    }

    fn store(&self) -> std::io::Result<()> {
        let mut text = format!("{HEADER}\n");
        for url in &self.done {
            text.push_str(DONE);
            text.push_str(url);
            text.push('\n');
        }
        for (url, key) in &self.merged {
            text.push_str(PASS);
            text.push_str(url);
            text.push(' ');
            for b in key {
                text.push_str(&format!("{b:02x}"));
            }
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

/// The finished sources and the one pass's keys; `None` when any line is
/// not one of the two kinds.
type Parsed = (BTreeSet<String>, BTreeMap<String, Vec<u8>>);

fn parse(text: &str) -> Option<Parsed> {
    let mut lines = text.lines();
    if lines.next()? != HEADER || !text.ends_with('\n') {
        return None;
    }
    let (mut done, mut merged) = (BTreeSet::new(), BTreeMap::new());
    for line in lines {
        let url = |u: &str| Some(u.to_owned()).filter(|u| !u.is_empty() && !u.contains(' '));
        if let Some(u) = line.strip_prefix(DONE) {
            done.insert(url(u)?);
        } else if let Some(rest) = line.strip_prefix(PASS) {
            let (u, hex) = rest.split_once(' ')?;
            merged.insert(url(u)?, unhex(hex)?);
        } else {
            return None;
        }
    }
    Some((done, merged))
}

/// The bytes of an even-length lowercase or uppercase hex string.
fn unhex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || hex.len() > 2 * RESUME_KEY_BYTES_MAX {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
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

    /// The one pass's keys survive a reload beside the finished sources,
    /// any key bytes included; a later mark replaces an earlier one; a key
    /// over the bound is not recorded; a damaged line reads as empty.
    #[test]
    fn pass_progress_survives() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = CopyRecord::load(dir.path(), 3).unwrap();
        assert_eq!(r.merged("http://a:1"), None);
        r.mark_merged(&["http://a:1", "http://b:1"], b"k1").unwrap();
        r.mark_merged(&["http://a:1"], &[0, 0xff, b' ', b'\n'])
            .unwrap();
        r.mark_done("http://c:1").unwrap();
        let long = vec![7; RESUME_KEY_BYTES_MAX + 1];
        r.mark_merged(&["http://a:1"], &long).unwrap();
        let again = CopyRecord::load(dir.path(), 3).unwrap();
        assert_eq!(
            again.merged("http://a:1"),
            Some(&[0, 0xff, b' ', b'\n'][..])
        );
        assert_eq!(again.merged("http://b:1"), Some(&b"k1"[..]));
        assert_eq!(again.merged("http://c:1"), None);
        assert!(again.is_done("http://c:1") && !again.is_done("http://b:1"));
        for bad in [
            "pass http://a:1 6b7\n",
            "pass http://a:1\n",
            "pass  6b\n",
            "bulk x\n",
        ] {
            std::fs::write(dir.path().join("COPY-3"), format!("{HEADER}\n{bad}")).unwrap();
            let damaged = CopyRecord::load(dir.path(), 3).unwrap();
            assert_eq!(damaged.merged("http://a:1"), None, "{bad}");
        }
    }
}
