//! What anti-entropy did and is doing: the round state behind
//! `/v0/repair` (docs/API.md) and the counters of `/metrics`.
//!
//! # Thread safety
//! [`RepairStatus`] is a mutex over a few numbers and the last round's
//! report, taken briefly by the network threads (POST and GET
//! `/v0/repair`) and by the rounds thread (start and end of a round); the
//! condition variable wakes the rounds thread when a round is asked for.
//! [`SyncMetrics`] is relaxed atomics only.

use crate::http::json::json_string;
use crate::metrics::gauge;
use ataman_testkit::lock::lock;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// What one session with one peer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerReport {
    /// The peer's URL.
    pub url: String,
    /// Why the session failed, `None` when it succeeded.
    pub error: Option<String>,
    /// Leaves of the tree that differed.
    pub buckets_differing: u64,
    /// Versions fetched from the peer and applied here.
    pub keys_fetched: u64,
    /// Versions pushed to the peer (and applied there).
    pub keys_pushed: u64,
    /// Versions refused: fetched ones this node refused plus pushed ones
    /// the peer refused (over limits, too far ahead of a clock); the
    /// session goes on, and `error` names the first.
    pub keys_refused: u64,
    /// Keys both sides held under one timestamp with different versions
    /// (resolved by the tie rule: the winner fetched or pushed).
    pub conflicts: u64,
    /// Bytes this node sent in the session.
    pub bytes_sent: u64,
    /// Bytes this node received in the session.
    pub bytes_received: u64,
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundReport {
    /// The round's number (1, 2, …; per process).
    pub round: u64,
    /// Wall-clock start, Unix ms.
    pub started_ms: u64,
    /// Wall-clock end, Unix ms.
    pub finished_ms: u64,
    /// One report per peer this node shares keys with.
    pub peers: Vec<PeerReport>,
    /// Why the round failed before any session (its local scan), if it did.
    pub error: Option<String>,
}

impl RoundReport {
    /// Every session succeeded.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.peers.iter().all(|p| p.error.is_none())
    }
}

#[derive(Debug, Default)]
struct State {
    /// The highest round number given out.
    numbered: u64,
    /// The round started or asked for and not finished.
    running: Option<u64>,
    /// `running` was asked for and the rounds thread has not taken it yet.
    asked: bool,
    /// A round asked for while `running` was already under way: it runs
    /// next, so what the request asked about is scanned after it was asked.
    queued: Option<u64>,
    last: Option<RoundReport>,
}

/// The rounds: which one runs, which one finished last.
///
/// # Invariants
/// At most one round is running; round numbers only grow; `last.round`
/// is below or equal to `running` when both are set.
#[derive(Debug, Default)]
pub struct RepairStatus {
    state: Mutex<State>,
    wake: Condvar,
}

impl RepairStatus {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Asks for a round now (`POST /v0/repair`): the number of the round
    /// that will run. A round asked for and not started yet serves the
    /// request; one already under way does not (its scan may predate the
    /// request), so one more round is queued to run right after it, and
    /// every request until it starts shares it.
    pub fn request(&self) -> u64 {
        let mut s = self.lock();
        if let Some(n) = s.running {
            if s.asked {
                return n;
            }
            if let Some(q) = s.queued {
                return q;
            }
            s.numbered += 1;
            s.queued = Some(s.numbered);
            return s.numbered;
        }
        s.numbered += 1;
        let n = s.numbered;
        s.running = Some(n);
        s.asked = true;
        drop(s);
        self.wake.notify_all();
        n
    }

    /// Wakes a rounds thread waiting in [`RepairStatus::next_round`] (at shutdown).
    pub fn wake(&self) {
        self.wake.notify_all();
    }

    /// The rounds thread's wait: the number of the round to run now — one
    /// asked for, or a periodic one once `periodic_due` says so — or
    /// `None` after waiting at most `wait_max`.
    pub fn next_round(&self, periodic_due: bool, wait_max: Duration) -> Option<u64> {
        let mut s = self.lock();
        if !s.asked && !periodic_due {
            s = self
                .wake
                .wait_timeout(s, wait_max)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        if s.asked {
            s.asked = false;
            return s.running;
        }
        if periodic_due && s.running.is_none() {
            s.numbered += 1;
            s.running = Some(s.numbered);
            return s.running;
        }
        None
    }

    /// Records a finished round.
    pub fn finish(&self, report: RoundReport) {
        let mut s = self.lock();
        debug_assert_eq!(s.running, Some(report.round));
        s.running = None;
        s.last = Some(report);
        if let Some(q) = s.queued.take() {
            s.running = Some(q);
            s.asked = true;
            drop(s);
            self.wake.notify_all();
        }
    }

    /// The last finished round's report.
    pub fn last(&self) -> Option<RoundReport> {
        self.lock().last.clone()
    }

    /// The rounds' state as JSON: `{"state":"idle"|"running","round":N,"last":{…}|null}`.
    pub fn render_json(&self) -> String {
        let mut out = String::with_capacity(256);
        out.push('{');
        self.render_fields(&mut out);
        out.push('}');
        out
    }

    /// `GET /v0/repair` (docs/API.md): the rounds' state after the node's
    /// own `"refilling"` field.
    pub fn render_json_refilling(&self, refilling: bool) -> String {
        let mut out = String::with_capacity(256);
        let _ = write!(out, "{{\"refilling\":{refilling},");
        self.render_fields(&mut out);
        out.push('}');
        out
    }

    /// Appends the fields of [`RepairStatus::render_json`], without braces.
    fn render_fields(&self, out: &mut String) {
        let s = self.lock();
        let (state, round) = match s.running {
            Some(n) => ("running", n),
            None => ("idle", s.last.as_ref().map_or(0, |l| l.round)),
        };
        let _ = write!(out, "\"state\":\"{state}\",\"round\":{round},\"last\":");
        match &s.last {
            None => out.push_str("null"),
            Some(last) => {
                let _ = write!(
                    out,
                    "{{\"round\":{},\"started_ms\":{},\"finished_ms\":{},\"ok\":{},\"peers\":[",
                    last.round,
                    last.started_ms,
                    last.finished_ms,
                    last.ok()
                );
                for (i, p) in last.peers.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"url\":");
                    json_string(out, &p.url);
                    let _ = write!(out, ",\"ok\":{},\"error\":", p.error.is_none());
                    match &p.error {
                        None => out.push_str("null"),
                        Some(e) => json_string(out, e),
                    }
                    let _ = write!(
                        out,
                        ",\"buckets_differing\":{},\"keys_fetched\":{},\"keys_pushed\":{},\"keys_refused\":{},\"bytes_sent\":{},\"bytes_received\":{}}}",
                        p.buckets_differing,
                        p.keys_fetched,
                        p.keys_pushed,
                        p.keys_refused,
                        p.bytes_sent,
                        p.bytes_received
                    );
                }
                out.push_str("]}");
            }
        }
    }
}

/// Anti-entropy counters for `/metrics`.
#[derive(Debug)]
pub struct SyncMetrics {
    /// Rounds finished with every session ok.
    pub rounds_ok: AtomicU64,
    /// Rounds finished with a failed session (or a failed local scan).
    pub rounds_failed: AtomicU64,
    /// Tree leaves compared (every leaf of every session's tree).
    pub buckets_compared: AtomicU64,
    /// Tree leaves found different.
    pub buckets_differing: AtomicU64,
    /// Versions fetched from peers and applied here.
    pub keys_fetched: AtomicU64,
    /// Versions pushed to peers.
    pub keys_pushed: AtomicU64,
    /// Versions a peer pushed here (served sessions).
    pub keys_received: AtomicU64,
    /// Versions refused, fetched or pushed here (both roles).
    pub keys_refused: AtomicU64,
    /// Keys this node and a peer held under one timestamp with different
    /// versions, found and resolved by the tie rule (sessions it started).
    pub conflicts: AtomicU64,
    /// Sync bytes sent (both roles).
    pub bytes_sent: AtomicU64,
    /// Sync bytes received (both roles).
    pub bytes_received: AtomicU64,
    /// Sessions served for peers (any outcome).
    pub sessions_served: AtomicU64,
    /// Sync upgrades answered 503 because the server was busy.
    pub sessions_refused: AtomicU64,
    /// Sessions dropped unserved: the initiator left while they waited.
    pub sessions_abandoned: AtomicU64,
    /// 1 while a round runs.
    pub round_running: AtomicU64,
    /// Index of the peer the running round is syncing with; -1 when none.
    pub round_peer: AtomicI64,
    /// Peers the running round has finished.
    pub round_peers_done: AtomicU64,
    /// Differing buckets of the running session.
    pub round_buckets_differing: AtomicU64,
    /// Keys fetched plus pushed so far in the running session.
    pub round_keys_done: AtomicU64,
    /// Peers of the read layout with no completed session that started
    /// within the tombstone grace (repair-based collection: the
    /// tombstones of the keys shared with them wait past the grace).
    pub peers_unrepaired_past_grace: AtomicU64,
}

impl Default for SyncMetrics {
    fn default() -> Self {
        SyncMetrics {
            rounds_ok: AtomicU64::new(0),
            rounds_failed: AtomicU64::new(0),
            buckets_compared: AtomicU64::new(0),
            buckets_differing: AtomicU64::new(0),
            keys_fetched: AtomicU64::new(0),
            keys_pushed: AtomicU64::new(0),
            keys_received: AtomicU64::new(0),
            keys_refused: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            sessions_served: AtomicU64::new(0),
            sessions_refused: AtomicU64::new(0),
            sessions_abandoned: AtomicU64::new(0),
            round_running: AtomicU64::new(0),
            round_peer: AtomicI64::new(-1),
            round_peers_done: AtomicU64::new(0),
            round_buckets_differing: AtomicU64::new(0),
            round_keys_done: AtomicU64::new(0),
            peers_unrepaired_past_grace: AtomicU64::new(0),
        }
    }
}

impl SyncMetrics {
    /// Appends the anti-entropy part of `/metrics`.
    pub fn render(&self, out: &mut String) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP ataman_antientropy_rounds_total Anti-entropy rounds finished, by result.\n# TYPE ataman_antientropy_rounds_total counter"
        );
        let _ = writeln!(
            out,
            "ataman_antientropy_rounds_total{{result=\"ok\"}} {}",
            get(&self.rounds_ok)
        );
        let _ = writeln!(
            out,
            "ataman_antientropy_rounds_total{{result=\"failed\"}} {}",
            get(&self.rounds_failed)
        );
        let counters: [(&str, &str, &AtomicU64); 13] = [
            (
                "ataman_antientropy_buckets_compared_total",
                "Tree leaves compared with peers.",
                &self.buckets_compared,
            ),
            (
                "ataman_antientropy_buckets_differing_total",
                "Tree leaves that differed from a peer's.",
                &self.buckets_differing,
            ),
            (
                "ataman_antientropy_keys_fetched_total",
                "Versions fetched from peers and applied.",
                &self.keys_fetched,
            ),
            (
                "ataman_antientropy_keys_pushed_total",
                "Versions pushed to peers.",
                &self.keys_pushed,
            ),
            (
                "ataman_antientropy_keys_received_total",
                "Versions peers pushed to this node.",
                &self.keys_received,
            ),
            (
                "ataman_antientropy_keys_refused_total",
                "Versions refused in sessions (over limits, too far ahead of a clock): fetched or pushed here, or pushed by this node and refused by the peer.",
                &self.keys_refused,
            ),
            (
                "ataman_antientropy_conflicts_total",
                "Keys this node and a peer held under one timestamp with different versions (a bug or a bit flip), resolved by the tie rule.",
                &self.conflicts,
            ),
            (
                "ataman_antientropy_bytes_sent_total",
                "Bytes sent in sync sessions (both roles).",
                &self.bytes_sent,
            ),
            (
                "ataman_antientropy_bytes_received_total",
                "Bytes received in sync sessions (both roles).",
                &self.bytes_received,
            ),
            (
                "ataman_antientropy_sessions_served_total",
                "Sync sessions served for peers.",
                &self.sessions_served,
            ),
            (
                "ataman_antientropy_sessions_refused_total",
                "Sync upgrades answered 503 (server busy).",
                &self.sessions_refused,
            ),
            (
                "ataman_antientropy_sessions_abandoned_total",
                "Sync sessions dropped unserved: the initiator left while they waited.",
                &self.sessions_abandoned,
            ),
            (
                "ataman_antientropy_round_peers_done",
                "Peers the running round has finished.",
                &self.round_peers_done,
            ),
        ];
        for (name, help, value) in counters {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            gauge(out, name, help, kind, get(value));
        }
        gauge(
            out,
            "ataman_antientropy_peers_unrepaired_past_grace",
            "Peers with no completed anti-entropy session started within the tombstone grace: the tombstones of the keys shared with them wait (repair-based collection).",
            "gauge",
            get(&self.peers_unrepaired_past_grace),
        );
        gauge(
            out,
            "ataman_antientropy_round_running",
            "1 while an anti-entropy round runs.",
            "gauge",
            get(&self.round_running),
        );
        gauge(
            out,
            "ataman_antientropy_round_peer",
            "Index (in --cluster) of the peer the running round syncs with; -1 when none.",
            "gauge",
            self.round_peer.load(Ordering::Relaxed),
        );
        gauge(
            out,
            "ataman_antientropy_round_buckets_differing",
            "Differing buckets of the running session.",
            "gauge",
            get(&self.round_buckets_differing),
        );
        gauge(
            out,
            "ataman_antientropy_round_keys_done",
            "Keys fetched plus pushed so far in the running session.",
            "gauge",
            get(&self.round_keys_done),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A POST before the asked round started gets that round's number; a
    /// periodic round does not start over a running one; a POST during a
    /// running round queues the next one, which runs right after; the JSON
    /// has the documented shape.
    #[test]
    fn rounds_and_json() {
        let s = RepairStatus::default();
        assert_eq!(s.render_json(), r#"{"state":"idle","round":0,"last":null}"#);
        assert_eq!(s.request(), 1);
        assert_eq!(s.request(), 1);
        assert_eq!(
            s.render_json(),
            r#"{"state":"running","round":1,"last":null}"#
        );
        assert_eq!(s.next_round(false, Duration::ZERO), Some(1));
        assert_eq!(s.next_round(true, Duration::ZERO), None);
        s.finish(RoundReport {
            round: 1,
            started_ms: 5,
            finished_ms: 9,
            peers: vec![
                PeerReport {
                    url: "http://a:1".into(),
                    keys_fetched: 3,
                    ..PeerReport::default()
                },
                PeerReport {
                    url: "http://b:2".into(),
                    error: Some("cannot connect: \"refused\"".into()),
                    ..PeerReport::default()
                },
            ],
            error: None,
        });
        assert_eq!(
            s.render_json(),
            concat!(
                r#"{"state":"idle","round":1,"last":{"round":1,"started_ms":5,"finished_ms":9,"ok":false,"peers":["#,
                r#"{"url":"http://a:1","ok":true,"error":null,"buckets_differing":0,"keys_fetched":3,"keys_pushed":0,"keys_refused":0,"bytes_sent":0,"bytes_received":0},"#,
                r#"{"url":"http://b:2","ok":false,"error":"cannot connect: \"refused\"","buckets_differing":0,"keys_fetched":0,"keys_pushed":0,"keys_refused":0,"bytes_sent":0,"bytes_received":0}]}}"#
            )
        );
        assert_eq!(s.next_round(false, Duration::ZERO), None);
        assert_eq!(s.next_round(true, Duration::ZERO), Some(2));
        // Round 2 is under way: a request queues round 3, later ones share it.
        assert_eq!(s.request(), 3);
        assert_eq!(s.request(), 3);
        assert_eq!(s.next_round(true, Duration::ZERO), None);
        assert_eq!(
            s.render_json().split(",\"last\"").next(),
            Some(r#"{"state":"running","round":2"#)
        );
        s.finish(RoundReport {
            round: 2,
            ..RoundReport::default()
        });
        assert_eq!(s.next_round(false, Duration::ZERO), Some(3));
        assert_eq!(s.request(), 4, "round 3 is under way");
    }
}
