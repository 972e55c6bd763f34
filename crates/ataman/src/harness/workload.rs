//! The workloads: client threads issuing seeded operations to random
//! nodes, and the final reads.
//!
//! Each client is a thread with its own generator derived from the run's
//! seed and its number ([`Generator`]), so the sequence of operations
//! (workload, key, value, node) depends on the seed alone, never on what
//! the cluster answered; only their timing and outcomes differ between two
//! runs of a seed. Every value written is unique in the run
//! (`c<client>-<sequence>`), so a read's answer names the write it came from.
//!
//! | workload | keys | operations |
//! | --- | --- | --- |
//! | `register` | [`REGISTER_KEYS`] shared keys `r0`, `r1`, … | half puts, half gets |
//! | `set` | a new key per put, `s<client>-<sequence>` | puts only; every key read at the end |
//! | `deletes` | [`DELETE_KEYS`] shared keys `d0`, `d1`, …; graves `g<client>-<n>`, `x<client>-<n>` | 30% graves (`graves.rs`: keys put once then deleted, or expiring, then read); of the rest 40% put, 30% delete, 30% get: delete/recreate cycles |
//!
//! A client runs until the stop flag, the deadline, or [`OPS_PER_CLIENT_MAX`]
//! operations, paced at its rate; each request is bounded by the client
//! timeout (see `client.rs`).

use super::client::{Answer, Client};
use super::cluster::ClusterView;
use super::graves::{self, Graves};
use super::history::{Op, OpKind, OpOutcome, Phase, Recorder, Workload};
use crate::http_client::url::target;
use ataman_testkit::rng::Rng;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Keys of the register workload.
pub const REGISTER_KEYS: u64 = 5;
/// Keys of the deletes workload.
pub const DELETE_KEYS: u64 = 5;
/// Keys of the register workload written only by expiring puts
/// (`r5`..`r9`), read like the others.
pub const EXPIRING_KEYS: u64 = 5;
/// Percent of the register's puts sent with `ttl_ms`.
pub const EXPIRING_PUT_PERCENT: u64 = 20;
/// The `ttl_ms` of an expiring put, picked evenly: shorter than the time
/// a register or deletes key goes unwritten now and then (so reads land
/// after the deadline), and longer (so reads land before it).
pub const EXPIRING_TTLS_MS: [u64; 3] = [100, 400, 1_500];
/// Operations one client issues at most in a run.
pub const OPS_PER_CLIENT_MAX: u64 = 1_000_000;
/// Attempts of one final read before the key counts as unanswered.
pub const FINAL_READ_ATTEMPTS: u32 = 5;
/// Pause between two attempts of a final read.
pub const FINAL_READ_RETRY: Duration = Duration::from_millis(300);
/// The byte values are padded with up to `--value-bytes` (after the id).
pub const PADDING: u8 = b'.';

/// The bytes sent for value `id`: the id, padded to `bytes` (at least the id).
pub fn wire_value(id: &str, bytes: usize) -> Vec<u8> {
    let mut v = id.as_bytes().to_vec();
    v.resize(bytes.max(id.len()), PADDING);
    v
}

/// The id of a value read back: the bytes before the padding, when the
/// padding is exactly what [`wire_value`] adds; otherwise the whole body
/// (lossy), which names no write, so the checker flags it.
pub fn value_id(body: &[u8], bytes: usize) -> String {
    let id_len = body
        .iter()
        .position(|&b| b == PADDING)
        .unwrap_or(body.len());
    let id = String::from_utf8_lossy(&body[..id_len]).into_owned();
    if body.len() == bytes.max(id_len) && body[id_len..].iter().all(|&b| b == PADDING) {
        id
    } else {
        format!(
            "not a value of this run: {:?}",
            String::from_utf8_lossy(body)
        )
    }
}

/// One planned operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Its workload.
    pub workload: Workload,
    /// Put, get or delete.
    pub kind: OpKind,
    /// The key.
    pub key: String,
    /// The value of a put.
    pub value: Option<String>,
    /// The node it goes to.
    pub node: usize,
    /// A put's `ttl_ms` (an expiring write), else `None`.
    pub ttl_ms: Option<u64>,
}

/// A client's seeded sequence of operations.
#[derive(Debug, Clone)]
pub struct Generator {
    rng: Rng,
    client: u32,
    seq: u64,
    nodes: usize,
    workloads: Vec<Workload>,
    graves: Graves,
}

impl Generator {
    /// Client `client`'s generator in a run of `seed`.
    pub fn new(seed: u64, client: u32, nodes: usize, workloads: &[Workload]) -> Generator {
        Generator {
            rng: Rng::derive(seed, 1 + u64::from(client)),
            client,
            seq: 0,
            nodes,
            // `cas` has clients of its own (`cas/workload.rs`).
            workloads: workloads
                .iter()
                .copied()
                .filter(|w| *w != Workload::Cas)
                .collect(),
            graves: Graves::new(client),
        }
    }

    /// The next operation.
    pub fn next_op(&mut self) -> Planned {
        self.seq += 1;
        let value = format!("c{}-{}", self.client, self.seq);
        let node = self.rng.below(self.nodes as u64) as usize;
        let workload = self
            .rng
            .pick(&self.workloads)
            .copied()
            .unwrap_or(Workload::Register);
        let roll = self.rng.below(100);
        let (kind, key) = match workload {
            Workload::Register if roll < 50 => {
                (OpKind::Put, format!("r{}", self.rng.below(REGISTER_KEYS)))
            }
            // Reads cover the expiring keys too (below). (`cas` was
            // filtered out in `new`.)
            Workload::Register | Workload::Cas => {
                let key = format!("r{}", self.rng.below(REGISTER_KEYS + EXPIRING_KEYS));
                (OpKind::Get, key)
            }
            Workload::Set => (OpKind::Put, format!("s{}-{}", self.client, self.seq)),
            Workload::Deletes if roll < graves::GRAVE_PERCENT => {
                let grave = self.graves.next_op(&mut self.rng);
                return Planned {
                    workload,
                    value: (grave.kind == OpKind::Put).then_some(value),
                    kind: grave.kind,
                    key: grave.key,
                    node,
                    ttl_ms: grave.ttl_ms,
                };
            }
            Workload::Deletes => {
                let key = format!("d{}", self.rng.below(DELETE_KEYS));
                // The rest of the rolls: 40% put, 30% delete, 30% get.
                let rest = (roll - graves::GRAVE_PERCENT) * 100 / (100 - graves::GRAVE_PERCENT);
                let kind = match rest {
                    0..40 => OpKind::Put,
                    40..70 => OpKind::Delete,
                    _ => OpKind::Get,
                };
                (kind, key)
            }
        };
        // A share of the register's puts expire, on keys of their own
        // (written less often than the others, so reads land after the
        // deadline as well as before it).
        let expiring = kind == OpKind::Put
            && workload == Workload::Register
            && self.rng.below(100) < EXPIRING_PUT_PERCENT;
        let ttl_ms = expiring.then(|| EXPIRING_TTLS_MS[self.rng.below(3) as usize]);
        let key = if expiring {
            format!("r{}", REGISTER_KEYS + self.rng.below(EXPIRING_KEYS))
        } else {
            key
        };
        Planned {
            workload,
            value: (kind == OpKind::Put).then_some(value),
            kind,
            key,
            node,
            ttl_ms,
        }
    }
}

/// What every client of a run shares.
#[derive(Clone)]
pub struct ClientSpec {
    /// The run's seed.
    pub seed: u64,
    /// Workloads mixed.
    pub workloads: Vec<Workload>,
    /// `ack` of writes.
    pub ack_w: u32,
    /// `ack` of reads.
    pub ack_r: u32,
    /// `from` of every request.
    pub from: u32,
    /// Operations per second per client (0: as fast as answers come).
    pub rate_per_client: u32,
    /// Bound on one request.
    pub timeout: Duration,
    /// Bytes of every value written (the id padded; 0: the id alone).
    pub value_bytes: usize,
}

/// Sends one operation and records it.
#[allow(clippy::too_many_arguments)]
pub fn perform(
    client: &mut Client,
    view: &ClusterView,
    recorder: &Recorder,
    client_id: u32,
    phase: Phase,
    planned: &Planned,
    ack: u32,
    from: u32,
    value_bytes: usize,
) -> Answer {
    let (ack_s, from_s) = (ack.to_string(), from.to_string());
    let ttl_s = planned.ttl_ms.map(|t| t.to_string());
    let mut params = vec![
        ("id", planned.key.as_bytes()),
        ("ack", ack_s.as_bytes()),
        ("from", from_s.as_bytes()),
    ];
    if let Some(ttl) = &ttl_s {
        params.push(("ttl_ms", ttl.as_bytes()));
    }
    let path = target("/v0/entity", &params);
    let value_bytes = graves::value_bytes(&planned.key, value_bytes);
    let wire = planned
        .value
        .as_deref()
        .map(|id| wire_value(id, value_bytes));
    let (method, body) = match planned.kind {
        OpKind::Put => ("PUT", Some(wire.as_deref().unwrap_or(b""))),
        OpKind::Get => ("GET", None),
        OpKind::Delete => ("DELETE", None),
    };
    // A slot that is not a member now (a spare, a leaving node) has its
    // requests sent to a member instead (`ClusterView::route`).
    let node = view.route(planned.node);
    let start_us = recorder.now_us();
    let answer = client.send(
        node,
        view.addr(node),
        method,
        &path,
        body,
        planned.kind.is_write(),
    );
    let end_us = recorder.now_us();
    let value = match planned.kind {
        OpKind::Get => answer.body.as_ref().map(|b| value_id(b, value_bytes)),
        _ => planned.value.clone(),
    };
    recorder.op(Op {
        client: client_id,
        phase,
        workload: planned.workload,
        kind: planned.kind,
        key: planned.key.clone(),
        value,
        node,
        ack,
        from,
        start_us,
        end_us,
        outcome: answer.outcome,
        status: answer.status,
        error: answer.error.clone(),
        version: answer.version,
        ttl_ms: planned.ttl_ms,
    });
    answer
}

/// Runs client `id` until `stop` is set or `deadline` passes.
pub fn run_client(
    id: u32,
    spec: &ClientSpec,
    view: &ClusterView,
    recorder: &Recorder,
    stop: &AtomicBool,
    deadline: Instant,
) {
    let mut generator = Generator::new(spec.seed, id, view.len(), &spec.workloads);
    let mut client = Client::new(view.len(), spec.timeout);
    let interval = if spec.rate_per_client == 0 {
        Duration::ZERO
    } else {
        Duration::from_secs(1) / spec.rate_per_client
    };
    let mut next_at = Instant::now();
    for _ in 0..OPS_PER_CLIENT_MAX {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) || now >= deadline || super::interrupted() {
            return;
        }
        if next_at > now {
            std::thread::sleep((next_at - now).min(deadline - now));
            continue;
        }
        // After a stall (a slow answer), no burst to catch up.
        if now.duration_since(next_at) > interval {
            next_at = now;
        }
        next_at += interval;
        let planned = generator.next_op();
        let ack = if planned.kind == OpKind::Get {
            spec.ack_r
        } else {
            spec.ack_w
        };
        perform(
            &mut client,
            view,
            recorder,
            id,
            Phase::Run,
            &planned,
            ack,
            spec.from,
            spec.value_bytes,
        );
    }
}

/// Starts `clients` client threads; they stop at `deadline` or when `stop` is set.
pub fn start_clients(
    clients: u32,
    spec: &ClientSpec,
    view: &Arc<ClusterView>,
    recorder: &Arc<Recorder>,
    stop: &Arc<AtomicBool>,
    deadline: Instant,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    (0..clients)
        .map(|id| {
            let (spec, view, recorder, stop) = (
                spec.clone(),
                Arc::clone(view),
                Arc::clone(recorder),
                Arc::clone(stop),
            );
            std::thread::Builder::new()
                .name(format!("harness-client-{id}"))
                .spawn(move || run_client(id, &spec, &view, &recorder, &stop, deadline))
        })
        .collect()
}

/// Reads every key once at the end with `ack` of `from`, retrying a key
/// without an answer up to [`FINAL_READ_ATTEMPTS`] times; `threads`
/// readers share the keys (reader `t` numbered `first_client + t`).
#[allow(clippy::too_many_arguments)]
pub fn final_reads(
    keys: &[(String, Workload)],
    view: &Arc<ClusterView>,
    recorder: &Arc<Recorder>,
    ack: u32,
    from: u32,
    timeout: Duration,
    value_bytes: usize,
    threads: u32,
    first_client: u32,
) {
    let threads = threads.max(1) as usize;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (view, recorder) = (Arc::clone(view), Arc::clone(recorder));
            scope.spawn(move || {
                let mut client = Client::new(view.len(), timeout);
                for (index, (key, workload)) in keys.iter().enumerate().skip(t).step_by(threads) {
                    let planned = Planned {
                        workload: *workload,
                        kind: OpKind::Get,
                        key: key.clone(),
                        value: None,
                        node: index % view.len(),
                        ttl_ms: None,
                    };
                    for attempt in 0..FINAL_READ_ATTEMPTS {
                        let planned = Planned {
                            node: (planned.node + attempt as usize) % view.len(),
                            ..planned.clone()
                        };
                        let answer = perform(
                            &mut client,
                            &view,
                            &recorder,
                            first_client + t as u32,
                            Phase::Final,
                            &planned,
                            ack,
                            from,
                            value_bytes,
                        );
                        if answer.outcome == OpOutcome::Ok {
                            break;
                        }
                        std::thread::sleep(FINAL_READ_RETRY);
                    }
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's operations depend on the seed and its number only;
    /// values never repeat; set keys are new; shared keys stay few.
    #[test]
    fn generator_is_seeded() {
        let all = Workload::ALL;
        let run = |seed, client| {
            let mut g = Generator::new(seed, client, 3, &all);
            (0..500).map(|_| g.next_op()).collect::<Vec<_>>()
        };
        let a = run(9, 1);
        assert_eq!(a, run(9, 1));
        assert_ne!(a, run(9, 2));
        assert_ne!(a, run(10, 1));
        let mut values: Vec<&String> = a.iter().filter_map(|p| p.value.as_ref()).collect();
        let n = values.len();
        values.sort();
        values.dedup();
        assert_eq!(values.len(), n, "a value repeats");
        for p in &a {
            assert!(p.node < 3);
            match p.workload {
                Workload::Set => assert_eq!(p.kind, OpKind::Put),
                Workload::Register => assert_ne!(p.kind, OpKind::Delete),
                Workload::Deletes => {}
                Workload::Cas => panic!("a cas operation from the HTTP generator"),
            }
            assert_eq!(p.value.is_some(), p.kind == OpKind::Put);
        }
        for w in all {
            assert!(a.iter().any(|p| p.workload == w), "{w:?} never chosen");
        }
        let mut g = Generator::new(1, 0, 3, &[Workload::Deletes]);
        let kinds: Vec<OpKind> = (0..300).map(|_| g.next_op().kind).collect();
        for k in [OpKind::Put, OpKind::Get, OpKind::Delete] {
            assert!(kinds.contains(&k));
        }
    }

    /// A padded value reads back as its id; anything else names no write.
    #[test]
    fn padded_values_round_trip() {
        assert_eq!(wire_value("c1-2", 0), b"c1-2");
        assert_eq!(wire_value("c1-2", 7), b"c1-2...");
        assert_eq!(value_id(b"c1-2...", 7), "c1-2");
        assert_eq!(value_id(b"c1-2", 0), "c1-2");
        assert!(value_id(b"c1-2..", 7).starts_with("not a value"));
        assert!(value_id(b"c1-2..x", 7).starts_with("not a value"));
    }
}
