//! The cluster as one node sees it: the list of node URLs, which one is
//! this node, and where each key's replicas live.
//!
//! - [`placement`]: rendezvous hashing, `from` replicas of a key.

pub mod placement;

/// `host:port` of an `http(s)://host:port[/...]` URL (validated by the config).
pub fn dial_address(url: &str) -> String {
    let rest = crate::tls::strip_scheme(url);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// The nodes of the cluster, in `--cluster` order, and this node's place in it.
#[derive(Debug, Clone)]
pub struct Topology {
    nodes: Vec<String>,
    self_index: usize,
    seeds: Vec<u64>,
}

impl Topology {
    /// A topology of `nodes` (every node's URL, the same list on every node)
    /// where this node is `nodes[self_index]`.
    pub fn new(nodes: Vec<String>, self_index: usize) -> Self {
        let seeds = placement::seeds(&nodes);
        Topology {
            nodes,
            self_index,
            seeds,
        }
    }

    /// Every node's URL.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Nodes in the cluster.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never true: a cluster has at least this node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// This node's index in [`Topology::nodes`].
    pub fn self_index(&self) -> usize {
        self.self_index
    }

    /// Each node's placement seed (hash of its URL), in list order.
    pub fn seeds(&self) -> &[u64] {
        &self.seeds
    }

    /// Indices of the `from` replicas of `key`, most preferred first.
    pub fn replicas(&self, key: &[u8], from: usize) -> Vec<usize> {
        placement::rank_with_seeds(&self.seeds, key, from)
    }
}
