//! The anti-entropy service as the node runs it: the sync hand-off from
//! the network threads (places, tickets, a bounded channel), the node's
//! view the threads take ([`Node`]), and [`start`], which starts the
//! `ataman-sync` and `ataman-rounds` threads.

use crate::cluster::Topology;
use crate::config::NodeConfig;
use crate::hlc::Hlc;
use crate::refill::Refill;
use ataman_engine::Db;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Sync sessions waiting for the `ataman-sync` thread beyond the one it
/// serves; a sync upgrade past this is answered 503 `anti-entropy busy`.
pub const SYNC_SESSIONS_WAITING_MAX: usize = 4;
/// Sessions reserved at most: the one being served plus those waiting.
pub const SYNC_SESSIONS_MAX: usize = SYNC_SESSIONS_WAITING_MAX + 1;

/// A socket upgraded to the sync protocol, on its way to the `ataman-sync` thread.
pub struct Handoff {
    /// The connection (the 101 is already written).
    pub stream: crate::tls::blocking::BlockingStream,
    /// Bytes the network thread read past the upgrade request.
    pub leftover: Vec<u8>,
    /// The session's place; released when the session ends.
    pub ticket: Ticket,
}

/// A reserved session place, released when dropped.
#[derive(Debug)]
pub struct Ticket(Arc<AtomicUsize>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The node's anti-entropy state, shared by the network threads, the
/// `ataman-sync` thread and the `ataman-rounds` thread.
///
/// # Thread safety
/// The session places are one atomic counter; the hand-off channel is a
/// bounded `std::sync::mpsc` channel with room for every place, so a
/// reserved hand-off never blocks; [`super::status::RepairStatus`] and the rate
/// limiter have their own short mutexes; metrics are relaxed atomics.
///
/// # Invariants
/// At most `SYNC_SESSIONS_MAX` tickets exist; every socket in the channel
/// holds one.
pub struct AntiEntropy {
    /// Rounds: running, last finished.
    pub status: super::status::RepairStatus,
    /// `/metrics` counters.
    pub metrics: super::status::SyncMetrics,
    /// Scanned plus sent bytes per second, both threads together.
    pub rate: super::rate::RateLimiter,
    /// Keep-alive period and silence timeouts of sessions.
    pub timing: super::stream::Timing,
    /// Copying for layout transitions: `/metrics` figures.
    pub copy: super::transfer::CopyMetrics,
    /// Repair-based collection: rounds record their completed sessions
    /// here (unset: nothing recorded, as in unit tests).
    pub horizon: std::sync::OnceLock<Arc<super::horizon::RepairHorizon>>,
    reserved: Arc<AtomicUsize>,
    queue: SyncSender<Handoff>,
}

impl AntiEntropy {
    /// The state of a node limited to `rate_bytes` per second, and the
    /// receiving end of its hand-off channel (for [`start`]).
    pub fn new(rate_bytes: u64) -> (AntiEntropy, Receiver<Handoff>) {
        let (queue, receiver) = std::sync::mpsc::sync_channel(SYNC_SESSIONS_MAX);
        let ae = AntiEntropy {
            status: super::status::RepairStatus::default(),
            metrics: super::status::SyncMetrics::default(),
            rate: super::rate::RateLimiter::new(rate_bytes),
            timing: super::stream::Timing::default(),
            copy: super::transfer::CopyMetrics::default(),
            horizon: std::sync::OnceLock::new(),
            reserved: Arc::new(AtomicUsize::new(0)),
            queue,
        };
        (ae, receiver)
    }

    /// A session place, or `None` when the server is busy (the upgrade is
    /// then answered 503 and counted).
    pub fn try_reserve(&self) -> Option<Ticket> {
        let mut n = self.reserved.load(Ordering::Acquire);
        loop {
            if n >= SYNC_SESSIONS_MAX {
                self.metrics
                    .sessions_refused
                    .fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self
                .reserved
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(Ticket(Arc::clone(&self.reserved))),
                Err(seen) => n = seen,
            }
        }
    }

    /// Records rounds for `horizon` from now on, which judges keys by
    /// `placement` until the next round or main-thread chore updates it.
    pub fn adopt_horizon(
        &self,
        horizon: &Arc<super::horizon::RepairHorizon>,
        placement: Arc<crate::cluster::live::Placement>,
    ) {
        horizon.follow(placement);
        let _ = self.horizon.set(Arc::clone(horizon));
    }

    /// Hands an upgraded socket to the `ataman-sync` thread. Never blocks:
    /// the channel has room for every ticket. If the thread is gone
    /// (shutdown), the socket is closed.
    pub fn hand_off(&self, handoff: Handoff) {
        match self.queue.try_send(handoff) {
            Ok(()) => {}
            Err(TrySendError::Full(h) | TrySendError::Disconnected(h)) => drop(h),
        }
    }
}

/// What anti-entropy uses of the node: the engine, the clock, the
/// configuration and cluster, its own shared state, the refill flag and
/// the stop flag (the node state's `antientropy_node` lends them).
#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// The engine.
    pub db: &'a Db,
    /// Write timestamps (observed when versions are applied).
    pub hlc: &'a Hlc,
    /// Configuration.
    pub config: &'a NodeConfig,
    /// The read layout a round or a session works with: the layout the
    /// node started with until [`Node::with_view`] puts in the live read
    /// layout, which every round and every served session does first
    /// (`rounds::run_round`, `server::session`).
    pub topology: &'a Topology,
    /// The live placement the read layout is taken from.
    pub placement: &'a crate::cluster::live::LivePlacement,
    /// Rounds, session places, rate, metrics.
    pub antientropy: &'a AntiEntropy,
    /// Refilling after a wipe.
    pub refill: &'a Refill,
    /// TLS: sessions are dialled with its client configuration.
    pub tls: Option<&'a crate::tls::NodeTls>,
    /// Set on SIGTERM / SIGINT.
    pub shutting_down: &'a AtomicBool,
    /// The cluster secret a sync upgrade proves and demands, if any.
    pub secret: Option<&'a crate::auth::secret::ClusterSecret>,
}

impl<'a> Node<'a> {
    /// True once shutdown started.
    pub fn stopping(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// The live read layout with this node's place in it, or why there is
    /// none (this node is not one of its members: joining, or removed).
    pub fn read_view(&self) -> Result<Topology, String> {
        let placement = self.placement.get();
        placement.read_view().cloned().ok_or_else(|| {
            format!(
                "{} is not a member of the read layout (version {})",
                placement.self_url(),
                placement.read_version()
            )
        })
    }

    /// This view with `view` as its read layout.
    pub fn with_view<'b>(&self, view: &'b Topology) -> Node<'b>
    where
        'a: 'b,
    {
        Node {
            topology: view,
            ..*self
        }
    }
}

/// Starts the `ataman-sync` and `ataman-rounds` threads over `shared`,
/// whose anti-entropy view `node` gives. They end once the view's
/// `stopping()`; join them before closing the engine.
pub fn start<S: Send + Sync + 'static>(
    shared: &Arc<S>,
    node: fn(&S) -> Node<'_>,
    receiver: Receiver<Handoff>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let server = {
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name("ataman-sync".into())
            .spawn(move || super::server::run(&node(&shared), &receiver))?
    };
    let rounds = {
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name("ataman-rounds".into())
            .spawn(move || super::rounds::run(&node(&shared)))?
    };
    Ok(vec![server, rounds])
}
