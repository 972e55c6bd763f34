//! A cluster range's range thread and its hand-off to the client's
//! connection: the thread opens the sources, merges them and sends the
//! chunks of the answer through a bounded queue; the network thread takes
//! them when the connection has room, woken through its inbox.
//!
//! # Back-pressure and memory
//! The queue holds at most [`FEED_BATCHES_MAX`] batches of about
//! [`FEED_BATCH_BYTES`] (a batch may pass it by one entry). When the client
//! reads slowly, the connection stops taking batches, the thread blocks on
//! the full queue and stops reading its sources; their sockets fill and the
//! peers' network threads stop scanning (they stream only while their
//! output buffer has room). Nothing is buffered whole: a range holds the
//! queue, one read buffer per source ([`super::source::SOURCE_BUFFER_BYTES`])
//! and one version per source.
//!
//! # Wake-ups
//! The connection arms `waiting` when it finds the queue empty (and then
//! looks once more); the thread, after each send, wakes the connection's
//! network thread only when `waiting` was armed. No batch is left unseen and
//! a busy stream costs no wake-up per batch.

use super::source::{Node, Plan, open};
use crate::http::response::write_chunk;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

/// Cluster ranges running at once on a node (one range thread each);
/// past it a cluster range is answered 503.
pub const RANGE_THREADS_MAX: usize = 4;
/// Batches queued between a range thread and the client's connection.
pub const FEED_BATCHES_MAX: usize = 4;
/// Bytes of encoded chunks per batch.
pub const FEED_BATCH_BYTES: usize = 64 * 1024;

/// What a range thread hands to the connection.
#[derive(Debug)]
pub enum Feed {
    /// Too few nodes answered before the first byte: answer 504 with this
    /// reason instead of a stream.
    Refused(String),
    /// Encoded chunks of the answer's body (the head goes before the first).
    Bytes(Vec<u8>),
    /// The whole range was sent: write the last chunk.
    Done,
    /// A source failed mid-stream: cut the connection without the last chunk.
    Failed,
}

/// The connection's end of a range thread's queue.
#[derive(Debug)]
pub struct FeedReceiver {
    rx: Receiver<Feed>,
    waiting: Arc<AtomicBool>,
}

impl FeedReceiver {
    /// The next item, or `None` when none is queued yet (then the
    /// connection is woken when one is). A thread that went away without
    /// finishing reads as [`Feed::Failed`].
    pub fn poll(&self) -> Option<Feed> {
        match self.rx.try_recv() {
            Ok(feed) => return Some(feed),
            Err(TryRecvError::Disconnected) => return Some(Feed::Failed),
            Err(TryRecvError::Empty) => {}
        }
        self.waiting.store(true, Ordering::SeqCst);
        // Look again: a batch sent before `waiting` was armed woke nobody.
        match self.rx.try_recv() {
            Ok(feed) => Some(feed),
            Err(TryRecvError::Disconnected) => Some(Feed::Failed),
            Err(TryRecvError::Empty) => None,
        }
    }
}

/// Wakes the network thread of the connection a range feeds.
pub type Wake = Box<dyn Fn() + Send>;

/// The thread's end: sends, and wakes the connection's thread when it waits.
struct FeedSender {
    tx: SyncSender<Feed>,
    waiting: Arc<AtomicBool>,
    wake: Wake,
}

impl FeedSender {
    /// Sends `feed`, blocking while the queue is full; `false` when the
    /// connection is gone.
    fn send(&self, feed: Feed) -> bool {
        if self.tx.send(feed).is_err() {
            return false;
        }
        if self.waiting.swap(false, Ordering::SeqCst) {
            (self.wake)();
        }
        true
    }
}

/// Cluster ranges' counters, and the bound on range threads.
#[derive(Debug, Default)]
pub struct Ranges {
    pub(super) active: AtomicUsize,
    pub(super) started: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) refused_busy: AtomicU64,
    pub(super) keys: AtomicU64,
}

impl Ranges {
    /// Appends the cluster ranges' part of `/metrics`.
    pub fn render(&self, out: &mut String) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let counters: [(&str, &str, &AtomicU64); 4] = [
            (
                "ataman_cluster_ranges_started_total",
                "Cluster ranges (cluster=1), RESP SCAN pages and RESP key counts (DBSIZE, INFO) started on a range thread.",
                &self.started,
            ),
            (
                "ataman_cluster_ranges_failed_total",
                "Cluster ranges and SCAN pages that failed: too few nodes (504) or a node lost mid-stream.",
                &self.failed,
            ),
            (
                "ataman_cluster_ranges_refused_busy_total",
                "Cluster ranges refused with 503, and SCAN pages with -TRYAGAIN: every range thread busy.",
                &self.refused_busy,
            ),
            (
                "ataman_cluster_range_keys_total",
                "Live keys streamed by cluster ranges or read by SCAN pages.",
                &self.keys,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                get(value)
            );
        }
    }
}

/// A place among the range threads, given back when dropped.
pub(super) struct Place<'a>(pub(super) &'a AtomicUsize);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Every range thread is busy (503).
#[derive(Debug, thiserror::Error)]
#[error("{RANGE_THREADS_MAX} cluster ranges already running")]
pub struct Busy;

/// Takes a place among the range threads of `ranges` (given back with
/// [`Place`]'s drop once the thread holds it); `Err` when all are busy.
pub(super) fn take_place(ranges: &Ranges) -> Result<(), Busy> {
    let taken = ranges
        .active
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < RANGE_THREADS_MAX).then_some(n + 1)
        });
    if taken.is_err() {
        ranges.refused_busy.fetch_add(1, Ordering::Relaxed);
        return Err(Busy);
    }
    Ok(())
}

/// Starts a range thread for `plan` over the node `view` gives of
/// `owner`, feeding a connection whose network thread `wake` wakes. `Err`:
/// every range thread is busy, or no thread could start.
pub fn start<S: Send + Sync + 'static>(
    owner: &Arc<S>,
    view: fn(&S) -> Node<'_>,
    wake: Wake,
    plan: Plan,
) -> Result<FeedReceiver, Busy> {
    let ranges = view(owner).ranges;
    take_place(ranges)?;
    let (tx, rx) = sync_channel(FEED_BATCHES_MAX);
    let waiting = Arc::new(AtomicBool::new(false));
    let sender = FeedSender {
        tx,
        waiting: Arc::clone(&waiting),
        wake,
    };
    let thread_owner = Arc::clone(owner);
    let spawned = std::thread::Builder::new()
        .name("ataman-range".into())
        .spawn(move || {
            let node = view(&thread_owner);
            let _place = Place(&node.ranges.active);
            run(&node, &plan, &sender);
        });
    match spawned {
        Ok(_) => {
            ranges.started.fetch_add(1, Ordering::Relaxed);
            Ok(FeedReceiver { rx, waiting })
        }
        Err(e) => {
            ranges.active.fetch_sub(1, Ordering::AcqRel);
            ranges.refused_busy.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "cluster range: no thread");
            Err(Busy)
        }
    }
}

/// A range thread's work: open, merge, send in batches.
fn run(shared: &Node<'_>, plan: &Plan, sender: &FeedSender) {
    let ranges = &shared.ranges;
    let mut merge = match open(shared, plan) {
        Ok(merge) => merge,
        Err(e) => {
            ranges.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "cluster range refused");
            sender.send(Feed::Refused(e.to_string()));
            return;
        }
    };
    let mut batch = Vec::with_capacity(FEED_BATCH_BYTES);
    let mut keys = 0u64;
    let outcome = loop {
        match merge.next_live() {
            Ok(Some(live)) => {
                write_chunk(&mut batch, &[&live.key, b"\n", &live.value]);
                keys += 1;
                if batch.len() >= FEED_BATCH_BYTES {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(FEED_BATCH_BYTES));
                    ranges.keys.fetch_add(keys, Ordering::Relaxed);
                    keys = 0;
                    if !sender.send(Feed::Bytes(full)) {
                        return; // the client went away
                    }
                }
            }
            Ok(None) => break Feed::Done,
            Err(e) => {
                ranges.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "cluster range failed mid-stream; cutting the answer");
                break Feed::Failed;
            }
        }
    };
    ranges.keys.fetch_add(keys, Ordering::Relaxed);
    if matches!(outcome, Feed::Done) && !batch.is_empty() && !sender.send(Feed::Bytes(batch)) {
        return;
    }
    sender.send(outcome);
}
