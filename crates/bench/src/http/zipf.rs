//! Zipfian ids, by the method of Gray et al., "Quickly Generating
//! Billion-Record Synthetic Databases" (SIGMOD 1994), as YCSB uses it:
//! one uniform draw per id after a one-off sum over the id range.

use rand::Rng;

/// Ids at which the zeta sum is computed exactly; past it the tail is
/// approximated by its integral, so setting up 10^9 ids costs no more than
/// 10^7 (the error on the normalising constant is below 1e-6 relative).
const ZETA_EXACT_TERMS_MAX: u64 = 10_000_000;

/// Draws ids in `1..=n`, id 1 the most frequent, P(id = i) ∝ 1 / i^theta.
///
/// # Thread safety
/// Immutable after construction; share it by reference, each thread with its own RNG.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    zeta_n: f64,
    alpha: f64,
    eta: f64,
    /// 1 + 0.5^theta: below this (times zeta_n) the draw is id 2.
    two_bound: f64,
}

impl Zipf {
    /// Ids `1..=n` with skew `theta` in (0, 1).
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(
            theta > 0.0 && theta < 1.0,
            "zipf theta {theta} outside (0, 1)"
        );
        let n = n.max(2);
        let zeta_n = zeta(n, theta);
        let zeta_2 = 1.0 + 0.5f64.powf(theta);
        Zipf {
            n,
            theta,
            zeta_n,
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n),
            two_bound: zeta_2,
        }
    }

    /// One id in `1..=n`.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 1;
        }
        if uz < self.two_bound {
            return 2;
        }
        let id = 1 + (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        id.clamp(1, self.n)
    }

    /// The skew.
    pub fn theta(&self) -> f64 {
        self.theta
    }
}

/// Sum of 1 / i^theta for i in 1..=n.
fn zeta(n: u64, theta: f64) -> f64 {
    let exact = n.min(ZETA_EXACT_TERMS_MAX);
    let mut sum: f64 = (1..=exact).map(|i| (i as f64).powf(-theta)).sum();
    if n > exact {
        // Integral of x^-theta from exact + 0.5 to n + 0.5 (midpoint rule).
        let a = exact as f64 + 0.5;
        let b = n as f64 + 0.5;
        sum += (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Ids stay in range, id 1 is the most frequent, and frequencies fall with rank.
    #[test]
    fn skewed_and_in_range() {
        let z = Zipf::new(1000, 0.99);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut counts = vec![0u64; 1001];
        for _ in 0..200_000 {
            let id = z.sample(&mut rng);
            assert!((1..=1000).contains(&id));
            counts[id as usize] += 1;
        }
        assert!(counts[1] > counts[2] && counts[2] > counts[10] && counts[10] > counts[500]);
        // theta 0.99 over 1000 ids: id 1 takes about 1/zeta(1000) ≈ 13%.
        let share = counts[1] as f64 / 200_000.0;
        assert!((0.10..0.17).contains(&share), "id 1 share {share}");
    }
}
