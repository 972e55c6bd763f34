//! The fence of layout transitions (docs/ARCHITECTURE.md, "Membership"):
//! a node that knows layout version `v` serves no peer request from a
//! coordinator on an older version. A connecting peer names its version
//! in the upgrade (`peer::handshake::LAYOUT_HEADER`); the upgrade is
//! refused (409) when it is older than this network thread's placement,
//! and so is every request on a connection whose version has become
//! older since (the connection is then closed, so the peer dials again
//! once it learned the new version).
//!
//! The version compared is the newest live version of the placement the
//! thread uses (`NetContext::placement`), the same one the thread notes
//! for the transition driver (`cluster::transition_state`): the fence is
//! up on a thread before the driver counts that thread as placed.
//!
//! A peer that names no version is refused like a stale one: every
//! ataman node names one, and a coordinator that does not say which
//! layout it places with cannot be known to be on the current one (it
//! would bypass the fence).

use crate::state::NetContext;

/// Why a coordinator on `named` is refused by a node that knows `known`;
/// `None` when it is served.
pub fn stale(named: Option<u64>, known: u64) -> Option<String> {
    match named {
        Some(v) if v < known => Some(format!(
            "stale layout: the coordinator is on layout version {v}, this node knows version {known}"
        )),
        Some(_) => None,
        None => Some(format!(
            "the coordinator names no layout version (X-Ataman-Layout); this node knows version {known}"
        )),
    }
}

/// [`stale`] against this thread's placement.
pub fn refuse(ctx: &NetContext, named: Option<u64>) -> Option<String> {
    stale(named, ctx.placement().version())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Older and unnamed are refused, naming the versions; equal and newer are served.
    #[test]
    fn an_older_or_missing_version_is_refused() {
        let why = stale(Some(2), 3).unwrap();
        assert!(
            why.contains("version 2") && why.contains("version 3"),
            "{why}"
        );
        assert_eq!(stale(Some(3), 3), None);
        assert_eq!(stale(Some(4), 3), None);
    }

    /// A peer that named no layout version bypassed the fence: it was
    /// served whatever version this node knew.
    #[test]
    fn version_less_peers_are_fenced() {
        let why = stale(None, 3).unwrap();
        assert!(
            why.contains("names no layout version") && why.contains("version 3"),
            "{why}"
        );
        assert!(stale(None, 1).is_some());
    }
}
