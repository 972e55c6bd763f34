//! A clock stepped back after compaction cut an expired value off: the
//! version still reads as expired (a tombstone at its timestamp), never as
//! a live empty value. Found by the simulation (clock skew faults step a
//! node's clock either way): compaction used to keep the cut-off version's
//! deadline, which a clock behind it read as not yet expired.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Options, VirtualClock, WalMode, WriteBatch};

const START_MS: u64 = 1_700_000_000_000;
const TTL_MS: u64 = 1_000;
/// How far the clock steps back after the compaction.
const STEP_BACK_MS: u64 = 2_000;

#[test]
fn a_cut_off_expired_value_stays_expired_when_the_clock_steps_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = VirtualClock::new(START_MS);
    let opts = Options {
        wal_mode: WalMode::Write,
        clock: clock.clone() as _,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let ts = timestamp_from_millis(START_MS, 0);
    let mut batch = WriteBatch::new();
    batch.put_expiring(b"k", b"value", ts, START_MS + TTL_MS);
    db.write(batch, Durability::Complete).unwrap();
    db.compact().unwrap();
    assert_eq!(
        db.get(b"k").unwrap().unwrap().value.as_deref(),
        Some(&b"value"[..])
    );

    clock.advance_ms(TTL_MS);
    db.compact().unwrap();
    assert_eq!(db.metrics().expired_seen.get(), 1);
    clock.set_ms(START_MS + TTL_MS - STEP_BACK_MS);
    let entry = db.get(b"k").unwrap().unwrap();
    assert_eq!((entry.ts, entry.value), (ts, None));
    let scanned: Vec<_> = db
        .scan(b"", None, true)
        .unwrap()
        .map(|item| item.unwrap())
        .collect();
    assert_eq!(scanned.len(), 1);
    assert_eq!(scanned[0].1.value, None);
}
