//! What the transition driver shares with the node's other threads: the
//! layout version each network thread places writes with (the driver
//! raises this node's `ack` only once every thread has used a placement
//! with the new version for longer than the replication timeout), and the
//! layout gauges on `/metrics`.
//!
//! # Contract with the network threads
//! A network thread calls [`TransitionShared::note_placement`] with the
//! newest live version `v` of the placement it rebuilt, after it rebuilt
//! it and before it starts any write under it, and only once it also
//! refuses peer requests from a coordinator on a version older than `v`
//! (the fence of `History`'s rules). A thread that never notes
//! keeps the minimum at 0: the node never raises its `ack`, and the
//! transition waits (safe: writes keep going to the old sets, reads stay
//! on the old version).

use super::history::Tracker;
use super::membership::Membership;
use ataman_testkit::lock::lock;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Where this node stands in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// A member of a live layout version: it serves clients.
    Member,
    /// Started with `--join` and not added yet, or added but its network
    /// threads do not place with a live version yet: it serves no client.
    Joining,
    /// A member of no live version, after being one (or restarted so):
    /// once the removal is settled it holds nothing a read needs.
    Removed,
}

impl Standing {
    fn code(self) -> u8 {
        match self {
            Standing::Member => 0,
            Standing::Joining => 1,
            Standing::Removed => 2,
        }
    }

    fn from_code(code: u8) -> Standing {
        match code {
            1 => Standing::Joining,
            2 => Standing::Removed,
            _ => Standing::Member,
        }
    }
}

/// Shared by the driver and the network threads.
#[derive(Debug)]
pub struct TransitionShared {
    placements: Vec<AtomicU64>,
    standing: AtomicU8,
    /// 1 when settled here and promoted (for a removed node: nothing left to serve).
    settled_out: AtomicU8,
    /// The members of the newest committed layout, for refusals.
    members: Mutex<Vec<String>>,
    /// The cleanup's figures (the driver's cleanup thread writes them).
    pub cleanup: super::cleanup_metrics::CleanupFigures,
    /// The version of this node's last copy that did not complete, and
    /// the nodes it waits for (`super::copy_completion`).
    copy_waits: Mutex<(u64, Vec<super::copy_completion::Wait>)>,
}

impl TransitionShared {
    /// For `threads` network threads, none of which has noted a placement;
    /// the node a member until [`TransitionShared::set_standing`] says otherwise.
    pub fn new(threads: usize) -> Self {
        TransitionShared {
            placements: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            standing: AtomicU8::new(Standing::Member.code()),
            settled_out: AtomicU8::new(1),
            members: Mutex::new(Vec::new()),
            cleanup: super::cleanup_metrics::CleanupFigures::default(),
            copy_waits: Mutex::new((0, Vec::new())),
        }
    }

    /// This node's copy for `version` waits for `waits` (none: complete).
    pub fn set_copy_waits(&self, version: u64, waits: Vec<super::copy_completion::Wait>) {
        *lock(&self.copy_waits) = (version, waits);
    }

    /// What this node's copy for `version` waits for, as last noted.
    pub fn copy_waits(&self, version: u64) -> Vec<super::copy_completion::Wait> {
        let waits = lock(&self.copy_waits);
        match waits.0 == version {
            true => waits.1.clone(),
            false => Vec::new(),
        }
    }

    /// Where the node stands; `settled` when no transition is under way
    /// and the stored layout is the newest; `members` of the newest layout.
    pub fn set_standing(&self, standing: Standing, settled: bool, members: &[String]) {
        let mut m = lock(&self.members);
        if m.as_slice() != members {
            *m = members.to_vec();
        }
        drop(m);
        self.settled_out.store(u8::from(settled), Ordering::Release);
        self.standing.store(standing.code(), Ordering::Release);
    }

    /// True when no transition is under way here and the stored layout
    /// is the newest committed one.
    pub fn settled(&self) -> bool {
        self.settled_out.load(Ordering::Acquire) == 1
    }

    /// Where the node stands.
    pub fn standing(&self) -> Standing {
        Standing::from_code(self.standing.load(Ordering::Acquire))
    }

    /// True when the node may be stopped: it is not a member and, when it
    /// was removed, the removal is settled.
    pub fn safe_to_stop(&self) -> bool {
        match self.standing() {
            Standing::Member => false,
            Standing::Joining => true,
            Standing::Removed => self.settled(),
        }
    }

    /// The members of the newest committed layout.
    pub fn members(&self) -> Vec<String> {
        lock(&self.members).clone()
    }

    /// Network thread `thread` now places writes with a placement whose
    /// newest live version is `version` (see the contract above).
    pub fn note_placement(&self, thread: usize, version: u64) {
        if let Some(slot) = self.placements.get(thread) {
            slot.fetch_max(version, Ordering::AcqRel);
        }
    }

    /// The newest version every network thread's placement includes
    /// (0 until each has noted one).
    pub fn placement_version(&self) -> u64 {
        self.placements
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .min()
            .unwrap_or(0)
    }
}

/// Appends this node's layout gauges: its three trackers, whether the
/// history is settled, and whether this node is a member of a live
/// version.
pub fn render_metrics(out: &mut String, membership: &Membership) {
    let me = membership.self_url();
    let (ack, sync, sync_ack, settled, member) = membership.read(|s| {
        let t = s.history.trackers();
        (
            t.get(Tracker::Ack, me),
            t.get(Tracker::Sync, me),
            t.get(Tracker::SyncAck, me),
            s.history.is_settled(),
            !s.history.removed(me),
        )
    });
    for (name, help, value) in [
        (
            "ataman_layout_ack_version",
            "The layout version this node writes to (its ack tracker).",
            ack,
        ),
        (
            "ataman_layout_sync_version",
            "The layout version whose data this node has received (its sync tracker).",
            sync,
        ),
        (
            "ataman_layout_sync_ack_version",
            "The layout version this node saw synced by every node (its sync_ack tracker).",
            sync_ack,
        ),
        (
            "ataman_layout_settled",
            "1 when one layout version is live (no transition under way), else 0.",
            u64::from(settled),
        ),
        (
            "ataman_layout_member",
            "1 when this node is a member of a live layout version, else 0.",
            u64::from(member),
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The minimum runs over every thread; a thread that never noted keeps it at 0.
    #[test]
    fn placement_version_is_the_minimum() {
        let t = TransitionShared::new(2);
        assert_eq!(t.placement_version(), 0);
        t.note_placement(0, 3);
        assert_eq!(t.placement_version(), 0);
        t.note_placement(1, 2);
        assert_eq!(t.placement_version(), 2);
        t.note_placement(1, 1);
        assert_eq!(t.placement_version(), 2, "never goes back");
        t.note_placement(7, 9);
        assert_eq!(t.placement_version(), 2);
    }

    /// The gauges name this node's trackers and its standing.
    #[test]
    fn gauges() {
        use crate::cluster::acceptor_node::AcceptorNode;
        use crate::cluster::layout::Layout;
        let dir = tempfile::tempdir().unwrap();
        let urls = vec![
            "http://127.0.0.1:1".to_owned(),
            "http://127.0.0.1:2".to_owned(),
        ];
        let v1 = Layout::new(3, urls.clone(), 2).unwrap();
        let m = Membership::new(urls[0].clone(), AcceptorNode::open(dir.path(), v1).unwrap());
        let mut out = String::new();
        render_metrics(&mut out, &m);
        for line in [
            "\nataman_layout_ack_version 3\n",
            "\nataman_layout_sync_version 3\n",
            "\nataman_layout_sync_ack_version 3\n",
            "\nataman_layout_settled 1\n",
            "\nataman_layout_member 1\n",
        ] {
            assert!(out.contains(line), "{line}: {out}");
        }
    }
}
