//! The driver of one run: takes events from the world in order and carries
//! them out on the nodes, the network and the clients, recording what
//! happens in the [`History`](crate::history::History).
//!
//! A run has two phases:
//! 1. **Workload**: the clients send `steps` requests while faults,
//!    flushes, compactions, hint deliveries and anti-entropy rounds happen
//!    at times the random number generator picks.
//! 2. **Heal and settle**: every fault ends (cuts healed, loss off, armed
//!    disk faults disarmed, crashed nodes restarted), the cluster runs
//!    until no request, message or hint is pending; then an anti-entropy
//!    round between every pair of nodes; then the final collection
//!    (`final_collection`: past the horizon's margin, two rounds each
//!    way, a compaction on every node); then, if configured, every node
//!    loses power once more and restarts; then each node's state is
//!    recorded and the checker judges the run.
//!
//! - `run`: the events, the counts, [`Sim`], the phases and the dispatch
//!   of events;
//! - `traffic`: client requests, coordination, messages, local writes, hints;
//! - `disruption`: faults, restarts, flushes and compactions, anti-entropy ticks;
//! - `final_collection`: the collection of dead versions after the final repairs;
//! - `membership`: a layout transition mid-run (`--grow`): the node's own
//!   layout rules on every node, tracker gossip, copying, cleanup.

mod disruption;
mod final_collection;
pub mod membership;
mod run;
mod traffic;

pub use run::{
    ANTI_ENTROPY_GAP_MS, DISK_MS_MAX, Event, LocalWrite, MAINTENANCE_GAP_MS, RunResult, RunStats,
    SETTLE_MS_MAX, Sim, node_names, run,
};
