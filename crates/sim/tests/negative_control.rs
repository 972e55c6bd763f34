//! Negative control: the checker sees lost writes when they happen. With
//! the WAL in `write` mode (acknowledged once written, never fsynced) and
//! power-loss crash images, acknowledged writes do get lost; the checker
//! must say so for some seed of a bounded set. The same seeds with fsync on
//! lose nothing, so what the checker reports is the missing fsync.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::WalMode;
use ataman_sim::{FaultMix, SimConfig, ViolationKind, replay_command, run};

/// Seeds tried.
const SEEDS: std::ops::Range<u64> = 1..51;
/// Client operations per seed.
const STEPS: usize = 150;

fn config(wal_mode: WalMode) -> SimConfig {
    SimConfig {
        wal_mode,
        faults: FaultMix::POWER_LOSS,
        ..SimConfig::default_with_steps(STEPS)
    }
}

/// WAL `write` + power loss: some seed loses an acknowledged write, and the checker reports it.
#[test]
fn unsynced_wal_loses_acknowledged_writes() {
    let config = config(WalMode::Write);
    let mut caught = Vec::new();
    let (mut replica_seeds, mut replica_losses) = (0, 0);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        let on_replica = result.report.count(ViolationKind::LostOnReplica);
        replica_losses += on_replica;
        replica_seeds += usize::from(on_replica > 0);
        let lost = result.report.count(ViolationKind::LostWrite);
        if lost > 0 {
            caught.push((seed, lost));
        }
    }
    let n = SEEDS.end - SEEDS.start;
    eprintln!(
        "negative control: {} of {n} seeds report acknowledged writes lost from every node (seed, writes): {caught:?}; {replica_seeds} of {n} seeds report {replica_losses} writes lost by the replica that acknowledged them",
        caught.len(),
    );
    assert!(
        !caught.is_empty(),
        "no seed of {n} reported a lost write with an unsynced WAL and power loss: the checker is blind (e.g. {})",
        replay_command(SEEDS.start, &config)
    );
    assert!(
        replica_seeds > 0,
        "no replica ever lost a write it acknowledged"
    );
}

/// The same seeds and faults with fsync on: nothing to report.
#[test]
fn synced_wal_loses_nothing_on_the_same_seeds() {
    let config = config(WalMode::Fsync);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        assert!(
            result.report.ok(),
            "seed {seed}:\n{}\nreplay: {}",
            result.report.summary(5),
            replay_command(seed, &config)
        );
    }
}
