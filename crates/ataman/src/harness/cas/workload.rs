//! The `cas` workload's clients: seeded operations sent over RESP to
//! random members, keys handed out by a counter the clients share (the
//! module doc of `cas`), and the final reads after every fault healed.

use super::resp::RespClient;
use super::{CasCall, CasOp, CasReply, is_counter_key, key_of};
use crate::harness::cluster::ClusterView;
use crate::harness::history::Recorder;
use ataman_testkit::rng::Rng;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The generator stream of client `c` is `Rng::derive(seed, STREAM_BASE + c)`
/// (apart from the HTTP clients').
pub const STREAM_BASE: u64 = 1 << 32;
/// Operations one client issues at most in a run.
pub const OPS_PER_CLIENT_MAX: u64 = 1_000_000;
/// Attempts of one final read before the key counts as unread.
pub const FINAL_READ_ATTEMPTS: u32 = 8;
/// Pause between two attempts of a final read.
pub const FINAL_READ_RETRY: Duration = Duration::from_millis(250);
/// Percent of the swaps that write a value that is not an integer (an
/// `INCR` of it answers an error: the value was not one).
pub const NOT_INTEGER_PERCENT: u64 = 10;

/// What one operation will be, but its key (which depends on the order
/// the clients take numbers in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Roll for the kind, 0..100.
    pub roll: u64,
    /// A unique value to write, if the kind writes one.
    pub value: String,
    /// The slot it goes to.
    pub node: usize,
}

/// A client's seeded sequence.
#[derive(Debug, Clone)]
pub struct Generator {
    rng: Rng,
    client: u32,
    seq: u64,
    nodes: usize,
}

impl Generator {
    /// Client `client`'s generator in a run of `seed` over `nodes` slots.
    pub fn new(seed: u64, client: u32, nodes: usize) -> Generator {
        Generator {
            rng: Rng::derive(seed, STREAM_BASE + u64::from(client)),
            client,
            seq: 0,
            nodes,
        }
    }

    /// The next planned operation. Values are unique in the run: integers
    /// `(client + 1) * 10^9 + seq`, or `x<client>-<seq>` for a share.
    pub fn next_op(&mut self) -> Planned {
        self.seq += 1;
        let node = self.rng.below(self.nodes as u64) as usize;
        let roll = self.rng.below(100);
        let value = if self.rng.percent(NOT_INTEGER_PERCENT) {
            format!("x{}-{}", self.client, self.seq)
        } else {
            (u64::from(self.client + 1) * 1_000_000_000 + self.seq).to_string()
        };
        Planned { roll, value, node }
    }
}

/// The call `planned` makes on `key`: a counter key gets `INCR` only; the
/// others 30% reads, 25% swaps, 10% `SET NX`, 20% `INCR`, 15% `GETDEL`.
pub fn call_for(planned: &Planned, key: &str) -> CasCall {
    if is_counter_key(key) {
        return CasCall::Incr;
    }
    let v = planned.value.clone();
    match planned.roll {
        0..30 => CasCall::Read,
        30..55 => CasCall::Swap(v),
        55..65 => CasCall::SetNx(v),
        65..85 => CasCall::Incr,
        _ => CasCall::GetDel,
    }
}

/// What the `cas` clients share.
#[derive(Clone)]
pub struct CasSpec {
    /// The run's seed.
    pub seed: u64,
    /// Operations per second per client (0: as fast as answers come).
    pub rate_per_client: u32,
    /// Bound on one request.
    pub timeout: Duration,
}

/// Where a client's operations go and are recorded.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    /// The nodes.
    pub view: &'a ClusterView,
    /// The history.
    pub recorder: &'a Recorder,
    /// The client's number.
    pub id: u32,
    /// Final reads (after every fault healed).
    pub last: bool,
}

/// Sends `call` on `key` to slot `planned` (or the member it routes to)
/// and records it.
pub fn perform(
    client: &mut RespClient,
    at: Target<'_>,
    key: &str,
    call: CasCall,
    planned: usize,
) -> CasReply {
    let Target {
        view,
        recorder,
        id,
        last,
    } = at;
    let node = view.route(planned);
    let start_us = recorder.now_us();
    let reply = match view.resp_addr(node) {
        Some(addr) => client.call(node, addr, &call.command(key)),
        None => CasReply::Unsent(format!("slot {node} has no RESP address")),
    };
    let end_us = recorder.now_us();
    recorder.cas(CasOp {
        client: id,
        last,
        key: key.to_owned(),
        call,
        node,
        start_us,
        end_us,
        reply: reply.clone(),
    });
    reply
}

/// Runs `cas` client `id` until `stop` is set or `deadline` passes.
pub fn run_client(
    id: u32,
    spec: &CasSpec,
    view: &ClusterView,
    recorder: &Recorder,
    numbers: &AtomicU64,
    (stop, deadline): (&AtomicBool, Instant),
) {
    let mut generator = Generator::new(spec.seed, id, view.len());
    let mut client = RespClient::new(view.len(), spec.timeout);
    let interval = if spec.rate_per_client == 0 {
        Duration::ZERO
    } else {
        Duration::from_secs(1) / spec.rate_per_client
    };
    let mut next_at = Instant::now();
    let at = Target {
        view,
        recorder,
        id,
        last: false,
    };
    for _ in 0..OPS_PER_CLIENT_MAX {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) || now >= deadline || crate::harness::interrupted() {
            return;
        }
        if next_at > now {
            std::thread::sleep((next_at - now).min(deadline - now));
            continue;
        }
        if now.duration_since(next_at) > interval {
            next_at = now;
        }
        next_at += interval;
        let planned = generator.next_op();
        let key = key_of(numbers.fetch_add(1, Ordering::Relaxed));
        let call = call_for(&planned, &key);
        perform(&mut client, at, &key, call, planned.node);
    }
}

/// Starts `clients` `cas` client threads (numbered from 0).
pub fn start_clients(
    clients: u32,
    spec: &CasSpec,
    view: &Arc<ClusterView>,
    recorder: &Arc<Recorder>,
    stop: &Arc<AtomicBool>,
    deadline: Instant,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let numbers = Arc::new(AtomicU64::new(0));
    (0..clients)
        .map(|id| {
            let (spec, view, recorder, stop, numbers) = (
                spec.clone(),
                Arc::clone(view),
                Arc::clone(recorder),
                Arc::clone(stop),
                Arc::clone(&numbers),
            );
            std::thread::Builder::new()
                .name(format!("harness-cas-{id}"))
                .spawn(move || {
                    run_client(id, &spec, &view, &recorder, &numbers, (&stop, deadline));
                })
        })
        .collect()
}

/// Reads every key of the workload once through the register, retrying a
/// key without an answer up to [`FINAL_READ_ATTEMPTS`] times on the next
/// slots (reader numbered `client`).
pub fn final_reads(view: &ClusterView, recorder: &Recorder, timeout: Duration, client: u32) {
    let keys: std::collections::BTreeSet<String> =
        recorder.with_cas(|ops| ops.iter().map(|o| o.key.clone()).collect());
    let mut resp = RespClient::new(view.len(), timeout);
    let at = Target {
        view,
        recorder,
        id: client,
        last: true,
    };
    for (index, key) in keys.iter().enumerate() {
        for attempt in 0..FINAL_READ_ATTEMPTS {
            let node = (index + attempt as usize) % view.len();
            let reply = perform(&mut resp, at, key, CasCall::Read, node);
            if matches!(reply, CasReply::Bulk(_)) {
                break;
            }
            std::thread::sleep(FINAL_READ_RETRY);
        }
    }
}
