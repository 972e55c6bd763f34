//! The cluster as one node sees it: the list of node URLs, which one is
//! this node, and where each key's replicas live.
//!
//! - [`placement`]: rendezvous hashing, `from` replicas of a key.
//! - [`layout`]: a versioned layout (members, replication factor), its
//!   validation, changes and byte codec.
//! - [`agreement`]: single-decree Paxos choosing each next layout version.
//! - [`agreement_wire`]: the agreement's messages between nodes, as bytes.
//! - [`acceptor_node`]: a node's acceptor, durable before it answers, and
//!   the chosen next layout (`LAYOUT-NEXT`), not acted on yet.
//! - [`propose`]: a proposal run to its end over blocking calls, bounded.
//! - [`change_request`]: a `POST /v0/layout` from its parameters to its
//!   200, 409, 400 or 503, run off the network thread.
//! - [`admission`]: what a layout change request gets before agreement
//!   (propose, 200 for the same plan, 409, 400).
//! - [`added_identity`]: whether an added URL names a node waiting to join
//!   this cluster under exactly that URL (pure).
//! - [`history`]: the live layouts of a transition and the trackers that
//!   decide write sets, read sets, copying, pruning and cleanup.
//! - [`node_table`]: stable node indices across layout versions.
//! - [`node_ids`]: each member's node id (its clock's node bits), and the
//!   id a change gives an added node (pure).
//! - [`membership`]: the live history and the acceptor, shared by the
//!   node's threads.
//! - [`live`]: the live placement the node's threads read (the node
//!   table, the history in indices, the read layout as a [`Topology`]),
//!   rebuilt when the membership's generation moves.
//! - [`learn`]: a peer's agreement request answered on the node's
//!   membership; a committed layout learned by acceptor and history at once.
//! - [`copy_figures`]: what each node copied for a transition, as gossip
//!   spreads it for `GET /v0/layout`'s `moving`.
//! - [`workers`]: the bounded threads the layout endpoints' blocking work runs on.
//! - [`join`]: `--join`: the seed's layout, kept up with until added.
//! - [`transition_rules`]: what the transition driver does next (pure).
//! - [`copy_completion`]: whether a node's copy for a transition is
//!   complete, and what it waits for (pure).
//! - [`dead_record`]: `<data-dir>/DEAD-<version>`, the nodes declared dead
//!   for a transition.
//! - [`cleanup`]: deleting the copies a node no longer replicates after a
//!   transition (what it keeps, the [`cleanup::Cleaner`] it deletes through).
//! - [`cleanup_record`]: `<data-dir>/CLEANUP-<version>`, a cleanup done.
//! - [`cleanup_metrics`]: the cleanup's figures on `/metrics` and `/v0/layout`.
//! - [`transition`]: the driver thread `ataman-transition`, and the
//!   [`transition::Copier`] it copies through.
//! - [`transition_state`]: the placement each network thread uses, and
//!   the layout gauges.
//! - [`layout_file`]: `<data-dir>/LAYOUT`, and which layout a node starts
//!   with (bootstrap from `--cluster`, or the stored one).

pub mod acceptor_node;
pub mod added_identity;
pub mod admission;
pub mod agreement;
pub mod agreement_wire;
pub mod change_request;
pub mod cleanup;
pub mod cleanup_metrics;
pub mod cleanup_record;
pub mod copy_completion;
pub mod copy_figures;
pub mod dead_record;
pub mod history;
pub mod join;
pub mod layout;
pub mod layout_file;
pub mod learn;
pub mod live;
pub mod membership;
pub mod node_ids;
pub mod node_table;
pub mod placement;
pub mod propose;
pub mod reach;
pub mod transition;
pub mod transition_rules;
pub mod transition_state;
pub mod workers;

/// `host:port` of an `http(s)://host:port[/...]` URL (validated by the config).
pub fn dial_address(url: &str) -> String {
    let rest = crate::tls::strip_scheme(url);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// One layout as a list: its nodes (in `--cluster` order for a fixed
/// cluster, in node-table order for a live layout, `live::Placement::read_view`),
/// this node's place in it, its version, `R` and each node's dial override.
#[derive(Debug, Clone)]
pub struct Topology {
    nodes: Vec<String>,
    self_index: usize,
    seeds: Vec<u64>,
    version: u64,
    replication_factor: usize,
    via: Vec<Option<String>>,
}

impl Topology {
    /// A topology of `nodes` (every node's URL, the same list on every node)
    /// where this node is `nodes[self_index]`.
    pub fn new(nodes: Vec<String>, self_index: usize) -> Self {
        let seeds = placement::seeds(&nodes);
        Topology {
            replication_factor: nodes.len(),
            via: vec![None; nodes.len()],
            nodes,
            self_index,
            seeds,
            version: 1,
        }
    }

    /// The same nodes keeping `replication_factor` replicas of each key.
    pub fn with_replication_factor(mut self, replication_factor: usize) -> Self {
        self.replication_factor = replication_factor;
        self
    }

    /// The same nodes, node `i` dialled at `via[i]` when given (`--peer-via`).
    pub fn with_via(mut self, mut via: Vec<Option<String>>) -> Self {
        via.resize(self.nodes.len(), None);
        self.via = via;
        self
    }

    /// Replicas of each key anti-entropy keeps (`R`).
    pub fn replication_factor(&self) -> usize {
        self.replication_factor
    }

    /// The address node `i` is dialled at: its `--peer-via`, else its URL's.
    pub fn dial(&self, i: usize) -> String {
        match self.via.get(i).cloned().flatten() {
            Some(via) => via,
            None => dial_address(&self.nodes[i]),
        }
    }

    /// This node's URL.
    pub fn self_url(&self) -> &str {
        &self.nodes[self.self_index]
    }

    /// The same nodes under layout version `version` (`layout_file`).
    pub fn with_version(mut self, version: u64) -> Self {
        self.version = version;
        self
    }

    /// The layout version these nodes are (1 for a bootstrapped cluster).
    pub fn version(&self) -> u64 {
        self.version
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
