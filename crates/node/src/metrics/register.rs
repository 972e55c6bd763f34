//! The consensus register's counters (`/metrics`, `ataman_register_*`;
//! docs/METRICS.md): the proposers' (operations, rounds, requests sent by
//! kind, outcomes) and the acceptor's (steps, records written and
//! pruned, refusals). Plain atomics, shared by every network thread.

use ataman_engine::metrics::Histogram;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the register (see the module doc).
#[derive(Debug, Default)]
pub struct RegisterFigures {
    /// Operations that ended with an outcome (decided).
    pub decided: AtomicU64,
    /// Operations that failed after every round ended without an outcome.
    pub exhausted: AtomicU64,
    /// Operations whose outcome is unknown (an accept of theirs may have
    /// been decided and built upon).
    pub indeterminate: AtomicU64,
    /// Operations whose value was decided but not confirmed stored by a
    /// quorum within the rounds allowed (they took effect).
    pub unconfirmed: AtomicU64,
    /// Operations refused before a round (the thread's bound, a layout
    /// transition).
    pub refused: AtomicU64,
    /// Rounds of decided and failed operations (a retry is a round).
    pub rounds: AtomicU64,
    /// Rounds after the first (contention or a missing quorum).
    pub retries: AtomicU64,
    /// Requests sent by kind: prepare, accept, commit, release.
    pub sent: [AtomicU64; 4],
    /// Acceptor steps taken.
    pub steps: AtomicU64,
    /// Paxos records written (a promise or an accepted value held).
    pub records_written: AtomicU64,
    /// Of those, written without waiting for an fsync (a promise the
    /// clock's durable reservation covers: `register::record`, "Rules").
    pub records_unsynced: AtomicU64,
    /// Paxos records pruned (deleted once the committed value says it all).
    pub records_pruned: AtomicU64,
    /// Asks the acceptor refused at its queue bound.
    pub acceptor_refused: AtomicU64,
    /// Acceptor steps whose load or writes failed.
    pub acceptor_failed: AtomicU64,
    /// Reply frames that did not decode.
    pub bad_replies: AtomicU64,
    /// An operation's time from its start to its outcome, µs.
    pub operation_us: Histogram,
    /// An acceptor step's time from its start to its reply, µs (its
    /// durable writes included).
    pub step_us: Histogram,
}

/// The kinds of `sent`, in order.
pub const SENT_KINDS: [&str; 4] = ["prepare", "accept", "commit", "release"];

impl RegisterFigures {
    /// Appends the `ataman_register_*` families to `/metrics`.
    pub fn render(&self, out: &mut String) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP ataman_register_operations_total Consensus register operations (atomic read-modify-writes of keys with replicas on other nodes), by outcome.\n# TYPE ataman_register_operations_total counter"
        );
        for (outcome, n) in [
            ("decided", &self.decided),
            ("exhausted", &self.exhausted),
            ("indeterminate", &self.indeterminate),
            ("unconfirmed", &self.unconfirmed),
            ("refused", &self.refused),
        ] {
            let _ = writeln!(
                out,
                "ataman_register_operations_total{{outcome=\"{outcome}\"}} {}",
                load(n)
            );
        }
        let _ = writeln!(
            out,
            "# HELP ataman_register_requests_sent_total Register requests a proposer sent, by kind.\n# TYPE ataman_register_requests_sent_total counter"
        );
        for (kind, n) in SENT_KINDS.iter().zip(&self.sent) {
            let _ = writeln!(
                out,
                "ataman_register_requests_sent_total{{kind=\"{kind}\"}} {}",
                load(n)
            );
        }
        for (name, help, n) in [
            (
                "ataman_register_rounds_total",
                "Consensus rounds of operations that ended.",
                &self.rounds,
            ),
            (
                "ataman_register_retries_total",
                "Rounds after an operation's first (a competing proposer, or no quorum in time).",
                &self.retries,
            ),
            (
                "ataman_register_acceptor_steps_total",
                "Register requests this node's acceptor served.",
                &self.steps,
            ),
            (
                "ataman_register_records_written_total",
                "Paxos records written (a promise or an accepted value held).",
                &self.records_written,
            ),
            (
                "ataman_register_records_unsynced_total",
                "Paxos records written without waiting for an fsync (a promise under the clock's durable reservation).",
                &self.records_unsynced,
            ),
            (
                "ataman_register_records_pruned_total",
                "Paxos records pruned once the committed value said all they held.",
                &self.records_pruned,
            ),
            (
                "ataman_register_acceptor_refused_total",
                "Register requests the acceptor refused at its queue bound.",
                &self.acceptor_refused,
            ),
            (
                "ataman_register_acceptor_failed_total",
                "Acceptor steps whose read or durable write failed.",
                &self.acceptor_failed,
            ),
            (
                "ataman_register_bad_replies_total",
                "Register replies that did not decode.",
                &self.bad_replies,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                load(n)
            );
        }
        crate::metrics::histogram(
            out,
            "ataman_register_operation_duration_seconds",
            "Time from a register operation's start to its outcome (all its rounds).",
            "",
            1e-6,
            &self.operation_us.snapshot(),
            true,
        );
        crate::metrics::histogram(
            out,
            "ataman_register_acceptor_step_duration_seconds",
            "Time from an acceptor step's start to its reply (its durable writes included).",
            "",
            1e-6,
            &self.step_us.snapshot(),
            true,
        );
    }
}
