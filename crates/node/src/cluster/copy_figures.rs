//! What each node copied for a layout transition, as `GET /v0/layout`'s
//! `moving` shows it on every node.
//!
//! # Rules
//! - A node counts what it receives itself (`antientropy::transfer`'s
//!   metrics): the figures of its running (or last) copy, with the layout
//!   version that copy enters.
//! - The layout gossip carries the sender's figures both ways
//!   (`super::agreement_wire`, `Gossip`), so every node keeps the latest
//!   figures of the others in a [`CopyBoard`], about one gossip interval
//!   old.
//! - The board is memory only (gossip refills it after a restart) and
//!   bounded: it keeps only the nodes of the sender's and this node's
//!   live layouts, at most `super::layout::LAYOUT_NODES_MAX` twice over.

use super::layout::LAYOUT_NODES_MAX;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One node's copy for one layout transition.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CopyFigures {
    /// The layout version the copy enters (0: no copy yet).
    pub version: u64,
    /// Keys the sources hold for the node, summed over sources (an upper bound).
    pub keys_to_copy: u64,
    /// Their key and value bytes.
    pub bytes_to_copy: u64,
    /// Versions received so far.
    pub keys_copied: u64,
    /// Their key and value bytes.
    pub bytes_copied: u64,
}

/// A node's figures as gossip carries them: whose they are.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeCopy {
    /// The node's URL.
    pub url: String,
    /// Its figures.
    pub figures: CopyFigures,
}

/// The latest figures of every node heard from, by URL.
#[derive(Debug, Default)]
pub struct CopyBoard {
    nodes: Mutex<BTreeMap<String, CopyFigures>>,
}

/// Entries the board keeps at most.
pub const COPY_BOARD_NODES_MAX: usize = 2 * LAYOUT_NODES_MAX;

impl CopyBoard {
    /// Keeps `copy` as its node's latest figures, unless the board is
    /// full of other nodes.
    pub fn note(&self, copy: &NodeCopy) {
        let mut nodes = match self.nodes.lock() {
            Ok(n) => n,
            Err(poisoned) => poisoned.into_inner(),
        };
        if nodes.len() < COPY_BOARD_NODES_MAX || nodes.contains_key(&copy.url) {
            nodes.insert(copy.url.clone(), copy.figures);
        }
    }

    /// Drops every node `keep` rejects (nodes no live layout names).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut nodes = match self.nodes.lock() {
            Ok(n) => n,
            Err(poisoned) => poisoned.into_inner(),
        };
        nodes.retain(|url, _| keep(url));
    }

    /// The figures of `url`, if heard.
    pub fn get(&self, url: &str) -> Option<CopyFigures> {
        let nodes = match self.nodes.lock() {
            Ok(n) => n,
            Err(poisoned) => poisoned.into_inner(),
        };
        nodes.get(url).copied()
    }

    /// Every node's figures for the copy into layout `version`.
    pub fn for_version(&self, version: u64) -> Vec<(String, CopyFigures)> {
        let nodes = match self.nodes.lock() {
            Ok(n) => n,
            Err(poisoned) => poisoned.into_inner(),
        };
        nodes
            .iter()
            .filter(|(_, f)| f.version == version)
            .map(|(url, f)| (url.clone(), *f))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(url: &str, version: u64, keys: u64) -> NodeCopy {
        NodeCopy {
            url: url.to_owned(),
            figures: CopyFigures {
                version,
                keys_copied: keys,
                ..CopyFigures::default()
            },
        }
    }

    /// The latest figures win; only the asked version is listed; a full
    /// board still updates the nodes it holds; retain drops the others.
    #[test]
    fn latest_figures_per_node_bounded() {
        let board = CopyBoard::default();
        board.note(&copy("a", 2, 5));
        board.note(&copy("a", 2, 9));
        board.note(&copy("b", 1, 3));
        assert_eq!(board.get("a").map(|f| f.keys_copied), Some(9));
        let v2 = board.for_version(2);
        assert_eq!(v2.len(), 1);
        assert_eq!(v2[0].0, "a");
        for i in 0..COPY_BOARD_NODES_MAX {
            board.note(&copy(&format!("n{i}"), 2, 1));
        }
        assert_eq!(board.get(&format!("n{}", COPY_BOARD_NODES_MAX - 1)), None);
        board.note(&copy("b", 2, 4));
        assert_eq!(board.get("b").map(|f| f.keys_copied), Some(4));
        board.retain(|url| url == "a");
        assert_eq!(board.get("b"), None);
        assert!(board.get("a").is_some());
    }
}
