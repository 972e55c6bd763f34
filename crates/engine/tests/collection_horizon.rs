//! Collection by a horizon (`Options::collection_horizon`, repair-based
//! collection, docs/decisions/0007): a tombstone goes once its key's
//! horizon reaches it, whatever the grace says; one past the grace that
//! its key's horizon holds back stays, and is counted as waiting.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Options, VirtualClock, WalMode, WriteBatch};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const START_MS: u64 = 1_700_000_000_000;
const GRACE_MS: u64 = 1_000;

/// Keys `a` and `b` are deleted at `START_MS`, `c` is a live value. The
/// horizon of `a` is what the test sets; `b`'s is `START_MS` (repaired at
/// once); `c`'s 0. Past the grace a full compaction drops `b` only and
/// counts `a` as waiting; once `a`'s horizon reaches its tombstone, the
/// next one drops `a` too.
#[test]
fn tombstones_go_when_their_horizon_reaches_them_not_at_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let clock = VirtualClock::new(START_MS);
    let horizon_a = Arc::new(AtomicU64::new(0));
    let h = Arc::clone(&horizon_a);
    let d = Db::open(
        dir.path(),
        Options {
            wal_mode: WalMode::Write,
            tombstone_grace: Duration::from_millis(GRACE_MS),
            clock: Arc::clone(&clock) as _,
            collection_horizon: Some(Arc::new(move |k: &[u8]| match k {
                b"a" => h.load(Ordering::Relaxed),
                b"b" => START_MS,
                _ => 0,
            })),
            ..Options::default()
        },
    )
    .unwrap();
    let mut batch = WriteBatch::new();
    batch.delete(b"a", timestamp_from_millis(START_MS, 1));
    batch.delete(b"b", timestamp_from_millis(START_MS, 2));
    batch.put(b"c", b"v", timestamp_from_millis(START_MS, 3));
    d.write(batch, Durability::Complete).unwrap();
    let m = d.metrics();
    // Within the grace, `b` is repaired: it goes at once.
    d.compact().unwrap();
    assert_eq!(
        m.tombstones_dropped.get(),
        1,
        "b repaired, dropped within the grace"
    );
    assert_eq!(
        m.tombstones_waiting_past_grace.get(),
        0,
        "a within the grace"
    );
    // Past the grace, `a` is not repaired: kept and counted.
    clock.advance_ms(10 * GRACE_MS);
    d.compact().unwrap();
    assert_eq!(
        m.tombstones_dropped.get(),
        1,
        "a collected on the grace alone"
    );
    assert!(m.tombstones_waiting_past_grace.get() >= 1);
    assert_eq!(d.stats().level_files.iter().sum::<usize>(), 1);
    // One millisecond short of its tombstone: still kept.
    horizon_a.store(START_MS - 1, Ordering::Relaxed);
    d.compact().unwrap();
    assert_eq!(m.tombstones_dropped.get(), 1);
    horizon_a.store(START_MS, Ordering::Relaxed);
    d.compact().unwrap();
    assert_eq!(m.tombstones_dropped.get(), 2, "a repaired, then dropped");
    assert_eq!(
        d.get(b"c").unwrap().and_then(|e| e.value),
        Some(b"v".to_vec())
    );
    assert!(d.get(b"a").unwrap().is_none_or(|e| e.value.is_none()));
}
