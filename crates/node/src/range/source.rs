//! The streams a cluster range merges: this node's engine, and peers'
//! internal range streams read over blocking sockets (on a range thread,
//! never on a network thread), and the choice of which nodes to open.

use super::coverage::{read_set, sources_needed};
use super::feed::Ranges;
use super::merge::{Live, Merge, MergeError, Version, key_after};
use super::wire::{ChunkReader, WireError};
use crate::cluster::live::LivePlacement;
use crate::config::NodeConfig;
use crate::peer::link::{LinkState, PeerStatus};
use crate::refill::Refill;
use ataman_engine::Db;
use std::io::BufRead;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Read-buffer bytes per peer source (with one version being decoded, the
/// memory a source holds).
pub const SOURCE_BUFFER_BYTES: usize = 64 * 1024;
/// A peer silent this long in the middle of its stream fails the range.
pub const PEER_SILENCE_MAX: Duration = Duration::from_secs(30);
/// Longest response head accepted from a peer.
const HEAD_BYTES_MAX: usize = 16 * 1024;

/// One stream's failure.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// This node's engine failed.
    #[error("local scan: {0}")]
    Local(String),
    /// A peer's stream failed.
    #[error("{node}: {error}")]
    Peer {
        /// The peer's URL.
        node: String,
        /// What failed.
        error: WireError,
    },
}

/// A stream of one node's versions, in key order.
pub type Source = Box<dyn Iterator<Item = Result<Version, SourceError>> + Send>;

/// The merge of a cluster range's sources.
pub type ClusterMerge = Merge<Source>;

/// What a cluster range uses of the node (the view its range thread
/// takes of the node's shared state, which this module does not name).
#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// The engine.
    pub db: &'a Db,
    /// The live placement.
    pub placement: &'a LivePlacement,
    /// Each node's link status (index: node).
    pub peers: &'a [PeerStatus],
    /// Configuration (the replication timeout, key and value limits).
    pub config: &'a NodeConfig,
    /// A refilling node streams no copies of its own.
    pub refill: &'a Refill,
    /// The bound on range threads, and counters.
    pub ranges: &'a Ranges,
    /// TLS: peers are dialled with its client configuration.
    pub tls: Option<&'a crate::tls::NodeTls>,
    /// The cluster secret proved to a peer that asks for it.
    pub secret: Option<&'a crate::auth::secret::ClusterSecret>,
}

/// A cluster range's bounds and quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// First key (inclusive).
    pub start: Vec<u8>,
    /// End key (exclusive), if any.
    pub end: Option<Vec<u8>>,
    /// Replicas of each key that must be covered.
    pub ack: u32,
    /// Replicas of each key.
    pub from: u32,
}

/// Too few nodes could be opened (504 before the first byte).
#[derive(Debug, thiserror::Error)]
#[error(
    "cluster range needs {needed} of {nodes} nodes (ack={ack}, from={from}); {opened} answered: {reasons}"
)]
pub struct NotEnoughNodes {
    needed: usize,
    nodes: usize,
    ack: u32,
    from: u32,
    opened: usize,
    reasons: String,
}

/// Opens the sources of `plan`: this node (unless refilling) and peers,
/// those whose links are up first, until
/// [`sources_needed`] are open; then the merge of them. Blocks (a range
/// thread's work): each peer that does not answer costs up to the
/// replication timeout.
pub fn open(shared: &Node<'_>, plan: &Plan) -> Result<ClusterMerge, NotEnoughNodes> {
    let placement = shared.placement.get();
    let mut candidates = read_set(&placement);
    let me = placement.self_index();
    // This node first, then peers seen up, then the rest (a stable sort).
    candidates.sort_by_key(|&n| match shared.peers.get(n).map(|p| p.state()) {
        _ if n == me => 0,
        Some(LinkState::Up) => 1,
        _ => 2,
    });
    let needed = sources_needed(candidates.len(), plan.ack as usize, plan.from as usize);
    let mut sources: Vec<Source> = Vec::with_capacity(needed);
    let mut reasons = Vec::new();
    for node in candidates {
        if sources.len() == needed {
            break;
        }
        let opened = if node == me {
            open_local(shared, plan)
        } else {
            let url = placement.url(node);
            open_peer(url, plan, shared).map_err(|e| format!("{url}: {e}"))
        };
        match opened {
            Ok(source) => sources.push(source),
            Err(reason) => reasons.push(reason),
        }
    }
    if sources.len() < needed {
        return Err(NotEnoughNodes {
            needed,
            nodes: placement.read_members().len(),
            ack: plan.ack,
            from: plan.from,
            opened: sources.len(),
            reasons: reasons.join("; "),
        });
    }
    Ok(Merge::new(sources))
}

/// Why a page of a cluster iteration failed.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Too few nodes answered.
    #[error(transparent)]
    NotEnoughNodes(#[from] NotEnoughNodes),
    /// A source failed mid-page.
    #[error("{0}")]
    Source(#[from] MergeError<SourceError>),
}

/// One page of a cluster-wide iteration (what a `SCAN` step needs): up to
/// `count` live keys from `plan.start`, and the start of the next page
/// (`None`: the range is done). The cursor is a key; each page opens its
/// sources at it, so nothing is held between pages. Blocks.
pub fn page(
    node: &Node<'_>,
    plan: &Plan,
    count: usize,
) -> Result<(Vec<Live>, Option<Vec<u8>>), PageError> {
    let page = open(node, plan)?.next_page(count)?;
    let next = match page.last() {
        Some(last) if page.len() == count => Some(key_after(&last.key)),
        _ => None,
    };
    Ok((page, next))
}

/// This node's versions (tombstones included).
fn open_local(shared: &Node<'_>, plan: &Plan) -> Result<Source, String> {
    if shared.refill.active() {
        return Err("this node is refilling".into());
    }
    let iter = shared
        .db
        .scan(&plan.start, plan.end.as_deref(), true)
        .map_err(|e| format!("local scan: {e}"))?;
    Ok(Box::new(iter.map(|item| {
        item.map(|(key, entry)| Version {
            key,
            ts: entry.ts,
            expiring: entry.deadline_ms.is_some(),
            value: entry.value,
        })
        .map_err(|e| SourceError::Local(e.to_string()))
    })))
}

/// Percent-encodes `bytes` for a query value (every byte but unreserved ones).
fn percent_encode(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

/// The request line and headers of a peer's internal range stream.
pub fn internal_request(host: &str, plan: &Plan) -> String {
    internal_request_with(host, plan, None, false)
}

/// [`internal_request`] with a peer's `Authorization` value, if any
/// (`challenged`: [`super::peer_auth::internal_get`]).
pub fn internal_request_with(
    host: &str,
    plan: &Plan,
    authorization: Option<&str>,
    challenged: bool,
) -> String {
    let mut target = String::from("/v0/internal/range?start=");
    percent_encode(&mut target, &plan.start);
    if let Some(end) = &plan.end {
        target.push_str("&end=");
        percent_encode(&mut target, end);
    }
    super::peer_auth::internal_get(host, &target, authorization, challenged)
}

/// Connects to the peer at `url` (over TLS with `--tls-ca`, proving the
/// cluster secret when asked: [`super::peer_auth`]), asks for its versions
/// of the range and reads the response head; a peer that does not answer
/// 200 in the replication timeout is not opened.
fn open_peer(url: &str, plan: &Plan, shared: &Node<'_>) -> Result<Source, String> {
    let timeout = shared.config.replication_timeout;
    let host = crate::cluster::dial_address(url);
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("resolve: {e}"))?
        .next()
        .ok_or("no address")?;
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    let set = |s: &TcpStream| -> std::io::Result<()> {
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)
    };
    set(&stream).map_err(|e| format!("socket: {e}"))?;
    let tls = shared.tls.and_then(|t| t.client());
    let challenged = shared.secret.is_some();
    let request =
        |authorization: Option<&str>| internal_request_with(&host, plan, authorization, challenged);
    let timed_out = |e: String| {
        if e.contains("timed out") || e.contains("would block") || e.contains("temporarily") {
            format!("no answer within the replication timeout ({timeout:?}): {e}")
        } else {
            e
        }
    };
    let (reader, head) = super::peer_auth::open(
        stream,
        &host,
        timeout,
        tls,
        shared.secret,
        super::peer_auth::RANGE_PROTOCOL,
        &request,
    )
    .map_err(timed_out)?;
    read_head(&mut &head[..]).map_err(|e| e.to_string())?;
    let sock = match reader.get_ref() {
        crate::tls::blocking::BlockingStream::Plain(s) => s,
        crate::tls::blocking::BlockingStream::Tls(t) => &t.1,
    };
    sock.set_read_timeout(Some(PEER_SILENCE_MAX))
        .map_err(|e| format!("socket: {e}"))?;
    // A chunk is one version: a key, a value, and the fixed fields.
    let chunk_max = (shared.config.key_bytes_max + shared.config.value_bytes_max + 64) as u64;
    let node = url.to_owned();
    Ok(Box::new(ChunkReader::new(reader, chunk_max).map(
        move |item| {
            item.map_err(|error| SourceError::Peer {
                node: node.clone(),
                error,
            })
        },
    )))
}

/// Why a peer's response head is not a stream's.
#[derive(Debug, thiserror::Error)]
enum HeadError {
    /// The socket failed or timed out.
    #[error("response head: {0}")]
    Io(std::io::Error),
    /// Anything else.
    #[error("{0}")]
    Refused(String),
}

/// Reads a response head: `200` with a chunked body, or the reason why not.
fn read_head<R: BufRead>(reader: &mut R) -> Result<(), HeadError> {
    let mut head = Vec::new();
    let mut limited = std::io::Read::take(reader, HEAD_BYTES_MAX as u64);
    loop {
        let before = head.len();
        let n = limited
            .read_until(b'\n', &mut head)
            .map_err(HeadError::Io)?;
        if n == 0 {
            return Err(HeadError::Refused("response head cut or too long".into()));
        }
        let line = &head[before..];
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.lines();
    let status = lines.next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 200") {
        return Err(HeadError::Refused(format!("answered {}", status.trim())));
    }
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Err(HeadError::Refused("answer not chunked".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_encodes_keys() {
        let plan = Plan {
            start: b"a b/%".to_vec(),
            end: Some(vec![0, 255]),
            ack: 1,
            from: 1,
        };
        assert_eq!(
            internal_request("h:1", &plan),
            "GET /v0/internal/range?start=a%20b%2F%25&end=%00%FF HTTP/1.1\r\nHost: h:1\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn heads() {
        let ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nrest";
        assert!(read_head(&mut &ok[..]).is_ok());
        let busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
        assert!(read_head(&mut &busy[..]).is_err());
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(read_head(&mut &plain[..]).is_err());
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Enc";
        assert!(read_head(&mut &cut[..]).is_err());
    }
}
