//! What the nodes' compactions collected during a run: tombstones and
//! expired values dropped past the grace (docs/RELIABILITY.md,
//! "Collection during a run").
//!
//! A node counts them from its start (`ataman_engine_tombstones_dropped_total`,
//! `ataman_engine_expired_dropped_total`), so a kill zeroes its count and a
//! reading at the end alone undercounts every run that restarts a node. A
//! thread reads every slot's `/metrics` every [`POLL_INTERVAL`] and adds
//! the increases ([`Counter`]): a reading lower than the last one is a
//! restart, and counts from zero. What a node collected between its last
//! reading and a kill is missed (at most one interval's worth).

use super::client::request_once;
use super::cluster::ClusterView;
use ataman_testkit::lock::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often every node's counters are read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(1000);
/// Bound on one `/metrics` request.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(500);
/// The counters, in the order of [`Collected`]'s fields.
pub const METRICS: [&str; 2] = [
    "ataman_engine_tombstones_dropped_total",
    "ataman_engine_expired_dropped_total",
];

/// One node's counter read over time, restarts included.
///
/// # Invariants
/// `total` never decreases; it is the sum of the increases seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    last: Option<u64>,
    /// Increases seen so far.
    pub total: u64,
}

impl Counter {
    /// Takes a reading: the increase since the last, or the reading itself
    /// when it went down (the node restarted and counts from zero; the
    /// first reading of a run counts whole too, the nodes start with the run).
    pub fn read(&mut self, value: u64) {
        let increase = match self.last {
            Some(last) if value >= last => value - last,
            _ => value,
        };
        self.total += increase;
        self.last = Some(value);
    }
}

/// What was collected, summed over the nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    /// Tombstones dropped.
    pub tombstones: u64,
    /// Expired values dropped.
    pub expired: u64,
}

/// The counters [`METRICS`] in a `/metrics` text, in that order (absent: None).
pub fn parse(text: &str) -> [Option<u64>; 2] {
    let mut found = [None; 2];
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        if let Some(i) = METRICS.iter().position(|m| *m == name) {
            found[i] = value.parse::<u64>().ok();
        }
    }
    found
}

/// The polling thread's shared state.
///
/// # Thread safety
/// The counters are behind a mutex; the thread and [`Meter::finish`] take
/// it one reading at a time.
pub struct Meter {
    counters: Arc<Mutex<Vec<[Counter; 2]>>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    view: Arc<ClusterView>,
}

fn read_all(view: &ClusterView, counters: &Mutex<Vec<[Counter; 2]>>) {
    for node in 0..view.len() {
        let Ok((200, body)) = request_once(view.addr(node), "GET", "/metrics", POLL_TIMEOUT) else {
            continue;
        };
        let values = parse(&String::from_utf8_lossy(&body));
        let mut counters = lock(counters);
        for (counter, value) in counters[node].iter_mut().zip(values) {
            if let Some(v) = value {
                counter.read(v);
            }
        }
    }
}

impl Meter {
    /// Starts reading every slot of `view` until [`Meter::finish`].
    pub fn start(view: &Arc<ClusterView>) -> std::io::Result<Meter> {
        let counters = Arc::new(Mutex::new(vec![[Counter::default(); 2]; view.len()]));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, v) = (Arc::clone(&counters), Arc::clone(&stop), Arc::clone(view));
        let handle = std::thread::Builder::new()
            .name("harness-collected".into())
            .spawn(move || {
                // Bounded by the stop flag (set by finish, or on drop).
                while !s.load(Ordering::Relaxed) {
                    let next = Instant::now() + POLL_INTERVAL;
                    read_all(&v, &c);
                    while !s.load(Ordering::Relaxed) && Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })?;
        Ok(Meter {
            counters,
            stop,
            handle: Some(handle),
            view: Arc::clone(view),
        })
    }

    /// Stops the thread, takes a last reading of every node, and sums.
    pub fn finish(mut self) -> Collected {
        self.stop_thread();
        read_all(&self.view, &self.counters);
        let counters = lock(&self.counters);
        Collected {
            tombstones: counters.iter().map(|c| c[0].total).sum(),
            expired: counters.iter().map(|c| c[1].total).sum(),
        }
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Increases add up; a reading that went down is a restart and counts
    /// from zero; an unchanged reading adds nothing.
    #[test]
    fn counter_survives_restarts() {
        let mut c = Counter::default();
        for v in [3, 3, 10, 2, 5, 0, 0, 4] {
            c.read(v);
        }
        // 3 + 0 + 7, restart: 2 + 3, restart: 0 + 0 + 4.
        assert_eq!(c.total, 19);
    }

    /// Only the two counters are taken, by exact name.
    #[test]
    fn parse_takes_the_two_counters() {
        let text = "# HELP x\nataman_engine_tombstones_dropped_total 12\n\
                    ataman_engine_tombstones_dropped_total_x 99\n\
                    ataman_engine_expired_dropped_total 3\nother 5\n";
        assert_eq!(parse(text), [Some(12), Some(3)]);
        assert_eq!(
            parse("ataman_engine_expired_dropped_total 7\n"),
            [None, Some(7)]
        );
        assert_eq!(parse(""), [None, None]);
    }
}
