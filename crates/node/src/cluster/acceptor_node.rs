//! One node's side of the agreement: its acceptor, made durable before it
//! answers, and the next layout it learned (`<data-dir>/LAYOUT-NEXT`).
//!
//! # Rules
//! - A prepare or an accept that changes the acceptor's state is answered
//!   only after the new state is in `LAYOUT-ACCEPTOR` (fsynced, renamed).
//!   The state is changed on a copy and kept only once stored, so a failed
//!   write answers nothing and leaves the acceptor as it was on disk.
//! - A commit of version `committed + 1` is stored in `LAYOUT-NEXT`, then
//!   the acceptor moves to the slot after it. The node keeps serving with
//!   `LAYOUT` (its current layout): the chosen version is not acted on
//!   until transitions are wired into the node (issue 16, stage 4).
//!   Another version (older, or one further ahead that this node has not
//!   learned the predecessor of) changes nothing.
//! - A prepare or accept for a slot already decided is answered with the
//!   layout chosen for it when the node holds it (`Reply::Chosen`), so a
//!   proposer whose value won while it was pre-empted learns it (200).
//! - Once the old version is pruned, [`AcceptorNode::promote`] stores the
//!   next layout as `LAYOUT` and removes `LAYOUT-NEXT`.
//! - At open, a `LAYOUT-NEXT` not newer than `LAYOUT` is ignored, and the
//!   acceptor is for the slot after the newest committed version.

use super::agreement::{Acceptor, AcceptorReply};
use super::agreement_wire::{Reply, Request};
use super::layout::Layout;
use super::layout_file::{self, LayoutFileError};
use std::path::{Path, PathBuf};

/// The acceptor of a node and what it committed.
#[derive(Debug)]
pub struct AcceptorNode {
    dir: PathBuf,
    current: Layout,
    next: Option<Layout>,
    acceptor: Acceptor,
}

impl AcceptorNode {
    /// The node's acceptor in `dir`, which serves with `current` (its `LAYOUT`).
    pub fn open(dir: &Path, current: Layout) -> Result<AcceptorNode, LayoutFileError> {
        let next = layout_file::load_next(dir)?.filter(|n| n.version > current.version);
        let committed = next.as_ref().map_or(current.version, |n| n.version);
        let acceptor = layout_file::load_acceptor(dir, committed)?;
        Ok(AcceptorNode {
            dir: dir.to_owned(),
            current,
            next,
            acceptor,
        })
    }

    /// The data directory its files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The layout the node serves with.
    pub fn current(&self) -> &Layout {
        &self.current
    }

    /// The chosen next layout, not acted on yet.
    pub fn next(&self) -> Option<&Layout> {
        self.next.as_ref()
    }

    /// The newest committed layout: the next one if any, else the current.
    pub fn committed(&self) -> &Layout {
        self.next.as_ref().unwrap_or(&self.current)
    }

    /// Answers a proposer's request; the state it changed is durable first.
    pub fn handle(&mut self, request: Request) -> Result<Reply, LayoutFileError> {
        let mut acceptor = self.acceptor.clone();
        let (slot, (reply, changed)) = match request {
            Request::Prepare { slot, ballot } => (slot, acceptor.on_prepare(slot, ballot)),
            Request::Accept {
                slot,
                ballot,
                value,
            } => (slot, acceptor.on_accept(slot, ballot, value)),
            Request::Commit { value } => return self.learn(value),
            // Gossip and reads are the node's, not the acceptor's (`super::learn`).
            Request::Gossip { .. } | Request::Read => {
                return Ok(Reply::Committed {
                    version: self.committed().version,
                });
            }
        };
        if changed {
            layout_file::store_acceptor(&self.dir, &acceptor)?;
            self.acceptor = acceptor;
        }
        if matches!(reply, AcceptorReply::Decided { .. }) && self.committed().version == slot {
            return Ok(Reply::Chosen {
                value: self.committed().clone(),
            });
        }
        Ok(Reply::Acceptor(reply))
    }

    /// Makes `layout` (the only live version once the old one is pruned:
    /// the history's current layout) the stored current one: `LAYOUT` :=
    /// `layout` (fsynced, renamed), then `LAYOUT-NEXT` is removed unless it
    /// holds a newer version (learned while the transition ran: it begins
    /// next). A crash between the two leaves a `LAYOUT-NEXT` not newer than
    /// `LAYOUT`, which `open` ignores. Returns false (nothing written) when
    /// `layout` is not newer than the stored current one or not committed.
    pub fn promote(&mut self, layout: &Layout) -> Result<bool, LayoutFileError> {
        if layout.version <= self.current.version || layout.version > self.committed().version {
            return Ok(false);
        }
        layout_file::store(&self.dir, layout)?;
        self.current = layout.clone();
        if self
            .next
            .as_ref()
            .is_some_and(|n| n.version <= layout.version)
        {
            self.next = None;
            // Best effort: a file left behind is ignored at open.
            let _ = layout_file::remove_next(&self.dir);
        }
        Ok(true)
    }

    /// Replaces the current layout by a newer `layout` learned from a seed
    /// while this node is not a member of either (a joining node waiting
    /// to be added keeps up with the cluster, so that the commit adding
    /// it is the next version). Does nothing (`Ok(false)`) unless
    /// `layout` is newer than every committed version.
    pub fn replace_current(&mut self, layout: Layout) -> Result<bool, LayoutFileError> {
        if layout.version <= self.committed().version {
            return Ok(false);
        }
        layout_file::store(&self.dir, &layout)?;
        let _ = layout_file::remove_next(&self.dir);
        let mut acceptor = self.acceptor.clone();
        if acceptor.advance(layout.version) {
            layout_file::store_acceptor(&self.dir, &acceptor)?;
        }
        self.acceptor = acceptor;
        self.current = layout;
        self.next = None;
        Ok(true)
    }

    /// Learns a chosen layout (the rules above).
    pub fn learn(&mut self, value: Layout) -> Result<Reply, LayoutFileError> {
        if value.version == self.committed().version + 1 {
            layout_file::store_next(&self.dir, &value)?;
            let mut acceptor = self.acceptor.clone();
            if acceptor.advance(value.version) {
                layout_file::store_acceptor(&self.dir, &acceptor)?;
            }
            self.acceptor = acceptor;
            self.next = Some(value);
        }
        Ok(Reply::Committed {
            version: self.committed().version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(version: u64, ports: &[u16]) -> Layout {
        let urls = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        Layout::new(version, urls, 2).unwrap()
    }

    /// Promotion stores the next layout as current and survives a reopen;
    /// a crash between the two writes (LAYOUT written, LAYOUT-NEXT left)
    /// reopens settled at the new version; a later commit still works.
    #[test]
    fn promote_is_crash_safe() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2) = (layout(1, &[1, 2]), layout(2, &[1, 2, 3]));
        layout_file::store(dir.path(), &v1).unwrap();
        let mut a = AcceptorNode::open(dir.path(), v1.clone()).unwrap();
        assert!(!a.promote(&v2).unwrap(), "not committed");
        a.learn(v2.clone()).unwrap();
        // The crash image: LAYOUT already v2, LAYOUT-NEXT still v2.
        layout_file::store(dir.path(), &v2).unwrap();
        let stored = layout_file::load(dir.path()).unwrap().unwrap();
        let crashed = AcceptorNode::open(dir.path(), stored).unwrap();
        assert_eq!(crashed.current(), &v2);
        assert!(crashed.next().is_none());
        // The whole promotion.
        assert!(a.promote(&v2).unwrap());
        assert!(!a.promote(&v2).unwrap(), "done");
        assert!(layout_file::load_next(dir.path()).unwrap().is_none());
        let stored = layout_file::load(dir.path()).unwrap().unwrap();
        let mut again = AcceptorNode::open(dir.path(), stored).unwrap();
        assert_eq!((again.current(), again.next()), (&v2, None));
        let v3 = layout(3, &[1, 3]);
        again.learn(v3.clone()).unwrap();
        assert_eq!(again.next(), Some(&v3));
    }

    /// A version learned while the transition ran (`LAYOUT-NEXT` = v3 while
    /// the history promotes v2) is kept as next, and reopens as a
    /// transition from v2 to v3.
    #[test]
    fn promote_keeps_a_newer_next() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = layout(1, &[1, 2]);
        let v2 = layout(2, &[1, 2, 3]);
        let v3 = layout(3, &[1, 3]);
        layout_file::store(dir.path(), &v1).unwrap();
        let mut a = AcceptorNode::open(dir.path(), v1).unwrap();
        a.learn(v2.clone()).unwrap();
        // What the agreement does when v3 is learned during the transition.
        layout_file::store_next(dir.path(), &v3).unwrap();
        a.next = Some(v3.clone());
        assert!(a.promote(&v2).unwrap());
        assert_eq!((a.current(), a.next()), (&v2, Some(&v3)));
        let stored = layout_file::load(dir.path()).unwrap().unwrap();
        let again = AcceptorNode::open(dir.path(), stored).unwrap();
        assert_eq!((again.current(), again.next()), (&v2, Some(&v3)));
    }

    /// A joining node replaces its current layout by a newer one only.
    #[test]
    fn replace_current_only_forward() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v3) = (layout(1, &[1, 2]), layout(3, &[1, 2, 3]));
        let mut a = AcceptorNode::open(dir.path(), v1.clone()).unwrap();
        assert!(a.replace_current(v3.clone()).unwrap());
        assert!(!a.replace_current(v1).unwrap());
        assert_eq!(a.current(), &v3);
        assert_eq!(layout_file::load(dir.path()).unwrap(), Some(v3.clone()));
        let v4 = layout(4, &[1, 2, 3, 4]);
        a.learn(v4.clone()).unwrap();
        assert_eq!(a.next(), Some(&v4));
    }
}
