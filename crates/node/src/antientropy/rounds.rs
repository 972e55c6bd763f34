//! The `ataman-rounds` thread: when anti-entropy rounds run and what one
//! round does.
//!
//! A round runs every `--anti-entropy-interval-ms` after the previous one
//! ended (never at start-up: a node that just started has its first round
//! one interval later), and whenever `POST /v0/repair` asks for one. One
//! round at a time. A round is one scan of the local engine building one
//! tree per peer (over the keys this node keeps with that peer, `scope`),
//! then one session with each other member of the live read layout, in
//! node-table order (`--cluster` order for the bootstrap layout)
//! ([`super::client::sync_with`]). Versions fetched from one peer update
//! the trees of the peers still to come, so a key fetched from the first
//! peer is not a difference with the second. A failed session does not
//! stop the round; the round is ok when every session was.
//!
//! A node refilling after a wipe (`--refill`, [`crate::refill`]) starts
//! rounds at once and every [`crate::refill::RETRY`] after a failed one,
//! whatever the interval; the first ok round ends the refill.

use super::Node;
use super::client::{self, Kept};
use super::local::{self, Scope};
use super::merkle::{DEPTH, Tree};
use super::repaired::Session;
use super::status::{PeerReport, RoundReport};
use crate::last_seen::now_ms;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Longest wait between two checks of the stop flag while idle.
const IDLE_CHECK: Duration = Duration::from_millis(200);

/// Runs the `ataman-rounds` thread until the node stops.
pub fn run(node: &Node<'_>) {
    let interval = node.config.anti_entropy_interval;
    let periodic = !interval.is_zero();
    let mut next_periodic = Instant::now() + interval;
    let mut next_refill = Instant::now();
    let status = &node.antientropy.status;
    while !node.stopping() {
        let now = Instant::now();
        let refilling = node.refill.active();
        let due = (periodic && now >= next_periodic) || (refilling && now >= next_refill);
        let mut wait = if periodic {
            next_periodic.saturating_duration_since(now).min(IDLE_CHECK)
        } else {
            IDLE_CHECK
        };
        if refilling {
            wait = wait.min(next_refill.saturating_duration_since(now));
        }
        let Some(number) = status.next_round(due, wait) else {
            continue;
        };
        let report = run_round(node, number);
        next_periodic = Instant::now() + interval;
        next_refill = Instant::now() + crate::refill::RETRY;
        if refilling && report.ok() {
            match node.refill.complete() {
                Ok(()) => tracing::info!(
                    round = number,
                    "refill complete (an anti-entropy round with every peer): serving reads"
                ),
                Err(e) => tracing::warn!(
                    round = number,
                    error = %e,
                    "refill complete, but not recorded; the next start refills again"
                ),
            }
        }
        status.finish(report);
    }
}

/// The peers this node compares with: every other node, unless each key
/// has a single replica (then no two nodes keep a key together).
pub fn peers(node: &Node<'_>) -> Vec<usize> {
    if node.topology.replication_factor() < 2 {
        return Vec::new();
    }
    let me = node.topology.self_index();
    (0..node.topology.len()).filter(|&i| i != me).collect()
}

/// Runs round `number` over the live read layout and reports it (a node
/// that is a member of none reports why, and the round is not ok).
pub fn run_round(node: &Node<'_>, number: u64) -> RoundReport {
    match node.read_view() {
        Ok(view) => round_with(&node.with_view(&view), number),
        Err(why) => {
            tracing::debug!(round = number, "anti-entropy round skipped: {why}");
            RoundReport {
                round: number,
                started_ms: now_ms(),
                finished_ms: now_ms(),
                error: Some(why),
                ..RoundReport::default()
            }
        }
    }
}

fn round_with(node: &Node<'_>, number: u64) -> RoundReport {
    let metrics = &node.antientropy.metrics;
    metrics.round_running.store(1, Ordering::Relaxed);
    metrics.round_peers_done.store(0, Ordering::Relaxed);
    let started = Instant::now();
    let mut report = RoundReport {
        round: number,
        started_ms: now_ms(),
        ..RoundReport::default()
    };
    let peers = peers(node);
    if !peers.is_empty() {
        match local::build_trees(node, &peers, DEPTH, None) {
            Ok(trees) => {
                let mut trees: Vec<Tree> = trees.into_iter().map(|(t, _)| t).collect();
                let scope = Scope::new(node);
                let mut done = Vec::with_capacity(peers.len());
                for (i, &peer) in peers.iter().enumerate() {
                    metrics.round_peer.store(peer as i64, Ordering::Relaxed);
                    let (synced, later) = trees.split_at_mut(i + 1);
                    let tree = &mut synced[i];
                    tree.finish();
                    // A fetched version replaces one in the trees of the
                    // peers still to come, so they do not see it as a
                    // difference (one scan per round, trees kept current).
                    let mut on_fetched = |key: &[u8], kept: Option<Kept>, new: Kept| {
                        for (tree, &other) in later.iter_mut().zip(&peers[i + 1..]) {
                            if scope.shared_with(key, other) {
                                if let Some(kept) = kept {
                                    tree.remove(key, &kept);
                                }
                                tree.add(key, &new);
                            }
                        }
                    };
                    let peer_report = client::sync_with(node, peer, tree, &mut on_fetched);
                    if peer_report.error.is_none() {
                        let session = Session {
                            started_ms: report.started_ms,
                            ended_ms: now_ms(),
                        };
                        done.push((peer_report.url.clone(), session));
                    }
                    report.peers.push(peer_report);
                    metrics.round_peers_done.fetch_add(1, Ordering::Relaxed);
                }
                record_repairs(node, &peers, &done);
            }
            Err(e) => {
                let why = format!("local scan failed: {e}");
                report.peers = peers
                    .iter()
                    .map(|&p| PeerReport {
                        url: node.topology.nodes()[p].clone(),
                        error: Some(why.clone()),
                        ..PeerReport::default()
                    })
                    .collect();
                report.error = Some(why);
            }
        }
    }
    report.finished_ms = now_ms();
    metrics.round_peer.store(-1, Ordering::Relaxed);
    metrics.round_running.store(0, Ordering::Relaxed);
    metrics.round_buckets_differing.store(0, Ordering::Relaxed);
    let counter = if report.ok() {
        &metrics.rounds_ok
    } else {
        &metrics.rounds_failed
    };
    counter.fetch_add(1, Ordering::Relaxed);
    log_round(&report, started.elapsed());
    report
}

/// Records the round's completed sessions for repair-based collection
/// (`super::horizon`), and warns of the peers no session completed with
/// within the tombstone grace: the tombstones of the keys shared with
/// them are kept past it (docs/decisions/0007).
fn record_repairs(node: &Node<'_>, peers: &[usize], done: &[(String, Session)]) {
    let Some(horizon) = node.antientropy.horizon.get() else {
        return;
    };
    horizon.follow(node.placement.get());
    let version = node.topology.version();
    if let Err(e) = horizon.record_round(version, done) {
        tracing::warn!(
            error = %e,
            "cannot write the repair records (REPAIRED); they are kept in memory until the next round"
        );
    }
    let urls: Vec<String> = peers
        .iter()
        .map(|&p| node.topology.nodes()[p].clone())
        .collect();
    let grace_ms = node.config.tombstone_grace.as_millis() as u64;
    let late = horizon.unrepaired_past_grace(version, &urls, now_ms(), grace_ms);
    node.antientropy
        .metrics
        .peers_unrepaired_past_grace
        .store(late.len() as u64, Ordering::Relaxed);
    if !late.is_empty() {
        tracing::warn!(
            peers = ?late,
            grace_ms,
            "no anti-entropy session completed with these peers within the tombstone grace:              tombstones of the keys shared with them are kept until one does (a peer gone for              good: remove it from the layout)"
        );
    }
}

/// One line per round that moved keys or failed (quiet rounds stay quiet).
fn log_round(report: &RoundReport, took: Duration) {
    let fetched: u64 = report.peers.iter().map(|p| p.keys_fetched).sum();
    let pushed: u64 = report.peers.iter().map(|p| p.keys_pushed).sum();
    if report.ok() && fetched == 0 && pushed == 0 {
        tracing::debug!(
            round = report.round,
            took_ms = took.as_millis() as u64,
            "anti-entropy round ok: the replicas agreed"
        );
        return;
    }
    for peer in &report.peers {
        if let Some(e) = &peer.error {
            tracing::warn!(
                round = report.round,
                peer = %peer.url,
                error = %e,
                "anti-entropy session with a peer failed"
            );
        }
    }
    let took_ms = took.as_millis() as u64;
    if report.ok() {
        tracing::info!(
            round = report.round,
            took_ms,
            fetched,
            pushed,
            "anti-entropy round ok: versions fetched and pushed"
        );
    } else {
        tracing::warn!(
            round = report.round,
            took_ms,
            fetched,
            pushed,
            error = report.error.as_deref().unwrap_or("a peer's session failed"),
            "anti-entropy round failed"
        );
    }
}
