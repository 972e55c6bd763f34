//! Conditional writes: a batch applied only if one key was not written
//! since the caller read it (optimistic concurrency for a node's atomic
//! read-modify-write, docs/decisions/0008-linearizable-keys.md).
//!
//! The caller reads the key at read view `read_seq` ([`super::Db::get_at`])
//! and learns its newest version's timestamp (`expected_ts`; `None` when the
//! key has no version at all). It computes the new value and submits the
//! batch with a [`Condition`]. The writer thread checks it between two
//! batches, against the memtables only (it never touches the disk):
//!
//! # Rules
//! 1. **Nothing left the memtables since the read.** If a memtable holding
//!    a write with a sequence number above `read_seq` was flushed, or an
//!    ingest installed versions straight into tables, the check cannot see
//!    them: the write is refused ([`crate::Error::Conflict`]). Conservative:
//!    the caller reads again and retries. An ingest then takes one sequence
//!    number of its own through the writer (no entry holds it) before it
//!    returns, so a read after it reads at or above its mark and passes
//!    without waiting for some other write.
//! 2. **The key's newest version in the memtables is the one read.** The
//!    newest version of the key over the memtables (by the read order,
//!    [`crate::key::compare_versions`]) must have timestamp `expected_ts`;
//!    with no version of the key in the memtables, the read must have found
//!    none there either, i.e. `expected_ts` is `None` or names a version in
//!    a table, which rule 1 says nothing has overtaken: so the check passes
//!    only if no memtable version exists or its timestamp is `expected_ts`.
//!    A later write with a lower timestamp (a late replica write) does not
//!    change what the key reads, and does not fail the check.
//!
//! Sound because timestamps name versions: two versions of one key with
//! one timestamp are one write (the node's clock stamps each write once).
//! A chain of conditional writes from one caller may expect the timestamp
//! of the previous one still in flight: they are applied in submission
//! order, so the check sees it (or the previous one failed, and so does
//! this one).

use crate::key::{self, Kind, Timestamp};
use crate::version::SuperVersion;

/// Apply the batch only if `key` is unchanged since the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The key read.
    pub key: Vec<u8>,
    /// The timestamp of the newest version read (`None`: none).
    pub expected_ts: Option<Timestamp>,
    /// The read view's sequence number the read ran at.
    pub read_seq: u64,
}

/// Why a condition failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// Writes after the read left the memtables (rule 1).
    LeftMemtables,
    /// The key's newest version is not the one read (rule 2).
    Overtaken,
}

/// Checks `condition` against `sv`'s memtables; `left_seq` is the highest
/// sequence number that left the memtables (flushed or ingested past).
pub fn check(sv: &SuperVersion, left_seq: u64, condition: &Condition) -> Result<(), Failed> {
    if left_seq > condition.read_seq {
        return Err(Failed::LeftMemtables);
    }
    let mut best: Option<(Timestamp, Kind, u64)> = None;
    let mut offer = |found: Option<crate::memtable::Found>| {
        if let Some(f) = found {
            let v = (f.ts, f.kind, f.seq);
            if best.is_none_or(|b| key::compare_versions(v, b) == std::cmp::Ordering::Greater) {
                best = Some(v);
            }
        }
    };
    if !sv.mem.is_empty() {
        offer(sv.mem.get(&condition.key, u64::MAX));
    }
    for imm in &sv.imms {
        offer(imm.get(&condition.key, u64::MAX));
    }
    match best {
        None => Ok(()),
        Some((ts, _, _)) if Some(ts) == condition.expected_ts => Ok(()),
        Some(_) => Err(Failed::Overtaken),
    }
}

#[cfg(test)]
mod tests {
    use super::Condition;
    use crate::options::{Durability, Options, WalMode};
    use crate::{Db, Error, Submission, WriteBatch};

    fn open(dir: &std::path::Path) -> Db {
        let opts = Options {
            wal_mode: WalMode::Write,
            ..Options::default()
        };
        Db::open(dir, opts).unwrap()
    }

    /// Submits `value` at `ts` under `condition`; the engine's answer.
    fn put_if(db: &Db, value: &[u8], ts: u64, condition: Condition) -> crate::Result<u64> {
        let mut batch = WriteBatch::new();
        batch.put(&condition.key.clone(), value, ts);
        let (tx, rx) = std::sync::mpsc::channel();
        let refused = db.submit_many(vec![Submission {
            batch,
            durability: Durability::Complete,
            done: Box::new(move |r| {
                let _ = tx.send(r);
            }),
            condition: Some(condition),
        }]);
        assert!(refused.is_empty());
        rx.recv().unwrap()
    }

    /// A read-then-write passes when nothing came between, and is refused
    /// after a write that overtook the version read; a late write with an
    /// older timestamp does not fail it.
    #[test]
    fn a_conditional_write_fails_only_when_the_key_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let db = open(tmp.path());
        let (entry, seq) = db.get_at(b"k").unwrap();
        assert!(entry.is_none());
        let fresh = |expected_ts, read_seq| Condition {
            key: b"k".to_vec(),
            expected_ts,
            read_seq,
        };
        put_if(&db, b"1", 10, fresh(None, seq)).unwrap();
        // A second write computed from the same (stale) read is refused.
        let stale = put_if(&db, b"1", 11, fresh(None, seq));
        assert!(matches!(stale, Err(Error::Conflict)), "{stale:?}");
        let (entry, seq) = db.get_at(b"k").unwrap();
        assert_eq!(entry.map(|e| e.ts), Some(10));
        // A late write with an older timestamp does not change what k reads.
        db.put(b"k", b"old", 5, Durability::Complete).unwrap();
        put_if(&db, b"2", 12, fresh(Some(10), seq)).unwrap();
        // Chained: expects the one just written, without a new read.
        put_if(&db, b"3", 13, fresh(Some(12), seq)).unwrap();
        db.put(b"k", b"x", 20, Durability::Complete).unwrap();
        let overtaken = put_if(&db, b"4", 14, fresh(Some(13), seq));
        assert!(matches!(overtaken, Err(Error::Conflict)), "{overtaken:?}");
        assert_eq!(
            db.get(b"k").unwrap().and_then(|e| e.value),
            Some(b"x".to_vec())
        );
    }

    /// Once writes after the read left the memtables (a flush), the check
    /// cannot see them: refused, and a fresh read passes.
    #[test]
    fn a_flush_after_the_read_fails_the_condition() {
        let tmp = tempfile::tempdir().unwrap();
        let db = open(tmp.path());
        let (_, seq) = db.get_at(b"k").unwrap();
        db.put(b"other", b"v", 1, Durability::Complete).unwrap();
        db.flush().unwrap();
        let condition = Condition {
            key: b"k".to_vec(),
            expected_ts: None,
            read_seq: seq,
        };
        let refused = put_if(&db, b"1", 2, condition.clone());
        assert!(matches!(refused, Err(Error::Conflict)), "{refused:?}");
        let (_, seq) = db.get_at(b"k").unwrap();
        put_if(
            &db,
            b"1",
            3,
            Condition {
                read_seq: seq,
                ..condition
            },
        )
        .unwrap();
        assert_eq!(
            db.get(b"k").unwrap().and_then(|e| e.value),
            Some(b"1".to_vec())
        );
    }

    /// An ingest refuses a conditional write that read before it, and one
    /// that reads after it passes with no other write in between (a layout
    /// move's copy must not leave the node's read-modify-writes refused
    /// until a plain write arrives).
    #[test]
    fn a_read_after_an_ingest_passes_with_no_other_write() {
        let tmp = tempfile::tempdir().unwrap();
        let db = open(tmp.path());
        db.put(b"a", b"v", 1, Durability::Complete).unwrap();
        let (_, before) = db.get_at(b"k").unwrap();
        let mut copied = WriteBatch::new();
        copied.put(b"k", b"7", 5);
        db.ingest(&copied).unwrap().expect("a free level");
        let fresh = |read_seq| Condition {
            key: b"k".to_vec(),
            expected_ts: None,
            read_seq,
        };
        let stale = put_if(&db, b"1", 6, fresh(before));
        assert!(matches!(stale, Err(Error::Conflict)), "{stale:?}");
        let (entry, after) = db.get_at(b"k").unwrap();
        let entry = entry.expect("the ingested version");
        let read = Condition {
            expected_ts: Some(entry.ts),
            ..fresh(after)
        };
        put_if(&db, b"8", 7, read).unwrap();
        assert_eq!(
            db.get(b"k").unwrap().and_then(|e| e.value),
            Some(b"8".to_vec())
        );
    }
}
