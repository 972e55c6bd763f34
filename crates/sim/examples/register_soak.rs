//! The register model checker over many seeds (the test runs fewer):
//! `cargo run -p ataman-sim --release --example register_soak -- FIRST END [BUG|none] [CRASHES] [DOWN_MS_MAX] [CLIENTS] [CRASH_AFTER_UNSYNCED_PER_MILLE]`
//! prints each failing seed's verdict and history, then totals.

use ataman_sim::register::{RegisterBug, RegisterSimConfig, run_register};
use ataman_testkit::linearizable::Verdict;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (first, end) = (num(0, 0), num(1, 10_000));
    let bug = args
        .get(2)
        .and_then(|name| RegisterBug::NAMES.iter().find(|(n, _)| n == name))
        .map(|(_, b)| *b);
    let defaults = RegisterSimConfig::default();
    let config = RegisterSimConfig {
        bug,
        crashes: num(3, defaults.crashes as u64) as usize,
        down_ms_max: num(4, defaults.down_ms_max),
        clients: num(5, defaults.clients as u64) as usize,
        crash_after_unsynced_per_mille: num(6, defaults.crash_after_unsynced_per_mille),
        ..defaults
    };
    let mut lost = 0;
    let (mut failing, mut ok, mut failed, mut one_round) = (0u64, 0, 0, 0);
    for seed in first..end {
        let run = run_register(seed, &config);
        ok += run.ok;
        failed += run.failed;
        one_round += run.one_round_trip;
        lost += run.unsynced_lost;
        if run.verdict != Verdict::Linearizable {
            failing += 1;
            println!("seed {seed}: {:?}", run.verdict);
            let mut h: Vec<_> = run.history.iter().enumerate().collect();
            h.sort_by_key(|(_, e)| e.call);
            for (i, e) in h {
                println!("  {i:3} {:5}..{:?} {:?}", e.call, e.ret, e.op);
            }
        }
    }
    println!(
        "{} seeds, {failing} failing; operations: {ok} ok ({one_round} in one round trip), {failed} failed; {lost} crashes lost an unsynced record write",
        end - first
    );
    if failing == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
