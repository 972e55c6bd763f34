//! The writer (tx) thread: the single owner of writes.
//!
//! It wakes when requests arrive, drains them all, and for each batch:
//! assigns sequence numbers, applies it to the memtable, makes it visible,
//! and queues it for the WAL thread. It never waits on disk itself; the
//! only waits are the bounded stall when flushing or compaction fall behind
//! and back-pressure from a full WAL queue.
//!
//! # Invariants
//! - Sequence numbers only grow; a batch's entries get consecutive numbers.
//! - `visible_seq` moves only after a whole batch is in the memtable.
//! - A memtable rotation is queued to the WAL in the same order as the
//!   writes around it, so each segment holds exactly its memtable's writes.

use super::shared::{Shared, WriteRequest, lock};
use crate::error::{Error, Result};
use crate::memtable::immutable::ImmutableMemtable;
use crate::options::Durability;
use crate::version::SuperVersion;
use crate::wal::writer::WalItem;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long the writer sleeps when idle before re-checking for shutdown.
const WRITER_IDLE_WAIT: Duration = Duration::from_secs(1);

/// The thread body.
pub fn run(shared: Arc<Shared>) {
    let mut requests = Vec::new();
    let mut wal_items: Vec<(WalItem, usize)> = Vec::new();
    let mut next_seq = shared.visible_seq.load(Ordering::Acquire) + 1;
    while shared.write_queue.drain(&mut requests, WRITER_IDLE_WAIT) {
        shared
            .metrics
            .writer_batch_requests
            .record(requests.len() as u64);
        for request in requests.drain(..) {
            match request {
                WriteRequest::Write {
                    batch,
                    durability,
                    callback,
                    enqueued,
                    condition,
                } => {
                    let picked = Instant::now();
                    shared
                        .metrics
                        .write_queue_wait_us
                        .record(picked.duration_since(enqueued).as_micros() as u64);
                    if let Err(e) = shared.check_poisoned() {
                        callback(Err(e));
                        continue;
                    }
                    if let Err(e) = make_room(&shared, &mut wal_items) {
                        callback(Err(e));
                        continue;
                    }
                    if let Some(condition) = condition
                        && !condition_holds(&shared, &condition)
                    {
                        // Answered at once: nothing was applied or logged.
                        callback(Err(Error::Conflict));
                        continue;
                    }
                    let first_seq = next_seq;
                    apply(&shared, &batch, first_seq);
                    shared
                        .metrics
                        .tx_apply_us
                        .record(picked.elapsed().as_micros() as u64);
                    next_seq += batch.len() as u64;
                    let bytes = batch.encoded_bytes();
                    let callback = if durability == Durability::None {
                        callback(Ok(first_seq));
                        None
                    } else {
                        Some(callback)
                    };
                    let item = WalItem::Write {
                        first_seq,
                        batch,
                        durability,
                        callback,
                    };
                    wal_items.push((item, bytes));
                }
                WriteRequest::Checkpoint(reply) => {
                    // Every batch before this request is applied and at or
                    // below `next_seq - 1`; every later one is above it.
                    reply(shared.sv.load_full(), next_seq - 1);
                }
                WriteRequest::Advance(reply) => {
                    // No entry holds it: marked as left the memtables, so
                    // reads below it stay refused, reads at it pass.
                    shared
                        .left_memtables_seq
                        .fetch_max(next_seq, Ordering::SeqCst);
                    shared.visible_seq.store(next_seq, Ordering::Release);
                    next_seq += 1;
                    reply();
                }
                WriteRequest::Rotate(reply) => {
                    let mem_empty = shared.sv.load().mem.is_empty();
                    if mem_empty {
                        reply(Ok(()));
                    } else {
                        rotate(&shared, &mut wal_items);
                        reply(Ok(()));
                    }
                }
            }
        }
        hand_to_wal(&shared, &mut wal_items);
    }
    hand_to_wal(&shared, &mut wal_items);
    shared.wal_queue.close();
}

/// Applies a batch to the memtable and publishes it to readers.
pub(crate) fn apply(shared: &Shared, batch: &crate::WriteBatch, first_seq: u64) {
    let sv = shared.sv.load();
    let mut user_bytes = 0u64;
    for (i, entry) in batch.iter().enumerate() {
        // Batches were validated by `Db::submit`; a decode error here is a bug.
        let Ok(entry) = entry else {
            debug_assert!(false, "validated batch failed to decode");
            continue;
        };
        sv.mem.insert(
            entry.key,
            entry.ts,
            first_seq + i as u64,
            entry.kind,
            entry.value,
        );
        user_bytes += (entry.key.len() + entry.value.len()) as u64;
    }
    let last_seq = first_seq + batch.len() as u64 - 1;
    debug_assert!(last_seq > shared.visible_seq.load(Ordering::Relaxed));
    shared.visible_seq.store(last_seq, Ordering::Release);
    let m = &shared.metrics;
    m.user_bytes_written.add(user_bytes);
    m.batches_written.add(1);
    m.entries_written.add(batch.len() as u64);
}

/// True when a conditional write may be applied (`super::condition`).
fn condition_holds(shared: &Shared, condition: &super::condition::Condition) -> bool {
    // The view first: a flush publishes `left_memtables_seq` before the
    // view without its memtable.
    let sv = shared.sv.load();
    let left = shared.left_memtables_seq.load(Ordering::SeqCst);
    let held = super::condition::check(&sv, left, condition).is_ok();
    if !held {
        shared.metrics.conditional_conflicts.add(1);
    }
    held
}

fn hand_to_wal(shared: &Shared, wal_items: &mut Vec<(WalItem, usize)>) {
    if let Err(items) = shared.wal_queue.push_all_blocking(wal_items) {
        // The WAL thread is gone (engine closing after a failure): answer.
        for item in items {
            if let WalItem::Write {
                callback: Some(cb), ..
            } = item
            {
                cb(Err(Error::Closed));
            }
        }
    }
}

/// Makes the memtable immutable and starts a new one in a new WAL segment.
pub fn rotate(shared: &Shared, wal_items: &mut Vec<(WalItem, usize)>) {
    let segment = shared.new_file_number();
    wal_items.push((WalItem::Rotate { segment }, 0));
    let guard = lock(&shared.sv_update);
    let old = shared.sv.load_full();
    let mut imms = Vec::with_capacity(old.imms.len() + 1);
    imms.push(ImmutableMemtable::Rotated(Arc::clone(&old.mem)));
    imms.extend(old.imms.iter().cloned());
    shared.sv.store(Arc::new(SuperVersion {
        mem: shared.new_memtable(segment),
        imms,
        version: Arc::clone(&old.version),
    }));
    drop(guard);
    shared.notify_bg();
}

/// Rotates a full memtable, stalling (bounded) while flush or compaction
/// are too far behind.
fn make_room(shared: &Shared, wal_items: &mut Vec<(WalItem, usize)>) -> Result<()> {
    let opts = &shared.opts;
    let mut stall_started: Option<Instant> = None;
    loop {
        let sv = shared.sv.load();
        let full = sv.mem.bytes() >= shared.flush_at;
        let l0_files = sv.version.levels.first().map_or(0, Vec::len);
        let l0_ok = l0_files < opts.l0_stop_writes;
        if l0_ok && !full {
            break;
        }
        if l0_ok && sv.imms.len() < opts.immutable_memtables_max {
            drop(sv);
            rotate(shared, wal_items);
            break;
        }
        shared.check_poisoned()?;
        // Stalled: let the WAL thread answer what is already applied first.
        hand_to_wal(shared, wal_items);
        let started = *stall_started.get_or_insert_with(|| {
            shared.metrics.write_stalls.add(1);
            Instant::now()
        });
        if started.elapsed() >= opts.write_stall_timeout {
            shared.metrics.writes_refused_busy.add(1);
            account_stall(shared, started);
            return Err(Error::Busy {
                what: "write stall: memtable flush or L0 compaction is behind",
            });
        }
        let bg = lock(&shared.bg);
        let _ = shared
            .bg_cond
            .wait_timeout(bg, Duration::from_millis(50))
            .unwrap_or_else(|e| e.into_inner());
    }
    if let Some(started) = stall_started {
        account_stall(shared, started);
    }
    Ok(())
}

fn account_stall(shared: &Shared, started: Instant) {
    shared
        .metrics
        .write_stall_us
        .add(started.elapsed().as_micros() as u64);
}
