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
            // Gossip is the node's, not the acceptor's (`super::learn`).
            Request::Gossip { .. } => {
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
