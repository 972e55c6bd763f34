//! One sync session this node starts with one peer, as the initiator.
//!
//! 1. Connect (through `--peer-via` when given), upgrade with
//!    `Upgrade: ataman-sync/1`, send Hello; the peer builds its tree and
//!    answers Welcome.
//! 2. Walk the two trees level by level from the root, asking only for the
//!    children of nodes that differ: the differing leaves (buckets).
//! 3. Page through the peer's digest of those buckets; for each page's key
//!    range, scan the same range here, merge the two digests
//!    ([`super::reconcile::Merge`]), fetch what the peer has newer and
//!    push what this node has newer, in bounded batches.
//!
//! Every wait has a deadline measured in silence (`stream::Timing`: the
//! peer sends `KeepAlive`s while it works, and so does this side while it
//! scans its side of a page's range, in chunks bounded like a page), every
//! batch is bounded by the wire limits, scanned and sent bytes go through
//! the node's token bucket, and the stop flag is checked between batches.

use super::Node;
use super::local::{self, Meter, Scope, unexpected};
use super::merkle::{Tree, bucket_of};
use super::reconcile::{Merge, Step};
use super::status::PeerReport;
use super::stream::{IO_SLICE, SEND_TIMEOUT, SessionError, SyncStream};
use super::wire::{
    self, BATCH_BYTES_MAX, DIGEST_ENTRIES_MAX, FETCH_KEYS_MAX, Message, PUSH_ITEMS_MAX,
    TREE_NODES_PER_REQUEST_MAX, VERSION, bitmap_has, bitmap_of,
};
use crate::cluster::dial_address;
use crate::peer::auth_dialer::{Dialer, Step as Handshake, fresh_nonce};
use crate::peer::frame::Stamped;
use crate::peer::handshake::SYNC_PROTOCOL;
use crate::tls::blocking::BlockingStream;
use crate::version_order::Tag;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Connecting to a peer that takes longer fails the session.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The upgrade's 101 (written by the peer's network thread) within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Tries of a session whose peer answered 503 (its sync server busy).
pub const BUSY_TRIES_MAX: u32 = 5;
/// Wait before the second try after a 503; doubles each time.
const BUSY_BACKOFF_MIN: Duration = Duration::from_millis(200);
/// Bytes of a 101 read per call.
const HANDSHAKE_CHUNK_BYTES: usize = 4096;

/// A version this node had before a fetch replaced it (what its tree leaf holds).
pub type Kept = Tag;

/// Told of every fetched version this node applied: the key, the version it
/// had before (if any) and the new one. The round keeps the trees of the
/// peers it has yet to sync with current with it.
pub type OnFetched<'a> = &'a mut dyn FnMut(&[u8], Option<Kept>, Kept);

/// Syncs with node `peer` against this node's `tree` of the keys they
/// share. Never fails: the report carries the error, if any.
pub fn sync_with(
    node: &Node<'_>,
    peer: usize,
    tree: &Tree,
    on_fetched: OnFetched<'_>,
) -> PeerReport {
    let mut report = PeerReport {
        url: node.topology.nodes()[peer].clone(),
        ..PeerReport::default()
    };
    let mut backoff = BUSY_BACKOFF_MIN;
    for attempt in 1..=BUSY_TRIES_MAX {
        match session(node, peer, tree, &mut report, &mut *on_fetched) {
            Ok(()) => return report,
            Err(SessionError::Busy(_)) if attempt < BUSY_TRIES_MAX => {
                if sleep_unless_stopped(node, backoff) {
                    report.error = Some(SessionError::Stopped.to_string());
                    return report;
                }
                backoff *= 2;
            }
            Err(e) => {
                report.error = Some(e.to_string());
                return report;
            }
        }
    }
    report.error = Some("the peer's anti-entropy server stayed busy".into());
    report
}

/// Sleeps `d` in slices; true when the node started stopping.
pub(super) fn sleep_unless_stopped(node: &Node<'_>, d: Duration) -> bool {
    let until = Instant::now() + d;
    while !node.stopping() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(IO_SLICE));
    }
    true
}

/// Connects to `peer` and upgrades to the sync protocol: the socket and
/// the bytes that came after the 101.
fn connect(node: &Node<'_>, peer: usize) -> Result<(BlockingStream, Vec<u8>), SessionError> {
    let url = &node.topology.nodes()[peer];
    connect_url(node, url, Some(node.topology.dial(peer)))
}

/// Connects to the node at `url` (through `via` when given) and upgrades
/// to the sync protocol (transition sessions name their peer by URL).
pub(super) fn connect_url(
    node: &Node<'_>,
    url: &str,
    via: Option<String>,
) -> Result<(BlockingStream, Vec<u8>), SessionError> {
    let me = &node.topology.nodes()[node.topology.self_index()];
    let host = dial_address(url);
    let dial = via.unwrap_or_else(|| host.clone());
    let addr = dial
        .to_socket_addrs()
        .map_err(|e| SessionError::Io(format!("cannot resolve {dial}: {e}")))?
        .next()
        .ok_or_else(|| SessionError::Io(format!("{dial} resolves to nothing")))?;
    let sock = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| SessionError::Io(format!("cannot connect to {dial}: {e}")))?;
    let io = |e: std::io::Error| SessionError::Io(format!("upgrade with {dial} failed: {e}"));
    sock.set_read_timeout(Some(IO_SLICE)).map_err(io)?;
    sock.set_write_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(io)?;
    let _ = sock.set_nodelay(true);
    let mut stream = match node.tls.and_then(|t| t.client()) {
        None => BlockingStream::Plain(sock),
        Some(config) => {
            let host_only = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
            let name = crate::tls::load::server_name(host_only)
                .map_err(|e| SessionError::Io(format!("TLS with {dial}: {e}")))?;
            BlockingStream::connect_tls(sock, config, name, HANDSHAKE_TIMEOUT)
                .map_err(|e| SessionError::Io(format!("TLS handshake with {dial} failed: {e}")))?
        }
    };
    // The secret's challenge and response run inside the TLS stream.
    let mut dialer = Dialer::new(SYNC_PROTOCOL, &host, me, node.secret.cloned());
    stream
        .write_all(&dialer.first_request())
        .and_then(|()| stream.flush())
        .map_err(io)?;
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let mut buf = Vec::new();
    let mut chunk = [0u8; HANDSHAKE_CHUNK_BYTES];
    loop {
        match dialer.on_answer(&buf, &mut fresh_nonce) {
            Ok(Handshake::Up { consumed }) => {
                buf.drain(..consumed);
                return Ok((stream, buf));
            }
            Ok(Handshake::Send { consumed, request }) => {
                buf.drain(..consumed);
                stream
                    .write_all(&request)
                    .and_then(|()| stream.flush())
                    .map_err(io)?;
                continue;
            }
            Ok(Handshake::NeedMore) => {}
            Err(e) if e.starts_with("peer answered 503") => return Err(SessionError::Busy(e)),
            Err(e) => return Err(SessionError::Protocol(e)),
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(SessionError::Io(format!(
                    "{dial} closed the connection before the 101"
                )));
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if node.stopping() {
                    return Err(SessionError::Stopped);
                }
                if Instant::now() >= deadline {
                    return Err(SessionError::TimedOut);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
}

/// Sends `request` and returns its answer, waiting at most `silence`
/// without a byte from the peer.
pub(super) fn ask_within(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    request: &Message,
    silence: Duration,
) -> Result<Message, SessionError> {
    let sent = s.send(request, Instant::now() + SEND_TIMEOUT)?;
    local::pay_sent(node, s, sent)?;
    s.recv(silence)?
        .ok_or_else(|| SessionError::Io("the peer closed the session".into()))
}

/// Sends `request` and returns its answer (silence timeout: `Timing::silence`).
pub(super) fn ask(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    request: &Message,
) -> Result<Message, SessionError> {
    ask_within(node, s, request, node.antientropy.timing.silence)
}

fn session(
    node: &Node<'_>,
    peer: usize,
    tree: &Tree,
    report: &mut PeerReport,
    on_fetched: OnFetched<'_>,
) -> Result<(), SessionError> {
    let ae = &node.antientropy;
    let (stream, leftover) = connect(node, peer)?;
    let stop = || node.stopping();
    let mut s = SyncStream::new(stream, leftover, &stop, &ae.metrics, ae.timing.keep_alive)
        .map_err(|e| SessionError::Io(e.to_string()))?;
    let result = run_session(node, peer, tree, &mut s, report, on_fetched);
    report.bytes_sent = s.bytes_sent;
    report.bytes_received = s.bytes_received;
    result
}

fn run_session(
    node: &Node<'_>,
    peer: usize,
    tree: &Tree,
    s: &mut SyncStream<'_>,
    report: &mut PeerReport,
    on_fetched: OnFetched<'_>,
) -> Result<(), SessionError> {
    let ae = &node.antientropy;
    let hello = Message::Hello {
        version: VERSION,
        url: node.topology.nodes()[node.topology.self_index()].clone(),
        replicas: node.topology.replication_factor() as u32,
        depth: tree.depth(),
        fingerprint: wire::layout_fingerprint(node.topology.nodes(), node.topology.version()),
    };
    // The Welcome may wait for the peer's server to finish the session it
    // serves (nothing is said meanwhile), then for its tree (KeepAlives).
    let welcome = match ask_within(node, s, &hello, ae.timing.welcome) {
        Err(SessionError::TimedOut) => {
            return Err(SessionError::Io(format!(
                "no Welcome within {} ms of silence (the peer's anti-entropy server may be \
                 busy with other sessions)",
                ae.timing.welcome.as_millis()
            )));
        }
        answer => answer?,
    };
    // The node that answered must be the peer this session is for (a
    // wrong --peer-via, a reused address) and speak this version.
    let expected = &node.topology.nodes()[peer];
    match welcome {
        Message::Welcome { version, url, .. } if version == VERSION && url == *expected => {}
        Message::Welcome { version, url, .. } => {
            return Err(SessionError::Protocol(format!(
                "the Welcome came from {url} (sync protocol version {version}), \
                 expected {expected} (version {VERSION}): check --peer-via and --cluster"
            )));
        }
        other => return Err(unexpected(&other, "Welcome")),
    }
    let differing = walk(node, s, tree)?;
    ae.metrics
        .buckets_compared
        .fetch_add(1 << tree.depth(), Ordering::Relaxed);
    ae.metrics
        .buckets_differing
        .fetch_add(differing.len() as u64, Ordering::Relaxed);
    ae.metrics
        .round_buckets_differing
        .store(differing.len() as u64, Ordering::Relaxed);
    ae.metrics.round_keys_done.store(0, Ordering::Relaxed);
    report.buckets_differing = differing.len() as u64;
    if !differing.is_empty() {
        let mut batches = Batches {
            on_fetched,
            fetch: Vec::new(),
            fetch_bytes: 0,
            push: Vec::new(),
            push_bytes: 0,
            refused: local::Refusals::default(),
        };
        let depth = tree.depth();
        exchange(node, peer, depth, &differing, s, report, &mut batches)?;
    }
    Ok(())
}

/// The differing leaves, found by comparing the peer's tree level by
/// level, descending only below nodes that differ.
pub(super) fn walk(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    tree: &Tree,
) -> Result<Vec<u32>, SessionError> {
    let depth = tree.depth();
    let mut differing = Vec::new();
    let mut frontier = vec![0u32];
    for level in 0..=depth {
        let mut next = Vec::new();
        for chunk in frontier.chunks(TREE_NODES_PER_REQUEST_MAX) {
            let request = Message::TreeNodes {
                level,
                indexes: chunk.to_vec(),
            };
            let hashes = match ask(node, s, &request)? {
                Message::Hashes { hashes } if hashes.len() == chunk.len() => hashes,
                Message::Hashes { hashes } => {
                    return Err(SessionError::Protocol(format!(
                        "{} hashes for {} tree nodes",
                        hashes.len(),
                        chunk.len()
                    )));
                }
                other => return Err(unexpected(&other, "Hashes")),
            };
            for (&index, hash) in chunk.iter().zip(hashes) {
                if tree.node(level, index) == hash {
                    continue;
                }
                if level == depth {
                    differing.push(index);
                } else {
                    next.push(2 * index);
                    next.push(2 * index + 1);
                }
            }
        }
        frontier = next;
        if frontier.is_empty() {
            break;
        }
    }
    Ok(differing)
}

/// Fetches and pushes waiting to be sent, each kept under the wire bounds.
struct Batches<'a> {
    on_fetched: OnFetched<'a>,
    fetch: Vec<Vec<u8>>,
    fetch_bytes: usize,
    push: Vec<(Vec<u8>, Stamped)>,
    push_bytes: usize,
    refused: local::Refusals,
}

/// Pages through the peer's digest of the `differing` buckets, reconciles
/// each page's key range with the same range here, and exchanges versions.
#[allow(clippy::too_many_arguments)]
fn exchange(
    node: &Node<'_>,
    peer: usize,
    depth: u32,
    differing: &[u32],
    s: &mut SyncStream<'_>,
    report: &mut PeerReport,
    batches: &mut Batches<'_>,
) -> Result<(), SessionError> {
    let scope = Scope::new(node);
    let bitmap = bitmap_of(depth, differing);
    let mut after: Option<Vec<u8>> = None;
    loop {
        let request = Message::Digest {
            buckets: bitmap.clone(),
            after: after.clone(),
            entries_max: DIGEST_ENTRIES_MAX as u32,
        };
        let (entries, next) = match ask(node, s, &request)? {
            Message::DigestPage { entries, next } => (entries, next),
            other => return Err(unexpected(&other, "DigestPage")),
        };
        check_page(&entries, after.as_deref(), next.as_deref(), &bitmap, depth)?;
        // This node's side of the same range, (after, next] or to the end,
        // in chunks bounded like a page (the range may hold far more keys
        // here than the peer's page): each chunk is merged with the
        // peer's entries up to the chunk's end. A local scan error ends
        // the session before anything is exchanged for its chunk.
        let mut remote = entries.into_iter().peekable();
        let mut cursor = after.clone();
        loop {
            let (local_entries, cut) = {
                let mut scan_meter = Meter::alive(node, &mut *s);
                local::page(
                    node,
                    cursor.as_deref(),
                    next.as_deref(),
                    DIGEST_ENTRIES_MAX,
                    &mut scan_meter,
                    |key| {
                        bitmap_has(&bitmap, bucket_of(key, depth)) && scope.shared_with(key, peer)
                    },
                )?
            };
            let mut remote_chunk = Vec::new();
            while let Some(e) = remote.next_if(|e| cut.as_ref().is_none_or(|c| e.key <= *c)) {
                remote_chunk.push((e.key, e.tag));
            }
            let local_digest = local_entries.into_iter().map(|e| (e.key, e.tag));
            let mut merge = Merge::new(local_digest, remote_chunk.into_iter());
            while let Some(step) = merge.next() {
                if merge.take_conflict() {
                    report_conflict(node, peer, &step, report);
                }
                exchange_step(node, step, s, batches, report)?;
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
    flush_fetch(node, s, batches, report)?;
    flush_push(node, s, batches, report)?;
    report.keys_refused = batches.refused.count;
    if batches.refused.count > 0 {
        return Err(SessionError::Engine(format!(
            "the session completed, but {}",
            batches.refused.text()
        )));
    }
    Ok(())
}

/// Conflicts a session logs one line each; past them it counts only (a
/// bug that reused many timestamps must not flood the log), and the
/// round's report and `ataman_antientropy_conflicts_total` carry the total.
pub const CONFLICT_LOGS_PER_SESSION_MAX: u64 = 16;

/// Counts and logs a conflict: this node and `peer` hold the step's key
/// under one timestamp with different versions. The step carries the tie
/// rule's winner to the side that lost, so both converge. The log names
/// the key by its hash, never the key or the value.
fn report_conflict(node: &Node<'_>, peer: usize, step: &Step, report: &mut PeerReport) {
    report.conflicts += 1;
    node.antientropy
        .metrics
        .conflicts
        .fetch_add(1, Ordering::Relaxed);
    if report.conflicts > CONFLICT_LOGS_PER_SESSION_MAX {
        return;
    }
    let (key, winner) = match step {
        Step::Fetch(key) => (key, "the peer's (fetched)"),
        Step::Push(key) => (key, "this node's (pushed)"),
    };
    tracing::error!(
        key_hash = %format_args!("{:016x}", xxhash_rust::xxh3::xxh3_64(key)),
        node = %node.placement.get().self_url(),
        peer = %node.topology.nodes()[peer],
        kept = winner,
        "anti-entropy: two replicas hold different versions of a key under one timestamp; \
         the tie rule's winner is kept on both"
    );
}

/// Queues one reconcile step, sending a batch when it is full.
fn exchange_step(
    node: &Node<'_>,
    step: Step,
    s: &mut SyncStream<'_>,
    batches: &mut Batches<'_>,
    report: &mut PeerReport,
) -> Result<(), SessionError> {
    match step {
        Step::Fetch(key) => {
            batches.fetch_bytes += key.len();
            batches.fetch.push(key);
            if batches.fetch.len() >= FETCH_KEYS_MAX || batches.fetch_bytes >= BATCH_BYTES_MAX {
                flush_fetch(node, s, batches, report)?;
            }
        }
        Step::Push(key) => {
            // The newest version now (it may be newer than the scan's).
            let Some(version) = local::read_version(node, &key)? else {
                return Ok(());
            };
            let size = local::version_bytes(&key, &version);
            if !batches.push.is_empty() && batches.push_bytes + size > BATCH_BYTES_MAX {
                flush_push(node, s, batches, report)?;
            }
            batches.push_bytes += size;
            batches.push.push((key, version));
            if batches.push.len() >= PUSH_ITEMS_MAX {
                flush_push(node, s, batches, report)?;
            }
        }
    }
    Ok(())
}

/// A page must be in key order, inside `(after, next]`, in wanted buckets,
/// and move forward: anything else would make the merge skip or repeat keys.
pub(super) fn check_page(
    entries: &[wire::DigestEntry],
    after: Option<&[u8]>,
    next: Option<&[u8]>,
    bitmap: &[u8],
    depth: u32,
) -> Result<(), SessionError> {
    let bad = |why: &str| Err(SessionError::Protocol(format!("digest page {why}")));
    if let (Some(a), Some(n)) = (after, next)
        && n <= a
    {
        return bad("does not move past its resume key");
    }
    let mut previous = after;
    for e in entries {
        if previous.is_some_and(|p| e.key.as_slice() <= p) {
            return bad("out of key order or before its resume key");
        }
        if !bitmap_has(bitmap, bucket_of(&e.key, depth)) {
            return bad("holds a key of a bucket not asked for");
        }
        previous = Some(&e.key);
    }
    if let (Some(last), Some(n)) = (entries.last(), next)
        && last.key.as_slice() > n
    {
        return bad("holds a key past its resume key");
    }
    Ok(())
}

/// Fetches the batched keys (in as many round trips as the peer's answer
/// bound needs) and applies their versions durably.
fn flush_fetch(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    batches: &mut Batches<'_>,
    report: &mut PeerReport,
) -> Result<(), SessionError> {
    let ae = &node.antientropy;
    while !batches.fetch.is_empty() {
        if node.stopping() {
            return Err(SessionError::Stopped);
        }
        let request = Message::Fetch {
            keys: batches.fetch.clone(),
        };
        let items = match ask(node, s, &request)? {
            Message::Versions { items } => items,
            other => return Err(unexpected(&other, "Versions")),
        };
        if items.is_empty() || items.len() > batches.fetch.len() {
            return Err(SessionError::Protocol(format!(
                "{} versions for {} keys",
                items.len(),
                batches.fetch.len()
            )));
        }
        let answered = items.len();
        let mut found = Vec::with_capacity(answered);
        for ((key, version), asked) in items.into_iter().zip(&batches.fetch) {
            if key != *asked {
                return Err(SessionError::Protocol(
                    "a Versions answer out of the order of the keys asked for".into(),
                ));
            }
            if let Some(v) = version {
                found.push((key, v));
            }
        }
        // What this node had, to keep the round's other trees current.
        let mut replaced = Vec::with_capacity(found.len());
        // Only what wins over the version held (the one tie rule,
        // crate::version_order) is applied: the peer's version may have
        // changed since its digest, or lost to a write here meanwhile.
        let mut winners = Vec::with_capacity(found.len());
        for (key, version) in found {
            let kept = local::read_version(node, &key)?;
            if kept.as_ref().is_none_or(|k| version.newer_than(k)) {
                let kept = kept.map(|k| Tag::of(k.as_version()));
                replaced.push((key.clone(), kept, Tag::of(version.as_version())));
                winners.push((key, version));
            }
        }
        let (applied, refused) = local::apply(node, winners)?;
        for (key, kept, new) in replaced {
            if !refused.iter().any(|(k, _)| *k == key) {
                (batches.on_fetched)(&key, kept, new);
            }
        }
        batches.refused.add(&refused);
        ae.metrics
            .keys_refused
            .fetch_add(refused.len() as u64, Ordering::Relaxed);
        report.keys_fetched += applied;
        ae.metrics
            .keys_fetched
            .fetch_add(applied, Ordering::Relaxed);
        ae.metrics
            .round_keys_done
            .fetch_add(applied, Ordering::Relaxed);
        let removed: usize = batches.fetch.drain(..answered).map(|k| k.len()).sum();
        batches.fetch_bytes -= removed;
    }
    batches.fetch_bytes = 0;
    Ok(())
}

/// Pushes the batched versions; the peer acknowledges once they are durable.
fn flush_push(
    node: &Node<'_>,
    s: &mut SyncStream<'_>,
    batches: &mut Batches<'_>,
    report: &mut PeerReport,
) -> Result<(), SessionError> {
    if batches.push.is_empty() {
        return Ok(());
    }
    if node.stopping() {
        return Err(SessionError::Stopped);
    }
    let items = std::mem::take(&mut batches.push);
    batches.push_bytes = 0;
    let n = items.len();
    let (applied, refused) = match ask(node, s, &Message::Push { items })? {
        Message::PushAck {
            applied,
            refused,
            first_refusal,
        } if applied as usize + refused as usize == n => {
            let why = format!("the peer refused: {first_refusal}");
            batches.refused.add_count(u64::from(refused), &why);
            (u64::from(applied), u64::from(refused))
        }
        Message::PushAck {
            applied, refused, ..
        } => {
            return Err(SessionError::Protocol(format!(
                "{applied} applied and {refused} refused of {n} pushed versions"
            )));
        }
        other => return Err(unexpected(&other, "PushAck")),
    };
    report.keys_pushed += applied;
    let ae = &node.antientropy;
    ae.metrics.keys_pushed.fetch_add(applied, Ordering::Relaxed);
    ae.metrics
        .keys_refused
        .fetch_add(refused, Ordering::Relaxed);
    ae.metrics
        .round_keys_done
        .fetch_add(applied, Ordering::Relaxed);
    Ok(())
}
