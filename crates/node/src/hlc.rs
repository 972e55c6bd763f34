//! The node's hybrid logical clock: write timestamps that never go back.
//!
//! A timestamp is `unix_ms << 16 | logical` (see `ataman_engine::key`). Each
//! call returns a value greater than every value returned before and not
//! behind the wall clock's milliseconds, so versions written through one
//! node are ordered even if the wall clock steps back.
//!
//! # Thread safety
//! Lock-free (`fetch_max` loop on one atomic); any thread may call `now`.

use ataman_engine::key::{TIMESTAMP_LOGICAL_BITS, Timestamp, timestamp_from_millis};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A hybrid logical clock.
#[derive(Debug, Default)]
pub struct Hlc {
    last: AtomicU64,
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Hlc {
    /// A clock starting at the wall clock.
    pub fn new() -> Self {
        Hlc::default()
    }

    /// The next timestamp.
    pub fn now(&self) -> Timestamp {
        let wall = timestamp_from_millis(wall_ms(), 0);
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = wall.max(last + 1);
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// Moves the clock past a timestamp seen from elsewhere (a replica, a recovered write).
    pub fn observe(&self, ts: Timestamp) {
        self.last.fetch_max(ts, Ordering::AcqRel);
    }
}

/// Milliseconds part of a timestamp (for logs).
pub fn millis(ts: Timestamp) -> u64 {
    ts >> TIMESTAMP_LOGICAL_BITS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamps strictly increase, even across threads, and follow the wall clock.
    #[test]
    fn strictly_increasing() {
        let clock = std::sync::Arc::new(Hlc::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = std::sync::Arc::clone(&clock);
                std::thread::spawn(move || (0..10_000).map(|_| c.now()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "duplicate timestamps");
        assert!(millis(all[0]) + 60_000 > wall_ms());
        clock.observe(u64::MAX / 2);
        assert!(clock.now() > u64::MAX / 2);
    }
}
