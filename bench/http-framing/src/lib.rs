//! Shared by both benchmark servers: the queue into the stand-in transaction thread.
//!
//! It follows the node's rule for queues between threads: the producer wakes the
//! consumer only when the queue went from empty to non-empty, and the consumer drains
//! everything queued in one wake-up. (Unbounded here: the benchmark never fills it.)

use std::sync::{Arc, Mutex};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

pub struct TxQueue<T> {
    items: Mutex<Vec<T>>,
    consumer: Thread,
}

impl<T: Send + 'static> TxQueue<T> {
    /// Starts the consumer thread; `apply` gets every drained batch (and may leave it non-empty:
    /// it is cleared afterwards).
    pub fn spawn(name: &str, mut apply: impl FnMut(&mut Vec<T>) + Send + 'static) -> Arc<TxQueue<T>> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Arc<TxQueue<T>>>();
        let handle = thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let q = ready_rx.recv().expect("queue");
                let mut batch = Vec::new();
                // Batch-size statistics, printed to stderr every 5 s while there is traffic.
                let (mut batches, mut items_total, mut last) = (0u64, 0u64, Instant::now());
                loop {
                    {
                        let mut items = q.items.lock().unwrap();
                        std::mem::swap(&mut *items, &mut batch);
                    }
                    if batch.is_empty() {
                        thread::park();
                        continue;
                    }
                    batches += 1;
                    items_total += batch.len() as u64;
                    apply(&mut batch);
                    batch.clear();
                    if last.elapsed() >= Duration::from_secs(5) {
                        eprintln!(
                            "tx: {batches} wake-ups, {items_total} writes, {:.2} writes per wake-up",
                            items_total as f64 / batches as f64
                        );
                        (batches, items_total, last) = (0, 0, Instant::now());
                    }
                }
            })
            .expect("spawn");
        let q = Arc::new(TxQueue { items: Mutex::new(Vec::new()), consumer: handle.thread().clone() });
        ready_tx.send(q.clone()).expect("send queue");
        q
    }

    pub fn push(&self, item: T) {
        let was_empty = {
            let mut items = self.items.lock().unwrap();
            let was_empty = items.is_empty();
            items.push(item);
            was_empty
        };
        if was_empty {
            self.consumer.unpark();
        }
    }

    /// Moves all of `batch` into the queue with one lock and at most one wake-up.
    pub fn push_all(&self, batch: &mut Vec<T>) {
        if batch.is_empty() {
            return;
        }
        let was_empty = {
            let mut items = self.items.lock().unwrap();
            let was_empty = items.is_empty();
            items.append(batch);
            was_empty
        };
        if was_empty {
            self.consumer.unpark();
        }
    }
}
