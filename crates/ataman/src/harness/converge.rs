//! Convergence after the faults healed: trigger anti-entropy on every
//! node, then read every key's own copy on each of its replicas, until all
//! replicas of every key hold the same version or the bound passes.
//!
//! - Repair: `POST /v0/repair` on every node (202 `{"round":N}`), then
//!   `GET /v0/repair` until the node is `idle` with `last.round >= N`
//!   (docs/API.md). A node that does not know the endpoint (400/404/405)
//!   has no anti-entropy: the harness then only waits for hints.
//! - Copies: the peer protocol's `Read` (`ataman_node::peer::frame`) gives a
//!   replica's own newest version of a key (timestamp and value or
//!   tombstone), without coordination or read repair, so reading the copies
//!   changes nothing. Reads are pipelined, [`READ_BATCH`] per write.
//!
//! Convergence is the copies agreeing; the loop reads them every
//! [`ROUND_PAUSE`] while the repair rounds run, up to the caller's bound.
//! The history's `readings` counts them.

use super::cluster::ClusterView;
use super::history::{Convergence, Copy, CopyState, Recorder};
use ataman_node::auth::secret::ClusterSecret;
use ataman_node::peer::auth_dialer::{Dialer, Step, fresh_nonce};
use ataman_node::peer::frame::{self, Message};
use ataman_node::peer::handshake::PEER_PROTOCOL;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::client::request_once;

/// Reads sent before waiting for their answers.
pub const READ_BATCH: usize = 512;
/// Bound on one peer connection's reads and writes.
pub const PEER_IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two readings of the copies.
pub const ROUND_PAUSE: Duration = Duration::from_millis(500);
/// How often a node's repair state is asked.
pub const REPAIR_POLL: Duration = Duration::from_millis(100);
/// The URL the harness names itself with in the peer handshake.
const HARNESS_PEER_URL: &str = "http://127.0.0.1:1";

/// One key and the nodes holding its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyReplicas {
    /// The key.
    pub key: String,
    /// Its replicas (node indices).
    pub replicas: Vec<usize>,
}

/// Reads node `addr`'s own copies of `keys` over the peer protocol
/// (over TLS with `--tls-ca`), proving `secret` in the upgrade when the
/// nodes have one.
pub fn read_copies(
    addr: SocketAddr,
    keys: &[&str],
    secret: Option<&ClusterSecret>,
) -> Result<Vec<CopyState>, String> {
    // The fence serves a peer that names the node's layout version only.
    let version = layout_version(addr)?;
    let sock = TcpStream::connect_timeout(&addr, PEER_IO_TIMEOUT)
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    sock.set_read_timeout(Some(PEER_IO_TIMEOUT))
        .and_then(|()| sock.set_write_timeout(Some(PEER_IO_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let url = crate::http_client::url::BaseUrl {
        host: addr.ip().to_string(),
        port: addr.port(),
        https: crate::http_client::tls::enabled(),
    };
    let mut stream = crate::http_client::exchange::secure(&url, sock, PEER_IO_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let host = addr.to_string();
    let mut dialer =
        Dialer::new(PEER_PROTOCOL, &host, HARNESS_PEER_URL, secret.cloned()).with_layout(version);
    stream
        .write_all(&dialer.first_request())
        .and_then(|()| stream.flush())
        .map_err(|e| format!("upgrade request to {addr}: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    // Bounded: each read waits at most PEER_IO_TIMEOUT, and the head at
    // most UPGRADE_RESPONSE_BYTES_MAX (then the dialer errs), twice at most.
    loop {
        let n = stream
            .read(&mut chunk)
            .map_err(|e| format!("upgrade answer from {addr}: {e}"))?;
        if n == 0 {
            return Err(format!("{addr} closed before the upgrade answer"));
        }
        buf.extend_from_slice(&chunk[..n]);
        match dialer.on_answer(&buf, &mut fresh_nonce)? {
            Step::NeedMore => {}
            Step::Send { consumed, request } => {
                buf.drain(..consumed);
                stream
                    .write_all(&request)
                    .map_err(|e| format!("proof to {addr}: {e}"))?;
            }
            Step::Up { consumed } => {
                buf.drain(..consumed);
                break;
            }
        }
    }
    let mut copies = Vec::with_capacity(keys.len());
    for (batch_index, batch) in keys.chunks(READ_BATCH).enumerate() {
        let first_id = (batch_index * READ_BATCH) as u64;
        let mut out = Vec::new();
        for (i, key) in batch.iter().enumerate() {
            frame::encode(
                &Message::Read {
                    id: first_id + i as u64,
                    key: key.as_bytes().to_vec(),
                },
                &mut out,
            );
        }
        stream
            .write_all(&out)
            .and_then(|()| stream.flush())
            .map_err(|e| format!("reads to {addr}: {e}"))?;
        let mut answers: Vec<Option<CopyState>> = vec![None; batch.len()];
        let mut missing = batch.len();
        while missing > 0 {
            let decoded = frame::decode(&buf).map_err(|e| format!("{addr}: {e}"))?;
            let Some((msg, used)) = decoded else {
                let n = stream
                    .read(&mut chunk)
                    .map_err(|e| format!("answers from {addr}: {e}"))?;
                if n == 0 {
                    return Err(format!("{addr} closed with {missing} reads unanswered"));
                }
                buf.extend_from_slice(&chunk[..n]);
                continue;
            };
            buf.drain(..used);
            let Message::ReadReply { id, result } = msg else {
                return Err(format!("{addr} answered a read with {msg:?}"));
            };
            let Some(slot) = id
                .checked_sub(first_id)
                .and_then(|i| answers.get_mut(i as usize))
            else {
                return Err(format!("{addr} answered unknown read {id}"));
            };
            let state = match result {
                Ok(None) => CopyState::Absent,
                Ok(Some(v)) => match v.value {
                    Some(value) => CopyState::Value {
                        ts: v.ts,
                        value: String::from_utf8_lossy(&value).into_owned(),
                    },
                    None => CopyState::Tombstone { ts: v.ts },
                },
                Err(e) => CopyState::Error(e.message),
            };
            if slot.replace(state).is_none() {
                missing -= 1;
            }
        }
        copies.extend(answers.into_iter().flatten());
    }
    Ok(copies)
}

/// Starts a repair round on the node at `addr`: `Some(round)`, or `None`
/// when the node has no repair endpoint.
pub fn start_repair(addr: SocketAddr, timeout: Duration) -> Result<Option<u64>, String> {
    let (status, body) = request_once(addr, "POST", "/v0/repair", timeout)?;
    match status {
        202 => {
            let v: Value = serde_json::from_slice(&body)
                .map_err(|e| format!("POST /v0/repair on {addr}: not JSON: {e}"))?;
            v["round"]
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("POST /v0/repair on {addr}: no round in {v}"))
        }
        400 | 404 | 405 => Ok(None),
        other => Err(format!(
            "POST /v0/repair on {addr}: {other} {}",
            String::from_utf8_lossy(&body).trim_end()
        )),
    }
}

/// The layout version the node at `addr` reports (`GET /v0/cluster`).
fn layout_version(addr: SocketAddr) -> Result<u64, String> {
    let (status, body) = request_once(addr, "GET", "/v0/cluster", PEER_IO_TIMEOUT)?;
    if status != 200 {
        return Err(format!("GET /v0/cluster on {addr}: {status}"));
    }
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("GET /v0/cluster on {addr}: not JSON: {e}"))?;
    v["layout_version"]
        .as_u64()
        .ok_or_else(|| format!("GET /v0/cluster on {addr}: no layout_version in {v}"))
}

/// Whether the node at `addr` finished round `round` (idle, `last.round >=
/// round`), with the round's outcome when it did.
pub fn repair_done(
    addr: SocketAddr,
    round: u64,
    timeout: Duration,
) -> Result<Option<Value>, String> {
    let (status, body) = request_once(addr, "GET", "/v0/repair", timeout)?;
    if status != 200 {
        return Err(format!("GET /v0/repair on {addr}: {status}"));
    }
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("GET /v0/repair on {addr}: not JSON: {e}"))?;
    let idle = v["state"].as_str() == Some("idle");
    let last = &v["last"];
    let done = idle && last["round"].as_u64().is_some_and(|r| r >= round);
    Ok(done.then(|| last.clone()))
}

/// Reads every copy of every key; one entry per (key, replica).
fn snapshot(view: &ClusterView, keys: &[KeyReplicas], recorder: &Recorder) -> Vec<Copy> {
    let mut copies = Vec::new();
    for node in 0..view.len() {
        let mine: Vec<&KeyReplicas> = keys.iter().filter(|k| k.replicas.contains(&node)).collect();
        if mine.is_empty() {
            continue;
        }
        let names: Vec<&str> = mine.iter().map(|k| k.key.as_str()).collect();
        let at_us = recorder.now_us();
        let states = read_copies(view.addr(node), &names, view.peer_secret())
            .unwrap_or_else(|e| vec![CopyState::Error(e); names.len()]);
        for (k, state) in mine.iter().zip(states) {
            copies.push(Copy {
                key: k.key.clone(),
                node,
                at_us,
                state,
            });
        }
    }
    copies.sort_by(|a, b| (a.key.as_str(), a.node).cmp(&(b.key.as_str(), b.node)));
    copies
}

/// Keys whose copies disagree (or could not be read).
pub fn divergent(copies: &[Copy]) -> usize {
    let mut count = 0;
    for group in copies.chunk_by(|a, b| a.key == b.key) {
        let first = &group[0].state;
        if group
            .iter()
            .any(|c| matches!(c.state, CopyState::Error(_)) || c.state != *first)
        {
            count += 1;
        }
    }
    count
}

/// What the harness knows of one node's repair round.
enum RoundState {
    /// The node has no repair endpoint.
    Unsupported,
    /// Asked for; not finished.
    Running { round: u64 },
    /// Finished (the round's `last` object).
    Finished { round: u64, last: Value },
    /// The node did not answer the repair requests.
    Error(String),
}

/// Triggers repair on every node of `nodes` (the members), then reads every copy every
/// [`ROUND_PAUSE`] until all replicas of every key agree or `bound` passes
/// (counted from `healed`, when the last fault was healed). A round that
/// finished without success is asked again (it may have started before
/// the heal); convergence is the copies agreeing, whether or not every
/// round finished by then (the report says which did).
pub fn converge(
    view: &ClusterView,
    nodes: &[usize],
    keys: &[KeyReplicas],
    recorder: &Recorder,
    healed: Instant,
    bound: Duration,
) -> (Convergence, Vec<Copy>) {
    let deadline = healed + bound;
    let timeout = Duration::from_secs(5);
    let start = |node: usize| match start_repair(view.addr(node), timeout) {
        Ok(Some(round)) => RoundState::Running { round },
        Ok(None) => RoundState::Unsupported,
        Err(e) => RoundState::Error(e),
    };
    // Slots that are not members have no round (Unsupported: not named).
    let mut states: Vec<RoundState> = (0..view.len())
        .map(|i| {
            if nodes.contains(&i) {
                start(i)
            } else {
                RoundState::Unsupported
            }
        })
        .collect();
    let mut readings = 0u32;
    // Bounded by the deadline: each iteration reads the copies once and
    // pauses ROUND_PAUSE (at most until the deadline).
    loop {
        readings += 1;
        for (node, state) in states.iter_mut().enumerate() {
            let RoundState::Running { round } = *state else {
                continue;
            };
            match repair_done(view.addr(node), round, timeout) {
                Ok(Some(last)) if last["ok"].as_bool() == Some(true) => {
                    *state = RoundState::Finished { round, last };
                }
                // A round that failed (maybe one that began before the
                // heal): ask for a new one.
                Ok(Some(_)) => *state = start(node),
                Ok(None) => {}
                Err(e) => *state = RoundState::Error(e),
            }
        }
        let copies = snapshot(view, keys, recorder);
        let diverged = divergent(&copies);
        let now = Instant::now();
        if diverged == 0 || now >= deadline {
            let convergence = Convergence {
                converged: diverged == 0,
                time_ms: now.duration_since(healed).as_millis() as u64,
                readings,
                repair: describe_rounds(&states),
                collected_tombstones: 0,
                collected_expired: 0,
            };
            return (convergence, copies);
        }
        std::thread::sleep(ROUND_PAUSE.min(deadline - now));
    }
}

/// One line on every node's repair round at the end.
fn describe_rounds(states: &[RoundState]) -> String {
    if states.iter().all(|s| matches!(s, RoundState::Unsupported)) {
        return "no /v0/repair on the nodes: hints and read repair only".into();
    }
    let parts: Vec<String> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| !matches!(s, RoundState::Unsupported))
        .map(|(node, s)| match s {
            RoundState::Unsupported => format!("node {node}: no repair endpoint"),
            RoundState::Running { round } => format!("node {node}: round {round} still running"),
            RoundState::Finished { round, last } => {
                let ms = last["finished_ms"]
                    .as_u64()
                    .zip(last["started_ms"].as_u64())
                    .map_or(0, |(f, s)| f.saturating_sub(s));
                format!("node {node}: round {round} ok in {ms} ms")
            }
            RoundState::Error(e) => format!("node {node}: {e}"),
        })
        .collect();
    format!("repair: {}", parts.join("; "))
}
