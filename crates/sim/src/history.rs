//! The record of one run: every client operation with its answer, and
//! everything that happened to the nodes (crashes, what each restart found,
//! every write a replica acknowledged, faults), then the nodes' final
//! states. The checker (`check`) judges this record alone.
//!
//! The record is deterministic: the same seed and configuration give the
//! same record, byte for byte of its `Debug` form, which
//! [`History::digest`] hashes.

use crate::config::CrashKind;
use crate::node::{Reopened, State};
use ataman_node::peer::frame::Stamped;
use std::fmt::Write as _;

/// Index of an operation in [`History::ops`].
pub type OpId = usize;

/// What a client asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    /// PUT this value.
    Put(Vec<u8>),
    /// DELETE.
    Delete,
    /// GET.
    Get,
}

/// What a client was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// Not answered yet.
    Pending,
    /// A write's 201 / 202: `ack` replicas made it durable.
    Written,
    /// A read's 200 / 404: the version the coordinator chose (with its timestamp).
    Read(Option<Stamped>),
    /// 504: not enough replicas in time; a write may still have been applied.
    Failed(String),
    /// The coordinator was down: nothing was applied.
    Refused,
    /// The coordinator crashed before answering; a write may have been applied.
    Unknown,
}

/// One client operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Its index.
    pub id: OpId,
    /// The client that issued it.
    pub client: usize,
    /// The node it was sent to.
    pub coordinator: usize,
    /// The key.
    pub key: Vec<u8>,
    /// What was asked.
    pub kind: OpKind,
    /// Replicas that must answer.
    pub ack: usize,
    /// Replicas asked.
    pub from: usize,
    /// The timestamp the coordinator stamped a write with (the last one,
    /// when it re-stamped the write).
    pub ts: Option<u64>,
    /// Earlier stamps of a re-stamped write, oldest first: replicas may
    /// hold the write under any of them until a newer one replaces it.
    pub earlier_ts: Vec<u64>,
    /// An expiring PUT's absolute deadline (Unix ms), stamped once by the
    /// coordinator from its own clock (`ataman_node::ttl::deadline_ms`).
    pub deadline_ms: Option<u64>,
    /// The TTL the client asked of an expiring PUT (`ttl_ms`): what the
    /// checker holds the deadline to, whatever the coordinator stamped.
    pub ttl_ms: Option<u64>,
    /// When it was sent, virtual ms.
    pub invoked_ms: u64,
    /// When it was answered, virtual ms.
    pub completed_ms: Option<u64>,
    /// The answer.
    pub result: OpResult,
}

impl Op {
    /// True for PUT and DELETE.
    pub fn is_write(&self) -> bool {
        !matches!(self.kind, OpKind::Get)
    }

    /// The version a write applies (its value `None` for a DELETE), once stamped.
    pub fn version(&self) -> Option<Stamped> {
        self.version_at(self.ts?)
    }

    /// Every version a write may have left on replicas: one per stamp.
    pub fn versions(&self) -> Vec<Stamped> {
        self.earlier_ts
            .iter()
            .chain(self.ts.iter())
            .filter_map(|&ts| self.version_at(ts))
            .collect()
    }

    fn version_at(&self, ts: u64) -> Option<Stamped> {
        match &self.kind {
            OpKind::Put(v) => Some(Stamped {
                deadline_ms: self.deadline_ms,
                ..Stamped::value(ts, v.clone())
            }),
            OpKind::Delete => Some(Stamped::tombstone(ts)),
            OpKind::Get => None,
        }
    }
}

/// Something that happened to a node or the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happening {
    /// Node `node` crashed.
    Crash {
        /// When.
        at_ms: u64,
        /// Which node.
        node: usize,
        /// How.
        kind: CrashKind,
    },
    /// Node `node` started again and its engine holds `state`.
    Restart {
        /// When.
        at_ms: u64,
        /// Which node.
        node: usize,
        /// What the open found.
        reopened: Reopened,
        /// Every key's newest version right after the open.
        state: State,
    },
    /// Node `node` acknowledged a durable write of `key` at `ts` (as a
    /// replica of a request, a hint, a repair, or anti-entropy).
    ReplicaWrote {
        /// When.
        at_ms: u64,
        /// Which node.
        node: usize,
        /// The key.
        key: Vec<u8>,
        /// The version's timestamp.
        ts: u64,
    },
    /// Node `node` dropped its copy of `key` (ts `ts`): a layout cleanup
    /// of a key it no longer replicates (`sim::membership`).
    CopyDropped {
        /// When.
        at_ms: u64,
        /// Which node.
        node: usize,
        /// The key.
        key: Vec<u8>,
        /// The version dropped.
        ts: u64,
    },
    /// Another fault (partition, cut, loss, skew, disk fault, hints dropped) or its end.
    Fault {
        /// When.
        at_ms: u64,
        /// What.
        what: String,
    },
    /// The cluster did not settle (requests, messages or hints still
    /// pending) within the bound of the final phase.
    Stuck {
        /// When.
        at_ms: u64,
        /// What was still pending.
        what: String,
    },
}

/// The record of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Replicas of every key (`from` of every request).
    pub replicas: usize,
    /// Placement seeds of the final layout's members, a prefix of the
    /// nodes (`placement::seeds`): where the checker expects each key.
    pub seeds: Vec<u64>,
    /// The largest distance, ms, of any node's wall clock from the virtual
    /// clock during the run (0 without clock-skew faults): the skew bound
    /// the expiry checks allow.
    pub skew_ms_max: u64,
    /// The nodes collect tombstones and expired versions during the run
    /// (`crate::collection`): a dead version may end up absent, which a
    /// client cannot tell from the dead version itself (both read 404).
    pub collects: bool,
    /// Virtual time, ms, when the final states were read.
    pub final_ms: u64,
    /// Client operations, by id.
    pub ops: Vec<Op>,
    /// Node and network happenings, in time order.
    pub happenings: Vec<Happening>,
    /// Every node's state after the final phase.
    pub final_states: Vec<State>,
}

/// A `fmt::Write` that feeds an xxh3 hasher, so a digest needs no big string.
struct DigestWriter(xxhash_rust::xxh3::Xxh3);

impl std::fmt::Write for DigestWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

impl History {
    /// Hash of the whole record (its `Debug` form): equal for equal runs.
    pub fn digest(&self) -> u64 {
        let mut w = DigestWriter(xxhash_rust::xxh3::Xxh3::new());
        // Writing to the hasher cannot fail.
        let _ = write!(w, "{self:?}");
        w.0.digest()
    }

    /// Writes acknowledged to their client.
    pub fn acknowledged_writes(&self) -> impl Iterator<Item = &Op> {
        self.ops
            .iter()
            .filter(|o| o.is_write() && o.result == OpResult::Written)
    }
}
