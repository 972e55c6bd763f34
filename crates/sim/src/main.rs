//! `ataman-sim`: runs the deterministic simulation over a range of seeds
//! (a soak), printing every failing seed with what the checker found and
//! the command that replays it, then totals.
//!
//! ```sh
//! cargo run -p ataman-sim --release -- --seeds 1..10000 [--nodes 3] [--steps 200]
//! ```

use ataman_engine::WalMode;
use ataman_sim::history::{Happening, History};
use ataman_sim::{FaultMix, PlantedBug, RunStats, SimConfig, replay_command, run};
use clap::Parser;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

/// Violations printed per failing seed.
const VIOLATIONS_SHOWN_MAX: usize = 5;

#[derive(Parser, Debug)]
#[command(
    name = "ataman-sim",
    about = "Deterministic simulation of ataman's replication layer"
)]
struct Args {
    /// Seeds to run: `N`, `A..B` (B excluded) or `A..=B`.
    #[arg(long, default_value = "1..101")]
    seeds: String,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Replicas per key (`from` of every request); default: all nodes.
    #[arg(long)]
    replicas: Option<usize>,
    /// Client operations per seed.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// The engine's WAL mode: fsync, write or none.
    #[arg(long, default_value = "fsync")]
    wal_mode: String,
    /// Faults: all, no-skew (all but clock skew), power-loss or none.
    #[arg(long, default_value = "all")]
    faults: String,
    /// Skip the power cut of every node after the final repairs.
    #[arg(long)]
    no_final_power_cut: bool,
    /// No anti-entropy rounds while the workload runs (the final ones still run).
    #[arg(long)]
    no_anti_entropy_during_run: bool,
    /// Add the last node to the layout mid-run (version 1 is the others).
    #[arg(long)]
    grow: bool,
    /// Remove the last N nodes from the layout mid-run (version 1 is every node); they are cut off from the others while their copy runs.
    #[arg(long, default_value_t = 0, value_name = "N")]
    shrink: usize,
    /// A bug planted, to see the checker catch it: ack-minus-one (coordinator), no-restamp (replicas store older writes), drop-expired-without-tombstone (engine compaction), with --grow reads-before-sync, writes-skip-new, cleanup-early, joined-takes-id-zero, or with --shrink copy-skips-partitioned-leaving-node or copy-ignores-leaving-ack.
    #[arg(long, hide = true)]
    planted_bug: Option<String>,
    /// Stop at the first failing seed.
    #[arg(long)]
    stop_at_first: bool,
    /// Print each seed's history digest (two runs of a seed must print the same).
    #[arg(long)]
    print_digests: bool,
    /// Write each seed's whole history (`Debug`, one item a line) to `DIR/seed-N.txt`.
    #[arg(long, hide = true)]
    dump_history: Option<std::path::PathBuf>,
    /// Print every operation and happening on this key (with one seed: how a violation came about).
    #[arg(long)]
    explain: Option<String>,
}

fn parse_seeds(s: &str) -> Result<std::ops::Range<u64>, String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|e| format!("seed {t:?}: {e}"))
    };
    if let Some((a, b)) = s.split_once("..=") {
        Ok(num(a)?..num(b)?.saturating_add(1))
    } else if let Some((a, b)) = s.split_once("..") {
        Ok(num(a)?..num(b)?)
    } else {
        let n = num(s)?;
        Ok(n..n.saturating_add(1))
    }
}

fn config(args: &Args) -> Result<SimConfig, String> {
    let wal_mode = match args.wal_mode.as_str() {
        "fsync" => WalMode::Fsync,
        "write" => WalMode::Write,
        "none" => WalMode::None,
        other => return Err(format!("--wal-mode {other}: fsync, write or none")),
    };
    let faults = FaultMix::by_name(&args.faults)
        .ok_or_else(|| format!("--faults {}: all, no-skew, power-loss or none", args.faults))?;
    let planted_bug = match args.planted_bug.as_deref() {
        None => None,
        Some(name) => Some(
            PlantedBug::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, b)| *b)
                .ok_or_else(|| {
                    let names: Vec<&str> = PlantedBug::NAMES.iter().map(|(n, _)| *n).collect();
                    format!("--planted-bug {name}: one of {}", names.join(", "))
                })?,
        ),
    };
    let config = SimConfig {
        nodes: args.nodes,
        replicas: args.replicas.unwrap_or(args.nodes),
        steps: args.steps,
        clients: args.clients,
        wal_mode,
        faults,
        final_power_cut: !args.no_final_power_cut,
        anti_entropy_during_run: !args.no_anti_entropy_during_run,
        planted_bug,
        grow: args.grow,
        shrink: args.shrink,
    };
    config.validate()?;
    Ok(config)
}

#[derive(Default)]
struct Totals {
    seeds: u64,
    failed: u64,
    ops: u64,
    acknowledged_writes: u64,
    reads: u64,
    ryw_pairs: u64,
    restarts: u64,
    repairs: u64,
    hints_kept: u64,
    restamps: u64,
    anti_entropy_copies: u64,
    layout_settled: u64,
    layout_copied: u64,
    layout_dropped: u64,
    layout_copy_waits: u64,
    layout_copy_skips: u64,
    messages: u64,
    virtual_ms: u64,
    collected: u64,
    faults: BTreeMap<&'static str, u64>,
    violations: BTreeMap<String, u64>,
    /// Seeds with at least one violation of each kind.
    seeds_with: BTreeMap<String, u64>,
}

impl Totals {
    fn add(&mut self, stats: &RunStats) {
        self.restarts += stats.restarts;
        self.repairs += stats.repairs;
        self.hints_kept += stats.hints_kept;
        self.restamps += stats.restamps;
        self.anti_entropy_copies += stats.anti_entropy_copies;
        self.layout_settled += u64::from(stats.layout_settled);
        self.layout_copied += stats.layout_copied;
        self.layout_dropped += stats.layout_dropped;
        self.layout_copy_waits += stats.layout_copy_waits;
        self.layout_copy_skips += stats.layout_copy_skips;
        self.messages += stats.network.sent;
        self.virtual_ms += stats.virtual_ms;
        self.collected += stats.collected;
        for (k, v) in &stats.faults {
            *self.faults.entry(k).or_insert(0) += v;
        }
    }
}

/// Every operation and node happening on `key`, in time order, one per line.
fn explain(history: &History, key: &[u8]) -> String {
    let mut lines: Vec<(u64, String)> = Vec::new();
    for op in history.ops.iter().filter(|o| o.key == key) {
        lines.push((
            op.invoked_ms,
            format!(
                "op {} client {} via node {}: {:?} ack {}/{} ts {:?} -> {:?} at {:?} ms",
                op.id,
                op.client,
                op.coordinator,
                op.kind,
                op.ack,
                op.from,
                op.ts,
                op.result,
                op.completed_ms
            ),
        ));
    }
    for h in &history.happenings {
        match h {
            Happening::ReplicaWrote {
                at_ms,
                node,
                key: k,
                ts,
            } if k == key => {
                lines.push((*at_ms, format!("node {node} wrote ts {ts}")));
            }
            Happening::Restart {
                at_ms,
                node,
                reopened,
                state,
            } => lines.push((
                *at_ms,
                format!(
                    "node {node} restarted ({reopened:?}), holds {:?}",
                    state.get(key).map(|v| v.ts)
                ),
            )),
            Happening::Crash { at_ms, node, kind } => {
                lines.push((*at_ms, format!("node {node} crashed ({kind:?})")))
            }
            Happening::Fault { at_ms, what } => lines.push((*at_ms, what.clone())),
            Happening::Stuck { at_ms, what } => lines.push((*at_ms, format!("stuck: {what}"))),
            Happening::CopyDropped {
                at_ms,
                node,
                key: k,
                ts,
            } if k == key => {
                lines.push((*at_ms, format!("node {node} dropped its copy (ts {ts})")))
            }
            Happening::ReplicaWrote { .. } | Happening::CopyDropped { .. } => {}
        }
    }
    lines.sort_by_key(|(at, _)| *at);
    let mut out = String::new();
    for (at, line) in lines {
        out.push_str(&format!("{at:>7} ms  {line}\n"));
    }
    for (node, state) in history.final_states.iter().enumerate() {
        let held = state.get(key).map(|v| {
            let value = v.value.as_deref().map(String::from_utf8_lossy);
            format!("ts {} {value:?}", v.ts)
        });
        out.push_str(&format!("final: node {node} holds {held:?}\n"));
    }
    out
}

fn main() -> ExitCode {
    let args = Args::parse();
    let (seeds, config) = match parse_seeds(&args.seeds).and_then(|s| Ok((s, config(&args)?))) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("ataman-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let mut totals = Totals::default();
    for seed in seeds.clone() {
        let result = match run(seed, &config) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("ataman-sim: seed {seed}: cannot run: {e}");
                return ExitCode::from(2);
            }
        };
        totals.seeds += 1;
        if let Some(dir) = &args.dump_history {
            let h = &result.history;
            let mut text = String::new();
            for op in &h.ops {
                text.push_str(&format!("{op:?}\n"));
            }
            for x in &h.happenings {
                text.push_str(&format!("{x:?}\n"));
            }
            for st in &h.final_states {
                text.push_str(&format!("{st:?}\n"));
            }
            if let Err(e) = std::fs::write(dir.join(format!("seed-{seed}.txt")), text) {
                eprintln!("ataman-sim: cannot dump the history: {e}");
            }
        }
        if args.print_digests {
            println!("seed {seed}: digest {:016x}", result.digest);
        }
        if let Some(key) = &args.explain {
            print!("{}", explain(&result.history, key.as_bytes()));
        }
        totals.ops += result.report.ops as u64;
        totals.acknowledged_writes += result.report.acknowledged_writes as u64;
        totals.reads += result.report.reads as u64;
        totals.ryw_pairs += result.report.ryw_pairs as u64;
        totals.add(&result.stats);
        if !result.report.ok() {
            totals.failed += 1;
            let mut kinds = std::collections::BTreeSet::new();
            for v in &result.report.violations {
                let kind = format!("{:?}", v.kind);
                *totals.violations.entry(kind.clone()).or_insert(0) += 1;
                kinds.insert(kind);
            }
            for kind in kinds {
                *totals.seeds_with.entry(kind).or_insert(0) += 1;
            }
            println!(
                "seed {seed}: FAILED ({} violations)\n{}\nreplay: {}",
                result.report.violations.len(),
                result.report.summary(VIOLATIONS_SHOWN_MAX),
                replay_command(seed, &config)
            );
            if args.stop_at_first {
                break;
            }
        }
    }
    let elapsed = started.elapsed();
    println!(
        "seeds {}..{}: {} run, {} failed in {:.1} s ({:.1} seeds/s)",
        seeds.start,
        seeds.end,
        totals.seeds,
        totals.failed,
        elapsed.as_secs_f64(),
        totals.seeds as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    println!(
        "operations {} (acknowledged writes {}, reads answered {}, read-your-writes pairs checked {}); virtual time {:.1} s; messages {}",
        totals.ops,
        totals.acknowledged_writes,
        totals.reads,
        totals.ryw_pairs,
        totals.virtual_ms as f64 / 1000.0,
        totals.messages
    );
    println!(
        "restarts {}, read repairs {}, hints kept {}, re-stamps {}, anti-entropy copies {}, dead versions collected {}",
        totals.restarts,
        totals.repairs,
        totals.hints_kept,
        totals.restamps,
        totals.anti_entropy_copies,
        totals.collected
    );
    if config.grow || config.shrink > 0 {
        println!(
            "layout: {} of {} runs settled at version 2, versions copied {}, copies dropped {}, copies that waited for a leaving source {}, skipped one {}",
            totals.layout_settled,
            totals.seeds,
            totals.layout_copied,
            totals.layout_dropped,
            totals.layout_copy_waits,
            totals.layout_copy_skips
        );
    }
    let faults: Vec<String> = totals
        .faults
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("faults: {}", faults.join(", "));
    if !totals.violations.is_empty() {
        let v: Vec<String> = totals
            .violations
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!("violations: {}", v.join(", "));
        let w: Vec<String> = totals
            .seeds_with
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!("seeds with each kind: {}", w.join(", "));
    }
    if totals.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
