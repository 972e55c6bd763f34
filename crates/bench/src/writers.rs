//! C concurrent writers modelled as C batches kept in flight.
//!
//! A writer is a closed loop: it submits a batch, waits for the engine's
//! acknowledgement, submits the next. With C = 1000 that is what 1000
//! Tarantool fibers do in `1mops_write`, and it is not 1000 OS threads: a
//! writer here is only an id and a slot in flight. A few driver threads
//! own the writers (writer `w` belongs to driver `w % drivers`); the
//! engine's callback sends the writer's id back to its driver, which
//! records the latency and submits that writer's next batch. The
//! acknowledgements travel in the engine's own `HandoffQueue` (the driver
//! drains all of them per wake-up, a callback wakes it only when the queue
//! was empty, and never while holding the queue's lock); an
//! `mpsc::channel` woke the driver under its internal lock, so a driver
//! scheduled onto the callback's CPU blocked on that lock and was woken a
//! second time (~1.5 wake-ups per acknowledgement,
//! `docs/bench-log/2026-11-22-engine-09-put-latency.md`).
//!
//! # What is counted
//! Only puts the engine acknowledged with `Ok` are operations; the op
//! budget is claimed before a batch is built, so exactly `ops` puts are
//! written and acknowledged, never more (the last batch may be short).
//! The driver's own bookkeeping (channel hand-off, histogram) is on the
//! clock, as it would be for a real client, but is never counted as an
//! operation.
//!
//! # Latency
//! From just before `submit` to the moment the engine runs the callback,
//! measured inside the callback, so a driver busy with other writers does
//! not inflate it. A `Busy` refusal is retried and its wait is included.

use crate::error::{BenchError, Result};
use crate::report::{latency_histogram, merge, record_latency};
use crate::workload::{Clock, KEY_BYTES, Workload, format_key};
use ataman_engine::queue::HandoffQueue;
use ataman_engine::{Clock as _, Db, Durability, Error, WriteBatch};
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a driver waits before resubmitting a batch the engine refused as `Busy`.
const BUSY_RETRY_WAIT: Duration = Duration::from_micros(200);

/// How long a driver waits for any acknowledgement before it declares the engine stuck.
const ACK_WAIT_MAX: Duration = Duration::from_secs(120);

/// What a write phase is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct WriteLoad {
    /// Puts to write in total.
    pub ops: u64,
    /// Writers (batches in flight at once).
    pub writers: usize,
    /// Puts per batch.
    pub batch: usize,
    /// Driver threads that resubmit for the writers.
    pub drivers: usize,
    /// When the engine acknowledges.
    pub durability: Durability,
    /// Keys are uniform in `0..keys`.
    pub keys: u64,
    /// Bytes per value.
    pub value_bytes: usize,
    /// RNG seed.
    pub seed: u64,
    /// Every put expires this long after it is built (`None`: plain puts).
    pub ttl_ms: Option<u64>,
}

/// What a write phase measured.
#[derive(Debug)]
pub struct WriteOutcome {
    /// Puts acknowledged.
    pub ops_acked: u64,
    /// Batches acknowledged.
    pub batches_acked: u64,
    /// Wall time from the first submit to the last acknowledgement.
    pub elapsed: Duration,
    /// Per-batch commit latency, nanoseconds.
    pub latency_ns: Histogram<u64>,
    /// `submit` calls refused with `Busy` and retried.
    pub busy_retries: u64,
}

/// One acknowledgement, sent from the engine's callback to the driver.
struct Ack {
    writer: usize,
    puts: u64,
    latency: Duration,
    result: ataman_engine::Result<u64>,
}

/// Runs the closed-loop writers against `db` until `load.ops` puts are acknowledged.
pub fn run(db: &Db, load: &WriteLoad) -> Result<WriteOutcome> {
    if load.ops == 0 || load.writers == 0 || load.batch == 0 || load.drivers == 0 {
        return Err(BenchError::InvalidArgument(format!(
            "ops, writers, batch and drivers must be positive: {load:?}"
        )));
    }
    let drivers = load.drivers.min(load.writers);
    let claimed = AtomicU64::new(0);
    let clock = Clock::default();
    let started = Instant::now();
    let results: Vec<Result<DriverOutcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..drivers)
            .map(|d| {
                let writers: Vec<usize> = (d..load.writers).step_by(drivers).collect();
                let (claimed, clock) = (&claimed, &clock);
                s.spawn(move || drive(db, load, d as u64, &writers, claimed, clock))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Check("a driver thread panicked".into())))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut latency_ns = latency_histogram()?;
    let (mut ops_acked, mut batches_acked, mut busy_retries) = (0, 0, 0);
    for r in results {
        let d = r?;
        merge(&mut latency_ns, &d.latency_ns)?;
        ops_acked += d.ops_acked;
        batches_acked += d.batches_acked;
        busy_retries += d.busy_retries;
    }
    if ops_acked != load.ops {
        return Err(BenchError::Check(format!(
            "asked for {} puts, {ops_acked} were acknowledged",
            load.ops
        )));
    }
    Ok(WriteOutcome {
        ops_acked,
        batches_acked,
        elapsed,
        latency_ns,
        busy_retries,
    })
}

struct DriverOutcome {
    ops_acked: u64,
    batches_acked: u64,
    latency_ns: Histogram<u64>,
    busy_retries: u64,
}

/// A driver: keeps each of its writers' batch in flight until the op budget is spent.
fn drive(
    db: &Db,
    load: &WriteLoad,
    driver: u64,
    writers: &[usize],
    claimed: &AtomicU64,
    clock: &Clock,
) -> Result<DriverOutcome> {
    // At most one batch per writer is in flight, so at most that many acks are queued.
    let acks = Arc::new(HandoffQueue::<Ack>::new(writers.len().max(1), usize::MAX));
    let mut workload = Workload::new(
        load.seed.wrapping_mul(1_000_003).wrapping_add(driver),
        load.keys,
        load.value_bytes,
    );
    let mut out = DriverOutcome {
        ops_acked: 0,
        batches_acked: 0,
        latency_ns: latency_histogram()?,
        busy_retries: 0,
    };
    let mut in_flight = 0usize;
    let mut submitter = Submitter {
        db,
        load,
        claimed,
        clock,
        workload: &mut workload,
        acks: &acks,
    };
    for &writer in writers {
        if submitter.submit_next(writer, &mut out.busy_retries)? {
            in_flight += 1;
        }
    }
    let mut received = Vec::new();
    while in_flight > 0 {
        acks.drain(&mut received, ACK_WAIT_MAX);
        if received.is_empty() {
            acks.close();
            return Err(BenchError::Check(format!(
                "no acknowledgement for {ACK_WAIT_MAX:?} with {in_flight} batches in flight"
            )));
        }
        for ack in received.drain(..) {
            in_flight -= 1;
            if let Err(e) = ack.result {
                acks.close();
                return Err(e.into());
            }
            record_latency(&mut out.latency_ns, ack.latency);
            out.ops_acked += ack.puts;
            out.batches_acked += 1;
            if submitter.submit_next(ack.writer, &mut out.busy_retries)? {
                in_flight += 1;
            }
        }
    }
    Ok(out)
}

struct Submitter<'a> {
    db: &'a Db,
    load: &'a WriteLoad,
    claimed: &'a AtomicU64,
    clock: &'a Clock,
    workload: &'a mut Workload,
    acks: &'a Arc<HandoffQueue<Ack>>,
}

impl Submitter<'_> {
    /// Claims the next puts of the budget for `writer` and submits them;
    /// false once the budget is spent.
    fn submit_next(&mut self, writer: usize, busy_retries: &mut u64) -> Result<bool> {
        let batch_puts = self.load.batch as u64;
        let first = self.claimed.fetch_add(batch_puts, Ordering::Relaxed);
        if first >= self.load.ops {
            return Ok(false);
        }
        let puts = batch_puts.min(self.load.ops - first);
        let started = Instant::now();
        loop {
            let batch = self.build(puts);
            let acks = Arc::clone(self.acks);
            let callback = Box::new(move |result: ataman_engine::Result<u64>| {
                let latency = started.elapsed();
                // The queue is closed only if the driver already failed; nothing to tell.
                let _ = acks.push_unbounded(Ack {
                    writer,
                    puts,
                    latency,
                    result,
                });
            });
            match self.db.submit(batch, self.load.durability, callback) {
                Ok(()) => return Ok(true),
                Err(Error::Busy { .. }) => {
                    *busy_retries += 1;
                    std::thread::sleep(BUSY_RETRY_WAIT);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn build(&mut self, puts: u64) -> WriteBatch {
        let mut batch = WriteBatch::new();
        let mut key = [0u8; KEY_BYTES];
        let deadline_ms = self
            .load
            .ttl_ms
            .map(|ttl| ataman_engine::SystemClock.now_ms().saturating_add(ttl));
        for _ in 0..puts {
            format_key(self.workload.key_number(), &mut key);
            let ts = self.clock.tick();
            match deadline_ms {
                Some(deadline_ms) => {
                    batch.put_expiring(&key, self.workload.value(), ts, deadline_ms)
                }
                None => batch.put(&key, self.workload.value(), ts),
            };
        }
        batch
    }
}
