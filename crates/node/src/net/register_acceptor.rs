//! The consensus register's acceptor on this node: Asks from the peer
//! connections (and from this node's own proposer) served one step per
//! key at a time, each step's state made durable through the engines'
//! asynchronous group-committed write path before its reply leaves.
//!
//! # A step
//! 1. **Admit** ([`serial`]): the key's running step, if any, finishes
//!    first; the Ask waits in the key's bounded queue (full: refused
//!    with `Unavailable`, which the proposer takes as a failed answer).
//! 2. **Load**: the Paxos record from the register store and the key's
//!    stored version from the main engine ([`record::decode`]).
//! 3. **Decide**: [`acceptor::step_above`], above the floor the clock
//!    reservation of the last run sets (`record::restart_floor`) (`--planted
//!    register-accepts-below-promise`: [`acceptor::Mode::PlantedAcceptsBelowPromise`]).
//! 4. **Persist**: [`record::plan`]'s writes, in order, each submitted to
//!    its engine with `Durability::Complete` (or `Durability::None`, applied
//!    but not waited to be synced, where the plan allows: a promise the
//!    node clock's durable reservation covers, a prune) and a completion
//!    (`Target::Register`) back to the network thread that submitted it;
//!    the next write is submitted when the previous one completed (the
//!    committed version is durable before the record is pruned). No
//!    network thread waits: the engines' writer and WAL threads group
//!    the writes of every key and thread into one fsync.
//! 5. **Reply** once the last write completed (or at once when the step
//!    changed nothing), then the key's next waiting Ask runs (step 2).
//!
//! A write that fails answers `Failed` (the state on disk is what the
//! engine kept; the engine is poisoned and answers nothing more).
//!
//! # Where the record lives
//! The register store is a second engine instance in
//! `<data-dir>/register` (as the hint store is): client keys may be any
//! bytes, so no part of the main engine's key space is safe for records,
//! and ranges, anti-entropy and backups, which walk the main engine, never
//! see one. Record versions are stamped with the node's clock (`hlc`),
//! which only grows across restarts, so a record put after a prune is
//! newer than the prune's tombstone. Both engines' writes of one key are
//! ordered by the one-step-per-key rule, not by the WAL: a step's next
//! write starts only when the previous one is durable.
//!
//! # Thread safety
//! One [`RegisterAcceptor`] is shared by every network thread; its table
//! is behind one mutex, held for a step's load and decision (reads of the
//! memtables) and a submission (a queue push), never across an fsync.

use crate::peer::frame::{ReplicaError, ReplicaErrorKind, Stamped};
use crate::replication::register::acceptor::{self, Answer, Request};
use crate::replication::register::ballot::Ballot;
use crate::replication::register::record::{self, Persist};
use crate::replication::register::serial::{self, Admit, Serial};
use crate::replication::register::wire::{self, RegisterMessage};
use crate::state::{NetContext, RegisterDelivery, RegisterPort, RegisterTo, Target};
use ataman_engine::{Db, Durability, WriteBatch};
use ataman_testkit::lock::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::Ordering;

/// Directory of the register store under the data directory.
pub const REGISTER_DIR_NAME: &str = "register";

/// The register store opened and the acceptor over it (`--planted
/// register-accepts-below-promise` read here): the store, to close at
/// shutdown, and the acceptor as the network threads reach it.
pub fn start(
    config: &crate::config::NodeConfig,
    fs: &std::sync::Arc<dyn ataman_engine::fs::FileSystem>,
) -> Result<(std::sync::Arc<Db>, std::sync::Arc<dyn RegisterPort>), String> {
    // Read before the clock starts and renews it: the reservation the
    // last run left covers every promise it did not sync.
    let reserved = crate::clock_file::read(&config.data_dir)?;
    let store = std::sync::Arc::new(open_store(config, std::sync::Arc::clone(fs))?);
    let mut acceptor = RegisterAcceptor::new(std::sync::Arc::clone(&store), mode(config));
    acceptor.restart = record::restart_floor(reserved);
    Ok((store, std::sync::Arc::new(acceptor)))
}

/// Closes the register store at shutdown (the acceptor dropped first).
pub fn close_store(store: std::sync::Arc<Db>) -> Result<(), String> {
    let store = std::sync::Arc::try_unwrap(store)
        .map_err(|_| "register store still referenced at shutdown".to_owned())?;
    store
        .close()
        .map_err(|e| format!("closing the register store: {e}"))
}

/// The consensus register's store, a second engine in
/// `<data-dir>/register` (`net::register_acceptor`, "Where the record
/// lives"): the node's WAL mode, a small memtable (records are small and
/// pruned), deleted records collected at once.
pub fn open_store(
    config: &crate::config::NodeConfig,
    fs: std::sync::Arc<dyn ataman_engine::fs::FileSystem>,
) -> Result<Db, String> {
    let dir = config.data_dir.join(REGISTER_DIR_NAME);
    let opts = ataman_engine::Options {
        fs,
        wal_mode: config.wal_mode,
        tombstone_grace: std::time::Duration::ZERO,
        memtable_bytes_max: crate::hints::HINTS_MEMTABLE_BYTES_MAX,
        block_cache_bytes: crate::hints::HINTS_BLOCK_CACHE_BYTES,
        ..ataman_engine::Options::default()
    };
    Db::open(&dir, opts)
        .map_err(|e| format!("cannot open the register store in {}: {e}", dir.display()))
}

/// The acceptor's rules: sound, or the planted bug
/// `register-accepts-below-promise`.
pub fn mode(config: &crate::config::NodeConfig) -> acceptor::Mode {
    match config.planted_bug {
        Some(crate::config::PlantedBug::RegisterAcceptsBelowPromise) => {
            tracing::error!(
                "PLANTED BUG register-accepts-below-promise: the consensus register's acceptor takes an accept below its promise. Test use only."
            );
            acceptor::Mode::PlantedAcceptsBelowPromise
        }
        _ => acceptor::Mode::Sound,
    }
}

/// One Ask waiting for, or taking, its key's turn.
#[derive(Debug)]
struct Ask {
    /// The network thread whose inbox gets the reply.
    thread: usize,
    to: RegisterTo,
    id: u64,
    key: Vec<u8>,
    request: Request,
}

/// A step whose writes are in flight.
#[derive(Debug)]
struct Running {
    ask: Ask,
    /// When the step started (`ataman_register_acceptor_step_duration_seconds`).
    started: std::time::Instant,
    writes: VecDeque<Persist>,
    answer: Option<Answer>,
}

#[derive(Debug)]
struct Table {
    serial: Serial<Ask>,
    running: HashMap<u64, Running>,
    next_step: u64,
}

/// The node's acceptor (see the module doc).
pub struct RegisterAcceptor {
    store: std::sync::Arc<Db>,
    mode: acceptor::Mode,
    /// Every ballot below it is refused (`record::restart_floor`).
    restart: Ballot,
    table: Mutex<Table>,
}

impl RegisterAcceptor {
    /// The acceptor over the register store `store`.
    pub fn new(store: std::sync::Arc<Db>, mode: acceptor::Mode) -> RegisterAcceptor {
        RegisterAcceptor::with_limits(store, mode, serial::Limits::default())
    }

    /// [`RegisterAcceptor::new`] with the table's bounds given (tests).
    pub fn with_limits(
        store: std::sync::Arc<Db>,
        mode: acceptor::Mode,
        limits: serial::Limits,
    ) -> RegisterAcceptor {
        RegisterAcceptor {
            store,
            mode,
            restart: Ballot::ZERO,
            table: Mutex::new(Table {
                serial: Serial::new(limits),
                running: HashMap::new(),
                next_step: 1,
            }),
        }
    }

    /// Keys with a step running, Asks waiting (gauges).
    pub fn depth(&self) -> (usize, usize) {
        let t = lock(&self.table);
        (t.serial.busy(), t.serial.queued())
    }

    /// Runs `ask` and, as each finishes without a write in flight, the
    /// next Ask of its key.
    fn run(&self, ctx: &NetContext, mut ask: Ask) {
        loop {
            let key = ask.key.clone();
            if self.start(ctx, ask) {
                return;
            }
            match lock(&self.table).serial.finish(&key) {
                Some(next) => ask = next,
                None => return,
            }
        }
    }

    /// Steps 2 to 4 of `ask`; true while its writes are in flight (its
    /// reply then comes from [`RegisterAcceptor::written`]), false when it
    /// was answered here.
    fn start(&self, ctx: &NetContext, ask: Ask) -> bool {
        ctx.shared
            .metrics
            .register
            .steps
            .fetch_add(1, Ordering::Relaxed);
        let state = match self.load(ctx, &ask.key) {
            Ok(state) => state,
            Err(why) => {
                ctx.shared
                    .metrics
                    .register
                    .acceptor_failed
                    .fetch_add(1, Ordering::Relaxed);
                deliver(
                    ctx,
                    &ask,
                    Err(ReplicaError::new(ReplicaErrorKind::Failed, why)),
                );
                return false;
            }
        };
        let step = acceptor::step_above(&state, &ask.request, self.mode, self.restart);
        let covered = ctx.shared.hlc.durable_reservation();
        let writes: VecDeque<Persist> = record::plan(&state, &step, covered).into();
        if writes.is_empty() {
            deliver(ctx, &ask, Ok(step.answer));
            return false;
        }
        let mut table = lock(&self.table);
        let id = table.next_step;
        table.next_step += 1;
        table.running.insert(
            id,
            Running {
                ask,
                started: std::time::Instant::now(),
                writes,
                answer: step.answer,
            },
        );
        match self.submit_next(ctx, &mut table, id) {
            Ok(true) => true,
            Ok(false) | Err(_) => {
                // Refused at submission: answered, the key moves on.
                drop(table);
                self.fail(ctx, id, "the register store refused the write".into());
                false
            }
        }
    }

    /// The acceptor's state of `key`: its record and stored version.
    fn load(&self, ctx: &NetContext, key: &[u8]) -> Result<acceptor::KeyState, String> {
        let record = self
            .store
            .get(key)
            .map_err(|e| format!("reading the Paxos record failed: {e}"))?
            .and_then(|e| e.value);
        let stored = ctx
            .db
            .get(key)
            .map_err(|e| format!("reading the stored version failed: {e}"))?
            .map(Stamped::from_entry);
        record::decode(record.as_deref(), stored.as_ref()).map_err(|e| e.to_string())
    }

    /// Submits step `id`'s next write: `Ok(true)` submitted, `Ok(false)`
    /// none left, `Err` refused by the engine (the reason).
    fn submit_next(&self, ctx: &NetContext, table: &mut Table, id: u64) -> Result<bool, String> {
        let Some(running) = table.running.get_mut(&id) else {
            return Ok(false);
        };
        let Some(write) = running.writes.pop_front() else {
            return Ok(false);
        };
        let key = &running.ask.key;
        let done = ctx.completions.callback(Target::Register { step: id });
        let mut batch = WriteBatch::new();
        let result = match write {
            Persist::Committed(version) => {
                version.add_to(&mut batch, key);
                ctx.db.submit(batch, Durability::Complete, done)
            }
            Persist::Record { bytes, sync } => {
                let ts = ctx.shared.hlc.now().map_err(|e| e.to_string())?;
                batch.put(key, &bytes, ts);
                let register = &ctx.shared.metrics.register;
                register.records_written.fetch_add(1, Ordering::Relaxed);
                if !sync {
                    register.records_unsynced.fetch_add(1, Ordering::Relaxed);
                }
                self.store.submit(batch, durability(sync), done)
            }
            Persist::Prune => {
                let ts = ctx.shared.hlc.now().map_err(|e| e.to_string())?;
                batch.delete(key, ts);
                ctx.shared
                    .metrics
                    .register
                    .records_pruned
                    .fetch_add(1, Ordering::Relaxed);
                self.store.submit(batch, durability(false), done)
            }
        };
        result.map(|()| true).map_err(|e| e.to_string())
    }

    /// Step `id` failed: answers `Failed`, then its key moves on.
    fn fail(&self, ctx: &NetContext, id: u64, why: String) {
        ctx.shared
            .metrics
            .register
            .acceptor_failed
            .fetch_add(1, Ordering::Relaxed);
        let running = lock(&self.table).running.remove(&id);
        if let Some(running) = running {
            let error = ReplicaError::new(ReplicaErrorKind::Failed, why);
            deliver(ctx, &running.ask, Err(error));
            self.next_of(ctx, &running.ask.key);
        }
    }

    /// The key's step replied: its next Ask runs.
    fn next_of(&self, ctx: &NetContext, key: &[u8]) {
        let next = lock(&self.table).serial.finish(key);
        if let Some(next) = next {
            self.run(ctx, next);
        }
    }
}

impl RegisterPort for RegisterAcceptor {
    fn ask(&self, ctx: &NetContext, to: RegisterTo, frame: &[u8]) -> Result<(), String> {
        let msg = match wire::decode(frame) {
            Ok(Some((msg, _))) => msg,
            Ok(None) => return Err("a register frame cut short".into()),
            Err(e) => return Err(format!("a register frame that does not decode: {e}")),
        };
        let RegisterMessage::Ask { id, key, request } = msg else {
            return Err("a register Reply sent as a request".into());
        };
        self.ask_decoded(ctx, to, id, key, request);
        Ok(())
    }

    fn written(&self, ctx: &NetContext, step: u64, result: Result<(), String>) {
        if let Err(why) = result {
            self.fail(ctx, step, format!("the acceptor's write failed: {why}"));
            return;
        }
        let mut table = lock(&self.table);
        match self.submit_next(ctx, &mut table, step) {
            Ok(true) => {}
            Ok(false) => {
                let running = table.running.remove(&step);
                drop(table);
                if let Some(running) = running {
                    let took = running.started.elapsed();
                    ctx.shared
                        .metrics
                        .register
                        .step_us
                        .record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
                    deliver(ctx, &running.ask, Ok(running.answer));
                    self.next_of(ctx, &running.ask.key);
                }
            }
            Err(why) => {
                drop(table);
                self.fail(ctx, step, why);
            }
        }
    }
}

impl RegisterAcceptor {
    /// An Ask already decoded (this node's own proposer uses it directly).
    pub fn ask_decoded(
        &self,
        ctx: &NetContext,
        to: RegisterTo,
        id: u64,
        key: Vec<u8>,
        request: Request,
    ) {
        if let Some(time) = ballot_time(&request) {
            ctx.shared.hlc.observe(time);
        }
        let ask = Ask {
            thread: ctx.index,
            to,
            id,
            key,
            request,
        };
        let admitted = lock(&self.table).serial.admit(&ask.key.clone(), ask);
        match admitted {
            Admit::Run(ask) => self.run(ctx, ask),
            Admit::Queued => {}
            Admit::Full(ask) => {
                ctx.shared
                    .metrics
                    .register
                    .acceptor_refused
                    .fetch_add(1, Ordering::Relaxed);
                let error = ReplicaError::new(
                    ReplicaErrorKind::Unavailable,
                    "the register acceptor's queue for this key is full",
                );
                deliver(ctx, &ask, Err(error));
            }
        }
    }
}

/// A write the answer waits to be durable for, or only applied (the
/// memtable: the key's next step reads it) (`record`, "Rules").
fn durability(sync: bool) -> Durability {
    if sync {
        Durability::Complete
    } else {
        Durability::None
    }
}

fn ballot_time(request: &Request) -> Option<u64> {
    match request {
        Request::Prepare(b) | Request::Release(b) => Some(b.time),
        Request::Accept(p) | Request::Commit(p) => Some(p.ballot.time),
    }
}

/// Sends `ask`'s reply to its thread's inbox (a `Release`'s is the
/// answer "none": the link's request is settled, the proposer ignores it).
fn deliver(ctx: &NetContext, ask: &Ask, result: Result<Option<Answer>, ReplicaError>) {
    let mut frame = Vec::new();
    wire::encode(&RegisterMessage::Reply { id: ask.id, result }, &mut frame);
    if let Some(inbox) = ctx.shared.inboxes.get(ask.thread) {
        inbox.push_register(RegisterDelivery { to: ask.to, frame });
    }
}
