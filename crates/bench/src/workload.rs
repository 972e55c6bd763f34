//! What the benchmarks write: fixed-width decimal keys, incompressible
//! values, increasing timestamps. Shared by every benchmark so ataman and
//! fjall see byte-for-byte the same workload.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};

/// Digits in a key: every key is this many ASCII digits, zero-padded, so
/// keys sort like their numbers and every key has the same size (as in
/// LevelDB's `db_bench`).
pub const KEY_BYTES: usize = 16;

/// Largest key number a [`KEY_BYTES`]-digit key holds.
pub const KEY_NUMBER_MAX: u64 = 9_999_999_999_999_999;

/// Bytes of random data values are cut from; values are windows of it at
/// random offsets, so they do not compress and cost no RNG work per byte.
const VALUE_POOL_BYTES: usize = 1024 * 1024;

/// Writes key number `n` as [`KEY_BYTES`] zero-padded ASCII digits.
pub fn format_key(n: u64, out: &mut [u8; KEY_BYTES]) {
    debug_assert!(n <= KEY_NUMBER_MAX);
    let mut rest = n;
    for byte in out.iter_mut().rev() {
        *byte = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
}

/// The key for number `n`.
pub fn key(n: u64) -> [u8; KEY_BYTES] {
    let mut out = [0u8; KEY_BYTES];
    format_key(n, &mut out);
    out
}

/// A source of random key numbers and values, one per thread.
pub struct Workload {
    rng: StdRng,
    keys: u64,
    value_bytes: usize,
    pool: Vec<u8>,
}

impl Workload {
    /// Keys uniform in `0..keys`, values of `value_bytes`; `seed` makes runs repeatable.
    pub fn new(seed: u64, keys: u64, value_bytes: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut pool = vec![0u8; VALUE_POOL_BYTES + value_bytes];
        rng.fill(&mut pool[..]);
        Workload {
            rng,
            keys: keys.max(1),
            value_bytes,
            pool,
        }
    }

    /// A random key number in `0..keys`.
    pub fn key_number(&mut self) -> u64 {
        self.rng.random_range(0..self.keys)
    }

    /// A value: `value_bytes` pseudo-random bytes.
    pub fn value(&mut self) -> &[u8] {
        let start = self.rng.random_range(0..VALUE_POOL_BYTES);
        &self.pool[start..start + self.value_bytes]
    }
}

/// Increasing version timestamps shared by all writers of one run.
///
/// # Thread safety
/// One atomic counter; every call returns a distinct, larger value.
#[derive(Debug)]
pub struct Clock(AtomicU64);

impl Default for Clock {
    fn default() -> Self {
        Clock(AtomicU64::new(1))
    }
}

impl Clock {
    /// The next timestamp.
    pub fn tick(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys are fixed-width and sort like their numbers.
    #[test]
    fn keys_are_fixed_width_and_ordered() {
        assert_eq!(&key(42), b"0000000000000042");
        assert_eq!(&key(KEY_NUMBER_MAX), b"9999999999999999");
        assert!(key(9) < key(10));
    }

    /// Values have the asked size and keys stay in range.
    #[test]
    fn workload_bounds() {
        let mut w = Workload::new(7, 10, 100);
        for _ in 0..1000 {
            assert!(w.key_number() < 10);
            assert_eq!(w.value().len(), 100);
        }
    }
}
