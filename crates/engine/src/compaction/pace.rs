//! A merge's pace: how long a paced merge (a purge, or a compaction
//! under `Options::compaction_rate_bytes`) waits so its reads stay at a
//! byte rate on average, as a pure rule (bytes and instants in, a wait
//! out); [`Pacer`] sleeps what it says.
//!
//! # Rules
//! - Waits are decided once per [`PACE_STEP_BYTES`] read, so a fast merge
//!   sleeps in steps of a few milliseconds, not per entry.
//! - The schedule is the bytes read so far over the rate, from the start:
//!   a merge that fell behind (slow disk, busy CPU) does not wait until it
//!   is back on schedule, and one ahead waits the difference.
//! - **Hurry.** When told to hurry (the engine: level 0 has grown to twice
//!   its compaction trigger: writers are nearer their stall than the
//!   merge's rate is worth), it does not wait, and the schedule restarts
//!   from there: no debt is paid back in a burst after.

use std::time::{Duration, Instant};

/// Bytes read between two decisions.
pub const PACE_STEP_BYTES: u64 = 1024 * 1024;

/// A paced merge's schedule, with what the engine tells it: whether to
/// hurry, and how to wait (a wait the engine's close cuts short).
pub struct Pacer<'a> {
    /// The schedule.
    pub pace: Pace,
    /// True while the merge should not wait (level 0 has grown).
    pub hurry: &'a dyn Fn() -> bool,
    /// Waits up to the time given, less if the engine begins to close;
    /// true when it is closing (the merge stops).
    pub wait: &'a dyn Fn(Duration) -> bool,
    /// Time spent in `wait`, summed.
    pub waited: Duration,
}

impl Pacer<'_> {
    /// Counts `bytes` read and, when a decision is due, waits what the
    /// pace says; true when the engine is closing (the merge stops).
    pub fn step(&mut self, bytes: u64) -> bool {
        if !self.pace.count(bytes) {
            return false;
        }
        let now = Instant::now();
        let wait = self.pace.wait(now, (self.hurry)());
        // Asked even for no wait: a close is noticed once per step.
        let closing = (self.wait)(wait);
        self.waited += now.elapsed();
        closing
    }
}

/// A paced merge's schedule.
#[derive(Debug, Clone)]
pub struct Pace {
    bytes_per_sec: u64,
    /// When the schedule began (moved forward after a hurry).
    origin: Instant,
    /// Bytes read on the schedule since `origin`.
    scheduled: u64,
    /// Bytes read since the last decision.
    pending: u64,
}

impl Pace {
    /// A schedule of `bytes_per_sec` (at least 1) starting at `now`.
    pub fn new(bytes_per_sec: u64, now: Instant) -> Pace {
        Pace {
            bytes_per_sec: bytes_per_sec.max(1),
            origin: now,
            scheduled: 0,
            pending: 0,
        }
    }

    /// Counts `bytes` read; true when a decision is due ([`Pace::wait`]).
    pub fn count(&mut self, bytes: u64) -> bool {
        self.pending += bytes;
        self.pending >= PACE_STEP_BYTES
    }

    /// The decision, at `now`: how long to wait before reading on (zero
    /// when on or behind schedule, or when `hurry`).
    pub fn wait(&mut self, now: Instant, hurry: bool) -> Duration {
        self.scheduled += std::mem::take(&mut self.pending);
        if hurry {
            self.origin = now;
            self.scheduled = 0;
            return Duration::ZERO;
        }
        let due = self.origin
            + Duration::from_secs_f64(self.scheduled as f64 / self.bytes_per_sec as f64);
        due.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    impl Pace {
        /// [`Pace::count`], then [`Pace::wait`] if a decision is due (as
        /// the purge filter does).
        fn after(&mut self, bytes: u64, now: Instant, hurry: bool) -> Duration {
            if self.count(bytes) {
                self.wait(now, hurry)
            } else {
                Duration::ZERO
            }
        }
    }

    /// Reading at once waits each step's share of the rate; below a step
    /// nothing waits.
    #[test]
    fn waits_for_the_schedule_in_steps() {
        let t0 = Instant::now();
        let mut p = Pace::new(4 * MIB, t0);
        assert_eq!(p.after(MIB / 2, t0, false), Duration::ZERO);
        // One MiB read instantly at 4 MiB/s: due at 250 ms.
        assert_eq!(p.after(MIB / 2, t0, false), Duration::from_millis(250));
        // The next MiB read by 300 ms: due at 500 ms.
        let at = t0 + Duration::from_millis(300);
        assert_eq!(p.after(MIB, at, false), Duration::from_millis(200));
    }

    /// A merge behind its schedule does not wait; one that hurries does
    /// not either, and owes nothing after.
    #[test]
    fn behind_or_hurrying_does_not_wait_and_owes_nothing() {
        let t0 = Instant::now();
        let mut p = Pace::new(MIB, t0);
        // 1 MiB took 2 s: behind.
        assert_eq!(
            p.after(MIB, t0 + Duration::from_secs(2), false),
            Duration::ZERO
        );
        // 10 MiB at once while hurrying: no wait.
        let t1 = t0 + Duration::from_secs(3);
        assert_eq!(p.after(10 * MIB, t1, true), Duration::ZERO);
        // Back to the pace: the schedule restarts at t1, not at t0 + 12 s.
        assert_eq!(p.after(MIB, t1, false), Duration::from_secs(1));
    }

    /// Over a long run the waits keep the rate: the last byte is due at
    /// bytes / rate.
    #[test]
    fn the_average_is_the_rate() {
        let t0 = Instant::now();
        let mut p = Pace::new(8 * MIB, t0);
        let mut now = t0;
        for _ in 0..64 {
            // Each MiB takes 10 ms to read, then the wait.
            now += Duration::from_millis(10);
            now += p.after(MIB, now, false);
        }
        assert_eq!(now - t0, Duration::from_secs(8));
    }
}
