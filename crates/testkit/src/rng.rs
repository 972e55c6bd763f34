//! The workspace's one seeded generator: SplitMix64 (Steele, Lea, Flood
//! 2014), written here so its stream belongs to the project. A generator
//! from a library may change its stream between releases; this one never
//! does (the test below pins it), so a seed gives the same crash images,
//! fault schedules, simulated histories and test workloads on every
//! machine and with every version of every crate.
//!
//! Quality: well mixed, not cryptographic; [`Rng::below`] is a
//! multiply-shift, whose bias (below 2^-32 for small bounds) is irrelevant
//! for test choices.

/// A SplitMix64 generator: 64 bits of state, every seed fine (zero too).
#[derive(Debug, Clone)]
pub struct Rng(u64);

/// The constant that advances the state (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
/// Spreads the part number of [`Rng::derive`] over the seed's bits.
const DERIVE_MULTIPLIER: u64 = 0xd1b5_4a32_d192_ed03;

impl Rng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent stream for `part` of a run (a client, the fault
    /// schedule), derived from the run's seed.
    pub fn derive(seed: u64, part: u64) -> Rng {
        let mut base = Rng::new(seed ^ part.wrapping_mul(DERIVE_MULTIPLIER));
        Rng::new(base.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: the high half of a 128-bit product is below `n`.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An index in `0..len`; 0 when `len` is 0.
    pub fn index(&mut self, len: usize) -> usize {
        // usize is at most 64 bits on every supported target, and the
        // result is below `len`, so both conversions are lossless.
        self.below(len as u64) as usize
    }

    /// A value in `low..=high` (`low` when `high <= low`).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        match (high - low).checked_add(1) {
            Some(span) => low + self.below(span),
            None => self.next_u64(),
        }
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.index(items.len()))
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let word = self.next_u64().to_le_bytes();
            let take = word.len().min(len - out.len());
            out.extend_from_slice(&word[..take]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream is pinned: the first outputs of seed 0 are SplitMix64's
    /// published ones, and those of seed 42 and of a derived stream are
    /// written down here, so a change to the generator fails this test.
    #[test]
    fn stream_is_pinned() {
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
        let mut r = Rng::new(42);
        let first: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(first, PINNED_42);
        let mut d = Rng::derive(7, 1);
        assert_eq!(d.next_u64(), PINNED_DERIVED_7_1);
    }

    /// Seed 42's first three outputs.
    const PINNED_42: [u64; 3] = [
        0xbdd7_3226_2feb_6e95,
        0x28ef_e333_b266_f103,
        0x4752_6757_130f_9f52,
    ];
    /// The first output of part 1 of seed 7.
    const PINNED_DERIVED_7_1: u64 = 0xb842_58f5_5889_b9b8;

    /// Every bounded draw stays in its bounds, edge cases included.
    #[test]
    fn draws_stay_in_range() {
        let mut r = Rng::new(42);
        for _ in 0..1000 {
            assert!(r.below(3) < 3);
            assert!((5..=9).contains(&r.between(5, 9)));
            assert!(r.index(4) < 4);
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.index(0), 0);
        assert_eq!(r.between(4, 2), 4);
        assert_eq!(r.between(4, 4), 4);
        let _ = r.between(0, u64::MAX);
        assert!(r.pick::<u8>(&[]).is_none());
        assert_eq!(r.pick(&[9]), Some(&9));
        assert_eq!(r.bytes(13).len(), 13);
        assert!(!r.percent(0));
        assert!(r.percent(100));
    }

    /// Different seeds and different parts give different streams.
    #[test]
    fn seeds_and_parts_differ() {
        let draw = |mut r: Rng| (0..8).map(|_| r.next_u64()).collect::<Vec<_>>();
        assert_eq!(draw(Rng::new(7)), draw(Rng::new(7)));
        assert_ne!(draw(Rng::new(7)), draw(Rng::new(8)));
        assert_ne!(draw(Rng::derive(7, 1)), draw(Rng::derive(7, 2)));
    }
}
