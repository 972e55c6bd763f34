//! The consensus register's model checker: seeded runs of the register
//! rules under message loss, reordering, duplication, acceptor crashes and
//! a layout transition, each history checked for linearizability; and the
//! planted bugs each caught (their negative controls).

use ataman_sim::register::{RegisterBug, RegisterSimConfig, run_register};
use ataman_testkit::linearizable::Verdict;

/// Seeds every unplanted test run passes (more: `examples/register_soak.rs`).
const SEEDS: u64 = 500;
/// A planted bug must be caught within this many seeds.
const PLANTED_SEEDS_MAX: u64 = 300;

/// Unplanted: every seed's history is linearizable, and the runs did
/// exercise what they claim (some operations failed and were unknown,
/// some reads took one round trip).
#[test]
fn register_runs_are_linearizable() {
    let config = RegisterSimConfig::default();
    let (mut ok, mut failed, mut one_round, mut lost) = (0, 0, 0, 0);
    for seed in 0..SEEDS {
        let run = run_register(seed, &config);
        assert_eq!(
            run.verdict,
            Verdict::Linearizable,
            "seed {seed}: {:#?}",
            run.history
        );
        assert_eq!(
            run.unstored_answers, 0,
            "seed {seed}: an answer left before a majority stored its value"
        );
        assert_eq!(run.ballots_reused, 0, "seed {seed}: a ballot taken twice");
        ok += run.ok;
        failed += run.failed;
        one_round += run.one_round_trip;
        lost += run.unsynced_lost;
    }
    assert!(
        ok > 0 && failed > 0 && one_round > 0 && lost > 0,
        "{ok} ok, {failed} failed, {one_round} one-round, {lost} crashes lost an unsynced write"
    );
}

/// The first seed below [`PLANTED_SEEDS_MAX`] whose history the checker flags.
fn first_caught(bug: RegisterBug) -> Option<u64> {
    let config = RegisterSimConfig {
        bug: Some(bug),
        ..RegisterSimConfig::default()
    };
    (0..PLANTED_SEEDS_MAX).find(|&seed| {
        matches!(
            run_register(seed, &config).verdict,
            Verdict::Violation { .. }
        )
    })
}

/// Negative control: acceptors that accept below their promise let two
/// proposers decide from the same value.
#[test]
fn planted_accepts_below_promise_is_caught() {
    assert!(first_caught(RegisterBug::AcceptsBelowPromise).is_some());
}

/// Negative control: a transition quorum counted in the new set alone
/// misses the old set that stale proposers still use.
#[test]
fn planted_quorum_new_set_only_is_caught() {
    assert!(first_caught(RegisterBug::QuorumNewSetOnly).is_some());
}

/// Negative control: a proposer that answers at the accept quorum, before
/// a quorum stored the value (the first wiring's bug: a `GET` right after
/// an `INCR` read the value before it), is caught by the plain-read check.
#[test]
fn planted_replies_before_commit_is_caught() {
    let config = RegisterSimConfig {
        bug: Some(RegisterBug::RepliesBeforeCommit),
        ..RegisterSimConfig::default()
    };
    let caught =
        (0..PLANTED_SEEDS_MAX).find(|&seed| run_register(seed, &config).unstored_answers > 0);
    assert!(caught.is_some());
}

/// Negative control: an acceptor whose unsynced promises a crash lost,
/// restarted without the floor of its clock reservation, accepts below a
/// promise it made, and two proposers decide from the same value. Half
/// the unsynced promises are followed by a brief crash here (the default
/// run: 1 in 100), or the bug shows too rarely to be a control.
#[test]
fn planted_forgets_promises_is_caught() {
    let config = RegisterSimConfig {
        bug: Some(RegisterBug::ForgetsPromises),
        crash_after_unsynced_per_mille: 500,
        ..RegisterSimConfig::default()
    };
    let caught = (0..PLANTED_SEEDS_MAX)
        .filter(|&seed| {
            matches!(
                run_register(seed, &config).verdict,
                Verdict::Violation { .. }
            )
        })
        .count();
    assert!(caught > 0, "caught in none of {PLANTED_SEEDS_MAX} seeds");
    // The same runs with the floor: linearizable.
    let sound = RegisterSimConfig {
        bug: None,
        ..config
    };
    for seed in 0..PLANTED_SEEDS_MAX {
        assert_eq!(
            run_register(seed, &sound).verdict,
            Verdict::Linearizable,
            "seed {seed}"
        );
    }
    println!("register-forgets-promises caught in {caught} of {PLANTED_SEEDS_MAX} seeds");
}

/// Negative control: a proposer whose clock does not observe the floors
/// it was refused with only bumps its ballot above them, and two
/// operations of one node take the same ballot (seen by the run's ballot
/// ledger; seed 94 of the unplanted test once lost an answered
/// compare-and-set this way).
#[test]
fn planted_reuses_ballots_is_caught() {
    let config = RegisterSimConfig {
        bug: Some(RegisterBug::ReusesBallots),
        ..RegisterSimConfig::default()
    };
    let reused: usize = (0..PLANTED_SEEDS_MAX)
        .map(|seed| run_register(seed, &config).ballots_reused)
        .sum();
    assert!(reused > 0);
    println!("register-reuses-ballots: {reused} ballots taken twice in {PLANTED_SEEDS_MAX} seeds");
}

/// A seed replays the same history.
#[test]
fn a_seed_replays_its_history() {
    let config = RegisterSimConfig::default();
    assert_eq!(
        run_register(7, &config).history,
        run_register(7, &config).history
    );
}
