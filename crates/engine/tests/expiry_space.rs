//! Space comes back through compaction after a mass expiry: expired values
//! lose their bytes at the first compaction past their deadline (kept as
//! tombstones), and are gone at the bottom level past the tombstone grace;
//! plain values beside them are untouched. Prints the figures
//! (`--nocapture`) for docs/BENCHMARKS.md.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Options, VirtualClock, WalMode, WriteBatch};
use std::time::Duration;

const START_MS: u64 = 1_700_000_000_000;
const EXPIRING: u64 = 20_000;
const PLAIN: u64 = 1_000;
const VALUE_BYTES: usize = 200;
const TTL_MS: u64 = 1_000;
const GRACE_MS: u64 = 60_000;
const PER_BATCH: u64 = 500;

fn table_bytes_and_entries(db: &Db) -> (u64, u64) {
    let s = db.stats();
    (s.level_bytes.iter().sum(), s.level_entries.iter().sum())
}

#[test]
fn mass_expiry_then_compaction_reclaims_the_space() {
    let dir = tempfile::tempdir().unwrap();
    let clock = VirtualClock::new(START_MS);
    let opts = Options {
        wal_mode: WalMode::Write,
        tombstone_grace: Duration::from_millis(GRACE_MS),
        clock: clock.clone() as _,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    // Incompressible values, each its own (tables are LZ4-compressed).
    let mut rng = ataman_testkit::rng::Rng::new(7);
    let mut plain_values = Vec::new();
    let ts = timestamp_from_millis(START_MS, 0);
    let mut n = 0;
    while n < EXPIRING + PLAIN {
        let mut batch = WriteBatch::new();
        for i in n..(n + PER_BATCH).min(EXPIRING + PLAIN) {
            let key = format!("key{i:08}");
            let value = rng.bytes(VALUE_BYTES);
            if i < EXPIRING {
                batch.put_expiring(key.as_bytes(), &value, ts, START_MS + TTL_MS);
            } else {
                batch.put(key.as_bytes(), &value, ts);
                plain_values.push(value);
            }
        }
        db.write(batch, Durability::Complete).unwrap();
        n += PER_BATCH;
    }
    db.compact().unwrap();
    let (full_bytes, full_entries) = table_bytes_and_entries(&db);
    assert_eq!(full_entries, EXPIRING + PLAIN);

    // Past the deadline: every expiring key reads as absent at once.
    clock.advance_ms(TTL_MS);
    assert_eq!(db.get(b"key00000000").unwrap().unwrap().value, None);
    db.compact().unwrap();
    let (tomb_bytes, tomb_entries) = table_bytes_and_entries(&db);
    assert_eq!(tomb_entries, EXPIRING + PLAIN, "kept as tombstones");
    assert_eq!(db.metrics().expired_seen.get(), EXPIRING);
    assert_eq!(db.metrics().expired_dropped.get(), 0);
    assert!(
        tomb_bytes * 5 < full_bytes,
        "values cut: {tomb_bytes} of {full_bytes} bytes"
    );

    // Past the grace: the bottom level drops them.
    clock.advance_ms(GRACE_MS);
    db.compact().unwrap();
    let (left_bytes, left_entries) = table_bytes_and_entries(&db);
    assert_eq!(left_entries, PLAIN);
    assert_eq!(db.metrics().expired_dropped.get(), EXPIRING);
    for (i, value) in (EXPIRING..).zip(&plain_values) {
        let key = format!("key{i:08}");
        assert_eq!(
            db.get(key.as_bytes()).unwrap().unwrap().value.as_ref(),
            Some(value)
        );
    }
    assert_eq!(db.get(b"key00000000").unwrap(), None);
    eprintln!(
        "mass expiry: {EXPIRING} expiring + {PLAIN} plain values of {VALUE_BYTES} B: \
         tables {full_bytes} B before; {tomb_bytes} B after the deadline (kept as tombstones, \
         {:.1}%); {left_bytes} B past the grace ({:.1}%)",
        100.0 * tomb_bytes as f64 / full_bytes as f64,
        100.0 * left_bytes as f64 / full_bytes as f64
    );
    db.close().unwrap();
}
