//! A one-shot hand-back of one value to one blocked thread.
//!
//! [`Db::write`](crate::Db::write) parks its caller until an engine thread
//! runs the write's callback. It used a `sync_channel(1)` for that: a
//! channel allocated per write, a receive that spins and yields before it
//! parks, and a send that wakes the receiver while holding the channel's
//! internal lock. Measured with callgrind on `ataman bench fjall`'s durable
//! put phase, the channel cost ~1,400 instructions per put on the caller
//! and ~450 on the WAL thread (`docs/bench-log/2026-11-22-engine-09-put-latency.md`).
//! Here the value is stored, the lock released, and only then is the
//! waiter unparked: one wake-up, no lock held across it, no allocation
//! beyond one `Arc`.
//!
//! # Thread safety
//! The [`Notifier`] may move to any thread; the [`Waiter`] must wait on the
//! thread that created it (it unparks that thread).
//!
//! # Invariants
//! - `done` becomes true exactly once, after `value` was stored (or the
//!   notifier was dropped without a value), and before the unpark.

use ataman_testkit::lock::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

struct Slot<T> {
    value: Mutex<Option<T>>,
    done: AtomicBool,
    waiter: Thread,
}

/// The sending half: hands one value over (or, dropped, says there is none).
pub struct Notifier<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// The waiting half, bound to the thread that created it.
pub struct Waiter<T> {
    slot: Arc<Slot<T>>,
}

/// A pair whose [`Waiter`] waits on the current thread.
pub fn oneshot<T>() -> (Notifier<T>, Waiter<T>) {
    let slot = Arc::new(Slot {
        value: Mutex::new(None),
        done: AtomicBool::new(false),
        waiter: std::thread::current(),
    });
    (
        Notifier {
            slot: Some(Arc::clone(&slot)),
        },
        Waiter { slot },
    )
}

impl<T> Notifier<T> {
    /// Hands `value` to the waiter and wakes it.
    pub fn send(mut self, value: T) {
        self.finish(Some(value));
    }

    fn finish(&mut self, value: Option<T>) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        {
            let mut stored = lock(&slot.value);
            debug_assert!(stored.is_none());
            *stored = value;
        }
        slot.done.store(true, Ordering::Release);
        // `slot` is our own reference: the waiter may already have returned.
        slot.waiter.unpark();
    }
}

impl<T> Drop for Notifier<T> {
    fn drop(&mut self) {
        self.finish(None);
    }
}

impl<T> Waiter<T> {
    /// Blocks until the notifier sent a value (`Some`) or was dropped
    /// without one (`None`).
    pub fn wait(self) -> Option<T> {
        assert_eq!(
            std::thread::current().id(),
            self.slot.waiter.id(),
            "a oneshot waiter must wait on the thread that created it"
        );
        // `park` may return spuriously; `done` is the truth.
        while !self.slot.done.load(Ordering::Acquire) {
            std::thread::park();
        }
        lock(&self.slot.value).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value sent from another thread reaches the parked waiter.
    #[test]
    fn value_crosses_threads() {
        for i in 0..200u32 {
            let (tx, rx) = oneshot();
            let t = std::thread::spawn(move || tx.send(i));
            assert_eq!(rx.wait(), Some(i));
            t.join().unwrap();
        }
    }

    /// A value sent before the wait is not lost.
    #[test]
    fn send_before_wait() {
        let (tx, rx) = oneshot();
        tx.send("early");
        assert_eq!(rx.wait(), Some("early"));
    }

    /// A notifier dropped without sending releases the waiter with `None`
    /// (an engine that closes without running a callback must not hang its caller).
    #[test]
    fn dropped_notifier_releases_waiter() {
        let (tx, rx) = oneshot::<u64>();
        let t = std::thread::spawn(move || drop(tx));
        assert_eq!(rx.wait(), None);
        t.join().unwrap();
    }
}
