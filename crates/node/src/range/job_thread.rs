//! A connection's short job that reads much of the engine (RESP `DBSIZE`
//! and `INFO`'s key counts) on a range thread, so it never runs on a
//! network thread. The thread counts against
//! the same bound as cluster ranges and `SCAN` pages
//! ([`super::feed::RANGE_THREADS_MAX`]) and in the same counters; it hands
//! its result back through a one-item queue and wakes the connection's
//! network thread.

use super::feed::{Busy, Place, Ranges, Wake, take_place};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

/// The connection's end of a job thread.
#[derive(Debug)]
pub struct JobReceiver<T> {
    rx: Receiver<T>,
}

impl<T> JobReceiver<T> {
    /// The result, once computed; `None` before (the connection is woken
    /// when it is); `Some(Err)` when the thread ended without one.
    pub fn poll(&self) -> Option<Result<T, String>> {
        match self.rx.try_recv() {
            Ok(result) => Some(Ok(result)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err("the job's range thread ended".into())),
        }
    }
}

/// Starts a range thread running `job` on `owner`, whose range threads
/// `ranges` gives; `wake` is called once the result is queued. `Err`:
/// every range thread is busy, or no thread could start.
pub fn start<S, T, F>(
    owner: &Arc<S>,
    ranges: fn(&S) -> &Ranges,
    job: F,
    wake: Wake,
) -> Result<JobReceiver<T>, Busy>
where
    S: Send + Sync + 'static,
    T: Send + 'static,
    F: FnOnce(&S) -> T + Send + 'static,
{
    let bound = ranges(owner);
    take_place(bound)?;
    let (tx, rx) = sync_channel(1);
    let thread_owner = Arc::clone(owner);
    let spawned = std::thread::Builder::new()
        .name("ataman-count".into())
        .spawn(move || {
            let place = Place(&ranges(&thread_owner).active);
            let result = job(&thread_owner);
            // The place is free before the connection hears of the result.
            drop(place);
            if tx.send(result).is_ok() {
                wake();
            }
        });
    match spawned {
        Ok(_) => {
            bound.started.fetch_add(1, Ordering::Relaxed);
            Ok(JobReceiver { rx })
        }
        Err(e) => {
            bound.active.fetch_sub(1, Ordering::AcqRel);
            bound.refused_busy.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "a range job: no thread");
            Err(Busy)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::feed::RANGE_THREADS_MAX;

    /// A job runs on its own thread, its result comes back, its place is
    /// given back; past the bound a job is refused.
    #[test]
    fn runs_off_the_callers_thread_within_the_bound() {
        let owner = Arc::new(Ranges::default());
        let caller = std::thread::current().id();
        let (woke_tx, woke_rx) = std::sync::mpsc::channel();
        let job = start(
            &owner,
            |r| r,
            move |_| std::thread::current().id(),
            Box::new(move || {
                let _ = woke_tx.send(());
            }),
        )
        .unwrap();
        woke_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        let ran_on = job.poll().unwrap().unwrap();
        assert_ne!(ran_on, caller);
        assert_eq!(owner.active.load(Ordering::Acquire), 0);
        assert_eq!(owner.started.load(Ordering::Relaxed), 1);
        owner.active.store(RANGE_THREADS_MAX, Ordering::Release);
        assert!(start(&owner, |r| r, |_| (), Box::new(|| {})).is_err());
    }
}
