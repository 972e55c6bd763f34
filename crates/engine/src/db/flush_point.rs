//! Where this engine flushes its memtables: at `Options::memtable_bytes_max`,
//! less a jitter fixed when the engine opens.
//!
//! Replicas take the same writes. With one memtable size they fill and
//! flush in the same second, and so reach the L0 trigger and run their
//! L0→L1 compactions together: every replica of a key is slow at once,
//! and a quorum (`ack` of `from`) cannot route around a slow one; nodes
//! that share a host add their bursts up. Each engine flushes at a point
//! in `[max × (1 − j), max]` (`Options::memtable_flush_jitter_percent` =
//! j × 100) instead, so the nodes' flushes and compactions drift apart
//! within a few memtables. Where the point falls in that span:
//! - with `Options::memtable_flush_slot` (a node passes its place in
//!   `--cluster`), at the slot's place in the golden-ratio sequence
//!   (0, 0.618, 0.236, 0.854, 0.472, …): any two slots of a small cluster
//!   are at least several percent of `max` apart, so no two nodes start
//!   in step;
//! - without, at a random place drawn at open (two engines may then draw
//!   close points, and stay nearly in step for a while).
//!
//! A point redrawn for every memtable would not do it: the nodes' phases
//! would only random-walk apart, hundreds of memtables later. Fixed
//! points keep drifting against each other, so over a long run two
//! nodes' compactions still meet as often as random phases would; what
//! the points remove is the lock-step.
//!
//! Pure rules: values in, a size out.

/// Fractions of the span are in millionths.
const MILLION: u64 = 1_000_000;

/// 1/φ in millionths: consecutive slots land 0.618 of the span apart, modulo 1.
const GOLDEN_MILLIONTHS: u64 = 618_034;

/// The memtable size an engine flushes at: `max` less `fraction`
/// millionths of `jitter_percent`% of it. `jitter_percent` 0 gives
/// `max`; it is capped at 90.
pub fn flush_point(max: usize, jitter_percent: u32, fraction: u64) -> usize {
    let span = max as u128 * u128::from(jitter_percent.min(90)) / 100;
    max - (span * u128::from(fraction.min(MILLION)) / u128::from(MILLION)) as usize
}

/// Where slot `slot` falls in the span, in millionths: the golden-ratio sequence.
pub fn slot_fraction(slot: u64) -> u64 {
    slot.wrapping_mul(GOLDEN_MILLIONTHS) % MILLION
}

/// A random place in the span, in millionths, from `seed`.
pub fn random_fraction(seed: u64) -> u64 {
    mix(seed) % (MILLION + 1)
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
            assert_eq!(flush_point(MAX, 0, random_fraction(seed)), MAX);
            assert_eq!(flush_point(MAX, 0, slot_fraction(seed)), MAX);
        }
    }

    #[test]
    fn random_points_stay_in_range_and_spread_over_it() {
        let points: Vec<usize> = (0..2000)
            .map(|seed| flush_point(MAX, 20, random_fraction(seed)))
            .collect();
        let low = MAX - MAX / 5;
        assert!(points.iter().all(|&p| (low..=MAX).contains(&p)));
        // Every fifth of the range is hit, none by more than twice its share.
        let mut fifths = [0usize; 5];
        for &p in &points {
            fifths[((p - low) * 5 / (MAX / 5 + 1)).min(4)] += 1;
        }
        assert!(fifths.iter().all(|&n| n > 200 && n < 800), "{fifths:?}");
    }

    /// The slots of any cluster up to 8 nodes are at least 1.6% of the
    /// maximum apart (at 20%), the first three at least 4.5%.
    #[test]
    fn slots_are_spread_apart() {
        let gap = |n: u64| {
            let mut points: Vec<usize> = (0..n)
                .map(|slot| flush_point(MAX, 20, slot_fraction(slot)))
                .collect();
            points.sort_unstable();
            points.windows(2).map(|w| w[1] - w[0]).min().unwrap()
        };
        assert!(gap(3) * 1000 >= MAX * 45, "{}", gap(3));
        for n in 2..=8 {
            assert!(gap(n) * 1000 >= MAX * 16, "{n} slots: {}", gap(n));
        }
        assert_eq!(flush_point(MAX, 20, slot_fraction(0)), MAX);
    }

    #[test]
    fn fresh_seeds_differ() {
        let seeds: std::collections::HashSet<u64> = (0..100).map(|_| fresh_seed()).collect();
        assert_eq!(seeds.len(), 100);
    }

    /// A real engine rotates its memtable at its own point: its slot's,
    /// or one drawn at random.
    #[test]
    fn an_engine_flushes_at_its_point() {
        use crate::{Db, Durability, Options, WalMode};
        let max = 1 << 20;
        let opts = |slot| Options {
            wal_mode: WalMode::None,
            memtable_bytes_max: max,
            memtable_flush_jitter_percent: 50,
            memtable_flush_slot: slot,
            background_compaction: false,
            ..Options::default()
        };
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (
            Db::open(dir_a.path(), opts(Some(1))).unwrap(),
            Db::open(dir_b.path(), opts(None)).unwrap(),
        );
        let point = a.shared_for_tests().flush_at;
        assert_eq!(point, flush_point(max, 50, slot_fraction(1)));
        assert!(point < max * 7 / 10, "{point}");
        let drawn = b.shared_for_tests().flush_at;
        assert!(
            (max / 2..=max).contains(&drawn) && drawn != point,
            "{drawn}"
        );
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
        assert!((0..100).all(|seed| flush_point(MAX, 500, random_fraction(seed)) >= MAX / 10));
        assert_eq!(flush_point(0, 20, 500_000), 0);
        assert_eq!(flush_point(MAX, 20, u64::MAX), MAX - MAX / 5);
    }
}
