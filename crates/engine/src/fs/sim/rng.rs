//! A tiny seeded generator (SplitMix64) for crash images.
//!
//! The simulator lives in the library, where `rand` is not a dependency;
//! crash images only need a deterministic, well-mixed stream of numbers,
//! not cryptographic or statistical quality.

/// SplitMix64: a 64-bit state advanced by a constant, output mixed.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0). The modulo bias is irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A number in `lo..=hi`; `lo` when `hi <= lo`.
    pub fn in_range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream is fixed by the seed, differs between seeds, and stays in range.
    #[test]
    fn deterministic_and_in_range() {
        let a: Vec<u64> = (0..8)
            .scan(SplitMix64::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..8)
            .scan(SplitMix64::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..8)
            .scan(SplitMix64::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut rng = SplitMix64::new(1);
        for _ in 0..1000 {
            assert!((3..=9).contains(&rng.in_range(3, 9)));
            assert!(rng.below(5) < 5);
        }
        assert_eq!(rng.in_range(4, 4), 4);
        assert_eq!(rng.below(0), 0);
    }
}
