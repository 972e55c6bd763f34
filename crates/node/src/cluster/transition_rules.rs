//! What a node's transition driver does next: values in, decisions out.
//!
//! Pure: the driver (`super::transition`) gathers this node's URL, the live
//! history, the version of its stored `LAYOUT` and what it has done (which
//! placement every network thread uses and since when, how far copying
//! went, which cleanup ran), asks [`decide`], and carries the actions out
//! through `Membership::update`, in the order given.
//!
//! # Rules (v = the newest committed version)
//! - **Ack.** Raise own `ack` to `v` once every network thread places
//!   writes with a placement that includes `v` (writes to the union of
//!   the live sets), and has done so for longer than the replication
//!   timeout plus [`ACK_MARGIN_MS`]. Sound: a write this node coordinates
//!   either started under such a placement (it reaches `ack` replicas in
//!   the new set too), or started before, and then it ended before the
//!   wait was over: it was acknowledged, or it was answered 504 at its
//!   deadline (start + the replication timeout) and is never acknowledged
//!   later (the coordinator answers each request once). The margin covers
//!   the coordinator's deadline check, which runs on its network thread's
//!   tick (at most 50 ms apart): an answer arriving after the deadline but
//!   before that tick still counts. So once `ack[self] >= v`, every write
//!   this node will ever acknowledge without the new set's replicas is
//!   already acknowledged, and it is in the old sets, where copying finds
//!   it. (Residual assumption: a network thread is never stalled longer
//!   than the margin between a write's deadline and its check; a
//!   coordinator that refused answers past the deadline would remove it.)
//!   The fence (`History`'s rules): the same signal says the thread
//!   refuses peer requests from a coordinator on a version older than `v`
//!   (`super::transition_state`'s contract), so a node raises its `ack`
//!   only once it refuses them.
//! - **Copy.** Start copying for `v` once `copy_may_start` (every node
//!   acked `v`) and this node may gain keys; at most one copy at a time.
//! - **Sync.** Raise own `sync` to `v` once copying for `v` completed, or
//!   at once (after every node acked) when the node gains no key.
//! - **SyncAck.** Raise own `sync_ack` to `min(sync)` when it is higher.
//! - **Prune.** Drop the old version once `min(sync_ack) >= v`.
//! - **Promote.** Once the only live version is newer than the stored
//!   `LAYOUT`, store it as `LAYOUT` (the chosen next becomes current).
//! - **Cleanup.** Once the only live version `v` is stored as `LAYOUT`
//!   (after the promotion), delete the local copies of the keys this node
//!   replicates in no live version ([`keeps`]; `History::may_delete`),
//!   once per version: a removed node, a member of none, deletes every
//!   key. Not while a copy runs, and no copy starts while it runs (see
//!   below). It waits first, from when the driver first saw `v` stored
//!   and alone, the replication timeout plus [`ACK_MARGIN_MS`] plus
//!   [`CLEANUP_MARGIN_MS`]: a peer that has not pruned yet still writes
//!   to the old sets too (harmless, reads use `v`), until it learns the
//!   prune (layout gossip, within about a round of this node: the margin
//!   is two rounds and a second) and its writes started before end. A
//!   write that lands after the cleanup began anyway (a peer stalled
//!   longer than that) is kept: a copy no read uses, outside every
//!   anti-entropy scope, deleted by the next cleanup. The driver asks the membership again just before it starts
//!   and builds what to keep from the layouts live at that moment: if a
//!   later version began meanwhile, it does not start (the cleanup of
//!   that version, once it is the only live one, deletes everything this
//!   one would have).
//!
//! # Cleanup before copy
//! A node may lose key `k` in `v+1` and gain it back in `v+2`. Its copy
//! for `v+2` compares its own copy of `k` with the sources' and fetches
//! only what it lacks: if the cleanup for `v+1` ran beside or after that
//! copy it could delete `k` once the copy had found it present. So the
//! copy and the cleanup never overlap on a node ([`Progress`]'s
//! `copy_running` and `cleanup_running`): a copy starts only once the
//! cleanup ended, and it then sees the cleaned state and fetches `k`.
//! Writes reaching the node while its cleanup runs (the writes of a
//! `v+2` that began meanwhile, to both sets) land after the purge's
//! cutoff and are kept; one applied between the driver's decision and
//! the cutoff may be deleted, and it is then fetched by that copy, which
//! starts later (every such write is acknowledged by the old sets too).

use super::history::{History, Tracker};
use super::layout::Layout;

/// Added to the replication timeout before a node raises its `ack`: the
/// coordinator checks deadlines on its network thread's tick (every
/// 50 ms at most), so a write may end a little after its deadline.
pub const ACK_MARGIN_MS: u64 = 1_000;

/// Added to the replication timeout and [`ACK_MARGIN_MS`] before a
/// cleanup starts: two layout gossip rounds (1 s each) and a second, for
/// the peers to learn the prune and stop writing to the old sets.
pub const CLEANUP_MARGIN_MS: u64 = 3_000;

/// What the node has done, as the driver tracks it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// The newest version every network thread's placement includes, and
    /// the time (ms, the driver's clock) the driver first saw it so.
    pub placement: Option<(u64, u64)>,
    /// The version a copy is running for.
    pub copy_running: Option<u64>,
    /// The newest version whose copy completed.
    pub copied: u64,
    /// The newest version whose cleanup completed (or needs none).
    pub cleaned: u64,
    /// The version a cleanup is running for.
    pub cleanup_running: Option<u64>,
    /// The newest version the driver saw stored as `LAYOUT` and the only
    /// live one, and the time (ms, the driver's clock) it first saw so.
    pub stored_since: Option<(u64, u64)>,
}

/// What the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// This node's URL.
    pub self_url: &'a str,
    /// The live history.
    pub history: &'a History,
    /// The version of the node's stored `LAYOUT`.
    pub stored_version: u64,
    /// What the node has done.
    pub progress: &'a Progress,
    /// Now, ms on the driver's clock.
    pub now_ms: u64,
    /// The replication timeout, ms: a coordinated write ends within it
    /// (and [`ACK_MARGIN_MS`]).
    pub replication_timeout_ms: u64,
    /// How long a cleanup waits once `v` is stored and alone, ms: the
    /// driver's [`cleanup_wait_ms`]. Safety does not rest on it (the
    /// model runs with 0): only how few stale copies are left.
    pub cleanup_wait_ms: u64,
}

/// The driver's cleanup wait: the replication timeout, [`ACK_MARGIN_MS`]
/// and [`CLEANUP_MARGIN_MS`].
pub fn cleanup_wait_ms(replication_timeout_ms: u64) -> u64 {
    replication_timeout_ms
        .saturating_add(ACK_MARGIN_MS)
        .saturating_add(CLEANUP_MARGIN_MS)
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Raise own tracker `which` to the version.
    Raise(Tracker, u64),
    /// Start copying what this node gains from the old version to the new one.
    StartCopy(u64),
    /// Drop the old live version.
    Prune,
    /// Store the only live version as `LAYOUT`.
    Promote(u64),
    /// Delete the local copies of the keys this node replicates in no
    /// live version (the only live one is this version).
    Cleanup(u64),
}

/// True if `node` keeps its copy of `key` while `live` are the live
/// layouts: it is one of the key's replicas in one of them. A cleanup
/// deletes exactly the keys this rejects.
pub fn keeps(live: &[Layout], node: &str, key: &[u8]) -> bool {
    live.iter().any(|l| l.replicas(key).contains(&node))
}

/// True if `node` may receive keys going from `old` to `new`. With
/// rendezvous placement a node that stays, when nodes are only added and
/// `R` does not grow, can only move down a key's ranking: it gains
/// nothing. Every other member of `new` may gain (conservative).
pub fn may_gain(old: &Layout, new: &Layout, node: &str) -> bool {
    if !new.is_member(node) {
        return false;
    }
    let only_added = old.nodes.iter().all(|n| new.is_member(n));
    !(old.is_member(node) && only_added && new.replication_factor <= old.replication_factor)
}

/// A gossiped peer's live layouts, merged: when this node is in
/// transition to `v`, the peer (`peer`, the URL its gossip names) is a
/// node of one of this node's live versions, and the peer's only live
/// layout is that same `v`, the peer pruned, which it did only after it
/// saw `min(sync_ack) >= v`; `sync_ack` only grows, so the prune is safe
/// here too. Returns the pruned history. Needed, not an optimisation: once
/// a node pruned it forgot the trackers of the nodes the new version
/// removed, and once every node that knew a removed node's `sync_ack`
/// pruned (the removed node too), nobody could tell the rest of it
/// otherwise.
///
/// Only a node of the transition's versions counts: a node waiting to
/// join holds a layout it never pruned (its seed's, `super::join`), and
/// following it would end the transition before the added nodes copied
/// (`tests/layout_change.rs`, a node joining during a transition, failed
/// so before this check).
pub fn adopt_peer_prune(history: &History, peer: &str, peer_live: &[Layout]) -> Option<History> {
    match peer_live {
        [only]
            if history.in_transition()
                && only == history.current()
                && history.all_nodes().contains(peer) =>
        {
            History::from_parts(vec![only.clone()], history.trackers().clone())
        }
        _ => None,
    }
}

/// The next actions, in order (the later ones may rely on the earlier
/// ones taking effect; the driver applies them under one lock each and
/// asks again on its next tick).
pub fn decide(i: Inputs<'_>) -> Vec<Action> {
    let h = i.history;
    let me = i.self_url;
    let v = h.current().version;
    let mut out = Vec::new();
    if h.removed(me) {
        // Not a member of any live version: nothing to track.
        return promote_and_clean(i, out);
    }
    let trackers = h.trackers();
    if let Some((placed, since)) = i.progress.placement
        && placed >= v
        && trackers.get(Tracker::Ack, me) < v
        && i.now_ms.saturating_sub(since) > i.replication_timeout_ms.saturating_add(ACK_MARGIN_MS)
    {
        out.push(Action::Raise(Tracker::Ack, v));
    }
    if let [old, new] = h.live()
        && h.copy_may_start()
        && trackers.get(Tracker::Sync, me) < v
    {
        if !may_gain(old, new, me) || i.progress.copied >= v {
            out.push(Action::Raise(Tracker::Sync, v));
        } else if i.progress.copy_running.is_none() && i.progress.cleanup_running.is_none() {
            out.push(Action::StartCopy(v));
        }
    }
    // The minima are the history's own (which nodes it waits for is its
    // rule): asked of a copy.
    let mut probe = h.clone();
    if probe.observe_synced(me) {
        out.push(Action::Raise(
            Tracker::SyncAck,
            probe.trackers().get(Tracker::SyncAck, me),
        ));
    }
    if h.clone().prune() {
        out.push(Action::Prune);
    }
    promote_and_clean(i, out)
}

/// Promotion and cleanup, once the history is settled.
fn promote_and_clean(i: Inputs<'_>, mut out: Vec<Action>) -> Vec<Action> {
    let h = i.history;
    let v = h.current().version;
    if h.in_transition() {
        return out;
    }
    let p = i.progress;
    let waited = p.stored_since.is_some_and(|(stored, since)| {
        stored == v && i.now_ms.saturating_sub(since) >= i.cleanup_wait_ms
    });
    if i.stored_version < v {
        out.push(Action::Promote(v));
    } else if p.cleaned < v && waited && p.copy_running.is_none() && p.cleanup_running.is_none() {
        out.push(Action::Cleanup(v));
    }
    out
}

#[cfg(test)]
#[path = "transition_rules_tests.rs"]
mod tests;
