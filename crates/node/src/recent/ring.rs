//! The recent-figures ring's rules: samples of a node's cumulative
//! request counters and latency histogram, one a second, and the
//! per-second points (rates by kind, p50 and p99) differenced from them.
//!
//! Pure: values in, values out; the node's main thread takes the samples
//! (`super::Recent::tick`) and `GET /v0/recent` reads the points.
//!
//! # Rules
//! - A sample is taken when [`SAMPLE_EVERY_MS`] or more passed since the
//!   last one (the main thread looks every 50 ms, so samples are 1.00 to
//!   1.05 s apart); the interval is what the point divides by, so a late
//!   sample does not inflate a rate.
//! - At most [`SAMPLES_MAX`] samples are kept (ten minutes and one, the
//!   one that starts the first interval); at the bound the oldest is
//!   dropped for each new one. Nothing is written to disk: a restart
//!   starts an empty ring.
//! - A point's percentile is the upper bound of the histogram bucket
//!   where the interval's cumulative count reaches the rank (the
//!   histogram's buckets are powers of two: a p99 of 2,048 µs means
//!   "between 1,024 and 2,048 µs"); an interval with no request has none.
//! - The wall clock can step back: a sample older than the newest clears
//!   the ring first (the old points' times no longer compare with the
//!   new ones), and a sample is due at once after such a step.
//! - Counters only grow; a counter found lower than in the sample before
//!   (never seen; a guard) counts as zero, never as a huge rate.
//!
//! # Invariants
//! - Samples are in time order (checked where one is pushed).

use ataman_engine::metrics::{HISTOGRAM_BUCKETS, bucket_upper_bound};
use std::collections::VecDeque;

/// Milliseconds between two samples, at least.
pub const SAMPLE_EVERY_MS: u64 = 1_000;
/// Samples kept: 600 intervals (ten minutes at one a second).
pub const SAMPLES_MAX: usize = 601;
/// The kinds of requests counted, in the order of [`Sample::counts`].
pub const KINDS: [&str; 5] = ["get", "put", "delete", "resp", "other"];

/// The node's cumulative figures at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Requests answered so far, by kind ([`KINDS`]).
    pub counts: [u64; KINDS.len()],
    /// The latency histogram of client data requests (HTTP get, put,
    /// delete, and RESP commands on keys), cumulative per bucket,
    /// microseconds.
    pub latency_buckets: [u64; HISTOGRAM_BUCKETS],
}

/// One interval's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The interval's end, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Requests per second by kind ([`KINDS`]).
    pub per_s: [f64; KINDS.len()],
    /// The median latency's bucket bound, µs; `None` without requests.
    pub p50_us: Option<u64>,
    /// The 99th percentile's bucket bound, µs; `None` without requests.
    pub p99_us: Option<u64>,
}

/// The last [`SAMPLES_MAX`] samples.
#[derive(Debug, Default)]
pub struct Ring {
    samples: VecDeque<Sample>,
}

impl Ring {
    /// Whether a sample is due at `now_ms`.
    pub fn due(&self, now_ms: u64) -> bool {
        self.samples
            .back()
            .is_none_or(|last| now_ms < last.at_ms || now_ms - last.at_ms >= SAMPLE_EVERY_MS)
    }

    /// Keeps `sample`, dropping the oldest at the bound.
    pub fn push(&mut self, sample: Sample) {
        if self
            .samples
            .back()
            .is_some_and(|last| last.at_ms > sample.at_ms)
        {
            self.samples.clear();
        }
        if self.samples.len() == SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
        assert!(self.samples.len() <= SAMPLES_MAX);
        debug_assert!(
            (self.samples.iter().zip(self.samples.iter().skip(1))).all(|(a, b)| a.at_ms <= b.at_ms)
        );
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Every interval's point, oldest first (one fewer than the samples).
    pub fn points(&self) -> Vec<Point> {
        self.samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .map(|(a, b)| point(a, b))
            .collect()
    }
}

/// The figures of the interval from `a` to `b`.
pub fn point(a: &Sample, b: &Sample) -> Point {
    let secs = (b.at_ms.saturating_sub(a.at_ms)).max(1) as f64 / 1_000.0;
    let per_s = std::array::from_fn(|k| b.counts[k].saturating_sub(a.counts[k]) as f64 / secs);
    let diff: [u64; HISTOGRAM_BUCKETS] =
        std::array::from_fn(|i| b.latency_buckets[i].saturating_sub(a.latency_buckets[i]));
    Point {
        at_ms: b.at_ms,
        per_s,
        p50_us: percentile(&diff, 50),
        p99_us: percentile(&diff, 99),
    }
}

/// The upper bound of the bucket holding the `pct`th percentile of
/// `buckets` (bucket `i` holds values below `2^i`), or `None` when empty.
pub fn percentile(buckets: &[u64; HISTOGRAM_BUCKETS], pct: u64) -> Option<u64> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    // The rank: the smallest count that covers pct% of the requests.
    let rank = (total * pct).div_ceil(100).max(1);
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(bucket_upper_bound(i));
        }
    }
    Some(bucket_upper_bound(HISTOGRAM_BUCKETS - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, gets: u64, buckets: &[(usize, u64)]) -> Sample {
        let mut latency_buckets = [0; HISTOGRAM_BUCKETS];
        for &(i, n) in buckets {
            latency_buckets[i] = n;
        }
        Sample {
            at_ms,
            counts: [gets, 0, 0, 0, 0],
            latency_buckets,
        }
    }

    /// A rate is the counter's growth over the interval's real length.
    #[test]
    fn rate_divides_by_the_interval() {
        let p = point(&sample(1_000, 10, &[]), &sample(3_000, 110, &[]));
        assert_eq!(p.per_s[0], 50.0);
        assert_eq!(p.at_ms, 3_000);
        assert_eq!((p.p50_us, p.p99_us), (None, None));
    }

    /// Percentiles come from the interval's own requests, not the
    /// cumulative histogram: old slow requests do not show.
    #[test]
    fn percentiles_of_the_interval() {
        // Before: 1,000 requests in bucket 20 (about a second).
        let a = sample(0, 0, &[(20, 1_000)]);
        // Then 98 fast ones (bucket 4) and 2 in bucket 12.
        let b = sample(1_000, 0, &[(20, 1_000), (4, 98), (12, 2)]);
        let p = point(&a, &b);
        assert_eq!(p.p50_us, Some(16));
        assert_eq!(p.p99_us, Some(4_096));
        let mut one = [0; HISTOGRAM_BUCKETS];
        one[3] = 1;
        assert_eq!(percentile(&one, 99), Some(8));
        assert_eq!(percentile(&[0; HISTOGRAM_BUCKETS], 50), None);
    }

    /// A counter lower than before counts as no request.
    #[test]
    fn a_lower_counter_is_no_rate() {
        let p = point(&sample(0, 500, &[(4, 9)]), &sample(1_000, 100, &[(4, 3)]));
        assert_eq!(p.per_s[0], 0.0);
        assert_eq!(p.p50_us, None);
    }

    /// The ring holds at most SAMPLES_MAX samples, the newest, and takes a
    /// sample only once a second has passed.
    #[test]
    fn bounded_and_paced() {
        let mut ring = Ring::default();
        assert!(ring.due(0));
        for s in 0..(SAMPLES_MAX as u64 + 10) {
            ring.push(sample(s * 1_000, s, &[]));
            assert!(!ring.due(s * 1_000 + SAMPLE_EVERY_MS - 1));
            assert!(ring.due(s * 1_000 + SAMPLE_EVERY_MS));
        }
        assert_eq!(ring.len(), SAMPLES_MAX);
        let points = ring.points();
        assert_eq!(points.len(), SAMPLES_MAX - 1);
        assert_eq!(
            points.last().map(|p| p.at_ms),
            Some((SAMPLES_MAX as u64 + 9) * 1_000)
        );
        assert!(points.iter().all(|p| p.per_s[0] == 1.0));
    }

    /// A wall clock stepped back clears the ring and takes a sample at
    /// once; no point spans the step.
    #[test]
    fn a_clock_step_back_starts_over() {
        let mut ring = Ring::default();
        ring.push(sample(10_000, 0, &[]));
        ring.push(sample(11_000, 5, &[]));
        assert!(ring.due(2_000));
        ring.push(sample(2_000, 9, &[]));
        assert_eq!(ring.len(), 1);
        assert!(ring.points().is_empty());
    }
}
