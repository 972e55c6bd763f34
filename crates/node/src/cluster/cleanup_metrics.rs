//! The cleanup's figures (`super::cleanup`): on `/metrics` as
//! `ataman_layout_cleanup_*`, and on `GET /v0/layout` as `"cleanup"`.
//!
//! # Thread safety
//! Relaxed atomics, written by the driver's cleanup thread, each read on
//! its own.

use super::cleanup::Purged;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Figures of this node's cleanups since it started.
#[derive(Debug, Default)]
pub struct CleanupFigures {
    /// The version whose cleanup runs, 0 when none does.
    pub running: AtomicU64,
    /// The newest version whose cleanup is done (as recorded at start, or
    /// completed since), 0 when none is known.
    pub version: AtomicU64,
    /// Keys whose local versions cleanups dropped.
    pub keys_purged: AtomicU64,
    /// Their bytes (internal keys and stored values).
    pub bytes_purged: AtomicU64,
}

impl CleanupFigures {
    /// A cleanup for `version` starts.
    pub fn start(&self, version: u64) {
        self.running.store(version, Ordering::Relaxed);
    }

    /// The running cleanup ended: `done` with what it dropped, or not.
    pub fn end(&self, version: u64, done: Option<Purged>) {
        self.running.store(0, Ordering::Relaxed);
        if let Some(p) = done {
            self.version.fetch_max(version, Ordering::Relaxed);
            self.keys_purged.fetch_add(p.keys, Ordering::Relaxed);
            self.bytes_purged.fetch_add(p.bytes, Ordering::Relaxed);
        }
    }

    /// Appends the figures to a `/metrics` text.
    pub fn render(&self, out: &mut String) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (name, help, kind, value) in [
            (
                "ataman_layout_cleanup_version",
                "The newest layout version whose cleanup (deleting copies this node no longer replicates) is done.",
                "gauge",
                get(&self.version),
            ),
            (
                "ataman_layout_cleanup_running",
                "The layout version whose cleanup runs, 0 when none does.",
                "gauge",
                get(&self.running),
            ),
            (
                "ataman_layout_cleanup_keys_purged_total",
                "Keys whose local versions cleanups dropped (keys this node no longer replicates).",
                "counter",
                get(&self.keys_purged),
            ),
            (
                "ataman_layout_cleanup_bytes_purged_total",
                "Bytes (keys and values, every version) cleanups dropped.",
                "counter",
                get(&self.bytes_purged),
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
    }

    /// The JSON object of `GET /v0/layout`'s `"cleanup"`.
    pub fn json(&self) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{{\"version\":{},\"running\":{},\"keys_purged\":{},\"bytes_purged\":{}}}",
            get(&self.version),
            get(&self.running),
            get(&self.keys_purged),
            get(&self.bytes_purged)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completed cleanup counts; a failed one only stops running.
    #[test]
    fn figures() {
        let f = CleanupFigures::default();
        f.start(3);
        assert!(f.json().contains("\"running\":3"));
        f.end(3, Some(Purged { keys: 5, bytes: 70 }));
        f.start(4);
        f.end(4, None);
        assert_eq!(
            f.json(),
            "{\"version\":3,\"running\":0,\"keys_purged\":5,\"bytes_purged\":70}"
        );
        let mut out = String::new();
        f.render(&mut out);
        assert!(out.contains("\nataman_layout_cleanup_keys_purged_total 5\n"));
        assert!(out.contains("\nataman_layout_cleanup_bytes_purged_total 70\n"));
    }
}
