//! The transition driver: the thread `ataman-transition`, which carries
//! out `super::transition_rules`' decisions on this node.
//!
//! Every [`TRANSITION_TICK`] it reads the membership (the live history and
//! the stored `LAYOUT`'s version), notes what the node has done (the
//! placement every network thread uses, `super::transition_state`; the
//! copy's outcome), asks `transition_rules::decide`, and applies each
//! action through `Membership::update`: raising this node's trackers,
//! pruning, promoting `LAYOUT`. Copying runs on its own thread through a
//! [`Copier`], so the driver never blocks on the network; an incomplete or
//! failed copy is started again after [`COPY_RETRY`]. Each step is logged
//! once, with its version.
//!
//! Cleanup (deleting the copies a node no longer replicates, once the
//! new layout is the only live one and stored) runs on its own thread
//! too, through a [`Cleaner`] (`super::cleanup`); it never overlaps a
//! copy (`transition_rules`, "Cleanup before copy"): both threads are
//! started only from this driver's tick, which starts neither while the
//! other runs. A failed cleanup is started again after [`COPY_RETRY`].

use super::cleanup::{Cleaner, KeepEverything, KeepSet, Purged};
use super::history::Tracker;
use super::layout::Layout;
use super::membership::Membership;
use super::transition_rules::{self, Action, Inputs, Progress};
use super::transition_state::{Standing, TransitionShared};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// How often the driver looks at the membership.
pub const TRANSITION_TICK: Duration = Duration::from_millis(200);
/// How long after an incomplete or failed copy it is started again.
pub const COPY_RETRY: Duration = Duration::from_secs(5);

/// Copies what this node gains going from `old` to `new`: every key (and
/// tombstone) it replicates under `new` and not under `old`, merged from
/// every old replica. `Ok(true)` once complete; `Ok(false)` when it
/// stopped early (to be started again; it resumes); `Err` on failure.
/// It must return soon once the node is stopping: the driver joins the
/// copy thread before the node closes its engine.
pub trait Copier: Send + Sync {
    /// Runs one copy to its end (blocking).
    fn copy(&self, old: &Layout, new: &Layout) -> Result<bool, String>;
}

/// The copier of a build without data copying between nodes: every copy
/// fails, so a node that gains keys never raises its `sync`, and the
/// transition waits with reads on the old version (safe).
pub struct NotWired;

impl Copier for NotWired {
    fn copy(&self, _old: &Layout, _new: &Layout) -> Result<bool, String> {
        Err("copying data between nodes is not wired into this build".to_owned())
    }
}

/// The driver's own state.
pub struct Driver {
    membership: Arc<Membership>,
    shared: Arc<TransitionShared>,
    copier: Arc<dyn Copier>,
    replication_timeout: Duration,
    started: Instant,
    progress: Progress,
    copy_results: Option<Receiver<(u64, Result<bool, String>)>>,
    /// The copy thread, joined when the driver stops.
    copy_thread: Option<std::thread::JoinHandle<()>>,
    cleaner: Arc<dyn Cleaner>,
    cleanup_results: Option<Receiver<(u64, Result<Purged, String>)>>,
    /// The cleanup thread, joined when the driver stops.
    cleanup_thread: Option<std::thread::JoinHandle<()>>,
    cleanup_retry_at: Option<Instant>,
    /// The last failure to ask the seed, logged once.
    seed_error: Option<String>,
    copy_retry_at: Option<Instant>,
    logged: Vec<(u64, &'static str)>,
    /// `--join`'s seed: the node started to join.
    seed: Option<super::join::Seed>,
    /// When a node waiting to be added asks its seed next.
    seed_asked_at: Option<Instant>,
    /// Was a member of a live version since the driver started.
    was_member: bool,
}

impl Driver {
    /// A driver for `membership`, whose stored layout needs no cleanup;
    /// `seed` when the node started with `--join`. Publishes where the
    /// node stands at once.
    pub fn new(
        membership: Arc<Membership>,
        shared: Arc<TransitionShared>,
        copier: Arc<dyn Copier>,
        replication_timeout: Duration,
        seed: Option<super::join::Seed>,
    ) -> Self {
        let cleaned = membership.read(|s| s.acceptor.current().version);
        let mut d = Driver {
            membership,
            shared,
            copier,
            replication_timeout,
            started: Instant::now(),
            progress: Progress {
                cleaned,
                ..Progress::default()
            },
            copy_results: None,
            copy_thread: None,
            cleaner: Arc::new(KeepEverything),
            cleanup_results: None,
            cleanup_thread: None,
            cleanup_retry_at: None,
            seed_error: None,
            copy_retry_at: None,
            logged: Vec::new(),
            seed,
            seed_asked_at: None,
            was_member: false,
        };
        d.publish();
        d
    }

    /// The driver deleting copies through `cleaner` (without one it keeps
    /// them). The newest cleanup `cleaner` recorded is done; without a
    /// record, the stored layout's cleanup is still to do, unless it is
    /// the bootstrap version 1 (nothing moved yet).
    pub fn with_cleaner(mut self, cleaner: Arc<dyn Cleaner>) -> Self {
        let stored = self.progress.cleaned;
        self.progress.cleaned = match cleaner.cleaned() {
            Some(done) => done,
            None if stored <= 1 => stored,
            None => stored - 1,
        };
        self.shared.cleanup.version.store(
            cleaner.cleaned().unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.cleaner = cleaner;
        self
    }

    /// Publishes where the node stands (`TransitionShared::set_standing`).
    fn publish(&mut self) {
        let me = self.membership.self_url();
        let (member, oldest, settled, members) = self.membership.read(|s| {
            let h = &s.history;
            (
                !h.removed(me),
                h.live()[0].version,
                h.is_settled() && s.acceptor.current().version == h.current().version,
                h.current().nodes.clone(),
            )
        });
        self.was_member |= member;
        // A member serves once its network threads place with a live
        // version: a node added while it ran alone (joining) waits until
        // they do (`transition_state`'s contract).
        let placed = self.shared.placement_version() >= oldest;
        let standing = if member && placed {
            Standing::Member
        } else if member || (self.seed.is_some() && !self.was_member) {
            Standing::Joining
        } else {
            Standing::Removed
        };
        self.shared.set_standing(standing, settled, &members);
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Logs `what` for `version` once.
    fn once(&mut self, version: u64, what: &'static str) -> bool {
        if self.logged.contains(&(version, what)) {
            return false;
        }
        self.logged.push((version, what));
        true
    }

    /// Notes the network threads' placement and the copy's and the
    /// cleanup's outcomes.
    fn observe(&mut self) {
        let placed = self.shared.placement_version();
        if self.progress.placement.is_none_or(|(v, _)| placed > v) {
            self.progress.placement = Some((placed, self.now_ms()));
        }
        self.observe_cleanup();
        let Some(rx) = &self.copy_results else {
            return;
        };
        let outcome = match rx.try_recv() {
            Ok(outcome) => outcome,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => (
                self.progress.copy_running.unwrap_or(0),
                Err("the copy thread ended without an answer".to_owned()),
            ),
        };
        self.copy_results = None;
        self.progress.copy_running = None;
        match outcome {
            (version, Ok(true)) => {
                tracing::info!(version, "layout transition: copying complete");
                self.progress.copied = self.progress.copied.max(version);
            }
            (version, Ok(false)) => {
                tracing::info!(version, "layout transition: copying stopped early, resumes");
                self.copy_retry_at = Some(Instant::now() + COPY_RETRY);
            }
            (version, Err(e)) => {
                tracing::warn!(version, "layout transition: copying failed, retried: {e}");
                self.copy_retry_at = Some(Instant::now() + COPY_RETRY);
            }
        }
    }

    /// While the node waits to be added, asks its seed every
    /// `join::JOIN_REFRESH` (`super::join`'s rules).
    fn ask_seed(&mut self) {
        let Some(seed) = self.seed.clone() else {
            return;
        };
        if self.shared.standing() != Standing::Joining
            || self
                .seed_asked_at
                .is_some_and(|t| t.elapsed() < super::join::JOIN_REFRESH)
        {
            return;
        }
        self.seed_asked_at = Some(Instant::now());
        let outcome = seed
            .layout()
            .map_err(|e| e.to_string())
            .and_then(|layout| super::join::refresh(&self.membership, &layout));
        match outcome {
            Ok(said) => {
                self.seed_error = None;
                if let Some(said) = said {
                    tracing::info!(seed = %seed.url, "joining: {said}");
                }
            }
            Err(e) if self.seed_error.as_ref() != Some(&e) => {
                tracing::warn!(seed = %seed.url, "joining: cannot ask the seed: {e}");
                self.seed_error = Some(e);
            }
            Err(_) => {}
        }
    }

    /// One look at the membership and the actions it calls for.
    pub fn tick(&mut self) {
        self.ask_seed();
        self.observe();
        let (history, stored) = self
            .membership
            .read(|s| (s.history.clone(), s.acceptor.current().version));
        let alone = !history.in_transition() && stored == history.current().version;
        if alone && self.progress.stored_since.is_none_or(|(v, _)| v != stored) {
            self.progress.stored_since = Some((stored, self.now_ms()));
        }
        let replication_timeout_ms =
            u64::try_from(self.replication_timeout.as_millis()).unwrap_or(u64::MAX);
        let actions = transition_rules::decide(Inputs {
            self_url: self.membership.self_url(),
            history: &history,
            stored_version: stored,
            progress: &self.progress,
            now_ms: self.now_ms(),
            replication_timeout_ms,
            cleanup_wait_ms: transition_rules::cleanup_wait_ms(replication_timeout_ms),
        });
        for action in actions {
            self.apply(action, &history);
        }
        self.publish();
        let me = self.membership.self_url().to_owned();
        if history.is_settled() && history.removed(&me) && stored == history.current().version {
            let v = history.current().version;
            if self.shared.standing() == Standing::Joining {
                if self.once(v, "joining") {
                    tracing::info!(
                        version = v,
                        members = ?history.current().nodes,
                        "waiting to be added to the cluster (POST /v0/layout?version={}&add=<this node's URL> on a member)",
                        v + 1
                    );
                }
            } else if self.once(v, "removed") {
                // What a removal ends with: normal operation, not a warning.
                tracing::info!(
                    version = v,
                    members = ?history.current().nodes,
                    "this node is not a member of the layout: it holds nothing a read needs and is safe to stop"
                );
            }
        }
    }

    fn apply(&mut self, action: Action, history: &super::history::History) {
        let me = self.membership.self_url().to_owned();
        match action {
            Action::Raise(which, v) => {
                let grew = self.membership.update(|s| {
                    let g = s.history.raise(which, &me, v);
                    (g, g)
                });
                let what = match which {
                    Tracker::Ack => "ack",
                    Tracker::Sync => "sync",
                    Tracker::SyncAck => "sync_ack",
                };
                if grew && self.once(v, what) {
                    tracing::info!(version = v, tracker = what, "layout transition: raised");
                }
            }
            Action::StartCopy(v) => self.start_copy(v, history),
            Action::Prune => {
                let pruned = self.membership.update(|s| {
                    let p = s.history.prune();
                    (p, p)
                });
                let v = history.current().version;
                if pruned && self.once(v, "prune") {
                    tracing::info!(version = v, "layout transition: old version dropped");
                }
            }
            Action::Promote(v) => {
                let only = history.current().clone();
                let promoted = self.membership.update(|s| match s.acceptor.promote(&only) {
                    Ok(done) => {
                        // A version learned during the transition begins now.
                        let next = s.acceptor.next().cloned();
                        let began = next.is_some_and(|n| s.history.begin(n).unwrap_or(false));
                        (done || began, Ok((done, began)))
                    }
                    Err(e) => (false, Err(e)),
                });
                match promoted {
                    Ok((true, began)) => {
                        tracing::info!(version = v, "layout transition: LAYOUT is version {v}");
                        if began {
                            tracing::info!(
                                version = v + 1,
                                "layout transition: begins (learned during the last one)"
                            );
                        }
                    }
                    Ok((false, _)) => {}
                    Err(e) => {
                        if self.once(v, "promote failed") {
                            tracing::warn!(
                                version = v,
                                "layout transition: storing LAYOUT failed, retried: {e}"
                            );
                        }
                    }
                }
            }
            Action::Cleanup(v) => self.start_cleanup(v),
        }
    }

    /// Starts the cleanup for `v` on its own thread, if the history is
    /// still settled on `v` (asked again now: a later version may have
    /// begun since the decision), keeping every key this node replicates
    /// in a layout live now.
    fn start_cleanup(&mut self, v: u64) {
        if self.cleanup_retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let me = self.membership.self_url().to_owned();
        let keep = self.membership.read(|s| {
            let h = &s.history;
            (!h.in_transition() && h.current().version == v).then(|| KeepSet::new(h.live(), &me))
        });
        let Some(keep) = keep else {
            return;
        };
        let (tx, rx) = mpsc::channel();
        let cleaner = Arc::clone(&self.cleaner);
        let spawned = std::thread::Builder::new()
            .name("ataman-cleanup".into())
            .spawn(move || {
                let _ = tx.send((v, cleaner.clean(v, keep.into_fn())));
            });
        match spawned {
            Ok(handle) => {
                self.cleanup_thread = Some(handle);
                self.progress.cleanup_running = Some(v);
                self.cleanup_results = Some(rx);
                self.shared.cleanup.start(v);
                if self.once(v, "cleanup") {
                    tracing::info!(
                        version = v,
                        "layout transition: cleanup started (deleting the copies of keys this node no longer replicates)"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(version = v, "cannot start the cleanup thread: {e}");
                self.cleanup_retry_at = Some(Instant::now() + COPY_RETRY);
            }
        }
    }

    /// Notes the cleanup's outcome, if it ended.
    fn observe_cleanup(&mut self) {
        let Some(rx) = &self.cleanup_results else {
            return;
        };
        let (version, outcome) = match rx.try_recv() {
            Ok(outcome) => outcome,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => (
                self.progress.cleanup_running.unwrap_or(0),
                Err("the cleanup thread ended without an answer".to_owned()),
            ),
        };
        self.cleanup_results = None;
        self.progress.cleanup_running = None;
        if let Some(handle) = self.cleanup_thread.take() {
            let _ = handle.join();
        }
        match outcome {
            Ok(purged) => {
                self.shared.cleanup.end(version, Some(purged));
                self.progress.cleaned = self.progress.cleaned.max(version);
                tracing::info!(
                    version,
                    keys_purged = purged.keys,
                    bytes_purged = purged.bytes,
                    "layout transition: cleanup done: deleted {} keys ({} bytes) this node no longer replicates",
                    purged.keys,
                    purged.bytes
                );
            }
            Err(e) => {
                self.shared.cleanup.end(version, None);
                if self.once(version, "cleanup failed") {
                    tracing::warn!(
                        version,
                        "layout transition: cleanup failed, retried every {COPY_RETRY:?} (logged once): {e}"
                    );
                }
                self.cleanup_retry_at = Some(Instant::now() + COPY_RETRY);
            }
        }
    }

    fn start_copy(&mut self, v: u64, history: &super::history::History) {
        if self.copy_retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let [old, new] = history.live() else {
            return;
        };
        let (old, new) = (old.clone(), new.clone());
        let (tx, rx) = mpsc::channel();
        let copier = Arc::clone(&self.copier);
        let spawned = std::thread::Builder::new()
            .name("ataman-copy".into())
            .spawn(move || {
                let _ = tx.send((v, copier.copy(&old, &new)));
            });
        match spawned {
            Ok(handle) => {
                self.copy_thread = Some(handle);
                self.progress.copy_running = Some(v);
                self.copy_results = Some(rx);
                if self.once(v, "copy") {
                    tracing::info!(version = v, "layout transition: copying started");
                }
            }
            Err(e) => {
                tracing::warn!(version = v, "cannot start the copy thread: {e}");
                self.copy_retry_at = Some(Instant::now() + COPY_RETRY);
            }
        }
    }
}

/// Starts `ataman-transition`, which ticks `driver` until `stopping` says so.
pub fn start(
    mut driver: Driver,
    stopping: impl Fn() -> bool + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ataman-transition".into())
        .spawn(move || {
            while !stopping() {
                driver.tick();
                std::thread::sleep(TRANSITION_TICK);
            }
            // A copy under way ends on its own (a copier stops early when
            // the node stops); the node's state outlives neither.
            if let Some(copy) = driver.copy_thread.take() {
                let _ = copy.join();
            }
            // A cleanup under way runs to its end (an engine purge is one
            // compaction); one cut short by a crash is run again.
            if let Some(cleanup) = driver.cleanup_thread.take() {
                let _ = cleanup.join();
            }
        })
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
