//! The live layouts and the trackers that say how far each node is with a
//! transition: which versions writes go to, which version reads use, when
//! copying may start, when the old version is dropped and what a node may
//! delete.
//!
//! Pure logic, no I/O: the node (and the simulation) feed it committed
//! layouts and tracker values, and ask it for decisions.
//!
//! # Trackers
//! Three numbers per node, each only growing, merged by maximum, so they
//! are gossiped without consensus (a node missing from a tracker counts as
//! version 0):
//! - `ack[n]`: the highest version node `n` writes to. It raises it once it
//!   knows the version, no longer starts writes that skip the version's
//!   replicas, and its writes started before that are all done.
//! - `sync[n]`: the highest version whose data `n` has fully received
//!   (copying done for every key it gains).
//! - `sync_ack[n]`: the highest version `n` has seen synced by every node.
//!
//! Beside them, `dead[n]`: the newest version for whose transition the
//! operator declared `n`, a node that version removes, dead (its data is
//! lost: copies skip it, `super::copy_completion`). It only grows and is
//! merged by maximum like the trackers, so it spreads without consensus
//! (a declaration cannot conflict with another), and each node stores it
//! (`super::dead_record`).
//!
//! # Rules
//! - The live versions are the newest committed one and, during a
//!   transition, the one before it: one transition at a time
//!   ([`History::begin`] refuses a version past current + 1, and a new one
//!   while a transition is under way).
//! - "Every node" is every member of the newest version ([`History::counted_nodes`]):
//!   a node the newest version removes is not waited for in the
//!   trackers (but for the prune, below, unless declared dead), so a
//!   dead node can be removed or replaced. That is safe
//!   because of the fence and the copy: a node that knows a version
//!   refuses peer requests from a coordinator on an older one, and a
//!   node raises its `ack` only once it refuses them. So once copying
//!   starts (every counted node acked), a removed node that has not
//!   learned the change yet can get a write acknowledged on the old
//!   version only by itself (a local write) and by other removed nodes
//!   that do not know the change either, each before its own `ack`. The
//!   copy reads every old replica, removed ones included, and counts a
//!   removed one only once its `ack` was known before the read (the
//!   rule "Leaving not acked" of `super::copy_completion`), so it finds
//!   every such write, until the node answers or the operator declares
//!   it dead. (The argument before that rule assumed some other replica
//!   knew the change; with `ack = 1`, or a key whose old replicas all
//!   leave, none need.)
//! - Writes go to each live version's replica set of the key and need
//!   `ack` acknowledgements in each set ([`History::write_sets`]).
//! - Copying for version `v` may start once `min(ack) >= v`: from then on
//!   every write acknowledged earlier is in the old sets, and every later
//!   one reaches the new sets too ([`History::copy_may_start`]).
//! - Reads use the newest live version `v` with `min(sync) >= v`, else the
//!   oldest live version ([`History::read_layout`]).
//! - The old version is dropped once `min(sync_ack) >= new version` over
//!   the counted nodes and the removed ones not declared dead
//!   ([`History::prune_nodes`], [`History::prune`]); only then may a node
//!   delete the copies of keys it no longer replicates
//!   ([`History::may_delete`]). The removed nodes count here because a
//!   leaving node still serves clients until it drops the old version: a
//!   pruned node writes to the new sets only, so a leaving node that had
//!   not seen every node synced would read the old sets and miss those
//!   writes (stale reads on the simulation's `--shrink` seeds 518, 532
//!   and 1795). A leaving node's `sync_ack >= v` says it reads the new
//!   sets. It costs no liveness the copy does not already take: the copy
//!   waits for every leaving node not declared dead
//!   (`super::copy_completion`).

use super::layout::Layout;
use std::collections::{BTreeMap, BTreeSet};

/// Which tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tracker {
    /// The version a node writes to.
    Ack,
    /// The version whose data a node has received.
    Sync,
    /// The version a node saw synced everywhere.
    SyncAck,
}

/// Every node's three trackers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trackers {
    /// `ack[node]`.
    pub ack: BTreeMap<String, u64>,
    /// `sync[node]`.
    pub sync: BTreeMap<String, u64>,
    /// `sync_ack[node]`.
    pub sync_ack: BTreeMap<String, u64>,
    /// `dead[node]`: the newest version for whose transition the operator
    /// declared `node` dead (see the module header).
    pub dead: BTreeMap<String, u64>,
}

impl Trackers {
    fn map(&self, which: Tracker) -> &BTreeMap<String, u64> {
        match which {
            Tracker::Ack => &self.ack,
            Tracker::Sync => &self.sync,
            Tracker::SyncAck => &self.sync_ack,
        }
    }

    fn map_mut(&mut self, which: Tracker) -> &mut BTreeMap<String, u64> {
        match which {
            Tracker::Ack => &mut self.ack,
            Tracker::Sync => &mut self.sync,
            Tracker::SyncAck => &mut self.sync_ack,
        }
    }

    /// `which[node]` (0 when unknown).
    pub fn get(&self, which: Tracker, node: &str) -> u64 {
        self.map(which).get(node).copied().unwrap_or(0)
    }

    /// Raises `which[node]` to `version`; returns whether it grew.
    pub fn raise(&mut self, which: Tracker, node: &str, version: u64) -> bool {
        raise_in(self.map_mut(which), node, version)
    }

    /// Merges `other` in by maximum; returns whether anything grew.
    pub fn merge(&mut self, other: &Trackers) -> bool {
        let mut grew = false;
        for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            for (node, &v) in other.map(which) {
                grew |= self.raise(which, node, v);
            }
        }
        for (node, &v) in &other.dead {
            grew |= raise_in(&mut self.dead, node, v);
        }
        grew
    }

    /// The minimum of `which` over `nodes` (0 when one is unknown).
    pub fn min_over<'a>(&self, which: Tracker, nodes: impl IntoIterator<Item = &'a String>) -> u64 {
        nodes
            .into_iter()
            .map(|n| self.get(which, n))
            .min()
            .unwrap_or(0)
    }

    /// Drops the entries of nodes not in `keep`.
    fn retain(&mut self, keep: &BTreeSet<String>) {
        for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            self.map_mut(which).retain(|n, _| keep.contains(n));
        }
        self.dead.retain(|n, _| keep.contains(n));
    }
}

/// Raises `map[node]` to `version`; returns whether it grew.
fn raise_in(map: &mut BTreeMap<String, u64>, node: &str, version: u64) -> bool {
    let slot = map.entry(node.to_owned()).or_insert(0);
    if version > *slot {
        *slot = version;
        true
    } else {
        false
    }
}

/// Why a node cannot be declared dead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeadError {
    /// No transition is under way (409): nothing waits for any node.
    #[error("no transition is under way (the current version is {current})")]
    NotInTransition {
        /// The current version.
        current: u64,
    },
    /// The transition under way is to another version (409).
    #[error("the transition under way is to version {underway}, not {asked}")]
    OtherVersion {
        /// The version under way.
        underway: u64,
        /// The version named.
        asked: u64,
    },
    /// Not a node the new version removes (400): a member stays a copy
    /// source the new version needs, and a stranger holds nothing.
    #[error(
        "node {0} is not a node the transition removes: only a leaving node can be declared dead"
    )]
    NotLeaving(String),
}

/// Why a layout cannot be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// Not current + 1 (409).
    #[error("version {got} is not the next one (current {current})")]
    NotNext {
        /// The current version.
        current: u64,
        /// The one given.
        got: u64,
    },
    /// A transition to `to` is under way (409).
    #[error("the transition to version {to} is under way")]
    Underway {
        /// Its version.
        to: u64,
    },
}

/// The live layouts (oldest first) and the trackers.
///
/// # Invariants
/// - One or two live versions, consecutive.
/// - Trackers never exceed the newest version, and only name nodes of a
///   live version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    live: Vec<Layout>,
    trackers: Trackers,
}

impl History {
    /// A settled history at `layout`: every member is at its version on
    /// every tracker (a bootstrapped cluster has nothing to move).
    pub fn settled(layout: Layout) -> Self {
        let mut trackers = Trackers::default();
        for node in &layout.nodes {
            for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
                trackers.raise(which, node, layout.version);
            }
        }
        History {
            live: vec![layout],
            trackers,
        }
    }

    /// A history from its parts (a restart: what the node stored).
    pub fn from_parts(live: Vec<Layout>, trackers: Trackers) -> Option<Self> {
        let ok = matches!(live.len(), 1 | 2)
            && live.windows(2).all(|w| w[1].version == w[0].version + 1);
        ok.then(|| {
            let mut h = History { live, trackers };
            h.trim_trackers();
            h
        })
    }

    /// The newest committed layout.
    pub fn current(&self) -> &Layout {
        &self.live[self.live.len() - 1]
    }

    /// The live layouts, oldest first.
    pub fn live(&self) -> &[Layout] {
        &self.live
    }

    /// The trackers.
    pub fn trackers(&self) -> &Trackers {
        &self.trackers
    }

    /// True during a transition (two live versions).
    pub fn in_transition(&self) -> bool {
        self.live.len() > 1
    }

    /// Every member of a live version, sorted.
    pub fn all_nodes(&self) -> BTreeSet<String> {
        self.live
            .iter()
            .flat_map(|l| l.nodes.iter().cloned())
            .collect()
    }

    /// The nodes whose trackers a decision waits for: every member of a
    /// live version except those the newest version removes (see the
    /// module's rules: a removed node may be dead, and the fence keeps it
    /// from mattering).
    pub fn counted_nodes(&self) -> BTreeSet<String> {
        let current = self.current();
        self.all_nodes()
            .into_iter()
            .filter(|n| current.is_member(n))
            .collect()
    }

    /// The nodes whose `sync_ack` the prune waits for: the counted nodes
    /// and those the newest version removes that are not declared dead
    /// (the module's rules).
    pub fn prune_nodes(&self) -> BTreeSet<String> {
        let current = self.current();
        self.all_nodes()
            .into_iter()
            .filter(|n| current.is_member(n) || !self.declared_dead(n))
            .collect()
    }

    fn min(&self, which: Tracker) -> u64 {
        let nodes = self.counted_nodes();
        self.trackers.min_over(which, &nodes)
    }

    fn trim_trackers(&mut self) {
        let keep = self.all_nodes();
        self.trackers.retain(&keep);
        let newest = self.current().version;
        for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            for v in self.trackers.map_mut(which).values_mut() {
                *v = (*v).min(newest);
            }
        }
        for v in self.trackers.dead.values_mut() {
            *v = (*v).min(newest);
        }
    }

    /// Installs the committed `next`: the same version again is a no-op
    /// (`Ok(false)`); current + 1 starts a transition (`Ok(true)`) unless
    /// one is under way.
    pub fn begin(&mut self, next: Layout) -> Result<bool, TransitionError> {
        let current = self.current().version;
        if next.version == current && next == *self.current() {
            return Ok(false);
        }
        if next.version != current + 1 {
            return Err(TransitionError::NotNext {
                current,
                got: next.version,
            });
        }
        if self.in_transition() {
            return Err(TransitionError::Underway { to: current });
        }
        self.live.push(next);
        Ok(true)
    }

    /// Raises `which[node]` (capped at the newest version; nodes of no live
    /// version are ignored); returns whether it grew.
    pub fn raise(&mut self, which: Tracker, node: &str, version: u64) -> bool {
        if !self.live.iter().any(|l| l.is_member(node)) {
            return false;
        }
        let version = version.min(self.current().version);
        self.trackers.raise(which, node, version)
    }

    /// Merges gossiped trackers; returns whether anything grew.
    pub fn merge(&mut self, other: &Trackers) -> bool {
        let mut grew = false;
        for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            for (node, &v) in other.map(which) {
                grew |= self.raise(which, node, v);
            }
        }
        for (node, &v) in &other.dead {
            if self.removed_by_current(node) {
                let v = v.min(self.current().version);
                grew |= raise_in(&mut self.trackers.dead, node, v);
            }
        }
        grew
    }

    /// True if `node` is a member of the old live version and not of the
    /// new one: the transition under way removes it.
    fn removed_by_current(&self, node: &str) -> bool {
        match self.live.as_slice() {
            [old, new] => old.is_member(node) && !new.is_member(node),
            _ => false,
        }
    }

    /// The operator's word that `node`, which the transition to `version`
    /// (the one under way) removes, is dead: copies for it skip the node
    /// (`super::copy_completion`). `Ok(true)` when newly declared.
    pub fn declare_dead(&mut self, node: &str, version: u64) -> Result<bool, DeadError> {
        let current = self.current().version;
        if !self.in_transition() {
            return Err(DeadError::NotInTransition { current });
        }
        if version != current {
            return Err(DeadError::OtherVersion {
                underway: current,
                asked: version,
            });
        }
        if !self.removed_by_current(node) {
            return Err(DeadError::NotLeaving(node.to_owned()));
        }
        Ok(raise_in(&mut self.trackers.dead, node, current))
    }

    /// [`History::declare_dead`] for every one of `nodes`, stopping at
    /// the first refusal. `Ok(true)` when one was newly declared.
    pub fn declare_dead_all(&mut self, nodes: &[String], version: u64) -> Result<bool, DeadError> {
        let mut grew = false;
        for node in nodes {
            grew |= self.declare_dead(node, version)?;
        }
        Ok(grew)
    }

    /// True if the operator declared `node` dead for the transition under way.
    pub fn declared_dead(&self, node: &str) -> bool {
        self.in_transition()
            && self.removed_by_current(node)
            && self.trackers.dead.get(node).copied().unwrap_or(0) >= self.current().version
    }

    /// The nodes declared dead for the transition under way, sorted.
    pub fn dead_nodes(&self) -> Vec<String> {
        self.trackers
            .dead
            .keys()
            .filter(|n| self.declared_dead(n))
            .cloned()
            .collect()
    }

    /// `node` saw every node synced: raises its `sync_ack` to `min(sync)`.
    pub fn observe_synced(&mut self, node: &str) -> bool {
        let synced = self.min(Tracker::Sync);
        self.raise(Tracker::SyncAck, node, synced)
    }

    /// Each live version's replica set of `key` (oldest version first):
    /// a write needs `ack` acknowledgements in each.
    pub fn write_sets(&self, key: &[u8]) -> Vec<Vec<&str>> {
        self.live.iter().map(|l| l.replicas(key)).collect()
    }

    /// The layout reads use: the newest live version every node synced.
    pub fn read_layout(&self) -> &Layout {
        let synced = self.min(Tracker::Sync);
        self.live
            .iter()
            .rev()
            .find(|l| synced >= l.version)
            .unwrap_or(&self.live[0])
    }

    /// True once copying for the newest version may start (and during a
    /// transition only).
    pub fn copy_may_start(&self) -> bool {
        self.in_transition() && self.min(Tracker::Ack) >= self.current().version
    }

    /// Drops the old version once every node saw the new one synced;
    /// returns whether it did.
    pub fn prune(&mut self) -> bool {
        let synced = self
            .trackers
            .min_over(Tracker::SyncAck, &self.prune_nodes());
        if !self.in_transition() || synced < self.current().version {
            return false;
        }
        self.live.remove(0);
        self.trim_trackers();
        true
    }

    /// Settled: no transition under way.
    pub fn is_settled(&self) -> bool {
        !self.in_transition()
    }

    /// True if `node` may delete its copy of `key`: no transition is under
    /// way and it is not one of the key's replicas.
    pub fn may_delete(&self, node: &str, key: &[u8]) -> bool {
        !self.in_transition() && !self.current().replicas(key).contains(&node)
    }

    /// True if `node` receives `key` in the transition: a replica of it in
    /// the new version and not in the old one.
    pub fn gains(&self, node: &str, key: &[u8]) -> bool {
        match self.live.as_slice() {
            [old, new] => new.replicas(key).contains(&node) && !old.replicas(key).contains(&node),
            _ => false,
        }
    }

    /// Where a node that gains `key` copies it from: every old replica,
    /// the ones that give the key up first. Copying is complete only once
    /// the gaining node merged what every reachable one holds: a write
    /// acknowledged by `ack` old replicas may have missed any one of them,
    /// so one source alone is not enough.
    pub fn sources(&self, key: &[u8]) -> Vec<&str> {
        let [old, new] = self.live.as_slice() else {
            return Vec::new();
        };
        let keeps = new.replicas(key);
        let was = old.replicas(key);
        let mut out: Vec<&str> = was.iter().copied().filter(|n| !keeps.contains(n)).collect();
        out.extend(was.iter().copied().filter(|n| keeps.contains(n)));
        out
    }

    /// True if `node` is a member of no live version: it was removed, and
    /// (the history being settled or not) no read needs it.
    pub fn removed(&self, node: &str) -> bool {
        !self.live.iter().any(|l| l.is_member(node))
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
