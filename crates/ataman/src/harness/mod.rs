//! The fault-injection test harness: real nodes, seeded faults, seeded
//! workloads, a history of everything, and a checker that proves nothing
//! acknowledged was lost (`ataman test-cluster`, docs/RELIABILITY.md).
//!
//! # Layout
//! - [`cluster`]: the `ataman serve` processes, a fault proxy on every
//!   directed link, process control (kill -9, pause, restart, wipe, stop).
//! - [`faults`]: fault kinds, the seeded schedule, injecting and healing.
//! - [`workload`]: seeded client threads (register, set, deletes) and the
//!   final reads; [`client`] is their keep-alive HTTP client.
//! - [`history`]: every operation and fault, as JSON lines.
//! - [`converge`]: anti-entropy rounds and reading every replica's own copy.
//! - [`checker`]: the pure checks over a history.
//! - [`report`]: the figures, printed and as JSON.
//! - Everything random comes from the test kit's seeded generator
//!   (`ataman_testkit::rng`).
//! - [`command`]: `ataman test-cluster`'s options and exit codes.
//!
//! # A run
//! Start the cluster; run the clients and the fault schedule for the
//! duration; stop the clients; heal everything; converge; read every key;
//! stop the nodes (each must exit 0); check the history; report.
//!
//! Same seed, same faults and same operations: the schedule and each
//! client's operations are functions of the seed alone. Timing is not
//! replayed (threads, processes and the network run in real time), so two
//! runs of a seed interleave differently and may find different things.

pub mod checker;
pub mod client;
pub mod cluster;
pub mod command;
pub mod converge;
pub mod faults;
pub mod history;
pub mod report;
pub mod workload;

use ataman_testkit::lock::lock;
use cluster::{Cluster, ClusterSpec};
use faults::{FaultKind, Injector};
use history::{Crash, Meta, OpKind, Recorder, Workload};
use report::Report;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use workload::ClientSpec;

/// Exit code of a run that found violations.
pub const EXIT_VIOLATIONS: u8 = 1;
/// Exit code of a run that could not be carried out (a node never started, …).
pub const EXIT_HARNESS_ERROR: u8 = 3;
/// Extra time a client waits for an answer beyond the replication timeout
/// (a paused node answers after it resumes: pauses last up to 2 s).
pub const REQUEST_MARGIN_MS: u64 = 3_000;
/// Bound on joining the client threads after the run (each request is
/// bounded by the client timeout, so they end sooner).
pub const CLIENT_JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Set by SIGINT or SIGTERM in `ataman test-cluster`: the faults stop at
/// once, everything is healed and the nodes stopped, nothing is checked.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once the run was interrupted.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Why a run could not be carried out (not what it found).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A node would not start or stop.
    #[error("node {node}: {reason}")]
    Node {
        /// The node.
        node: usize,
        /// What went wrong.
        reason: String,
    },
    /// Arguments that cannot make a run.
    #[error("{0}")]
    Usage(String),
    /// SIGINT or SIGTERM: the nodes were stopped, nothing was checked.
    #[error("interrupted: the nodes were stopped, nothing was checked")]
    Interrupted,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `ataman` executable for the nodes.
    pub exe: PathBuf,
    /// Where the nodes' directories go; None: a fresh temporary directory,
    /// removed after a run without violations.
    pub dir: Option<PathBuf>,
    /// Keep the directory even after a clean run.
    pub keep_dir: bool,
    /// Nodes.
    pub nodes: usize,
    /// The seed.
    pub seed: u64,
    /// How long the workload and the faults run.
    pub duration: Duration,
    /// Fault kinds mixed.
    pub faults: Vec<FaultKind>,
    /// Workloads mixed.
    pub workloads: Vec<Workload>,
    /// `ack` of writes.
    pub ack_w: u32,
    /// `ack` of reads.
    pub ack_r: u32,
    /// `from` of every request.
    pub from: u32,
    /// Client threads.
    pub clients: u32,
    /// Operations per second per client (0: unpaced).
    pub rate_per_client: u32,
    /// Bytes of every value written (its id, padded; 0: the id alone).
    pub value_bytes: usize,
    /// The nodes' `--replication-timeout-ms`.
    pub replication_timeout_ms: u64,
    /// The nodes' `--anti-entropy-interval-ms` (0: rounds only when the
    /// harness asks, after a wipe and at the end).
    pub anti_entropy_interval_ms: u64,
    /// The nodes' `--replication-factor` (None: the node default, the
    /// cluster size): anti-entropy keeps every key on its top `R` replicas,
    /// and convergence is checked on them.
    pub replication_factor: Option<usize>,
    /// Bound on convergence after the heal.
    pub converge_timeout: Duration,
    /// Where to write the history (default: `history.jsonl` in the run directory).
    pub history: Option<PathBuf>,
    /// Where to write the JSON report.
    pub report: Option<PathBuf>,
    /// `--debug-planted-bug` for every node.
    pub planted_bug: Option<String>,
    /// Every file sync of every node this much slower, ms (a slow disk).
    pub sync_delay_ms: u64,
    /// More `ataman serve` arguments for every node.
    pub serve_args: Vec<String>,
}

impl Config {
    /// A configuration with the defaults of `ataman test-cluster`.
    pub fn new(exe: PathBuf, seed: u64) -> Config {
        Config {
            exe,
            dir: None,
            keep_dir: false,
            nodes: 3,
            seed,
            duration: Duration::from_secs(30),
            faults: FaultKind::ALL.to_vec(),
            workloads: Workload::ALL.to_vec(),
            ack_w: 2,
            ack_r: 2,
            from: 3,
            clients: 4,
            rate_per_client: 100,
            value_bytes: 0,
            replication_timeout_ms: 1000,
            anti_entropy_interval_ms: 2000,
            replication_factor: None,
            converge_timeout: Duration::from_secs(60),
            history: None,
            report: None,
            planted_bug: None,
            sync_delay_ms: 0,
            serve_args: Vec::new(),
        }
    }

    fn validate(&self) -> Result<(), HarnessError> {
        let (n, a_w, a_r, f) = (self.nodes as u32, self.ack_w, self.ack_r, self.from);
        if self.nodes < 2 || self.nodes > 16 {
            return Err(HarnessError::Usage(format!(
                "--nodes must be 2 to 16, not {n}"
            )));
        }
        if !(1..=n).contains(&f) || !(1..=f).contains(&a_w) || !(1..=f).contains(&a_r) {
            return Err(HarnessError::Usage(format!(
                "need 1 <= ack <= from <= nodes (ack_w {a_w}, ack_r {a_r}, from {f}, nodes {n})"
            )));
        }
        if self.workloads.is_empty() || self.clients == 0 {
            return Err(HarnessError::Usage(
                "at least one workload and one client".into(),
            ));
        }
        Ok(())
    }

    fn meta(&self, urls: Vec<String>) -> Meta {
        Meta {
            seed: self.seed,
            nodes: self.nodes,
            urls,
            ack_w: self.ack_w,
            ack_r: self.ack_r,
            from: self.from,
            clients: self.clients,
            duration_s: self.duration.as_secs(),
            faults: self.faults.iter().map(|k| k.name().to_owned()).collect(),
            workloads: self.workloads.iter().map(|w| w.name().to_owned()).collect(),
            planted_bug: self.planted_bug.clone(),
        }
    }
}

/// A fresh directory for a run under the system's temporary directory.
fn temp_run_dir(seed: u64) -> Result<PathBuf, HarnessError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "ataman-test-cluster-{}-{seed}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|source| HarnessError::Io {
        what: format!("create {}", dir.display()),
        source,
    })?;
    Ok(dir)
}

/// Carries out one run and checks it. `Err` only when the run could not
/// be carried out; violations are in the report.
pub fn run(config: &Config) -> Result<Report, HarnessError> {
    config.validate()?;
    let run_started = Instant::now();
    let (dir, temporary) = match &config.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| HarnessError::Io {
                what: format!("create {}", dir.display()),
                source,
            })?;
            (dir.clone(), false)
        }
        None => (temp_run_dir(config.seed)?, true),
    };
    let mut serve_args = vec![
        "--replication-timeout-ms".to_string(),
        config.replication_timeout_ms.to_string(),
        "--anti-entropy-interval-ms".to_string(),
        config.anti_entropy_interval_ms.to_string(),
    ];
    if let Some(r) = config.replication_factor {
        serve_args.extend(["--replication-factor".to_string(), r.to_string()]);
    }
    if let Some(bug) = &config.planted_bug {
        serve_args.extend(["--debug-planted-bug".to_string(), bug.clone()]);
    }
    serve_args.extend(config.serve_args.iter().cloned());
    let cluster = Mutex::new(Cluster::start(ClusterSpec {
        exe: config.exe.clone(),
        dir: dir.clone(),
        nodes: config.nodes,
        serve_args,
        sync_delay_ms: config.sync_delay_ms,
    })?);
    let view = lock(&cluster).view();
    let recorder = Arc::new(Recorder::new());
    let duration_ms = config.duration.as_millis() as u64;
    let steps = faults::schedule(config.seed, config.nodes, duration_ms, &config.faults);
    let timeout = Duration::from_millis(config.replication_timeout_ms + REQUEST_MARGIN_MS);
    let spec = ClientSpec {
        seed: config.seed,
        workloads: config.workloads.clone(),
        ack_w: config.ack_w,
        ack_r: config.ack_r,
        from: config.from,
        rate_per_client: config.rate_per_client,
        timeout,
        value_bytes: config.value_bytes,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let deadline = started + config.duration;
    let handles = workload::start_clients(config.clients, &spec, &view, &recorder, &stop, deadline)
        .map_err(|source| HarnessError::Io {
            what: "start the client threads".into(),
            source,
        })?;
    let injector = Injector::new(&cluster, &recorder);
    let left = injector.run(&steps, started, deadline);
    // The clients stop at the deadline by themselves; each request is bounded.
    let join_deadline = Instant::now() + CLIENT_JOIN_TIMEOUT;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        while !handle.is_finished() && Instant::now() < join_deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
    injector.heal_all(left)?;
    drop(injector);
    let mut cluster = cluster.into_inner().unwrap_or_else(PoisonError::into_inner);
    if interrupted() {
        cluster.stop_all();
        drop(cluster);
        if temporary && !config.keep_dir {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(HarnessError::Interrupted);
    }
    let healed = Instant::now();
    // Every key written (even by a write that may have failed) and its
    // replicas: the top max(from, R) nodes (anti-entropy keeps R copies).
    let factor = config.replication_factor.unwrap_or(config.nodes) as u32;
    let mut keys: BTreeMap<String, (Workload, u32)> = BTreeMap::new();
    recorder.with_ops(|ops| {
        for op in ops.iter().filter(|o| o.kind != OpKind::Get) {
            let entry = keys.entry(op.key.clone()).or_insert((op.workload, factor));
            entry.1 = entry.1.max(op.from);
        }
    });
    let replicas: Vec<converge::KeyReplicas> = keys
        .iter()
        .map(|(key, (_, from))| converge::KeyReplicas {
            key: key.clone(),
            replicas: ataman_node::cluster::placement::replicas(
                view.urls(),
                key.as_bytes(),
                *from as usize,
            ),
        })
        .collect();
    let (convergence, copies) =
        converge::converge(&view, &replicas, &recorder, healed, config.converge_timeout);
    let final_keys: Vec<(String, Workload)> =
        keys.iter().map(|(k, (w, _))| (k.clone(), *w)).collect();
    workload::final_reads(
        &final_keys,
        &view,
        &recorder,
        config.from,
        config.from,
        timeout,
        config.value_bytes,
        config.clients,
        config.clients,
    );
    for (node, status) in cluster.poll_exits() {
        recorder.crash(Crash {
            node,
            at_us: recorder.now_us(),
            status: format!("exited on its own: {status}"),
        });
    }
    for (node, status) in cluster.stop_all() {
        recorder.crash(Crash {
            node,
            at_us: recorder.now_us(),
            status: format!("unclean stop: {status}"),
        });
    }
    let mut history = recorder.finish(config.meta(view.urls().to_vec()));
    history.copies = copies;
    history.convergence = Some(convergence);
    let findings = checker::check(&history);
    let history_path = config
        .history
        .clone()
        .unwrap_or_else(|| dir.join("history.jsonl"));
    let written = write_history(&history, &history_path);
    let mut report = Report {
        history,
        findings,
        history_path: written.then_some(history_path),
        elapsed_s: run_started.elapsed().as_secs_f64(),
    };
    if let Some(path) = &config.report {
        report.write(path).map_err(|source| HarnessError::Io {
            what: format!("write {}", path.display()),
            source,
        })?;
    }
    drop(cluster);
    if temporary && !config.keep_dir && report.passed() {
        let _ = std::fs::remove_dir_all(&dir);
        if config.history.is_none() {
            report.history_path = None;
        }
    }
    Ok(report)
}

fn write_history(history: &history::History, path: &std::path::Path) -> bool {
    let file = match std::fs::File::create(path) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "test-cluster: cannot write the history");
            return false;
        }
    };
    let mut out = std::io::BufWriter::new(file);
    match history
        .write_jsonl(&mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
    {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "test-cluster: cannot write the history");
            false
        }
    }
}

pub use command::{TestClusterArgs, run_command};
