//! What the transition driver shares with the node's other threads: the
//! layout version each network thread places writes with (the driver
//! raises this node's `ack` only once every thread has used a placement
//! with the new version for longer than the replication timeout), and the
//! layout gauges on `/metrics`.
//!
//! # Contract with the network threads
//! A network thread calls [`TransitionShared::note_placement`] with the
//! newest live version of the placement it rebuilt, after it rebuilt it
//! and before it starts any write under it. A thread that never notes
//! keeps the minimum at 0: the node never raises its `ack`, and the
//! transition waits (safe: writes keep going to the old sets, reads stay
//! on the old version).

use super::history::Tracker;
use super::membership::Membership;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Shared by the driver and the network threads.
#[derive(Debug)]
pub struct TransitionShared {
    placements: Vec<AtomicU64>,
}

impl TransitionShared {
    /// For `threads` network threads, none of which has noted a placement.
    pub fn new(threads: usize) -> Self {
        TransitionShared {
            placements: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        }
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
}
