//! The live placement: what every thread that knows about replicas reads
//! (the coordinator, read repair, hints, anti-entropy, ranges, status).
//!
//! A [`Placement`] is an immutable snapshot: the node table (stable
//! indices, `super::node_table`), this node's index in it, the live
//! history in indices ([`Placed`]: write sets, read set), the versions and
//! the read layout as a [`Topology`]. [`LivePlacement`] holds the current
//! one behind an `ArcSwap`.
//!
//! # Who rebuilds it
//! [`LivePlacement::get`] does, in whichever thread first sees that the
//! membership's generation moved past the snapshot's: under a small lock
//! (the node table's), it copies the history, places it (giving new
//! members indices) and swaps the snapshot in. Every other call is one
//! atomic load and compare plus the snapshot's load. The network threads
//! call it once per loop iteration (`state::NetContext::refresh_placement`),
//! anti-entropy once per round and per session, ranges once per range.
//!
//! A node without a membership (a single node) gets one fixed placement:
//! its `--cluster` list as one layout, never rebuilt.
//!
//! # Invariants
//! - The table only grows; an index names one URL for the process's life.
//! - This node has an index even when it is a member of no live layout
//!   (joining, or removed).
//! - A snapshot's generation is the membership's generation read before
//!   its history was copied, so a change racing the rebuild makes the next
//!   `get` rebuild again (never a snapshot newer than its generation says
//!   that is kept forever).

use super::Topology;
use super::history::History;
use super::layout::Layout;
use super::membership::Membership;
use super::node_table::{KeyReplicas, NodeTable, Placed};
use arc_swap::ArcSwap;
use ataman_testkit::lock::lock;
use std::sync::{Arc, Mutex};

/// One snapshot of the live layouts in node-table indices.
#[derive(Debug, Clone)]
pub struct Placement {
    generation: u64,
    table: NodeTable,
    via: Vec<Option<String>>,
    self_index: usize,
    self_id: Option<u16>,
    placed: Placed,
    versions: Vec<u64>,
    read_members: Vec<usize>,
    live_members: Vec<bool>,
    read_view: Option<Topology>,
}

impl Placement {
    fn build(
        history: &History,
        table: &mut NodeTable,
        via: &[Option<String>],
        self_url: &str,
        generation: u64,
    ) -> Self {
        let self_index = table.insert(self_url);
        // One id across the live layouts: a change keeps a member's id.
        let self_id = history.live().iter().rev().find_map(|l| l.id_of(self_url));
        let placed = Placed::new(history, table);
        let mut live_members = vec![false; table.len()];
        for layout in placed.layouts() {
            for &m in layout.members {
                live_members[m] = true;
            }
        }
        let read = placed.read_layout();
        let mut read_members = read.members.to_vec();
        read_members.sort_unstable();
        let read_view = read_members
            .iter()
            .position(|&m| m == self_index)
            .map(|me| {
                let nodes = read_members
                    .iter()
                    .map(|&m| table.urls()[m].clone())
                    .collect();
                let via = read_members
                    .iter()
                    .map(|&m| via.get(m).cloned().flatten())
                    .collect();
                Topology::new(nodes, me)
                    .with_version(read.version)
                    .with_replication_factor(read.replication_factor)
                    .with_via(via)
            });
        let mut via = via.to_vec();
        via.resize(table.len(), None);
        Placement {
            generation,
            versions: placed.layouts().map(|l| l.version).collect(),
            table: table.clone(),
            via,
            self_index,
            self_id,
            placed,
            read_members,
            live_members,
            read_view,
        }
    }

    /// A placement of one fixed layout (a node without a membership):
    /// `nodes` in this order, this node `nodes[self_index]`, `R` replicas.
    pub fn fixed(
        nodes: &[String],
        self_index: usize,
        via: &[Option<String>],
        replication_factor: usize,
        version: u64,
    ) -> Self {
        let mut table = NodeTable::new(nodes);
        let layout = Layout {
            version,
            nodes: nodes.to_vec(),
            // The list's order, as a bootstrap layout gives them.
            ids: (0..nodes.len()).map(|i| i as u16).collect(),
            retired: Vec::new(),
            replication_factor: replication_factor.clamp(1, nodes.len().max(1)),
        };
        Placement::build(
            &History::settled(layout),
            &mut table,
            via,
            &nodes[self_index],
            0,
        )
    }

    /// The membership generation this snapshot was built from (0: fixed).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Every URL by stable index (members, past members, this node).
    pub fn urls(&self) -> &[String] {
        self.table.urls()
    }

    /// The URL of index `i`.
    pub fn url(&self, i: usize) -> &str {
        self.table.url(i).unwrap_or("")
    }

    /// Indices given (the table's size).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Never true: this node has an index.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// This node's index.
    pub fn self_index(&self) -> usize {
        self.self_index
    }

    /// This node's node id (its clock's node bits, `hlc`): its id in
    /// the live layouts, `None` when it is a member of none (joining, removed).
    pub fn self_id(&self) -> Option<u16> {
        self.self_id
    }

    /// This node's URL.
    pub fn self_url(&self) -> &str {
        self.url(self.self_index)
    }

    /// The address node `i` is dialled at (its `--peer-via`, else its URL's).
    pub fn dial(&self, i: usize) -> String {
        match self.via.get(i).cloned().flatten() {
            Some(via) => via,
            None => super::dial_address(self.url(i)),
        }
    }

    /// A write of `key` asking `from` replicas in each live version: the
    /// union of the sets, each set as positions (ack needed in each).
    pub fn write(&self, key: &[u8], from: usize) -> KeyReplicas {
        self.placed.write_from(key, from)
    }

    /// A read of `key` asking `from` replicas of the read version.
    pub fn read(&self, key: &[u8], from: usize) -> KeyReplicas {
        self.placed.read_from(key, from)
    }

    /// The history in indices.
    pub fn placed(&self) -> &Placed {
        &self.placed
    }

    /// The newest live version.
    pub fn version(&self) -> u64 {
        self.versions.last().copied().unwrap_or(0)
    }

    /// The live versions, oldest first.
    pub fn versions(&self) -> &[u64] {
        &self.versions
    }

    /// The version reads use.
    pub fn read_version(&self) -> u64 {
        self.placed.read_version()
    }

    /// `R` of the read version: `from`'s default.
    pub fn replication_factor(&self) -> usize {
        self.placed.read_layout().replication_factor
    }

    /// The read version's members, by index (ascending).
    pub fn read_members(&self) -> &[usize] {
        &self.read_members
    }

    /// True if node `i` is a member of a live version.
    pub fn is_live_member(&self, i: usize) -> bool {
        self.live_members.get(i).copied().unwrap_or(false)
    }

    /// True while two versions are live.
    pub fn in_transition(&self) -> bool {
        self.placed.in_transition()
    }

    /// The read version as a list with this node's place in it; `None`
    /// when this node is not one of its members (joining, removed).
    pub fn read_view(&self) -> Option<&Topology> {
        self.read_view.as_ref()
    }
}

/// The node's current placement, rebuilt when its membership changes.
#[derive(Debug)]
pub struct LivePlacement {
    current: ArcSwap<Placement>,
    membership: Option<Arc<Membership>>,
    table: Mutex<NodeTable>,
    via: Vec<Option<String>>,
    self_url: String,
}

impl LivePlacement {
    /// The placement of a node started with `nodes` (`--cluster` or the
    /// stored layout's members; this node is `nodes[self_index]`): the
    /// membership's live history when there is one, else that list as one
    /// fixed layout of `R` = `replication_factor` under `version`.
    pub fn new(
        nodes: &[String],
        self_index: usize,
        via: &[Option<String>],
        replication_factor: usize,
        version: u64,
        membership: Option<Arc<Membership>>,
    ) -> Self {
        let mut table = NodeTable::new(nodes);
        let first = match &membership {
            Some(m) => {
                let generation = m.generation();
                let history = m.history();
                Placement::build(&history, &mut table, via, m.self_url(), generation)
            }
            None => Placement::fixed(nodes, self_index, via, replication_factor, version),
        };
        LivePlacement {
            self_url: first.self_url().to_owned(),
            current: ArcSwap::from_pointee(first),
            membership,
            table: Mutex::new(table),
            via: via.to_vec(),
        }
    }

    /// The current placement, rebuilt first if the membership changed.
    pub fn get(&self) -> Arc<Placement> {
        let current = self.current.load_full();
        let Some(m) = &self.membership else {
            return current;
        };
        if m.generation() == current.generation {
            return current;
        }
        let mut table = lock(&self.table);
        let again = self.current.load_full();
        let generation = m.generation();
        if generation == again.generation {
            return again;
        }
        let history = m.history();
        let built = Arc::new(Placement::build(
            &history,
            &mut table,
            &self.via,
            m.self_url(),
            generation,
        ));
        self.current.store(Arc::clone(&built));
        built
    }

    /// This node's URL (never changes).
    pub fn self_url(&self) -> &str {
        &self.self_url
    }

    /// The membership followed, if any.
    pub fn membership(&self) -> Option<&Arc<Membership>> {
        self.membership.as_ref()
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
