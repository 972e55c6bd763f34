//! Layout transitions in a run, with the node's own pure rules
//! (`ataman_node::cluster::history` and `node_table`) deciding every
//! request's replica sets on every node. Version 2 is committed once a
//! third of the workload was answered; it is the change an operator's
//! `POST /v0/layout` makes:
//! - `--grow` (`add=`): the last node starts outside the layout (version 1
//!   holds the others) and version 2 adds it;
//! - `--shrink N` (`remove=`): version 1 holds every node, version 2 all
//!   but the last `N`. When version 2 is committed the leaving nodes are
//!   cut off from the staying ones (both ways, for [`LEAVING_CUT_MS`]),
//!   so the staying nodes' copy runs while its leaving sources do not
//!   answer, and a key whose every old replica leaves (`R` of them) is
//!   held by them alone.
//!
//! What each node does, every [`MEMBERSHIP_TICK_MS`] while it is up:
//! - Joining: the added node starts as a node started with `--join` does:
//!   no member, no node id, so its clock stamps nothing and it refuses
//!   every client request (the node's membership gate).
//! - Learning: one node of version 2 learns it when it is committed; the
//!   others learn it from any peer they exchange with (gossip below). The
//!   added node takes its node id from version 2 when it learns it (the
//!   planted bug `joined-takes-id-zero` gives it id 0 instead, as the
//!   start-up list's position once did). A node that
//!   learns it waits until every write it started before is answered, then
//!   raises its `ack` tracker.
//! - Gossip: two random nodes that reach each other both ways exchange
//!   their layout and trackers (merged by maximum); a node in transition
//!   follows a peer that pruned (`transition_rules::adopt_peer_prune`,
//!   as the node's layout gossip does).
//! - Copying: once its view says copying may start, a node that gains keys
//!   merges what EVERY old replica of each such key holds (tombstones
//!   included), then raises its `sync` tracker; a source down or cut off
//!   postpones the whole copy to a later tick (it is repeated whole, so a
//!   crash of either side only delays it), as the node's own rule
//!   (`ataman_node::cluster::copy_completion`) decides: a leaving source
//!   is waited for too (no node is declared dead here), and counts only
//!   once its `ack` for version 2 is in the copying node's view (the copy
//!   reads every source in one tick, so after that). The planted bug
//!   `copy-skips-partitioned-leaving-node` asks the rule's planted mode
//!   instead, which completes the copy without leaving sources it cannot
//!   reach; `copy-ignores-leaving-ack` the mode that reads a leaving
//!   source before its `ack` is known. A leaving node gains nothing: it
//!   raises `sync` at once.
//! - It raises `sync_ack` once it sees every node synced, drops the old
//!   version once every node did (the leaving ones too, as
//!   `History::prune_nodes` says), and only then, after the node's cleanup
//!   wait (`transition_rules::cleanup_wait_ms`), deletes the copies it no
//!   longer replicates (a mask over its engine, `SimNode::drop_copy`): a
//!   removed node, once it dropped version 1, deletes every copy and has
//!   no node id (it stamps nothing and serves no client).
//!
//! Layouts and trackers survive crashes (the real node keeps them on disk).
//! The consensus that commits version 2 is not simulated (its rules are
//! tested in `cluster::agreement`); nor are hints redirected from a node
//! that stopped replicating a key (cleanup drops whatever they bring back),
//! nor `dead=` declarations (a node declared dead loses, by the operator's
//! choice, what only it held, which this checker would rightly report).

use super::{Event, Sim};
use crate::config::{PlantedBug, REPLICATION_TIMEOUT_MS};
use crate::history::{Happening, OpId, OpResult};
use ataman_node::cluster::copy_completion::{Completion, Mode, Source, WaitReason, decide};
use ataman_node::cluster::history::{History, Tracker};
use ataman_node::cluster::layout::{Change, Layout};
use ataman_node::cluster::node_table::{NodeTable, Placed};
use ataman_node::cluster::placement;
use ataman_node::cluster::transition_rules;
use ataman_node::peer::frame::Stamped;

/// How often every node runs its membership work, ms.
pub const MEMBERSHIP_TICK_MS: u64 = 25;

/// Shortest and longest time the leaving nodes of a `--shrink` run are cut
/// off from the staying ones once version 2 is committed, ms: longer than
/// a request's timeout ([`crate::config::REPLICATION_TIMEOUT_MS`]), so the
/// staying nodes ack version 2 and try their copy while it lasts.
pub const LEAVING_CUT_MS: (u64, u64) = (2_000, 8_000);

/// The URLs of a run's nodes when its layout changes (placement hashes them).
pub fn node_urls(nodes: usize) -> Vec<String> {
    (0..nodes).map(|i| format!("http://sim-node-{i}")).collect()
}

/// One node's view of the layout.
#[derive(Debug, Clone)]
pub struct View {
    /// Its live layouts and trackers.
    pub history: History,
    /// The same in node indices.
    placed: Placed,
    /// While it waits to ack the newest version: the writes it started before.
    old_writes: Option<Vec<OpId>>,
    /// When it dropped the old version (its cleanup waits from then).
    pruned_at_ms: Option<u64>,
}

/// The layout transition of a run.
#[derive(Debug)]
pub struct Membership {
    urls: Vec<String>,
    table: NodeTable,
    next: Layout,
    committed: bool,
    views: Vec<View>,
    /// Members of version 1 and of version 2: each a prefix of the nodes.
    old_members: usize,
    new_members: usize,
    /// Versions copied to gaining nodes.
    pub copied: u64,
    /// Copies dropped by cleanups.
    pub dropped: u64,
    /// Ticks in which a node's copy waited for a leaving source.
    pub copy_waits: u64,
    /// Copies completed without a leaving source (the planted rule only).
    pub copy_skips: u64,
}

impl Membership {
    /// `--grow`: version 1 of all nodes but the last, version 2 of all
    /// (`add=` the last); R `replicas`.
    pub fn grow(nodes: usize, replicas: usize) -> Result<Membership, String> {
        let urls = node_urls(nodes);
        let change = Change {
            add: urls[nodes - 1..].to_vec(),
            ..Change::default()
        };
        Membership::change(urls, nodes - 1, replicas, &change)
    }

    /// `--shrink`: version 1 of all nodes, version 2 without the last
    /// `leaving` (`remove=` them); R `replicas`.
    pub fn shrink(nodes: usize, replicas: usize, leaving: usize) -> Result<Membership, String> {
        let urls = node_urls(nodes);
        let stay = nodes
            .checked_sub(leaving)
            .ok_or_else(|| format!("cannot remove {leaving} of {nodes} nodes"))?;
        let change = Change {
            remove: urls[stay..].to_vec(),
            ..Change::default()
        };
        Membership::change(urls, nodes, replicas, &change)
    }

    /// Version 1 of the first `first_members` of `urls`, version 2 what
    /// `change` makes of it (the change the operator's `POST /v0/layout`
    /// makes: the node's own rule gives an added node its id).
    fn change(
        urls: Vec<String>,
        first_members: usize,
        replicas: usize,
        change: &Change,
    ) -> Result<Membership, String> {
        let nodes = urls.len();
        let first =
            Layout::new(1, urls[..first_members].to_vec(), replicas).map_err(|e| e.to_string())?;
        let next = first.apply(change).map_err(|e| e.to_string())?;
        // Both versions hold a prefix of the nodes (what `scope_seeds`
        // and the checker's placement rely on).
        let new_members = next.nodes.len();
        if next.nodes[..] != urls[..new_members] {
            return Err(format!(
                "version 2 is not a prefix of the nodes: {:?}",
                next.nodes
            ));
        }
        let mut table = NodeTable::new(&urls);
        let history = History::settled(first);
        let placed = Placed::new(&history, &mut table);
        let view = View {
            history,
            placed,
            old_writes: None,
            pruned_at_ms: None,
        };
        Ok(Membership {
            views: vec![view; nodes],
            urls,
            table,
            next,
            committed: false,
            old_members: first_members,
            new_members,
            copied: 0,
            dropped: 0,
            copy_waits: 0,
            copy_skips: 0,
        })
    }

    /// Members of the final layout (version 2): the first this many nodes.
    pub fn final_members(&self) -> usize {
        self.new_members
    }

    /// The nodes version 2 removes (empty unless `--shrink`).
    pub fn leaving(&self) -> std::ops::Range<usize> {
        self.new_members..self.old_members.max(self.new_members)
    }

    /// The node id `node` holds in its view (none: not a member of any
    /// live layout it knows).
    pub fn node_id(&self, node: usize) -> Option<u16> {
        let url = &self.urls[node];
        let live = self.views[node].history.live();
        live.iter().rev().find_map(|l| l.id_of(url))
    }

    fn refresh(&mut self, node: usize) {
        let view = &mut self.views[node];
        view.placed = Placed::new(&view.history, &mut self.table);
    }

    /// True once every node's view holds only version 2.
    pub fn settled(&self) -> bool {
        self.committed
            && self
                .views
                .iter()
                .all(|v| v.history.is_settled() && v.history.current().version == self.next.version)
    }

    /// The placement seeds anti-entropy uses: version 1's members (a
    /// prefix of the nodes) until every node dropped version 1, then
    /// version 2's.
    pub fn scope_seeds<'a>(&self, all: &'a [u64]) -> &'a [u64] {
        if self.settled() {
            &all[..self.new_members]
        } else {
            &all[..self.old_members]
        }
    }
}

impl Sim {
    /// A request's replicas and the sets `ack` is needed in (empty: one set).
    pub(super) fn replicas_for(
        &self,
        coordinator: usize,
        key: &[u8],
        write: bool,
    ) -> (Vec<usize>, Vec<Vec<usize>>) {
        let Some(m) = &self.membership else {
            let replicas = placement::rank_with_seeds(&self.seeds, key, self.config.replicas);
            return (replicas, Vec::new());
        };
        let placed = &m.views[coordinator].placed;
        let bug = self.config.planted_bug;
        let pick = |sets: &[Vec<usize>], replicas: &[usize], which: usize| -> Vec<usize> {
            sets[which].iter().map(|&p| replicas[p]).collect()
        };
        if write {
            let w = placed.write(key);
            if bug == Some(PlantedBug::WritesSkipNew) && w.sets.len() > 1 {
                return (pick(&w.sets, &w.replicas, 0), Vec::new());
            }
            (w.replicas, w.sets)
        } else if bug == Some(PlantedBug::ReadsBeforeSync) {
            let w = placed.write(key);
            (pick(&w.sets, &w.replicas, w.sets.len() - 1), Vec::new())
        } else {
            (placed.read(key).replicas, Vec::new())
        }
    }

    /// Node `node` learns version 2 (a no-op if it knows it).
    fn learn(&mut self, node: usize) {
        let waiting = self.nodes[node].driver.waiting();
        let Some(m) = self.membership.as_mut() else {
            return;
        };
        if m.views[node].history.begin(m.next.clone()) == Ok(true) {
            let old: Vec<OpId> = waiting
                .into_iter()
                .filter(|&op| self.history.ops[op].is_write())
                .collect();
            m.views[node].old_writes = Some(old);
            m.refresh(node);
            let was = self.nodes[node].node_id();
            let id = match (self.config.planted_bug, was) {
                // The planted bug: the joined node takes id 0.
                (Some(PlantedBug::JoinedTakesIdZero), None) => Some(0),
                _ => m.node_id(node),
            };
            self.nodes[node].set_node_id(id);
        }
    }

    pub(super) fn membership_tick(&mut self) {
        if self.membership.is_none() {
            return;
        }
        self.world
            .schedule(MEMBERSHIP_TICK_MS, Event::MembershipTick);
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_up())
            .collect();
        let Some(m) = self.membership.as_ref() else {
            return;
        };
        let (committed, members) = (m.committed, m.final_members());
        if !committed {
            // A member of version 2 learns it first (the consensus that
            // commits it runs among its members).
            let learners: Vec<usize> = up.iter().copied().filter(|&i| i < members).collect();
            if (self.ops_done >= self.config.steps / 3 || self.healing)
                && let Some(&first) = self.world.rng.pick(&learners)
            {
                if let Some(m) = self.membership.as_mut() {
                    m.committed = true;
                }
                self.fault_record(format!(
                    "layout: version 2 committed, learned by node {first}"
                ));
                self.learn(first);
                self.cut_off_leaving();
            }
            return;
        }
        if up.len() >= 2 {
            let a = up[self.world.rng.index(up.len())];
            let b = up[self.world.rng.index(up.len())];
            let now = self.now();
            if a != b && !self.network.is_cut(a, b, now) && !self.network.is_cut(b, a, now) {
                self.gossip(a, b);
            }
        }
        for node in up {
            self.membership_work(node);
        }
    }

    /// Cuts the nodes version 2 removes off from the staying ones, both
    /// ways, for a time drawn from [`LEAVING_CUT_MS`] (not once healing:
    /// the heal phase injects nothing).
    fn cut_off_leaving(&mut self) {
        let Some(m) = self.membership.as_ref() else {
            return;
        };
        let leaving = m.leaving();
        if leaving.is_empty() || self.healing {
            return;
        }
        let cut_ms = self.between(LEAVING_CUT_MS);
        let now = self.now();
        for gone in leaving.clone() {
            for stay in 0..leaving.start {
                self.network.cut(gone, stay, now + cut_ms, now);
                self.network.cut(stay, gone, now + cut_ms, now);
            }
        }
        self.count_fault("leaving nodes cut off");
        self.fault_record(format!(
            "layout: leaving nodes {leaving:?} cut off from the others for {cut_ms} ms"
        ));
    }

    fn gossip(&mut self, a: usize, b: usize) {
        let Some(m) = self.membership.as_ref() else {
            return;
        };
        let (va, vb) = (
            m.views[a].history.current().version,
            m.views[b].history.current().version,
        );
        if va > vb {
            self.learn(b);
        } else if vb > va {
            self.learn(a);
        }
        let Some(m) = self.membership.as_mut() else {
            return;
        };
        let ta = m.views[a].history.trackers().clone();
        let tb = m.views[b].history.trackers().clone();
        if m.views[a].history.merge(&tb) {
            m.refresh(a);
        }
        if m.views[b].history.merge(&ta) {
            m.refresh(b);
        }
        // A peer that pruned is followed, as the node's layout gossip does
        // (`transition_rules::adopt_peer_prune`): a pruned node forgot the
        // trackers of the nodes version 2 removes, so nobody else might
        // learn a removed node's last `sync_ack`.
        let now = self.now();
        for (me, peer) in [(a, b), (b, a)] {
            let Some(m) = self.membership.as_mut() else {
                return;
            };
            let peer_live = m.views[peer].history.live().to_vec();
            let peer_url = m.urls[peer].clone();
            if let Some(pruned) =
                transition_rules::adopt_peer_prune(&m.views[me].history, &peer_url, &peer_live)
            {
                m.views[me].history = pruned;
                m.views[me].pruned_at_ms = Some(now);
                m.refresh(me);
            }
        }
    }

    /// Node `node`'s own steps: ack, copy, sync_ack, prune, cleanup.
    fn membership_work(&mut self, node: usize) {
        let Some(m) = self.membership.as_mut() else {
            return;
        };
        let url = m.urls[node].clone();
        let view = &mut m.views[node];
        if let Some(old) = &view.old_writes
            && old
                .iter()
                .all(|&op| self.history.ops[op].result != OpResult::Pending)
        {
            view.old_writes = None;
            let version = view.history.current().version;
            view.history.raise(Tracker::Ack, &url, version);
            m.refresh(node);
        }
        self.copy(node);
        let Some(m) = self.membership.as_mut() else {
            return;
        };
        let view = &mut m.views[node];
        let mut changed = view.history.observe_synced(&url);
        let pruned = view.history.prune();
        if pruned {
            view.pruned_at_ms = Some(self.world.now_ms());
        }
        changed |= pruned;
        let removed = view.history.removed(&url);
        if changed {
            m.refresh(node);
        }
        if removed && self.nodes[node].node_id().is_some() {
            // A removed node has no node id: it stamps nothing, and its
            // membership gate refuses clients.
            self.nodes[node].set_node_id(None);
        }
        self.cleanup(node, false);
    }

    /// Copies every key `node` gains from every old replica, then raises its sync.
    fn copy(&mut self, node: usize) {
        let Some(m) = self.membership.as_ref() else {
            return;
        };
        let h = &m.views[node].history;
        let url = m.urls[node].clone();
        let version = h.current().version;
        if !h.copy_may_start() || h.trackers().get(Tracker::Sync, &url) >= version {
            return;
        }
        if !h.current().is_member(&url) {
            // A leaving node gains nothing (`transition_rules::may_gain`).
            if let Some(m) = self.membership.as_mut() {
                m.views[node].history.raise(Tracker::Sync, &url, version);
                m.refresh(node);
            }
            return;
        }
        let old = h.live()[0].clone();
        let sources: Vec<(usize, String)> = old
            .nodes
            .iter()
            .filter_map(|u| m.table.index(u).map(|i| (i, u.clone())))
            .filter(|&(s, _)| s != node)
            .collect();
        let h = h.clone();
        let now = self.now();
        let reachable = |s: usize| {
            self.nodes[s].is_up()
                && !self.network.is_cut(s, node, now)
                && !self.network.is_cut(node, s, now)
        };
        // Whether the copy may complete is the node's own rule: a source
        // down or cut off is waited for (a leaving one too: nothing is
        // declared dead here), so a later tick copies, whole; the planted
        // mode skips leaving sources that do not answer.
        let mode = match self.config.planted_bug {
            Some(PlantedBug::CopySkipsPartitionedLeavingNode) => Mode::PlantedSkipsLeaving,
            Some(PlantedBug::CopyIgnoresLeavingAck) => Mode::PlantedIgnoresLeavingAck,
            _ => Mode::Sound,
        };
        let facts: Vec<Source<'_>> = sources
            .iter()
            .map(|(s, url)| Source {
                url,
                finished: reachable(*s),
                leaving: !h.current().is_member(url),
                declared_dead: h.declared_dead(url),
                // The copy below reads every source in this tick, so a
                // source's ack known now was known before its pass.
                acked: h.trackers().get(Tracker::Ack, url) >= version,
            })
            .collect();
        let leaving_skipped = match decide(&facts, mode) {
            Completion::Waiting(waits) => {
                let leaving = waits.iter().any(|w| {
                    matches!(
                        w.reason,
                        WaitReason::LeavingSourceNotAnswering | WaitReason::LeavingSourceNotAcked
                    )
                });
                if let Some(m) = self.membership.as_mut() {
                    m.copy_waits += u64::from(leaving);
                }
                return;
            }
            Completion::Complete { skipped } => !skipped.is_empty(),
        };
        let sources: Vec<(usize, String)> =
            sources.into_iter().filter(|&(s, _)| reachable(s)).collect();
        for (s, source) in sources {
            let Ok(state) = self.nodes[s].state() else {
                self.check_disk(s);
                return;
            };
            let items: Vec<(Vec<u8>, Stamped)> = state
                .into_iter()
                .filter(|(key, _)| {
                    h.gains(&url, key) && old.replicas(key).contains(&source.as_str())
                })
                .collect();
            let wanted = items.len();
            match self.nodes[node].apply_versions(now, items) {
                Ok(written) => {
                    let complete = written.len() == wanted;
                    if let Some(m) = self.membership.as_mut() {
                        m.copied += written.len() as u64;
                    }
                    for (key, ts) in written {
                        self.replica_wrote(node, key, ts);
                    }
                    if !complete {
                        return; // a clock refused a version: a later tick tries again
                    }
                }
                Err(_) => {
                    self.check_disk(node);
                    return;
                }
            }
        }
        if let Some(m) = self.membership.as_mut() {
            m.copy_skips += u64::from(leaving_skipped);
            m.views[node].history.raise(Tracker::Sync, &url, version);
            m.refresh(node);
        }
    }

    /// Drops the copies `node` may delete: only once its view is settled
    /// and, unless `quiet` (the run's end: nothing in flight), the node's
    /// cleanup wait (`transition_rules::cleanup_wait_ms`) has passed since
    /// its prune; the cleanup-early bug skips both.
    fn cleanup(&mut self, node: usize, quiet: bool) {
        let Some(m) = self.membership.as_ref() else {
            return;
        };
        let h = &m.views[node].history;
        let url = &m.urls[node];
        let early = self.config.planted_bug == Some(PlantedBug::CleanupEarly);
        if !early && !h.is_settled() {
            return;
        }
        // The node's driver waits this long after the prune, so requests
        // started on the old version end first (a read in flight to an
        // old replica); once the run is quiet nothing is in flight.
        let wait_ms = transition_rules::cleanup_wait_ms(REPLICATION_TIMEOUT_MS);
        let pruned_at_ms = m.views[node].pruned_at_ms;
        if !early && !quiet && pruned_at_ms.is_some_and(|t| self.now() < t + wait_ms) {
            return;
        }
        let Ok(state) = self.nodes[node].state() else {
            return;
        };
        let drop: Vec<(Vec<u8>, u64)> = state
            .into_iter()
            .filter(|(key, _)| {
                if early {
                    !h.current().replicas(key).contains(&url.as_str())
                } else {
                    // The node's cleanup predicate (`Db::purge` keeps what this keeps).
                    !transition_rules::keeps(h.live(), url, key)
                }
            })
            .map(|(key, v)| (key, v.ts))
            .collect();
        let at_ms = self.now();
        for (key, ts) in drop {
            self.nodes[node].drop_copy(&key, ts);
            self.history.happenings.push(Happening::CopyDropped {
                at_ms,
                node,
                key,
                ts,
            });
            if let Some(m) = self.membership.as_mut() {
                m.dropped += 1;
            }
        }
    }

    /// The final phase: runs until every node dropped version 1 (bounded),
    /// then cleans up everywhere once more.
    pub(super) fn settle_membership(&mut self) {
        if self.membership.is_none() {
            return;
        }
        let deadline = self.now() + super::SETTLE_MS_MAX;
        while !self.membership.as_ref().is_some_and(Membership::settled) {
            match self.world.next_at_ms() {
                Some(at) if at <= deadline => {}
                _ => break,
            }
            let Some(event) = self.world.pop() else {
                break;
            };
            self.handle(event);
        }
        if !self.membership.as_ref().is_some_and(Membership::settled) {
            let views: Vec<String> = self
                .membership
                .iter()
                .flat_map(|m| &m.views)
                .map(|v| format!("{:?} {:?}", v.history.live().len(), v.history.trackers()))
                .collect();
            self.stuck(format!(
                "layout: version 2 not settled: {}",
                views.join("; ")
            ));
        }
        self.run_until_quiet("after the layout settled");
        for node in 0..self.nodes.len() {
            if self.nodes[node].is_up() {
                self.cleanup(node, true);
            }
        }
    }
}
