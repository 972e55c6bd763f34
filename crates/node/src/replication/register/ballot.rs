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
//!   already newer, else the least time above `seen.time` whose low
//!   `hlc::NODE_BITS` bits are `node`, so the retry outranks `seen`
//!   whatever the clocks say.
//! - A ballot's time names its node in its low `hlc::NODE_BITS` bits, as
//!   an HLC timestamp does, whenever `now` does (the node's clock; the
//!   simulation's clock stamps so too): the committed value is stored as
//!   the key's version at timestamp = ballot time, and the acceptor reads
//!   the committed ballot back from that timestamp alone
//!   (`super::record::committed_of`). A retry's bump keeps it so (the
//!   regression test `bump_keeps_the_node_in_the_low_bits`: a bump to
//!   `seen.time + 1` lost the node, and a committed ballot read back from
//!   its version would have named another node).

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
            Ballot::new(time_above(seen.time, node), node)
        };
        assert!(out > seen, "a retry's ballot outranks the ballot it saw");
        out
    }
}

/// The least time above `seen` whose low `hlc::NODE_BITS` bits are
/// `node` (saturating at the top of the range).
fn time_above(seen: u64, node: NodeId) -> u64 {
    let mask = (1u64 << crate::hlc::NODE_BITS) - 1;
    let low = u64::from(node) & mask;
    let same_high = (seen & !mask) | low;
    if same_high > seen {
        same_high
    } else {
        same_high
            .checked_add(mask + 1)
            .unwrap_or(seen.saturating_add(1))
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
        let seen = Ballot::new(0x1007, 7);
        assert_eq!(Ballot::above(seen, 50, 1), Ballot::new(0x1101, 1));
        assert_eq!(Ballot::above(seen, 0x1007, 1), Ballot::new(0x1101, 1));
        assert_eq!(Ballot::above(seen, 0x1007, 8), Ballot::new(0x1007, 8));
        assert_eq!(Ballot::above(seen, 0x2001, 1), Ballot::new(0x2001, 1));
        assert_eq!(Ballot::above(seen, 50, 9), Ballot::new(0x1009, 9));
        assert_eq!(Ballot::above(Ballot::ZERO, 0, 3), Ballot::new(1, 3));
    }

    /// Regression: a bump to `seen.time + 1` lost the node id from the
    /// ballot's time, which the committed version's timestamp must carry
    /// (`record::committed_of`). Every bump keeps it.
    #[test]
    fn bump_keeps_the_node_in_the_low_bits() {
        let mask = (1u64 << crate::hlc::NODE_BITS) - 1;
        for seen_time in [1u64, 0xff, 0x100, 0x1234_5678, u64::MAX - 0x200] {
            for node in [0u16, 1, 0x7f, 0xff] {
                let seen = Ballot::new(seen_time, 200);
                let b = Ballot::above(seen, u64::from(node), node);
                assert!(b > seen);
                assert_eq!(b.time & mask, u64::from(node), "{seen_time:#x} {node}");
                assert!(b.time - seen_time <= mask + 1);
            }
        }
    }
}
