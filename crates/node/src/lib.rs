//! # ataman-node
//!
//! An ataman node: the `/v0` HTTP API over the storage engine.
//!
//! ## Layout
//! - [`config`]: options from flags, environment and a TOML file;
//!   [`log_options`]: the log's level and format.
//! - [`http`]: HTTP/1.1 framing (request heads, query strings, responses).
//! - [`api`]: routing and validation: a request head to an [`api::Action`].
//! - [`auth`]: client tokens and roles, the peers' cluster secret, protected mode.
//! - [`cluster`]: the node list and where keys live (rendezvous hashing).
//! - [`state`]: what the node's threads share, and how a finished write
//!   finds its network thread again.
//! - [`net`]: the network threads (mio event loops) and connections.
//! - [`hlc`]: the hybrid logical clock stamping writes; [`clock_file`]: its
//!   durable reservation (`CLOCK`), so a restart never reissues a timestamp.
//! - [`peer`]: the peer protocol (frames, upgrade, client links, server side).
//! - [`replication`]: coordinating `ack`-of-`from` requests, read repair, hint delivery.
//! - [`range`]: cluster-wide range reads (`cluster=1`): merge, coverage, range threads.
//! - [`antientropy`]: Merkle-tree comparison and repair between replicas.
//! - [`hints`]: writes peers missed, kept durably until delivered.
//! - [`last_seen`]: when the node was last up; the refusal to start on data
//!   older than the tombstone grace.
//! - [`decimal_file`]: the one-line durable files (`LAST-SEEN`, `CLOCK`).
//! - [`descriptors`]: the descriptor limit, the node's reserve, the client
//!   connection cap.
//! - [`metrics`]: request metrics and the `/metrics` page; [`slowlog`]: the
//!   slow log (the last requests over a threshold, with their stages);
//!   [`slowlog_cluster`]: every member's slow log merged;
//!   [`hotkeys`]: the hot-key sampler and its report; [`recent`]: the
//!   recent-figures ring; [`ui`]: the dashboard's embedded assets.
//! - [`fault_control`]: the `--fault-control` test hook (disk full, clock jumps).
//! - [`health`]: `/livez`, `/readyz` and the cluster health view's rules;
//!   the start-up responder.
//!
//! ## Threads
//! `ataman-startup` (answers `/livez` and `/readyz` while the WAL is
//! replayed, then hands the listener over), `ataman-net-N` (network, HTTP, reads), `ataman-tx` (the engine's single
//! writer), `ataman-wal` (group commit), `ataman-flush` (flushes),
//! `ataman-compact` (compactions and purges), `ataman-reap` (removes the
//! files of replaced tables), `ataman-sync` (serves anti-entropy sessions),
//! `ataman-rounds` (starts anti-entropy rounds); the main thread waits for
//! a signal, keeps `LAST-SEEN` current, renews the clock's reservation and
//! re-reads a changed token file (`auth::reload`). A write crosses net → tx → WAL and its completion comes
//! back to the net thread through its inbox, with one wake-up per batch.

pub mod antientropy;
pub mod api;
pub mod auth;
pub mod backup;
pub mod clock_file;
pub mod cluster;
pub mod config;
pub mod decimal_file;
pub mod descriptors;
pub mod fault_control;
pub mod hangup;
pub mod health;
pub mod hints;
pub mod hlc;
pub mod hotkeys;
pub mod http;
pub mod last_seen;
pub mod layout_io;
pub mod log_options;
pub mod metrics;
pub mod net;
pub mod peer;
pub mod range;
pub mod recent;
pub mod refill;
pub mod replication;
pub mod rmw_chain;
pub mod slowlog;
pub mod slowlog_cluster;
pub mod state;
pub mod tls;
pub mod token_bucket;
pub mod ttl;
pub mod ui;
pub mod value_spare;
pub mod version_order;

pub use config::{NodeConfig, ServeArgs};

use antientropy::horizon::RepairHorizon;
use ataman_engine::fs::{FaultFs, FileSystem, OsFs};
use ataman_engine::{Db, Options};
use cluster::transition_state::TransitionShared;
use config::PlantedBug;
use state::{Inbox, NodeShared};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

/// How often the main thread recounts the engines' SSTables for the
/// descriptor budget (the cap goes down as data grows).
const DESCRIPTORS_RECOUNT_INTERVAL: Duration = Duration::from_secs(1);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// A node's memtables flush at up to this much below
/// `--memtable-bytes-max`, at a point its place in `--cluster` sets
/// (`ataman_engine::db::flush_point`): replicas take the same writes, and
/// without it they flush and run their L0→L1 compactions in the same
/// second, all the replicas of a key slow at once.
const MEMTABLE_FLUSH_JITTER_PERCENT: u32 = 20;

/// The engine's options for `config`; dead versions are collected by
/// `horizon` (repair-based), or by the grace under `collect-on-grace-alone`.
fn engine_options(config: &NodeConfig, horizon: &Arc<RepairHorizon>) -> Options {
    let mut opts = Options {
        collection_horizon: (config.planted_bug != Some(PlantedBug::CollectOnGraceAlone))
            .then(|| RepairHorizon::engine_hook(horizon)),
        // `ack-before-wal` also keeps no WAL at all, so a crash of every
        // replica loses every write acknowledged since the last flush,
        // whenever it lands (a negative control that never misses).
        wal_mode: match config.planted_bug {
            Some(PlantedBug::AckBeforeWal) => ataman_engine::WalMode::None,
            _ => config.wal_mode,
        },
        force_recovery: config.force_recovery,
        tombstone_grace: config.tombstone_grace,
        compaction_nice: antientropy::priority::BACKGROUND_NICE_STEP,
        compaction_rate_bytes: config.compaction_rate_bytes,
        memtable_flush_jitter_percent: MEMTABLE_FLUSH_JITTER_PERCENT,
        // The place in `--cluster` spreads the members' points (the
        // engine opens before the stored layout is read); a node started
        // alone or with `--join` draws one.
        memtable_flush_slot: (config.cluster.len() > 1).then_some(config.self_index as u64),
        planted_collect_when_nothing_deeper: config.planted_bug
            == Some(PlantedBug::CollectIgnoresShallower),
        ..Options::default()
    };
    if let Some(b) = config.memtable_bytes_max {
        opts.memtable_bytes_max = b;
    }
    if let Some(b) = config.block_cache_bytes {
        opts.block_cache_bytes = b;
    }
    opts
}

/// Raises the soft descriptor limit to the hard one, as nginx and Redis
/// do, and logs what it did.
fn raise_descriptor_limit() -> Result<descriptors::Limit, String> {
    let limit = descriptors::raise_limit()
        .map_err(|e| format!("cannot read the descriptor limit (RLIMIT_NOFILE): {e}"))?;
    match &limit.raise_error {
        Some(e) => tracing::warn!(
            soft_limit = limit.before,
            error = %e,
            "descriptors: cannot raise the soft limit to the hard limit"
        ),
        None if limit.now > limit.before => tracing::info!(
            from = limit.before,
            to = limit.now,
            "descriptors: soft limit raised to the hard limit"
        ),
        None => {}
    }
    Ok(limit)
}

/// Refuses a start whose descriptor limit leaves no client connection;
/// otherwise logs the budget.
fn check_budget(budget: &descriptors::Budget) -> Result<(), String> {
    if budget.cap == 0 {
        return Err(format!(
            "the descriptor limit {} leaves no client connection: the node reserves {}; \
             raise the limit (ulimit -n, and -Hn if needed) to at least {}",
            budget.limit,
            budget.reserve,
            budget.reserve.total() + 1
        ));
    }
    tracing::info!(
        limit = budget.limit,
        reserved = budget.reserve.total(),
        connections_max = budget.cap,
        "{budget}"
    );
    Ok(())
}

/// SIGINT and SIGTERM stop the node; SIGPIPE is ignored.
fn install_signal_handlers() {
    // SAFETY: `on_signal` only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        // A client closing early must not kill the process.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// The file system the engines use: the plain one, or under
/// `--fault-control` one whose faults `switches` turn on (docs/API.md
/// "Test hooks"; the control thread starts here).
fn file_system(
    config: &NodeConfig,
    switches: &fault_control::FaultSwitches,
) -> std::io::Result<Arc<dyn FileSystem>> {
    Ok(match &config.fault_control {
        Some(path) => {
            fault_control::start(path.clone(), switches.clone(), || {
                STOP.load(Ordering::SeqCst)
            })?;
            Arc::new(
                FaultFs::new(Arc::new(OsFs), Arc::clone(&switches.disk_full))
                    .with_sync_delay(Arc::clone(&switches.sync_delay_ms)),
            )
        }
        None => Arc::new(OsFs),
    })
}

/// The node's checkpoints (`backup`), `.tmp-` leftovers removed.
fn open_backups(config: &NodeConfig) -> Result<Arc<backup::Backups>, String> {
    let backups = backup::Backups::open(&config.data_dir).map_err(|e| {
        format!(
            "cannot open the checkpoints in {}: {e}",
            config
                .data_dir
                .join(backup::lease::BACKUPS_DIR_NAME)
                .display()
        )
    })?;
    Ok(Arc::new(backups.with_serve_rate(config.backup_rate_bytes)))
}

/// Closes the engine and the hint store at shutdown, once a checkpoint
/// being taken (its thread holds both) is done (bounded).
fn close_stores(
    backups: &backup::Backups,
    db: Arc<Db>,
    hints: Arc<hints::HintStore>,
) -> Result<(), Box<dyn std::error::Error>> {
    backups.wait_idle(backup::lease::SHUTDOWN_WAIT);
    let db = Arc::try_unwrap(db).map_err(|_| "engine still referenced at shutdown")?;
    db.close()?;
    let hints = Arc::try_unwrap(hints).map_err(|_| "hint store still referenced at shutdown")?;
    hints.close()?;
    Ok(())
}

/// The main thread's periodic chores: the connection gauges, the clock's
/// reservation renewed (and its failure shown), checkpoints whose lease
/// ended removed, and the recent-figures ring's sample once a second.
fn publish_counts_and_renew_clock(shared: &NodeShared) {
    if let Some(horizon) = shared.antientropy.horizon.get() {
        horizon.follow(shared.placement());
    }
    shared.backups.sweep(backup::lease::now_ms());
    shared.metrics.connections_open.store(
        shared.connections.load(Ordering::Relaxed) as u64,
        Ordering::Relaxed,
    );
    shared.metrics.peer_connections_open.store(
        shared.peer_connections.load(Ordering::Relaxed) as u64,
        Ordering::Relaxed,
    );
    // A failure is logged by the persister; writes past the durable
    // reservation answer 503 meanwhile, and the next call retries.
    let _ = shared.hlc.renew();
    let failing = shared.hlc.persist_failure().is_some();
    shared
        .metrics
        .clock_reservation_failing
        .store(u64::from(failing), Ordering::Relaxed);
    let m = &shared.metrics;
    let now_ms = backup::lease::now_ms();
    let counts_nothing = shared.config.planted_bug == Some(config::PlantedBug::RecentCountsNothing);
    m.recent.tick(now_ms, || {
        let mut sample = m.recent_sample(now_ms);
        if counts_nothing {
            sample.counts = Default::default();
        }
        sample
    });
}

/// Binds `--resp-listen`, if given.
fn bind_resp(config: &NodeConfig) -> Result<Option<std::net::TcpListener>, String> {
    let Some(addr) = config.resp_listen.as_deref() else {
        return Ok(None);
    };
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("cannot listen for RESP on {addr}: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot listen for RESP on {addr}: {e}"))?;
    Ok(Some(listener))
}

/// Loads `<data-dir>/LAYOUT` (bootstrapping version 1 from `--cluster`)
/// and runs with its members and replication factor: a stored layout wins
/// over a stale list (docs/ARCHITECTURE.md, "Membership").
/// A single node (a list of one) keeps no layout: its URL may change with
/// every restart (`--listen 127.0.0.1:0`) and it has no peers to agree with.
/// A node started with `--join` learns the layout from its seed
/// (`cluster::join`). A node not a member of its layout (joining, or
/// removed) runs alone and serves no client (`net::membership_gate`).
fn adopt_layout(
    config: &mut NodeConfig,
    seed: Option<&cluster::join::Seed>,
) -> Result<Option<cluster::membership::Membership>, Box<dyn std::error::Error>> {
    let self_url = config.cluster[config.self_index].clone();
    let layout = if let Some(seed) = seed {
        let stored = cluster::layout_file::load(&config.data_dir)?;
        let (layout, store) = cluster::join::initial(&self_url, seed, stored)?;
        if store {
            cluster::layout_file::store(&config.data_dir, &layout)?;
        }
        layout
    } else if config.cluster.len() <= 1 {
        return Ok(None);
    } else {
        cluster::layout_file::open(
            &config.data_dir,
            &config.cluster,
            Some(config.replication_factor),
        )?
    };
    let acceptor = cluster::acceptor_node::AcceptorNode::open(&config.data_dir, layout)?;
    // A joining node restarted after its commit runs with the next layout.
    let runs_with = if config.join.is_some() {
        acceptor.committed().clone()
    } else {
        acceptor.current().clone()
    };
    match cluster::layout_file::member_list(
        &config.cluster,
        &config.peer_via,
        &self_url,
        &runs_with,
    ) {
        Ok((list, self_index, via)) => {
            config.cluster = list;
            config.self_index = self_index;
            config.peer_via = via;
            config.replication_factor = runs_with.replication_factor;
        }
        Err(e) => {
            use cluster::layout_file::{Loudness, not_member_loudness};
            match not_member_loudness(config.join.is_some()) {
                Loudness::Info => tracing::info!(
                    version = runs_with.version,
                    "{e}: serving no client request until it is added"
                ),
                Loudness::Warn => tracing::warn!(
                    version = runs_with.version,
                    "{e}: serving no client request"
                ),
            }
            config.cluster = vec![self_url.clone()];
            config.self_index = 0;
            config.peer_via = vec![None];
            config.replication_factor = 1;
        }
    }
    Ok(Some(cluster::membership::Membership::new(
        self_url, acceptor,
    )))
}

/// Waits for the network threads, then anti-entropy's and gossip's, then
/// the transition driver; the last failure, if any.
fn join_threads(
    net: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
    background: Vec<std::thread::JoinHandle<()>>,
    transition: Option<std::thread::JoinHandle<()>>,
) -> Option<String> {
    let mut error = None;
    for t in net {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => error = Some(e.to_string()),
            Err(_) => error = Some("a network thread panicked".into()),
        }
    }
    for t in background {
        if t.join().is_err() {
            error = Some("an anti-entropy or layout gossip thread panicked".into());
        }
    }
    join_transition(transition).or(error)
}

/// Waits for the transition driver; says so if it panicked.
fn join_transition(thread: Option<std::thread::JoinHandle<()>>) -> Option<String> {
    thread
        .is_some_and(|t| t.join().is_err())
        .then(|| "the transition thread panicked".into())
}

/// The transition driver's copier: `antientropy::transfer::copy_gained`
/// on this node, complete as `cluster::copy_completion` decides (every
/// source finished, a leaving one read only once its `ack` for the new
/// version is known; a source declared dead skipped).
struct TransferCopier(Arc<NodeShared>);

impl cluster::transition::Copier for TransferCopier {
    /// Copies, then gathers the facts of `cluster::copy_completion` (which
    /// sources finished, which the new version removes, which the
    /// operator declared dead) and carries out its decision.
    fn copy(
        &self,
        old: &cluster::layout::Layout,
        new: &cluster::layout::Layout,
    ) -> Result<bool, String> {
        use cluster::copy_completion::{Completion, Mode, Source, decide};
        use cluster::history::Tracker;
        let me = self.0.placement.self_url().to_owned();
        let history = self.0.membership.as_ref().map(|m| m.history());
        // This transition's history, as known before any pass starts.
        let now = history
            .as_ref()
            .filter(|h| h.current().version == new.version);
        let dead = |url: &str| now.is_some_and(|h| h.declared_dead(url));
        // A leaving source, not declared dead, whose ack for the new
        // version is not known: not read now, its copy would not count
        // (`copy_completion`'s rule "Leaving not acked").
        let acked =
            |url: &str| now.is_some_and(|h| h.trackers().get(Tracker::Ack, url) >= new.version);
        let held: Vec<String> = old
            .nodes
            .iter()
            .filter(|u| !new.is_member(u) && !dead(u) && !acked(u))
            .cloned()
            .collect();
        let report = antientropy::transfer::copy::copy_gained(
            &self.0.antientropy_node(),
            &me,
            old,
            new,
            &held,
        )
        .map_err(|e| e.to_string())?;
        let sources: Vec<Source<'_>> = report
            .sources
            .iter()
            .map(|s| Source {
                url: &s.url,
                finished: s.state != antientropy::transfer::copy::SourceState::Pending,
                leaving: !new.is_member(&s.url),
                declared_dead: dead(&s.url),
                acked: !held.contains(&s.url),
            })
            .collect();
        let mode = match self.0.config.planted_bug {
            Some(PlantedBug::CopySkipsPartitionedLeavingNode) => {
                tracing::error!(
                    "PLANTED BUG copy-skips-partitioned-leaving-node: a leaving node that does not answer is skipped; its writes may be lost. Test use only."
                );
                Mode::PlantedSkipsLeaving
            }
            Some(
                PlantedBug::AckBeforeWal
                | PlantedBug::JoinedTakesIdZero
                | PlantedBug::ConnectionPanic
                | PlantedBug::AddChecksOnlyStatus
                | PlantedBug::RangeAloneOutsideReadSet
                | PlantedBug::LivezFollowsPeers
                | PlantedBug::ReadyzIgnoresCopy
                | PlantedBug::NoStartupResponder
                | PlantedBug::SlowlogKeepsValue
                | PlantedBug::PeerAddressResolvedOnce
                | PlantedBug::RegisterWatchIgnoresVersion
                | PlantedBug::ReadRepairWritesOlder
                | PlantedBug::ExpiredValueServed
                | PlantedBug::ExpiresEarly
                | PlantedBug::CopySkipsKeys
                | PlantedBug::CollectIgnoresShallower
                | PlantedBug::CollectOnGraceAlone
                | PlantedBug::BackupIgnoresT
                | PlantedBug::UiScriptBroken
                | PlantedBug::RecentCountsNothing
                | PlantedBug::RmwSkipsConflictCheck
                | PlantedBug::HttpReadsSkipPendingWrites
                | PlantedBug::RegisterAcceptsBelowPromise,
            )
            | None => Mode::Sound,
        };
        match decide(&sources, mode) {
            Completion::Complete { skipped } => {
                self.0.transition.set_copy_waits(new.version, Vec::new());
                if !skipped.is_empty() {
                    tracing::warn!(
                        version = new.version,
                        sources = ?skipped,
                        "layout transition: copy complete without the sources above (declared dead: a write only they held is lost)"
                    );
                }
                Ok(true)
            }
            Completion::Waiting(waits) => {
                tracing::warn!(
                    version = new.version,
                    waiting_for = ?waits.iter().map(|w| w.node.as_str()).collect::<Vec<_>>(),
                    "layout transition: copy incomplete, the sources above did not answer (retried; a leaving node that is lost for good can be declared dead: POST /v0/layout?version={}&dead=URL)",
                    new.version
                );
                self.0.transition.set_copy_waits(new.version, waits);
                Ok(false)
            }
        }
    }
}

/// Deletes the copies a node no longer replicates through an engine purge
/// (`cluster::cleanup`), recorded in `<data-dir>/CLEANUP-<version>`.
struct EnginePurge(Arc<NodeShared>);

impl cluster::cleanup::Cleaner for EnginePurge {
    fn clean(
        &self,
        version: u64,
        keep: cluster::cleanup::KeepFn,
    ) -> Result<cluster::cleanup::Purged, String> {
        // Paced by the node's background rate, as the copy is: a cleanup
        // rewrites the whole store.
        let rate = self.0.config.anti_entropy_rate_bytes;
        let report = self
            .0
            .db
            .purge_paced(keep, rate)
            .map_err(|e| e.to_string())?;
        let purged = cluster::cleanup::Purged {
            keys: report.keys_dropped,
            bytes: report.bytes_dropped,
        };
        cluster::cleanup_record::store(&self.0.config.data_dir, version, purged)
            .map_err(|e| format!("cannot record the cleanup: {e}"))?;
        Ok(purged)
    }

    fn cleaned(&self) -> Option<u64> {
        match cluster::cleanup_record::newest(&self.0.config.data_dir) {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!("cannot read the cleanup records (the cleanup runs again): {e}");
                None
            }
        }
    }
}

/// Starts the transition driver (`cluster::transition`) for a node with a layout.
fn start_transition(
    shared: &Arc<NodeShared>,
    seed: Option<cluster::join::Seed>,
) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
    let Some(membership) = shared.membership.clone() else {
        return Ok(None);
    };
    // Every network thread places with at least the node's placement as
    // it is now (it only moves forward, and each thread notes newer ones
    // itself): noted before the driver's first look, so a member serves
    // from its first request.
    let version = shared.placement().version();
    (0..shared.config.net_threads).for_each(|t| shared.transition.note_placement(t, version));
    let driver = cluster::transition::Driver::new(
        membership,
        Arc::clone(&shared.transition),
        Arc::new(TransferCopier(Arc::clone(shared))),
        shared.config.replication_timeout,
        seed,
    )
    .with_cleaner(Arc::new(EnginePurge(Arc::clone(shared))));
    let stopping = Arc::clone(shared);
    cluster::transition::start(driver, move || stopping.stopping()).map(Some)
}

/// Loads the TLS files, if any, and makes SIGHUP reload them.
fn start_tls(config: &NodeConfig) -> Result<Option<tls::NodeTls>, String> {
    let Some(files) = config.tls.clone() else {
        return Ok(None);
    };
    let loaded = tls::NodeTls::load(files).map_err(|e| format!("TLS: {e}"))?;
    tls::reload::install_hangup_handler()
        .map_err(|e| format!("cannot install the SIGHUP handler: {e}"))?;
    Ok(Some(loaded))
}

/// Binds `--listen` and answers health probes on it while the engine
/// opens (`health::startup`), saying so on stdout (the line tests of the
/// start read the address from; launchers wait for the listening line).
fn bind_early(
    config: &NodeConfig,
    node_tls: Option<&tls::NodeTls>,
) -> Result<(health::startup::Responder, std::net::SocketAddr), Box<dyn std::error::Error>> {
    let listener = std::net::TcpListener::bind(&config.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let bound = listener.local_addr()?;
    let answering = config.planted_bug != Some(PlantedBug::NoStartupResponder);
    let server = node_tls.map(tls::NodeTls::server);
    let responder = health::startup::start(listener, server, answering)?;
    let scheme = tls::scheme(node_tls.is_some());
    println!("{}{scheme}://{bound}", health::startup::STARTING_PREFIX);
    Ok((responder, bound))
}

/// Runs a node until SIGINT or SIGTERM, then drains and exits.
pub fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = NodeConfig::resolve(&args)?;
    let auth = auth::Auth::load(&config)?;
    let limit = raise_descriptor_limit()?;
    install_signal_handlers();
    last_seen::check_member(&config)?;
    // Test hooks (docs/API.md "Test hooks"): absent, the plain file system and clock.
    let switches = fault_control::FaultSwitches::default();
    let fs = file_system(&config, &switches)?;
    let write_durability = config::write_durability(&config);
    let tls = start_tls(&config)?;
    let (responder, bound) = bind_early(&config, tls.as_ref())?;
    let horizon = RepairHorizon::for_node(&config);
    let db = Db::open(
        &config.data_dir,
        Options {
            fs: Arc::clone(&fs),
            ..engine_options(&config, &horizon)
        },
    )
    .map_err(|e| format!("cannot open {}: {e}", config.data_dir.display()))?;
    responder.set_phase(health::readiness::Phase::Starting);
    let seed = config.join.clone().map(|url| cluster::join::Seed {
        url,
        ask: Arc::new(layout_io::seed::SeedDial {
            tls: tls.as_ref().and_then(tls::NodeTls::client),
            secret: auth.secret.clone(),
        }),
    });
    let membership = adopt_layout(&mut config, seed.as_ref())?.map(Arc::new);
    let layout_version = membership
        .as_ref()
        .map_or(1, |m| m.read(|s| s.acceptor.current().version));
    let refill = refill::Refill::start(&config.data_dir, config.refill)?;
    if refill.active() {
        tracing::info!(
            data_dir = %config.data_dir.display(),
            "refilling: no reads are served until an anti-entropy round with every peer completes"
        );
    }
    let last_seen_every = last_seen::write_interval(config.tombstone_grace);
    write_last_seen(&config)?;
    let mut last_seen_at = std::time::Instant::now();
    report_recovery(&config, &db);
    let resp_listener = bind_resp(&config)?;
    let db = Arc::new(db);
    let mut polls = Vec::new();
    let mut inboxes = Vec::new();
    for _ in 0..config.net_threads {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), net::WAKER)?;
        inboxes.push(Arc::new(Inbox::new(waker)));
        polls.push(poll);
    }
    let hints_dir = config.data_dir.join("hints");
    let (register_store, register) = net::register_acceptor::start(&config, &fs)?;
    let hints = hints::HintStore::open_on(&hints_dir, config.hints_bytes_max, config.wal_mode, fs)
        .map_err(|e| format!("cannot open hints in {}: {e}", hints_dir.display()))?;
    let hints = Arc::new(hints);
    let backups = open_backups(&config)?;
    let mut budget = start_budget(&config, limit.descriptors(), &db, &hints);
    check_budget(&budget)?;
    let mut clock = start_clock(&config, &db)?;
    if config.fault_control.is_some() {
        clock = clock.set_offset_hook(Arc::clone(&switches.clock_offset_ms));
    }
    let topology = cluster::Topology::new(config.cluster.clone(), config.self_index)
        .with_version(layout_version)
        .with_replication_factor(config.replication_factor)
        .with_via(config.peer_via.clone());
    let placement = cluster::live::LivePlacement::new(
        &config.cluster,
        config.self_index,
        &config.peer_via,
        config.replication_factor,
        layout_version,
        membership.clone(),
    );
    // The clock's node bits: this node's id in the live layout (`hlc`, `NetContext::refresh_placement`).
    clock.set_node(state::clock_node(&config, &placement.get()));
    let peers = NodeShared::peer_statuses(placement.get().self_index());
    let (antientropy, sync_receiver) =
        antientropy::AntiEntropy::new(config.anti_entropy_rate_bytes);
    antientropy.adopt_horizon(&horizon, placement.get());
    let shared = Arc::new(NodeShared {
        tls,
        refill,
        db: Arc::clone(&db),
        hlc: clock,
        config: config.clone(),
        metrics: metrics::NodeMetrics::default(),
        connections: AtomicUsize::new(0),
        peer_connections: AtomicUsize::new(0),
        connections_cap: AtomicUsize::new(budget.cap),
        shutting_down: AtomicBool::new(false),
        inboxes,
        topology,
        membership,
        placement,
        transition: Arc::new(TransitionShared::new(config.net_threads)),
        hints: Arc::clone(&hints),
        backups,
        peers,
        write_durability,
        antientropy,
        auth,
        ranges: range::Ranges::default(),
        register: Some(register),
    });
    publish_budget(&shared, &budget);
    let transition_thread = start_transition(&shared, seed)?;
    let mut descriptors_counted_at = std::time::Instant::now();
    let std_listener = responder.finish()?;
    std_listener.set_nonblocking(true)?;
    let mut listener = Some(mio::net::TcpListener::from_std(std_listener));
    let resp_bound = resp_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let mut resp_listener = resp_listener.map(mio::net::TcpListener::from_std);
    net::resp::mark_started();
    let mut threads = Vec::new();
    for (index, poll) in polls.into_iter().enumerate() {
        let shared = Arc::clone(&shared);
        let l = if index == 0 { listener.take() } else { None };
        let resp_l = if index == 0 {
            resp_listener.take()
        } else {
            None
        };
        threads.push(
            std::thread::Builder::new()
                .name(format!("ataman-net-{index}"))
                .spawn(move || net::run_thread(shared, index, poll, l, resp_l))?,
        );
    }
    let mut ae_threads = antientropy::start(&shared, NodeShared::antientropy_node, sync_receiver)?;
    ae_threads.extend(layout_io::gossip::start(&shared)?);
    // The line launchers wait for, on stdout (docs/API.md); the log says it too.
    let scheme = tls::scheme(shared.tls.is_some());
    println!("ataman: listening on {scheme}://{bound}");
    tracing::info!(addr = %bound, "listening for HTTP requests");
    if let Some(resp_bound) = resp_bound {
        // After the HTTP line, which launchers wait for.
        println!("ataman: listening for RESP on {resp_bound}");
        tracing::info!(addr = %resp_bound, "listening for RESP (Redis protocol) commands");
    }
    while !STOP.load(Ordering::SeqCst) && !threads.iter().any(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        publish_counts_and_renew_clock(&shared);
        shared.auth.tick();
        if let Some(tls) = &shared.tls {
            tls.tick_and_log();
        }
        if descriptors_counted_at.elapsed() >= DESCRIPTORS_RECOUNT_INTERVAL {
            descriptors_counted_at = std::time::Instant::now();
            recount_descriptors(&shared, &mut budget);
        }
        if last_seen_at.elapsed() >= last_seen_every {
            last_seen_at = std::time::Instant::now();
            if let Err(e) = write_last_seen(&config) {
                tracing::warn!(
                    file = %config.data_dir.join(last_seen::FILE_NAME).display(),
                    "{e}"
                );
            }
        }
    }
    tracing::info!("stopping: finishing in-flight requests");
    shared.shutting_down.store(true, Ordering::Release);
    shared.antientropy.status.wake();
    let net_error = join_threads(threads, ae_threads, transition_thread);
    let backups = Arc::clone(&shared.backups);
    drop(shared);
    close_stores(&backups, db, hints)?;
    net::register_acceptor::close_store(register_store)?;
    write_last_seen(&config)?;
    if let Some(e) = net_error {
        return Err(format!("network thread failed: {e}").into());
    }
    tracing::info!("stopped");
    Ok(())
}

/// The descriptor budget of this node under `limit` (see [`descriptors`])
/// with `other_nodes` other nodes in its live layouts.
fn descriptor_budget(
    config: &NodeConfig,
    limit: usize,
    db: &Db,
    hints: &hints::HintStore,
    other_nodes: usize,
) -> descriptors::Budget {
    let tables_open = db.stats().level_files.iter().sum::<usize>() + hints.tables_open();
    let reserve = descriptors::reserve(descriptors::Counts {
        net_threads: config.net_threads,
        listeners: 1 + usize::from(config.resp_listen.is_some()),
        other_nodes,
        tables_open,
        sync_sessions: antientropy::SYNC_SESSIONS_MAX,
        range_threads: range::feed::RANGE_THREADS_MAX,
        // The layout workers, the plan thread and the gossip thread.
        layout_threads: cluster::workers::LAYOUT_WORKERS_MAX
            + antientropy::transfer::plan_thread::PLAN_THREADS_MAX
            + 1,
        copy_sources: antientropy::transfer::copy::COPY_SOURCES_AT_ONCE_MAX,
    });
    descriptors::Budget::new(limit, reserve, config.connections_max)
}

/// The budget at start, from the start-up list (recounted from the live
/// placement within a second, [`recount_descriptors`]).
fn start_budget(
    config: &NodeConfig,
    limit: usize,
    db: &Db,
    hints: &hints::HintStore,
) -> descriptors::Budget {
    let others = config.cluster.len().saturating_sub(1);
    descriptor_budget(config, limit, db, hints, others)
}

/// Other nodes of the live layouts: their union, this node left out.
fn other_live_nodes(shared: &NodeShared) -> usize {
    let placement = shared.placement();
    let me = placement.self_url();
    placement.urls().iter().filter(|u| u.as_str() != me).count()
}

/// Shows `budget` in `/metrics`.
fn publish_budget(shared: &NodeShared, budget: &descriptors::Budget) {
    let m = &shared.metrics;
    m.connections_max
        .store(budget.cap as u64, Ordering::Relaxed);
    m.descriptors_limit
        .store(budget.limit as u64, Ordering::Relaxed);
    m.descriptors_reserved
        .store(budget.reserve.total() as u64, Ordering::Relaxed);
}

/// Recounts the SSTables and the other nodes of the live layouts; a
/// changed reserve changes the client cap (the tables are reserved in
/// steps, the layouts change seldom, so this is rare), which is logged.
fn recount_descriptors(shared: &NodeShared, budget: &mut descriptors::Budget) {
    let now = descriptor_budget(
        &shared.config,
        budget.limit,
        &shared.db,
        &shared.hints,
        other_live_nodes(shared),
    );
    if now.reserve == budget.reserve {
        return;
    }
    *budget = now;
    shared.connections_cap.store(now.cap, Ordering::Relaxed);
    publish_budget(shared, &now);
    if now.cap == 0 {
        tracing::error!(
            limit = now.limit,
            reserved = now.reserve.total(),
            "descriptors: {now}: no descriptor is left for client connections; new ones are \
             closed at once (raise the descriptor limit)"
        );
    } else {
        tracing::info!(
            limit = now.limit,
            reserved = now.reserve.total(),
            connections_max = now.cap,
            "{now}"
        );
    }
}

/// Records now in `<data-dir>/LAST-SEEN` (see [`last_seen`]).
fn write_last_seen(config: &NodeConfig) -> Result<(), String> {
    last_seen::write(&config.data_dir, last_seen::now_ms()).map_err(|e| {
        format!(
            "cannot write {}: {e}",
            config.data_dir.join(last_seen::FILE_NAME).display()
        )
    })
}

/// The node's clock, started past every timestamp it issued before: the
/// reservation in `<data-dir>/CLOCK` (waited for when close, observed when
/// far ahead) and the newest stored timestamp; a first reservation is
/// persisted before it is returned (see [`hlc`], "Reservation").
fn start_clock(config: &NodeConfig, db: &Db) -> Result<hlc::Hlc, String> {
    let dir = config.data_dir.clone();
    let reserved = clock_file::read(&dir)?;
    // Logged when persisting starts failing and when it works again, not
    // on every retry.
    let mut failing = false;
    let persist = move |ts: ataman_engine::key::Timestamp, why: hlc::Renewal| {
        if let hlc::Renewal::Synchronous { wanted } = why {
            tracing::warn!(
                timestamp = wanted,
                unix_ms = hlc::millis(wanted),
                "clock: a timestamp is past the reservation; persisting a new one before using it"
            );
        }
        let result = clock_file::write(&dir, ts);
        match (&result, failing) {
            (Err(e), false) => tracing::error!(
                file = %dir.join(clock_file::FILE_NAME).display(),
                error = %e,
                "cannot write the clock's reservation: the clock issues no timestamp past \
                 its durable reservation; writes answer 503 until it can be written"
            ),
            (Ok(()), true) => tracing::info!(
                file = %dir.join(clock_file::FILE_NAME).display(),
                "clock: reservation written again; writes resume"
            ),
            _ => {}
        }
        failing = result.is_err();
        result
    };
    // Node bits set from the live layout once the placement is built.
    let clock = hlc::Hlc::with_reservation(0, Box::new(persist));
    match hlc::restore_plan(reserved, hlc::wall_ms()) {
        hlc::Restore::Nothing => {}
        hlc::Restore::WaitUntilMs(until) => {
            tracing::info!(
                wait_ms = until.saturating_sub(hlc::wall_ms()),
                until_unix_ms = until,
                "clock: waiting for the wall clock to pass the last run's reservation"
            );
            loop {
                let now = hlc::wall_ms();
                if now >= until {
                    break;
                }
                std::thread::sleep(Duration::from_millis(until - now));
            }
        }
        hlc::Restore::Observe(ts) => {
            tracing::warn!(
                reservation_unix_ms = hlc::millis(ts),
                "clock: the last run's reservation is far ahead of the wall clock; starting \
                 the clock past it"
            );
            clock.observe(ts);
        }
    }
    clock.observe(db.timestamp_max());
    clock.renew().map_err(|e| {
        format!(
            "cannot start the clock: {e} ({})",
            config.data_dir.join(clock_file::FILE_NAME).display()
        )
    })?;
    Ok(clock)
}

fn report_recovery(config: &NodeConfig, db: &Db) {
    let report = db.recovery_report();
    tracing::info!(
        data_dir = %config.data_dir.display(),
        wal_records_replayed = report.replay.records,
        replay_ms = report.replay_duration.as_millis() as u64,
        "opened the data directory"
    );
    if let Some((path, offset, dropped)) = &report.replay.torn_tail {
        tracing::warn!(
            file = %path.display(),
            offset,
            bytes_dropped = dropped,
            "torn WAL tail cut: a record written in part before a crash"
        );
    }
    for (path, offset, reason) in &report.replay.skipped {
        tracing::error!(
            file = %path.display(),
            offset,
            %reason,
            "forced recovery skipped a corrupt WAL record: its writes are lost"
        );
    }
}
