//! The figures of a cluster backup and a restore as this node sees them,
//! for `/metrics` (docs/BACKUP.md, "Metrics"): members waiting for the
//! point in time, checkpoint bytes served, restored versions applied.
//!
//! # Thread safety
//! Relaxed atomics: each figure is counted on its own; no reader needs two
//! of them to agree.

use std::sync::atomic::{AtomicU64, Ordering};

/// The counters (module header).
#[derive(Debug, Default)]
pub struct Figures {
    /// Checkpoint requests waiting for the clock to pass their point.
    pub waiting: AtomicU64,
    /// Bytes of checkpoint files served (`GET /v0/backup?file=`).
    pub served_bytes: AtomicU64,
    /// Restored versions this node applied (`POST /v0/backup?ingest=1`).
    pub ingested_versions: AtomicU64,
    /// Restored versions sent here and not written: their key is not kept
    /// here (left to its replicas), or the version held here wins.
    pub ingest_skipped_versions: AtomicU64,
}

impl Figures {
    /// Appends the figures in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let lines = [
            (
                "ataman_backup_waiting_for_point",
                "gauge",
                "Cluster-backup checkpoints waiting for the clock to pass T + replication timeout + skew.",
                &self.waiting,
            ),
            (
                "ataman_backup_served_bytes_total",
                "counter",
                "Bytes of checkpoint files served to a backup client.",
                &self.served_bytes,
            ),
            (
                "ataman_backup_ingested_versions_total",
                "counter",
                "Restored versions written by this node.",
                &self.ingested_versions,
            ),
            (
                "ataman_backup_ingest_skipped_versions_total",
                "counter",
                "Restored versions sent here and not written: their key is not kept here, or a newer version is held.",
                &self.ingest_skipped_versions,
            ),
        ];
        for (name, kind, help, value) in lines {
            let value = value.load(Ordering::Relaxed);
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            ));
        }
    }

    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
