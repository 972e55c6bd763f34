//! A transition session as the source, on the `ataman-sync` thread: the
//! gaining node's `Transition` frame is checked, this node builds its tree
//! of the transition's keys it holds (`super::scope`; none when the frame
//! asks for depth 0, a bulk pass), answers `TransitionWelcome`, then
//! TreeNodes, Digest and Fetch until the gaining node closes. The session only reads: a Push (or anything else) is a
//! protocol error.
//!
//! The layouts come from the gaining node (an authenticated peer when the
//! cluster has a secret); they are checked to be one transition this node
//! is an old member of and the gaining node a new one. Serving reads
//! nothing a member could not read anyway.

use super::moved_bytes;
use super::scope::TransitionScope;
use crate::antientropy::Node;
use crate::antientropy::local::{self, Meter, kind_name};
use crate::antientropy::merkle::{DEPTH, Tree, bucket_of};
use crate::antientropy::server::{refuse, tree_hashes};
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
    } else if depth != DEPTH && depth != NO_TREE_DEPTH {
        Err(format!(
            "tree depth differs: {url} compares depth {depth}, {me} depth {DEPTH}"
        ))
    } else {
        TransitionScope::new(&old, &new, &url, me).map_err(|e| format!("transition refused: {e}"))
    };
    let scope = match scope {
        Ok(scope) => scope,
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
    let (tree, entries, bytes) = match depth {
        // A bulk pass: no tree, the initiator pages every bucket.
        NO_TREE_DEPTH => (None, 0, 0),
        _ => {
            let (tree, entries, bytes) = scope_tree(node, &scope, s)?;
            (Some(tree), entries, bytes)
        }
    };
    tracing::info!(
        gaining = url,
        entries,
        bytes,
        tree_ms = building.elapsed().as_millis() as u64,
        rate_wait_ms = rate_wait_ms(),
        "transition copy: the source's tree of the scope"
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
    let (mut digest, mut fetch) = (Duration::ZERO, Duration::ZERO);
    loop {
        let Some(request) = s.recv(silence)? else {
            tracing::info!(
                gaining = url,
                total_ms = building.elapsed().as_millis() as u64,
                digest_ms = digest.as_millis() as u64,
                fetch_ms = fetch.as_millis() as u64,
                rate_wait_ms = rate_wait_ms(),
                "transition copy: served"
            );
            return Ok(());
        };
        let answering = Instant::now();
        let is_fetch = matches!(request, Message::Fetch { .. });
        let answer = answer(node, tree.as_ref(), &scope, request, s)?;
        if is_fetch {
            fetch += answering.elapsed();
        } else {
            digest += answering.elapsed();
        }
        if let Message::Versions { items } = &answer {
            let found = items.iter().filter_map(|(k, v)| v.as_ref().map(|v| (k, v)));
            for (key, version) in found {
                copy.keys_sent.fetch_add(1, Ordering::Relaxed);
                let n = moved_bytes(key, version.value.as_deref());
                copy.bytes_sent.fetch_add(n, Ordering::Relaxed);
            }
        }
        let sent = s.send(&answer, Instant::now() + SEND_TIMEOUT)?;
        local::pay_sent(node, s, sent)?;
    }
}

/// This node's tree of the scope, its entries and their bytes, from one
/// scan (the gaining node hears `KeepAlive`s meanwhile).
fn scope_tree(
    node: &Node<'_>,
    scope: &TransitionScope,
    s: &mut SyncStream<'_>,
) -> Result<(Tree, u64, u64), SessionError> {
    let mut tree = Tree::new(DEPTH);
    let (mut entries, mut bytes) = (0u64, 0u64);
    let mut meter = Meter::alive(node, s).for_copy();
    local::scan_each(node, b"", None, &mut meter, |key, entry| {
        if scope.covers(&key) {
            tree.add(&key, entry.ts, entry.value.is_none());
            entries += 1;
            bytes += moved_bytes(&key, entry.value.as_deref());
        }
        Ok(true)
    })?;
    meter.settle()?;
    tree.finish();
    Ok((tree, entries, bytes))
}

/// The answer to one request after the `Transition`.
fn answer(
    node: &Node<'_>,
    tree: Option<&Tree>,
    scope: &TransitionScope,
    request: Message,
    s: &mut SyncStream<'_>,
) -> Result<Message, SessionError> {
    match request {
        Message::TreeNodes { level, indexes } => match tree {
            Some(tree) => tree_hashes(tree, level, &indexes),
            None => Err(SessionError::Protocol(
                "TreeNodes in a transition session opened without a tree (depth 0)".into(),
            )),
        },
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
