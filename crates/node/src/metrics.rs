//! Node metrics and the Prometheus text rendering of `/metrics`.
//!
//! Everything a user needs to find where throughput went: requests by route
//! and status, latency per route, the engine's per-stage histograms (queue
//! wait, tx apply, WAL write, fsync), WAL group sizes, queue depths,
//! memtable and SSTable figures, compaction bytes, and CPU time per thread.
//!
//! # Thread safety
//! Recording is relaxed atomics only; rendering reads a non-atomic cut.

pub mod register;

use crate::api::Route;
use crate::http::Status;
use ataman_engine::metrics::{
    EngineMetrics, HISTOGRAM_BUCKETS, Histogram, HistogramSnapshot, bucket_upper_bound,
};
use ataman_engine::{Db, Stats};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const ROUTES: usize = Route::ALL.len();
/// Statuses tracked per route (indexed by `Status as usize`).
const STATUSES: usize = 23;

/// Request counters and latencies.
pub struct NodeMetrics {
    requests: Vec<[AtomicU64; STATUSES]>,
    latency_us: Vec<Histogram>,
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Connections closed at once at the cap set by `--connections-max`.
    pub connections_refused_max: AtomicU64,
    /// Connections closed at once at the cap the descriptor limit leaves.
    pub connections_refused_descriptors: AtomicU64,
    /// Open client connections (mirrors `NodeShared::connections`, set by
    /// the main thread).
    pub connections_open: AtomicU64,
    /// Open peer connections to this node (mirrors `NodeShared::peer_connections`).
    pub peer_connections_open: AtomicU64,
    /// The client connection cap (the descriptor budget's cap).
    pub connections_max: AtomicU64,
    /// The process's descriptor limit.
    pub descriptors_limit: AtomicU64,
    /// Descriptors the node reserves for itself.
    pub descriptors_reserved: AtomicU64,
    /// `accept` calls that failed (no descriptor or memory left) and were retried.
    pub accept_failures: AtomicU64,
    /// Connections closed because handling them panicked (the network
    /// thread went on serving the others; `net::event_loop`).
    pub connection_panics: AtomicU64,
    /// 1 while the clock's reservation cannot be persisted (set by the main thread).
    pub clock_reservation_failing: AtomicU64,
    /// Read repairs sent (to a peer or to the local engine).
    pub read_repairs: AtomicU64,
    /// Writes coordinated while two layout versions were live: each sent
    /// to the union of both versions' replica sets, `ack` needed in each.
    pub layout_writes_both_sets: AtomicU64,
    /// Client requests' replica requests a peer fenced (it knew a newer
    /// layout version), held until this node placed with a newer one.
    pub peer_requests_fenced: AtomicU64,
    /// Hints the store refused (full or failed).
    pub hints_refused: AtomicU64,
    /// Writes from peers not stored because this replica held a newer version.
    pub peer_writes_superseded: AtomicU64,
    /// Writes this node coordinated that it re-stamped above a replica's newer version.
    pub writes_restamped: AtomicU64,
    /// Writes that gave up after `RESTAMPS_MAX` re-stamps (answered 504).
    pub writes_restamp_exhausted: AtomicU64,
    /// Requests per write to a peer (the client side's batches).
    pub peer_batch_frames: Histogram,
    /// Answers per write to a peer (the server side's batches).
    pub peer_reply_batch_frames: Histogram,
    /// RESP commands served, by the command table's index (rendered by
    /// `net::resp`, which names them).
    pub resp_commands: [AtomicU64; RESP_COMMAND_KINDS],
    /// Latency of RESP commands on keys (those gathered from their keys'
    /// answers: `GET`, `SET`, `MGET`, `INCR` …), µs from the command being
    /// parsed to its reply being ready.
    pub resp_key_latency_us: Histogram,
    /// Atomic read-modify-writes read again and retried after their
    /// conditional write met a concurrent one (`net::rmw_local`).
    pub rmw_retries: AtomicU64,
    /// Atomic read-modify-writes refused after
    /// `net::rmw_local::ATTEMPTS_MAX` conflicts in a row.
    pub rmw_gave_up: AtomicU64,
    /// `EXEC`s answered the null array because the watched key changed
    /// after `WATCH` (`net::rmw_local`).
    pub watch_aborts: AtomicU64,
    /// The consensus register's counters ([`register::RegisterFigures`]).
    pub register: register::RegisterFigures,
    /// The slow log: requests over a threshold, with their stages
    /// (`crate::slowlog`; read by `SLOWLOG` and `GET /v0/slowlog`).
    pub slowlog: crate::slowlog::SlowLog,
    /// The hot-key sampler (`crate::hotkeys`; read by `GET /v0/hotkeys`
    /// and `ATAMAN.HOTKEYS`).
    pub hotkeys: crate::hotkeys::HotKeys,
    /// The recent-figures ring (`crate::recent`; read by `GET /v0/recent`
    /// and the dashboard).
    pub recent: crate::recent::Recent,
}

/// Counters of RESP commands: one per served command and one for the rest.
pub const RESP_COMMAND_KINDS: usize = 56;

impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics {
            requests: (0..ROUTES)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            latency_us: (0..ROUTES).map(|_| Histogram::default()).collect(),
            connections_accepted: AtomicU64::new(0),
            connections_refused_max: AtomicU64::new(0),
            connections_refused_descriptors: AtomicU64::new(0),
            connections_open: AtomicU64::new(0),
            peer_connections_open: AtomicU64::new(0),
            connections_max: AtomicU64::new(0),
            descriptors_limit: AtomicU64::new(0),
            descriptors_reserved: AtomicU64::new(0),
            accept_failures: AtomicU64::new(0),
            connection_panics: AtomicU64::new(0),
            clock_reservation_failing: AtomicU64::new(0),
            read_repairs: AtomicU64::new(0),
            layout_writes_both_sets: AtomicU64::new(0),
            peer_requests_fenced: AtomicU64::new(0),
            hints_refused: AtomicU64::new(0),
            peer_writes_superseded: AtomicU64::new(0),
            writes_restamped: AtomicU64::new(0),
            writes_restamp_exhausted: AtomicU64::new(0),
            peer_batch_frames: Histogram::default(),
            peer_reply_batch_frames: Histogram::default(),
            resp_commands: std::array::from_fn(|_| AtomicU64::new(0)),
            resp_key_latency_us: Histogram::default(),
            rmw_retries: AtomicU64::new(0),
            rmw_gave_up: AtomicU64::new(0),
            watch_aborts: AtomicU64::new(0),
            register: register::RegisterFigures::default(),
            slowlog: crate::slowlog::SlowLog::default(),
            hotkeys: crate::hotkeys::HotKeys::default(),
            recent: crate::recent::Recent::default(),
        }
    }
}

/// Every status the node answers with, in code order (tests walk it too).
pub const ALL_STATUSES: [Status; STATUSES] = [
    Status::Continue,
    Status::SwitchingProtocols,
    Status::Ok,
    Status::Created,
    Status::Accepted,
    Status::NotModified,
    Status::BadRequest,
    Status::Unauthorized,
    Status::Forbidden,
    Status::NotFound,
    Status::MethodNotAllowed,
    Status::RequestTimeout,
    Status::Conflict,
    Status::PreconditionFailed,
    Status::PayloadTooLarge,
    Status::UriTooLong,
    Status::ExpectationFailed,
    Status::HeaderFieldsTooLarge,
    Status::InternalError,
    Status::NotImplemented,
    Status::Unavailable,
    Status::GatewayTimeout,
    Status::InsufficientStorage,
];

pub(crate) fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    labels: &str,
    scale: f64,
    h: &HistogramSnapshot,
    header: bool,
) {
    if header {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    }
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (i, n) in h.buckets.iter().enumerate().take(HISTOGRAM_BUCKETS - 1) {
        cumulative += n;
        // Bucket i holds values below 2^i.
        let le = bucket_upper_bound(i) as f64 * scale;
        if *n > 0 || i < 24 {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
    }
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum as f64 * scale);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
}

pub(crate) fn gauge(
    out: &mut String,
    name: &str,
    help: &str,
    kind: &str,
    value: impl std::fmt::Display,
) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

impl NodeMetrics {
    /// Counts one answered request and its latency.
    /// Returns the latency, µs (the slow log's test of it).
    pub fn record(&self, route: Route, status: Status, started: Instant) -> u64 {
        let r = route.index();
        self.requests[r][status as usize].fetch_add(1, Ordering::Relaxed);
        let us = started.elapsed().as_micros() as u64;
        self.latency_us[r].record(us);
        us
    }

    /// Requests answered with `status` on `route`.
    pub fn requests(&self, route: Route, status: Status) -> u64 {
        self.requests[route.index()][status as usize].load(Ordering::Relaxed)
    }

    /// Requests of `route`, every status.
    pub fn route_total(&self, route: Route) -> u64 {
        self.requests[route.index()]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// The recent-figures ring's sample now (`crate::recent::ring`):
    /// requests by kind and the data routes' latency histogram.
    pub fn recent_sample(&self, at_ms: u64) -> crate::recent::ring::Sample {
        let data = [Route::EntityGet, Route::EntityPut, Route::EntityDelete];
        let resp: u64 = self
            .resp_commands
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum();
        let all: u64 = Route::ALL.iter().map(|&r| self.route_total(r)).sum();
        let [get, put, delete] = data.map(|r| self.route_total(r));
        // p50 and p99 cover the client's data requests of both protocols:
        // HTTP's entity requests and RESP's commands on keys.
        let mut latency_buckets = [0; HISTOGRAM_BUCKETS];
        let data_latency = data
            .iter()
            .map(|r| &self.latency_us[r.index()])
            .chain([&self.resp_key_latency_us]);
        for h in data_latency {
            for (sum, n) in latency_buckets.iter_mut().zip(&h.snapshot().buckets) {
                *sum += n;
            }
        }
        crate::recent::ring::Sample {
            at_ms,
            counts: [get, put, delete, resp, all - get - put - delete],
            latency_buckets,
        }
    }

    /// The whole `/metrics` page.
    pub fn render(&self, db: &Db) -> String {
        let mut out = String::with_capacity(16 * 1024);
        let _ = writeln!(
            out,
            "# HELP ataman_http_requests_total Requests answered, by route and status.\n# TYPE ataman_http_requests_total counter"
        );
        for route in Route::ALL {
            for status in ALL_STATUSES {
                let n = self.requests(route, status);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "ataman_http_requests_total{{route=\"{}\",status=\"{}\"}} {n}",
                        route.label(),
                        status.code()
                    );
                }
            }
        }
        for (i, route) in Route::ALL.iter().enumerate() {
            let labels = format!("route=\"{}\"", route.label());
            histogram(
                &mut out,
                "ataman_http_request_duration_seconds",
                "Time from the first byte of a request to its answer being ready.",
                &labels,
                1e-6,
                &self.latency_us[i].snapshot(),
                i == 0,
            );
        }
        gauge(
            &mut out,
            "ataman_connections_open",
            "Open client connections.",
            "gauge",
            self.connections_open.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "ataman_connections_accepted_total",
            "Client connections accepted.",
            "counter",
            self.connections_accepted.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP ataman_connections_refused_total Connections closed at once at the cap, by the bound it came from.\n# TYPE ataman_connections_refused_total counter"
        );
        for (reason, n) in [
            ("connections_max", &self.connections_refused_max),
            ("descriptors", &self.connections_refused_descriptors),
        ] {
            let _ = writeln!(
                out,
                "ataman_connections_refused_total{{reason=\"{reason}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        self.render_descriptors(&mut out);
        render_engine(&mut out, db);
        render_thread_cpu(&mut out);
        out
    }
}

impl NodeMetrics {
    /// The descriptor budget, peer connections, accept failures and the clock.
    fn render_descriptors(&self, out: &mut String) {
        for (name, help, kind, value) in [
            (
                "ataman_connections_max",
                "Client connections at most: the smaller of --connections-max and the descriptor limit less the reserve.",
                "gauge",
                &self.connections_max,
            ),
            (
                "ataman_descriptors_limit",
                "The process's file descriptor limit (soft RLIMIT_NOFILE, raised to the hard limit at start).",
                "gauge",
                &self.descriptors_limit,
            ),
            (
                "ataman_descriptors_reserved",
                "File descriptors reserved for the engines, SSTables, the clock, anti-entropy and peers.",
                "gauge",
                &self.descriptors_reserved,
            ),
            (
                "ataman_peer_connections_open",
                "Open peer connections to this node (not counted as clients).",
                "gauge",
                &self.peer_connections_open,
            ),
            (
                "ataman_accept_failures_total",
                "accept calls that failed for lack of descriptors or memory (retried until the backlog is drained).",
                "counter",
                &self.accept_failures,
            ),
            (
                "ataman_connection_panics_total",
                "Connections closed because handling them panicked (a bug; logged at error with the peer's address); the node served the others on.",
                "counter",
                &self.connection_panics,
            ),
            (
                "ataman_clock_reservation_failing",
                "1 while the clock's reservation cannot be persisted (writes past it answer 503).",
                "gauge",
                &self.clock_reservation_failing,
            ),
        ] {
            gauge(out, name, help, kind, value.load(Ordering::Relaxed));
        }
    }
}

fn render_engine(out: &mut String, db: &Db) {
    let s = db.stats();
    let m = db.metrics();
    render_engine_state(out, &s);
    render_engine_counters(out, &s, m);
    render_engine_stages(out, m);
}

/// The engine's queues, tables and levels as they are now.
fn render_engine_state(out: &mut String, s: &Stats) {
    gauge(
        out,
        "ataman_engine_write_queue_depth",
        "Requests queued for the tx (writer) thread.",
        "gauge",
        s.write_queue_depth,
    );
    gauge(
        out,
        "ataman_engine_wal_queue_depth",
        "Groups queued for the WAL thread.",
        "gauge",
        s.wal_queue_depth,
    );
    gauge(
        out,
        "ataman_engine_memtable_bytes",
        "Bytes in the active memtable.",
        "gauge",
        s.memtable_bytes,
    );
    gauge(
        out,
        "ataman_engine_memtable_flush_point_bytes",
        "The size at which this engine freezes a memtable (fixed at open: up to 20% below --memtable-bytes-max, placed by the node's place in --cluster).",
        "gauge",
        s.memtable_flush_point_bytes,
    );
    gauge(
        out,
        "ataman_engine_immutable_memtables",
        "Memtables waiting for flush.",
        "gauge",
        s.immutable_memtables,
    );
    gauge(
        out,
        "ataman_engine_write_amplification",
        "(WAL + flush + compaction bytes) / user bytes.",
        "gauge",
        s.write_amplification,
    );
    gauge(
        out,
        "ataman_engine_space_amplification",
        "SSTable bytes / bytes of the largest level.",
        "gauge",
        s.space_amplification,
    );
    gauge(
        out,
        "ataman_engine_poisoned",
        "1 when the engine refuses writes after a disk failure.",
        "gauge",
        u8::from(s.poisoned.is_some()),
    );
    let _ = writeln!(
        out,
        "# HELP ataman_engine_level_files SSTables per level.\n# TYPE ataman_engine_level_files gauge"
    );
    for (level, n) in s.level_files.iter().enumerate() {
        let _ = writeln!(out, "ataman_engine_level_files{{level=\"{level}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "# HELP ataman_engine_level_bytes SSTable bytes per level.\n# TYPE ataman_engine_level_bytes gauge"
    );
    for (level, n) in s.level_bytes.iter().enumerate() {
        let _ = writeln!(out, "ataman_engine_level_bytes{{level=\"{level}\"}} {n}");
    }
}

/// The engine's counters since it opened, and its block cache.
fn render_engine_counters(out: &mut String, s: &Stats, m: &EngineMetrics) {
    let counters: [(&str, &str, u64); 26] = [
        (
            "ataman_engine_user_bytes_written_total",
            "Key and value bytes accepted.",
            m.user_bytes_written.get(),
        ),
        (
            "ataman_engine_batches_written_total",
            "Write batches accepted.",
            m.batches_written.get(),
        ),
        (
            "ataman_engine_wal_bytes_written_total",
            "Bytes appended to WAL segments.",
            m.wal_bytes_written.get(),
        ),
        (
            "ataman_engine_wal_zero_fill_bytes_total",
            "Zeros written ahead of the appends into WAL segments' reserved space (one extent conversion per megabyte instead of per group commit).",
            m.wal_zero_fill_bytes.get(),
        ),
        (
            "ataman_engine_wal_writes_total",
            "WAL write calls (one per group).",
            m.wal_writes.get(),
        ),
        (
            "ataman_engine_wal_syncs_total",
            "WAL fsyncs.",
            m.wal_syncs.get(),
        ),
        (
            "ataman_engine_flushes_total",
            "Memtables flushed.",
            m.flushes.get(),
        ),
        (
            "ataman_engine_flush_bytes_written_total",
            "SSTable bytes written by flushes.",
            m.flush_bytes_written.get(),
        ),
        (
            "ataman_engine_compactions_total",
            "Compactions run.",
            m.compactions.get(),
        ),
        (
            "ataman_engine_compaction_bytes_read_total",
            "SSTable bytes read by compactions.",
            m.compaction_bytes_read.get(),
        ),
        (
            "ataman_engine_compaction_bytes_written_total",
            "SSTable bytes written by compactions.",
            m.compaction_bytes_written.get(),
        ),
        (
            "ataman_engine_compaction_pace_wait_microseconds_total",
            "Time automatic compactions waited to keep --compaction-rate-bytes.",
            m.compaction_pace_wait_us.get(),
        ),
        (
            "ataman_engine_ingests_total",
            "Sorted batches written straight to tables (a transition copy).",
            m.ingests.get(),
        ),
        (
            "ataman_engine_ingest_bytes_written_total",
            "SSTable bytes written by ingests.",
            m.ingest_bytes_written.get(),
        ),
        (
            "ataman_engine_ingests_declined_total",
            "Ingests that found no level free for their keys (written the ordinary way).",
            m.ingests_declined.get(),
        ),
        (
            "ataman_engine_write_stalls_total",
            "Times writes stalled on flush or L0.",
            m.write_stalls.get(),
        ),
        (
            "ataman_engine_write_stall_microseconds_total",
            "Time writes spent stalled.",
            m.write_stall_us.get(),
        ),
        (
            "ataman_engine_writes_refused_busy_total",
            "Writes refused: queue full or stall timeout.",
            m.writes_refused_busy.get(),
        ),
        (
            "ataman_engine_conditional_conflicts_total",
            "Conditional writes refused: the key changed since it was read.",
            m.conditional_conflicts.get(),
        ),
        ("ataman_engine_gets_total", "Point reads.", m.gets.get()),
        (
            "ataman_engine_get_tables_read_total",
            "SSTables read by point reads.",
            m.get_tables_read.get(),
        ),
        (
            "ataman_engine_bloom_negatives_total",
            "SSTables skipped by their bloom filter.",
            m.bloom_negatives.get(),
        ),
        (
            "ataman_engine_expired_seen_total",
            "Expired versions flushes and compactions met (kept as tombstones or dropped).",
            m.expired_seen.get(),
        ),
        (
            "ataman_engine_expired_dropped_total",
            "Expired versions dropped at the bottom level after the tombstone grace.",
            m.expired_dropped.get(),
        ),
        (
            "ataman_engine_tombstones_dropped_total",
            "Tombstones dropped: past their key's collection horizon (repair-based; the grace on an engine alone), nothing older left in the engine.",
            m.tombstones_dropped.get(),
        ),
        (
            "ataman_engine_tombstones_waiting_past_grace_total",
            "Dead versions merges kept past the tombstone grace because repair had not covered their key yet (counted at each merge that meets one).",
            m.tombstones_waiting_past_grace.get(),
        ),
    ];
    for (name, help, v) in counters {
        gauge(out, name, help, "counter", v);
    }
    gauge(
        out,
        "ataman_engine_block_cache_hits_total",
        "Block cache hits.",
        "counter",
        s.cache.hits,
    );
    gauge(
        out,
        "ataman_engine_block_cache_misses_total",
        "Block cache misses.",
        "counter",
        s.cache.misses,
    );
    gauge(
        out,
        "ataman_engine_block_cache_bytes",
        "Bytes in the block cache.",
        "gauge",
        s.cache.bytes,
    );
}

/// How long each stage of a write takes, and its batch sizes.
fn render_engine_stages(out: &mut String, m: &EngineMetrics) {
    let stage = |out: &mut String, name: &str, help: &str, h: &Histogram| {
        histogram(out, name, help, "", 1e-6, &h.snapshot(), true);
    };
    stage(
        out,
        "ataman_engine_write_queue_wait_seconds",
        "Write wait in the tx thread's queue.",
        &m.write_queue_wait_us,
    );
    stage(
        out,
        "ataman_engine_tx_apply_seconds",
        "Tx thread time applying one batch.",
        &m.tx_apply_us,
    );
    stage(
        out,
        "ataman_engine_wal_write_seconds",
        "Duration of one WAL write call.",
        &m.wal_write_latency_us,
    );
    stage(
        out,
        "ataman_engine_wal_fsync_seconds",
        "Duration of one WAL fsync.",
        &m.wal_sync_latency_us,
    );
    histogram(
        out,
        "ataman_engine_wal_batch_records",
        "Records per WAL group write.",
        "",
        1.0,
        &m.wal_batch_records.snapshot(),
        true,
    );
    histogram(
        out,
        "ataman_engine_writer_batch_requests",
        "Requests per tx thread wake-up.",
        "",
        1.0,
        &m.writer_batch_requests.snapshot(),
        true,
    );
}

/// CPU seconds per thread, from `/proc/self/task/*/stat` (Linux).
fn render_thread_cpu(out: &mut String) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut per_name: std::collections::BTreeMap<String, f64> = Default::default();
    for task in tasks.flatten() {
        let path = task.path();
        let (Ok(stat), Ok(comm)) = (
            std::fs::read_to_string(path.join("stat")),
            std::fs::read_to_string(path.join("comm")),
        ) else {
            continue;
        };
        // Fields after the ")" that ends the command name: state is field 3; utime 14, stime 15.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(u), Some(s)) = (fields.get(11), fields.get(12)) else {
            continue;
        };
        let cpu = (u.parse::<f64>().unwrap_or(0.0) + s.parse::<f64>().unwrap_or(0.0)) / ticks;
        *per_name.entry(comm.trim().to_owned()).or_default() += cpu;
    }
    let _ = writeln!(
        out,
        "# HELP ataman_thread_cpu_seconds_total CPU time (user + system) per thread name.\n# TYPE ataman_thread_cpu_seconds_total counter"
    );
    for (name, cpu) in per_name {
        let _ = writeln!(
            out,
            "ataman_thread_cpu_seconds_total{{thread=\"{name}\"}} {cpu}"
        );
    }
}
