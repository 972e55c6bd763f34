//! One phase of a run (the fill, or the measured run): spawn the client
//! threads, collect their per-second messages (drawing the live progress
//! line from them), join them and add up what they measured.

use super::client::{Phase, ThreadJob, run_thread};
use super::stats::{Second, Totals};
use super::workload::{Plan, Requests};
use crate::error::{BenchError, Result};
use crate::report::merge;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

/// How often the progress line is redrawn.
const PROGRESS_INTERVAL_MS: u64 = 1000;

/// Per-thread seed stride, so threads draw different ids from one `--seed`.
const THREAD_SEED_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;

/// What a phase gave.
pub struct PhaseResult {
    /// All threads' totals added up.
    pub totals: Totals,
    /// Every per-second message, in arrival order.
    pub seconds: Vec<Second>,
}

/// Runs `threads` client threads over `connections` connections, spread
/// round-robin over `addrs` (connection `i` to `addrs[i % addrs.len()]`).
pub fn run_phase(
    addrs: &[SocketAddr],
    phase: &Phase,
    plan: &Plan,
    threads: usize,
    seed: u64,
    progress: bool,
) -> Result<PhaseResult> {
    let threads = threads.clamp(1, phase.connections_total.max(1));
    let (sender, receiver) = mpsc::channel::<Second>();
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            let connections: Vec<usize> = (t..phase.connections_total).step_by(threads).collect();
            let job = ThreadJob {
                thread: t,
                connections,
                requests: Requests::new(
                    plan.clone(),
                    seed.wrapping_add(
                        (t as u64 + 1 + (plan.seed_salt() << 16)).wrapping_mul(THREAD_SEED_STRIDE),
                    ),
                ),
                seconds: Some(sender.clone()),
            };
            let handle = std::thread::Builder::new()
                .name(format!("bench-http-{t}"))
                .spawn_scoped(scope, move || run_thread(addrs, phase, job))
                .map_err(|e| BenchError::Check(format!("spawning a client thread: {e}")))?;
            handles.push(handle);
        }
        drop(sender);
        let seconds = collect(&receiver, phase, progress);
        let mut totals = Totals::new(addrs.len())?;
        for handle in handles {
            let part = handle
                .join()
                .map_err(|_| BenchError::Check("a client thread panicked".into()))??;
            totals.add(&part)?;
        }
        Ok::<_, BenchError>(PhaseResult { totals, seconds })
    })?;
    Ok(results)
}

/// Receives per-second messages until every thread hung up; draws progress.
fn collect(receiver: &mpsc::Receiver<Second>, phase: &Phase, progress: bool) -> Vec<Second> {
    let mut seconds = Vec::new();
    let mut so_far = super::stats::second_histogram().ok();
    let mut requests = 0u64;
    let mut errors = 0u64;
    let mut last_draw = phase.epoch;
    let mut requests_at_last_draw = 0u64;
    let mut drawn = false;
    loop {
        match receiver.recv_timeout(Duration::from_millis(PROGRESS_INTERVAL_MS / 4)) {
            Ok(second) => {
                requests += second.counts.requests;
                errors += second.counts.errors();
                if let Some(h) = &mut so_far {
                    let _ = merge(h, &second.latency_us);
                }
                seconds.push(second);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if progress && last_draw.elapsed() >= Duration::from_millis(PROGRESS_INTERVAL_MS) {
            let since = last_draw.elapsed().as_secs_f64();
            let elapsed = phase.epoch.elapsed().as_secs_f64() - phase.measure_start_ns as f64 / 1e9;
            let p99 = so_far
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(|h| h.value_at_quantile(0.99) as f64 / 1000.0)
                .unwrap_or(0.0);
            let rps = (requests - requests_at_last_draw) as f64 / since;
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r[{elapsed:>6.1}s] {rps:>10.0} req/s  p99 so far {p99:>9.3} ms  requests {requests}  errors {errors}   "
            );
            let _ = err.flush();
            last_draw = std::time::Instant::now();
            drawn = true;
            requests_at_last_draw = requests;
        }
    }
    if drawn {
        eprintln!();
    }
    seconds
}
