//! Reading a checkpoint's versions back (a restore's source,
//! docs/BACKUP.md, "Restore"): its engine directory opened from a
//! temporary copy (the engine's open writes, and the backup is never
//! written), every entry read in key order, tombstones and deadlines
//! included (each block's checksum is checked as it is read).

use super::verify::{copy_tree, temp_copy_dir};
use crate::peer::frame::Stamped;
use ataman_engine::{Db, Options};
use std::path::Path;

/// Calls `sink` with every version of the checkpoint `dir` (its `data/`),
/// in key order, until it fails; the count read. The copy is removed.
pub fn each_version(
    dir: &Path,
    sink: &mut dyn FnMut(Vec<u8>, Stamped) -> Result<(), String>,
) -> Result<u64, String> {
    let copy = temp_copy_dir(dir);
    let result = copy_tree(&dir.join("data"), &copy)
        .map_err(|e| format!("cannot copy to {}: {e}", copy.display()))
        .and_then(|()| read_all(&copy, sink));
    let _ = std::fs::remove_dir_all(&copy);
    result
}

fn read_all(
    dir: &Path,
    sink: &mut dyn FnMut(Vec<u8>, Stamped) -> Result<(), String>,
) -> Result<u64, String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", dir.display());
    let db = Db::open(dir, Options::default()).map_err(|e| at(&e))?;
    let mut n = 0u64;
    let read = (|| {
        for entry in db.scan(b"", None, true).map_err(|e| at(&e))? {
            let (key, entry) = entry.map_err(|e| at(&e))?;
            sink(key, Stamped::from_entry(entry))?;
            n += 1;
        }
        Ok(())
    })();
    let closed = db.close().map_err(|e| at(&e));
    read.and(closed).map(|()| n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_engine::WriteBatch;

    /// A data directory written with a value, a deadline and a tombstone
    /// reads back as those three versions, with their own timestamps.
    #[test]
    fn versions_come_back_with_their_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let db = Db::open(&data, Options::default()).unwrap();
        let mut batch = WriteBatch::new();
        Stamped::value(11, b"one".to_vec()).add_to(&mut batch, b"a");
        // A deadline in 2096 (the engine bounds deadlines to 48 bits of ms).
        let far = 4_000_000_000_000;
        Stamped {
            ts: 12,
            value: Some(b"two".to_vec()),
            deadline_ms: Some(far),
        }
        .add_to(&mut batch, b"b");
        Stamped::tombstone(13).add_to(&mut batch, b"c");
        db.write(batch, ataman_engine::Durability::Complete)
            .unwrap();
        db.close().unwrap();
        let mut got = Vec::new();
        let n = each_version(dir.path(), &mut |k, v| {
            got.push((k, v));
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 3);
        assert_eq!(got[0], (b"a".to_vec(), Stamped::value(11, b"one".to_vec())));
        assert_eq!(got[1].1.deadline_ms, Some(far));
        assert_eq!(got[2], (b"c".to_vec(), Stamped::tombstone(13)));
        assert!(data.join("MANIFEST").exists());
    }
}
