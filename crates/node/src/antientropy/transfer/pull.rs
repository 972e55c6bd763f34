//! One comparing session as the gaining node: pull from one source every
//! version it holds newer than this node of the keys this node gains from
//! it, newest-wins (the copy's fallback and retries, source by source;
//! `super::one_pass` is the first pass).
//!
//! The session is anti-entropy's (`super::super::client`), scoped to the
//! transition and one-way. After `Transition` (both layouts) and the
//! source's `TransitionWelcome` (its share's estimated size), page
//! through the source's digest of its whole scope ([`TransitionScope`]),
//! merge each page with this node's side of the same range, and fetch
//! every key the source has newer (or only the source has). What this
//! node has newer is left alone: nothing is pushed, nothing is deleted.
//! No tree is built on either side: under writes every bucket would
//! differ, so a tree would only add a scan of both stores.
//!
//! The node's token bucket (the same as anti-entropy's) pays for the
//! versions applied in full and for the scans at a copy's read cost
//! (`local::Meter::for_copy`); the source's pays for what it sends and
//! reads likewise. A version the engine refuses fails the session: the
//! copy is then incomplete.

use super::scope::TransitionScope;
use super::{CopyMetrics, moved_bytes};
use crate::antientropy::Node;
use crate::antientropy::client;
use crate::antientropy::local::{self, Meter, unexpected};
use crate::antientropy::merkle::{DEPTH, bucket_of};
use crate::antientropy::reconcile::{Merge, Step};
use crate::antientropy::stream::{KeepAlive, SessionError, SyncStream};
use crate::antientropy::wire::{
    BATCH_BYTES_MAX, DIGEST_ENTRIES_MAX, FETCH_KEYS_MAX, Message, NO_TREE_DEPTH, VERSION,
    bitmap_has, bitmap_of,
};
use crate::cluster::layout::Layout;
use crate::peer::frame::Stamped;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What one session with a source offered and moved, filled as it goes
/// (a failed session still tells what it moved before it failed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pulled {
    /// Keys the source holds in the scope (its `TransitionWelcome`).
    pub keys_offered: u64,
    /// Their key and value bytes.
    pub bytes_offered: u64,
    /// Versions received and applied here.
    pub keys: u64,
    /// Their key and value bytes.
    pub bytes: u64,
    /// Where the session's time went.
    pub phases: Phases,
}

/// Where one session's time went (logged when it ends).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    /// Connecting to the source.
    pub connect: Duration,
    /// From `Transition` sent to `TransitionWelcome`.
    pub welcome: Duration,
    /// Waiting for digest or share pages.
    pub digest: Duration,
    /// Digest or share pages asked for.
    pub pages: u64,
    /// Scanning this node's side of the pages.
    pub local_pages: Duration,
    /// Waiting for fetch answers.
    pub fetch: Duration,
    /// Fetch round trips.
    pub fetches: u64,
    /// Applying the fetched versions (the engine's durable writes).
    pub apply: Duration,
    /// This node's token bucket waits meanwhile (every taker's).
    pub rate_wait: Duration,
}

/// The two layouts of a transition and the node that gains keys in it.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    /// The layout being left.
    pub old: &'a Layout,
    /// The layout being entered.
    pub new: &'a Layout,
    /// This node's URL (a member of `new`).
    pub me: &'a str,
}

/// Pulls from `source` (dialled through `via` when given) every version
/// of the keys this node gains from it that is newer there than here.
pub fn pull(
    node: &Node<'_>,
    t: Transition<'_>,
    source: &str,
    via: Option<String>,
    pulled: &mut Pulled,
) -> Result<(), SessionError> {
    let started = Instant::now();
    let waited = node.antientropy.rate.waited();
    let result = pull_phases(node, t, source, via, pulled);
    pulled.phases.rate_wait = node.antientropy.rate.waited().saturating_sub(waited);
    let p = &pulled.phases;
    tracing::info!(
        source,
        ok = result.is_ok(),
        total_ms = started.elapsed().as_millis() as u64,
        keys = pulled.keys,
        bytes = pulled.bytes,
        connect_ms = p.connect.as_millis() as u64,
        welcome_ms = p.welcome.as_millis() as u64,
        digest_ms = p.digest.as_millis() as u64,
        pages = p.pages,
        local_pages_ms = p.local_pages.as_millis() as u64,
        fetch_ms = p.fetch.as_millis() as u64,
        fetches = p.fetches,
        apply_ms = p.apply.as_millis() as u64,
        rate_wait_ms = p.rate_wait.as_millis() as u64,
        "transition copy session phases"
    );
    result
}

fn pull_phases(
    node: &Node<'_>,
    t: Transition<'_>,
    source: &str,
    via: Option<String>,
    pulled: &mut Pulled,
) -> Result<(), SessionError> {
    let scope = TransitionScope::new(t.old, t.new, t.me, source)
        .map_err(|e| SessionError::Protocol(e.to_string()))?;
    let ae = node.antientropy;
    let mut clock = Instant::now();
    let (stream, leftover) = client::connect_url(node, source, via)?;
    pulled.phases.connect = lap(&mut clock);
    let stop = || node.stopping();
    let mut s = SyncStream::new(stream, leftover, &stop, &ae.metrics, ae.timing.keep_alive)
        .map_err(|e| SessionError::Io(e.to_string()))?;
    welcome(node, t, source, &mut s, pulled)?;
    pulled.phases.welcome = lap(&mut clock);
    fetch_newer(node, &scope, &mut s, pulled)
}

/// Opens a transition session on `s`: `Transition`, and the source's
/// `TransitionWelcome`, whose share estimate joins the to-move figures.
pub(super) fn welcome(
    node: &Node<'_>,
    t: Transition<'_>,
    source: &str,
    s: &mut SyncStream<'_>,
    pulled: &mut Pulled,
) -> Result<(), SessionError> {
    let ae = node.antientropy;
    let hello = Message::Transition {
        version: VERSION,
        url: t.me.to_owned(),
        depth: NO_TREE_DEPTH,
        old: t.old.clone(),
        new: t.new.clone(),
    };
    match client::ask_within(node, s, &hello, ae.timing.welcome)? {
        Message::TransitionWelcome {
            version,
            url,
            entries,
            bytes,
        } if version == VERSION && url == source => {
            pulled.keys_offered = entries;
            pulled.bytes_offered = bytes;
            ae.copy.keys_to_move.fetch_add(entries, Ordering::Relaxed);
            ae.copy.bytes_to_move.fetch_add(bytes, Ordering::Relaxed);
            Ok(())
        }
        Message::TransitionWelcome { version, url, .. } => Err(SessionError::Protocol(format!(
            "the TransitionWelcome came from {url} (sync protocol version {version}), \
                 expected {source} (version {VERSION})"
        ))),
        other => Err(unexpected(&other, "TransitionWelcome")),
    }
}

/// The time since `clock`, which restarts.
fn lap(clock: &mut Instant) -> Duration {
    let now = Instant::now();
    let took = now - *clock;
    *clock = now;
    took
}

/// Pages through the source's digest of its scope (every bucket) and
/// fetches what it has newer, in batches within the wire bounds.
fn fetch_newer(
    node: &Node<'_>,
    scope: &TransitionScope,
    s: &mut SyncStream<'_>,
    pulled: &mut Pulled,
) -> Result<(), SessionError> {
    let every: Vec<u32> = (0..1u32 << DEPTH).collect();
    let bitmap = bitmap_of(DEPTH, &every);
    let wanted = |key: &[u8]| bitmap_has(&bitmap, bucket_of(key, DEPTH)) && scope.covers(key);
    let mut fetch: Vec<Vec<u8>> = Vec::new();
    let mut fetch_bytes = 0usize;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let request = Message::Digest {
            buckets: bitmap.clone(),
            after: after.clone(),
            entries_max: DIGEST_ENTRIES_MAX as u32,
        };
        let asked = Instant::now();
        let (entries, next) = match client::ask(node, s, &request)? {
            Message::DigestPage { entries, next } => (entries, next),
            other => return Err(unexpected(&other, "DigestPage")),
        };
        pulled.phases.digest += asked.elapsed();
        pulled.phases.pages += 1;
        client::check_page(&entries, after.as_deref(), next.as_deref(), &bitmap, DEPTH)?;
        // This node's side of (after, next], in chunks bounded like a page.
        let mut remote = entries.into_iter().peekable();
        let mut cursor = after.clone();
        loop {
            let scanned = Instant::now();
            let (local_entries, cut) = {
                let mut meter = Meter::alive(node, &mut *s).for_copy();
                let end = next.as_deref();
                local::page(
                    node,
                    cursor.as_deref(),
                    end,
                    DIGEST_ENTRIES_MAX,
                    &mut meter,
                    wanted,
                )?
            };
            pulled.phases.local_pages += scanned.elapsed();
            let mut remote_chunk = Vec::new();
            while let Some(e) = remote.next_if(|e| cut.as_ref().is_none_or(|c| e.key <= *c)) {
                remote_chunk.push((e.key, e.tag));
            }
            let local_digest = local_entries.into_iter().map(|e| (e.key, e.tag));
            for step in Merge::new(local_digest, remote_chunk.into_iter()) {
                // Newer here: written during the transition; left alone.
                let Step::Fetch(key) = step else { continue };
                fetch_bytes += key.len();
                fetch.push(key);
                if fetch.len() >= FETCH_KEYS_MAX || fetch_bytes >= BATCH_BYTES_MAX {
                    fetch_batch(node, s, &mut fetch, pulled)?;
                    fetch_bytes = 0;
                }
            }
            match cut {
                None => break,
                Some(key) => cursor = Some(key),
            }
        }
        match next {
            None => break,
            Some(key) => after = Some(key),
        }
    }
    fetch_batch(node, s, &mut fetch, pulled)
}

/// Fetches `keys` (in as many round trips as the source's answer bound
/// needs) and applies their versions durably; empties `keys`.
pub(super) fn fetch_batch(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    keys: &mut Vec<Vec<u8>>,
    pulled: &mut Pulled,
) -> Result<(), SessionError> {
    while !keys.is_empty() {
        if node.stopping() {
            return Err(SessionError::Stopped);
        }
        let request = Message::Fetch { keys: keys.clone() };
        let asked = Instant::now();
        let items = match client::ask(node, s, &request)? {
            Message::Versions { items } => items,
            other => return Err(unexpected(&other, "Versions")),
        };
        pulled.phases.fetch += asked.elapsed();
        pulled.phases.fetches += 1;
        if items.is_empty() || items.len() > keys.len() {
            return Err(SessionError::Protocol(format!(
                "{} versions for {} keys",
                items.len(),
                keys.len()
            )));
        }
        let answered = items.len();
        let mut found = Vec::with_capacity(answered);
        for ((key, version), asked) in items.into_iter().zip(keys.iter()) {
            if key != *asked {
                return Err(SessionError::Protocol(
                    "a Versions answer out of the order of the keys asked for".into(),
                ));
            }
            if let Some(v) = version {
                found.push((key, v));
            }
        }
        apply_pulled(node, s, found, pulled)?;
        keys.drain(..answered);
    }
    Ok(())
}

/// Applies versions received from the source with one durable write,
/// pays for them and counts them; a refused version fails the session.
pub(super) fn apply_pulled(
    node: &Node<'_>,
    s: &mut dyn KeepAlive,
    mut versions: Vec<(Vec<u8>, Stamped)>,
    pulled: &mut Pulled,
) -> Result<(), SessionError> {
    super::planted::keep(node.config.planted_bug, &mut versions);
    let bytes: u64 = versions
        .iter()
        .map(|(key, v)| moved_bytes(key, v.value.as_deref()))
        .sum();
    let applying = Instant::now();
    let (applied, refused) = local::apply(node, versions)?;
    pulled.phases.apply += applying.elapsed();
    incomplete_if_refused(&refused)?;
    // What this node received and applied pays its token bucket: the copy
    // into one node is bounded by its limit, however many sources send at
    // once.
    local::pay_sent(node, s, bytes)?;
    count_pulled(node, pulled, applied, bytes);
    Ok(())
}

/// A copy that leaves out a version this node refused is incomplete: it
/// fails (naming the first refusal).
pub(super) fn incomplete_if_refused(refused: &local::Refused) -> Result<(), SessionError> {
    if refused.is_empty() {
        return Ok(());
    }
    let mut refusals = local::Refusals::default();
    refusals.add(refused);
    Err(SessionError::Engine(format!(
        "the copy is incomplete: {}",
        refusals.text()
    )))
}

/// Counts `keys` versions of `bytes` applied from one source, in its
/// report and the copy's metrics.
pub(super) fn count_pulled(node: &Node<'_>, pulled: &mut Pulled, keys: u64, bytes: u64) {
    let metrics: &CopyMetrics = &node.antientropy.copy;
    pulled.keys += keys;
    pulled.bytes += bytes;
    metrics.keys_moved.fetch_add(keys, Ordering::Relaxed);
    metrics.bytes_moved.fetch_add(bytes, Ordering::Relaxed);
    metrics.keys_copied.fetch_add(keys, Ordering::Relaxed);
    metrics.bytes_copied.fetch_add(bytes, Ordering::Relaxed);
}
