//! The bloom filter of a table, over user keys.
//!
//! `docs/FORMAT.md`, "SSTable: filter block":
//!
//! ```text
//! filter := bits: m/8 bytes, k: u8 (1..=30)
//! bit i of the filter is bit (i % 8) of byte i / 8
//! ```
//!
//! A key is hashed once with XXH3-64 (`h`); its k probe positions are
//! `(h1 + j * h2) mod m` for `j` in `0..k`, with `h1` the low and `h2` the
//! high 32 bits of `h` (Kirsch–Mitzenmacher double hashing). The filter is
//! over user keys, so a point read for any version of a key can use it;
//! consecutive versions of one user key are added once. A filter with no
//! bit bytes (bits per key 0) matches every key.

use crate::error::CorruptionKind;
use crate::key;
use xxhash_rust::xxh3::xxh3_64;

/// Largest number of probes per key ("SSTable: filter block").
pub const BLOOM_PROBES_MAX: u32 = 30;

/// Smallest filter in bits when there is at least one key, so tiny tables
/// do not get a useless 1-byte filter.
pub const BLOOM_BITS_MIN: usize = 64;

/// The probes for `bits_per_key`: round(bits_per_key * ln 2), in 1..=30.
pub fn probes_for(bits_per_key: usize) -> u32 {
    let k = (bits_per_key as f64 * std::f64::consts::LN_2).round() as u32;
    k.clamp(1, BLOOM_PROBES_MAX)
}

/// The probe positions `(h1 + j * h2) mod bits` for `j` in `0..probes`
/// ("SSTable: filter block"). `h1` and `h2` are below 2^32 and `j` below
/// 2^5, so the sum never overflows and stepping by `h2 mod bits` with one
/// conditional subtraction gives the same positions as the formula, with
/// two divisions instead of one per probe (a 64-bit division takes tens of
/// cycles). `bits` must be positive.
fn probe_positions(hash: u64, probes: u32, bits: u64) -> impl Iterator<Item = u64> {
    debug_assert!(bits > 0 && probes <= BLOOM_PROBES_MAX);
    let h1 = hash & 0xffff_ffff;
    let h2 = hash >> 32;
    let step = h2 % bits;
    let mut next = h1 % bits;
    (0..probes).map(move |_| {
        let pos = next;
        // Both below `bits`, so the sum is below 2 * bits (no overflow:
        // `bits` is at most 8 times a filter's length).
        next += step;
        if next >= bits {
            next -= bits;
        }
        pos
    })
}

/// Collects the user keys of a table being built and encodes the filter.
#[derive(Debug)]
pub struct BloomBuilder {
    bits_per_key: usize,
    hashes: Vec<u64>,
    last_user_key: Vec<u8>,
}

impl BloomBuilder {
    /// A builder spending about `bits_per_key` bits per distinct user key.
    pub fn new(bits_per_key: usize) -> Self {
        BloomBuilder {
            bits_per_key,
            hashes: Vec::new(),
            last_user_key: Vec::new(),
        }
    }

    /// Adds the user key of an internal key (once per run of equal user keys).
    pub fn add_internal_key(&mut self, ikey: &[u8]) {
        let user_key = key::user_key(ikey);
        if !self.hashes.is_empty() && self.last_user_key == user_key {
            return;
        }
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(user_key);
        self.hashes.push(xxh3_64(user_key));
    }

    /// Distinct user keys added.
    pub fn keys(&self) -> usize {
        self.hashes.len()
    }

    /// Bytes the filter block would take.
    pub fn size_estimate(&self) -> usize {
        self.bits().div_ceil(8) + 1
    }

    fn bits(&self) -> usize {
        if self.bits_per_key == 0 || self.hashes.is_empty() {
            return 0;
        }
        (self.hashes.len() * self.bits_per_key).max(BLOOM_BITS_MIN)
    }

    /// The encoded filter.
    pub fn finish(&self) -> Vec<u8> {
        let bytes = self.bits().div_ceil(8);
        let bits = (bytes * 8) as u64;
        let probes = probes_for(self.bits_per_key);
        let mut out = vec![0u8; bytes + 1];
        if bits > 0 {
            for &h in &self.hashes {
                for pos in probe_positions(h, probes, bits) {
                    out[(pos / 8) as usize] |= 1 << (pos % 8);
                }
            }
        }
        out[bytes] = probes as u8;
        out
    }
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    bits: Vec<u8>,
    probes: u32,
}

impl BloomFilter {
    /// Decodes a filter block; malformed if empty or `k` is outside 1..=30.
    pub fn decode(mut data: Vec<u8>) -> Result<BloomFilter, CorruptionKind> {
        let probes = u32::from(data.pop().ok_or(CorruptionKind::Truncated {
            needed: 1,
            available: 0,
        })?);
        if !(1..=BLOOM_PROBES_MAX).contains(&probes) {
            return Err(CorruptionKind::Malformed(format!(
                "bloom probes {probes} outside 1..={BLOOM_PROBES_MAX}"
            )));
        }
        Ok(BloomFilter { bits: data, probes })
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        if self.bits.is_empty() {
            return true;
        }
        let bits = self.bits.len() as u64 * 8;
        probe_positions(xxh3_64(user_key), self.probes, bits).all(|pos| {
            self.bits
                .get((pos / 8) as usize)
                .is_some_and(|b| b & (1 << (pos % 8)) != 0)
        })
    }

    /// Bytes held in memory.
    pub fn size_bytes(&self) -> usize {
        self.bits.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Kind, internal_key};
    use ataman_testkit::rng::Rng;

    fn user_key_of(i: u64) -> Vec<u8> {
        format!("user-key-{i:08}").into_bytes()
    }

    /// At 10 bits per key there are no false negatives and under 2% false positives.
    #[test]
    fn false_positive_rate_at_10_bits() {
        let keys_added = 10_000u64;
        let mut b = BloomBuilder::new(10);
        for i in 0..keys_added {
            // Three versions of each key: the filter must count it once.
            for ts in (1..=3).rev() {
                b.add_internal_key(&internal_key(&user_key_of(i), ts, i, Kind::Put));
            }
        }
        assert_eq!(b.keys(), keys_added as usize);
        let encoded = b.finish();
        assert_eq!(encoded.len(), b.size_estimate());
        assert_eq!(*encoded.last().unwrap(), 7);
        let f = BloomFilter::decode(encoded).unwrap();
        for i in 0..keys_added {
            assert!(f.may_contain(&user_key_of(i)), "false negative for {i}");
        }
        let absent = 100_000u64;
        let false_positives = (keys_added..keys_added + absent)
            .filter(|&i| f.may_contain(&user_key_of(i)))
            .count();
        let rate = false_positives as f64 / absent as f64;
        assert!(rate < 0.02, "false positive rate {rate}");
        assert!(
            rate > 0.0,
            "a 10-bit filter that never matches is suspicious"
        );
    }

    /// The stepped probe positions are the format's `(h1 + j * h2) mod bits`,
    /// for sizes around and far from the hash halves, every probe count.
    #[test]
    fn probe_positions_follow_the_format() {
        let mut rng = Rng::new(1);
        for round in 0..20_000u64 {
            let state = rng.next_u64();
            let bits = match round % 4 {
                0 => 64 + state % 64,
                1 => (state >> 20) % (1 << 24) + 1,
                2 => (1 << 32) + (state >> 40),
                _ => (state >> 3).max(1),
            };
            let probes = (round % u64::from(BLOOM_PROBES_MAX)) as u32 + 1;
            let (h1, h2) = (state & 0xffff_ffff, state >> 32);
            let expected: Vec<u64> = (0..u64::from(probes))
                .map(|j| (h1 + j * h2) % bits)
                .collect();
            let got: Vec<u64> = probe_positions(state, probes, bits).collect();
            assert_eq!(
                got, expected,
                "hash {state:#x}, {probes} probes, {bits} bits"
            );
        }
    }

    /// Probes follow round(bits * ln 2) clamped to 1..=30.
    #[test]
    fn probes_are_clamped() {
        assert_eq!(probes_for(0), 1);
        assert_eq!(probes_for(1), 1);
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(100), 30);
    }

    /// Zero bits per key gives a filter that matches everything; bad k bytes are corruption.
    #[test]
    fn empty_filter_and_bad_probes() {
        let mut b = BloomBuilder::new(0);
        b.add_internal_key(&internal_key(b"a", 1, 1, Kind::Put));
        let f = BloomFilter::decode(b.finish()).unwrap();
        assert!(f.may_contain(b"anything"));
        assert!(BloomFilter::decode(Vec::new()).is_err());
        assert!(BloomFilter::decode(vec![0xff, 0]).is_err());
        assert!(BloomFilter::decode(vec![0xff, 31]).is_err());
    }
}
