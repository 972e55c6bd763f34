//! The harness's seeded random numbers: SplitMix64, so a seed gives the
//! same fault schedule and the same operations on every machine and with
//! every version of every crate (a generator from a library may change its
//! stream between releases; this one never does).

/// A SplitMix64 generator (Steele, Lea, Flood 2014): 64 bits of state,
/// every seed fine (zero too).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent stream for `part` of a run (a client, the fault
    /// schedule), derived from the run's seed.
    pub fn derive(seed: u64, part: u64) -> Rng {
        let mut base = Rng::new(seed ^ part.wrapping_mul(0xd1b5_4a32_d192_ed03));
        Rng::new(base.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
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
        // Multiply-shift: unbiased enough for test choices, no division.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A value in `low..=high` (`low` when `high < low`).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.below(high - low + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len() as u64) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream is fixed: the first outputs of seed 0 are SplitMix64's
    /// published ones, so a seed replays the same run forever.
    #[test]
    fn stream_is_the_reference_one() {
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let (mut a, mut b) = (Rng::derive(7, 1), Rng::derive(7, 2));
        assert_ne!(a.next_u64(), b.next_u64());
        let mut r = Rng::new(42);
        for _ in 0..1000 {
            assert!(r.below(3) < 3);
            let x = r.between(5, 9);
            assert!((5..=9).contains(&x));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.between(4, 2), 4);
    }
}
