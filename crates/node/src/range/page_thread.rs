//! One page of a cluster-wide iteration (RESP `SCAN`) on a range thread:
//! [`super::source::page`] blocks (it dials peers), so it never runs on a
//! network thread. The thread counts against the same bound as cluster
//! ranges ([`super::feed::RANGE_THREADS_MAX`]); it hands its page back
//! through a one-item queue and wakes the connection's network thread.

use super::feed::{Busy, Place, Wake, take_place};
use super::source::{Node, Plan, page};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

/// A page's keys and the key the next page starts at (`None`: the
/// iteration is done); or why the page failed.
pub type PageResult = Result<(Vec<Vec<u8>>, Option<Vec<u8>>), String>;

/// The connection's end of a page thread.
#[derive(Debug)]
pub struct PageReceiver {
    rx: Receiver<PageResult>,
}

impl PageReceiver {
    /// The page, once computed; `None` before (the connection is woken
    /// when it is). A thread gone without answering reads as a failure.
    pub fn poll(&self) -> Option<PageResult> {
        match self.rx.try_recv() {
            Ok(result) => Some(result),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err("the page's range thread ended".into())),
        }
    }
}

/// Starts a range thread reading `count` live keys of `plan` over the
/// node `view` gives of `owner`; `wake` is called once the page is queued.
/// `Err`: every range thread is busy, or no thread could start.
pub fn start<S: Send + Sync + 'static>(
    owner: &Arc<S>,
    view: fn(&S) -> Node<'_>,
    wake: Wake,
    plan: Plan,
    count: usize,
) -> Result<PageReceiver, Busy> {
    let ranges = view(owner).ranges;
    take_place(ranges)?;
    let (tx, rx) = sync_channel(1);
    let thread_owner = Arc::clone(owner);
    let spawned = std::thread::Builder::new()
        .name("ataman-scan".into())
        .spawn(move || {
            let node = view(&thread_owner);
            let place = Place(&node.ranges.active);
            let result = match page(&node, &plan, count) {
                Ok((live, next)) => {
                    let keys: Vec<Vec<u8>> = live.into_iter().map(|l| l.key).collect();
                    node.ranges
                        .keys
                        .fetch_add(keys.len() as u64, Ordering::Relaxed);
                    Ok((keys, next))
                }
                Err(e) => {
                    node.ranges.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, "SCAN page failed");
                    Err(e.to_string())
                }
            };
            // The place is free before the connection hears of the page, so
            // a client's next page never finds it still taken.
            drop(place);
            if tx.send(result).is_ok() {
                wake();
            }
        });
    match spawned {
        Ok(_) => {
            ranges.started.fetch_add(1, Ordering::Relaxed);
            Ok(PageReceiver { rx })
        }
        Err(e) => {
            ranges.active.fetch_sub(1, Ordering::AcqRel);
            ranges.refused_busy.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "SCAN page: no thread");
            Err(Busy)
        }
    }
}
