//! The `ataman-layout-gossip` thread: how a node that missed a commit
//! (down, paused, or cut off while it was sent) catches up, and how the
//! trackers of a transition spread.
//!
//! # Rules
//! - Every [`LAYOUT_GOSSIP_INTERVAL`] the node sends its live layouts and
//!   trackers (`Request::Gossip`, over `POST /v0/internal/layout`) to
//!   every other node of its live layouts and of its newest committed
//!   layout, all at once (one scoped thread per node, each call bounded by
//!   `super::voters_http::LAYOUT_CALL_TIMEOUT`).
//! - The receiver learns and merges (`crate::cluster::learn::absorb`) and
//!   answers with its own history, which the sender absorbs the same way:
//!   one exchange carries news both ways, so a node that was behind
//!   learns even before it gossips itself.
//! - A node that does not answer is skipped until the next round; the
//!   thread stops with the node (checked every [`GOSSIP_STOP_CHECK`]
//!   between rounds; a round lasts at most a few call timeouts).
//! - Both ways also carry the node's copy figures (`crate::cluster::copy_figures`),
//!   noted from its metrics before each round.

use super::endpoints::voters;
use super::voters_http::HttpVoters;
use crate::cluster::agreement_wire::{Reply, Request};
use crate::cluster::copy_figures::NodeCopy;
use crate::cluster::learn;
use crate::cluster::membership::Membership;
use crate::cluster::propose::Voters;
use crate::state::NodeShared;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time between two gossip rounds.
pub const LAYOUT_GOSSIP_INTERVAL: Duration = Duration::from_secs(1);
/// How often the waiting thread looks whether the node stops.
pub const GOSSIP_STOP_CHECK: Duration = Duration::from_millis(50);

/// Starts the gossip thread of a cluster node (`None` for a single node).
pub fn start(shared: &Arc<NodeShared>) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
    if shared.membership.is_none() {
        return Ok(None);
    }
    let shared = Arc::clone(shared);
    let handle = std::thread::Builder::new()
        .name("ataman-layout-gossip".into())
        .spawn(move || run(&shared))?;
    Ok(Some(handle))
}

fn run(shared: &NodeShared) {
    let Some(membership) = shared.membership.as_deref() else {
        return;
    };
    while !shared.stopping() {
        let started = Instant::now();
        note_own_copy(shared, membership);
        round(&voters(shared, membership), membership);
        while !shared.stopping() && started.elapsed() < LAYOUT_GOSSIP_INTERVAL {
            std::thread::sleep(GOSSIP_STOP_CHECK);
        }
    }
}

/// Puts this node's copy figures on its board, for the gossip to carry.
pub fn note_own_copy(shared: &NodeShared, membership: &Membership) {
    membership.copies.note(&NodeCopy {
        url: membership.self_url().to_owned(),
        figures: shared.antientropy.copy.progress(),
    });
}

/// The nodes one round talks to: every node of the live layouts and of
/// the newest committed layout, but this one.
pub fn targets(membership: &Membership) -> Vec<String> {
    let mut urls: BTreeSet<String> = membership.history().all_nodes();
    membership.read(|s| urls.extend(s.acceptor.committed().nodes.iter().cloned()));
    urls.remove(membership.self_url());
    urls.into_iter().collect()
}

/// One round: the node's history to every target at once, each reply absorbed.
pub fn round(io: &HttpVoters<'_>, membership: &Membership) {
    let urls = targets(membership);
    let request = match learn::gossip_reply(membership) {
        Reply::Gossip {
            live,
            trackers,
            copy,
        } => Request::Gossip {
            live,
            trackers,
            copy,
        },
        _ => return,
    };
    membership.reach.keep_only(&urls);
    std::thread::scope(|s| {
        for url in &urls {
            let request = &request;
            let spawned = std::thread::Builder::new()
                .name("ataman-layout-call".into())
                .spawn_scoped(s, move || {
                    let reply = io.call(url, request);
                    membership
                        .reach
                        .note(url, matches!(reply, Some(Reply::Gossip { .. })));
                    if let Some(Reply::Gossip {
                        live,
                        trackers,
                        copy,
                    }) = reply
                    {
                        if let Err(e) = learn::absorb(membership, url, live, &trackers) {
                            tracing::warn!(peer = %url, error = %e, "layout gossip: not stored");
                        }
                        learn::note_copy(membership, &copy);
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(peer = %url, error = %e, "layout gossip: no thread");
            }
        }
    });
    membership.reach.round_ended();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::acceptor_node::AcceptorNode;
    use crate::cluster::layout::{Change, Layout};

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    /// The targets are the live layouts' nodes and the committed one's,
    /// without this node.
    #[test]
    fn targets_cover_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = Layout::new(1, vec![url(1), url(2), url(3)], 3).unwrap();
        let m = Membership::new(url(1), AcceptorNode::open(dir.path(), v1.clone()).unwrap());
        assert_eq!(targets(&m), vec![url(2), url(3)]);
        let change = Change {
            add: vec![url(4)],
            remove: vec![url(3)],
            ..Change::default()
        };
        learn::learn(&m, v1.apply(&change).unwrap()).unwrap();
        assert_eq!(targets(&m), vec![url(2), url(3), url(4)]);
    }
}
