//! The node's hot-key sampler: 1 in [`SAMPLE_EVERY`] client requests on a
//! key (on average, random gaps so a periodic workload cannot hide a key)
//! is noted in its network thread's own summary; a report merges every
//! thread's on read.
//!
//! # Rules
//! - Each network thread decides alone whether a request is sampled
//!   ([`Gate`], no shared state); only a sampled request takes its
//!   thread's lock (contended only by a report being read).
//! - Time is cut into windows of [`WINDOW_MS`]; each thread keeps the
//!   current window's summary and the previous one's. A report covers the
//!   previous window and the current one so far: between one and two
//!   windows, stated in the report.
//! - A report's share of a key is its count over the samples in the
//!   window; its error bound is the summary's (`space_saving` rules) over
//!   the same samples. Sampling adds a statistical error on top (a key of
//!   share `p` over `n` samples: a standard error of `sqrt(p(1-p)/n)`),
//!   documented in docs/API.md "Hot keys", not part of the bound.
//!
//! # Thread safety
//! [`HotKeys`] is shared by every network thread; each thread locks only
//! its own slot (`thread % THREAD_SLOTS`), a report locks each slot in turn.

use super::space_saving::{Report, SpaceSaving, merge};
use super::zipf::splitmix64;
use ataman_testkit::lock::lock;
use std::sync::Mutex;

/// One request in this many (on average) is sampled.
pub const SAMPLE_EVERY: u64 = 8;
/// Counters of each thread's summary of a window, and of a merged report.
pub const COUNTERS: usize = 256;
/// A window's length, milliseconds.
pub const WINDOW_MS: u64 = 1_000;
/// Thread slots; threads beyond share a slot (and its lock).
pub const THREAD_SLOTS: usize = 16;

/// A network thread's sampling decision: a countdown to the next sampled
/// request, its gaps drawn uniformly from `1..=2 * SAMPLE_EVERY - 1`.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    left: u64,
    state: u64,
}

impl Gate {
    /// A gate seeded with `seed` (the thread's index will do).
    pub fn new(seed: u64) -> Self {
        let mut gate = Gate {
            left: 0,
            state: seed ^ 0x0005_EED0_F407_4E75,
        };
        gate.left = gate.gap();
        gate
    }

    fn gap(&mut self) -> u64 {
        1 + splitmix64(&mut self.state) % (2 * SAMPLE_EVERY - 1)
    }

    /// Whether the next request is sampled.
    pub fn pass(&mut self) -> bool {
        self.left -= 1;
        if self.left == 0 {
            self.left = self.gap();
            true
        } else {
            false
        }
    }
}

/// One thread's summaries: the window `epoch` and the one before.
#[derive(Debug)]
struct Windows {
    epoch: u64,
    current: SpaceSaving,
    previous: SpaceSaving,
}

impl Windows {
    fn new() -> Self {
        Windows {
            epoch: 0,
            current: SpaceSaving::new(COUNTERS),
            previous: SpaceSaving::new(COUNTERS),
        }
    }

    /// Moves the windows on to `epoch` (never back).
    fn advance(&mut self, epoch: u64) {
        if epoch <= self.epoch {
            return;
        }
        if epoch == self.epoch + 1 {
            std::mem::swap(&mut self.current, &mut self.previous);
        } else {
            self.previous = SpaceSaving::new(COUNTERS);
        }
        self.current = SpaceSaving::new(COUNTERS);
        self.epoch = epoch;
    }
}

/// A merged report and the span it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The merged summary of the samples.
    pub report: Report,
    /// The span covered, milliseconds (from the previous window's start).
    pub window_ms: u64,
}

/// Every network thread's hot-key summaries (module rules).
#[derive(Debug)]
pub struct HotKeys {
    slots: Vec<Mutex<Windows>>,
    /// The zero of the windows' clock.
    origin: std::time::Instant,
}

impl Default for HotKeys {
    fn default() -> Self {
        HotKeys {
            slots: (0..THREAD_SLOTS)
                .map(|_| Mutex::new(Windows::new()))
                .collect(),
            origin: std::time::Instant::now(),
        }
    }
}

impl HotKeys {
    /// Milliseconds from the windows' zero to `now`.
    pub fn ms_at(&self, now: std::time::Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_millis() as u64
    }

    /// Notes a sampled request on `key` by network thread `thread` at
    /// `now_ms` (milliseconds on the node's monotonic clock).
    pub fn note(&self, thread: usize, key: &[u8], now_ms: u64) {
        let mut w = lock(&self.slots[thread % THREAD_SLOTS]);
        w.advance(now_ms / WINDOW_MS);
        w.current.note(key);
    }

    /// The merge of every thread's summaries of the previous and current
    /// window at `now_ms`.
    pub fn snapshot(&self, now_ms: u64) -> Snapshot {
        let epoch = now_ms / WINDOW_MS;
        let mut reports = Vec::new();
        for slot in &self.slots {
            let mut w = lock(slot);
            w.advance(epoch);
            for s in [&w.previous, &w.current] {
                if s.seen() > 0 {
                    reports.push(s.report());
                }
            }
        }
        let start_ms = epoch.saturating_sub(1) * WINDOW_MS;
        Snapshot {
            report: merge(&reports, COUNTERS),
            window_ms: now_ms - start_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotkeys::zipf::{Zipf, key_of};

    /// A gate passes one request in SAMPLE_EVERY on average (within 5%
    /// over 80,000 requests, seeded).
    #[test]
    fn gate_samples_one_in_n_on_average() {
        let mut gate = Gate::new(1);
        let passed = (0..80_000).filter(|_| gate.pass()).count() as u64;
        let expected = 80_000 / SAMPLE_EVERY;
        assert!(passed.abs_diff(expected) < expected / 20, "{passed}");
    }

    /// A key taking 1% of one second's traffic (20,000 requests over two
    /// network threads, the rest Zipf over 100,000 keys, s = 0.8) is found
    /// by the sampler through the gates, with its share's interval
    /// bracketing what was sampled of it.
    #[test]
    fn finds_a_one_percent_key_within_one_second() {
        let hot = hot_key_report(|_| true);
        let c = hot.report.counters.iter().find(|c| c.key == b"the-hot-key");
        let c = c.expect("the 1% key is reported");
        let share = c.count as f64 / hot.report.seen as f64;
        assert!((0.004..0.03).contains(&share), "share {share}");
        assert!(hot.window_ms <= 2 * WINDOW_MS);
    }

    /// Negative control: a sampler that drops the hot key's samples (a
    /// hand-made bad input) does not report it — the check can fail.
    #[test]
    fn a_sampler_blind_to_the_key_misses_it() {
        let blind = hot_key_report(|key| key != b"the-hot-key");
        assert!(
            !blind
                .report
                .counters
                .iter()
                .any(|c| c.key == b"the-hot-key")
        );
    }

    /// One second of 20,000 requests, 1% on one key, through two gated
    /// threads; `keep` decides which sampled keys reach the summary.
    fn hot_key_report(keep: impl Fn(&[u8]) -> bool) -> Snapshot {
        let hot = HotKeys::default();
        let mut zipf = Zipf::new(100_000, 0.8, 42);
        let mut gates = [Gate::new(0), Gate::new(1)];
        let start_ms = 5 * WINDOW_MS;
        for i in 0..20_000u64 {
            let key = if zipf.uniform(100) == 0 {
                b"the-hot-key".to_vec()
            } else {
                key_of(zipf.next())
            };
            let thread = (i % 2) as usize;
            if gates[thread].pass() && keep(&key) {
                hot.note(thread, &key, start_ms + i / 20);
            }
        }
        hot.snapshot(start_ms + 999)
    }

    /// Windows move on: a report covers the previous and current window,
    /// and forgets what is older.
    #[test]
    fn windows_cover_one_to_two_windows() {
        let hot = HotKeys::default();
        hot.note(0, b"old", 0);
        hot.note(3, b"prev", WINDOW_MS + 10);
        hot.note(0, b"now", 2 * WINDOW_MS + 10);
        let s = hot.snapshot(2 * WINDOW_MS + 500);
        let keys: Vec<&[u8]> = s.report.counters.iter().map(|c| &c.key[..]).collect();
        assert_eq!(keys, [&b"now"[..], b"prev"]);
        assert_eq!(s.window_ms, WINDOW_MS + 500);
        assert_eq!(hot.snapshot(10 * WINDOW_MS).report.seen, 0);
    }
}
