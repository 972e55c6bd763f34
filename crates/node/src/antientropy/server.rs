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
//! most `SYNC_SESSIONS_WAITING_MAX`); each wait for a request ends after
//! [`SESSION_IDLE_TIMEOUT`]; answers are bounded by the wire limits; the
//! stop flag is checked between batches and every `stream::IO_SLICE`.

use super::local::{self, Meter, kind_name};
use super::merkle::{DEPTH, Tree};
use super::stream::{SessionError, SyncStream};
use super::wire::{self, Message, bitmap_bytes};
use super::{Handoff, wire::VERSION};
use crate::net::NodeShared;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the server waits for the peer's next request (the initiator
/// does local work between requests: scans, engine writes).
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long sending one answer may take.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the idle thread checks the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// Runs the `ataman-sync` thread until the node stops.
pub fn run(shared: &NodeShared, receiver: &Receiver<Handoff>) {
    while !shared.stopping() {
        match receiver.recv_timeout(STOP_CHECK) {
            Ok(handoff) => serve(shared, handoff),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Serves one session to its end; the ticket is released on return.
fn serve(shared: &NodeShared, handoff: Handoff) {
    let Handoff {
        stream,
        leftover,
        ticket,
    } = handoff;
    let ae = &shared.antientropy;
    ae.metrics.sessions_served.fetch_add(1, Ordering::Relaxed);
    let stop = || shared.stopping();
    let mut s = match SyncStream::new(stream, leftover, &stop, &ae.metrics) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ataman: anti-entropy session not served: {e}");
            return;
        }
    };
    let mut peer_url = String::from("(before Hello)");
    if let Err(e) = session(shared, &mut s, &mut peer_url) {
        if matches!(e, SessionError::Protocol(_) | SessionError::Engine(_)) {
            // Best effort: the peer learns why before the connection closes.
            let _ = s.send(
                &local::error_frame(&e),
                Instant::now() + Duration::from_secs(1),
            );
        }
        if !matches!(e, SessionError::Stopped) {
            eprintln!("ataman: anti-entropy session with {peer_url} ended: {e}");
        }
    }
    drop(ticket);
}

/// Why a Hello is refused, if it is.
fn refuse_hello(
    shared: &NodeShared,
    version: u32,
    url: &str,
    replicas: u32,
    depth: u32,
    fingerprint: u64,
) -> Option<String> {
    let topology = &shared.topology;
    let me = &topology.nodes()[topology.self_index()];
    if version != VERSION {
        return Some(format!(
            "sync protocol version {version}; {me} speaks version {VERSION}"
        ));
    }
    if fingerprint != wire::fingerprint(topology.nodes()) {
        return Some(format!(
            "cluster lists differ: {url} and {me} were started with different --cluster URLs"
        ));
    }
    match topology.nodes().iter().position(|u| u == url) {
        None => return Some(format!("{url} is not in {me}'s --cluster")),
        Some(i) if i == topology.self_index() => {
            return Some(format!("{url} is this node itself"));
        }
        Some(_) => {}
    }
    if replicas as usize != shared.config.replication_factor {
        return Some(format!(
            "replication factor differs: {url} keeps {replicas} replicas, {me} keeps {} (--replication-factor)",
            shared.config.replication_factor
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
    shared: &NodeShared,
    s: &mut SyncStream<'_>,
    peer_url: &mut String,
) -> Result<(), SessionError> {
    let Some(hello) = s.recv(Instant::now() + SESSION_IDLE_TIMEOUT)? else {
        return Ok(());
    };
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
    if let Some(why) = refuse_hello(shared, version, &url, replicas, depth, fingerprint) {
        let _ = s.send(
            &wire::error_message(why.clone()),
            Instant::now() + SEND_TIMEOUT,
        );
        return Err(SessionError::Refusing(why));
    }
    let peer = shared
        .topology
        .nodes()
        .iter()
        .position(|u| *u == url)
        .ok_or_else(|| SessionError::Protocol(format!("{url} is not in --cluster")))?;
    let (tree, entries) = local::build_trees(shared, &[peer], depth)?
        .pop()
        .ok_or_else(|| SessionError::Engine("no tree built".into()))?;
    let me = shared.topology.nodes()[shared.topology.self_index()].clone();
    let mut meter = Meter::new(shared);
    let welcome = Message::Welcome {
        version: VERSION,
        url: me,
        entries,
    };
    meter.pay(s.send(&welcome, Instant::now() + SEND_TIMEOUT)?)?;
    loop {
        let Some(request) = s.recv(Instant::now() + SESSION_IDLE_TIMEOUT)? else {
            meter.settle()?;
            return Ok(());
        };
        let answer = answer(shared, &tree, peer, request)?;
        meter.pay(s.send(&answer, Instant::now() + SEND_TIMEOUT)?)?;
    }
}

/// The answer to one request after the Hello.
fn answer(
    shared: &NodeShared,
    tree: &Tree,
    peer: usize,
    request: Message,
) -> Result<Message, SessionError> {
    let depth = tree.depth();
    match request {
        Message::TreeNodes { level, indexes } => {
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
            local::digest_page(shared, peer, depth, &buckets, after.as_deref(), entries_max)
        }
        Message::Fetch { keys } => local::read_versions(shared, keys),
        Message::Push { items } => {
            let n = items.len();
            let (applied, refused) = local::apply(shared, items)?;
            if !refused.is_empty() {
                return Err(SessionError::Protocol(local::refusal_text(&refused)));
            }
            shared
                .antientropy
                .metrics
                .keys_received
                .fetch_add(applied, Ordering::Relaxed);
            debug_assert_eq!(applied as usize, n);
            Ok(Message::PushAck { applied: n as u32 })
        }
        other => Err(SessionError::Protocol(format!(
            "unexpected {} in a session",
            kind_name(&other)
        ))),
    }
}
