//! A seeded Zipf workload generator (key `i` of `n` drawn with weight
//! `1 / i^s`), for the hot-key summary's tests and benchmarks: the same
//! seed gives the same stream on every machine.

/// Draws key indexes `1..=n` with Zipf weights.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
    state: u64,
}

impl Zipf {
    /// `n` keys (at least 1), exponent `s`, seed `seed`.
    pub fn new(n: usize, s: f64, seed: u64) -> Self {
        assert!(n >= 1);
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for i in 1..=n {
            total += 1.0 / (i as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf, state: seed }
    }

    /// The next draw, in `1..=n`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let u = (splitmix64(&mut self.state) >> 11) as f64 / (1u64 << 53) as f64;
        let i = self.cdf.partition_point(|&c| c < u);
        i.min(self.cdf.len() - 1) as u64 + 1
    }

    /// A uniform draw in `0..bound` from the same seeded stream.
    pub fn uniform(&mut self, bound: u64) -> u64 {
        splitmix64(&mut self.state) % bound.max(1)
    }
}

/// The key of draw `i`: `key:<i>`.
pub fn key_of(i: u64) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small seeded generator.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws stay in range, the first key is the most drawn, and a seed
    /// gives the same stream twice.
    #[test]
    fn in_range_skewed_and_seeded() {
        let mut a = Zipf::new(100, 1.0, 5);
        let mut b = Zipf::new(100, 1.0, 5);
        let mut counts = [0u32; 101];
        for _ in 0..10_000 {
            let x = a.next();
            assert_eq!(x, b.next());
            assert!((1..=100).contains(&x));
            counts[x as usize] += 1;
        }
        assert!(counts[1] > counts[2] && counts[2] > counts[50]);
    }
}
