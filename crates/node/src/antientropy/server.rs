//! The `ataman-sync` thread: serves the sync sessions peers start, one at
//! a time, as the responder.
//!
//! A session: the peer's Hello is checked against this node (protocol
//! version, the peer is another node of the same cluster, same replication
//! factor, same tree depth); then this node builds its tree of the keys it
//! keeps with that peer from one scan, answers Welcome, and answers
//! TreeNodes, Digest, Fetch and Push requests until the peer closes. A bad
//! request gets an `Error` frame and ends the session.
//!
//! Bounds: one session at a time (others wait in the hand-off channel, at
//! most `SYNC_SESSIONS_WAITING_MAX`); a session whose initiator left while
//! it waited (it closed after its Hello) is dropped before any work; each
//! wait for a request ends after `stream::SILENCE_TIMEOUT` without a byte
//! (the initiator sends `KeepAlive`s during its long local work, and this
//! side does the same while it builds its tree or scans a page); answers
//! are bounded by the wire limits; the stop flag is checked between
//! batches and every `stream::IO_SLICE`.

use super::Node;
use super::local::{self, kind_name};
use super::merkle::{DEPTH, Tree};
use super::stream::{SEND_TIMEOUT, SessionError, SyncStream};
use super::wire::{self, Message, bitmap_bytes};
use super::{Handoff, wire::VERSION};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How often the idle thread checks the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// Runs the `ataman-sync` thread until the node stops.
pub fn run(node: &Node<'_>, receiver: &Receiver<Handoff>) {
    super::priority::lower_this_thread();
    while !node.stopping() {
        match receiver.recv_timeout(STOP_CHECK) {
            Ok(handoff) => serve(node, handoff),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Tells the initiator why the session is refused (best effort) and
/// returns the session's error.
pub(super) fn refuse(s: &mut SyncStream<'_>, why: String) -> SessionError {
    let _ = s.send(
        &wire::error_message(why.clone()),
        Instant::now() + SEND_TIMEOUT,
    );
    SessionError::Refusing(why)
}

/// Serves one session to its end; the ticket is released on return.
fn serve(node: &Node<'_>, handoff: Handoff) {
    let Handoff {
        stream,
        leftover,
        ticket,
    } = handoff;
    let ae = &node.antientropy;
    ae.metrics.sessions_served.fetch_add(1, Ordering::Relaxed);
    let client = stream
        .tcp()
        .peer_addr()
        .map_or_else(|_| "unknown".to_owned(), |a| a.to_string());
    let stop = || node.stopping();
    let mut s = match SyncStream::new(stream, leftover, &stop, &ae.metrics, ae.timing.keep_alive) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%client, error = %e, "anti-entropy session not served");
            return;
        }
    };
    let mut peer_url = String::from("(before Hello)");
    if let Err(e) = session(node, &mut s, &mut peer_url) {
        if matches!(e, SessionError::Protocol(_) | SessionError::Engine(_)) {
            // Best effort: the peer learns why before the connection closes.
            let _ = s.send(
                &local::error_frame(&e),
                Instant::now() + Duration::from_secs(1),
            );
        }
        if !matches!(e, SessionError::Stopped) {
            tracing::warn!(
                peer = %peer_url,
                %client,
                error = %e,
                "anti-entropy session ended with an error"
            );
        }
    }
    drop(ticket);
}

/// Why a Hello is refused, if it is.
pub(super) fn refuse_hello(
    node: &Node<'_>,
    version: u32,
    url: &str,
    replicas: u32,
    depth: u32,
    fingerprint: u64,
) -> Option<String> {
    let topology = &node.topology;
    let me = &topology.nodes()[topology.self_index()];
    if version != VERSION {
        return Some(format!(
            "sync protocol version {version}; {me} speaks version {VERSION}"
        ));
    }
    if fingerprint != wire::layout_fingerprint(topology.nodes(), topology.version()) {
        let why = format!(
            "cluster lists differ: {url} and {me} read with different layouts \
             ({me} reads layout version {} of {} nodes; a different --cluster list, \
             or a layout change one of them has not seen yet)",
            topology.version(),
            topology.len()
        );
        tracing::warn!(peer = %url, layout_version = topology.version(), "anti-entropy session refused: {why}");
        return Some(why);
    }
    match topology.nodes().iter().position(|u| u == url) {
        None => return Some(format!("{url} is not in {me}'s --cluster")),
        Some(i) if i == topology.self_index() => {
            return Some(format!("{url} is this node itself"));
        }
        Some(_) => {}
    }
    if replicas as usize != topology.replication_factor() {
        return Some(format!(
            "replication factor differs: {url} keeps {replicas} replicas, {me} keeps {} (--replication-factor)",
            topology.replication_factor()
        ));
    }
    if depth != DEPTH {
        return Some(format!(
            "tree depth differs: {url} compares depth {depth}, {me} depth {DEPTH}"
        ));
    }
    None
}

fn session(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    peer_url: &mut String,
) -> Result<(), SessionError> {
    let silence = node.antientropy.timing.silence;
    let Some(hello) = s.recv(silence)? else {
        return Ok(());
    };
    if matches!(hello, Message::Transition { .. }) {
        return super::transfer::serve::session(node, s, hello, peer_url);
    }
    let Message::Hello {
        version,
        url,
        replicas,
        depth,
        fingerprint,
    } = hello
    else {
        return Err(SessionError::Protocol(format!(
            "expected Hello, got {}",
            kind_name(&hello)
        )));
    };
    *peer_url = url.clone();
    // The live read layout, taken once for the session.
    let view = match node.read_view() {
        Ok(view) => view,
        Err(why) => {
            return Err(refuse(s, why));
        }
    };
    let node = &node.with_view(&view);
    if let Some(why) = refuse_hello(node, version, &url, replicas, depth, fingerprint) {
        return Err(refuse(s, why));
    }
    // The session may have waited in the hand-off queue behind another;
    // an initiator that gave up meanwhile closed its end after the Hello.
    if s.peer_closed() {
        node.antientropy
            .metrics
            .sessions_abandoned
            .fetch_add(1, Ordering::Relaxed);
        return Err(SessionError::Io(
            "the initiator left while the session waited to be served".into(),
        ));
    }
    let peer = node
        .topology
        .nodes()
        .iter()
        .position(|u| *u == url)
        .ok_or_else(|| SessionError::Protocol(format!("{url} is not in --cluster")))?;
    let (tree, entries) = local::build_trees(node, &[peer], depth, Some(&mut *s))?
        .pop()
        .ok_or_else(|| SessionError::Engine("no tree built".into()))?;
    let me = node.topology.nodes()[node.topology.self_index()].clone();
    let welcome = Message::Welcome {
        version: VERSION,
        url: me,
        entries,
    };
    let sent = s.send(&welcome, Instant::now() + SEND_TIMEOUT)?;
    local::pay_sent(node, s, sent)?;
    loop {
        let Some(request) = s.recv(silence)? else {
            return Ok(());
        };
        let answer = answer(node, &tree, peer, request, s)?;
        let sent = s.send(&answer, Instant::now() + SEND_TIMEOUT)?;
        local::pay_sent(node, s, sent)?;
    }
}

/// The answer to a TreeNodes request: the hashes of `indexes` of `level`.
pub(super) fn tree_hashes(
    tree: &Tree,
    level: u32,
    indexes: &[u32],
) -> Result<Message, SessionError> {
    let depth = tree.depth();
    if level > depth {
        return Err(SessionError::Protocol(format!(
            "tree level {level} below the leaves (depth {depth})"
        )));
    }
    let width = 1u64 << level;
    if let Some(bad) = indexes.iter().find(|&&i| u64::from(i) >= width) {
        return Err(SessionError::Protocol(format!(
            "index {bad} outside level {level} ({width} nodes)"
        )));
    }
    let hashes = indexes.iter().map(|&i| tree.node(level, i)).collect();
    Ok(Message::Hashes { hashes })
}

/// The answer to one request after the Hello.
fn answer(
    node: &Node<'_>,
    tree: &Tree,
    peer: usize,
    request: Message,
    s: &mut SyncStream<'_>,
) -> Result<Message, SessionError> {
    let depth = tree.depth();
    match request {
        Message::TreeNodes { level, indexes } => tree_hashes(tree, level, &indexes),
        Message::Digest {
            buckets,
            after,
            entries_max,
        } => {
            if buckets.len() != bitmap_bytes(depth) {
                return Err(SessionError::Protocol(format!(
                    "bucket bitmap of {} bytes; depth {depth} has {}",
                    buckets.len(),
                    bitmap_bytes(depth)
                )));
            }
            local::digest_page(
                node,
                peer,
                depth,
                &buckets,
                after.as_deref(),
                entries_max,
                s,
            )
        }
        Message::Fetch { keys } => local::read_versions(node, keys, s),
        Message::Push { items } => {
            // A refused version does not end the session: the ack counts
            // it and names the first reason, and the initiator reports it.
            let (applied, refused) = local::apply(node, items)?;
            let metrics = &node.antientropy.metrics;
            metrics.keys_received.fetch_add(applied, Ordering::Relaxed);
            metrics
                .keys_refused
                .fetch_add(refused.len() as u64, Ordering::Relaxed);
            let mut refusals = local::Refusals::default();
            refusals.add(&refused);
            Ok(Message::PushAck {
                applied: applied as u32,
                refused: refused.len() as u32,
                first_refusal: refusals.first.unwrap_or_default(),
            })
        }
        other => Err(SessionError::Protocol(format!(
            "unexpected {} in a session",
            kind_name(&other)
        ))),
    }
}
