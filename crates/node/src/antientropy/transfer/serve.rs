//! A transition session as the source, on the `ataman-sync` thread: the
//! gaining node's `Transition` frame is checked, this node answers
//! `TransitionWelcome` with its share's estimated size (no scan), then
//! Share pages (the one-pass copy: the versions of its share and the
//! digest of the rest of its scope, one scan) and Fetch, or Digest pages
//! and Fetch (the comparing pass), until the gaining node closes. Transition sessions build no tree: under writes every bucket
//! would differ. The session only reads: a Push, TreeNodes (or anything
//! else) is a protocol error.
//!
//! The layouts come from the gaining node (an authenticated peer when the
//! cluster has a secret); they are checked to be one transition this node
//! is an old member of and the gaining node a new one. Serving reads
//! nothing a member could not read anyway.

use super::moved_bytes;
use super::scope::Share;
use crate::antientropy::Node;
use crate::antientropy::local::{self, Meter, kind_name};
use crate::antientropy::merkle::{DEPTH, bucket_of};
use crate::antientropy::server::refuse;
use crate::antientropy::stream::{SEND_TIMEOUT, SessionError, SyncStream};
use crate::antientropy::wire::{Message, NO_TREE_DEPTH, VERSION, bitmap_bytes, bitmap_has};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Serves the session `hello` (a `Transition`) opened, to its end.
pub fn session(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    hello: Message,
    peer_url: &mut String,
) -> Result<(), SessionError> {
    let Message::Transition {
        version,
        url,
        depth,
        old,
        new,
    } = hello
    else {
        return Err(SessionError::Protocol(format!(
            "expected Transition, got {}",
            kind_name(&hello)
        )));
    };
    *peer_url = url.clone();
    let me = &node.topology.nodes()[node.topology.self_index()];
    let scope = if version != VERSION {
        Err(format!(
            "sync protocol version {version}; {me} speaks version {VERSION}"
        ))
    } else if depth != NO_TREE_DEPTH {
        Err(format!(
            "transition sessions compare no trees: {url} asks for depth {depth}, \
             {me} serves depth {NO_TREE_DEPTH} only"
        ))
    } else {
        Share::new(&old, &new, &url, me).map_err(|e| format!("transition refused: {e}"))
    };
    let share = match scope {
        Ok(share) => share,
        Err(why) => {
            return Err(refuse(s, why));
        }
    };
    if s.peer_closed() {
        node.antientropy
            .metrics
            .sessions_abandoned
            .fetch_add(1, Ordering::Relaxed);
        return Err(SessionError::Io(
            "the gaining node left while the session waited to be served".into(),
        ));
    }
    let copy = &node.antientropy.copy;
    copy.sessions_served.fetch_add(1, Ordering::Relaxed);
    let building = Instant::now();
    let waited = node.antientropy.rate.waited();
    // Time this session waited on the token bucket so far.
    let rate_wait_ms = || {
        let rate = &node.antientropy.rate;
        rate.waited().saturating_sub(waited).as_millis() as u64
    };
    let (entries, bytes) = share_estimate(node, &share);
    tracing::info!(
        gaining = url,
        entries,
        bytes,
        "transition copy: serving; the share's estimated size"
    );
    let welcome = Message::TransitionWelcome {
        version: VERSION,
        url: me.clone(),
        entries,
        bytes,
    };
    let sent = s.send(&welcome, Instant::now() + SEND_TIMEOUT)?;
    local::pay_sent(node, s, sent)?;
    let silence = node.antientropy.timing.silence;
    let (mut digest, mut fetch, mut pages) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    loop {
        let Some(request) = s.recv(silence)? else {
            tracing::info!(
                gaining = url,
                total_ms = building.elapsed().as_millis() as u64,
                share_ms = pages.as_millis() as u64,
                digest_ms = digest.as_millis() as u64,
                fetch_ms = fetch.as_millis() as u64,
                rate_wait_ms = rate_wait_ms(),
                "transition copy: served"
            );
            return Ok(());
        };
        let answering = Instant::now();
        let phase = match request {
            Message::Fetch { .. } => &mut fetch,
            Message::Share { .. } => &mut pages,
            _ => &mut digest,
        };
        let answer = answer(node, &share, request, s)?;
        *phase += answering.elapsed();
        let sent_versions: Vec<(&[u8], Option<&[u8]>)> = match &answer {
            Message::Versions { items } => items
                .iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| (k.as_slice(), v.value.as_deref())))
                .collect(),
            Message::SharePage { items, .. } => items
                .iter()
                .map(|(k, v)| (k.as_slice(), v.value.as_deref()))
                .collect(),
            _ => Vec::new(),
        };
        for (key, value) in sent_versions {
            copy.keys_sent.fetch_add(1, Ordering::Relaxed);
            copy.bytes_sent
                .fetch_add(moved_bytes(key, value), Ordering::Relaxed);
        }
        let sent = s.send(&answer, Instant::now() + SEND_TIMEOUT)?;
        local::pay_sent(node, s, sent)?;
    }
}

/// The share's keys and bytes, estimated from this node's store size
/// (`Share::estimate`): the `TransitionWelcome`'s progress figures.
fn share_estimate(node: &Node<'_>, share: &Share) -> (u64, u64) {
    let stats = node.db.stats();
    let entries = stats.level_entries.iter().sum::<u64>() + stats.memtable_entries;
    let bytes = stats.level_bytes.iter().sum::<u64>() + stats.memtable_bytes;
    share.estimate(entries, bytes)
}

/// The answer to one request after the `Transition`.
fn answer(
    node: &Node<'_>,
    share: &Share,
    request: Message,
    s: &mut SyncStream<'_>,
) -> Result<Message, SessionError> {
    match request {
        Message::Share { after } => {
            let mut meter = Meter::alive(node, s).for_copy();
            let page = local::share_page(node, after.as_deref(), &mut meter, |key| {
                share.classify(key)
            })?;
            Ok(Message::SharePage {
                items: page.items,
                others: page.others,
                next: page.next,
            })
        }
        Message::Digest {
            buckets,
            after,
            entries_max,
        } => {
            if buckets.len() != bitmap_bytes(DEPTH) {
                return Err(SessionError::Protocol(format!(
                    "bucket bitmap of {} bytes; depth {DEPTH} has {}",
                    buckets.len(),
                    bitmap_bytes(DEPTH)
                )));
            }
            let mut meter = Meter::alive(node, s).for_copy();
            let scope = share.scope();
            let wanted =
                |key: &[u8]| bitmap_has(&buckets, bucket_of(key, DEPTH)) && scope.covers(key);
            let (entries, next) = local::page(
                node,
                after.as_deref(),
                None,
                entries_max as usize,
                &mut meter,
                wanted,
            )?;
            Ok(Message::DigestPage { entries, next })
        }
        Message::Fetch { keys } => {
            local::read_versions_metered(node, keys, &mut Meter::alive(node, s).for_copy())
        }
        other => Err(SessionError::Protocol(format!(
            "unexpected {} in a transition session",
            kind_name(&other)
        ))),
    }
}
