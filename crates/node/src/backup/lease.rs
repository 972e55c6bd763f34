//! The node's checkpoints and their leases: `Backups`, the registry of
//! the complete checkpoints in `<data-dir>/backups/`, at most one being
//! taken at a time, and the bytes they pin (docs/BACKUP.md, "Leases").
//!
//! # Rules
//! - A checkpoint is held until its lease ends (`lease_until_ms`, in its
//!   manifest, so a restart keeps it) or it is deleted; then its directory
//!   is removed, which releases the SSTables it shares with the live store
//!   (a hard link's bytes go when its last name does). [`expired`] decides.
//! - `ataman_backup_pinned_bytes` is the sum of the held checkpoints'
//!   linked SSTable bytes: disk the live store could otherwise free.
//! - At open, a `.tmp-` directory (a checkpoint killed before its rename)
//!   is removed: it never was a checkpoint.
//!
//! # Thread safety
//! Shared by the network threads (list, delete, the metrics page), the
//! job taking a checkpoint, and the node's housekeeping (the sweep). The
//! list is under one mutex; a checkpoint is taken outside it (the
//! `running` flag admits one at a time).

use super::manifest::{Manifest, checked_name};
use super::take::{self, Sources, TEMP_PREFIX, TakeError};
use ataman_testkit::lock::lock;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The lease of a checkpoint when its request names none.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(3600);
/// The longest lease a request may ask.
pub const LEASE_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// The folder of the checkpoints inside the data directory.
pub const BACKUPS_DIR_NAME: &str = "backups";
/// Checkpoints held at once, at most: a request past it is refused (delete
/// one, or let a lease end).
pub const CHECKPOINTS_HELD_MAX: usize = 64;

/// How long a stopping node waits for a checkpoint being taken.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The names of the checkpoints whose lease has ended at `now_ms`.
pub fn expired(held: &[Manifest], now_ms: u64) -> Vec<String> {
    held.iter()
        .filter(|m| m.lease_until_ms <= now_ms)
        .map(|m| m.name.clone())
        .collect()
}

/// The name of a checkpoint taken at `created_ms`: `ckpt-MS`, or with a
/// `-N` suffix when that name is held.
pub fn fresh_name(held: &[Manifest], created_ms: u64) -> String {
    let base = format!("ckpt-{created_ms}");
    (0..=held.len())
        .map(|n| {
            if n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            }
        })
        .find(|name| !held.iter().any(|m| &m.name == name))
        .unwrap_or(base)
}

/// Why a checkpoint request is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// One is being taken now (409).
    #[error("a checkpoint is being taken now: retry when it is done")]
    Running,
    /// [`CHECKPOINTS_HELD_MAX`] are held (409).
    #[error("{CHECKPOINTS_HELD_MAX} checkpoints are held: delete one first")]
    Full,
    /// No checkpoint of that name (404).
    #[error("no checkpoint named `{0}`")]
    NotFound(String),
    /// A bad name or lease (400).
    #[error("{0}")]
    Invalid(String),
    /// Taking or removing it failed (500; 507 when the disk is full).
    #[error("{0}")]
    Failed(String),
}

impl From<TakeError> for Refusal {
    fn from(e: TakeError) -> Self {
        Refusal::Failed(e.to_string())
    }
}

/// The node's checkpoints (module header).
#[derive(Debug)]
pub struct Backups {
    dir: PathBuf,
    held: Mutex<Vec<Manifest>>,
    running: AtomicBool,
    /// When the node started, Unix seconds (`LASTSAVE` before any checkpoint).
    started_s: u64,
    /// Checkpoints completed since the start.
    taken: AtomicU64,
    /// Checkpoints that failed since the start.
    failed: AtomicU64,
    /// Unix ms of the newest completed checkpoint, 0 for none.
    last_ms: AtomicU64,
    /// The threads `POST /v0/backup` waits on (`crate::cluster::workers`).
    pub workers: crate::cluster::workers::Workers,
    /// A cluster backup's and a restore's figures on this node.
    pub figures: super::figures::Figures,
    /// A restore writing into this node ([`super::restoring`]).
    pub restoring: super::restoring::Restoring,
    /// The bound on the bytes of held checkpoints served per second
    /// (`--backup-rate-bytes`; `net::backup_transfer`).
    pub serve_rate: crate::token_bucket::RateLimiter,
    /// Checkpoints whose removal at the end of their lease failed and was
    /// logged: logged once, tried again at every sweep.
    sweep_warned: Mutex<std::collections::BTreeSet<String>>,
}

/// Holds the one place for taking a checkpoint; frees it when dropped.
pub struct Running<'a>(&'a Backups);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

impl Backups {
    /// The registry of `data_dir/backups`: removes `.tmp-` leftovers, holds
    /// every checkpoint whose manifest parses.
    pub fn open(data_dir: &Path) -> std::io::Result<Backups> {
        let dir = data_dir.join(BACKUPS_DIR_NAME);
        let mut held = Vec::new();
        if dir.is_dir() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(TEMP_PREFIX) {
                    tracing::info!(checkpoint = %name, "removing a checkpoint that was never completed");
                    std::fs::remove_dir_all(entry.path())?;
                    continue;
                }
                match super::verify::read_manifest(&entry.path()) {
                    Ok(m) if m.name == name => held.push(m),
                    Ok(_) | Err(_) => {
                        tracing::warn!(checkpoint = %name, "not a checkpoint (no valid manifest): left alone");
                    }
                }
            }
        }
        held.sort_by_key(|m| m.created_ms);
        let last_ms = held.last().map_or(0, |m| m.created_ms);
        Ok(Backups {
            dir,
            held: Mutex::new(held),
            running: AtomicBool::new(false),
            started_s: now_ms() / 1000,
            taken: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last_ms: AtomicU64::new(last_ms),
            sweep_warned: Mutex::default(),
            workers: crate::cluster::workers::Workers::default(),
            figures: super::figures::Figures::default(),
            restoring: super::restoring::Restoring::default(),
            serve_rate: crate::token_bucket::RateLimiter::new(
                crate::config::BACKUP_RATE_BYTES_DEFAULT,
            ),
        })
    }

    /// The registry with its served bytes bounded at `bytes_per_sec`
    /// (`--backup-rate-bytes`).
    pub fn with_serve_rate(mut self, bytes_per_sec: u64) -> Backups {
        self.serve_rate = crate::token_bucket::RateLimiter::new(bytes_per_sec);
        self
    }

    /// The folder of the checkpoints.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The one place for taking a checkpoint, if free and room is left.
    pub fn begin(&self) -> Result<Running<'_>, Refusal> {
        if lock(&self.held).len() >= CHECKPOINTS_HELD_MAX {
            return Err(Refusal::Full);
        }
        self.running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| Refusal::Running)?;
        Ok(Running(self))
    }

    /// Takes a checkpoint of `sources` with `lease` (the place taken by
    /// [`Backups::begin`]); its manifest and directory.
    pub fn take(
        &self,
        _running: &Running<'_>,
        sources: &Sources<'_>,
        lease: Duration,
    ) -> Result<(PathBuf, Manifest), Refusal> {
        let created_ms = now_ms();
        let name = fresh_name(&lock(&self.held), created_ms);
        let manifest = Manifest {
            name,
            created_ms,
            lease_until_ms: created_ms.saturating_add(lease.as_millis() as u64),
            ..Manifest::default()
        };
        match take::take(sources, &self.dir, manifest, &self.figures) {
            Ok((path, manifest)) => {
                self.taken.fetch_add(1, Ordering::Relaxed);
                self.last_ms
                    .fetch_max(manifest.created_ms, Ordering::AcqRel);
                lock(&self.held).push(manifest.clone());
                tracing::info!(checkpoint = %manifest.name, files = manifest.files.len(), bytes = manifest.bytes(), "checkpoint taken");
                Ok((path, manifest))
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "checkpoint failed");
                Err(e.into())
            }
        }
    }

    /// Waits until no checkpoint is being taken, at most `within`.
    pub fn wait_idle(&self, within: Duration) {
        let deadline = std::time::Instant::now() + within;
        while self.running.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The held checkpoints, oldest first.
    pub fn list(&self) -> Vec<Manifest> {
        lock(&self.held).clone()
    }

    /// Removes checkpoint `name`, releasing what it pins.
    pub fn delete(&self, name: &str) -> Result<(), Refusal> {
        let name = checked_name(name).map_err(Refusal::Invalid)?;
        let mut held = lock(&self.held);
        let at = held
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| Refusal::NotFound(name.clone()))?;
        let path = self.dir.join(&name);
        match std::fs::remove_dir_all(&path) {
            // Removed by hand already: what it pinned is released all the same.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(checkpoint = %name, "checkpoint directory already gone: forgotten");
            }
            Err(e) => {
                return Err(Refusal::Failed(format!(
                    "cannot remove {}: {e}",
                    path.display()
                )));
            }
            Ok(()) => {}
        }
        held.remove(at);
        Ok(())
    }

    /// Removes the checkpoints whose lease ended by `now_ms` ([`expired`]).
    pub fn sweep(&self, now_ms: u64) {
        let names = expired(&lock(&self.held), now_ms);
        for name in names {
            match self.delete(&name) {
                Ok(()) => {
                    lock(&self.sweep_warned).remove(&name);
                    tracing::info!(checkpoint = %name, "checkpoint lease ended: removed");
                }
                // Tried again at every sweep (many a second): said once.
                Err(e) if lock(&self.sweep_warned).insert(name.clone()) => {
                    tracing::warn!(checkpoint = %name, error = %e, "checkpoint lease ended, not removed (tried again, not logged again)")
                }
                Err(_) => {}
            }
        }
    }

    /// Bytes the held checkpoints pin (`ataman_backup_pinned_bytes`).
    pub fn pinned_bytes(&self) -> u64 {
        lock(&self.held).iter().map(|m| m.pinned_bytes).sum()
    }

    /// `LASTSAVE`: Unix seconds of the newest completed checkpoint, or the
    /// node's start when none is known.
    pub fn last_save_s(&self) -> u64 {
        match self.last_ms.load(Ordering::Acquire) {
            0 => self.started_s,
            ms => ms / 1000,
        }
    }

    /// The registry's lines of the `/metrics` page.
    pub fn render_metrics(&self, out: &mut String) {
        let held = lock(&self.held);
        let lines = [
            (
                "ataman_backup_pinned_bytes",
                "gauge",
                "Bytes of SSTables the held checkpoints share with the live store (released when a lease ends or a checkpoint is deleted).",
                held.iter().map(|m| m.pinned_bytes).sum::<u64>(),
            ),
            (
                "ataman_backup_checkpoints",
                "gauge",
                "Checkpoints held in the data directory's backups folder.",
                held.len() as u64,
            ),
            (
                "ataman_backup_checkpoints_taken_total",
                "counter",
                "Checkpoints completed since the start.",
                self.taken.load(Ordering::Relaxed),
            ),
            (
                "ataman_backup_checkpoints_failed_total",
                "counter",
                "Checkpoints that failed since the start (their partial directory removed).",
                self.failed.load(Ordering::Relaxed),
            ),
            (
                "ataman_backup_running",
                "gauge",
                "1 while a checkpoint is being taken.",
                u64::from(self.running.load(Ordering::Acquire)),
            ),
        ];
        for (name, kind, help, value) in lines {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            ));
        }
        self.figures.render(out);
    }
}

/// A checkpoint's manifest as JSON (without its file list): name, path,
/// times, sequence numbers, files, bytes and pinned bytes.
pub fn render_json(m: &Manifest, path: &Path) -> String {
    let mut out = String::from("{\"name\":");
    crate::http::json::json_string(&mut out, &m.name);
    out.push_str(",\"path\":");
    crate::http::json::json_string(&mut out, &path.to_string_lossy());
    out.push_str(&format!(
        ",\"created_ms\":{},\"lease_until_ms\":{},\"engine_seq\":{},\"hints_seq\":{},\"files\":{},\"bytes\":{},\"pinned_bytes\":{}}}",
        m.created_ms,
        m.lease_until_ms,
        m.engine_seq,
        m.hints_seq,
        m.files.len(),
        m.bytes(),
        m.pinned_bytes
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(name: &str, created_ms: u64, lease_until_ms: u64) -> Manifest {
        Manifest {
            name: name.into(),
            created_ms,
            lease_until_ms,
            ..Manifest::default()
        }
    }

    /// A lease ends at its instant, not before.
    #[test]
    fn expired_at_lease_end() {
        let list = [held("a", 0, 100), held("b", 0, 200)];
        assert!(expired(&list, 99).is_empty());
        assert_eq!(expired(&list, 100), vec!["a".to_string()]);
        assert_eq!(expired(&list, 1_000), vec!["a".to_string(), "b".into()]);
    }

    /// Names are unique among the held ones.
    #[test]
    fn fresh_names_are_unique() {
        let mut list = Vec::new();
        for _ in 0..4 {
            let name = fresh_name(&list, 7);
            assert!(!list.iter().any(|m: &Manifest| m.name == name));
            list.push(held(&name, 7, 8));
        }
        assert_eq!(list[0].name, "ckpt-7");
        assert_eq!(list[3].name, "ckpt-7-3");
    }

    /// A `.tmp-` leftover is removed at open; a complete one is held and
    /// counted; deleting it releases its pinned bytes; a second `begin`
    /// while one runs is refused.
    #[test]
    fn open_removes_leftovers_and_holds_complete_ones() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join(BACKUPS_DIR_NAME);
        std::fs::create_dir_all(dir.join(".tmp-ckpt-5/data")).unwrap();
        let m = Manifest {
            pinned_bytes: 4096,
            ..held("ckpt-9", 9_000, u64::MAX)
        };
        std::fs::create_dir_all(dir.join("ckpt-9")).unwrap();
        std::fs::write(dir.join("ckpt-9/BACKUP-MANIFEST"), m.render()).unwrap();
        let backups = Backups::open(data.path()).unwrap();
        assert!(!dir.join(".tmp-ckpt-5").exists());
        assert_eq!(backups.list(), vec![m]);
        assert_eq!(backups.pinned_bytes(), 4096);
        assert_eq!(backups.last_save_s(), 9);
        let running = backups.begin().unwrap();
        assert!(matches!(backups.begin(), Err(Refusal::Running)));
        drop(running);
        assert!(backups.begin().is_ok());
        assert!(matches!(
            backups.delete("ckpt-8"),
            Err(Refusal::NotFound(_))
        ));
        backups.delete("ckpt-9").unwrap();
        assert_eq!(backups.pinned_bytes(), 0);
        assert!(!dir.join("ckpt-9").exists());
    }

    /// A checkpoint whose directory was removed by hand is forgotten by a
    /// delete (its slot and pin released), not refused for ever.
    #[test]
    fn a_checkpoint_removed_by_hand_is_forgotten() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join(BACKUPS_DIR_NAME);
        let m = Manifest {
            pinned_bytes: 4096,
            ..held("ckpt-9", 9_000, 10_000)
        };
        std::fs::create_dir_all(dir.join("ckpt-9")).unwrap();
        std::fs::write(dir.join("ckpt-9/BACKUP-MANIFEST"), m.render()).unwrap();
        let backups = Backups::open(data.path()).unwrap();
        std::fs::remove_dir_all(dir.join("ckpt-9")).unwrap();
        backups.sweep(20_000);
        assert_eq!(backups.list(), vec![], "the lease's end forgot it");
        assert_eq!(backups.pinned_bytes(), 0);
    }
}
