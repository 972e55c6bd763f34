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
    /// The newest checkpoint's engine and hint-store part, microseconds:
    /// the point, the tables' hard links, the memtables' table, the
    /// manifests (`take`, step 2).
    pub checkpoint_links_us: AtomicU64,
    /// The newest checkpoint's checksums, microseconds: every file's
    /// CRC-32C read for `BACKUP-MANIFEST` (`take`, step 4).
    pub checkpoint_checksums_us: AtomicU64,
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
            (
                "ataman_backup_checkpoint_links_microseconds",
                "gauge",
                "The newest checkpoint's point, hard links, memtable table and manifests, in microseconds.",
                &self.checkpoint_links_us,
            ),
            (
                "ataman_backup_checkpoint_checksums_microseconds",
                "gauge",
                "The newest checkpoint's CRC-32C read of every file, in microseconds.",
                &self.checkpoint_checksums_us,
            ),
        ];
        for (name, kind, help, value) in lines {
            let value = value.load(Ordering::Relaxed);
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            ));
        }
    }

    /// Sets `gauge` to `duration` in microseconds.
    pub fn set_us(gauge: &AtomicU64, duration: std::time::Duration) {
        let us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        gauge.store(us, Ordering::Relaxed);
    }

    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
