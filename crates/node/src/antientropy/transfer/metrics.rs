//! The copying part of `/metrics` (`ataman_layout_copy_*`), shared by the
//! copying thread (the gaining side) and the `ataman-sync` thread (the
//! source side).
//!
//! # Thread safety
//! Relaxed atomics: each figure is read on its own.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Figures of copying for layout transitions.
#[derive(Debug, Default)]
pub struct CopyMetrics {
    /// 1 while `copy_gained` runs.
    pub running: AtomicU64,
    /// Keys the sources of the running (or last) copy hold in their
    /// scopes, summed over sources: an upper bound of what moves (a key
    /// held by several old replicas counts once per source, moves once).
    pub keys_to_move: AtomicU64,
    /// Their key and value bytes, summed the same way.
    pub bytes_to_move: AtomicU64,
    /// Versions received and applied (gaining side).
    pub keys_moved: AtomicU64,
    /// Their key and value bytes (gaining side): `rate()` of it is the copy rate.
    pub bytes_moved: AtomicU64,
    /// Versions sent to gaining nodes (source side).
    pub keys_sent: AtomicU64,
    /// Their key and value bytes (source side).
    pub bytes_sent: AtomicU64,
    /// Sessions with a source that completed (gaining side).
    pub sessions_done: AtomicU64,
    /// Sessions with a source that failed (gaining side; each try counts).
    pub sessions_failed: AtomicU64,
    /// Transition sessions served for gaining nodes (source side).
    pub sessions_served: AtomicU64,
    /// Sources not finished when the last copy ended.
    pub sources_pending: AtomicU64,
    /// Versions received by the running (or last) copy (not on `/metrics`:
    /// for `/v0/layout`'s `moving`).
    pub keys_copied: AtomicU64,
    /// Their key and value bytes.
    pub bytes_copied: AtomicU64,
    /// The layout version the running (or last) copy enters (0: none yet).
    pub version: AtomicU64,
}

/// The running (or last) copy's figures on this node, for `/v0/layout`.
pub use crate::cluster::copy_figures::CopyFigures as CopyProgress;

impl CopyMetrics {
    /// The running (or last) copy's figures.
    pub fn progress(&self) -> CopyProgress {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CopyProgress {
            version: get(&self.version),
            keys_to_copy: get(&self.keys_to_move),
            bytes_to_copy: get(&self.bytes_to_move),
            keys_copied: get(&self.keys_copied),
            bytes_copied: get(&self.bytes_copied),
        }
    }

    /// Starts the figures of a new copy, into layout `version`.
    pub(super) fn start_copy(&self, version: u64) {
        self.version.store(version, Ordering::Relaxed);
        for figure in [
            &self.keys_to_move,
            &self.bytes_to_move,
            &self.keys_copied,
            &self.bytes_copied,
        ] {
            figure.store(0, Ordering::Relaxed);
        }
        self.running.store(1, Ordering::Relaxed);
    }

    /// Takes back a failed session's offer (the next try offers again).
    pub(super) fn withdraw_offer(&self, keys: u64, bytes: u64) {
        for (figure, n) in [(&self.keys_to_move, keys), (&self.bytes_to_move, bytes)] {
            let _ = figure.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
        }
    }

    /// Appends the copying part of `/metrics`.
    pub fn render(&self, out: &mut String) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let figures: [(&str, &str, &str, &AtomicU64); 9] = [
            (
                "ataman_layout_copy_running",
                "1 while this node copies the data it gains in a layout transition.",
                "gauge",
                &self.running,
            ),
            (
                "ataman_layout_copy_keys_to_move",
                "Keys the sources of the running or last copy hold for this node, summed over sources (an upper bound).",
                "gauge",
                &self.keys_to_move,
            ),
            (
                "ataman_layout_copy_bytes_to_move",
                "Key and value bytes the sources of the running or last copy hold for this node, summed over sources.",
                "gauge",
                &self.bytes_to_move,
            ),
            (
                "ataman_layout_copy_keys_moved_total",
                "Versions received from sources and applied here.",
                "counter",
                &self.keys_moved,
            ),
            (
                "ataman_layout_copy_bytes_moved_total",
                "Key and value bytes received from sources and applied here (its rate is the copy rate).",
                "counter",
                &self.bytes_moved,
            ),
            (
                "ataman_layout_copy_keys_sent_total",
                "Versions sent to nodes gaining them.",
                "counter",
                &self.keys_sent,
            ),
            (
                "ataman_layout_copy_bytes_sent_total",
                "Key and value bytes sent to nodes gaining them.",
                "counter",
                &self.bytes_sent,
            ),
            (
                "ataman_layout_copy_sessions_served_total",
                "Transition sessions served for nodes gaining keys.",
                "counter",
                &self.sessions_served,
            ),
            (
                "ataman_layout_copy_sources_pending",
                "Sources this node has not finished copying from when its last copy ended.",
                "gauge",
                &self.sources_pending,
            ),
        ];
        for (name, help, kind, value) in figures {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                get(value)
            );
        }
        let _ = writeln!(
            out,
            "# HELP ataman_layout_copy_sessions_total Transition sessions with sources, by result.\n# TYPE ataman_layout_copy_sessions_total counter"
        );
        for (result, n) in [
            ("done", &self.sessions_done),
            ("failed", &self.sessions_failed),
        ] {
            let _ = writeln!(
                out,
                "ataman_layout_copy_sessions_total{{result=\"{result}\"}} {}",
                get(n)
            );
        }
    }
}
