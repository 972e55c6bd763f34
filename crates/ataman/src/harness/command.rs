//! `ataman test-cluster`: the command line of the harness (options,
//! exit codes, `--check`, `--dry-run`, SIGINT and SIGTERM).

use super::faults::FaultKind;
use super::history::Workload;
use super::report::Report;
use super::{Config, INTERRUPTED, checker, faults, history, run};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Exit code of a run that found violations.
pub const EXIT_VIOLATIONS: u8 = 1;
/// Exit code of a run that could not be carried out (a node never started, …).
pub const EXIT_HARNESS_ERROR: u8 = 3;

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// `ataman test-cluster` arguments (docs/RELIABILITY.md).
#[derive(Debug, Clone, clap::Args)]
pub struct TestClusterArgs {
    /// Members to start (2 to 16) [default: 3; 4 with a membership fault].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Spare slots a `join` or `replace` starts [default: 0; 2 with a
    /// membership fault].
    #[arg(long)]
    pub spares: Option<usize>,
    /// The seed of the faults and operations; random (and printed) if absent.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Seconds of workload under faults.
    #[arg(long, default_value_t = 30)]
    pub duration_s: u64,
    /// Fault kinds mixed, comma-separated, `all` (every kind but wipe,
    /// with join, leave, replace and leavecut), or `none`.
    #[arg(
        long,
        default_value = "kill,pause,partition,oneway,delay,wipe,diskfull,clock,crash"
    )]
    pub faults: String,
    /// Workloads mixed, comma-separated: register, set, deletes (HTTP),
    /// cas (RESP read-modify-writes through the consensus register,
    /// checked for linearizability; not in the default mix).
    #[arg(long, default_value = "register,set,deletes")]
    pub workloads: String,
    /// `ack` of writes [default: from / 2 + 1].
    #[arg(long)]
    pub ack_w: Option<u32>,
    /// `ack` of reads [default: from / 2 + 1].
    #[arg(long)]
    pub ack_r: Option<u32>,
    /// `from` of every request [default: the node count].
    #[arg(long)]
    pub from: Option<u32>,
    /// Client threads.
    #[arg(long, default_value_t = 4)]
    pub clients: u32,
    /// Operations per second per client (0: as fast as answers come).
    #[arg(long, default_value_t = 100)]
    pub rate: u32,
    /// Bytes of every value written: its unique id, padded (0: the id alone).
    #[arg(long, default_value_t = 0)]
    pub value_bytes: usize,
    /// Write the history here, one JSON object per line.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Write the report here as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Plant a bug in every node, to see the harness catch it:
    /// ack-before-wal, joined-takes-id-zero,
    /// copy-skips-partitioned-leaving-node, read-repair-writes-older,
    /// expired-value-served, expires-early, copy-skips-keys,
    /// collect-ignores-shallower, collect-on-grace-alone or
    /// register-accepts-below-promise (for `--workloads cas`)
    /// (docs/RELIABILITY.md "Negative controls";
    /// only in a build with the `planted-bugs` feature, as the tests have).
    #[arg(long, value_parser = ["ack-before-wal", "joined-takes-id-zero", "copy-skips-partitioned-leaving-node", "read-repair-writes-older", "expired-value-served", "expires-early", "copy-skips-keys", "collect-ignores-shallower", "collect-on-grace-alone", "register-accepts-below-promise"])]
    pub planted_bug: Option<String>,
    /// Make every file sync of every node this many ms slower for the whole
    /// run (a slow disk, through the fault-control file; at most 60000).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub sync_delay_ms: u64,
    /// Directory for the nodes' data and logs [default: a temporary one,
    /// removed after a run without violations].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the directory after a run without violations.
    #[arg(long)]
    pub keep: bool,
    /// The nodes' --replication-timeout-ms.
    #[arg(long, default_value_t = 1000)]
    pub replication_timeout_ms: u64,
    /// The nodes' --anti-entropy-interval-ms (0: rounds only after a wipe and at the end).
    #[arg(long, default_value_t = 2000)]
    pub anti_entropy_interval_ms: u64,
    /// The nodes' --tombstone-grace-ms: short, so compaction collects
    /// tombstones and expired values during the run (docs/RELIABILITY.md,
    /// "Collection during a run"); at least 4 anti-entropy intervals.
    #[arg(long, default_value_t = super::config::TOMBSTONE_GRACE_MS, value_parser = clap::value_parser!(u64).range(1..))]
    pub tombstone_grace_ms: u64,
    /// The nodes' --memtable-bytes-max: small, so memtables flush and
    /// compactions run (and collect) during the run.
    #[arg(long, default_value_t = super::config::MEMTABLE_BYTES)]
    pub memtable_bytes_max: usize,
    /// The nodes' --replication-factor [default: the node count; 3 with a
    /// membership fault].
    #[arg(long)]
    pub replication_factor: Option<usize>,
    /// Bound on convergence after the last fault healed, seconds.
    #[arg(long, default_value_t = 60)]
    pub converge_timeout_s: u64,
    /// Check a history file written earlier instead of running.
    #[arg(long)]
    pub check: Option<PathBuf>,
    /// Print the seed's fault schedule and exit (nothing is started).
    #[arg(long)]
    pub dry_run: bool,
    /// A file whose first token is sent as `Authorization: Bearer` to nodes
    /// started with `--auth-token-file` (after `--`; default: `ATAMAN_TOKEN`).
    #[arg(long, env = "ATAMAN_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Run a TLS cluster: DIR holds `ca.crt`, `node.crt` and `node.key`
    /// (`ataman cert`); the nodes use them, the harness trusts the CA and
    /// presents the node certificate for its replica reads.
    #[arg(long)]
    pub certs_dir: Option<PathBuf>,
    /// More `ataman serve` arguments for every node, after `--`.
    #[arg(last = true)]
    pub serve_args: Vec<String>,
}

fn parse_list<T>(text: &str, what: &str, parse: fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "none")
        .map(|s| parse(s).ok_or_else(|| format!("unknown {what} {s:?}")))
        .collect()
}

/// A seed from the clock and the process id (printed, so it can be replayed).
fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    ataman_testkit::rng::Rng::new(nanos ^ u64::from(std::process::id()) << 32).next_u64() >> 1
}

impl TestClusterArgs {
    /// The run configuration these arguments describe.
    pub fn config(&self, exe: PathBuf) -> Result<Config, String> {
        let faults: Vec<FaultKind> = if self.faults.split(',').any(|f| f.trim() == "all") {
            FaultKind::all()
        } else {
            parse_list(&self.faults, "fault", FaultKind::parse)?
        };
        let membership = faults.iter().any(|k| k.is_membership());
        let nodes = self.nodes.unwrap_or(if membership { 4 } else { 3 });
        let spares = self.spares.unwrap_or(if membership { 2 } else { 0 });
        let factor = self
            .replication_factor
            .or(membership.then_some(nodes.min(3)));
        let from = self
            .from
            .unwrap_or(factor.map_or(nodes, |r| r.min(nodes)) as u32);
        let mut c = Config::new(exe, self.seed.unwrap_or_else(random_seed));
        c.nodes = nodes;
        c.spares = spares;
        c.duration = Duration::from_secs(self.duration_s);
        c.faults = faults;
        c.workloads = parse_list(&self.workloads, "workload", Workload::parse)?;
        c.from = from;
        c.ack_w = self.ack_w.unwrap_or(from / 2 + 1);
        c.ack_r = self.ack_r.unwrap_or(from / 2 + 1);
        c.clients = self.clients;
        c.rate_per_client = self.rate;
        c.value_bytes = self.value_bytes;
        c.history = self.history.clone();
        c.report = self.report.clone();
        if self.planted_bug.is_some() && !ataman_node::config::PLANTED_BUGS_COMPILED {
            return Err("--planted-bug needs a build with the planted-bugs feature \
                 (cargo build --release -p ataman --features ataman-node/planted-bugs); \
                 a default build carries no planted bug"
                .to_string());
        }
        c.planted_bug = self.planted_bug.clone();
        c.sync_delay_ms = self.sync_delay_ms;
        c.dir = self.dir.clone();
        c.keep_dir = self.keep;
        c.replication_timeout_ms = self.replication_timeout_ms;
        c.anti_entropy_interval_ms = self.anti_entropy_interval_ms;
        c.tombstone_grace_ms = self.tombstone_grace_ms;
        c.memtable_bytes_max = self.memtable_bytes_max;
        c.replication_factor = factor;
        c.converge_timeout = Duration::from_secs(self.converge_timeout_s);
        c.serve_args = self.serve_args.clone();
        if let Some(dir) = &self.certs_dir {
            crate::http_client::tls::set_certs_dir(dir)?;
            c.serve_args
                .splice(0..0, crate::http_client::tls::serve_args(dir));
        }
        Ok(c)
    }
}

/// Runs `ataman test-cluster`: 0 when nothing was found,
/// [`EXIT_VIOLATIONS`] when something was, [`EXIT_HARNESS_ERROR`] when the
/// run could not be carried out.
pub fn run_command(args: &TestClusterArgs) -> ExitCode {
    if let Some(path) = &args.check {
        return check_file(path);
    }
    if let Err(e) = crate::http_client::token::init(args.token_file.as_deref()) {
        eprintln!("ataman test-cluster: {e}");
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("ataman test-cluster: cannot find my own executable: {e}");
            return ExitCode::from(EXIT_HARNESS_ERROR);
        }
    };
    let config = match args.config(exe) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ataman test-cluster: {e}");
            return ExitCode::from(2);
        }
    };
    println!("ataman test-cluster: seed {}", config.seed);
    // SAFETY: `on_interrupt` only stores to an atomic, which is async-signal-safe.
    unsafe {
        let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    if args.dry_run {
        let steps = faults::schedule_shaped(
            config.seed,
            config.shape(),
            config.duration.as_millis() as u64,
            &config.faults,
        );
        for step in steps {
            println!(
                "at {:>6} ms for {:>5} ms: {:?}",
                step.at_ms, step.duration_ms, step.action
            );
        }
        return ExitCode::SUCCESS;
    }
    match run(&config) {
        Ok(report) => {
            print!("{}", report.text());
            exit_code(&report)
        }
        Err(e) => {
            eprintln!("ataman test-cluster: seed {}: {e}", config.seed);
            ExitCode::from(EXIT_HARNESS_ERROR)
        }
    }
}

/// 0 for a clean report, [`EXIT_VIOLATIONS`] otherwise.
fn exit_code(report: &Report) -> ExitCode {
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_VIOLATIONS)
    }
}

/// `--check FILE`: the checker over a saved history.
fn check_file(path: &std::path::Path) -> ExitCode {
    let history = std::fs::File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| history::History::read_jsonl(std::io::BufReader::new(f)));
    match history {
        Ok(history) => {
            let findings = checker::check(&history);
            let report = Report {
                history,
                findings,
                history_path: Some(path.to_path_buf()),
                elapsed_s: 0.0,
            };
            print!("{}", report.text());
            exit_code(&report)
        }
        Err(e) => {
            eprintln!("ataman test-cluster: {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}
