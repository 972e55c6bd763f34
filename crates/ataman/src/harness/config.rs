//! What a run needs: [`Config`], its defaults (those of `ataman
//! test-cluster`) and its validation.

use super::HarnessError;
use super::faults::{FaultKind, Shape};

/// Members and spare slots at most.
pub const SLOTS_MAX: usize = 16;
use super::history::{Meta, Workload};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Members at the start.
    pub nodes: usize,
    /// Spare slots for `join` and `replace` (`membership.rs`).
    pub spares: usize,
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
    /// The nodes' `--tombstone-grace-ms` ([`TOMBSTONE_GRACE_MS`]; raised to
    /// 4 anti-entropy intervals when those are longer).
    pub tombstone_grace_ms: u64,
    /// The nodes' `--memtable-bytes-max` ([`MEMTABLE_BYTES`]).
    pub memtable_bytes_max: usize,
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

/// The harness's tombstone grace, ms: short enough that the graves
/// (`graves.rs`: keys left dead in a run's first seconds) are collected by
/// compactions within a default 30 s run, long enough that no replica
/// misses a delete for that long: a fault lasts at most 4 s (a partition,
/// a clock jump; a kill or pause less), hints are replayed when the link
/// passes again and anti-entropy runs every 2 s, so a replica is behind
/// about 6 s at most, half the grace (not so in a long layout transition:
/// docs/RELIABILITY.md, "Collection during a run", seed 1633); the node's
/// default is 10 days. A grace shorter than the time a replica stays
/// behind would lose deletes by design (a replica that missed one brings the old value back once the
/// others collected the tombstone: docs/decisions/0007), which the checker
/// would report.
pub const TOMBSTONE_GRACE_MS: u64 = 12_000;
/// The harness's memtable size, bytes: some KiB of writes per second per
/// node fill it every few seconds, so flushes and compactions (which
/// collect) happen during a run; the node's default is 64 MiB.
pub const MEMTABLE_BYTES: usize = 64 * 1024;

impl Config {
    /// A configuration with the defaults of `ataman test-cluster`.
    pub fn new(exe: PathBuf, seed: u64) -> Config {
        Config {
            exe,
            dir: None,
            keep_dir: false,
            nodes: 3,
            spares: 0,
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
            tombstone_grace_ms: TOMBSTONE_GRACE_MS,
            memtable_bytes_max: MEMTABLE_BYTES,
            replication_factor: None,
            converge_timeout: Duration::from_secs(60),
            history: None,
            report: None,
            planted_bug: None,
            sync_delay_ms: 0,
            serve_args: Vec::new(),
        }
    }

    pub(super) fn validate(&self) -> Result<(), HarnessError> {
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
        let membership = self.faults.iter().any(|k| k.is_membership());
        if self.nodes + self.spares > SLOTS_MAX {
            return Err(HarnessError::Usage(format!(
                "--nodes plus --spares must be at most {SLOTS_MAX}"
            )));
        }
        if membership {
            let r = self.replication_factor.unwrap_or(self.nodes);
            if self.faults.contains(&FaultKind::Wipe) {
                return Err(HarnessError::Usage(
                    "wipe does not mix with join, leave or replace (see membership.rs)".into(),
                ));
            }
            if self.spares == 0
                && !self.faults.iter().all(|&k| {
                    matches!(k, FaultKind::Leave | FaultKind::LeaveCut) || !k.is_membership()
                })
            {
                return Err(HarnessError::Usage(
                    "join and replace need --spares 1 or more".into(),
                ));
            }
            if f as usize > r || r < 2 || r > self.nodes {
                return Err(HarnessError::Usage(format!(
                    "a membership run needs 2 <= from ({f}) <= R ({r}) <= nodes ({n})"
                )));
            }
        }
        if self.workloads.is_empty() || self.clients == 0 {
            return Err(HarnessError::Usage(
                "at least one workload and one client".into(),
            ));
        }
        Ok(())
    }

    /// The grace the nodes get: [`Config::tombstone_grace_ms`], at least
    /// 4 anti-entropy intervals (a node refuses a grace at or below one).
    pub fn grace_ms(&self) -> u64 {
        self.tombstone_grace_ms
            .max(self.anti_entropy_interval_ms.saturating_mul(4))
    }

    /// The slots the schedule plans for: `leave` keeps at least `R`
    /// members (the replication factor, default the node count).
    pub fn shape(&self) -> Shape {
        Shape {
            members: self.nodes,
            slots: self.nodes + self.spares,
            min_members: self.replication_factor.unwrap_or(self.nodes),
        }
    }

    pub(super) fn meta(&self, urls: Vec<String>) -> Meta {
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
            start_unix_ms: 0,
            tombstone_grace_ms: self.grace_ms(),
        }
    }
}
