//! A node's side of the agreement on its shared [`Membership`]: a peer's
//! request answered by the acceptor, and a committed layout learned by
//! the acceptor and the live history together.
//!
//! # Rules
//! - A prepare or an accept goes to the acceptor (`super::acceptor_node`:
//!   durable before it answers). It changes no decision of this node, so
//!   the generation does not grow.
//! - A committed layout (a peer's commit, this node's own proposal chosen,
//!   or one gossiped, `super::gossip`) is learned in ONE
//!   [`Membership::update`]: `AcceptorNode::learn` (stored in
//!   `LAYOUT-NEXT`), then `History::begin` (a transition starts). The
//!   generation grows when either changed.
//! - A node in transition to `v + 1` that learns `v + 2` (it missed the
//!   end of the transition) ends that transition first: `v + 2` was
//!   proposed by a node whose history was settled at `v + 1`, which it
//!   pruned only once every member of `v + 1` had seen `v + 1` synced, so
//!   pruning here is safe too. The node prunes, promotes `v + 1` to its
//!   `LAYOUT`, and only then learns `v + 2` (so a crash between leaves
//!   `LAYOUT` = `v + 1`, never a `LAYOUT-NEXT` two versions ahead), and
//!   begins the transition to it.
//! - A layout older than the node's, or one further ahead than the next,
//!   changes nothing; the reply names the node's committed version.
//! - A gossip ([`absorb`]) learns every layout of the peer's live history
//!   newer than the node's committed one, oldest first, through [`learn`]
//!   (every layout of a live history was committed), then merges the
//!   peer's trackers into the history (`History::merge`, by maximum); it
//!   is answered with the node's own live layouts and trackers.
//! - A gossip from a node of this node's live versions whose only live
//!   layout is the newest one of this node's transition says the peer
//!   pruned it: the node prunes too
//!   (`super::transition_rules::adopt_peer_prune`; sound because the peer
//!   pruned only once the nodes the prune waits for all had `sync_ack`
//!   at that version, and trackers only grow). Needed: the prune waits
//!   for the removed nodes too, and a removed node that pruned forgets
//!   its own trackers, so once it and the nodes that heard it pruned, the
//!   rest can learn that only this way.
//! - A gossip also carries the sender's copy figures
//!   (`super::copy_figures`), kept on the receiver's board ([`note_copy`])
//!   when a live or committed layout names the sender.
//! - A read (a node started with `--join` asking its seed) is answered
//!   like a gossip and changes nothing.

use super::agreement_wire::{Reply, Request};
use super::copy_figures::NodeCopy;
use super::history::{History, Trackers, TransitionError};
use super::layout::Layout;
use super::layout_file::LayoutFileError;
use super::membership::Membership;
use super::transition_rules::adopt_peer_prune;

/// Answers a proposer's request on this node.
pub fn serve(membership: &Membership, request: Request) -> Result<Reply, LayoutFileError> {
    match request {
        Request::Commit { value } => learn(membership, value),
        Request::Gossip {
            live,
            trackers,
            copy,
        } => {
            absorb(membership, &copy.url, live, &trackers)?;
            note_copy(membership, &copy);
            Ok(gossip_reply(membership))
        }
        Request::Read => Ok(gossip_reply(membership)),
        other => membership.update(|state| (false, state.acceptor.handle(other))),
    }
}

/// This node's live layouts, trackers and copy figures, as a gossip reply.
pub fn gossip_reply(membership: &Membership) -> Reply {
    let history = membership.history();
    let url = membership.self_url();
    Reply::Gossip {
        live: history.live().to_vec(),
        trackers: history.trackers().clone(),
        copy: NodeCopy {
            url: url.to_owned(),
            figures: membership.copies.get(url).unwrap_or_default(),
        },
    }
}

/// Keeps a peer's copy figures (not this node's: it notes its own), and
/// only those of nodes its live layouts or its committed one name.
pub fn note_copy(membership: &Membership, copy: &NodeCopy) {
    if copy.url == membership.self_url() {
        return;
    }
    let mut known = membership.history().all_nodes();
    membership.read(|s| known.extend(s.acceptor.committed().nodes.iter().cloned()));
    if known.contains(&copy.url) {
        membership.copies.note(copy);
    }
    membership.copies.retain(|url| known.contains(url));
}

/// Learns what a peer's gossip holds that this node lacks (the rules
/// above); `peer` is the URL the gossip names as its sender.
pub fn absorb(
    membership: &Membership,
    peer: &str,
    mut live: Vec<Layout>,
    trackers: &Trackers,
) -> Result<(), LayoutFileError> {
    live.sort_by_key(|l| l.version);
    for layout in &live {
        let committed = membership.read(|s| s.acceptor.committed().version);
        if layout.version > committed {
            learn(membership, layout.clone())?;
        }
    }
    membership.update(|state| {
        let grew = state.history.merge(trackers);
        // The rule above: the peer pruned the transition this node is in.
        let Some(pruned) = adopt_peer_prune(&state.history, peer, &live) else {
            return (grew, ());
        };
        tracing::info!(
            version = pruned.current().version,
            "a peer dropped the old version of this transition (every node it waits for saw the new one synced): dropped here too"
        );
        state.history = pruned;
        (true, ())
    });
    Ok(())
}

/// Learns the committed layout `value` (the rules above).
pub fn learn(membership: &Membership, value: Layout) -> Result<Reply, LayoutFileError> {
    membership.update(|state| {
        let ends = match state.history.live() {
            [_, next] if value.version == next.version + 1 => Some(next.clone()),
            _ => None,
        };
        let mut ended = false;
        if let Some(next) = ends {
            // The rule above: the transition to `next` ended everywhere.
            let trackers = state.history.trackers().clone();
            match state.acceptor.promote(&next) {
                Ok(_) => {}
                Err(e) => return (false, Err(e)),
            }
            if let Some(settled) = History::from_parts(vec![next.clone()], trackers) {
                tracing::info!(
                    version = next.version,
                    learned = value.version,
                    "a newer layout was committed: the transition to the version before it ended everywhere; pruned and promoted here"
                );
                state.history = settled;
                ended = true;
            }
        }
        let before = state.acceptor.committed().version;
        let reply = match state.acceptor.learn(value.clone()) {
            Ok(reply) => reply,
            Err(e) => return (false, Err(e)),
        };
        let learned = state.acceptor.committed().version != before;
        let began = match state.history.begin(value) {
            Ok(began) => began,
            Err(TransitionError::Underway { to }) => {
                if learned {
                    tracing::warn!(
                        in_transition_to = to,
                        learned = state.acceptor.committed().version,
                        "learned a layout two versions ahead while in transition: \
                         stored as next, acted on once the transition is promoted"
                    );
                }
                false
            }
            // Older, or further ahead than the acceptor learned: nothing.
            Err(TransitionError::NotNext { .. }) => false,
        };
        (ended || learned || began, Ok(reply))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::acceptor_node::AcceptorNode;
    use crate::cluster::agreement::{AcceptorReply, Ballot};
    use crate::cluster::layout::Change;

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    fn v1() -> Layout {
        Layout::new(1, vec![url(1), url(2), url(3)], 3).unwrap()
    }

    fn add(layout: &Layout, p: u16) -> Layout {
        layout
            .apply(&Change {
                add: vec![url(p)],
                ..Change::default()
            })
            .unwrap()
    }

    fn node(dir: &std::path::Path) -> Membership {
        Membership::new(url(1), AcceptorNode::open(dir, v1()).unwrap())
    }

    /// A commit starts the transition in the history and stores the next
    /// layout, growing the generation once; the same commit again changes
    /// nothing; an older or a far-ahead one changes nothing.
    #[test]
    fn commit_is_learned_by_both() {
        let dir = tempfile::tempdir().unwrap();
        let m = node(dir.path());
        let v2 = add(&v1(), 4);
        let reply = serve(&m, Request::Commit { value: v2.clone() }).unwrap();
        assert_eq!(reply, Reply::Committed { version: 2 });
        assert_eq!(m.generation(), 2);
        assert_eq!(m.history().live(), &[v1(), v2.clone()]);
        assert_eq!(m.read(|s| s.acceptor.next().cloned()), Some(v2.clone()));
        learn(&m, v2.clone()).unwrap();
        learn(&m, v1()).unwrap();
        let far = add(&add(&add(&v1(), 5), 6), 7);
        let far = Layout::new(4, far.nodes, 3).unwrap();
        learn(&m, far).unwrap();
        assert_eq!(m.generation(), 2, "nothing changed after the first");
        assert_eq!(m.history().live(), &[v1(), v2]);
    }

    /// In transition to 2, a commit of 3 ends the transition to 2 (pruned,
    /// promoted to `LAYOUT`) and begins the one to 3; a restart keeps it.
    #[test]
    fn two_ahead_in_transition() {
        let dir = tempfile::tempdir().unwrap();
        let m = node(dir.path());
        let v2 = add(&v1(), 4);
        let v3 = add(&v2, 5);
        learn(&m, v2.clone()).unwrap();
        assert_eq!(
            learn(&m, v3.clone()).unwrap(),
            Reply::Committed { version: 3 }
        );
        assert_eq!(m.history().live(), &[v2.clone(), v3.clone()]);
        assert_eq!(m.generation(), 3);
        assert_eq!(
            crate::cluster::layout_file::load(dir.path()).unwrap(),
            Some(v2.clone())
        );
        drop(m);
        let stored = crate::cluster::layout_file::load(dir.path())
            .unwrap()
            .unwrap();
        let again = Membership::new(url(1), AcceptorNode::open(dir.path(), stored).unwrap());
        assert_eq!(again.history().live(), &[v2, v3]);
    }

    /// A gossip from a node at version 2 teaches a node at 1 the layout and
    /// the peer's trackers, and is answered with the learner's history; a
    /// gossip holding nothing newer changes nothing.
    #[test]
    fn gossip_teaches_what_was_missed() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ahead = node(a.path());
        let behind = node(b.path());
        let v2 = add(&v1(), 4);
        learn(&ahead, v2.clone()).unwrap();
        ahead.update(|s| {
            (
                s.history
                    .raise(crate::cluster::history::Tracker::Ack, &url(2), 2),
                (),
            )
        });
        let before = behind.generation();
        let Reply::Gossip { live, trackers, .. } = gossip_reply(&ahead) else {
            panic!("a gossip reply");
        };
        let reply = serve(
            &behind,
            Request::Gossip {
                live: live.clone(),
                trackers: trackers.clone(),
                copy: NodeCopy::default(),
            },
        )
        .unwrap();
        assert_eq!(behind.history().live(), &[v1(), v2.clone()]);
        assert_eq!(
            behind
                .history()
                .trackers()
                .get(crate::cluster::history::Tracker::Ack, &url(2)),
            2
        );
        assert_eq!(reply, gossip_reply(&behind));
        assert!(behind.generation() > before);
        let settled = behind.generation();
        absorb(&behind, &url(2), live, &trackers).unwrap();
        assert_eq!(behind.generation(), settled, "nothing new the second time");
        absorb(&behind, &url(2), vec![v1()], &Trackers::default()).unwrap();
        assert_eq!(behind.history().live(), &[v1(), v2]);
    }

    /// A gossip from a peer that pruned the transition this node is in
    /// prunes it here too, though this node never heard every `sync_ack`
    /// the prune waits for (a removed node's, forgotten once it pruned):
    /// the wedge `tests/layout_cleanup.rs` met under load. A peer still in
    /// the transition, or one that pruned another version, changes nothing.
    #[test]
    fn a_peer_that_pruned_ends_the_transition_here() {
        let dir = tempfile::tempdir().unwrap();
        let m = node(dir.path());
        let v2 = add(&v1(), 4);
        learn(&m, v2.clone()).unwrap();
        assert!(m.history().in_transition());
        absorb(&m, &url(2), vec![v1(), v2.clone()], &Trackers::default()).unwrap();
        absorb(&m, &url(2), vec![v1()], &Trackers::default()).unwrap();
        assert_eq!(m.history().live(), &[v1(), v2.clone()], "not pruned");
        // A node waiting to join (a node of neither version) holding
        // version 2 alone never pruned anything: not followed.
        absorb(&m, &url(9), vec![v2.clone()], &Trackers::default()).unwrap();
        assert_eq!(m.history().live(), &[v1(), v2.clone()], "not a joiner's");
        let before = m.generation();
        absorb(&m, &url(4), vec![v2.clone()], &Trackers::default()).unwrap();
        assert_eq!(m.history().live(), &[v2], "pruned as the peer did");
        assert!(m.generation() > before);
    }

    /// A prepare reaches the acceptor and is durable; the generation stays.
    #[test]
    fn prepare_goes_to_the_acceptor() {
        let dir = tempfile::tempdir().unwrap();
        let m = node(dir.path());
        let ballot = Ballot { round: 4, node: 9 };
        let reply = serve(&m, Request::Prepare { slot: 2, ballot }).unwrap();
        assert_eq!(
            reply,
            Reply::Acceptor(AcceptorReply::Promise {
                ballot,
                accepted: None
            })
        );
        assert_eq!(m.generation(), 1);
        let again = node(dir.path());
        let low = Ballot { round: 1, node: 9 };
        assert_eq!(
            serve(
                &again,
                Request::Prepare {
                    slot: 2,
                    ballot: low
                }
            )
            .unwrap(),
            Reply::Acceptor(AcceptorReply::Reject { promised: ballot })
        );
    }
}
