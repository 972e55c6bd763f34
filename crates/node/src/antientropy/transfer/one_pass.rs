//! The one-pass copy: every source at once, each scanning its scope of
//! the gaining node's copy once, and the gaining node merging what they
//! send key by key (`super::offers`), so each key moves once and nothing
//! is scanned here.
//!
//! One transition session per source (`Transition`, then `Share` pages:
//! the versions of its share with their values, the digest entries of
//! the rest of its scope, in key order). The sources' pages are merged
//! like a k-way merge: the keys up to the *frontier* (the smallest key
//! every unfinished source's pages reached) have every source's offer,
//! so each is decided (apply the version offered, or fetch a newer one
//! from a source that holds it) and the sources whose pages are used up
//! are asked for their next page. At most one page per source is held,
//! and each source is asked as soon as it is used up, so all of them scan
//! at once.
//!
//! A source is *done* when the pass ends: every key of its scope was
//! compared with every other source's and the newest applied here,
//! durably. The frontier is told to `progress` as the pass goes (a
//! restart resumes after it: every key up to it is merged, durably). A
//! source that cannot be reached is left out (and not done); one that
//! fails mid-pass ends the pass: the caller falls back to comparing
//! source by source (`super::pull`).

use super::moved_bytes;
use super::offers::{Merger, Offer, Offers, Take, take};
use super::pull::{Pulled, Transition, count_pulled, fetch_batch, incomplete_if_refused, welcome};
use super::scope::Share;
use crate::antientropy::Node;
use crate::antientropy::client;
use crate::antientropy::local::{self, unexpected};
use crate::antientropy::stream::{KeepAlive, SEND_TIMEOUT, SessionError, SyncStream};
use crate::antientropy::wire::{DigestEntry, FETCH_KEYS_MAX, Message};
use crate::peer::frame::Stamped;
use std::time::Instant;

/// Told, after the keys up to it are merged durably, the frontier, with
/// the sources in the pass (indexes into the pass's sources).
pub type Progress<'a> = &'a (dyn Fn(&[usize], &[u8]) + Sync);

/// One source of the pass and how it ended.
#[derive(Debug, Default, Clone)]
pub struct PassSource {
    /// What it offered and moved.
    pub pulled: Pulled,
    /// Why it is not done (unreachable, or the pass failed), if it is not.
    pub error: Option<String>,
    /// Every key of its scope was merged here.
    pub done: bool,
}

/// One source's session.
struct Stream<'s> {
    /// The source's index in the pass's sources.
    index: usize,
    share: Share,
    s: SyncStream<'s>,
}

/// Every stream of the pass kept alive at once (while this node sleeps on
/// its token bucket, the sources not asked wait for their next request).
struct AllAlive<'a, 's>(&'a mut [Stream<'s>]);

impl KeepAlive for AllAlive<'_, '_> {
    fn keep_alive(&mut self) -> Result<(), SessionError> {
        for stream in self.0.iter_mut() {
            stream.s.keep_alive()?;
        }
        Ok(())
    }
}

/// Runs the pass over `sources` (URL, and `--peer-via` address), merging
/// the keys after `after`. Returns one [`PassSource`] per source, in
/// order; `Err` only when the node stops.
pub fn one_pass(
    node: &Node<'_>,
    t: Transition<'_>,
    sources: &[(&str, Option<String>)],
    after: Option<Vec<u8>>,
    progress: Progress<'_>,
) -> Result<Vec<PassSource>, SessionError> {
    let mut report: Vec<PassSource> = sources.iter().map(|_| PassSource::default()).collect();
    let stop = || node.stopping();
    let ae = node.antientropy;
    let mut streams = Vec::new();
    for (index, (source, via)) in sources.iter().enumerate() {
        let opened = (|| {
            let share = Share::new(t.old, t.new, t.me, source)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            let (stream, leftover) = client::connect_url(node, source, via.clone())?;
            let mut s = SyncStream::new(stream, leftover, &stop, &ae.metrics, ae.timing.keep_alive)
                .map_err(|e| SessionError::Io(e.to_string()))?;
            welcome(node, t, source, &mut s, &mut report[index].pulled)?;
            Ok::<_, SessionError>(Stream { index, share, s })
        })();
        match opened {
            Ok(stream) => streams.push(stream),
            Err(SessionError::Stopped) => return Err(SessionError::Stopped),
            Err(e) => {
                tracing::info!(source, error = %e, "one-pass copy: a source left out");
                report[index].error = Some(e.to_string());
            }
        }
    }
    if streams.is_empty() {
        return Ok(report);
    }
    let started = Instant::now();
    let mut merger = Merger::new(streams.len(), after);
    let result = merge(node, &mut streams, &mut merger, &mut report, progress);
    let ok = match result {
        Ok(()) => true,
        Err(SessionError::Stopped) => return Err(SessionError::Stopped),
        Err(e) => {
            for stream in &streams {
                report[stream.index].error = Some(e.to_string());
            }
            false
        }
    };
    for stream in &streams {
        let r = &mut report[stream.index];
        r.done = ok;
        let p = &r.pulled.phases;
        tracing::info!(
            source = sources[stream.index].0,
            ok,
            total_ms = started.elapsed().as_millis() as u64,
            keys = r.pulled.keys,
            bytes = r.pulled.bytes,
            page_wait_ms = p.digest.as_millis() as u64,
            pages = p.pages,
            fetches = p.fetches,
            apply_ms = p.apply.as_millis() as u64,
            "one-pass copy: a source's figures"
        );
    }
    Ok(report)
}

/// The merge loop, to the end of every source's pages.
fn merge(
    node: &Node<'_>,
    streams: &mut [Stream<'_>],
    merger: &mut Merger,
    report: &mut [PassSource],
    progress: Progress<'_>,
) -> Result<(), SessionError> {
    while !merger.done() {
        if node.stopping() {
            return Err(SessionError::Stopped);
        }
        ask_used_up(node, streams, merger, report)?;
        let (ready, frontier) = merger.ready();
        decide(node, streams, report, ready)?;
        if let Some(key) = frontier {
            let in_pass: Vec<usize> = streams.iter().map(|s| s.index).collect();
            progress(&in_pass, &key);
        }
    }
    Ok(())
}

/// Asks every used-up source for its next page (all requests first, then
/// the answers, so the sources scan at once), checks each page and hands
/// it to the merger.
fn ask_used_up(
    node: &Node<'_>,
    streams: &mut [Stream<'_>],
    merger: &mut Merger,
    report: &mut [PassSource],
) -> Result<(), SessionError> {
    let asking = merger.used_up();
    for &i in &asking {
        let request = Message::Share {
            after: merger.after(i).map(<[u8]>::to_vec),
        };
        let stream = &mut streams[i];
        let sent = stream.s.send(&request, Instant::now() + SEND_TIMEOUT)?;
        local::pay_sent(node, &mut stream.s, sent)?;
    }
    let silence = node.antientropy.timing.silence;
    for &i in &asking {
        let asked = Instant::now();
        let stream = &mut streams[i];
        let answer = stream
            .s
            .recv(silence)?
            .ok_or_else(|| SessionError::Io("the source closed the session".into()))?;
        let Message::SharePage {
            items,
            others,
            next,
        } = answer
        else {
            return Err(unexpected(&answer, "SharePage"));
        };
        let phases = &mut report[stream.index].pulled.phases;
        phases.digest += asked.elapsed();
        phases.pages += 1;
        check_page(
            &stream.share,
            &items,
            &others,
            merger.after(i),
            next.as_deref(),
        )?;
        merger.push(i, in_key_order(items, others), next);
    }
    Ok(())
}

/// A page's versions and digest entries (each list in key order, no key
/// in both) as one list of offers in key order.
fn in_key_order(items: Vec<(Vec<u8>, Stamped)>, others: Vec<DigestEntry>) -> Vec<(Vec<u8>, Offer)> {
    let mut offers = Vec::with_capacity(items.len() + others.len());
    let mut items = items.into_iter().peekable();
    let mut others = others.into_iter().peekable();
    loop {
        let item_first = match (items.peek(), others.peek()) {
            (None, None) => return offers,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((k, _)), Some(e)) => *k < e.key,
        };
        match item_first {
            true => {
                let Some((key, version)) = items.next() else {
                    return offers;
                };
                offers.push((key, Offer::Version(version)));
            }
            false => {
                let Some(e) = others.next() else {
                    return offers;
                };
                offers.push((e.key, Offer::Digest { ts: e.tag.ts }));
            }
        }
    }
}

/// Decides every key of `offers` (in key order) and carries it out: the
/// versions offered are applied (one durable write per source), the newer
/// ones only digested are fetched from their sources.
fn decide(
    node: &Node<'_>,
    streams: &mut [Stream<'_>],
    report: &mut [PassSource],
    offers: Offers,
) -> Result<(), SessionError> {
    let mut apply: Vec<(Vec<u8>, Stamped, usize)> = Vec::new();
    let mut fetch: Vec<Vec<Vec<u8>>> = streams.iter().map(|_| Vec::new()).collect();
    // This node may hold a key already (a write of the transition, a
    // resumed pass, a kept node that never deleted it): what it holds as
    // new is neither applied again nor fetched.
    let held_older = |key: &[u8], ts: u64| -> Result<bool, SessionError> {
        Ok(local::read_version(node, key)?.is_none_or(|v| v.ts < ts))
    };
    // A version offered whole is applied unless what is held wins by the
    // one tie rule (crate::version_order) or is the same write.
    let held_loses = |key: &[u8], offered: &Stamped| -> Result<bool, SessionError> {
        Ok(local::read_version(node, key)?.is_none_or(|v| offered.newer_than(&v)))
    };
    for (key, offered) in offers {
        match take(offered) {
            Some(Take::ApplyUnlessHeld { source, version }) if held_loses(&key, &version)? => {
                apply.push((key, version, source));
            }
            Some(Take::FetchUnlessHeld { source, ts }) if held_older(&key, ts)? => {
                fetch[source].push(key);
            }
            _ => {}
        }
    }
    if !apply.is_empty() {
        ingest_offered(node, streams, report, apply)?;
    }
    for (i, keys) in fetch.into_iter().enumerate() {
        for chunk in keys.chunks(FETCH_KEYS_MAX) {
            let pulled = &mut report[streams[i].index].pulled;
            fetch_batch(node, &mut streams[i].s, &mut chunk.to_vec(), pulled)?;
        }
    }
    Ok(())
}

/// Applies the versions offered, from every source, in key order, as one
/// ingest (`local::ingest`: straight to tables of the engine's deepest
/// free level; the merge delivers keys in order, so the pass writes each
/// copied byte once), then pays for them and counts them per source.
fn ingest_offered(
    node: &Node<'_>,
    streams: &mut [Stream<'_>],
    report: &mut [PassSource],
    versions: Vec<(Vec<u8>, Stamped, usize)>,
) -> Result<(), SessionError> {
    let mut per_source = vec![(0u64, 0u64); streams.len()];
    for (key, version, source) in &versions {
        per_source[*source].0 += 1;
        per_source[*source].1 += moved_bytes(key, version.value.as_deref());
    }
    let applying = Instant::now();
    let mut items = versions.into_iter().map(|(k, v, _)| (k, v)).collect();
    super::planted::keep(node.config.planted_bug, &mut items);
    let (_, refused) = local::ingest(node, items)?;
    let took = applying.elapsed();
    incomplete_if_refused(&refused)?;
    let bytes = per_source.iter().map(|(_, b)| b).sum();
    // What this node received and applied pays its token bucket (as
    // `apply_pulled`).
    local::pay_sent(node, &mut AllAlive(streams), bytes)?;
    for (i, (keys, bytes)) in per_source.into_iter().enumerate() {
        if keys > 0 {
            let pulled = &mut report[streams[i].index].pulled;
            pulled.phases.apply += took;
            count_pulled(node, pulled, keys, bytes);
        }
    }
    Ok(())
}

/// A share page must hold the share's keys as versions and the rest of
/// the scope as digest entries, each list in key order inside
/// `(after, next]`, and move forward: anything else would skip or repeat
/// keys, or take keys this node does not gain.
fn check_page(
    share: &Share,
    items: &[(Vec<u8>, Stamped)],
    others: &[DigestEntry],
    after: Option<&[u8]>,
    next: Option<&[u8]>,
) -> Result<(), SessionError> {
    let bad = |why: &str| Err(SessionError::Protocol(format!("share page {why}")));
    if let (Some(a), Some(n)) = (after, next)
        && n <= a
    {
        return bad("does not move past its resume key");
    }
    let lists = [
        (
            items.iter().map(|(k, _)| k.as_slice()).collect::<Vec<_>>(),
            true,
        ),
        (others.iter().map(|e| e.key.as_slice()).collect(), false),
    ];
    for (keys, in_share) in lists {
        let mut previous = after;
        for key in keys {
            if previous.is_some_and(|p| key <= p) {
                return bad("out of key order or before its resume key");
            }
            if next.is_some_and(|n| key > n) {
                return bad("holds a key past its resume key");
            }
            if share.classify(key) != Some(in_share) {
                return bad("holds a key outside the source's scope, or in the wrong list");
            }
            previous = Some(key);
        }
    }
    Ok(())
}
