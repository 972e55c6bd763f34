//! What happened in a run: every operation, every fault, every process
//! that died on its own, the replicas' copies at the end, as one JSON
//! object per line (the `--history FILE.jsonl`).
//!
//! Times are microseconds since the run started ([`Recorder::now_us`]),
//! written as `start_ms`/`end_ms` with three decimals. The checker
//! (`checker.rs`) is a pure function of a [`History`], so a history file
//! can be re-checked, and hand-built histories test the checker.
//!
//! Line kinds (the `type` field):
//!
//! | type | fields |
//! | --- | --- |
//! | `meta` | `seed`, `nodes`, `urls`, `ack_w`, `ack_r`, `from`, `clients`, `duration_s`, `faults`, `workloads`, `planted_bug`, `start_unix_ms` (the harness's clock at the start, for the expiry rules), `tombstone_grace_ms` (the nodes' grace: a collected tombstone reads as nothing) |
//! | `op` | `client`, `phase` (`run`/`final`), `workload`, `op` (`put`/`get`/`delete`), `key`, `value` (written, or read: null for 404 or no answer), `node`, `ack`, `from`, `start_ms`, `end_ms`, `outcome` (`ok`/`fail`/`maybe`/`hang`), `status` (null without an answer), `error` (the error body or the I/O error, null on success), `version` (the answer's `X-Ataman-Version`, null without one), `ttl_ms` (an expiring put's, else null) |
//! | `fault` | `kind`, `targets` (node indices), `start_ms`, `end_ms`, `detail`, `clock_offset_ms` (a clock jump's offset, else null) |
//! | `crash` | `node`, `at_ms`, `status`: a node that exited without the harness stopping it, or not cleanly when it did |
//! | `copy` | `key`, `node`, `at_ms`, `state` (`absent`/`value`/`tombstone`/`error`), `ts`, `value`, `error`: a replica's own copy at the end |
//! | `convergence` | `converged`, `time_ms`, `readings` (of every copy, until they agreed), `repair` (each node's repair round at that moment) |
//! | `node_id` | `node`, `id`: slot `node` held node id `id` in a layout the harness read (at the start and after each membership step; a slot that leaves and joins again may hold several) |
//! | `cas` | `client`, `final`, `key`, `call` (`read`/`swap`/`setnx`/`incr`/`getdel`), `arg` (the value a swap or setnx writes), `node`, `start_ms`, `end_ms`, `reply` (`bulk`/`nil`/`simple`/`int`/`error`/`unsent`/`noreply`), `text` (the reply's text, the error, or why there was none): an operation of the `cas` workload (`cas/mod.rs`) |

use super::cas::CasOp;
use super::faults::FaultKind;
use serde_json::{Value, json};
use std::io::{self, BufRead, Write};
// Locked ignoring poisoning: a panicked client leaves a consistent list.
use ataman_testkit::lock::lock;
use std::sync::Mutex;
use std::time::Instant;

/// What a client asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `PUT /v0/entity`.
    Put,
    /// `GET /v0/entity`.
    Get,
    /// `DELETE /v0/entity`.
    Delete,
}

impl OpKind {
    /// The name in the history.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Put => "put",
            OpKind::Get => "get",
            OpKind::Delete => "delete",
        }
    }

    fn parse(s: &str) -> Option<OpKind> {
        [OpKind::Put, OpKind::Get, OpKind::Delete]
            .into_iter()
            .find(|k| k.name() == s)
    }

    /// True for a put or a delete.
    pub fn is_write(self) -> bool {
        self != OpKind::Get
    }
}

/// How an operation ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpOutcome {
    /// A 2xx (for a read 200 or 404): done.
    Ok,
    /// Certainly not applied (no connection), or a read without an answer.
    Fail,
    /// A write without a success answer (5xx, connection lost): it may or
    /// may not have been applied, now or later.
    Maybe,
    /// No answer within the request timeout (a write: maybe applied).
    Hang,
}

impl OpOutcome {
    /// The name in the history.
    pub fn name(self) -> &'static str {
        match self {
            OpOutcome::Ok => "ok",
            OpOutcome::Fail => "fail",
            OpOutcome::Maybe => "maybe",
            OpOutcome::Hang => "hang",
        }
    }

    fn parse(s: &str) -> Option<OpOutcome> {
        [
            OpOutcome::Ok,
            OpOutcome::Fail,
            OpOutcome::Maybe,
            OpOutcome::Hang,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }

    /// True when a write with this outcome may have been applied.
    pub fn may_be_applied(self) -> bool {
        self != OpOutcome::Fail
    }
}

/// Which workload an operation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// A few keys, puts and gets.
    Register,
    /// Unique keys, put once, all read at the end.
    Set,
    /// A few keys, puts, deletes and gets.
    Deletes,
    /// Atomic read-modify-writes over RESP through the consensus register
    /// (`cas/mod.rs`); not among [`Workload::ALL`], the default mix.
    Cas,
}

impl Workload {
    /// The default mix: every workload over HTTP.
    pub const ALL: [Workload; 3] = [Workload::Register, Workload::Set, Workload::Deletes];
    /// Every workload by name.
    pub const NAMED: [Workload; 4] = [
        Workload::Register,
        Workload::Set,
        Workload::Deletes,
        Workload::Cas,
    ];

    /// The name on the command line and in the history.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Register => "register",
            Workload::Set => "set",
            Workload::Deletes => "deletes",
            Workload::Cas => "cas",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Workload> {
        Workload::NAMED.into_iter().find(|w| w.name() == s)
    }
}

/// When an operation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// During the workload and its faults.
    Run,
    /// The final reads, after every fault healed and replicas converged.
    Final,
}

/// One client operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// The client (a thread); final reads use the client numbers after the workload's.
    pub client: u32,
    /// Run or final read.
    pub phase: Phase,
    /// The workload the key belongs to.
    pub workload: Workload,
    /// Put, get or delete.
    pub kind: OpKind,
    /// The key.
    pub key: String,
    /// A put's value; a get's answer (None for 404 or no answer).
    pub value: Option<String>,
    /// The node the request went to.
    pub node: usize,
    /// The request's `ack`.
    pub ack: u32,
    /// The request's `from`.
    pub from: u32,
    /// When the client started it (µs since the run started).
    pub start_us: u64,
    /// When the client had its answer or gave up.
    pub end_us: u64,
    /// How it ended.
    pub outcome: OpOutcome,
    /// The HTTP status, if an answer came.
    pub status: Option<u16>,
    /// The error body, or the I/O error, when it did not succeed.
    pub error: Option<String>,
    /// The version the answer named (`X-Ataman-Version`): a write's stamp,
    /// a read's version (a 404's tombstone or expired value); `None`
    /// without one (no answer, an absent key, an older history).
    pub version: Option<u64>,
    /// A put's `ttl_ms` (an expiring write), else `None`.
    pub ttl_ms: Option<u64>,
}

/// One injected fault, from injection to heal.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultEvent {
    /// What kind.
    pub kind: FaultKind,
    /// The nodes it hit (for a link fault: both ends).
    pub targets: Vec<usize>,
    /// Injected at.
    pub start_us: u64,
    /// Healed at (the node back and ready, for a restart).
    pub end_us: u64,
    /// Parameters and what healing took.
    pub detail: String,
    /// A clock jump's offset, ms.
    pub clock_offset_ms: Option<i64>,
}

/// A node that exited on its own, or not cleanly when stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Crash {
    /// The node.
    pub node: usize,
    /// When it was seen.
    pub at_us: u64,
    /// Its exit status, as text.
    pub status: String,
}

/// A replica's own copy of a key, read over the peer protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyState {
    /// No version at all.
    Absent,
    /// A value written at `ts`.
    Value {
        /// The version's timestamp.
        ts: u64,
        /// The value.
        value: String,
    },
    /// A tombstone written at `ts`.
    Tombstone {
        /// The version's timestamp.
        ts: u64,
    },
    /// The replica did not answer.
    Error(String),
}

/// One key's copy on one replica.
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    /// The key.
    pub key: String,
    /// The replica.
    pub node: usize,
    /// When it was read.
    pub at_us: u64,
    /// What it holds.
    pub state: CopyState,
}

/// How the replicas came together after the faults healed.
#[derive(Debug, Clone, PartialEq)]
pub struct Convergence {
    /// Every replica of every key held the same version within the bound.
    pub converged: bool,
    /// From the heal to the first reading where all agreed (or to giving up).
    pub time_ms: u64,
    /// Readings of every copy until they agreed (or the bound).
    pub readings: u32,
    /// How repair was triggered, or why it could not be.
    pub repair: String,
    /// Tombstones the nodes' compactions dropped during the run
    /// (`collected.rs`; 0 in histories written before it was counted).
    pub collected_tombstones: u64,
    /// Expired values dropped, likewise.
    pub collected_expired: u64,
}

/// The run's parameters, the first line of a history.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Meta {
    /// The seed.
    pub seed: u64,
    /// Nodes.
    pub nodes: usize,
    /// Every node's URL (placement is computed from them).
    pub urls: Vec<String>,
    /// `ack` of writes.
    pub ack_w: u32,
    /// `ack` of reads.
    pub ack_r: u32,
    /// `from` of every request.
    pub from: u32,
    /// Client threads.
    pub clients: u32,
    /// Workload and fault duration.
    pub duration_s: u64,
    /// Fault kinds enabled.
    pub faults: Vec<String>,
    /// Workloads enabled.
    pub workloads: Vec<String>,
    /// `--planted-bug`, if any.
    pub planted_bug: Option<String>,
    /// The harness's wall clock when the run started, Unix ms (0: not
    /// known; the expiry rules are then skipped).
    pub start_unix_ms: u64,
    /// The nodes' tombstone grace, ms (0: not known; a read naming no
    /// version is then never excused by an unacknowledged delete).
    pub tombstone_grace_ms: u64,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct History {
    /// Parameters.
    pub meta: Meta,
    /// Every operation, in no particular order.
    pub ops: Vec<Op>,
    /// Every fault.
    pub faults: Vec<FaultEvent>,
    /// Nodes that died on their own.
    pub crashes: Vec<Crash>,
    /// The replicas' copies at the end.
    pub copies: Vec<Copy>,
    /// How convergence went (None if it was not checked).
    pub convergence: Option<Convergence>,
    /// `(slot, node id)`: every node id each slot held in a layout the
    /// harness read, sorted, without duplicates (empty: not known).
    pub node_ids: Vec<(usize, u64)>,
    /// The `cas` workload's operations, in no particular order.
    pub cas: Vec<CasOp>,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn us(v: &Value) -> Option<u64> {
    let ms = v.as_f64()?;
    (ms >= 0.0).then(|| (ms * 1000.0).round() as u64)
}

impl Op {
    fn to_json(&self) -> Value {
        json!({
            "type": "op",
            "client": self.client,
            "phase": match self.phase { Phase::Run => "run", Phase::Final => "final" },
            "workload": self.workload.name(),
            "op": self.kind.name(),
            "key": self.key,
            "value": self.value,
            "node": self.node,
            "ack": self.ack,
            "from": self.from,
            "start_ms": ms(self.start_us),
            "end_ms": ms(self.end_us),
            "outcome": self.outcome.name(),
            "status": self.status,
            "error": self.error,
            "version": self.version,
            "ttl_ms": self.ttl_ms,
        })
    }

    fn from_json(v: &Value) -> Option<Op> {
        Some(Op {
            client: u32::try_from(v["client"].as_u64()?).ok()?,
            phase: match v["phase"].as_str()? {
                "run" => Phase::Run,
                "final" => Phase::Final,
                _ => return None,
            },
            workload: Workload::parse(v["workload"].as_str()?)?,
            kind: OpKind::parse(v["op"].as_str()?)?,
            key: v["key"].as_str()?.to_owned(),
            value: v["value"].as_str().map(str::to_owned),
            node: usize::try_from(v["node"].as_u64()?).ok()?,
            ack: u32::try_from(v["ack"].as_u64()?).ok()?,
            from: u32::try_from(v["from"].as_u64()?).ok()?,
            start_us: us(&v["start_ms"])?,
            end_us: us(&v["end_ms"])?,
            outcome: OpOutcome::parse(v["outcome"].as_str()?)?,
            status: v["status"].as_u64().and_then(|s| u16::try_from(s).ok()),
            error: v["error"].as_str().map(str::to_owned),
            version: v["version"].as_u64(),
            ttl_ms: v["ttl_ms"].as_u64(),
        })
    }
}

impl History {
    /// Writes the history, one JSON object per line.
    pub fn write_jsonl(&self, out: &mut impl Write) -> io::Result<()> {
        let m = &self.meta;
        let meta = json!({
            "type": "meta", "seed": m.seed, "nodes": m.nodes, "urls": m.urls,
            "ack_w": m.ack_w, "ack_r": m.ack_r, "from": m.from, "clients": m.clients,
            "duration_s": m.duration_s, "faults": m.faults, "workloads": m.workloads,
            "planted_bug": m.planted_bug, "start_unix_ms": m.start_unix_ms,
            "tombstone_grace_ms": m.tombstone_grace_ms,
        });
        writeln!(out, "{meta}")?;
        for f in &self.faults {
            let line = json!({
                "type": "fault", "kind": f.kind.name(), "targets": f.targets,
                "start_ms": ms(f.start_us), "end_ms": ms(f.end_us), "detail": f.detail,
                "clock_offset_ms": f.clock_offset_ms,
            });
            writeln!(out, "{line}")?;
        }
        for op in &self.ops {
            writeln!(out, "{}", op.to_json())?;
        }
        for c in &self.crashes {
            let line =
                json!({"type": "crash", "node": c.node, "at_ms": ms(c.at_us), "status": c.status});
            writeln!(out, "{line}")?;
        }
        for c in &self.copies {
            let (state, ts, value, error) = match &c.state {
                CopyState::Absent => ("absent", None, None, None),
                CopyState::Value { ts, value } => ("value", Some(*ts), Some(value.as_str()), None),
                CopyState::Tombstone { ts } => ("tombstone", Some(*ts), None, None),
                CopyState::Error(e) => ("error", None, None, Some(e.as_str())),
            };
            let line = json!({
                "type": "copy", "key": c.key, "node": c.node, "at_ms": ms(c.at_us),
                "state": state, "ts": ts, "value": value, "error": error,
            });
            writeln!(out, "{line}")?;
        }
        if let Some(c) = &self.convergence {
            let line = json!({
                "type": "convergence", "converged": c.converged, "time_ms": c.time_ms,
                "readings": c.readings, "repair": c.repair,
                "collected_tombstones": c.collected_tombstones,
                "collected_expired": c.collected_expired,
            });
            writeln!(out, "{line}")?;
        }
        for op in &self.cas {
            writeln!(out, "{}", op.to_json())?;
        }
        for &(node, id) in &self.node_ids {
            writeln!(
                out,
                "{}",
                json!({"type": "node_id", "node": node, "id": id})
            )?;
        }
        Ok(())
    }

    /// Reads a history written by [`History::write_jsonl`]; an error names
    /// the first line that does not parse.
    pub fn read_jsonl(input: impl BufRead) -> Result<History, String> {
        let mut h = History::default();
        for (index, line) in input.lines().enumerate() {
            let line = line.map_err(|e| format!("line {}: {e}", index + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            let bad = || format!("line {}: not a history record: {line}", index + 1);
            let v: Value = serde_json::from_str(&line).map_err(|_| bad())?;
            match v["type"].as_str() {
                Some("meta") => h.meta = meta_from_json(&v).ok_or_else(bad)?,
                Some("op") => h.ops.push(Op::from_json(&v).ok_or_else(bad)?),
                Some("fault") => h.faults.push(fault_from_json(&v).ok_or_else(bad)?),
                Some("crash") => h.crashes.push(Crash {
                    node: v["node"].as_u64().ok_or_else(bad)? as usize,
                    at_us: us(&v["at_ms"]).ok_or_else(bad)?,
                    status: v["status"].as_str().ok_or_else(bad)?.to_owned(),
                }),
                Some("copy") => h.copies.push(copy_from_json(&v).ok_or_else(bad)?),
                Some("convergence") => {
                    h.convergence = Some(Convergence {
                        converged: v["converged"].as_bool().ok_or_else(bad)?,
                        time_ms: v["time_ms"].as_u64().ok_or_else(bad)?,
                        readings: v["readings"].as_u64().ok_or_else(bad)? as u32,
                        repair: v["repair"].as_str().ok_or_else(bad)?.to_owned(),
                        collected_tombstones: v["collected_tombstones"].as_u64().unwrap_or(0),
                        collected_expired: v["collected_expired"].as_u64().unwrap_or(0),
                    });
                }
                Some("cas") => h.cas.push(CasOp::from_json(&v).ok_or_else(bad)?),
                Some("node_id") => h.node_ids.push((
                    v["node"].as_u64().ok_or_else(bad)? as usize,
                    v["id"].as_u64().ok_or_else(bad)?,
                )),
                _ => return Err(bad()),
            }
        }
        h.node_ids.sort_unstable();
        h.node_ids.dedup();
        Ok(h)
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_owned))
        .collect()
}

fn meta_from_json(v: &Value) -> Option<Meta> {
    Some(Meta {
        seed: v["seed"].as_u64()?,
        nodes: v["nodes"].as_u64()? as usize,
        urls: strings(&v["urls"])?,
        ack_w: v["ack_w"].as_u64()? as u32,
        ack_r: v["ack_r"].as_u64()? as u32,
        from: v["from"].as_u64()? as u32,
        clients: v["clients"].as_u64()? as u32,
        duration_s: v["duration_s"].as_u64()?,
        faults: strings(&v["faults"])?,
        workloads: strings(&v["workloads"])?,
        planted_bug: v["planted_bug"].as_str().map(str::to_owned),
        start_unix_ms: v["start_unix_ms"].as_u64().unwrap_or(0),
        tombstone_grace_ms: v["tombstone_grace_ms"].as_u64().unwrap_or(0),
    })
}

fn fault_from_json(v: &Value) -> Option<FaultEvent> {
    Some(FaultEvent {
        kind: FaultKind::parse(v["kind"].as_str()?)?,
        targets: v["targets"]
            .as_array()?
            .iter()
            .map(|t| t.as_u64().map(|t| t as usize))
            .collect::<Option<Vec<_>>>()?,
        start_us: us(&v["start_ms"])?,
        end_us: us(&v["end_ms"])?,
        detail: v["detail"].as_str()?.to_owned(),
        clock_offset_ms: v["clock_offset_ms"].as_i64(),
    })
}

fn copy_from_json(v: &Value) -> Option<Copy> {
    let state = match v["state"].as_str()? {
        "absent" => CopyState::Absent,
        "value" => CopyState::Value {
            ts: v["ts"].as_u64()?,
            value: v["value"].as_str()?.to_owned(),
        },
        "tombstone" => CopyState::Tombstone {
            ts: v["ts"].as_u64()?,
        },
        "error" => CopyState::Error(v["error"].as_str()?.to_owned()),
        _ => return None,
    };
    Some(Copy {
        key: v["key"].as_str()?.to_owned(),
        node: v["node"].as_u64()? as usize,
        at_us: us(&v["at_ms"])?,
        state,
    })
}

/// Collects a run's history from every thread.
///
/// Thread safety: each list is behind its own mutex, held only to push.
pub struct Recorder {
    started: Instant,
    /// The wall clock at `started`, Unix ms (the expiry rules' time base).
    started_unix_ms: u64,
    ops: Mutex<Vec<Op>>,
    faults: Mutex<Vec<FaultEvent>>,
    crashes: Mutex<Vec<Crash>>,
    node_ids: Mutex<Vec<(usize, u64)>>,
    cas: Mutex<Vec<CasOp>>,
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Recorder {
        Recorder {
            started: Instant::now(),
            started_unix_ms: ataman_node::hlc::wall_ms(),
            ops: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            crashes: Mutex::new(Vec::new()),
            node_ids: Mutex::new(Vec::new()),
            cas: Mutex::new(Vec::new()),
        }
    }

    /// Microseconds since the run started.
    pub fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    /// Records an operation.
    pub fn op(&self, op: Op) {
        lock(&self.ops).push(op);
    }

    /// Records a `cas` operation.
    pub fn cas(&self, op: CasOp) {
        lock(&self.cas).push(op);
    }

    /// Calls `f` with the `cas` operations recorded so far (under the lock).
    pub fn with_cas<R>(&self, f: impl FnOnce(&[CasOp]) -> R) -> R {
        f(&lock(&self.cas))
    }

    /// Records a fault.
    pub fn fault(&self, fault: FaultEvent) {
        lock(&self.faults).push(fault);
    }

    /// Records a node that died on its own.
    pub fn crash(&self, crash: Crash) {
        lock(&self.crashes).push(crash);
    }

    /// Records that slot `node` holds node id `id` (a layout read).
    pub fn node_id(&self, node: usize, id: u64) {
        let mut ids = lock(&self.node_ids);
        if !ids.contains(&(node, id)) {
            ids.push((node, id));
        }
    }

    /// Operations recorded so far.
    pub fn op_count(&self) -> usize {
        lock(&self.ops).len()
    }

    /// Calls `f` with the operations recorded so far (under the lock:
    /// clients recording meanwhile wait).
    pub fn with_ops<R>(&self, f: impl FnOnce(&[Op]) -> R) -> R {
        f(&lock(&self.ops))
    }

    /// Everything recorded, as a history with `meta`.
    pub fn finish(&self, meta: Meta) -> History {
        History {
            meta: Meta {
                start_unix_ms: self.started_unix_ms,
                ..meta
            },
            ops: std::mem::take(&mut *lock(&self.ops)),
            faults: std::mem::take(&mut *lock(&self.faults)),
            crashes: std::mem::take(&mut *lock(&self.crashes)),
            copies: Vec::new(),
            convergence: None,
            node_ids: {
                let mut ids = std::mem::take(&mut *lock(&self.node_ids));
                ids.sort_unstable();
                ids
            },
            cas: std::mem::take(&mut *lock(&self.cas)),
        }
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record kind survives a write and a read, to the microsecond.
    #[test]
    fn jsonl_round_trip() {
        let h = History {
            meta: Meta {
                seed: 7,
                nodes: 3,
                urls: vec!["http://127.0.0.1:1".into()],
                ack_w: 2,
                ack_r: 2,
                from: 3,
                clients: 4,
                duration_s: 10,
                faults: vec!["kill".into()],
                workloads: vec!["set".into()],
                planted_bug: None,
                start_unix_ms: 1_700_000_000_000,
                tombstone_grace_ms: 12_000,
            },
            ops: vec![Op {
                client: 1,
                phase: Phase::Final,
                workload: Workload::Deletes,
                kind: OpKind::Get,
                key: "d1".into(),
                value: None,
                node: 2,
                ack: 3,
                from: 3,
                start_us: 1_234_567,
                end_us: 1_240_001,
                outcome: OpOutcome::Maybe,
                status: Some(504),
                error: Some("not enough replicas: x".into()),
                version: Some(u64::MAX >> 3),
                ttl_ms: Some(1_500),
            }],
            faults: vec![FaultEvent {
                kind: FaultKind::Partition,
                targets: vec![0, 2],
                start_us: 5,
                end_us: 900_000,
                detail: "[0] | [1, 2]".into(),
                clock_offset_ms: Some(-30_000),
            }],
            crashes: vec![Crash {
                node: 1,
                at_us: 17,
                status: "exit status: 101".into(),
            }],
            copies: vec![
                Copy {
                    key: "k".into(),
                    node: 0,
                    at_us: 3,
                    state: CopyState::Value {
                        ts: u64::MAX >> 1,
                        value: "v".into(),
                    },
                },
                Copy {
                    key: "k".into(),
                    node: 1,
                    at_us: 3,
                    state: CopyState::Tombstone { ts: 9 },
                },
                Copy {
                    key: "k".into(),
                    node: 2,
                    at_us: 3,
                    state: CopyState::Absent,
                },
                Copy {
                    key: "k".into(),
                    node: 3,
                    at_us: 3,
                    state: CopyState::Error("refused".into()),
                },
            ],
            convergence: Some(Convergence {
                converged: true,
                time_ms: 1500,
                readings: 2,
                repair: "POST /v0/repair".into(),
                collected_tombstones: 4,
                collected_expired: 2,
            }),
            node_ids: vec![(0, 0), (3, 3), (3, 5)],
            cas: vec![
                CasOp {
                    client: 2,
                    last: false,
                    key: "cas-m0".into(),
                    call: super::super::cas::CasCall::Swap("17".into()),
                    node: 1,
                    start_us: 10,
                    end_us: 2_001,
                    reply: super::super::cas::CasReply::Nil,
                },
                CasOp {
                    client: 4,
                    last: true,
                    key: "cas-n3".into(),
                    call: super::super::cas::CasCall::Incr,
                    node: 0,
                    start_us: 7,
                    end_us: 9,
                    reply: super::super::cas::CasReply::NoReply("timed out".into()),
                },
            ],
        };
        let mut bytes = Vec::new();
        h.write_jsonl(&mut bytes).unwrap();
        let back = History::read_jsonl(bytes.as_slice()).unwrap();
        assert_eq!(back, h);
        let err = History::read_jsonl(&b"{\"type\":\"op\"}\n"[..]).unwrap_err();
        assert!(err.contains("line 1"), "{err}");
    }
}
