//! `<data-dir>/REPAIRED`: the completed sessions repair-based collection
//! counts on ([`super::repaired::Repairs`]), kept across restarts
//! (`docs/FORMAT.md`, "REPAIRED").
//!
//! Text, one record a line, and a checksum line last:
//! ```text
//! ataman-repaired 1
//! <version> <last_started_ms> <last_ended_ms> <previous_started_ms|-> <previous_ended_ms|-> <peer URL>
//! crc32c <8 lowercase hex digits: CRC-32C of every byte before this line>
//! ```
//! Written to `REPAIRED.tmp`, fsynced, renamed over `REPAIRED`, and the
//! directory fsynced: a reader sees the old records or the new ones. A
//! file that does not parse or whose checksum differs is an error naming
//! the file; the node then starts as if nothing had been repaired (the
//! safe default: no tombstone is collected until new rounds complete).

use super::repaired::{PeerRepairs, RECORDS_MAX, Repairs, Session};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "REPAIRED";
/// The temporary file a new version is written to before the rename.
pub const TEMP_NAME: &str = "REPAIRED.tmp";
/// The first line.
const HEADER: &str = "ataman-repaired 1";
/// The longest file read: every record with a URL of 1 KiB.
pub const FILE_BYTES_MAX: usize = RECORDS_MAX * 1200 + 64;

/// The file's bytes for `repairs`.
pub fn encode(repairs: &Repairs) -> Vec<u8> {
    let mut out = format!("{HEADER}\n");
    for (url, version, p) in repairs.iter() {
        let (ps, pe) = p.previous.map_or(("-".to_owned(), "-".to_owned()), |s| {
            (s.started_ms.to_string(), s.ended_ms.to_string())
        });
        out.push_str(&format!(
            "{version} {} {} {ps} {pe} {url}\n",
            p.last.started_ms, p.last.ended_ms
        ));
    }
    let crc = crc32c::crc32c(out.as_bytes());
    out.push_str(&format!("crc32c {crc:08x}\n"));
    out.into_bytes()
}

/// The records in `bytes`, or why they cannot be trusted.
pub fn decode(bytes: &[u8]) -> Result<Repairs, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let body_end = text
        .trim_end_matches('\n')
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or("no checksum line")?;
    let (body, tail) = text.split_at(body_end);
    let expected = tail
        .strip_prefix("crc32c ")
        .and_then(|t| t.strip_suffix('\n'))
        .filter(|h| h.len() == 8)
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("the last line is not `crc32c <8 hex digits>`")?;
    let got = crc32c::crc32c(body.as_bytes());
    if got != expected {
        return Err(format!(
            "checksum mismatch: computed {got:08x}, the file says {expected:08x}"
        ));
    }
    let mut lines = body.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("the first line is not `{HEADER}`"));
    }
    let mut repairs = Repairs::default();
    for (i, line) in lines.enumerate() {
        let bad = |why: &str| format!("record {}: {why}: {line:?}", i + 1);
        let mut f = line.splitn(6, ' ');
        let mut num = |what: &str| -> Result<Option<u64>, String> {
            match f.next() {
                Some("-") => Ok(None),
                Some(t) => t.parse().map(Some).map_err(|_| bad(what)),
                None => Err(bad("too few fields")),
            }
        };
        let version = num("version")?.ok_or_else(|| bad("version"))?;
        let last_started = num("last start")?.ok_or_else(|| bad("last start"))?;
        let last_ended = num("last end")?.ok_or_else(|| bad("last end"))?;
        let previous = match (num("previous start")?, num("previous end")?) {
            (Some(started_ms), Some(ended_ms)) => Some(Session {
                started_ms,
                ended_ms,
            }),
            (None, None) => None,
            _ => return Err(bad("previous session half given")),
        };
        let url = f
            .next()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| bad("no URL"))?;
        let last = Session {
            started_ms: last_started,
            ended_ms: last_ended,
        };
        if !repairs.restore(url.to_owned(), version, PeerRepairs { last, previous }) {
            return Err(bad("more records than RECORDS_MAX"));
        }
    }
    Ok(repairs)
}

/// Writes `repairs` to `dir/REPAIRED`, atomically and durably.
pub fn write(dir: &Path, repairs: &Repairs) -> std::io::Result<()> {
    let temp = dir.join(TEMP_NAME);
    let mut file = File::create(&temp)?;
    file.write_all(&encode(repairs))?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join(FILE_NAME))?;
    File::open(dir)?.sync_all()
}

/// The records in `dir/REPAIRED`: empty when there is no file; an error
/// naming the file when it cannot be read or trusted.
pub fn read(dir: &Path) -> Result<Repairs, String> {
    let path = dir.join(FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Repairs::default()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if bytes.len() > FILE_BYTES_MAX {
        return Err(format!(
            "{} holds {} bytes, more than {FILE_BYTES_MAX}",
            path.display(),
            bytes.len()
        ));
    }
    decode(&bytes).map_err(|e| format!("{} cannot be trusted: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Repairs {
        let mut r = Repairs::default();
        r.record(
            "http://127.0.0.1:1",
            3,
            Session {
                started_ms: 10,
                ended_ms: 20,
            },
        );
        r.record(
            "http://127.0.0.1:1",
            3,
            Session {
                started_ms: 30,
                ended_ms: 40,
            },
        );
        r.record(
            "http://127.0.0.1:2",
            3,
            Session {
                started_ms: 30,
                ended_ms: 45,
            },
        );
        r
    }

    /// Written records read back; no file reads as none; the temporary
    /// file is gone after a write.
    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Ok(Repairs::default()));
        write(dir.path(), &sample()).unwrap();
        assert_eq!(read(dir.path()), Ok(sample()));
        assert!(!dir.path().join(TEMP_NAME).exists());
        write(dir.path(), &Repairs::default()).unwrap();
        assert_eq!(read(dir.path()), Ok(Repairs::default()));
    }

    /// Any flipped byte, a cut file, a foreign header or a bad field is an
    /// error naming the file, never a guess.
    #[test]
    fn corrupt_file_is_an_error() {
        let bytes = encode(&sample());
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            assert!(decode(&b).is_err(), "byte {i} flipped");
        }
        for cut in 0..bytes.len() - 1 {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let unsigned = |body: &str| {
            let crc = crc32c::crc32c(body.as_bytes());
            format!("{body}crc32c {crc:08x}\n").into_bytes()
        };
        assert!(decode(&unsigned("ataman-repaired 1\n")).is_ok());
        for body in [
            "ataman-repaired 2\n",
            "ataman-repaired 1\n1 2 3 - 4 http://a\n",
            "ataman-repaired 1\n1 x 3 - - http://a\n",
            "ataman-repaired 1\n1 2 3 - -\n",
            "ataman-repaired 1\n1 2\n",
        ] {
            assert!(decode(&unsigned(body)).is_err(), "{body:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"junk").unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.contains("REPAIRED cannot be trusted"), "{e}");
    }
}
