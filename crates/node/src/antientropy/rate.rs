//! The token bucket bounding anti-entropy's I/O: bytes scanned from the
//! engine plus bytes sent to peers, per second (`--anti-entropy-rate-bytes`).
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
            let refill = now.duration_since(state.1).as_secs_f64() * self.rate_bytes_per_sec;
            state.0 = (state.0 + refill).min(self.rate_bytes_per_sec) - bytes as f64;
            state.1 = now;
            if state.0 < 0.0 {
                Duration::from_secs_f64(-state.0 / self.rate_bytes_per_sec)
            } else {
                Duration::ZERO
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
