//! The node's layouts as its threads share them: the live history (the
//! layouts of a transition and the trackers, `super::history`) and the
//! node's acceptor (`super::acceptor_node`), behind one lock, with a
//! generation that grows on every change so readers can rebuild what
//! they derive from it (placement) only when it changed.
//!
//! # Who changes it
//! - The agreement's node side learns committed versions (the acceptor's
//!   `learn`, then `History::begin`) and merges gossiped trackers
//!   (`History::merge`), each through [`Membership::update`].
//! - The transition driver raises this node's trackers, prunes the old
//!   version and promotes the stored layout once it is the only live one.
//!
//! # Rules
//! - The lock is held only for in-memory work and the small durable
//!   writes of the layout files (an fsync), never for network calls.
//! - [`Membership::generation`] grows after every change that may change
//!   a decision (a new live layout, a tracker that grew, a prune).

use super::acceptor_node::AcceptorNode;
use super::history::History;
use super::layout::Layout;
use ataman_testkit::lock::lock;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the lock holds.
#[derive(Debug)]
pub struct MembershipState {
    /// The live layouts and the trackers.
    pub history: History,
    /// The node's acceptor, its stored current layout and the chosen next one.
    pub acceptor: AcceptorNode,
}

/// The node's layouts, shared by its threads.
#[derive(Debug)]
pub struct Membership {
    self_url: String,
    state: Mutex<MembershipState>,
    generation: AtomicU64,
    /// The layout endpoints' blocking jobs (`super::workers`).
    pub workers: super::workers::Workers,
    /// Every node's latest copy figures, as gossip brings them.
    pub copies: super::copy_figures::CopyBoard,
}

impl Membership {
    /// The membership of the node at `self_url`, starting from its stored
    /// acceptor: settled at its current layout, or in transition to the
    /// chosen next one when there is one (a restart mid-transition).
    pub fn new(self_url: String, acceptor: AcceptorNode) -> Self {
        let mut history = History::settled(acceptor.current().clone());
        if let Some(next) = acceptor.next()
            && let Err(e) = history.begin(next.clone())
        {
            // `learn` promotes before it stores a next layout two versions
            // ahead, so this is a data directory changed by hand.
            tracing::error!(
                current = acceptor.current().version,
                next = next.version,
                "the stored next layout does not follow the stored layout ({e}): it is not acted on"
            );
        }
        Membership {
            self_url,
            state: Mutex::new(MembershipState { history, acceptor }),
            generation: AtomicU64::new(1),
            workers: super::workers::Workers::default(),
            copies: super::copy_figures::CopyBoard::default(),
        }
    }

    /// This node's URL.
    pub fn self_url(&self) -> &str {
        &self.self_url
    }

    /// Grows on every change; starts at 1.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A copy of the live history.
    pub fn history(&self) -> History {
        lock(&self.state).history.clone()
    }

    /// Runs `f` on the state under the lock; a `true` from `f` (something
    /// changed) grows the generation.
    pub fn update<T>(&self, f: impl FnOnce(&mut MembershipState) -> (bool, T)) -> T {
        let mut state = lock(&self.state);
        let (changed, out) = f(&mut state);
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        out
    }

    /// Reads the state under the lock.
    pub fn read<T>(&self, f: impl FnOnce(&MembershipState) -> T) -> T {
        f(&lock(&self.state))
    }

    /// The newest committed layout (the next one during a transition).
    pub fn committed(&self) -> Layout {
        self.read(|s| s.history.current().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::layout::Change;

    fn urls(ports: &[u16]) -> Vec<String> {
        ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    }

    /// A stored next layout restarts in transition; a change grows the
    /// generation, a no-change does not.
    #[test]
    fn restart_mid_transition_and_generations() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = Layout::new(1, urls(&[1, 2, 3]), 3).unwrap();
        let mut acceptor = AcceptorNode::open(dir.path(), v1.clone()).unwrap();
        let m = Membership::new(urls(&[1])[0].clone(), acceptor);
        assert!(!m.history().in_transition());
        assert_eq!(m.generation(), 1);
        assert!(!m.update(|_| (false, false)));
        assert_eq!(m.generation(), 1);

        let change = Change {
            add: urls(&[4]),
            ..Change::default()
        };
        let v2 = v1.apply(&change).unwrap();
        acceptor = AcceptorNode::open(dir.path(), v1.clone()).unwrap();
        acceptor.learn(v2.clone()).unwrap();
        let again = AcceptorNode::open(dir.path(), v1).unwrap();
        let m = Membership::new(urls(&[1])[0].clone(), again);
        assert!(m.history().in_transition());
        assert_eq!(m.committed(), v2);
        m.update(|s| {
            (
                true,
                s.history
                    .raise(crate::cluster::history::Tracker::Ack, "x", 2),
            )
        });
        assert_eq!(m.generation(), 2);
    }
}
