//! The layout endpoints' blocking work off the network threads: an
//! acceptor's answer fsyncs, and a change request waits seconds on its
//! voters. Each job runs on a thread of its own, at most
//! [`LAYOUT_WORKERS_MAX`] at once; past that a job is refused (503) rather
//! than queued. A job hands its whole result back through a one-item
//! queue and then calls the caller's wake-up (the connection's network
//! thread, as a `SCAN` page's range thread does).
//!
//! A client's job (a change request, a plan) starts only while fewer than
//! [`LAYOUT_CLIENT_WORKERS_MAX`] jobs run: the other places stay for the
//! peers' agreement and gossip requests, so clients holding every one of
//! their places (a change waiting on a slow added node) do not make the
//! node look down to its peers (`GET /v0/cluster/health`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

/// Layout jobs (change requests and internal agreement requests) running
/// at once on a node.
/// Each peer's gossip takes one for a moment every second
/// (the layout gossip thread), hence room for more than a few.
pub const LAYOUT_WORKERS_MAX: usize = 16;
/// Layout jobs running at once past which a client's job is refused (the
/// rest are kept for the peers' requests).
pub const LAYOUT_CLIENT_WORKERS_MAX: usize = LAYOUT_WORKERS_MAX / 2;

/// Wakes whoever waits for a job's result.
pub type Wake = Box<dyn Fn() + Send>;

/// The bound on running jobs.
#[derive(Debug, Default)]
pub struct Workers {
    active: Arc<AtomicUsize>,
}

/// Every worker is busy, or no thread could start (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} layout requests already running: retry in a second")]
pub struct Busy(pub usize);

/// The waiting end of a job.
#[derive(Debug)]
pub struct JobReceiver<T> {
    rx: Receiver<T>,
}

impl<T> JobReceiver<T> {
    /// The result once the job is done; `None` before. `Some(None)`: the
    /// job's thread ended without a result (it panicked).
    pub fn poll(&self) -> Option<Option<T>> {
        match self.rx.try_recv() {
            Ok(result) => Some(Some(result)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(None),
        }
    }
}

/// Gives a worker's place back when dropped (also on a panic).
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Workers {
    /// Jobs running now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// Runs a peer's `job` on a new thread named `name`, then `wake`;
    /// `Err` when [`LAYOUT_WORKERS_MAX`] jobs are running or no thread
    /// could start.
    pub fn start<T: Send + 'static>(
        &self,
        name: &str,
        job: impl FnOnce() -> T + Send + 'static,
        wake: Wake,
    ) -> Result<JobReceiver<T>, Busy> {
        self.start_within(LAYOUT_WORKERS_MAX, name, job, wake)
    }

    /// [`Workers::start`] for a client's job: `Err` once
    /// [`LAYOUT_CLIENT_WORKERS_MAX`] jobs (of any kind) are running.
    pub fn start_client<T: Send + 'static>(
        &self,
        name: &str,
        job: impl FnOnce() -> T + Send + 'static,
        wake: Wake,
    ) -> Result<JobReceiver<T>, Busy> {
        self.start_within(LAYOUT_CLIENT_WORKERS_MAX, name, job, wake)
    }

    fn start_within<T: Send + 'static>(
        &self,
        limit: usize,
        name: &str,
        job: impl FnOnce() -> T + Send + 'static,
        wake: Wake,
    ) -> Result<JobReceiver<T>, Busy> {
        let taken = self
            .active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(Busy(limit));
        }
        let place = Place(Arc::clone(&self.active));
        let (tx, rx) = sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let place = place;
                let result = job();
                // The place is free before the waiter hears of the result.
                drop(place);
                if tx.send(result).is_ok() {
                    wake();
                }
            });
        match spawned {
            Ok(_) => Ok(JobReceiver { rx }),
            // The closure (and its place) was dropped: the place is free.
            Err(_) => Err(Busy(limit)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    fn wait<T>(job: &JobReceiver<T>) -> Option<T> {
        for _ in 0..2000 {
            if let Some(result) = job.poll() {
                return result;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("job did not finish in 10 s");
    }

    /// A job's result comes back after its wake-up; at the bound a job is
    /// refused, and the places come back once the jobs end (a panicking
    /// job too, read as no result).
    #[test]
    fn bounded_and_places_come_back() {
        let workers = Workers::default();
        let (woken_tx, woken) = channel();
        let gate = Arc::new(Barrier::new(LAYOUT_WORKERS_MAX + 1));
        let mut jobs = Vec::new();
        for i in 0..LAYOUT_WORKERS_MAX {
            let gate = Arc::clone(&gate);
            let woken_tx = woken_tx.clone();
            let job = workers
                .start(
                    "t",
                    move || {
                        gate.wait();
                        i
                    },
                    Box::new(move || woken_tx.send(()).unwrap()),
                )
                .unwrap();
            jobs.push(job);
        }
        assert_eq!(workers.active(), LAYOUT_WORKERS_MAX);
        assert_eq!(
            workers.start("t", || 0, Box::new(|| {})).err(),
            Some(Busy(LAYOUT_WORKERS_MAX))
        );
        assert!(jobs[0].poll().is_none());
        gate.wait();
        for (i, job) in jobs.iter().enumerate() {
            assert_eq!(wait(job), Some(i));
        }
        for _ in 0..LAYOUT_WORKERS_MAX {
            woken.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        assert_eq!(workers.active(), 0);
        let panics = workers
            .start("t", || -> u8 { panic!("job fails") }, Box::new(|| {}))
            .unwrap();
        assert_eq!(wait(&panics), None);
        assert_eq!(workers.active(), 0);
    }

    /// Clients holding every place they may take leave the rest to the
    /// peers: a further client job is refused, a peer's job still starts
    /// (and up to the whole bound).
    #[test]
    fn clients_leave_places_for_the_peers() {
        let workers = Workers::default();
        let gate = Arc::new(Barrier::new(LAYOUT_WORKERS_MAX + 1));
        let hold = |gate: &Arc<Barrier>| {
            let gate = Arc::clone(gate);
            move || {
                gate.wait();
            }
        };
        let mut jobs = Vec::new();
        for _ in 0..LAYOUT_CLIENT_WORKERS_MAX {
            jobs.push(
                workers
                    .start_client("t", hold(&gate), Box::new(|| {}))
                    .unwrap(),
            );
        }
        assert_eq!(
            workers.start_client("t", || (), Box::new(|| {})).err(),
            Some(Busy(LAYOUT_CLIENT_WORKERS_MAX))
        );
        for _ in LAYOUT_CLIENT_WORKERS_MAX..LAYOUT_WORKERS_MAX {
            jobs.push(workers.start("t", hold(&gate), Box::new(|| {})).unwrap());
        }
        assert_eq!(workers.active(), LAYOUT_WORKERS_MAX);
        assert_eq!(
            workers.start("t", || (), Box::new(|| {})).err(),
            Some(Busy(LAYOUT_WORKERS_MAX))
        );
        gate.wait();
        for job in &jobs {
            assert_eq!(wait(job), Some(()));
        }
    }
}
