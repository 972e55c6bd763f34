//! `GET /v0/layout/plan?add=URL…&remove=URL…[&replication_factor=R]` off
//! the network thread: the request's parameters to the planned layout
//! ([`planned`]), then one scan of the engine on an `ataman-plan` thread
//! ([`start`]), whose JSON answer ([`super::plan::render_json`]) comes back
//! through a one-item queue, the connection's thread woken when it is
//! there (the pattern of `crate::range::page_thread`).
//!
//! Not routed yet: the route needs a deferred answer kind in the
//! connection code (`net/conn.rs`), which is being split; this is what it
//! will call.

use super::plan::{render_json, scan_sends};
use crate::cluster::layout::{Change, Layout};
use ataman_engine::Db;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

/// Plans computed at once on a node; one more is answered 503.
pub const PLAN_THREADS_MAX: usize = 1;
/// URLs a plan may add and remove together.
pub const PLAN_URLS_MAX: usize = 64;

/// Wakes the network thread of the connection waiting for the plan.
pub type Wake = Box<dyn Fn() + Send>;

/// A plan's JSON answer, or why it failed (500).
pub type PlanResult = Result<String, String>;

/// The places of plan threads, shared by the network threads.
#[derive(Debug, Default)]
pub struct PlanThreads {
    active: Arc<AtomicUsize>,
}

/// Every plan thread is busy (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a plan is being computed; try again")]
pub struct PlanBusy;

/// The connection's end of a plan thread.
#[derive(Debug)]
pub struct PlanReceiver {
    rx: Receiver<PlanResult>,
}

impl PlanReceiver {
    /// The answer, once computed; `None` before.
    pub fn poll(&self) -> Option<PlanResult> {
        match self.rx.try_recv() {
            Ok(result) => Some(result),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err("the plan thread ended".into())),
        }
    }
}

/// The layout a plan request names, from `current` (400 with the text
/// when a parameter is bad or the change is refused).
pub fn planned<'a>(
    current: &Layout,
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Layout, String> {
    let mut change = Change::default();
    for (name, value) in params {
        match name {
            "add" => change.add.push(value.to_owned()),
            "remove" => change.remove.push(value.to_owned()),
            "replication_factor" if change.replication_factor.is_none() => {
                let r = value
                    .parse::<usize>()
                    .map_err(|_| format!("bad replication_factor: {value:?}"))?;
                change.replication_factor = Some(r);
            }
            _ => return Err(format!("unexpected parameter {name:?}")),
        }
        if change.add.len() + change.remove.len() > PLAN_URLS_MAX {
            return Err(format!("more than {PLAN_URLS_MAX} URLs to add and remove"));
        }
    }
    current.apply(&change).map_err(|e| e.to_string())
}

/// Starts a plan thread scanning `db` for node `me`'s sends from `old` to
/// `new`; `wake` is called once the answer is queued.
pub fn start(
    threads: &PlanThreads,
    db: Arc<Db>,
    old: Layout,
    new: Layout,
    me: String,
    wake: Wake,
) -> Result<PlanReceiver, PlanBusy> {
    let active = Arc::clone(&threads.active);
    if active
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < PLAN_THREADS_MAX).then_some(n + 1)
        })
        .is_err()
    {
        return Err(PlanBusy);
    }
    let (tx, rx) = sync_channel(1);
    let release = Arc::clone(&active);
    let spawned = std::thread::Builder::new()
        .name("ataman-plan".into())
        .spawn(move || {
            let result = scan_sends(&db, &old, &new, &me).map(|s| render_json(new.version, &s));
            release.fetch_sub(1, Ordering::AcqRel);
            let _ = tx.send(result);
            wake();
        });
    match spawned {
        Ok(_) => Ok(PlanReceiver { rx }),
        Err(_) => {
            active.fetch_sub(1, Ordering::AcqRel);
            Err(PlanBusy)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_engine::{Durability, Options, WalMode, WriteBatch};
    use std::time::{Duration, Instant};

    /// The parameters name the planned layout; a plan thread answers the
    /// node's sends as JSON and wakes its connection; a second plan while
    /// one runs would be busy (checked on the counter).
    #[test]
    fn a_plan_thread_answers_the_sends() {
        let urls: Vec<String> = (1..=3).map(|i| format!("http://127.0.0.1:{i}")).collect();
        let old = Layout::bootstrap(&urls, Some(3)).unwrap();
        let new = planned(&old, [("add", "http://127.0.0.1:9")]).unwrap();
        assert_eq!((new.version, new.nodes.len()), (2, 4));
        assert!(planned(&old, [("remove", "http://127.0.0.1:8")]).is_err());
        assert!(planned(&old, [("bogus", "1")]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            wal_mode: WalMode::None,
            ..Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), opts).unwrap());
        let mut batch = WriteBatch::new();
        for i in 0..200u64 {
            batch.put(format!("k{i}").as_bytes(), b"vv", 10 + i);
        }
        db.write(batch, Durability::Complete).unwrap();
        let threads = PlanThreads::default();
        let woken = Arc::new(AtomicUsize::new(0));
        let w = Arc::clone(&woken);
        let rx = start(
            &threads,
            Arc::clone(&db),
            old.clone(),
            new.clone(),
            urls[0].clone(),
            Box::new(move || {
                w.fetch_add(1, Ordering::AcqRel);
            }),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let answer = loop {
            if let Some(a) = rx.poll() {
                break a.unwrap();
            }
            assert!(Instant::now() < deadline, "no plan within 30 s");
            std::thread::sleep(Duration::from_millis(5));
        };
        // With R = 3 of 3, node 1 is the first old replica by rank of about
        // a third of the keys, and the new node gains about three quarters
        // of those: about 50 of 200 are node 1's to send.
        let items = (0..200u64).map(|i| (format!("k{i}").into_bytes(), 0));
        let sends = super::super::plan::tally(&old, &new, &urls[0], items).unwrap();
        let keys = sends["http://127.0.0.1:9"].keys;
        assert!((20..100).contains(&keys), "{keys}");
        assert!(answer.contains(&format!("\"keys\":{keys},")), "{answer}");
        assert_eq!(woken.load(Ordering::Acquire), 1);
        assert_eq!(threads.active.load(Ordering::Acquire), 0);
    }
}
