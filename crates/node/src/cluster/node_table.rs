//! Stable node indices across layout versions.
//!
//! The replication driver knows replicas by index (its per-node state:
//! peer links, hint cursors). A layout change must not renumber them, so
//! every node ever named by a live layout gets an index in a table that
//! only grows while the process lives, and placement maps a layout's
//! members to those indices.
//!
//! [`Placed`] is a snapshot of a [`History`] in table indices, built once
//! per change of the history (rare) and read on every request.
//!
//! # Invariants
//! - An index, once given to a URL, names that URL for the life of the
//!   table; the table never shrinks.

use super::history::History;
use super::layout::Layout;
use super::placement;

/// URLs by stable index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTable {
    urls: Vec<String>,
}

impl NodeTable {
    /// A table starting with `urls`, in this order (index `i` is `urls[i]`).
    pub fn new(urls: &[String]) -> Self {
        let mut table = NodeTable::default();
        for url in urls {
            table.insert(url);
        }
        table
    }

    /// The index of `url`, given a new one if it has none.
    pub fn insert(&mut self, url: &str) -> usize {
        match self.index(url) {
            Some(i) => i,
            None => {
                self.urls.push(url.to_owned());
                self.urls.len() - 1
            }
        }
    }

    /// The index of `url`, if it has one.
    pub fn index(&self, url: &str) -> Option<usize> {
        self.urls.iter().position(|u| u == url)
    }

    /// The URL of index `i`.
    pub fn url(&self, i: usize) -> Option<&str> {
        self.urls.get(i).map(String::as_str)
    }

    /// Every URL, by index.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Indices given.
    pub fn len(&self) -> usize {
        self.urls.len()
    }

    /// True when no index was given.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }
}

/// One live layout in table indices.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PlacedLayout {
    version: u64,
    replication_factor: usize,
    seeds: Vec<u64>,
    index: Vec<usize>,
}

impl PlacedLayout {
    fn new(layout: &Layout, table: &mut NodeTable) -> Self {
        PlacedLayout {
            version: layout.version,
            replication_factor: layout.replication_factor,
            seeds: placement::seeds(&layout.nodes),
            index: layout.nodes.iter().map(|u| table.insert(u)).collect(),
        }
    }

    fn replicas(&self, key: &[u8]) -> Vec<usize> {
        self.rank(key, self.replication_factor)
    }

    /// The first `n` members of `key`'s ranking (at most every member).
    fn rank(&self, key: &[u8], n: usize) -> Vec<usize> {
        placement::rank_with_seeds(&self.seeds, key, n)
            .into_iter()
            .map(|i| self.index[i])
            .collect()
    }
}

/// One live layout as a [`Placed`] holds it: its version, `R` and members
/// (table indices, in the layout's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedView<'a> {
    /// Its version.
    pub version: u64,
    /// Its replication factor.
    pub replication_factor: usize,
    /// Its members, as table indices.
    pub members: &'a [usize],
}

/// A key's replicas for one request during any phase of a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyReplicas {
    /// Every replica asked (union of the sets, first set's order first).
    pub replicas: Vec<usize>,
    /// Each set as positions in `replicas`; `ack` is needed in each.
    pub sets: Vec<Vec<usize>>,
}

/// A [`History`] in table indices: what requests need on the hot path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    live: Vec<PlacedLayout>,
    read: usize,
}

impl Placed {
    /// The snapshot of `history`, giving new members indices in `table`.
    pub fn new(history: &History, table: &mut NodeTable) -> Self {
        let live: Vec<PlacedLayout> = history
            .live()
            .iter()
            .map(|l| PlacedLayout::new(l, table))
            .collect();
        let read_version = history.read_layout().version;
        let read = live
            .iter()
            .position(|l| l.version == read_version)
            .unwrap_or(0);
        Placed { live, read }
    }

    /// The version reads use.
    pub fn read_version(&self) -> u64 {
        self.live[self.read].version
    }

    /// Writes: every live version's set of `key`, ack needed in each.
    pub fn write(&self, key: &[u8]) -> KeyReplicas {
        self.write_sets(|l| l.replicas(key))
    }

    /// Writes asking `from` replicas of each live version (a client's
    /// `from`; `R` is [`Placed::write`]): the first `from` of each
    /// version's ranking of `key`, ack needed in each.
    pub fn write_from(&self, key: &[u8], from: usize) -> KeyReplicas {
        self.write_sets(|l| l.rank(key, from))
    }

    /// Reads asking the first `from` of the read version's ranking of `key`.
    pub fn read_from(&self, key: &[u8], from: usize) -> KeyReplicas {
        let replicas = self.live[self.read].rank(key, from);
        let sets = vec![(0..replicas.len()).collect()];
        KeyReplicas { replicas, sets }
    }

    /// The live layouts, oldest first.
    pub fn layouts(&self) -> impl Iterator<Item = PlacedView<'_>> {
        self.live.iter().map(|l| PlacedView {
            version: l.version,
            replication_factor: l.replication_factor,
            members: &l.index,
        })
    }

    /// The layout reads use.
    pub fn read_layout(&self) -> PlacedView<'_> {
        let l = &self.live[self.read];
        PlacedView {
            version: l.version,
            replication_factor: l.replication_factor,
            members: &l.index,
        }
    }

    fn write_sets(&self, set_of: impl Fn(&PlacedLayout) -> Vec<usize>) -> KeyReplicas {
        let mut replicas: Vec<usize> = Vec::new();
        let mut sets = Vec::with_capacity(self.live.len());
        for layout in &self.live {
            let set = set_of(layout)
                .into_iter()
                .map(|node| match replicas.iter().position(|&r| r == node) {
                    Some(p) => p,
                    None => {
                        replicas.push(node);
                        replicas.len() - 1
                    }
                })
                .collect();
            sets.push(set);
        }
        KeyReplicas { replicas, sets }
    }

    /// Reads: the read version's set of `key` only.
    pub fn read(&self, key: &[u8]) -> KeyReplicas {
        let replicas = self.live[self.read].replicas(key);
        let sets = vec![(0..replicas.len()).collect()];
        KeyReplicas { replicas, sets }
    }

    /// True while more than one version is live (writes go to both).
    pub fn in_transition(&self) -> bool {
        self.live.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::history::Tracker;

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    fn layout(version: u64, ports: &[u16]) -> Layout {
        Layout::new(version, ports.iter().map(|&p| url(p)).collect(), 3).unwrap()
    }

    /// Indices never move: a node that joins gets the next one, a node
    /// that leaves keeps its own.
    #[test]
    fn indices_are_stable() {
        let mut t = NodeTable::new(&[url(3), url(1), url(2)]);
        assert_eq!(t.index(&url(3)), Some(0));
        assert_eq!(t.insert(&url(4)), 3);
        assert_eq!(t.insert(&url(1)), 1);
        assert_eq!(t.url(3), Some(url(4).as_str()));
        assert_eq!(t.len(), 4);
    }

    /// During a grow, writes name both sets over a union without
    /// duplicates; reads name the old set until every node synced.
    #[test]
    fn placed_sets() {
        let mut table = NodeTable::new(&[url(1), url(2), url(3)]);
        let mut h = History::settled(layout(1, &[1, 2, 3]));
        h.begin(layout(2, &[1, 2, 3, 4])).unwrap();
        let p = Placed::new(&h, &mut table);
        assert_eq!(table.index(&url(4)), Some(3));
        assert!(p.in_transition());
        let mut both = 0;
        for k in 0..200u32 {
            let key = k.to_string();
            let w = p.write(key.as_bytes());
            assert_eq!(w.sets.len(), 2);
            let mut seen = w.replicas.clone();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), w.replicas.len(), "no duplicates");
            for (set, layout) in w.sets.iter().zip(h.live()) {
                let urls: Vec<&str> = set
                    .iter()
                    .map(|&pos| table.url(w.replicas[pos]).unwrap())
                    .collect();
                assert_eq!(urls, layout.replicas(key.as_bytes()));
            }
            both += usize::from(w.replicas.len() == 4);
            let r = p.read(key.as_bytes());
            assert!(!r.replicas.contains(&3), "read the new node before sync");
        }
        assert!(both > 50, "{both} keys moved");
        for n in [1, 2, 3, 4] {
            h.raise(Tracker::Sync, &url(n), 2);
        }
        let p = Placed::new(&h, &mut table);
        assert_eq!(p.read_version(), 2);
        assert!((0..200u32).any(|k| p.read(k.to_string().as_bytes()).replicas.contains(&3)));
    }
}
