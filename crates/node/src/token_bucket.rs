//! The token bucket bounding a node's background I/O: anti-entropy's bytes
//! scanned from the engine plus bytes sent to peers, per second
//! (`--anti-entropy-rate-bytes`; `antientropy::rate`), and, one
//! bucket of its own, the bytes of held checkpoints a cluster backup
//! copies off a node (`--backup-rate-bytes`, `net::backup_transfer`).
//! The rule is [`bucket_take`], pure. A module of its own (level 0), so
//! `backup` holds a bucket without depending on `antientropy`.
//!
//! # Thread safety
//! One bucket per node, shared by the rounds thread and the sync server
//! thread behind a mutex held only to update two numbers; the waiting
//! happens outside it, in slices, so a stop request is seen promptly.

use ataman_testkit::lock::lock;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longest single sleep while waiting for tokens: the stop flag is checked this often.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// The caller asked to stop while waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// A token bucket of `rate` bytes per second, holding at most one second's worth.
///
/// # Invariants
/// `tokens <= rate`; a take larger than what is there leaves a debt
/// (negative tokens) that the taker sleeps off before it returns, so over
/// any interval the bytes taken are at most `rate * seconds + rate`.
#[derive(Debug)]
pub struct RateLimiter {
    rate_bytes_per_sec: f64,
    state: Mutex<(f64, Instant)>,
    taken_bytes: AtomicU64,
    waited_nanos: AtomicU64,
}

impl RateLimiter {
    /// A full bucket of `rate_bytes_per_sec` (at least 1).
    pub fn new(rate_bytes_per_sec: u64) -> Self {
        let rate = rate_bytes_per_sec.max(1) as f64;
        RateLimiter {
            rate_bytes_per_sec: rate,
            state: Mutex::new((rate, Instant::now())),
            taken_bytes: AtomicU64::new(0),
            waited_nanos: AtomicU64::new(0),
        }
    }

    /// The rate, bytes per second.
    pub fn bytes_per_sec(&self) -> u64 {
        self.rate_bytes_per_sec as u64
    }

    /// Bytes taken so far (tests count what went through the bucket).
    pub fn taken_bytes(&self) -> u64 {
        self.taken_bytes.load(Ordering::Relaxed)
    }

    /// Time takers spent waiting for tokens so far (phase figures).
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_nanos.load(Ordering::Relaxed))
    }

    /// Takes `bytes` tokens, sleeping (in slices, checking `stop`) while the
    /// bucket is in debt.
    pub fn take(&self, bytes: u64, stop: &dyn Fn() -> bool) -> Result<(), Stopped> {
        self.taken_bytes.fetch_add(bytes, Ordering::Relaxed);
        let wait = {
            let mut state = lock(&self.state);
            let now = Instant::now();
            let (tokens, wait) = bucket_take(
                self.rate_bytes_per_sec,
                state.0,
                now.duration_since(state.1),
                bytes,
            );
            *state = (tokens, now);
            wait
        };
        if !wait.is_zero() {
            let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            self.waited_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
        let until = Instant::now() + wait;
        loop {
            if stop() {
                return Err(Stopped);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(WAIT_SLICE));
        }
    }
}

/// The bucket's rule, pure: a bucket of `rate` bytes per second holding
/// `tokens` (negative: a debt), `elapsed` since it was last updated, and a
/// take of `bytes`; the tokens after, and how long the taker waits (the
/// debt over the rate, zero when none).
///
/// # Rules
/// - Refill: `elapsed * rate`, the bucket capped at one second's worth
///   (`rate`): an idle taker gets at most a second's burst.
/// - A take is always granted; what it takes beyond the tokens is a debt,
///   slept off by the taker before it goes on, so the bytes taken over any
///   interval of `s` seconds are at most `rate * s + rate` plus one take.
pub fn bucket_take(rate: f64, tokens: f64, elapsed: Duration, bytes: u64) -> (f64, Duration) {
    let rate = rate.max(1.0);
    let after = (tokens + elapsed.as_secs_f64() * rate).min(rate) - bytes as f64;
    let wait = if after < 0.0 {
        Duration::from_secs_f64(-after / rate)
    } else {
        Duration::ZERO
    };
    (after, wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket's rule at its edges: a full bucket lends without a wait;
    /// past it the wait is the debt over the rate; the refill is capped at
    /// one second's worth; a debt is paid back by the time that passes.
    #[test]
    fn bucket_rule_waits_the_debt_over_the_rate() {
        let mib = 1024.0 * 1024.0;
        let s = Duration::from_secs_f64;
        // Full bucket (1 MiB/s holding 1 MiB): 1 MiB at once, no wait.
        assert_eq!(bucket_take(mib, mib, s(0.0), 1 << 20), (0.0, s(0.0)));
        // 4 MiB from a full 1 MiB bucket: 3 MiB of debt, 3 s.
        let (tokens, wait) = bucket_take(mib, mib, s(0.0), 4 << 20);
        assert_eq!((tokens, wait), (-3.0 * mib, s(3.0)));
        // Idle for an hour: still one second's worth, not 3,600.
        let (_, wait) = bucket_take(mib, 0.0, s(3600.0), 2 << 20);
        assert_eq!(wait, s(1.0));
        // A 3 MiB debt, 3 s later: paid; the next MiB waits 1 s.
        assert_eq!(bucket_take(mib, -3.0 * mib, s(3.0), 1 << 20).1, s(1.0));
        // Paced takes of a chunk each: the waits add up to bytes over rate.
        // 10 takes of 0.5 MiB, each after the previous one's wait: the
        // first MiB is the burst, the other 4 MiB take 4 s.
        let (mut tokens, mut slept, mut waited) = (mib, Duration::ZERO, Duration::ZERO);
        for _ in 0..10 {
            (tokens, slept) = bucket_take(mib, tokens, slept, 1 << 19);
            waited += slept;
        }
        assert_eq!(waited, s(4.0));
    }

    /// A full bucket lends without waiting; a debt is slept off; a stop
    /// request ends the wait.
    #[test]
    fn debt_and_stop() {
        let r = RateLimiter::new(1_000_000);
        r.take(1_000_000, &|| false).unwrap();
        // 2 s of debt; stop ends the wait at the first check.
        assert_eq!(r.take(2_000_000, &|| true), Err(Stopped));
        let r = RateLimiter::new(10_000_000);
        r.take(10_000_000, &|| false).unwrap();
        let before = Instant::now();
        r.take(1_000_000, &|| false).unwrap();
        // 0.1 s of debt is slept off (a lower bound, never an upper one).
        assert!(before.elapsed() >= Duration::from_millis(90));
    }
}
