//! The space-saving summary (Metwally, Agrawal, El Abbadi, "Efficient
//! computation of frequent and top-k elements in data streams", 2005)
//! over a stream of keys, with a fixed number of counters, and the merge
//! of such summaries (Agarwal et al., "Mergeable summaries", 2012).
//!
//! # Rules
//! - A summary holds at most `capacity` keys, each with a `count` and an
//!   `error`. A key already held gains one. A new key, while there is
//!   room, enters with count 1 and error 0. Once full, a new key takes the
//!   place of a key with the least count `m`: it enters with count
//!   `m + 1` and error `m` (it may have been seen up to `m` times while
//!   not held).
//! - Bound: for every held key, `count - error <= true count <= count`;
//!   for every key not held, `true count <= unlisted_max`, where
//!   `unlisted_max` is the least held count once full (0 before). Any key
//!   whose true count exceeds `n / capacity` is held (`n`: keys seen).
//! - Merge: a key's count in the merged summary is the sum, over the
//!   summaries, of its count where held and the summary's `unlisted_max`
//!   where not; its error likewise sums errors and `unlisted_max`. So the
//!   bound holds term by term. Only the `capacity` greatest counts are
//!   kept; the merged `unlisted_max` is the greater of the summed
//!   `unlisted_max` and the greatest count dropped.
//!
//! # Invariants
//! - `heap` is a min-heap of slots on their counters' `count`;
//!   `at[heap[i]] == i`; `index[key]` is the key's slot; `error <= count`;
//!   `seen` is the number of keys noted.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A small multiply-rotate hasher (rustc's `FxHasher`) for the summary's
/// index: a sampled request hashes its key once to three times, and
/// SipHash made that most of the sampler's cost (docs/BENCHMARKS.md). It
/// resists no crafted collisions, and needs not: the index holds at most
/// `capacity` keys, so a flood of colliding keys costs a lookup at most
/// `capacity` comparisons.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Index = HashMap<Vec<u8>, u32, BuildHasherDefault<FxHasher>>;

/// One held key of a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    /// The key.
    pub key: Vec<u8>,
    /// Upper bound on the key's true count.
    pub count: u64,
    /// `count - error` is a lower bound on the key's true count.
    pub error: u64,
}

/// A space-saving summary with a fixed number of counters.
///
/// Counters live in slots that never move (`counters`); the min-heap
/// orders slot numbers (`heap`, `at[slot]` its place), so sifting moves
/// integers and never hashes a key.
#[derive(Debug, Clone)]
pub struct SpaceSaving {
    capacity: usize,
    counters: Vec<Counter>,
    heap: Vec<u32>,
    at: Vec<u32>,
    index: Index,
    seen: u64,
}

impl SpaceSaving {
    /// An empty summary of `capacity` counters (1 to `u32::MAX`).
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "a summary needs a counter");
        assert!(u32::try_from(capacity).is_ok(), "slots are u32");
        SpaceSaving {
            capacity,
            counters: Vec::new(),
            heap: Vec::new(),
            at: Vec::new(),
            index: Index::default(),
            seen: 0,
        }
    }

    /// Keys noted.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Notes one occurrence of `key`.
    pub fn note(&mut self, key: &[u8]) {
        self.seen += 1;
        if let Some(&slot) = self.index.get(key) {
            self.counters[slot as usize].count += 1;
            self.sift_down(self.at[slot as usize] as usize);
        } else if self.counters.len() < self.capacity {
            let slot = self.counters.len() as u32;
            self.counters.push(Counter {
                key: key.to_vec(),
                count: 1,
                error: 0,
            });
            self.heap.push(slot);
            self.at.push(slot);
            self.index.insert(key.to_vec(), slot);
            self.sift_up(self.heap.len() - 1);
        } else {
            let slot = self.heap[0];
            let c = &mut self.counters[slot as usize];
            // The evicted key's index entry gives its buffer to the new
            // key: a replacement allocates nothing (issue 32, no allocation
            // on a GET's path; nearly every sampled key replaces one when
            // keys are many).
            let mut index_key = self
                .index
                .remove_entry(&c.key)
                .map(|(k, _)| k)
                .unwrap_or_default();
            let least = c.count;
            c.key.clear();
            c.key.extend_from_slice(key);
            c.count = least + 1;
            c.error = least;
            index_key.clear();
            index_key.extend_from_slice(key);
            self.index.insert(index_key, slot);
            self.sift_down(0);
        }
        debug_assert_eq!(self.index.len(), self.heap.len());
    }

    /// The summary as a [`Report`] (every held key, greatest count first).
    pub fn report(&self) -> Report {
        let unlisted_max = if self.counters.len() < self.capacity {
            0
        } else {
            self.count_at(0)
        };
        let mut counters = self.counters.clone();
        sort_counters(&mut counters);
        Report {
            counters,
            unlisted_max,
            seen: self.seen,
        }
    }

    /// The count of the counter at heap place `i`.
    fn count_at(&self, i: usize) -> u64 {
        self.counters[self.heap[i] as usize].count
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.count_at(parent) <= self.count_at(i) {
                break;
            }
            self.swap(parent, i);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < self.heap.len() && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < self.heap.len() && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == i {
                return;
            }
            self.swap(least, i);
            i = least;
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.at[self.heap[a] as usize] = a as u32;
        self.at[self.heap[b] as usize] = b as u32;
    }
}

/// A summary's content: what is reported and merged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// Held keys, greatest count first (ties by key).
    pub counters: Vec<Counter>,
    /// Upper bound on the true count of any key not in `counters`.
    pub unlisted_max: u64,
    /// Keys noted.
    pub seen: u64,
}

fn sort_counters(counters: &mut [Counter]) {
    counters.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
}

/// The merge of `reports`, keeping the `capacity` greatest counts
/// (module rules).
pub fn merge(reports: &[Report], capacity: usize) -> Report {
    let held: Vec<HashMap<&[u8], &Counter>> = reports
        .iter()
        .map(|r| r.counters.iter().map(|c| (&c.key[..], c)).collect())
        .collect();
    let mut sums: HashMap<&[u8], (u64, u64)> = HashMap::new();
    for report in reports {
        for c in &report.counters {
            sums.entry(&c.key[..]).or_insert((0, 0));
        }
    }
    for (key, (count, error)) in sums.iter_mut() {
        for (report, held) in reports.iter().zip(&held) {
            match held.get(key) {
                Some(c) => {
                    *count += c.count;
                    *error += c.error;
                }
                None => {
                    *count += report.unlisted_max;
                    *error += report.unlisted_max;
                }
            }
        }
    }
    let mut counters: Vec<Counter> = sums
        .into_iter()
        .map(|(key, (count, error))| Counter {
            key: key.to_vec(),
            count,
            error,
        })
        .collect();
    sort_counters(&mut counters);
    let unlisted_sum: u64 = reports.iter().map(|r| r.unlisted_max).sum();
    let dropped_max = counters.get(capacity).map_or(0, |c| c.count);
    counters.truncate(capacity);
    Report {
        counters,
        unlisted_max: unlisted_sum.max(dropped_max),
        seen: reports.iter().map(|r| r.seen).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotkeys::zipf::{Zipf, key_of};

    /// Exact counts of `stream`.
    fn exact(stream: &[u64]) -> HashMap<u64, u64> {
        let mut counts = HashMap::new();
        for &k in stream {
            *counts.entry(k).or_insert(0) += 1;
        }
        counts
    }

    /// Every reported key's true count lies in `[count - error, count]`,
    /// every unreported key's at most `unlisted_max`.
    fn check_bound(report: &Report, counts: &HashMap<u64, u64>) {
        for c in &report.counters {
            let id: u64 = std::str::from_utf8(&c.key).unwrap()[4..].parse().unwrap();
            let truth = counts.get(&id).copied().unwrap_or(0);
            assert!(
                c.count - c.error <= truth && truth <= c.count,
                "key {id}: true {truth} outside [{} - {}, {}]",
                c.count,
                c.error,
                c.count
            );
        }
        for (&id, &truth) in counts {
            if !report.counters.iter().any(|c| c.key == key_of(id)) {
                assert!(truth <= report.unlisted_max, "key {id}: {truth} unlisted");
            }
        }
    }

    /// On a seeded Zipf workload (s = 1.1, 10,000 keys, 200,000
    /// requests) the error bound holds against exact counts for every
    /// key, and the top 10 true keys are all reported.
    #[test]
    fn zipf_error_bound_against_exact_counts() {
        let mut zipf = Zipf::new(10_000, 1.1, 7);
        let stream: Vec<u64> = (0..200_000).map(|_| zipf.next()).collect();
        let counts = exact(&stream);
        let mut summary = SpaceSaving::new(128);
        for &k in &stream {
            summary.note(&key_of(k));
        }
        let report = summary.report();
        assert_eq!(report.seen, 200_000);
        assert_eq!(report.counters.len(), 128);
        check_bound(&report, &counts);
        assert!(report.unlisted_max <= 200_000 / 128);
        let mut truth: Vec<(u64, u64)> = counts.iter().map(|(&k, &c)| (c, k)).collect();
        truth.sort_unstable_by(|a, b| b.cmp(a));
        for &(_, k) in &truth[..10] {
            assert!(
                report.counters[..20].iter().any(|c| c.key == key_of(k)),
                "{k}"
            );
        }
    }

    /// Merging per-thread summaries of a split Zipf stream keeps the bound
    /// against the whole stream's exact counts (and against a merge of
    /// merges, as the cluster view does).
    #[test]
    fn merge_keeps_the_bound() {
        let mut zipf = Zipf::new(5_000, 1.0, 11);
        let stream: Vec<u64> = (0..90_000).map(|_| zipf.next()).collect();
        let mut parts: Vec<SpaceSaving> = (0..3).map(|_| SpaceSaving::new(64)).collect();
        for (i, &k) in stream.iter().enumerate() {
            parts[i % 3].note(&key_of(k));
        }
        let reports: Vec<Report> = parts.iter().map(SpaceSaving::report).collect();
        let counts = exact(&stream);
        let merged = merge(&reports, 64);
        assert_eq!(merged.seen, 90_000);
        check_bound(&merged, &counts);
        let twice = merge(&[merge(&reports[..2], 64), reports[2].clone()], 64);
        check_bound(&twice, &counts);
    }

    /// Negative control: a summary whose estimate is lowered by one (a
    /// planted off-by-one) fails the bound check.
    #[test]
    #[should_panic(expected = "outside")]
    fn a_lowered_estimate_fails_the_check() {
        let mut zipf = Zipf::new(1_000, 1.1, 3);
        let stream: Vec<u64> = (0..10_000).map(|_| zipf.next()).collect();
        let mut summary = SpaceSaving::new(16);
        for &k in &stream {
            summary.note(&key_of(k));
        }
        let mut report = summary.report();
        report.counters[0].count -= report.counters[0].error + 1;
        report.counters[0].error = 0;
        check_bound(&report, &exact(&stream));
    }

    /// Before it is full a summary is exact; at one counter it holds the
    /// last key with the whole stream as its bound.
    #[test]
    fn exact_until_full_and_the_smallest_summary() {
        let mut s = SpaceSaving::new(4);
        for k in [b"a", b"b", b"a", b"c", b"a"] {
            s.note(k);
        }
        let r = s.report();
        assert_eq!(r.unlisted_max, 0);
        assert_eq!(
            r.counters[0],
            Counter {
                key: b"a".to_vec(),
                count: 3,
                error: 0
            }
        );
        let mut one = SpaceSaving::new(1);
        for k in [b"a", b"b", b"c"] {
            one.note(k);
        }
        let r = one.report();
        assert_eq!((r.counters[0].count, r.counters[0].error), (3, 2));
        assert_eq!(r.counters[0].key, b"c");
    }
}
