//! A checkpoint taken off the network threads: `POST /v0/backup` waits
//! for it on a job (`crate::cluster::workers`), `BGSAVE` does not.

use super::lease::{Backups, Refusal};
use super::manifest::Manifest;
use super::take::Sources;
use crate::hints::HintStore;
use ataman_engine::Db;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How much nicer than the process a checkpoint's thread runs (the value
/// of `antientropy::priority::BACKGROUND_NICE_STEP`, asserted equal in
/// its tests; not imported: `backup` does not depend on `antientropy`).
pub const BACKGROUND_NICE_STEP: i32 = 10;

/// What a checkpoint job needs, owned (it outlives the request).
#[derive(Clone)]
pub struct Job {
    /// The registry.
    pub backups: Arc<Backups>,
    /// The node's data directory.
    pub data_dir: PathBuf,
    /// The node's engine.
    pub db: Arc<Db>,
    /// The node's hint store.
    pub hints: Arc<HintStore>,
    /// The lease of the checkpoint.
    pub lease: Duration,
}

impl Job {
    /// Takes the checkpoint on this thread (the registry's one place must
    /// be free: [`Refusal::Running`] otherwise). The engine and the hint
    /// store are let go before the place is: a stopping node that saw the
    /// place free holds the only references ([`Backups::wait_idle`]).
    ///
    /// Runs at background CPU priority ([`BACKGROUND_NICE_STEP`], as
    /// anti-entropy's threads): called only on a thread of its own (a
    /// worker's, or [`Job::spawn`]'s), whose nice value dies with it.
    pub fn run(self) -> Result<(PathBuf, Manifest), Refusal> {
        // Best effort: on failure the checkpoint runs at the usual priority.
        let _ = ataman_engine::thread_priority::lower_this_thread(BACKGROUND_NICE_STEP);
        let Job {
            backups,
            data_dir,
            db,
            hints,
            lease,
        } = self;
        let running = backups.begin()?;
        backups.sweep(super::lease::now_ms());
        let result = {
            let sources = Sources {
                data_dir: &data_dir,
                db: &db,
                hints: &hints,
            };
            backups.take(&running, &sources, lease)
        };
        drop((db, hints));
        drop(running);
        result
    }

    /// Takes the checkpoint on a thread of its own (`BGSAVE`): `Err` at
    /// once when one is running or none may start.
    pub fn spawn(self) -> Result<(), Refusal> {
        // Checked here too, so the caller hears of a running one at once.
        drop(self.backups.begin()?);
        std::thread::Builder::new()
            .name("ataman-backup".into())
            .spawn(move || {
                let _ = self.run();
            })
            .map(drop)
            .map_err(|e| Refusal::Failed(format!("cannot start the checkpoint's thread: {e}")))
    }
}
