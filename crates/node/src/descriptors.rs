//! The file descriptor budget: the process's limit, the descriptors the
//! node reserves for its own files and links, and the cap on client
//! connections that leaves them free.
//!
//! At start the node raises its soft `RLIMIT_NOFILE` to the hard limit
//! ([`raise_limit`]), as nginx and Redis do. Client connections are then
//! capped at `min(--connections-max, limit - reserve)` ([`Budget`]), so a
//! burst of clients can never take the descriptors the engine needs to
//! roll its WAL, flush a memtable or persist the clock's reservation. A
//! limit that leaves no client connection is refused at start.
//!
//! # The reserve
//! A sum of named constants and the configuration ([`reserve`]):
//! - the process: standard streams, every listener (HTTP, and RESP with
//!   `--resp-listen`), and per network thread its poller, its waker, a
//!   `/metrics` rendering and a name lookup;
//! - per engine (the data and the hint store): the files it keeps open and
//!   the files it may open at once for a moment;
//! - SSTables: every open table is a descriptor; the count of both engines,
//!   rounded down to [`TABLES_STEP`], plus two steps (more than a step for
//!   tables written since the count and tables a reader still holds after
//!   a compaction replaced them). The node recounts every second and lowers
//!   the cap as data grows;
//! - the node's own durable files (`CLOCK`, `LAST-SEEN`, `REFILLING`, the
//!   fault-control file), each written by one thread at a time;
//! - anti-entropy: the sessions the sync thread serves or queues, and the
//!   one a round starts;
//! - peers: per network thread and other node, one link out and one peer
//!   connection in (a peer's link to this node: peers are assumed to run
//!   as many network threads). An upgraded peer connection leaves the
//!   client count (`NodeShared::peer_connections`);
//! - the threads that dial peers for a moment, each socket with a name
//!   lookup's descriptors: the range threads (a cluster range or a `SCAN`
//!   page dials each other node), the layout workers (a change request asks
//!   every voter at once) with the plan thread and the gossip thread (every
//!   node of the layouts at once), and the copy's sources (at most so many
//!   at once, and never more than there are other nodes).
//!
//! "Other nodes" are those of the live layouts, not of `--cluster`: the
//! node recounts every second ([`Counts`] from the live placement), so the
//! reserve, and the client cap with it, follow a layout change.

use std::fmt;

/// Standard input, output and error.
pub const STANDARD_STREAMS: usize = 3;
/// Per network thread: its epoll instance and its waker's eventfd (mio).
pub const POLLER_PER_NET_THREAD: usize = 2;
/// Per network thread: a `/metrics` rendering reads `/proc/self/task` and
/// one file in it at a time.
pub const METRICS_PER_NET_THREAD: usize = 2;
/// Per thread that resolves a peer's name (network threads, the
/// anti-entropy rounds thread): the files and the socket of one lookup.
pub const RESOLVER_PER_THREAD: usize = 2;
/// Engine instances: the data and the hint store.
pub const ENGINES: usize = 2;
/// Files an engine keeps open: `LOCK`, the WAL segment, the manifest.
pub const ENGINE_FILES_HELD: usize = 3;
/// Files an engine opens for a moment, at most at once: the WAL thread's
/// directory sync after a new segment; the flush and compaction thread's
/// table being written, a new manifest written beside the old one and a
/// directory sync.
pub const ENGINE_FILES_TRANSIENT: usize = 4;
/// SSTables are reserved in steps of this many (see the module docs).
pub const TABLES_STEP: usize = 64;
/// The node's durable one-line files, each written by one thread at a
/// time: `CLOCK` (under the clock's mutex), `LAST-SEEN` (the main thread),
/// `REFILLING` (the rounds thread), the fault-control file (its thread).
pub const NODE_FILES: usize = 4;
/// Anti-entropy's outgoing session: the rounds thread runs one at a time.
pub const ANTI_ENTROPY_OUTGOING: usize = 1;
/// Per network thread and other node: the link to it and its link here.
pub const PEER_CONNECTIONS_PER_NET_THREAD: usize = 2;
/// A socket a thread dials a peer on for a moment, its duplicate (a
/// layout call's deadline watchdog holds one, `layout_io::voters_http`;
/// counted for every dialling thread, a few spare for the others), and the
/// name lookup before it.
pub const DIAL: usize = 2 + RESOLVER_PER_THREAD;

/// What the reserve is counted from: the configuration, the live layouts
/// and the bounds of the node's threads (passed in by the node, so this
/// module stays a leaf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// `--net-threads`.
    pub net_threads: usize,
    /// Listening sockets: HTTP, and RESP with `--resp-listen`.
    pub listeners: usize,
    /// Other nodes of the live layouts (every version still live).
    pub other_nodes: usize,
    /// SSTables of both engines open now.
    pub tables_open: usize,
    /// Incoming anti-entropy sessions served or queued at once
    /// (`antientropy::SYNC_SESSIONS_MAX`).
    pub sync_sessions: usize,
    /// Range threads at most (`range::feed::RANGE_THREADS_MAX`).
    pub range_threads: usize,
    /// Layout workers at most (`cluster::workers::LAYOUT_WORKERS_MAX`), the
    /// plan thread and the gossip thread: each may dial every other node
    /// at once.
    pub layout_threads: usize,
    /// Copy sources dialled at once at most
    /// (`antientropy::transfer::copy::COPY_SOURCES_AT_ONCE_MAX`).
    pub copy_sources: usize,
}

/// The descriptors the node keeps for itself, by purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    /// Standard streams, the listener, each network thread's own.
    pub process: usize,
    /// What the engines hold and open for a moment (not their tables).
    pub engines: usize,
    /// SSTables of both engines open when counted.
    pub tables_open: usize,
    /// Reserved for SSTables ([`tables_reserve`] of `tables_open`).
    pub tables: usize,
    /// `CLOCK` and the other one-line files.
    pub node_files: usize,
    /// Sync sessions served or queued, and the one a round starts.
    pub anti_entropy: usize,
    /// Links to peers and peers' links here.
    pub peers: usize,
    /// Sockets the range, layout and copy threads dial peers on.
    pub dials: usize,
}

impl Reserve {
    /// Every reserved descriptor.
    pub fn total(&self) -> usize {
        self.process
            + self.engines
            + self.tables
            + self.node_files
            + self.anti_entropy
            + self.peers
            + self.dials
    }
}

impl fmt::Display for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (process {}, engines {}, SSTables {} for {} open, node files {}, anti-entropy {}, peers {}, dials {})",
            self.total(),
            self.process,
            self.engines,
            self.tables,
            self.tables_open,
            self.node_files,
            self.anti_entropy,
            self.peers,
            self.dials
        )
    }
}

/// Descriptors reserved for `open` SSTables: rounded down to
/// [`TABLES_STEP`], plus two steps (so more than a step to spare, and the
/// reserve changes only once per step of tables).
pub fn tables_reserve(open: usize) -> usize {
    (open / TABLES_STEP).saturating_add(2) * TABLES_STEP
}

/// The reserve of a node counted from `counts`.
pub fn reserve(counts: Counts) -> Reserve {
    let Counts {
        net_threads,
        listeners,
        other_nodes,
        tables_open,
        sync_sessions,
        range_threads,
        layout_threads,
        copy_sources,
    } = counts;
    Reserve {
        process: STANDARD_STREAMS
            + listeners
            + net_threads * (POLLER_PER_NET_THREAD + METRICS_PER_NET_THREAD + RESOLVER_PER_THREAD),
        engines: ENGINES * (ENGINE_FILES_HELD + ENGINE_FILES_TRANSIENT),
        tables_open,
        tables: tables_reserve(tables_open),
        node_files: NODE_FILES,
        anti_entropy: sync_sessions + ANTI_ENTROPY_OUTGOING + RESOLVER_PER_THREAD,
        peers: net_threads * other_nodes * PEER_CONNECTIONS_PER_NET_THREAD,
        dials: (range_threads + layout_threads) * other_nodes * DIAL
            + copy_sources.min(other_nodes) * DIAL,
    }
}

/// Which bound the client connection cap comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `--connections-max`.
    ConnectionsMax,
    /// The descriptor limit less the reserve.
    Descriptors,
}

impl Bound {
    /// The `reason` label of a connection closed at the cap.
    pub fn label(self) -> &'static str {
        match self {
            Bound::ConnectionsMax => "connections_max",
            Bound::Descriptors => "descriptors",
        }
    }
}

/// The limit, the reserve, and the client connections they leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The process's descriptor limit (the soft `RLIMIT_NOFILE`).
    pub limit: usize,
    /// What the node keeps for itself.
    pub reserve: Reserve,
    /// Client connections at most: `min(connections_max, limit - reserve)`;
    /// 0 when the limit leaves none.
    pub cap: usize,
    /// Which bound `cap` is.
    pub bound: Bound,
}

impl Budget {
    /// The budget of `reserve` under `limit` with `--connections-max`
    /// `connections_max`.
    pub fn new(limit: usize, reserve: Reserve, connections_max: usize) -> Budget {
        let left = limit.saturating_sub(reserve.total());
        let (cap, bound) = if connections_max <= left {
            (connections_max, Bound::ConnectionsMax)
        } else {
            (left, Bound::Descriptors)
        };
        Budget {
            limit,
            reserve,
            cap,
            bound,
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "descriptor limit {}, reserved {}, client connections capped at {}{}",
            self.limit,
            self.reserve,
            self.cap,
            match self.bound {
                Bound::ConnectionsMax => " (--connections-max)",
                Bound::Descriptors => " (what the limit leaves)",
            }
        )
    }
}

/// The soft descriptor limit before and after [`raise_limit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit now: the hard limit, unless raising failed.
    pub now: u64,
    /// Why raising failed, if it did (the node goes on under `before`).
    pub raise_error: Option<String>,
}

impl Limit {
    /// [`Limit::now`] as a count of descriptors.
    pub fn descriptors(&self) -> usize {
        usize::try_from(self.now).unwrap_or(usize::MAX)
    }
}

fn get_limit() -> std::io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; an error only when
/// the limit cannot even be read.
pub fn raise_limit() -> std::io::Result<Limit> {
    let limit = get_limit()?;
    let before = limit.rlim_cur;
    let mut raise_error = None;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            raise_error = Some(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(Limit {
        before,
        now: get_limit()?.rlim_cur,
        raise_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    const SYNC_SESSIONS: usize = crate::antientropy::SYNC_SESSIONS_MAX;

    /// Tables are reserved in whole steps with at least one step to spare.
    #[test]
    fn tables_reserved_in_steps() {
        assert_eq!(tables_reserve(0), 2 * TABLES_STEP);
        assert_eq!(tables_reserve(TABLES_STEP - 1), 2 * TABLES_STEP);
        assert_eq!(tables_reserve(TABLES_STEP), 3 * TABLES_STEP);
        for open in 0..1_000 {
            let r = tables_reserve(open);
            assert!(r > open + TABLES_STEP && r <= open + 2 * TABLES_STEP);
        }
    }

    /// The counts of a node with `net_threads` threads, one listener, no
    /// tables and `other_nodes` peers, the thread bounds at small values.
    fn counts(net_threads: usize, other_nodes: usize, tables_open: usize) -> Counts {
        Counts {
            net_threads,
            listeners: 1,
            other_nodes,
            tables_open,
            sync_sessions: SYNC_SESSIONS,
            range_threads: 4,
            layout_threads: 18,
            copy_sources: 8,
        }
    }

    /// The reserve grows with network threads, listeners, peers and tables,
    /// by the named amounts; a single node reserves nothing for peers.
    #[test]
    fn reserve_follows_the_configuration() {
        let single = reserve(counts(1, 0, 0));
        assert_eq!((single.peers, single.dials), (0, 0));
        assert_eq!(
            single.process,
            STANDARD_STREAMS
                + 1
                + POLLER_PER_NET_THREAD
                + METRICS_PER_NET_THREAD
                + RESOLVER_PER_THREAD
        );
        assert_eq!(single.engines, 14);
        let resp = reserve(Counts {
            listeners: 2,
            ..counts(1, 0, 0)
        });
        assert_eq!(resp.total() - single.total(), 1, "the RESP listener");
        let cluster = reserve(counts(4, 4, 0));
        assert_eq!(cluster.peers, 4 * 4 * PEER_CONNECTIONS_PER_NET_THREAD);
        assert_eq!(
            cluster.process - single.process,
            3 * (POLLER_PER_NET_THREAD + METRICS_PER_NET_THREAD + RESOLVER_PER_THREAD)
        );
        let grown = reserve(counts(1, 0, 200));
        assert_eq!(grown.total() - single.total(), 3 * TABLES_STEP);
        assert!(single.to_string().starts_with(&single.total().to_string()));
    }

    /// Every thread that dials peers is counted per other node of the live
    /// layouts, so a layout that grows from 3 to 5 nodes grows the reserve
    /// by exactly the links and dials of two more nodes; the copy's
    /// sources are bounded by the other nodes there are.
    #[test]
    fn dials_follow_the_live_layouts() {
        let three = reserve(counts(2, 2, 0));
        let five = reserve(counts(2, 4, 0));
        assert_eq!(three.dials, (4 + 18) * 2 * DIAL + 2 * DIAL);
        assert_eq!(five.dials, (4 + 18) * 4 * DIAL + 4 * DIAL);
        assert_eq!(
            five.total() - three.total(),
            2 * (2 * PEER_CONNECTIONS_PER_NET_THREAD + (4 + 18) * DIAL + DIAL)
        );
        let many = reserve(counts(1, 20, 0));
        assert_eq!(
            many.dials,
            (4 + 18) * 20 * DIAL + 8 * DIAL,
            "copy sources capped"
        );
    }

    /// The cap is the smaller of `--connections-max` and what the limit
    /// leaves, and says which; a limit at or under the reserve leaves none.
    #[test]
    fn cap_is_the_smaller_bound() {
        let r = reserve(counts(1, 0, 0));
        let total = r.total();
        let b = Budget::new(1_048_576, r, 10_000);
        assert_eq!((b.cap, b.bound), (10_000, Bound::ConnectionsMax));
        let b = Budget::new(1024, r, 10_000);
        assert_eq!((b.cap, b.bound), (1024 - total, Bound::Descriptors));
        let b = Budget::new(total + 1, r, 10_000);
        assert_eq!(b.cap, 1);
        assert_eq!(Budget::new(total, r, 10_000).cap, 0);
        assert_eq!(Budget::new(10, r, 10_000).cap, 0);
        let b = Budget::new(total + 50, r, 50);
        assert_eq!((b.cap, b.bound), (50, Bound::ConnectionsMax));
        assert!(b.to_string().contains("capped at 50"));
    }

    /// Raising leaves the soft limit at the hard one (never lowers it).
    #[test]
    fn raise_reaches_the_hard_limit() {
        let limit = raise_limit().unwrap();
        assert_eq!(limit.raise_error, None);
        assert!(limit.now >= limit.before);
        let now = get_limit().unwrap();
        assert_eq!(now.rlim_cur, now.rlim_max);
        assert_eq!(limit.now, now.rlim_cur);
    }
}
