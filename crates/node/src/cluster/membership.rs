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
//! - The nodes declared dead for the transition under way
//!   (`History::dead_nodes`) are stored (`super::dead_record`) by the
//!   update that grew them, before the lock is released, whoever grew
//!   them (a declaration, a gossip); a restart loads them back.

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
    /// Which nodes answered the last layout gossip call (`super::reach`).
    pub reach: super::reach::ReachBoard,
    /// The dead declarations last stored: the transition's version and
    /// the nodes. Locked only under `state`'s lock.
    dead_stored: Mutex<(u64, Vec<String>)>,
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
        let mut dead_stored = (0, Vec::new());
        if history.in_transition() {
            let v = history.current().version;
            match super::dead_record::load(acceptor.dir(), v) {
                Ok(dead) => {
                    for url in &dead {
                        if let Err(e) = history.declare_dead(url, v) {
                            tracing::warn!(
                                version = v,
                                "a stored dead declaration is not used: {e}"
                            );
                        }
                    }
                    dead_stored = (v, history.dead_nodes());
                }
                Err(e) => tracing::warn!(version = v, "the dead declarations are not used: {e}"),
            }
        }
        Membership {
            self_url,
            state: Mutex::new(MembershipState { history, acceptor }),
            generation: AtomicU64::new(1),
            workers: super::workers::Workers::default(),
            copies: super::copy_figures::CopyBoard::default(),
            reach: super::reach::ReachBoard::default(),
            dead_stored: Mutex::new(dead_stored),
        }
    }

    /// Declares `nodes` dead for the transition to `version`, the one
    /// under way (`History::declare_dead`), every one or none, and stores
    /// the declarations before it returns. `Err` says why not.
    pub fn declare_dead(&self, nodes: &[String], version: u64) -> Result<(), String> {
        self.update(|state| {
            let mut probe = state.history.clone();
            match probe.declare_dead_all(nodes, version) {
                Ok(grew) => {
                    state.history = probe;
                    (grew, Ok(()))
                }
                Err(e) => (false, Err(e.to_string())),
            }
        })?;
        self.read(|s| self.store_dead(s))
            .map_err(|e| format!("the declaration is not stored in the data directory: {e}"))
    }

    /// Stores the dead declarations of `state`'s transition when they
    /// differ from the ones stored last (called under the state's lock).
    fn store_dead(&self, state: &MembershipState) -> std::io::Result<()> {
        let h = &state.history;
        if !h.in_transition() {
            return Ok(());
        }
        let now = (h.current().version, h.dead_nodes());
        let mut stored = lock(&self.dead_stored);
        if now.1.is_empty() || *stored == now {
            return Ok(());
        }
        super::dead_record::store(state.acceptor.dir(), now.0, &now.1)?;
        *stored = now;
        Ok(())
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
            if let Err(e) = self.store_dead(&state) {
                tracing::warn!(
                    "cannot store the dead declarations (stored again on the next change): {e}"
                );
            }
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

    /// A declaration is stored before `declare_dead` returns and loaded
    /// by a restart mid-transition; one learned by gossip is stored too;
    /// a refused one changes nothing.
    #[test]
    fn dead_declarations_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = Layout::new(1, urls(&[1, 2, 3, 4]), 2).unwrap();
        let change = Change {
            remove: urls(&[3, 4]),
            ..Change::default()
        };
        let v2 = v1.apply(&change).unwrap();
        let mut acceptor = AcceptorNode::open(dir.path(), v1.clone()).unwrap();
        acceptor.learn(v2).unwrap();
        let m = Membership::new(urls(&[1])[0].clone(), acceptor);
        assert!(m.declare_dead(&urls(&[1]), 2).is_err());
        assert!(m.declare_dead(&urls(&[3]), 3).is_err());
        assert!(!dir.path().join("DEAD-2").exists());
        m.declare_dead(&urls(&[3]), 2).unwrap();
        assert_eq!(
            crate::cluster::dead_record::load(dir.path(), 2).unwrap(),
            urls(&[3])
        );
        // Node 4 declared elsewhere, learned by gossip: stored too.
        let mut other = m.history();
        other.declare_dead(&urls(&[4])[0], 2).unwrap();
        m.update(|s| (s.history.merge(other.trackers()), ()));
        assert_eq!(
            crate::cluster::dead_record::load(dir.path(), 2).unwrap(),
            urls(&[3, 4])
        );
        drop(m);
        let again = AcceptorNode::open(dir.path(), v1).unwrap();
        let m = Membership::new(urls(&[1])[0].clone(), again);
        assert_eq!(m.history().dead_nodes(), urls(&[3, 4]));
    }
}
