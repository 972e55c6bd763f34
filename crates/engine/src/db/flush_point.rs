//! Where this engine flushes its memtables: at `Options::memtable_bytes_max`,
//! less a jitter drawn once when the engine opens.
//!
//! Replicas take the same writes. With one memtable size they fill and
//! flush in the same second, and so reach the L0 trigger and run their
//! L0→L1 compactions together: every replica of a key is slow at once,
//! and a quorum (`ack` of `from`) cannot route around a slow one; nodes
//! that share a host add their bursts up. With each engine's flush point
//! drawn from `[max × (1 − j), max]` (`Options::memtable_flush_jitter_percent`
//! = j × 100), the nodes flush at different sizes, so their flushes and
//! compactions drift apart within a few memtables. A point redrawn per
//! memtable would not do it: the phases would only random-walk apart,
//! hundreds of memtables later.
//!
//! A pure rule: values in, a size out.

/// The memtable size this engine flushes at: `max` less up to
/// `jitter_percent`% of it, drawn from `seed`. `jitter_percent` 0 gives
/// `max`; it is capped at 90.
pub fn flush_point(max: usize, jitter_percent: u32, seed: u64) -> usize {
    let span = (max as u128 * u128::from(jitter_percent.min(90)) / 100) as u64;
    if span == 0 {
        return max;
    }
    max - (mix(seed) % (span + 1)) as usize
}

/// A seed that differs in every process and every open.
pub fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// SplitMix64's finalizer: every input bit moves every output bit.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 64 << 20;

    #[test]
    fn no_jitter_is_the_maximum() {
        for seed in 0..100 {
            assert_eq!(flush_point(MAX, 0, seed), MAX);
        }
    }

    #[test]
    fn points_stay_in_range_and_spread_over_it() {
        let points: Vec<usize> = (0..2000).map(|seed| flush_point(MAX, 20, seed)).collect();
        let low = MAX - MAX / 5;
        assert!(points.iter().all(|&p| (low..=MAX).contains(&p)));
        // Every fifth of the range is hit, none by more than twice its share.
        let mut fifths = [0usize; 5];
        for &p in &points {
            fifths[((p - low) * 5 / (MAX / 5 + 1)).min(4)] += 1;
        }
        assert!(fifths.iter().all(|&n| n > 200 && n < 800), "{fifths:?}");
    }

    #[test]
    fn fresh_seeds_differ() {
        let seeds: std::collections::HashSet<u64> = (0..100).map(|_| fresh_seed()).collect();
        assert_eq!(seeds.len(), 100);
    }

    /// A real engine rotates its memtable at its own point, below the
    /// maximum, and two engines draw different points.
    #[test]
    fn an_engine_flushes_at_its_point() {
        use crate::{Db, Durability, Options, WalMode};
        let max = 1 << 20;
        let opts = || Options {
            wal_mode: WalMode::None,
            memtable_bytes_max: max,
            memtable_flush_jitter_percent: 50,
            background_compaction: false,
            ..Options::default()
        };
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (
            Db::open(dir_a.path(), opts()).unwrap(),
            Db::open(dir_b.path(), opts()).unwrap(),
        );
        let point = a.shared_for_tests().flush_at;
        assert!((max / 2..=max).contains(&point), "{point}");
        assert_ne!(point, b.shared_for_tests().flush_at);
        // Writes 1 KiB values until the memtable is rotated (a write that
        // finds it at or past the point freezes it first): the last size
        // seen before had just reached the point.
        let mut before = 0;
        for i in 0u64..4096 {
            a.put(&i.to_be_bytes(), &[7u8; 1024], i + 1, Durability::None)
                .unwrap();
            let now = a.stats().memtable_bytes as usize;
            if now < before {
                break;
            }
            before = now;
        }
        assert!(
            before >= point && before < point + 1200,
            "{before} against {point} (max {max})"
        );
    }

    #[test]
    fn jitter_is_capped() {
        assert!((0..100).all(|seed| flush_point(MAX, 500, seed) >= MAX / 10));
        assert_eq!(flush_point(0, 20, 3), 0);
    }
}
