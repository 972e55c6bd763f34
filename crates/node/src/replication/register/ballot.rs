//! Ballots of the per-key consensus register: who proposes, in which order.
//!
//! A ballot is `(time, node)`: `time` a hybrid-logical-clock timestamp of
//! the proposing node (`crate::hlc`), `node` that node's id in the layout
//! (`cluster::node_ids`). Ballots are compared by time, then node id, so
//! two proposers never hold one ballot: the id is agreed with the layout
//! and never held by two members at once, and one node's clock never
//! returns one timestamp twice. (The HLC already puts the node id in a
//! timestamp's low bits; the explicit `node` field keeps the order total
//! for a clock that does not, the simulation's.)
//!
//! # Rules
//! - [`Ballot::ZERO`] ranks below every ballot a proposer uses: it is the
//!   promise of an acceptor that promised nothing.
//! - A proposer that learns of a ballot `seen` (an acceptor refused it, or
//!   answered with a newer accepted proposal) retries with
//!   [`Ballot::above`]`(seen, now, node)`: its clock's time if that is
//!   already newer, else `seen.time + 1`, so the retry outranks `seen`
//!   whatever the clocks say.

use crate::cluster::layout::NodeId;

/// A proposal's rank: hybrid-logical-clock time, then node id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ballot {
    /// The proposer's clock when it chose the ballot (an HLC timestamp).
    pub time: u64,
    /// The proposer's node id.
    pub node: NodeId,
}

impl Ballot {
    /// Below every proposer's ballot: nothing promised or accepted.
    pub const ZERO: Ballot = Ballot { time: 0, node: 0 };

    /// A ballot of `node` at clock time `now` (`now` at least 1).
    pub fn new(now: u64, node: NodeId) -> Ballot {
        assert!(now > 0, "ballot time 0 is reserved for Ballot::ZERO");
        Ballot { time: now, node }
    }

    /// The ballot `node` proposes with at clock time `now` once it knows
    /// of `seen`: above `seen` whatever `now` says.
    pub fn above(seen: Ballot, now: u64, node: NodeId) -> Ballot {
        let candidate = Ballot::new(now.max(1), node);
        let out = if candidate > seen {
            candidate
        } else {
            Ballot::new(seen.time.saturating_add(1), node)
        };
        assert!(out > seen, "a retry's ballot outranks the ballot it saw");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Time orders ballots first, the node id breaks ties.
    #[test]
    fn order_is_time_then_node() {
        assert!(Ballot::new(5, 0) > Ballot::new(4, 9));
        assert!(Ballot::new(5, 2) > Ballot::new(5, 1));
        assert!(Ballot::new(1, 0) > Ballot::ZERO);
    }

    /// A retry outranks what it saw, behind clock or ahead.
    #[test]
    fn above_outranks_seen() {
        let seen = Ballot::new(100, 7);
        assert_eq!(Ballot::above(seen, 50, 1), Ballot::new(101, 1));
        assert_eq!(Ballot::above(seen, 100, 1), Ballot::new(101, 1));
        assert_eq!(Ballot::above(seen, 100, 8), Ballot::new(100, 8));
        assert_eq!(Ballot::above(seen, 200, 1), Ballot::new(200, 1));
        assert_eq!(Ballot::above(Ballot::ZERO, 0, 3), Ballot::new(1, 3));
    }
}
