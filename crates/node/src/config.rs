//! The node's configuration: defaults, a TOML file, environment variables
//! and flags, in rising precedence (a flag wins over the environment, which
//! wins over the file, which wins over the default).

use crate::log_options::{
    LOG_FORMAT_DEFAULT, LOG_LEVEL_DEFAULT, LogFormat, parse_log_format, parse_log_level,
};
use ataman_engine::WalMode;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

mod planted;

use planted::planted_bug;
pub use planted::{PLANTED_BUGS_COMPILED, PlantedBug, PlantedBugArgs, write_durability};

/// Default address a node listens on.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:19234";
/// Default data directory.
pub const DATA_DIR_DEFAULT: &str = "./ataman-data";
/// Default longest key.
pub const KEY_BYTES_MAX_DEFAULT: usize = 4096;
/// Default largest value.
pub const VALUE_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;
/// Default largest request head.
pub const HEADER_BYTES_MAX_DEFAULT: usize = 16 * 1024;
/// Default connection limit.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Default idle keep-alive timeout.
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// Default time to receive a whole request.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Default time a replicated request waits for `ack` replicas before 504.
pub const REPLICATION_TIMEOUT_MS_DEFAULT: u64 = 1_000;
/// Default bound on requests in flight to one peer (per network thread).
pub const PEER_INFLIGHT_MAX_DEFAULT: usize = 4096;
/// Default bound on the bytes of hints kept for peers that missed writes.
pub const HINTS_BYTES_MAX_DEFAULT: u64 = 256 * 1024 * 1024;
/// Default `--compaction-rate-bytes`: unpaced.
pub const COMPACTION_RATE_BYTES_DEFAULT: u64 = 0;

/// Default time between anti-entropy rounds (10 minutes).
pub const ANTI_ENTROPY_INTERVAL_MS_DEFAULT: u64 = 600_000;
/// Default bound on anti-entropy's scanned plus sent bytes per second.
pub const ANTI_ENTROPY_RATE_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
/// Smallest `--anti-entropy-rate-bytes`: below it one batch of a session
/// (`antientropy::wire::BATCH_BYTES_MAX`) would wait longer than a peer waits for an answer.
pub const ANTI_ENTROPY_RATE_BYTES_MIN: u64 = 1024 * 1024;
/// Default bound on the bytes of held checkpoints a node serves per second
/// (`GET /v0/backup?file=`: a cluster backup's copy): 32 MiB/s, a 1 GB
/// node copied in about 32 s (docs/BACKUP.md, "Pacing").
pub const BACKUP_RATE_BYTES_DEFAULT: u64 = 32 * 1024 * 1024;
/// Smallest `--backup-rate-bytes`: one chunk of a file then waits at most
/// a few seconds, inside a client's 10 s request timeout.
pub const BACKUP_RATE_BYTES_MIN: u64 = 1024 * 1024;
/// Default time a tombstone is kept before compaction may drop it (10 days).
pub const TOMBSTONE_GRACE_MS_DEFAULT: u64 = 10 * 24 * 3600 * 1000;

/// `ataman serve` options. Each is also `ATAMAN_<NAME>` in the environment
/// and `<name>` (with `_`) in the TOML file given by `--config`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on, HOST:PORT (port 0 picks a free one) [default: 127.0.0.1:19234].
    #[arg(long, env = "ATAMAN_LISTEN")]
    pub listen: Option<String>,
    /// Also serve the Redis protocol (RESP2/RESP3) on HOST:PORT (port 0 picks a free one); off unless given (docs/RESP.md).
    #[arg(long, env = "ATAMAN_RESP_LISTEN")]
    pub resp_listen: Option<String>,
    /// Directory holding the node's data, created if missing [default: ./ataman-data].
    #[arg(long, env = "ATAMAN_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// TOML file with any of these options.
    #[arg(long, env = "ATAMAN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Least severe log events kept: error, warn, info, debug or trace [default: info].
    #[arg(long, env = "ATAMAN_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log lines on stderr: text, or json (one object a line) [default: text].
    #[arg(long, env = "ATAMAN_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Network threads [default: 1].
    #[arg(long, env = "ATAMAN_NET_THREADS")]
    pub net_threads: Option<usize>,
    /// WAL durability: fsync, write or none [default: fsync].
    #[arg(long, env = "ATAMAN_WAL_MODE")]
    pub wal_mode: Option<String>,
    /// Longest key in bytes after percent-decoding; longer is 414 [default: 4096].
    #[arg(long, env = "ATAMAN_KEY_BYTES_MAX")]
    pub key_bytes_max: Option<usize>,
    /// Largest value in bytes; larger is 413 [default: 16777216].
    #[arg(long, env = "ATAMAN_VALUE_BYTES_MAX")]
    pub value_bytes_max: Option<usize>,
    /// Largest request line plus headers in bytes; larger is 431 [default: 16384].
    #[arg(long, env = "ATAMAN_HEADER_BYTES_MAX")]
    pub header_bytes_max: Option<usize>,
    /// Client connections; more are accepted and closed at once; lowered to what the descriptor limit leaves after the node's reserve (logged at start) [default: 10000].
    #[arg(long, env = "ATAMAN_CONNECTIONS_MAX")]
    pub connections_max: Option<usize>,
    /// Close a keep-alive connection idle this long, in ms [default: 60000].
    #[arg(long, env = "ATAMAN_IDLE_TIMEOUT_MS")]
    pub idle_timeout_ms: Option<u64>,
    /// Answer 408 to a request not fully received this long after its first byte, in ms [default: 10000].
    #[arg(long, env = "ATAMAN_REQUEST_TIMEOUT_MS")]
    pub request_timeout_ms: Option<u64>,
    /// Memtable size in bytes before it is flushed [default: 67108864].
    #[arg(long, env = "ATAMAN_MEMTABLE_BYTES_MAX")]
    pub memtable_bytes_max: Option<usize>,
    /// Block cache budget in bytes [default: 268435456].
    #[arg(long, env = "ATAMAN_BLOCK_CACHE_BYTES")]
    pub block_cache_bytes: Option<usize>,
    /// Bytes per second an automatic compaction reads at, on average; 0 runs them as fast as they go (a compaction hurries anyway while level 0 holds twice its trigger) [default: 0].
    #[arg(long, env = "ATAMAN_COMPACTION_RATE_BYTES")]
    pub compaction_rate_bytes: Option<u64>,
    /// Comma-separated URLs of every node of the cluster (single node: only --self).
    #[arg(long, env = "ATAMAN_CLUSTER")]
    pub cluster: Option<String>,
    /// This node's URL in --cluster [default: the entry whose port is the listen port].
    #[arg(long = "self", env = "ATAMAN_SELF")]
    pub self_url: Option<String>,
    /// Start as a node that is not yet a member: learn the cluster's layout from this member's URL and wait to be added (no --cluster).
    #[arg(long, env = "ATAMAN_JOIN", conflicts_with = "cluster")]
    pub join: Option<String>,
    /// Skip corrupt WAL records that are not a torn tail (reported in the log).
    #[arg(long, env = "ATAMAN_FORCE_RECOVERY")]
    pub force_recovery: bool,
    /// Serve atomic read-modify-writes (INCR, SET NX, GETSET, MULTI on one key, …) of keys with replicas on other nodes through the consensus register; `--consensus-register=false` refuses them instead (docs/RESP.md, "Atomic read-modify-write") [default: true].
    #[arg(
        long,
        env = "ATAMAN_CONSENSUS_REGISTER",
        num_args = 0..=1,
        default_missing_value = "true",
        require_equals = true
    )]
    pub consensus_register: Option<bool>,
    /// A replicated request without `ack` answers after this long is 504, in ms [default: 1000].
    #[arg(long, env = "ATAMAN_REPLICATION_TIMEOUT_MS")]
    pub replication_timeout_ms: Option<u64>,
    /// Requests in flight to one peer per network thread; more fail at once for that replica [default: 4096].
    #[arg(long, env = "ATAMAN_PEER_INFLIGHT_MAX")]
    pub peer_inflight_max: Option<usize>,
    /// Bytes of hints kept for peers that missed writes; past it new hints are dropped and counted [default: 268435456].
    #[arg(long, env = "ATAMAN_HINTS_BYTES_MAX")]
    pub hints_bytes_max: Option<u64>,
    /// Replicas anti-entropy keeps of each key: its top R nodes in placement; set it to the `from` clients use [default: the cluster size].
    #[arg(long, env = "ATAMAN_REPLICATION_FACTOR")]
    pub replication_factor: Option<usize>,
    /// Time between anti-entropy rounds in ms; 0 runs rounds only on demand (POST /v0/repair) [default: 600000].
    #[arg(long, env = "ATAMAN_ANTI_ENTROPY_INTERVAL_MS")]
    pub anti_entropy_interval_ms: Option<u64>,
    /// Anti-entropy's bound on scanned plus sent bytes per second (at least 1048576) [default: 67108864].
    #[arg(long, env = "ATAMAN_ANTI_ENTROPY_RATE_BYTES")]
    pub anti_entropy_rate_bytes: Option<u64>,
    /// Bound on the bytes of held checkpoints served per second to a cluster backup's copy (at least 1048576; docs/BACKUP.md, "Pacing") [default: 33554432].
    #[arg(long, env = "ATAMAN_BACKUP_RATE_BYTES")]
    pub backup_rate_bytes: Option<u64>,
    /// How long a tombstone is kept before compaction may drop it, in ms; a node down longer refuses to start on its old data [default: 864000000].
    #[arg(long, env = "ATAMAN_TOMBSTONE_GRACE_MS")]
    pub tombstone_grace_ms: Option<u64>,
    /// Start refilling: serve no reads until an anti-entropy round with every peer has completed (after the data directory was wiped or lost; docs/CLUSTER.md). Kept across restarts in `<data-dir>/REFILLING` until done.
    #[arg(long, env = "ATAMAN_REFILL")]
    pub refill: bool,
    /// Client tokens: a file of `TOKEN ROLE` lines (ROLE: read, write or admin), readable by its owner only; re-read on SIGHUP or when it changes (docs/SECURITY.md).
    #[arg(long, env = "ATAMAN_AUTH_TOKEN_FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// The secret every node of the cluster shares, in a file readable by its owner only; peers prove it to each other (docs/SECURITY.md).
    #[arg(long, env = "ATAMAN_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Start on a non-loopback address without --auth-token-file (or a cluster without --cluster-secret-file): anyone who can reach the node can use it.
    #[arg(long, env = "ATAMAN_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// Reach a node through another address: comma-separated URL=HOST:PORT (fault-injection proxies in tests).
    #[arg(long, env = "ATAMAN_PEER_VIA", hide = true)]
    pub peer_via: Option<String>,
    /// Test hook: poll this file for `disk_full=0|1` and `clock_offset_ms=N` lines (docs/API.md "Test hooks").
    #[arg(long, env = "ATAMAN_FAULT_CONTROL", hide = true)]
    pub fault_control: Option<PathBuf>,
    /// TLS: the node's certificate chain (PEM); with `--tls-key`, the listener speaks TLS only (docs/SECURITY.md, "TLS").
    #[arg(long, env = "ATAMAN_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the private key of `--tls-cert` (PEM).
    #[arg(long, env = "ATAMAN_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// TLS: the cluster CA (PEM); nodes dial and accept each other over TLS, verified against it.
    #[arg(long, env = "ATAMAN_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Test hooks compiled only with the `planted-bugs` feature.
    #[command(flatten)]
    pub planted: PlantedBugArgs,
}

/// The same options as read from a TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    resp_listen: Option<String>,
    data_dir: Option<PathBuf>,
    log_level: Option<String>,
    log_format: Option<String>,
    net_threads: Option<usize>,
    wal_mode: Option<String>,
    key_bytes_max: Option<usize>,
    value_bytes_max: Option<usize>,
    header_bytes_max: Option<usize>,
    connections_max: Option<usize>,
    idle_timeout_ms: Option<u64>,
    request_timeout_ms: Option<u64>,
    memtable_bytes_max: Option<usize>,
    block_cache_bytes: Option<usize>,
    compaction_rate_bytes: Option<u64>,
    cluster: Option<String>,
    #[serde(rename = "self")]
    self_url: Option<String>,
    force_recovery: Option<bool>,
    consensus_register: Option<bool>,
    replication_timeout_ms: Option<u64>,
    peer_inflight_max: Option<usize>,
    hints_bytes_max: Option<u64>,
    replication_factor: Option<usize>,
    anti_entropy_interval_ms: Option<u64>,
    anti_entropy_rate_bytes: Option<u64>,
    backup_rate_bytes: Option<u64>,
    tombstone_grace_ms: Option<u64>,
    refill: Option<bool>,
    peer_via: Option<String>,
    auth_token_file: Option<PathBuf>,
    cluster_secret_file: Option<PathBuf>,
    allow_unauthenticated: Option<bool>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
}

/// The resolved configuration of a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Address to listen on.
    pub listen: String,
    /// Address of the RESP listener, if any (`--resp-listen`).
    pub resp_listen: Option<String>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Least severe log events kept.
    pub log_level: tracing::Level,
    /// How log events are printed.
    pub log_format: LogFormat,
    /// Network threads.
    pub net_threads: usize,
    /// WAL mode.
    pub wal_mode: WalMode,
    /// Longest key.
    pub key_bytes_max: usize,
    /// Largest value.
    pub value_bytes_max: usize,
    /// Largest request head.
    pub header_bytes_max: usize,
    /// Client connection limit (`--connections-max`); the cap in force may
    /// be lower (the descriptor budget's `Budget`).
    pub connections_max: usize,
    /// Idle keep-alive timeout.
    pub idle_timeout: Duration,
    /// Time to receive a whole request.
    pub request_timeout: Duration,
    /// Memtable size.
    pub memtable_bytes_max: Option<usize>,
    /// Block cache budget.
    pub block_cache_bytes: Option<usize>,
    /// Automatic compactions' read rate (0: unpaced).
    pub compaction_rate_bytes: u64,
    /// Every node's URL, the same list on every node.
    pub cluster: Vec<String>,
    /// This node's index in `cluster`.
    pub self_index: usize,
    /// `--join`: the seed member to learn the layout from (`cluster` is
    /// then this node alone until it is added).
    pub join: Option<String>,
    /// `--consensus-register` (default true): read-modify-writes of keys
    /// with other replicas take the register (`net::register_rmw`);
    /// false refuses them.
    pub consensus_register: bool,
    /// Replicated request timeout.
    pub replication_timeout: Duration,
    /// Requests in flight per peer link.
    pub peer_inflight_max: usize,
    /// Hint store bound.
    pub hints_bytes_max: u64,
    /// Dial overrides: for `cluster[i]`, connect to this `HOST:PORT` instead.
    pub peer_via: Vec<Option<String>>,
    /// Forced WAL recovery.
    pub force_recovery: bool,
    /// Replicas anti-entropy keeps of each key (its top R in placement), 1..=cluster size.
    pub replication_factor: usize,
    /// Time between anti-entropy rounds; zero: on demand only.
    pub anti_entropy_interval: Duration,
    /// Anti-entropy's scanned plus sent bytes per second.
    pub anti_entropy_rate_bytes: u64,
    /// Bytes of held checkpoints served per second (`--backup-rate-bytes`).
    pub backup_rate_bytes: u64,
    /// How long tombstones are kept (the engine's `tombstone_grace`), and
    /// how long a node may be down before it refuses its old data.
    pub tombstone_grace: Duration,
    /// Start refilling (`--refill`): no reads until a round with every peer completed.
    pub refill: bool,
    /// Test hook: the fault-control file polled for injected faults.
    pub fault_control: Option<PathBuf>,
    /// `--auth-token-file`.
    pub auth_token_file: Option<PathBuf>,
    /// `--cluster-secret-file`.
    pub cluster_secret_file: Option<PathBuf>,
    /// `--allow-unauthenticated`.
    pub allow_unauthenticated: bool,
    /// Test hook: a deliberate bug (the fault harness's negative control).
    pub planted_bug: Option<PlantedBug>,
    /// `--tls-cert`, `--tls-key`, `--tls-ca` (`None`: plain TCP).
    pub tls: Option<crate::tls::reload::TlsFiles>,
}

fn parse_wal_mode(s: &str) -> Result<WalMode, String> {
    match s {
        "fsync" => Ok(WalMode::Fsync),
        "write" => Ok(WalMode::Write),
        "none" => Ok(WalMode::None),
        other => Err(format!(
            "wal-mode must be fsync, write or none, not {other:?}"
        )),
    }
}

fn positive(name: &str, v: usize) -> Result<usize, String> {
    if v == 0 {
        Err(format!("{name} must be at least 1"))
    } else {
        Ok(v)
    }
}

impl NodeConfig {
    /// Resolves flags and environment (`args`, already merged by clap) over the file over defaults.
    pub fn resolve(args: &ServeArgs) -> Result<NodeConfig, String> {
        let file: FileConfig = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| format!("config {}: {e}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let listen = args
            .listen
            .clone()
            .or(file.listen)
            .unwrap_or_else(|| LISTEN_DEFAULT.into());
        let wal_mode = args.wal_mode.clone().or(file.wal_mode);
        let cluster_arg = args.cluster.clone().or(file.cluster);
        let self_arg = args.self_url.clone().or(file.self_url);
        let (mut cluster, self_index) =
            resolve_cluster(&listen, cluster_arg.as_deref(), self_arg.as_deref())?;
        let tls = crate::tls::resolve_files(
            args.tls_cert.clone().or(file.tls_cert.clone()),
            args.tls_key.clone().or(file.tls_key.clone()),
            args.tls_ca.clone().or(file.tls_ca.clone()),
        )?;
        let defaulted = cluster_arg.is_none() && self_arg.is_none();
        crate::tls::check_member_urls(&mut cluster, tls.as_ref(), defaulted)?;
        let peer_via = resolve_peer_via(&cluster, args.peer_via.clone().or(file.peer_via))?;
        let replication_factor = args
            .replication_factor
            .or(file.replication_factor)
            .unwrap_or(cluster.len());
        if replication_factor == 0 || replication_factor > cluster.len() {
            return Err(format!(
                "replication-factor must be between 1 and the cluster size {}, not {replication_factor}",
                cluster.len()
            ));
        }
        let tombstone_grace_ms = args
            .tombstone_grace_ms
            .or(file.tombstone_grace_ms)
            .unwrap_or(TOMBSTONE_GRACE_MS_DEFAULT);
        if tombstone_grace_ms == 0 {
            return Err("tombstone-grace-ms must be at least 1".into());
        }
        let anti_entropy_interval_ms = args
            .anti_entropy_interval_ms
            .or(file.anti_entropy_interval_ms)
            .unwrap_or(ANTI_ENTROPY_INTERVAL_MS_DEFAULT);
        if anti_entropy_interval_ms != 0 && anti_entropy_interval_ms >= tombstone_grace_ms {
            return Err(format!(
                "anti-entropy-interval-ms ({anti_entropy_interval_ms}) must be below tombstone-grace-ms ({tombstone_grace_ms}): \
                 replicas must compare before tombstones may be dropped (0 runs rounds only on demand)"
            ));
        }
        let anti_entropy_rate_bytes = args
            .anti_entropy_rate_bytes
            .or(file.anti_entropy_rate_bytes)
            .unwrap_or(ANTI_ENTROPY_RATE_BYTES_DEFAULT);
        if anti_entropy_rate_bytes < ANTI_ENTROPY_RATE_BYTES_MIN {
            return Err(format!(
                "anti-entropy-rate-bytes must be at least {ANTI_ENTROPY_RATE_BYTES_MIN}, not {anti_entropy_rate_bytes}"
            ));
        }
        let backup_rate_bytes = args
            .backup_rate_bytes
            .or(file.backup_rate_bytes)
            .unwrap_or(BACKUP_RATE_BYTES_DEFAULT);
        if backup_rate_bytes < BACKUP_RATE_BYTES_MIN {
            return Err(format!(
                "backup-rate-bytes must be at least {BACKUP_RATE_BYTES_MIN}, not {backup_rate_bytes}"
            ));
        }
        Ok(NodeConfig {
            replication_factor,
            anti_entropy_interval: Duration::from_millis(anti_entropy_interval_ms),
            anti_entropy_rate_bytes,
            backup_rate_bytes,
            tombstone_grace: Duration::from_millis(tombstone_grace_ms),
            refill: args.refill || file.refill.unwrap_or(false),
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| DATA_DIR_DEFAULT.into()),
            log_level: parse_log_level(
                args.log_level
                    .as_deref()
                    .or(file.log_level.as_deref())
                    .unwrap_or(LOG_LEVEL_DEFAULT),
            )?,
            log_format: parse_log_format(
                args.log_format
                    .as_deref()
                    .or(file.log_format.as_deref())
                    .unwrap_or(LOG_FORMAT_DEFAULT),
            )?,
            net_threads: positive(
                "net-threads",
                args.net_threads.or(file.net_threads).unwrap_or(1),
            )?,
            wal_mode: parse_wal_mode(wal_mode.as_deref().unwrap_or("fsync"))?,
            key_bytes_max: positive(
                "key-bytes-max",
                args.key_bytes_max
                    .or(file.key_bytes_max)
                    .unwrap_or(KEY_BYTES_MAX_DEFAULT),
            )?
            .min(ataman_engine::key::KEY_BYTES_MAX),
            value_bytes_max: args
                .value_bytes_max
                .or(file.value_bytes_max)
                .unwrap_or(VALUE_BYTES_MAX_DEFAULT)
                .min(ataman_engine::key::VALUE_BYTES_MAX),
            header_bytes_max: positive(
                "header-bytes-max",
                args.header_bytes_max
                    .or(file.header_bytes_max)
                    .unwrap_or(HEADER_BYTES_MAX_DEFAULT),
            )?,
            connections_max: positive(
                "connections-max",
                args.connections_max
                    .or(file.connections_max)
                    .unwrap_or(CONNECTIONS_MAX_DEFAULT),
            )?,
            idle_timeout: Duration::from_millis(
                args.idle_timeout_ms
                    .or(file.idle_timeout_ms)
                    .unwrap_or(IDLE_TIMEOUT_MS_DEFAULT),
            ),
            request_timeout: Duration::from_millis(
                args.request_timeout_ms
                    .or(file.request_timeout_ms)
                    .unwrap_or(REQUEST_TIMEOUT_MS_DEFAULT),
            ),
            memtable_bytes_max: args.memtable_bytes_max.or(file.memtable_bytes_max),
            block_cache_bytes: args.block_cache_bytes.or(file.block_cache_bytes),
            compaction_rate_bytes: args
                .compaction_rate_bytes
                .or(file.compaction_rate_bytes)
                .unwrap_or(COMPACTION_RATE_BYTES_DEFAULT),
            force_recovery: args.force_recovery || file.force_recovery.unwrap_or(false),
            consensus_register: args
                .consensus_register
                .or(file.consensus_register)
                .unwrap_or(true),
            replication_timeout: Duration::from_millis(
                args.replication_timeout_ms
                    .or(file.replication_timeout_ms)
                    .unwrap_or(REPLICATION_TIMEOUT_MS_DEFAULT)
                    .max(1),
            ),
            peer_inflight_max: positive(
                "peer-inflight-max",
                args.peer_inflight_max
                    .or(file.peer_inflight_max)
                    .unwrap_or(PEER_INFLIGHT_MAX_DEFAULT),
            )?,
            hints_bytes_max: args
                .hints_bytes_max
                .or(file.hints_bytes_max)
                .unwrap_or(HINTS_BYTES_MAX_DEFAULT),
            listen,
            resp_listen: args.resp_listen.clone().or(file.resp_listen),
            cluster,
            self_index,
            join: resolve_join(args.join.as_deref())?,
            peer_via,
            fault_control: args.fault_control.clone(),
            auth_token_file: args.auth_token_file.clone().or(file.auth_token_file),
            cluster_secret_file: args
                .cluster_secret_file
                .clone()
                .or(file.cluster_secret_file),
            allow_unauthenticated: args.allow_unauthenticated
                || file.allow_unauthenticated.unwrap_or(false),
            tls,
            planted_bug: planted_bug(&args.planted)?,
        })
    }
}

fn url_port(url: &str) -> Option<u16> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let host_port = rest.split('/').next()?;
    host_port.rsplit(':').next()?.parse().ok()
}

/// Validates `--join`'s seed URL.
fn resolve_join(seed: Option<&str>) -> Result<Option<String>, String> {
    let Some(seed) = seed else {
        return Ok(None);
    };
    if url_port(seed).is_none() {
        return Err(format!("--join {seed:?} is not an http(s)://HOST:PORT URL"));
    }
    Ok(Some(seed.trim_end_matches('/').to_owned()))
}

/// Validates `--cluster` and `--self`. A single node may omit both.
fn resolve_cluster(
    listen: &str,
    cluster: Option<&str>,
    self_url: Option<&str>,
) -> Result<(Vec<String>, usize), String> {
    let Some(cluster) = cluster else {
        return match self_url {
            Some(s) => Ok((vec![s.to_owned()], 0)),
            None => Ok((vec![format!("http://{listen}")], 0)),
        };
    };
    let urls: Vec<String> = cluster
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    for u in &urls {
        if url_port(u).is_none() {
            return Err(format!(
                "cluster entry {u:?} is not an http(s)://HOST:PORT URL"
            ));
        }
    }
    let me = match self_url {
        Some(s) => s.to_owned(),
        None => {
            let port = listen
                .rsplit(':')
                .next()
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or_else(|| format!("cannot read the port of --listen {listen}"))?;
            let mut matching = urls.iter().filter(|u| url_port(u) == Some(port));
            match (matching.next(), matching.next()) {
                (Some(u), None) => u.clone(),
                (None, _) => {
                    return Err(format!(
                        "no --cluster entry has the listen port {port}; pass --self"
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "several --cluster entries have port {port}; pass --self"
                    ));
                }
            }
        }
    };
    let Some(self_index) = urls.iter().position(|u| *u == me) else {
        return Err(format!("--self {me} is not in --cluster"));
    };
    for (i, u) in urls.iter().enumerate() {
        if urls[..i].contains(u) {
            return Err(format!("--cluster lists {u} twice"));
        }
    }
    if urls.len() > crate::hlc::NODES_MAX {
        return Err(format!(
            "--cluster lists {} nodes; at most {} are supported",
            urls.len(),
            crate::hlc::NODES_MAX
        ));
    }
    Ok((urls, self_index))
}

/// Parses `--peer-via URL=HOST:PORT,...` into a dial override per cluster entry.
fn resolve_peer_via(
    cluster: &[String],
    spec: Option<String>,
) -> Result<Vec<Option<String>>, String> {
    let mut via = vec![None; cluster.len()];
    for item in spec.iter().flat_map(|s| s.split(',')).map(str::trim) {
        if item.is_empty() {
            continue;
        }
        let (url, addr) = item
            .rsplit_once('=')
            .ok_or_else(|| format!("peer-via entry {item:?} is not URL=HOST:PORT"))?;
        let index = cluster
            .iter()
            .position(|u| u == url)
            .ok_or_else(|| format!("peer-via names {url}, which is not in --cluster"))?;
        via[index] = Some(addr.to_owned());
    }
    Ok(via)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flags win over the file; the file over defaults; bad values are errors.
    #[test]
    fn precedence_and_validation() {
        let dir = tempfile_dir();
        let path = dir.join("ataman.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:7000\"\nresp_listen = \"127.0.0.1:7001\"\nnet_threads = 2\nwal_mode = \"write\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path.clone()),
            net_threads: Some(3),
            ..ServeArgs::default()
        };
        let c = NodeConfig::resolve(&args).unwrap();
        assert_eq!(
            (c.listen.as_str(), c.net_threads, c.wal_mode),
            ("127.0.0.1:7000", 3, WalMode::Write)
        );
        assert_eq!(c.value_bytes_max, VALUE_BYTES_MAX_DEFAULT);
        assert_eq!(c.resp_listen.as_deref(), Some("127.0.0.1:7001"));
        assert_eq!(
            NodeConfig::resolve(&ServeArgs::default())
                .unwrap()
                .resp_listen,
            None
        );
        // TLS from the file, as from the flags (a flag wins).
        std::fs::write(&path, "tls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n").unwrap();
        let tls = NodeConfig::resolve(&args).unwrap().tls.unwrap();
        assert_eq!(
            (tls.cert.to_str(), tls.key.to_str()),
            (Some("/c.pem"), Some("/k.pem"))
        );
        assert_eq!(tls.ca, None);
        let flagged = ServeArgs {
            tls_cert: Some("/flag.pem".into()),
            ..args.clone()
        };
        let tls = NodeConfig::resolve(&flagged).unwrap().tls.unwrap();
        assert_eq!(tls.cert.to_str(), Some("/flag.pem"));
        std::fs::write(&path, "tls_cert = \"/c.pem\"\n").unwrap();
        assert!(
            NodeConfig::resolve(&args)
                .unwrap_err()
                .contains("go together")
        );
        std::fs::write(&path, "unknown_option = 1\n").unwrap();
        assert!(NodeConfig::resolve(&args).unwrap_err().contains("unknown"));
        let bad = ServeArgs {
            wal_mode: Some("sometimes".into()),
            ..ServeArgs::default()
        };
        assert!(NodeConfig::resolve(&bad).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The register: on by default, `=false` off, a flag over the file.
    #[test]
    fn consensus_register_defaults_on() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let on = |argv: &[&str], file: Option<&str>| {
            let mut args = <Cli as clap::Parser>::try_parse_from(argv).unwrap().serve;
            let dir = std::env::temp_dir().join(format!("ataman-flag-{}", std::process::id()));
            if let Some(text) = file {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("f.toml"), text).unwrap();
                args.config = Some(dir.join("f.toml"));
            }
            NodeConfig::resolve(&args).unwrap().consensus_register
        };
        let off = Some("consensus_register = false\n");
        assert!(on(&["serve"], None));
        assert!(on(&["serve", "--consensus-register"], None));
        assert!(!on(&["serve", "--consensus-register=false"], None));
        assert!(!on(&["serve"], off));
        assert!(on(&["serve", "--consensus-register=true"], off));
    }

    /// Anti-entropy options: R within the cluster, the interval below the
    /// grace (or 0), the rate at least its minimum.
    #[test]
    fn anti_entropy_validation() {
        let three = "http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003";
        let base = ServeArgs {
            listen: Some("127.0.0.1:7001".into()),
            cluster: Some(three.into()),
            ..ServeArgs::default()
        };
        let c = NodeConfig::resolve(&base).unwrap();
        assert_eq!(c.replication_factor, 3);
        assert_eq!(
            c.tombstone_grace,
            Duration::from_millis(TOMBSTONE_GRACE_MS_DEFAULT)
        );
        assert_eq!(
            c.anti_entropy_interval,
            Duration::from_millis(ANTI_ENTROPY_INTERVAL_MS_DEFAULT)
        );
        for (r, ok) in [(0, false), (1, true), (3, true), (4, false)] {
            let args = ServeArgs {
                replication_factor: Some(r),
                ..base.clone()
            };
            assert_eq!(NodeConfig::resolve(&args).is_ok(), ok, "R = {r}");
        }
        let args = ServeArgs {
            tombstone_grace_ms: Some(2000),
            ..base.clone()
        };
        let e = NodeConfig::resolve(&args).unwrap_err();
        assert!(e.contains("must be below tombstone-grace-ms"), "{e}");
        let args = ServeArgs {
            tombstone_grace_ms: Some(2000),
            anti_entropy_interval_ms: Some(0),
            ..base.clone()
        };
        assert!(NodeConfig::resolve(&args).is_ok());
        let args = ServeArgs {
            tombstone_grace_ms: Some(2000),
            anti_entropy_interval_ms: Some(1999),
            ..base.clone()
        };
        assert!(NodeConfig::resolve(&args).is_ok());
        let args = ServeArgs {
            anti_entropy_rate_bytes: Some(ANTI_ENTROPY_RATE_BYTES_MIN - 1),
            ..base.clone()
        };
        assert!(NodeConfig::resolve(&args).is_err());
        let at_min = ServeArgs {
            backup_rate_bytes: Some(BACKUP_RATE_BYTES_MIN),
            ..base.clone()
        };
        assert_eq!(
            NodeConfig::resolve(&at_min).unwrap().backup_rate_bytes,
            BACKUP_RATE_BYTES_MIN
        );
        let args = ServeArgs {
            backup_rate_bytes: Some(BACKUP_RATE_BYTES_MIN - 1),
            ..base.clone()
        };
        assert!(NodeConfig::resolve(&args).is_err());
        let args = ServeArgs {
            tombstone_grace_ms: Some(0),
            anti_entropy_interval_ms: Some(0),
            ..base
        };
        assert!(NodeConfig::resolve(&args).is_err());
    }

    /// --self defaults to the entry with the listen port; inconsistencies are errors.
    #[test]
    fn cluster_validation() {
        assert_eq!(
            resolve_cluster("127.0.0.1:19234", Some("http://localhost:19234"), None).unwrap(),
            (vec!["http://localhost:19234".to_string()], 0)
        );
        let two = vec!["http://a:1".to_string(), "http://b:2".to_string()];
        assert_eq!(
            resolve_peer_via(&two, Some("http://b:2=127.0.0.1:9".into())).unwrap(),
            vec![None, Some("127.0.0.1:9".to_string())]
        );
        assert!(resolve_peer_via(&two, Some("http://c:3=127.0.0.1:9".into())).is_err());
        assert!(resolve_cluster("127.0.0.1:1", Some("http://localhost:19234"), None).is_err());
        assert!(resolve_cluster("127.0.0.1:1", Some("localhost:19234"), None).is_err());
        assert!(resolve_cluster("127.0.0.1:1", Some("http://a:1"), Some("http://b:1")).is_err());
        // Several nodes: --self picks the entry, or the listen port does.
        let three = "http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003";
        let (urls, me) =
            resolve_cluster("127.0.0.1:0", Some(three), Some("http://127.0.0.1:7002")).unwrap();
        assert_eq!((urls.len(), me), (3, 1));
        assert_eq!(
            resolve_cluster("127.0.0.1:7003", Some(three), None)
                .unwrap()
                .1,
            2
        );
        assert!(
            resolve_cluster(
                "127.0.0.1:0",
                Some("http://a:1,http://a:1"),
                Some("http://a:1")
            )
            .is_err()
        );
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ataman-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
