//! Health: whether the process lives, whether the node is ready for
//! client traffic, and the cluster's health as one observer sees it
//! (docs/API.md, "Health"; docs/CLUSTER.md, "Cluster health").
//!
//! ## Layout
//! - [`readiness`]: the pure rule of `GET /readyz` and its reasons.
//! - [`cluster_health`]: the pure rule of `GET /v0/cluster/health` and of
//!   `ataman cluster status`'s summary.
//! - [`startup`]: the thread that answers `/livez` and `/readyz` while
//!   the write-ahead log is replayed, before the network threads exist.

pub mod cluster_health;
pub mod readiness;
pub mod startup;
