//! What a client thread counts: whole-run histograms and counters it keeps
//! to itself, and one [`Second`] it hands to the main thread each second
//! (for the live progress line and the per-second series).

use crate::error::{BenchError, Result};
use crate::report::{latency_histogram, merge, record_latency};
use hdrhistogram::Histogram;
use std::time::Duration;

/// Largest latency a per-second histogram holds, microseconds (a minute).
const SECOND_LATENCY_US_MAX: u64 = 60_000_000;

/// Significant digits of per-second histograms: 1% is plenty for a p99 series.
const SECOND_SIGNIFICANT_DIGITS: u8 = 2;

/// Why a request got no HTTP response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connection could not be opened.
    Connect,
    /// Reading or writing failed, the peer closed early, or the response could not be framed.
    Io,
    /// No response within `--timeout` of sending.
    Timeout,
}

/// Counters of a run or a part of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Responses received.
    pub requests: u64,
    /// Responses with a status outside 200..=299.
    pub non_2xx: u64,
    /// Connections that could not be opened.
    pub errors_connect: u64,
    /// Read/write errors and unframeable responses.
    pub errors_io: u64,
    /// Requests without a response within the timeout.
    pub timeouts: u64,
    /// Bytes received (heads and bodies).
    pub bytes_read: u64,
}

impl Counts {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.non_2xx += other.non_2xx;
        self.errors_connect += other.errors_connect;
        self.errors_io += other.errors_io;
        self.timeouts += other.timeouts;
        self.bytes_read += other.bytes_read;
    }

    /// Requests that got no response (connect, I/O, timeouts).
    pub fn errors(&self) -> u64 {
        self.errors_connect + self.errors_io + self.timeouts
    }

    /// Counts a failure.
    pub fn fail(&mut self, why: Failure) {
        match why {
            Failure::Connect => self.errors_connect += 1,
            Failure::Io => self.errors_io += 1,
            Failure::Timeout => self.timeouts += 1,
        }
    }
}

/// One second of one thread (by completion time, from the start of measuring).
#[derive(Debug)]
pub struct Second {
    /// The sending thread.
    pub thread: usize,
    /// Seconds since measuring started.
    pub index: u64,
    /// What completed in it.
    pub counts: Counts,
    /// Corrected latency of what completed in it, microseconds.
    pub latency_us: Histogram<u64>,
}

/// A new per-second histogram.
pub fn second_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, SECOND_LATENCY_US_MAX, SECOND_SIGNIFICANT_DIGITS)
        .map_err(|e| BenchError::InvalidArgument(format!("per-second histogram: {e}")))
}

/// A thread's whole-run result.
#[derive(Debug)]
pub struct Totals {
    /// Latency from the planned send time, ns.
    pub corrected_ns: Histogram<u64>,
    /// Latency from the actual send time, ns.
    pub uncorrected_ns: Histogram<u64>,
    /// From the planned to the actual send time, ns: the wait for the
    /// connection's previous response, the send slack, scheduling delays.
    pub send_lag_ns: Histogram<u64>,
    /// Requests whose first byte was written before their planned time:
    /// always 0 (a contract of the schedule; counted, not assumed).
    pub sent_early: u64,
    /// Counters.
    pub counts: Counts,
    /// The same counters by target (index in `--url`'s list).
    pub targets: Vec<Counts>,
    /// Requests planned before the end but never sent: their connection
    /// was still waiting when the drain limit (end + timeout) struck.
    pub unsent: u64,
    /// Last completion, ns since the start of measuring (0 if none).
    pub last_completion_ns: u64,
}

impl Totals {
    /// Empty totals of a run against `targets` targets.
    pub fn new(targets: usize) -> Result<Totals> {
        Ok(Totals {
            corrected_ns: latency_histogram()?,
            uncorrected_ns: latency_histogram()?,
            send_lag_ns: latency_histogram()?,
            sent_early: 0,
            counts: Counts::default(),
            targets: vec![Counts::default(); targets],
            unsent: 0,
            last_completion_ns: 0,
        })
    }

    /// Records one response of a request planned at `due_ns`, first
    /// written at `sent_ns` and complete at `done_ns` (ns since the epoch).
    pub fn record(&mut self, due_ns: u64, sent_ns: u64, done_ns: u64) {
        self.sent_early += u64::from(sent_ns < due_ns);
        let ns = |from: u64, to: u64| Duration::from_nanos(to.saturating_sub(from));
        record_latency(&mut self.corrected_ns, ns(due_ns, done_ns));
        record_latency(&mut self.uncorrected_ns, ns(sent_ns, done_ns));
        record_latency(&mut self.send_lag_ns, ns(due_ns, sent_ns));
    }

    /// Adds another thread's totals.
    pub fn add(&mut self, other: &Totals) -> Result<()> {
        merge(&mut self.corrected_ns, &other.corrected_ns)?;
        merge(&mut self.uncorrected_ns, &other.uncorrected_ns)?;
        merge(&mut self.send_lag_ns, &other.send_lag_ns)?;
        self.sent_early += other.sent_early;
        self.counts.add(&other.counts);
        if self.targets.len() < other.targets.len() {
            self.targets.resize(other.targets.len(), Counts::default());
        }
        for (mine, theirs) in self.targets.iter_mut().zip(&other.targets) {
            mine.add(theirs);
        }
        self.unsent += other.unsent;
        self.last_completion_ns = self.last_completion_ns.max(other.last_completion_ns);
        Ok(())
    }
}
