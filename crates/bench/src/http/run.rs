//! One `ataman bench http` run: validate the options, fill the keys, run
//! the threads for the warm-up and the measured window, and build the
//! report ([`run`]); [`main`] prints it and writes `--json` / `--plot`.

use super::args::HttpArgs;
use super::report::HttpReport;

use super::client::Phase;
use super::report::{FillReport, GeneratorCpu, LatencyMs, Spectra};
use super::target::Target;
use super::workload::Plan;
use crate::cpu::process_cpu_time;
use crate::error::{BenchError, Result};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Most connections a run opens (each costs a socket and two buffers).
pub const CONNECTIONS_MAX: usize = 100_000;

/// Most client threads.
pub const THREADS_MAX: usize = 256;

/// Highest `--rate`, requests/s (far beyond what one machine serves).
pub const RATE_MAX: u64 = 100_000_000;

/// Time between the start of a phase and its first planned request, ms:
/// the threads' own start-up is not charged to the server.
const START_LEAD_MS: u64 = 20;

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Runs the benchmark and returns its report (printing is the caller's).
pub fn run(args: &HttpArgs) -> Result<(HttpReport, super::stats::Totals)> {
    let targets = super::target::parse_targets(&args.url)?;
    validate(args, targets.len())?;
    let addrs: Vec<SocketAddr> = targets.iter().map(|t| t.addr).collect();
    let tls = super::client::tls_for(&targets, args.tls_ca.as_deref())?;
    let progress = args.progress || std::io::stderr().is_terminal();
    let fill = if args.fill > 0 {
        Some(fill(args, &targets, progress)?)
    } else {
        None
    };

    let warmup_ns = nanos(args.warmup);
    let start_ns = START_LEAD_MS * NS_PER_MS;
    let phase = Phase {
        epoch: Instant::now(),
        start_ns,
        measure_start_ns: start_ns + warmup_ns,
        end_ns: start_ns + warmup_ns + nanos(args.duration),
        timeout: args.timeout,
        rate: args.rate,
        connections_total: args.connections,
        send_slack_ns: super::wake::slack_in_use_ns(
            nanos(args.send_slack),
            args.rate,
            args.threads.min(args.connections),
        ),
        tls,
    };
    let cpu_before = process_cpu_time();
    let result = super::phase::run_phase(
        &addrs,
        &phase,
        &Plan::run(args, &targets),
        args.threads,
        args.seed,
        progress,
    )?;
    let cpu = process_cpu_time().saturating_sub(cpu_before);
    let totals = result.totals;
    let counts = totals.counts;

    let duration_sec = args.duration.as_secs_f64();
    let elapsed_sec = (totals.last_completion_ns as f64 / 1e9).max(duration_sec);
    let run_sec = (phase.epoch.elapsed().as_secs_f64()).max(f64::MIN_POSITIVE);
    let sent = counts.requests + counts.errors();
    let report = HttpReport {
        bench: "http".into(),
        label: args.label.clone().unwrap_or_else(|| default_label(args)),
        url: args.url.clone(),
        targets: super::report::target_reports(&targets, &totals.targets, args.connections),
        workload: args.workload.to_string(),
        distribution: args.distribution.to_string(),
        keys: args.keys,
        value_size: if args.value_size.min == args.value_size.max {
            args.value_size.min.to_string()
        } else {
            format!("{}-{}", args.value_size.min, args.value_size.max)
        },
        threads: args.threads.min(args.connections),
        connections: args.connections,
        duration_sec,
        warmup_sec: args.warmup.as_secs_f64(),
        closed_loop: args.rate == 0,
        offered_rps: args.rate as f64,
        achieved_rps: counts.requests as f64 / elapsed_sec,
        requests: counts.requests,
        errors: counts.errors(),
        errors_connect: counts.errors_connect,
        errors_io: counts.errors_io,
        timeouts: counts.timeouts,
        non_2xx: counts.non_2xx,
        unsent: totals.unsent,
        bytes_read: counts.bytes_read,
        transfer_bytes_per_sec: counts.bytes_read as f64 / elapsed_sec,
        elapsed_sec,
        latency_ms: LatencyMs::of(&totals.corrected_ns),
        uncorrected_latency_ms: LatencyMs::of(&totals.uncorrected_ns),
        send_slack_us: u64::try_from(args.send_slack.as_micros()).unwrap_or(u64::MAX),
        send_slack_in_use: phase.send_slack_ns > 0,
        send_lag_ms: LatencyMs::of(&totals.send_lag_ns),
        sent_early: totals.sent_early,
        thread_rps: super::report::thread_rps(
            &result.seconds,
            args.threads.min(args.connections).max(1),
            args.duration.as_secs(),
        ),
        generator: GeneratorCpu {
            cpu_sec: cpu.as_secs_f64(),
            cpu_us_per_request: if sent == 0 {
                0.0
            } else {
                cpu.as_secs_f64() * 1e6 / sent as f64
            },
            cores: cpu.as_secs_f64() / run_sec,
        },
        fill,
        series: super::report::series(&result.seconds)?,
        spectrum: Spectra {
            corrected: super::report::spectrum(&totals.corrected_ns),
            uncorrected: super::report::spectrum(&totals.uncorrected_ns),
        },
    };
    Ok((report, totals))
}

/// Loads ids 1..=fill with PUTs, closed loop; any failure stops the run.
fn fill(args: &HttpArgs, targets: &[Target], progress: bool) -> Result<FillReport> {
    let phase = Phase {
        epoch: Instant::now(),
        start_ns: 0,
        measure_start_ns: 0,
        end_ns: u64::MAX,
        timeout: args.timeout,
        rate: 0,
        connections_total: args.connections,
        send_slack_ns: 0,
        tls: super::client::tls_for(targets, args.tls_ca.as_deref())?,
    };
    let addrs: Vec<SocketAddr> = targets.iter().map(|t| t.addr).collect();
    let result = super::phase::run_phase(
        &addrs,
        &phase,
        &Plan::fill(args, targets),
        args.threads,
        args.seed,
        progress,
    )?;
    let elapsed_sec = phase.epoch.elapsed().as_secs_f64();
    let c = result.totals.counts;
    if c.errors() > 0 || c.non_2xx > 0 || c.requests != args.fill {
        return Err(BenchError::Check(format!(
            "--fill {}: {} answered, {} not 2xx, {} failed (connect {}, I/O {}, timeout {})",
            args.fill,
            c.requests,
            c.non_2xx,
            c.errors(),
            c.errors_connect,
            c.errors_io,
            c.timeouts
        )));
    }
    Ok(FillReport {
        keys: args.fill,
        elapsed_sec,
        rps: crate::report::per_sec(c.requests, elapsed_sec),
    })
}

fn validate(args: &HttpArgs, targets: usize) -> Result<()> {
    let bad = |why: String| Err(BenchError::InvalidArgument(why));
    if let Err(e) = args.bearer() {
        return bad(e);
    }
    if args.connections == 0 || args.connections > CONNECTIONS_MAX {
        return bad(format!("--connections must be in 1..={CONNECTIONS_MAX}"));
    }
    if args.connections < targets {
        return bad(format!(
            "--connections {} leaves some of the {targets} targets without a connection",
            args.connections
        ));
    }
    if args.threads == 0 || args.threads > THREADS_MAX {
        return bad(format!("--threads must be in 1..={THREADS_MAX}"));
    }
    if args.rate > RATE_MAX {
        return bad(format!("--rate must be at most {RATE_MAX}"));
    }
    if args.keys == 0 {
        return bad("--keys must be at least 1".into());
    }
    if args.duration.is_zero() {
        return bad("--duration must be positive".into());
    }
    if args.send_slack > Duration::from_micros(super::wake::SEND_SLACK_US_MAX) {
        return bad(format!(
            "--send-slack must be at most {}us",
            super::wake::SEND_SLACK_US_MAX
        ));
    }
    if args.timeout.is_zero() {
        return bad("--timeout must be positive".into());
    }
    Ok(())
}

fn default_label(args: &HttpArgs) -> String {
    if args.rate == 0 {
        format!("{} closed loop", args.workload)
    } else {
        format!("{} @ {}/s", args.workload, args.rate)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `ataman bench http`: runs, prints, and writes `--json` / `--plot`.
pub fn main(args: &HttpArgs) -> Result<()> {
    let (report, totals) = run(args)?;
    super::report::print(&report, &totals, !args.no_spectrum);
    if let Some(path) = &args.json {
        crate::report::write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        super::plot::write(path, std::slice::from_ref(&report))?;
    }
    Ok(())
}
