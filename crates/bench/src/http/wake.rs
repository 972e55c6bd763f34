//! When a client thread sleeping in `poll` should be woken by its timer.
//!
//! Every wake-up of a sleeping thread is a context switch, and on this
//! kind of machine (a VM, two cores shared with the server) a switch costs
//! more CPU than everything else the generator does for a request except
//! the loopback `sendto`. At a constant rate a thread wakes once for each
//! planned send and once for each response; the send slack merges the two
//! when it can.
//!
//! ## The rule
//! With requests in flight, a response will wake the thread anyway soon;
//! so the timer for a send planned at `due` may fire as late as
//! `due + slack`, and a response arriving in between sends it (the loop
//! sends everything whose planned time has passed whenever it wakes).
//! With nothing in flight no other wake-up is coming, so the timer is set
//! for `due` exactly: the slack is only spent where it can save a switch.
//! Nothing is ever sent before its planned time, and the latency is still
//! charged from the planned time, so any lateness the slack adds shows in
//! the corrected latency and in the report's send lag.
//!
//! The slack is only worth its lateness where a response within it is
//! likely, that is where each thread's rate times the slack is at least
//! one response ([`slack_in_use_ns`]); below that (10,000 requests/s per
//! thread for 100 µs) the timer is exact. That is also where the
//! generator's CPU matters: at low rates the server has the CPU to spare.
//!
//! An armed timer is kept (no `timerfd_settime`, which costs about as
//! much as the rest of a wake-up's user space) while it fires no earlier
//! than the next planned send and no later than the slack allows, in
//! flight or not; otherwise it is moved to the window's end.

/// Largest `--send-slack`, microseconds (wrk2's timers have 1 ms resolution).
pub const SEND_SLACK_US_MAX: u64 = 1000;

/// Nanoseconds per second.
const NS_PER_SEC: u128 = 1_000_000_000;

/// The slack a run uses: `slack_ns` when each of `threads` threads plans at
/// least one send per slack at `rate` requests/s in all, else 0 (exact).
/// A closed loop (`rate` 0) plans no sends on a clock: 0.
pub fn slack_in_use_ns(slack_ns: u64, rate: u64, threads: usize) -> u64 {
    let threads = threads.max(1) as u128;
    if u128::from(rate) * u128::from(slack_ns) >= threads * NS_PER_SEC {
        slack_ns
    } else {
        0
    }
}

/// The span in which the next timer wake-up may fall, ns since the epoch.
///
/// # Invariants
/// `earliest_ns <= latest_ns <= keep_until_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeWindow {
    /// The earliest useful wake-up: nothing is due before it.
    pub earliest_ns: u64,
    /// Where a new timer is set.
    pub latest_ns: u64,
    /// The latest a timer already armed may fire and be kept.
    pub keep_until_ns: u64,
}

impl WakeWindow {
    /// The window for the next planned send `due_ns` (if any), the
    /// thread's other deadlines `other_ns` (timeout scan, end of a second,
    /// drain limit: exact), `in_flight` requests and the slack.
    pub fn new(due_ns: Option<u64>, other_ns: u64, in_flight: usize, slack_ns: u64) -> Self {
        let (earliest_ns, latest_ns, keep_until_ns) = match due_ns {
            None => (other_ns, other_ns, other_ns),
            Some(due) => {
                let slack = if in_flight > 0 { slack_ns } else { 0 };
                (
                    other_ns.min(due),
                    other_ns.min(due.saturating_add(slack)),
                    other_ns.min(due.saturating_add(slack_ns)),
                )
            }
        };
        debug_assert!(earliest_ns <= latest_ns && latest_ns <= keep_until_ns);
        WakeWindow {
            earliest_ns,
            latest_ns,
            keep_until_ns,
        }
    }

    /// Whether a timer armed for `armed_ns` (not yet fired) may stay as it
    /// is at `now_ns`: it fires inside the window and in the future.
    pub fn keeps(&self, armed_ns: Option<u64>, now_ns: u64) -> bool {
        armed_ns.is_some_and(|armed| {
            armed > now_ns && (self.earliest_ns..=self.keep_until_ns).contains(&armed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(earliest_ns: u64, latest_ns: u64, keep_until_ns: u64) -> WakeWindow {
        WakeWindow {
            earliest_ns,
            latest_ns,
            keep_until_ns,
        }
    }

    /// The slack is used from one planned send per slack per thread up.
    #[test]
    fn slack_in_use_from_one_send_per_slack() {
        let us100 = 100_000;
        assert_eq!(slack_in_use_ns(us100, 20_000, 2), us100);
        assert_eq!(slack_in_use_ns(us100, 19_999, 2), 0);
        assert_eq!(slack_in_use_ns(us100, 40_000, 2), us100);
        assert_eq!(slack_in_use_ns(us100, 10_000, 1), us100);
        assert_eq!(slack_in_use_ns(us100, 2_000, 2), 0);
        assert_eq!(slack_in_use_ns(us100, 0, 2), 0);
        assert_eq!(slack_in_use_ns(0, 1_000_000, 1), 0);
        assert_eq!(slack_in_use_ns(us100, u64::MAX, 0), us100);
    }

    /// Without requests in flight a new timer is exact; with some it may be
    /// up to the slack late; other deadlines are never postponed.
    #[test]
    fn window_by_in_flight() {
        assert_eq!(
            WakeWindow::new(Some(100), 1_000, 0, 50),
            window(100, 100, 150)
        );
        assert_eq!(
            WakeWindow::new(Some(100), 1_000, 3, 50),
            window(100, 150, 150)
        );
        assert_eq!(
            WakeWindow::new(Some(100), 120, 3, 50),
            window(100, 120, 120)
        );
        assert_eq!(
            WakeWindow::new(Some(100), 1_000, 3, 0),
            window(100, 100, 100)
        );
        assert_eq!(WakeWindow::new(None, 120, 3, 50), window(120, 120, 120));
        assert_eq!(
            WakeWindow::new(Some(u64::MAX - 1), u64::MAX, 1, 50).latest_ns,
            u64::MAX
        );
    }

    /// Model check against the rule stated in words: a timer is kept
    /// exactly when it fires in the future, not before the next planned
    /// send (nor the other deadlines' minimum) and not after the send plus
    /// the slack; so the thread never wakes for a send before it is due,
    /// and a slack of 0 keeps only a timer set for that very instant.
    #[test]
    fn keeps_only_inside_the_window() {
        let other = 80u64;
        for due in [0u64, 10, 100] {
            for in_flight in [0usize, 2] {
                for slack in [0u64, 5, 50] {
                    let w = WakeWindow::new(Some(due), other, in_flight, slack);
                    assert!(w.earliest_ns <= w.latest_ns && w.latest_ns <= w.keep_until_ns);
                    for now in 0..200u64 {
                        assert!(!w.keeps(None, now));
                        for armed in 0..200u64 {
                            let expected = armed > now
                                && armed >= due.min(other)
                                && armed <= (due + slack).min(other);
                            assert_eq!(w.keeps(Some(armed), now), expected, "{w:?} {armed} {now}");
                        }
                    }
                }
            }
        }
    }
}
