//! One simulated node's process: its engine on its own simulated disk, its
//! hybrid logical clock on the virtual clock, and what a crash, a restart
//! or a disk fault does to them.
//!
//! The node coordinates requests and delivers hints with the real node's
//! driver (`ataman_node::replication::driver::Replicator`), which
//! the run's driver (`sim`) feeds with events and whose actions it
//! carries out; serving peers is in `replica` (an `impl SimNode` block), the
//! hints it keeps in a [`HintStore`].
//!
//! # Determinism
//! The engine runs threads; the node keeps their effects on the disk
//! deterministic by only ever waiting for them:
//! - every write is [`Db::write`] with [`Durability::Complete`], which
//!   returns once the WAL thread is done with it;
//! - automatic compaction is off; a flush or compaction runs when the
//!   world's random number generator says so, and is followed by
//!   [`SimNode::settle`]: close (which joins every engine thread) and
//!   reopen, so no thread is still removing files when the next crash
//!   image is taken;
//! - a restart after a crash waits for the background flush of the
//!   replayed WAL tail, then settles, before anything else happens;
//! - disk faults are armed per kind of file (WAL, SSTable, manifest), each
//!   written by one engine thread at a time, never on directory syncs,
//!   which the WAL and background threads both do during a flush (which of
//!   them would meet the fault would depend on thread timing);
//! - tombstones and expired versions are dropped by compactions past a
//!   short grace once the node's repair-based horizon allows
//!   ([`crate::collection`]), or never when the node is given no horizon
//!   (the grace is then longer than any run); the planted bug
//!   `drop-expired-without-tombstone` drops an expired one outright;
//! - the engine reads expiry and the grace from [`SimClock`]: the virtual
//!   time plus the node's skew, the same wall clock its hybrid logical
//!   clock reads.

use crate::collection::{SIM_TOMBSTONE_GRACE, SimHorizon};
use crate::config::{CrashKind, EPOCH_MS, REPLICATION_TIMEOUT_MS};
use crate::hint_store::HintStore;
use ataman_engine::fs::FileSystem;
use ataman_engine::fs::sim::SimFs;
use ataman_engine::{Db, Durability, Options, WalMode, WriteBatch};
use ataman_node::clock_file;
use ataman_node::hlc::Hlc;
use ataman_node::peer::frame::Stamped;
use ataman_node::replication::driver::{DriverConfig, Replicator};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Where each node's engine lives on its simulated disk.
pub const DATA_DIR: &str = "/data";

/// Memtable size: no simulated run fills it, so the engine never rotates
/// a memtable on its own (only [`SimNode::flush`] and close do).
pub const SIM_MEMTABLE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Tombstone grace period of a node given no collection: longer than any
/// run, so compaction keeps every tombstone whatever the real clock says.
pub const SIM_TOMBSTONE_GRACE_NEVER: Duration = Duration::from_secs(1000 * 365 * 24 * 3600);

/// A node's wall clock as its engine reads it: the run's virtual time
/// (shared with the world) plus the node's skew, from [`EPOCH_MS`].
#[derive(Debug, Default)]
pub struct SimClock {
    now_ms: Arc<AtomicU64>,
    skew_ms: AtomicI64,
}

impl SimClock {
    /// A clock reading the virtual time in `now_ms`, not skewed.
    pub fn new(now_ms: Arc<AtomicU64>) -> Arc<SimClock> {
        Arc::new(SimClock {
            now_ms,
            skew_ms: AtomicI64::new(0),
        })
    }
}

impl ataman_engine::Clock for SimClock {
    fn now_ms(&self) -> u64 {
        (EPOCH_MS + self.now_ms.load(Ordering::SeqCst))
            .saturating_add_signed(self.skew_ms.load(Ordering::SeqCst))
    }
}

/// What every engine a node opens is given besides its disk.
#[derive(Debug, Clone, Default)]
pub struct EngineSetup {
    /// The clock expiry and the tombstone grace read.
    pub clock: Arc<SimClock>,
    /// Arms the engine's planted bug: compaction drops expired versions
    /// without a tombstone (`--planted-bug drop-expired-without-tombstone`).
    pub planted_drop_expired: bool,
    /// When dead versions are collected ([`Collection`]).
    pub collection: Collection,
}

/// When a node's compactions drop tombstones and expired versions.
#[derive(Debug, Clone, Default)]
pub enum Collection {
    /// Never: the grace is longer than any run.
    #[default]
    Never,
    /// Past the short grace once the node's repair-based horizon allows
    /// ([`crate::collection`]).
    Repaired(Arc<SimHorizon>),
    /// Past the short grace alone (the planted `collect-on-grace-alone`).
    GraceAlone,
}

/// Where a coordinated request's answer goes: the client operation's
/// index in the run's history (`history::OpId`).
pub type OpId = usize;

/// A key's newest version on one node.
pub type State = BTreeMap<Vec<u8>, Stamped>;

/// What a restart found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reopened {
    /// The engine opened on the crash image.
    Clean,
    /// It refused to open (the error); opened with `force_recovery`.
    Forced(String),
    /// It refused to open even with `force_recovery` (the errors); the node
    /// starts over on an empty disk.
    Wiped(String),
    /// The engine opened but the clock did not start (its `CLOCK` did not
    /// parse, or the first reservation was not written): `ataman serve`
    /// would stop there. The simulated node runs on, its clock past the
    /// newest stored timestamp; the checker reports it as unrecoverable.
    ClockFailed(String),
}

/// One simulated node.
pub struct SimNode {
    /// The node's index in the cluster list.
    pub index: usize,
    /// Its disk.
    pub(crate) fs: SimFs,
    /// Its engine, `None` while the node is down.
    pub(crate) db: Option<Db>,
    /// Its clock, bounded by a reservation it persists in the node's own
    /// `CLOCK` file on the node's disk (`ataman_node::clock_file`, written
    /// through the simulated file system, so crash images meet it).
    pub(crate) hlc: Hlc,
    /// Raised by every crash: answers and timers of an older incarnation are ignored.
    pub(crate) incarnation: u64,
    /// How far its wall clock is from the virtual clock, milliseconds.
    pub(crate) skew_ms: i64,
    /// Its WAL mode.
    pub(crate) wal_mode: WalMode,
    /// Nodes in the cluster.
    pub(crate) nodes: usize,
    /// The requests it coordinates and its hint rounds (lost in a crash):
    /// the real node's driver.
    pub driver: Replicator<OpId>,
    /// Writes peers missed (see [`HintStore`] for what survives a crash).
    pub hints: HintStore,
    /// A restart is scheduled (after a crash or a disk failure).
    pub(crate) restart_scheduled: bool,
    /// How the node last went down (while it is down: how it is down).
    pub(crate) last_crash: Option<CrashKind>,
    /// Copies removed by a layout cleanup (`sim::membership`): key -> the
    /// timestamp dropped. The engine has no purge, so a drop is a mask
    /// over it (as durable as the disk: it survives crashes); a later
    /// write of the key lifts it.
    pub(crate) dropped: std::cell::RefCell<BTreeMap<Vec<u8>, u64>>,
    /// The engine's clock and planted bug.
    pub(crate) engine: EngineSetup,
    /// Tombstones and expired versions its engines dropped (counted at
    /// each settle, from the engine's counters since it opened).
    pub collected: u64,
    /// Its node id in the layout (its clock's node bits), as its `LAYOUT`
    /// keeps it (it survives crashes); `None` while it is no member
    /// (joining), when its clock stamps nothing and it serves no client.
    pub(crate) node_id: Option<u16>,
}

fn options(fs: &SimFs, wal_mode: WalMode, force_recovery: bool, engine: &EngineSetup) -> Options {
    Options {
        clock: Arc::clone(&engine.clock) as Arc<dyn ataman_engine::Clock>,
        planted_drop_expired_without_tombstone: engine.planted_drop_expired,
        fs: Arc::new(fs.clone()),
        wal_mode,
        memtable_bytes_max: SIM_MEMTABLE_BYTES_MAX,
        wal_segment_preallocate_bytes: 0,
        block_cache_bytes: 1024 * 1024,
        tombstone_grace: match engine.collection {
            Collection::Never => SIM_TOMBSTONE_GRACE_NEVER,
            Collection::Repaired(_) | Collection::GraceAlone => SIM_TOMBSTONE_GRACE,
        },
        collection_horizon: match &engine.collection {
            Collection::Repaired(h) => Some(SimHorizon::engine_hook(h)),
            Collection::Never | Collection::GraceAlone => None,
        },
        background_compaction: false,
        force_recovery,
        ..Options::default()
    }
}

fn open_db(
    fs: &SimFs,
    wal_mode: WalMode,
    force_recovery: bool,
    engine: &EngineSetup,
) -> Result<Db, String> {
    Db::open(
        Path::new(DATA_DIR),
        options(fs, wal_mode, force_recovery, engine),
    )
    .map_err(|e| e.to_string())
}

/// The driver of node `index` of `nodes`, idle.
fn driver(index: usize, nodes: usize) -> Replicator<OpId> {
    Replicator::new(DriverConfig {
        self_index: index,
        nodes,
        timeout_ms: REPLICATION_TIMEOUT_MS,
        planted_older_repair: false,
    })
}

/// A clock stamping with node id `id` (none: it stamps nothing),
/// persisting its reservations to the `CLOCK` file in [`DATA_DIR`] on
/// `fs` with the node's own code (`ataman_node::clock_file`), as
/// `ataman serve` does in its data directory.
fn reserving_clock(id: Option<u16>, fs: &SimFs) -> Hlc {
    let fs = fs.clone();
    let clock = Hlc::with_reservation(
        0,
        Box::new(move |ts, _| clock_file::write_on(&fs, Path::new(DATA_DIR), ts)),
    );
    clock.set_node(id);
    clock
}

/// Starts `clock` past the reservation its last run left in `fs`'s
/// `CLOCK` and past `stored` (the newest stored timestamp), then persists
/// a first reservation, as `ataman serve` does (`start_clock`). The
/// restart happens at no particular virtual time, so where the node would
/// wait for the wall clock to pass a close reservation
/// (`hlc::Restore::WaitUntilMs`) the simulated node observes it instead:
/// either way the clock starts above it. The error: `CLOCK` did not parse,
/// or the first reservation could not be written (the node would not start).
fn start_clock(clock: &Hlc, fs: &SimFs, wall_ms: u64, stored: u64) -> Result<(), String> {
    use ataman_node::hlc::{Restore, restore_plan};
    clock.observe(stored);
    let reserved = clock_file::read_on(fs, Path::new(DATA_DIR))?;
    match (restore_plan(reserved, wall_ms), reserved) {
        (Restore::Nothing, _) | (_, None) => {}
        (Restore::WaitUntilMs(_) | Restore::Observe(_), Some(r)) => clock.observe(r),
    }
    clock
        .renew_at(wall_ms)
        .map_err(|e| format!("cannot start the clock: {e}"))
}

impl SimNode {
    /// Node `index` of a cluster of `nodes` with an empty disk, up.
    pub fn new(index: usize, nodes: usize, wal_mode: WalMode) -> Result<SimNode, String> {
        SimNode::with_engine(index, nodes, wal_mode, EngineSetup::default())
    }

    /// Like [`SimNode::new`], its engine given `engine`'s clock and planted bug.
    pub fn with_engine(
        index: usize,
        nodes: usize,
        wal_mode: WalMode,
        engine: EngineSetup,
    ) -> Result<SimNode, String> {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new(DATA_DIR))
            .map_err(|e| e.to_string())?;
        let db = open_db(&fs, wal_mode, false, &engine)?;
        // A fixed cluster's ids: list order, as a bootstrap layout gives them.
        let hlc = reserving_clock(Some(index as u16), &fs);
        start_clock(
            &hlc,
            &fs,
            ataman_engine::Clock::now_ms(&*engine.clock),
            db.timestamp_max(),
        )?;
        Ok(SimNode {
            index,
            fs,
            db: Some(db),
            hlc,
            incarnation: 0,
            skew_ms: 0,
            wal_mode,
            nodes,
            driver: driver(index, nodes),
            hints: HintStore::default(),
            restart_scheduled: false,
            last_crash: None,
            dropped: std::cell::RefCell::new(BTreeMap::new()),
            engine,
            collected: 0,
            node_id: Some(index as u16),
        })
    }

    /// True while the process runs.
    pub fn is_up(&self) -> bool {
        self.db.is_some()
    }

    /// The current incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The node's wall clock at virtual time `now_ms`, milliseconds since the Unix epoch.
    pub fn wall_ms(&self, now_ms: u64) -> u64 {
        (EPOCH_MS + now_ms).saturating_add_signed(self.skew_ms)
    }

    /// Steps the node's wall clock to `skew_ms` off the virtual clock.
    pub fn set_skew(&mut self, skew_ms: i64) {
        self.skew_ms = skew_ms;
        self.engine.clock.skew_ms.store(skew_ms, Ordering::SeqCst);
    }

    /// Its node id (`None`: not a member, it stamps nothing).
    pub fn node_id(&self) -> Option<u16> {
        self.node_id
    }

    /// Gives the node its id from the layout (kept across crashes, as the
    /// real node keeps its `LAYOUT`); the clock stamps with it from now on.
    pub fn set_node_id(&mut self, id: Option<u16>) {
        self.node_id = id;
        self.hlc.set_node(id);
    }

    /// A timestamp for a write this node coordinates at `now_ms`; `None`
    /// while the node holds no node id.
    pub fn stamp(&self, now_ms: u64) -> Option<u64> {
        match self.hlc.now_at(self.wall_ms(now_ms)) {
            Ok(ts) => Some(ts),
            Err(ataman_node::hlc::Unstamped::NoNodeId) => None,
            // No disk fault is armed on `CLOCK` (`faults::DISK_FAULT_FILES`):
            // persisting a reservation never fails.
            Err(e) => unreachable!("{e}"),
        }
    }

    /// Applies `version` of `key` durably (as a replica does with a peer's
    /// write, or the coordinator with its local one).
    pub fn write(&self, key: &[u8], version: &Stamped) -> Result<(), String> {
        self.write_all(std::iter::once((key, version)))
    }

    /// Applies several versions durably in one atomic batch.
    pub fn write_all<'a>(
        &self,
        versions: impl Iterator<Item = (&'a [u8], &'a Stamped)>,
    ) -> Result<(), String> {
        let db = self.db.as_ref().ok_or("node is down")?;
        let mut batch = WriteBatch::new();
        let mut dropped = self.dropped.borrow_mut();
        for (key, version) in versions {
            dropped.remove(key);
            version.add_to(&mut batch, key);
        }
        db.write(batch, Durability::Complete)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// The newest version of `key` on this node.
    pub fn read(&self, key: &[u8]) -> Result<Option<Stamped>, String> {
        let db = self.db.as_ref().ok_or("node is down")?;
        let masked = self.dropped.borrow().get(key).copied();
        db.get(key)
            .map(|e| {
                e.filter(|e| masked.is_none_or(|d| e.ts > d))
                    .map(Stamped::from_entry)
            })
            .map_err(|e| e.to_string())
    }

    /// Every key's newest version on this node, tombstones included.
    pub fn state(&self) -> Result<State, String> {
        let db = self.db.as_ref().ok_or("node is down")?;
        let mut state = State::new();
        for item in db.scan(b"", None, true).map_err(|e| e.to_string())? {
            let (key, entry) = item.map_err(|e| e.to_string())?;
            if self
                .dropped
                .borrow()
                .get(&key)
                .is_some_and(|&d| entry.ts <= d)
            {
                continue;
            }
            state.insert(key, Stamped::from_entry(entry));
        }
        Ok(state)
    }

    /// Drops this node's copy of `key` (a layout cleanup): reads and the
    /// state no longer see the version it holds, `ts`.
    pub fn drop_copy(&self, key: &[u8], ts: u64) {
        let mut dropped = self.dropped.borrow_mut();
        let slot = dropped.entry(key.to_vec()).or_insert(0);
        *slot = (*slot).max(ts);
    }

    /// True when the engine refuses writes after a failed write or sync.
    pub fn poisoned(&self) -> bool {
        self.db
            .as_ref()
            .is_some_and(|db| db.stats().poisoned.is_some())
    }

    /// The process dies: power loss (only synced data survives, the
    /// image's choices drawn from `image_seed`) or kill -9. Requests in
    /// flight are forgotten; hints survive as the hint store's WAL mode
    /// allows (see [`HintStore::crash`]).
    pub fn crash(&mut self, kind: CrashKind, image_seed: u64) {
        let image = match kind {
            CrashKind::PowerLoss => self.fs.crash_image(image_seed),
            CrashKind::Kill => self.fs.process_crash_image(),
        };
        // The image is taken while the engine's threads are idle; only then
        // does the old engine go (its last actions touch the old disk only).
        drop(self.db.take());
        self.fs = image;
        self.incarnation += 1;
        self.driver = driver(self.index, self.nodes);
        self.hints.crash(kind, self.wal_mode);
        self.last_crash = Some(kind);
    }

    /// True while the node is down after a power loss: its machine is off,
    /// so nothing answers a connection (no reset, no refusal).
    pub fn powered_off(&self) -> bool {
        !self.is_up() && self.last_crash == Some(CrashKind::PowerLoss)
    }

    /// Starts the process again on what its disk holds: the engine
    /// recovers, the clock starts past its last reservation and the newest
    /// stored timestamp (as `ataman serve` does), then the engine is settled.
    ///
    /// The restart happens at no particular virtual time, so where
    /// `ataman serve` would wait for the wall clock to pass a close
    /// reservation (`hlc::Restore::WaitUntilMs`) the simulated node
    /// observes the reservation instead: either way the clock starts above
    /// it (and the wall clock is past it when the reservation is behind).
    pub fn restart(&mut self) -> Reopened {
        assert!(self.db.is_none(), "restart of a running node");
        let (db, reopened) = match open_db(&self.fs, self.wal_mode, false, &self.engine) {
            Ok(db) => (Some(db), Reopened::Clean),
            Err(first) => match open_db(&self.fs, self.wal_mode, true, &self.engine) {
                Ok(db) => (Some(db), Reopened::Forced(first)),
                Err(second) => (None, Reopened::Wiped(format!("{first}; forced: {second}"))),
            },
        };
        let db = match db {
            Some(db) => db,
            None => {
                if let Collection::Repaired(h) = &self.engine.collection {
                    h.forget(); // its `REPAIRED` went with the disk
                }
                self.fs = SimFs::new();
                let made = self.fs.create_dir_all(Path::new(DATA_DIR));
                match made
                    .map_err(|e| e.to_string())
                    .and_then(|()| open_db(&self.fs, self.wal_mode, false, &self.engine))
                {
                    Ok(db) => db,
                    Err(e) => panic!("node {}: an empty disk does not open: {e}", self.index),
                }
            }
        };
        // The open left the replayed WAL tail to the background thread;
        // wait for that flush (the memtable is empty, so nothing rotates)
        // before the settle's close rotates and flushes in its turn: the
        // two would otherwise race for file numbers.
        let _ = db.flush();
        self.hlc = reserving_clock(self.node_id, &self.fs);
        let wall_ms = ataman_engine::Clock::now_ms(&*self.engine.clock);
        let clock = start_clock(&self.hlc, &self.fs, wall_ms, db.timestamp_max());
        self.db = Some(db);
        self.restart_scheduled = false;
        match (self.settle(), clock) {
            (Some(again), _) if again != Reopened::Clean => again,
            (_, Err(why)) if reopened == Reopened::Clean => Reopened::ClockFailed(why),
            _ => reopened,
        }
    }

    /// Closes the engine (joining its threads, flushing its memtable) and
    /// reopens it, so nothing runs in the background. A failure on the way
    /// (an injected disk fault) is a kill -9 and a restart from the disk,
    /// whose outcome is returned.
    pub fn settle(&mut self) -> Option<Reopened> {
        let db = self.db.take()?;
        let m = db.metrics();
        self.collected += m.tombstones_dropped.get() + m.expired_dropped.get();
        let reopened = db
            .close()
            .map_err(|e| e.to_string())
            .and_then(|()| open_db(&self.fs, self.wal_mode, false, &self.engine));
        match reopened {
            Ok(db) => {
                self.db = Some(db);
                None
            }
            Err(_) => {
                // The failed engine is gone; the process dies with it. The
                // restart's disk image carries no armed fault, so this
                // recursion ends there.
                self.crash(CrashKind::Kill, 0);
                Some(self.restart())
            }
        }
    }

    /// Flushes the memtable to an SSTable, then settles. `Some` when a
    /// disk fault killed the process on the way and it was restarted.
    pub fn flush(&mut self) -> Option<Reopened> {
        // A failed flush poisons the engine; the settle's close then fails
        // and restarts the process, which is how the failure shows.
        let _ = self.db.as_ref()?.flush();
        self.settle()
    }

    /// Compacts every table into the last level, then settles (like [`SimNode::flush`]).
    pub fn compact(&mut self) -> Option<Reopened> {
        let _ = self.db.as_ref()?.compact();
        self.settle()
    }

    /// Arms a disk fault: the `nth` matching file operation fails.
    pub fn inject(&self, fault: ataman_engine::fs::sim::Fault) {
        self.fs.inject(fault);
    }

    /// Disarms every disk fault not fired yet.
    pub fn clear_faults(&self) {
        self.fs.clear_faults();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ts: u64, value: &str) -> Stamped {
        Stamped {
            ts,
            value: Some(value.as_bytes().to_vec()),
            deadline_ms: None,
        }
    }

    /// A synced write survives power loss and kill -9; the clock restarts past it.
    #[test]
    fn crash_and_restart_keep_synced_writes() {
        let mut node = SimNode::new(1, 3, WalMode::Fsync).unwrap();
        let ts = node.stamp(5).unwrap();
        node.write(b"k", &v(ts, "a")).unwrap();
        for (i, kind) in [CrashKind::PowerLoss, CrashKind::Kill]
            .into_iter()
            .enumerate()
        {
            node.crash(kind, i as u64);
            assert!(!node.is_up());
            assert_eq!(node.restart(), Reopened::Clean);
            assert_eq!(node.read(b"k").unwrap(), Some(v(ts, "a")));
            assert!(node.stamp(0).unwrap() > ts);
        }
        assert_eq!(node.incarnation(), 2);
    }

    /// A clock run ahead of the wall clock stamps a write the node never
    /// stores; after a crash its clock starts past that timestamp anyway.
    #[test]
    fn restart_does_not_reissue_an_unstored_timestamp() {
        let mut node = SimNode::new(2, 3, WalMode::Fsync).unwrap();
        node.hlc.observe(node.stamp(0).unwrap() + (1 << 30));
        let unstored = node.stamp(0).unwrap();
        node.crash(CrashKind::PowerLoss, 3);
        node.restart();
        assert!(node.stamp(0).unwrap() > unstored);
    }

    /// The reservation is the node's `CLOCK` file on its own disk, written
    /// by the node's code: above every stamp, read back on restart; a file
    /// that does not parse stops the clock's start (the node's refusal),
    /// which the restart reports.
    #[test]
    fn the_reservation_is_the_clock_file_on_the_disk() {
        let mut node = SimNode::new(0, 3, WalMode::Fsync).unwrap();
        let ts = node.stamp(5).unwrap();
        let on_disk = clock_file::read_on(&node.fs, Path::new(DATA_DIR)).unwrap();
        assert!(on_disk.is_some_and(|r| r >= ts), "{on_disk:?} below {ts}");
        let mut file = node
            .fs
            .create(&Path::new(DATA_DIR).join(clock_file::FILE_NAME))
            .unwrap();
        file.append(b"not a timestamp\n").unwrap();
        file.sync().unwrap();
        drop(file);
        node.crash(CrashKind::Kill, 0);
        let reopened = node.restart();
        assert!(
            matches!(&reopened, Reopened::ClockFailed(why) if why.contains("CLOCK")),
            "{reopened:?}"
        );
    }

    /// Flush and compaction settle the engine and keep every version, tombstones included.
    #[test]
    fn maintenance_keeps_everything() {
        let mut node = SimNode::new(0, 3, WalMode::Fsync).unwrap();
        node.write(b"a", &v(10, "x")).unwrap();
        assert_eq!(node.flush(), None);
        let tomb = Stamped {
            ts: 20,
            value: None,
            deadline_ms: None,
        };
        node.write(b"a", &tomb).unwrap();
        node.write(b"b", &v(30, "y")).unwrap();
        assert_eq!(node.compact(), None);
        let state = node.state().unwrap();
        assert_eq!(state.get(b"a".as_slice()), Some(&tomb));
        assert_eq!(state.get(b"b".as_slice()), Some(&v(30, "y")));
        // Settled: only the new memtable's WAL segment is left.
        let wal = node
            .fs
            .list_dir(Path::new(DATA_DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".wal"))
            .count();
        assert_eq!(wal, 1);
    }
}
