//! The point-in-time rule of a cluster backup (docs/BACKUP.md, "A cluster
//! backup at T"): when a member may take its checkpoint, and which
//! versions a restore keeps. Pure: values in, decisions out.
//!
//! # Rules
//! 1. **T** is one member's hybrid-logical-clock time, read when the
//!    backup starts (`GET /v0/backup`'s `clock_ts`).
//! 2. **A member checkpoints once its wall clock has passed
//!    `millis(T) + timeout_ms + skew_ms`** ([`checkpoint_after_ms`],
//!    [`decide`]), `timeout_ms` the replication timeout (a coordinator
//!    answers a replicated write 504 past it: `--replication-timeout-ms`).
//!    Sound because: a write stamped `ts <= T` by a coordinator
//!    whose wall clock read at most `millis(ts)` (the clock never stamps
//!    behind its wall clock) was stamped at a real time when that
//!    coordinator's wall clock read at most `millis(T)`; it is acknowledged
//!    within the replication timeout of that, or never; so by the time any
//!    member's wall clock reads `millis(T) + timeout + skew` (its clock at
//!    most `skew` behind the coordinator's), every acknowledged write
//!    stamped `<= T` is on its quorum of replicas, and every replica's
//!    checkpoint taken then holds it. The member's hybrid clock is never
//!    behind its wall clock, so waiting on the wall clock is the stricter.
//! 3. **A restore keeps a version only when `ts <= T`** ([`kept`]): the
//!    checkpoints, taken later, also hold writes stamped after `T`.
//!
//! # Residual assumptions
//! - Every member's replication timeout is at most the one the member
//!   waiting uses (its own): the nodes of one cluster share their
//!   configuration.
//! - A write a node applies alone (a single node, or one that keeps every
//!   key for `ack=1&from=1`) is acknowledged once its engine applied it,
//!   with no deadline: one still queued past the wait is in no checkpoint
//!   (and was not acknowledged before the checkpoint was asked for).
//! - Any two members' wall clocks differ by at most `skew_ms` (the
//!   backup's `--skew-ms`, default [`SKEW_MS_DEFAULT`]).
//! - A key written once before `T` and overwritten between `T` and its
//!   replicas' checkpoints holds only the newer version there (the engine
//!   keeps the newest version of a key): the restore drops it and the key
//!   comes back absent. Not covered (docs/BACKUP.md, "Not covered").

use ataman_engine::key::{TIMESTAMP_LOGICAL_BITS, Timestamp};

/// The clock skew assumed between members when the backup names none,
/// milliseconds.
pub const SKEW_MS_DEFAULT: u64 = 1_000;
/// The largest skew a backup may assume, milliseconds (a minute: every
/// member waits that long before its checkpoint).
pub const SKEW_MS_MAX: u64 = 60_000;
/// The longest a member waits for its clock to pass the point, in
/// milliseconds (ten minutes): a point further ahead is refused.
pub const WAIT_MS_MAX: u64 = 600_000;

/// The wall-clock time after which a member may take its checkpoint for a
/// backup at `t` (rule 2).
pub fn checkpoint_after_ms(t: Timestamp, timeout_ms: u64, skew_ms: u64) -> u64 {
    millis(t).saturating_add(timeout_ms).saturating_add(skew_ms)
}

/// What a member does now for a backup whose checkpoint is due after
/// `after_ms` on its wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Its wall clock has passed the point: checkpoint now.
    Now,
    /// Wait this many milliseconds, then decide again.
    WaitMs(u64),
    /// The point is more than [`WAIT_MS_MAX`] ahead: refuse (a wrong `T`,
    /// or a clock far behind).
    TooFar,
}

/// Rule 2 for a member whose wall clock reads `now_ms`.
pub fn decide(now_ms: u64, after_ms: u64) -> Decision {
    if now_ms > after_ms {
        return Decision::Now;
    }
    let wait_ms = after_ms - now_ms + 1;
    if wait_ms > WAIT_MS_MAX {
        Decision::TooFar
    } else {
        Decision::WaitMs(wait_ms)
    }
}

/// Rule 3: whether a restore of a backup at `t` keeps a version stamped `ts`.
pub fn kept(ts: Timestamp, t: Timestamp) -> bool {
    ts <= t
}

/// The wall-clock milliseconds of a timestamp.
pub fn millis(ts: Timestamp) -> u64 {
    ts >> TIMESTAMP_LOGICAL_BITS
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_engine::key::timestamp_from_millis;
    use ataman_testkit::rng::Rng;

    #[test]
    fn decide_waits_until_strictly_past_and_refuses_far_points() {
        assert_eq!(decide(1_001, 1_000), Decision::Now);
        assert_eq!(decide(1_000, 1_000), Decision::WaitMs(1));
        assert_eq!(decide(0, 500), Decision::WaitMs(501));
        assert_eq!(decide(0, WAIT_MS_MAX - 1), Decision::WaitMs(WAIT_MS_MAX));
        assert_eq!(decide(0, WAIT_MS_MAX), Decision::TooFar);
        assert_eq!(
            checkpoint_after_ms(timestamp_from_millis(1_000, 5), 200, 300),
            1_500
        );
        assert_eq!(checkpoint_after_ms(u64::MAX, u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn kept_is_at_or_before_t() {
        let t = timestamp_from_millis(5_000, 7);
        assert!(kept(t, t));
        assert!(kept(t - 1, t));
        assert!(!kept(t + 1, t));
    }

    /// One simulated write: the coordinator's stamp, whether it was
    /// acknowledged, and when (real ms) each replica applied it.
    struct Write {
        ts: Timestamp,
        acked: bool,
        applied_at: Vec<u64>,
    }

    /// A cluster of `nodes` members whose wall clocks are off real time by
    /// `offsets` (pairwise within `skew_ms`), taking writes; replicas
    /// apply each within `delay_max_ms` (some later than the timeout).
    fn writes(rng: &mut Rng, offsets: &[i64], timeout_ms: u64, count: usize) -> Vec<Write> {
        (0..count)
            .map(|_| {
                let real = rng.between(1_000, 3_000);
                let c = rng.index(offsets.len());
                let wall = (real as i64 + offsets[c]) as u64;
                let ts = timestamp_from_millis(wall, rng.below(4) as u16);
                let applied_at: Vec<u64> =
                    (0..2).map(|_| real + rng.below(timeout_ms * 2)).collect();
                // Acknowledged when a quorum (both of 2 here) applied within the timeout.
                let acked = applied_at.iter().all(|&a| a <= real + timeout_ms);
                Write {
                    ts,
                    acked,
                    applied_at,
                }
            })
            .collect()
    }

    /// Every acknowledged write stamped `<= T` is in some replica's
    /// checkpoint when each member checkpoints as `after_ms` says; the
    /// first counterexample otherwise.
    fn check(seed: u64, rule: impl Fn(Timestamp, u64, u64) -> u64) -> Result<(), String> {
        let mut rng = Rng::new(seed);
        let skew_ms = rng.between(0, 400);
        let timeout_ms = rng.between(50, 300);
        let offsets: Vec<i64> = (0..3)
            .map(|_| rng.below(skew_ms + 1) as i64 - (skew_ms / 2) as i64)
            .collect();
        let spread = offsets.iter().max().unwrap_or(&0) - offsets.iter().min().unwrap_or(&0);
        assert!(spread as u64 <= skew_ms);
        let writes = writes(&mut rng, &offsets, timeout_ms, 200);
        let t_real = rng.between(1_500, 2_500);
        let t = timestamp_from_millis((t_real as i64 + offsets[0]) as u64, 0xff);
        let after_ms = rule(t, timeout_ms, skew_ms);
        // Replica k of a write is member k (the model's placement); the
        // member checkpoints at the first real ms its wall clock is past.
        let checkpoint_real: Vec<u64> = offsets
            .iter()
            .map(|&o| (after_ms as i64 - o + 1) as u64)
            .collect();
        for (i, w) in writes.iter().enumerate() {
            let held = w
                .applied_at
                .iter()
                .zip(&checkpoint_real)
                .any(|(&applied, &ckpt)| applied <= ckpt);
            if w.acked && kept(w.ts, t) && !held {
                return Err(format!(
                    "seed {seed}: write {i} stamped {} <= T {} acknowledged, in no checkpoint",
                    millis(w.ts),
                    millis(t)
                ));
            }
        }
        Ok(())
    }

    /// The rule holds for every seed: clock skew and replicas applying
    /// late never make an acknowledged write stamped before T miss.
    #[test]
    fn model_every_acknowledged_write_before_t_is_in_a_checkpoint() {
        for seed in 0..2_000 {
            if let Err(e) = check(seed, checkpoint_after_ms) {
                panic!("{e}");
            }
        }
    }

    /// Negative controls: a rule that forgets the skew, or the request
    /// timeout, lets the model find an acknowledged write missing.
    #[test]
    fn model_catches_a_rule_without_skew_or_timeout() {
        let no_skew = |t, timeout_ms, _skew_ms| checkpoint_after_ms(t, timeout_ms, 0);
        let no_timeout = |t, _timeout_ms, skew_ms| checkpoint_after_ms(t, 0, skew_ms);
        assert!((0..2_000).any(|seed| check(seed, no_skew).is_err()));
        assert!((0..2_000).any(|seed| check(seed, no_timeout).is_err()));
    }
}
