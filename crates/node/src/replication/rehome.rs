//! Hints for a node that left: a node that is a member of no live layout
//! any more gets no deliveries; its hints go to each key's current
//! replicas instead (issue 16: "a hint for a node that left is sent to the
//! key's new replica"), never dropped.
//!
//! # How
//! Thread 0's hint delivery ([`super::net_io`]) finds such a node with
//! hints pending and calls [`rehome_hints`]: at most [`REHOME_BATCH_MAX`]
//! of its hints are read; each is kept again as a hint for every replica
//! of its key in the live versions (`Placed::write`, each version's `R`)
//! other than this node, and written to this node's engine when this node
//! is one of them. The departed node's hints are removed only after that:
//! - no local copy: at once (the new hints were queued first on the same
//!   hint store's WAL, so the removal is never durable before them);
//! - a local copy: by the local write's callback, once it is durable.
//!
//! One batch is in flight at a time (`Rehoming`); a hint store at its
//! bound refuses the new hints, and the old ones stay for the next tick.

use crate::cluster::live::Placement;
use crate::peer::frame::Stamped;
use crate::state::NetContext;
use ataman_engine::{Submission, WriteBatch};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Hints of a departed node re-kept per call.
pub const REHOME_BATCH_MAX: usize = super::HINT_BATCH_MAX;

/// Set while a batch waits for its local write; shared with its callback.
#[derive(Debug, Default, Clone)]
pub struct Rehoming(Arc<AtomicBool>);

/// Re-keeps up to [`REHOME_BATCH_MAX`] hints of node `node` (a member of
/// no live layout of `placement`) for their keys' current replicas;
/// returns how many were re-kept.
pub fn rehome_hints(
    ctx: &NetContext,
    placement: &Placement,
    node: usize,
    busy: &Rehoming,
) -> usize {
    let shared = &ctx.shared;
    let url = placement.url(node).to_owned();
    if shared.hints.count(&url).0 == 0 || busy.0.load(Ordering::Acquire) {
        return 0;
    }
    let hints = match shared.hints.pending(&url, None, REHOME_BATCH_MAX) {
        Ok(h) => h,
        Err(e) => {
            super::net_io::log_hint_refusal(&url, &e.to_string());
            return 0;
        }
    };
    let me = placement.self_index();
    let mut local = WriteBatch::new();
    let mut has_local = false;
    let mut seqs = Vec::with_capacity(hints.len());
    for h in hints {
        let targets = placement.placed().write(&h.key).replicas;
        let mut kept = true;
        for &t in targets.iter().filter(|&&t| t != me) {
            if let Err(e) = shared.hints.add_expiring(
                placement.url(t),
                &h.key,
                h.ts,
                h.value.as_deref(),
                h.deadline_ms,
            ) {
                shared.metrics.hints_refused.fetch_add(1, Ordering::Relaxed);
                super::net_io::log_hint_refusal(placement.url(t), &e.to_string());
                kept = false;
                break;
            }
        }
        if !kept {
            // The store is full: this hint and the rest stay for later.
            break;
        }
        if targets.contains(&me) {
            shared.hlc.observe(h.ts);
            let version = Stamped {
                ts: h.ts,
                value: h.value,
                deadline_ms: h.deadline_ms,
            };
            version.add_to(&mut local, &h.key);
            has_local = true;
        }
        seqs.push(h.seq);
    }
    let count = seqs.len();
    if count == 0 {
        return 0;
    }
    log_rehomed(&url, count);
    if !has_local {
        shared.hints.remove(&url, &seqs);
        return count;
    }
    busy.0.store(true, Ordering::Release);
    let hints = Arc::clone(&shared.hints);
    let flag = Arc::clone(&busy.0);
    ctx.pending_writes.borrow_mut().push(Submission {
        batch: local,
        durability: ataman_engine::Durability::Complete,
        done: Box::new(move |r: ataman_engine::Result<u64>| {
            if r.is_ok() {
                hints.remove(&url, &seqs);
            }
            flag.store(false, Ordering::Release);
        }),
        condition: None,
    });
    count
}

fn log_rehomed(url: &str, count: usize) {
    // Rate-limited: one line per second at most.
    static LAST_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now_ms = crate::last_seen::now_ms();
    let last = LAST_MS.load(Ordering::Relaxed);
    if now_ms >= last + 1000
        && LAST_MS
            .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::info!(
            peer = %url,
            hints = count,
            "hints for a node that left the layout: kept for the keys' current replicas instead"
        );
    }
}
