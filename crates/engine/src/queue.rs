//! The hand-off queue between engine threads.
//!
//! One rule for every queue between threads (`docs/ARCHITECTURE.md`,
//! "Queues"): the consumer drains everything queued in one wake-up; a
//! producer wakes the consumer only when the queue went from empty to
//! non-empty; the queue is bounded in items and bytes, and a full queue
//! refuses the item (the caller answers `Busy`), it never grows memory.
//!
//! # Thread safety
//! Any number of producers, one consumer. All state is behind one mutex
//! held for a push or a swap of the whole buffer, never across work.

use ataman_testkit::lock::lock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

struct Inner<T> {
    items: Vec<T>,
    bytes: usize,
    closed: bool,
    /// True while the consumer is parked in `drain`.
    consumer_waiting: bool,
    /// Producers parked in `push_all_blocking`, waiting for space.
    producers_waiting: usize,
}

/// A bounded multi-producer, single-consumer queue with drain-all hand-off.
pub struct HandoffQueue<T> {
    inner: Mutex<Inner<T>>,
    wake: Condvar,
    /// Signalled when `drain` empties the queue while a producer waits in
    /// `push_all_blocking`.
    space: Condvar,
    /// Condvar notifications sent (each is a `futex` wake system call).
    notifications: AtomicU64,
    items_max: usize,
    bytes_max: usize,
}

/// Why a push was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// The item or byte bound is reached.
    Full,
    /// The queue is closed; the consumer is stopping.
    Closed,
}

impl<T> HandoffQueue<T> {
    /// A queue holding at most `items_max` items and `bytes_max` bytes.
    pub fn new(items_max: usize, bytes_max: usize) -> Self {
        assert!(items_max > 0 && bytes_max > 0);
        HandoffQueue {
            inner: Mutex::new(Inner {
                items: Vec::new(),
                bytes: 0,
                closed: false,
                consumer_waiting: false,
                producers_waiting: 0,
            }),
            wake: Condvar::new(),
            space: Condvar::new(),
            notifications: AtomicU64::new(0),
            items_max,
            bytes_max,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        // A panic while holding this lock can only come from an allocation
        // failure; the data (a Vec) is still consistent, so keep going.
        lock(&self.inner)
    }

    /// Queues `item` of `bytes` bytes. An item larger than the whole byte
    /// budget is accepted when the queue is empty, so it cannot starve.
    pub fn push(&self, item: T, bytes: usize) -> Result<(), (PushError, T)> {
        let inner = self.lock();
        if inner.closed {
            return Err((PushError::Closed, item));
        }
        let over_bytes = inner.bytes + bytes > self.bytes_max && !inner.items.is_empty();
        if inner.items.len() >= self.items_max || over_bytes {
            return Err((PushError::Full, item));
        }
        self.append_and_wake(inner, [(item, bytes)]);
        Ok(())
    }

    /// Appends under the held lock, then wakes a parked consumer if the
    /// queue went from empty to non-empty (the hand-off rule).
    fn append_and_wake(
        &self,
        mut inner: MutexGuard<'_, Inner<T>>,
        items: impl IntoIterator<Item = (T, usize)>,
    ) {
        let was_empty = inner.items.is_empty();
        for (item, bytes) in items {
            inner.items.push(item);
            inner.bytes += bytes;
        }
        let wake = was_empty && !inner.items.is_empty() && inner.consumer_waiting;
        drop(inner);
        if wake {
            self.notify(&self.wake);
        }
    }

    /// Queues several items under one lock and with at most one wake-up,
    /// in order; those that do not fit the bounds (or all, if the queue is
    /// closed) are returned with the reason, in order.
    pub fn push_many(&self, items: Vec<(T, usize)>) -> Vec<(PushError, T)> {
        let mut inner = self.lock();
        let mut refused = Vec::new();
        let was_empty = inner.items.is_empty();
        for (item, bytes) in items {
            if inner.closed {
                refused.push((PushError::Closed, item));
                continue;
            }
            let over_bytes = inner.bytes + bytes > self.bytes_max && !inner.items.is_empty();
            if inner.items.len() >= self.items_max || over_bytes {
                refused.push((PushError::Full, item));
                continue;
            }
            inner.items.push(item);
            inner.bytes += bytes;
        }
        let wake = was_empty && !inner.items.is_empty() && inner.consumer_waiting;
        drop(inner);
        if wake {
            self.notify(&self.wake);
        }
        refused
    }

    /// Queues `item` ignoring the bounds (control messages that must not be lost).
    pub fn push_unbounded(&self, item: T) -> Result<(), T> {
        let inner = self.lock();
        if inner.closed {
            return Err(item);
        }
        self.append_and_wake(inner, [(item, 0)]);
        Ok(())
    }

    /// Moves everything queued into `out` (which must be empty), waiting up
    /// to `timeout` for at least one item. Returns false once the queue is
    /// closed and empty: the consumer should stop.
    pub fn drain(&self, out: &mut Vec<T>, timeout: Duration) -> bool {
        debug_assert!(out.is_empty());
        let mut inner = self.lock();
        if inner.items.is_empty() && !inner.closed {
            inner.consumer_waiting = true;
            let (guard, _) = self
                .wake
                .wait_timeout_while(inner, timeout, |i| i.items.is_empty() && !i.closed)
                .unwrap_or_else(|e| e.into_inner());
            inner = guard;
            inner.consumer_waiting = false;
        }
        std::mem::swap(out, &mut inner.items);
        inner.bytes = 0;
        let stop = inner.closed && out.is_empty();
        // Only a producer parked in `push_all_blocking` waits for space: a
        // notification nobody waits for is still a system call, on the
        // consumer's way to its work.
        let space = !out.is_empty() && inner.producers_waiting > 0;
        drop(inner);
        if space {
            self.notify_all(&self.space);
        }
        !stop
    }

    fn notify(&self, cond: &Condvar) {
        self.notifications.fetch_add(1, Ordering::Relaxed);
        cond.notify_one();
    }

    fn notify_all(&self, cond: &Condvar) {
        self.notifications.fetch_add(1, Ordering::Relaxed);
        cond.notify_all();
    }

    /// Condvar notifications sent so far (wake-ups of the consumer and of
    /// producers waiting for space); each costs a system call.
    pub fn notifications(&self) -> u64 {
        self.notifications.load(Ordering::Relaxed)
    }

    /// Appends all of `items` (item, bytes) at once, waiting while the queue
    /// is over its bounds: this is the back-pressure of a producer thread
    /// that must not drop work (the writer handing groups to the WAL).
    /// Returns the items back if the queue is closed.
    pub fn push_all_blocking(&self, items: &mut Vec<(T, usize)>) -> Result<(), Vec<T>> {
        if items.is_empty() {
            return Ok(());
        }
        let mut inner = self.lock();
        while !inner.closed
            && !inner.items.is_empty()
            && (inner.items.len() >= self.items_max || inner.bytes >= self.bytes_max)
        {
            inner.producers_waiting += 1;
            inner = self
                .space
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            inner.producers_waiting -= 1;
        }
        if inner.closed {
            return Err(items.drain(..).map(|(t, _)| t).collect());
        }
        self.append_and_wake(inner, items.drain(..));
        Ok(())
    }

    /// Refuses further pushes; the consumer drains what is left and stops.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        drop(inner);
        self.notify_all(&self.wake);
        self.notify_all(&self.space);
    }

    /// Items queued now (for metrics).
    pub fn depth(&self) -> usize {
        self.lock().items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Bounds are enforced by count and bytes, and drain takes everything at once.
    #[test]
    fn bounded_and_drains_all() {
        let q = HandoffQueue::new(3, 100);
        q.push(1, 10).unwrap();
        q.push(2, 10).unwrap();
        assert_eq!(q.push(3, 90).unwrap_err().0, PushError::Full);
        q.push(3, 10).unwrap();
        assert_eq!(q.push(4, 1).unwrap_err().0, PushError::Full);
        let mut out = Vec::new();
        assert!(q.drain(&mut out, Duration::from_millis(1)));
        assert_eq!(out, vec![1, 2, 3]);
        out.clear();
        // An item bigger than the byte budget still passes through an empty queue.
        q.push(5, 1000).unwrap();
        q.close();
        assert_eq!(q.push(6, 1).unwrap_err().0, PushError::Closed);
        assert!(q.drain(&mut out, Duration::from_millis(1)));
        assert_eq!(out, vec![5]);
        out.clear();
        assert!(!q.drain(&mut out, Duration::from_millis(1)));
    }

    /// push_many keeps order, refuses past the bounds, and reports closed queues.
    #[test]
    fn push_many_bounds_and_order() {
        let q = HandoffQueue::new(3, 100);
        let refused = q.push_many(vec![(1, 10), (2, 10), (3, 10), (4, 10)]);
        assert_eq!(refused, vec![(PushError::Full, 4)]);
        let mut out = Vec::new();
        q.drain(&mut out, Duration::from_millis(1));
        assert_eq!(out, vec![1, 2, 3]);
        q.close();
        assert_eq!(q.push_many(vec![(5, 1)]), vec![(PushError::Closed, 5)]);
    }

    /// A parked consumer is woken by a producer on another thread.
    #[test]
    fn consumer_wakes_on_push() {
        let q = Arc::new(HandoffQueue::new(10, 10));
        let q2 = Arc::clone(&q);
        let consumer = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut got = Vec::new();
            while q2.drain(&mut out, Duration::from_secs(5)) {
                got.append(&mut out);
            }
            got
        });
        for i in 0..5 {
            while q.push(i, 1).is_err() {
                std::thread::yield_now();
            }
        }
        q.close();
        assert_eq!(consumer.join().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    /// A producer and a consumer taking turns (the single-writer path)
    /// cost no notification: the consumer is not parked when items arrive
    /// and no producer waits for space, so nothing is signalled.
    #[test]
    fn turn_taking_sends_no_notifications() {
        let q = HandoffQueue::new(4, 100);
        let mut out = Vec::new();
        for i in 0..100 {
            q.push(i, 1).unwrap();
            let mut items = vec![(i, 1)];
            q.push_all_blocking(&mut items).unwrap();
            assert!(q.drain(&mut out, Duration::from_millis(1)));
            assert_eq!(out, vec![i, i]);
            out.clear();
        }
        assert_eq!(q.notifications(), 0);
    }

    /// A producer blocked on a full queue is woken by the drain that made
    /// room (well before its 100 ms re-check), and that drain is notified.
    #[test]
    fn blocked_producer_is_woken_by_drain() {
        let q = Arc::new(HandoffQueue::new(1, 100));
        q.push(0, 1).unwrap();
        let q2 = Arc::clone(&q);
        let producer = std::thread::spawn(move || {
            let mut items = vec![(1, 1)];
            q2.push_all_blocking(&mut items).unwrap();
        });
        // Wait until the producer is parked waiting for space.
        while q.lock().producers_waiting == 0 {
            std::thread::yield_now();
        }
        let mut out = Vec::new();
        assert!(q.drain(&mut out, Duration::from_millis(1)));
        assert_eq!(out, vec![0]);
        assert_eq!(q.notifications(), 1);
        producer.join().unwrap();
        out.clear();
        assert!(q.drain(&mut out, Duration::from_millis(1)));
        assert_eq!(out, vec![1]);
    }
}
