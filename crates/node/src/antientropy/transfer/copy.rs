//! [`copy_gained`]: everything this node gains in a layout transition,
//! copied from every old member that held it.
//!
//! A node that gains a key must merge what EVERY old replica holds: a
//! write acknowledged by `ack` old replicas may have missed any one of
//! them (docs/ARCHITECTURE.md, "Membership"). Two passes over the old
//! members not yet finished, [`COPY_SOURCES_AT_ONCE_MAX`] at a time:
//! 1. the one pass ([`super::one_pass`]): one session per source, all at
//!    once, each source scanning its scope once and sending the versions
//!    of its [`super::scope::Share`] (the keys whose first old replica by
//!    rendezvous rank it is) and the digest of the rest; this node merges
//!    them key by key, so each key moves once. Every source of a pass that
//!    ends is done; its progress is recorded, so a restart resumes it;
//! 2. the comparing pass, for the sources the one pass did not finish
//!    (unreachable, or the pass failed): one transition session
//!    ([`super::pull`]) per source, one thread each, paging its digest of
//!    its whole scope and pulling the versions it has newer, with retries.
//!
//! A source is recorded done durably ([`super::record`],
//! `<data-dir>/COPY-<version>`; every applied batch was a durable write
//! before), so a restart skips it and redoes the unfinished ones (a
//! redone source is merged again: newest-wins).
//! A source that fails (down, refusing) is retried with a doubling
//! back-off [`CopyOptions::tries`] times in all (a busy one is waited for
//! up to [`CopyOptions::busy_wait`] besides), then left pending in the
//! report: copying is complete only once no source is pending, and a dead
//! source stalls it (skipping one takes an operator's assertion, outside
//! this module).

use super::one_pass::{PassSource, one_pass};
use super::pull::{Pulled, Transition, pull};
use super::record::{self, CopyRecord};
use super::scope::{ScopeError, check_next, may_gain, source_order};
use crate::antientropy::Node;
use crate::antientropy::client::sleep_unless_stopped;
use crate::antientropy::stream::SessionError;
use crate::cluster::layout::Layout;
use ataman_testkit::lock::lock;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Sessions tried with one source before it is reported pending.
pub const COPY_TRIES_MAX: u32 = 5;
/// Wait before the second try with a failed source; doubles each time.
pub const COPY_BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between two tries with a source.
pub const COPY_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a source whose sync server stays busy (serving anti-entropy
/// sessions) is waited for; busy answers do not count as tries.
pub const COPY_BUSY_WAIT_MAX: Duration = Duration::from_secs(600);
/// Wait before asking a busy source again; doubles up to [`BUSY_BACKOFF_MAX`].
const BUSY_BACKOFF_FIRST: Duration = Duration::from_millis(200);
/// Longest wait between two asks of a busy source.
const BUSY_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The name of the threads copying from one source each.
const COPY_THREAD_NAME: &str = "ataman-copy";
/// How often the first pass records its progress (a restart resumes there).
pub const PASS_RECORD_EVERY: Duration = Duration::from_secs(2);
/// Sources a pass copies from at once (one thread and one session each);
/// more wait for the group before them.
pub const COPY_SOURCES_AT_ONCE_MAX: usize = 8;

/// How hard [`copy_gained_with`] tries each source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOptions {
    /// Sessions tried with one source, at least one ([`COPY_TRIES_MAX`]).
    pub tries: u32,
    /// Wait before the second try ([`COPY_BACKOFF_FIRST`]), doubling up
    /// to [`COPY_BACKOFF_MAX`].
    pub backoff_first: Duration,
    /// How long a busy source is waited for ([`COPY_BUSY_WAIT_MAX`]).
    pub busy_wait: Duration,
    /// Planted mistake (tests only): copy from the first source alone and
    /// report the others done, as if one old replica held everything.
    #[cfg(test)]
    pub planted_one_source: bool,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            tries: COPY_TRIES_MAX,
            backoff_first: COPY_BACKOFF_FIRST,
            busy_wait: COPY_BUSY_WAIT_MAX,
            #[cfg(test)]
            planted_one_source: false,
        }
    }
}

/// Where copying from one source stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceState {
    /// Copied by this call.
    Done,
    /// Recorded finished by an earlier call (before a restart): skipped.
    DoneBefore,
    /// Not finished: every try failed (see the report's `error`).
    Pending,
}

/// One source's part of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// The source's URL.
    pub url: String,
    /// Done, done before, or pending.
    pub state: SourceState,
    /// Versions received from it and applied (every try of this call).
    pub keys: u64,
    /// Their key and value bytes.
    pub bytes: u64,
    /// Keys it held in the scope, as its last session said.
    pub keys_offered: u64,
    /// Their key and value bytes.
    pub bytes_offered: u64,
    /// Sessions tried by this call.
    pub tries: u32,
    /// Why the last try failed, when it did.
    pub error: Option<String>,
}

/// What [`copy_gained`] did, source by source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// The version copied for (the new layout's).
    pub version: u64,
    /// Every source, in the order they were asked.
    pub sources: Vec<SourceReport>,
}

impl CopyReport {
    /// True when no source is pending: this node holds everything it gains.
    pub fn complete(&self) -> bool {
        self.sources.iter().all(|s| s.state != SourceState::Pending)
    }

    /// The URLs of the sources not finished.
    pub fn pending(&self) -> Vec<&str> {
        self.sources
            .iter()
            .filter(|s| s.state == SourceState::Pending)
            .map(|s| s.url.as_str())
            .collect()
    }

    /// Versions received from every source.
    pub fn keys(&self) -> u64 {
        self.sources.iter().map(|s| s.keys).sum()
    }

    /// Their key and value bytes.
    pub fn bytes(&self) -> u64 {
        self.sources.iter().map(|s| s.bytes).sum()
    }
}

/// Why copying could not be carried out at all (a failing source is not
/// an error: it is pending in the report).
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The two layouts are not one transition.
    #[error("not a transition: {0}")]
    NotATransition(#[from] ScopeError),
    /// The copy record could not be read or written.
    #[error("copy record in {dir}: {source}")]
    Record {
        /// The data directory.
        dir: String,
        /// The failure.
        source: std::io::Error,
    },
    /// The node is shutting down; the record keeps what was finished.
    #[error("stopped: the node is shutting down")]
    Stopped,
}

/// Copies everything node `me` gains going from `old` to `new` (its next
/// version) from every old member holding it, as documented above, with
/// the default [`CopyOptions`]. Blocking: run it on its own thread, once
/// `cluster::history::History::copy_may_start` holds; raise `sync` once the
/// report is [`CopyReport::complete`]. Calling it again after a restart
/// (or after a pending report) skips the sources already finished.
/// `held` are sources not read this time and reported pending (the
/// leaving ones whose `ack` for the new version is not known yet,
/// `cluster::copy_completion`'s rule "Leaving not acked"), unless
/// recorded finished before.
pub fn copy_gained(
    node: &Node<'_>,
    me: &str,
    old: &Layout,
    new: &Layout,
    held: &[String],
) -> Result<CopyReport, CopyError> {
    copy_holding(node, me, old, new, &CopyOptions::default(), held)
}

/// [`copy_gained`] with `options`, holding no source.
pub fn copy_gained_with(
    node: &Node<'_>,
    me: &str,
    old: &Layout,
    new: &Layout,
    options: &CopyOptions,
) -> Result<CopyReport, CopyError> {
    copy_holding(node, me, old, new, options, &[])
}

/// [`copy_gained`] with `options` and `held`.
fn copy_holding(
    node: &Node<'_>,
    me: &str,
    old: &Layout,
    new: &Layout,
    options: &CopyOptions,
    held: &[String],
) -> Result<CopyReport, CopyError> {
    check_next(old, new)?;
    let mut report = CopyReport {
        version: new.version,
        sources: Vec::new(),
    };
    if !may_gain(old, new, me) {
        // Leaving, or kept in a grow: it gains nothing (no session, no scan).
        return Ok(report);
    }
    let dir = &node.config.data_dir;
    let record_error = |source| CopyError::Record {
        dir: dir.display().to_string(),
        source,
    };
    let record = CopyRecord::load(dir, new.version).map_err(record_error)?;
    let metrics = &node.antientropy.copy;
    metrics.start_copy(new.version);
    let t = Transition { old, new, me };
    let order = source_order(old, new, me);
    let todo: Vec<&str> = order
        .iter()
        .copied()
        .filter(|s| !record.is_done(s) && !held.iter().any(|h| h == s))
        .collect();
    #[cfg(test)]
    let todo: Vec<&str> = match options.planted_one_source {
        true => todo.into_iter().take(1).collect(),
        false => todo,
    };
    let record = Mutex::new(record);
    let result = (|| -> Result<Vec<SourceReport>, CopyError> {
        let passed = first_pass(node, t, &todo, &record)?;
        for (source, passed) in todo.iter().zip(&passed) {
            if passed.done {
                lock(&record).mark_done(source).map_err(record_error)?;
            }
        }
        // The sources the first pass did not finish, compared one by one.
        let compared = at_once(&todo, |source| -> Result<SourceReport, CopyError> {
            let i = todo.iter().position(|s| *s == source);
            let first = i.and_then(|i| passed.get(i)).cloned().unwrap_or_default();
            if first.done {
                metrics.sessions_done.fetch_add(1, Ordering::Relaxed);
                return Ok(SourceReport {
                    state: SourceState::Done,
                    tries: 1,
                    ..report_of(source, &first.pulled)
                });
            }
            let done = copy_from(node, t, source, first.pulled, options)?;
            if done.state == SourceState::Done {
                lock(&record).mark_done(source).map_err(record_error)?;
            }
            Ok(done)
        });
        let mut reports = Vec::with_capacity(todo.len());
        for done in compared {
            reports.push(done?);
        }
        Ok(reports)
    })();
    metrics.running.store(0, Ordering::Relaxed);
    let mut reports = result?.into_iter();
    for source in order {
        let asked = todo.contains(&source);
        let next = match asked {
            true => reports.next(),
            false => None,
        };
        report.sources.push(match next {
            Some(done) => done,
            // Recorded finished before; or (the planted mistake) not asked.
            None if lock(&record).is_done(source) => skipped(source, SourceState::DoneBefore),
            None if held.iter().any(|h| h == source) => SourceReport {
                error: Some("held: its ack for the new version is not known yet".into()),
                ..skipped(source, SourceState::Pending)
            },
            None => skipped(source, SourceState::Done),
        });
    }
    let pending = report.pending().len() as u64;
    metrics.sources_pending.store(pending, Ordering::Relaxed);
    Ok(report)
}

/// Runs `f` on every source at once, one thread each (in this thread
/// when one cannot be started), [`COPY_SOURCES_AT_ONCE_MAX`] at a time;
/// the results in the sources' order.
fn at_once<R: Send>(sources: &[&str], f: impl Fn(&str) -> R + Sync) -> Vec<R> {
    let mut results = Vec::with_capacity(sources.len());
    for group in sources.chunks(COPY_SOURCES_AT_ONCE_MAX) {
        results.extend(group_at_once(group, &f));
    }
    results
}

/// [`at_once`] for one group of sources.
fn group_at_once<R: Send>(sources: &[&str], f: &(impl Fn(&str) -> R + Sync)) -> Vec<R> {
    std::thread::scope(|scope| {
        let started: Vec<_> = sources
            .iter()
            .map(|&source| {
                std::thread::Builder::new()
                    .name(COPY_THREAD_NAME.into())
                    .spawn_scoped(scope, move || {
                        crate::antientropy::priority::lower_this_thread();
                        f(source)
                    })
                    .map_err(|_| source)
            })
            .collect();
        started
            .into_iter()
            .map(|thread| match thread {
                Ok(thread) => thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(source) => f(source),
            })
            .collect()
    })
}

/// The first pass (`super::one_pass`) over the sources in `todo`,
/// [`COPY_SOURCES_AT_ONCE_MAX`] at a time (the pages held are bounded by
/// that), each group resuming after the smallest key the record says its
/// sources were merged up to, and recording its progress every
/// [`PASS_RECORD_EVERY`]. One entry per source of `todo`; `done` ones are
/// finished.
fn first_pass(
    node: &Node<'_>,
    t: Transition<'_>,
    todo: &[&str],
    record: &Mutex<CopyRecord>,
) -> Result<Vec<PassSource>, CopyError> {
    let mut passed = Vec::with_capacity(todo.len());
    for group in todo.chunks(COPY_SOURCES_AT_ONCE_MAX) {
        passed.extend(pass_group(node, t, group, record)?);
    }
    Ok(passed)
}

/// [`first_pass`] for one group of sources.
fn pass_group(
    node: &Node<'_>,
    t: Transition<'_>,
    todo: &[&str],
    record: &Mutex<CopyRecord>,
) -> Result<Vec<PassSource>, CopyError> {
    let resume: Option<Vec<u8>> = {
        let record = lock(record);
        let keys: Option<Vec<&[u8]>> = todo.iter().map(|s| record.merged(s)).collect();
        keys.and_then(|keys| keys.into_iter().min().map(<[u8]>::to_vec))
    };
    let sources: Vec<(&str, Option<String>)> =
        todo.iter().map(|s| (*s, via_for(node, s))).collect();
    let last_mark = Mutex::new(Instant::now());
    let progress = |in_pass: &[usize], key: &[u8]| {
        if lock(&last_mark).elapsed() < PASS_RECORD_EVERY {
            return;
        }
        *lock(&last_mark) = Instant::now();
        let urls: Vec<&str> = in_pass.iter().map(|&i| todo[i]).collect();
        if let Err(e) = lock(record).mark_merged(&urls, key) {
            tracing::warn!(error = %e, "could not record the copy's progress");
        }
    };
    match one_pass(node, t, &sources, resume, &progress) {
        Ok(passed) => Ok(passed),
        Err(SessionError::Stopped) => Err(CopyError::Stopped),
        Err(e) => {
            // `one_pass` fails only when stopped; anything else leaves
            // every source to the comparing pass.
            tracing::warn!(error = %e, "the one-pass copy failed");
            Ok(todo.iter().map(|_| PassSource::default()).collect())
        }
    }
}

/// A report of `source` with what `pulled` moved and offered, pending.
fn report_of(source: &str, pulled: &Pulled) -> SourceReport {
    SourceReport {
        keys: pulled.keys,
        bytes: pulled.bytes,
        keys_offered: pulled.keys_offered,
        bytes_offered: pulled.bytes_offered,
        ..skipped(source, SourceState::Pending)
    }
}

/// The report of a source not asked this time.
fn skipped(source: &str, state: SourceState) -> SourceReport {
    SourceReport {
        url: source.to_owned(),
        state,
        keys: 0,
        bytes: 0,
        keys_offered: 0,
        bytes_offered: 0,
        tries: 0,
        error: None,
    }
}

/// Tries `source` until a session completes or the tries run out (busy
/// answers are waited out up to [`CopyOptions::busy_wait`], not counted).
/// `first` is what the first pass moved from it (counted in the report;
/// its offer is replaced by the first try's).
fn copy_from(
    node: &Node<'_>,
    t: Transition<'_>,
    source: &str,
    first: Pulled,
    options: &CopyOptions,
) -> Result<SourceReport, CopyError> {
    let metrics = &node.antientropy.copy;
    let via = via_for(node, source);
    let mut report = report_of(source, &first);
    let mut backoff = options.backoff_first;
    let mut busy_backoff = BUSY_BACKOFF_FIRST;
    let busy_until = Instant::now() + options.busy_wait;
    while report.tries < options.tries.max(1) {
        // This try's offer replaces the last one's in the to-move figures.
        metrics.withdraw_offer(report.keys_offered, report.bytes_offered);
        let mut pulled = Pulled::default();
        let result = pull(node, t, source, via.clone(), &mut pulled);
        report.keys += pulled.keys;
        report.bytes += pulled.bytes;
        report.keys_offered = pulled.keys_offered;
        report.bytes_offered = pulled.bytes_offered;
        let wait = match result {
            Ok(()) => {
                metrics.sessions_done.fetch_add(1, Ordering::Relaxed);
                report.tries += 1;
                report.state = SourceState::Done;
                report.error = None;
                return Ok(report);
            }
            Err(SessionError::Stopped) => return Err(CopyError::Stopped),
            Err(SessionError::Busy(e)) if Instant::now() < busy_until => {
                report.error = Some(format!("busy: {e}"));
                let wait = busy_backoff;
                busy_backoff = (busy_backoff * 2).min(BUSY_BACKOFF_MAX);
                wait
            }
            Err(e) => {
                metrics.sessions_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(source, try_ = report.tries + 1, error = %e, "copying from a source failed");
                report.tries += 1;
                report.error = Some(e.to_string());
                if report.tries >= options.tries.max(1) {
                    break;
                }
                let wait = backoff;
                backoff = (backoff * 2).min(COPY_BACKOFF_MAX);
                wait
            }
        };
        if sleep_unless_stopped(node, wait) {
            return Err(CopyError::Stopped);
        }
    }
    Ok(report)
}

/// `--peer-via` for `url` when it is in `--cluster`.
fn via_for(node: &Node<'_>, url: &str) -> Option<String> {
    let i = node.config.cluster.iter().position(|u| u == url)?;
    node.config.peer_via.get(i).cloned().flatten()
}

/// Forgets the record of the transition to `version` once it is over.
pub fn forget(node: &Node<'_>, version: u64) -> std::io::Result<()> {
    record::remove(&node.config.data_dir, version)
}
