//! wrk2's constant-rate schedule, per connection.
//!
//! With a total rate of R requests/s over C connections, connection `i`
//! plans its `k`-th request at `first + i/R + k·C/R` seconds: together the
//! connections send one request every 1/R seconds, evenly interleaved.
//! Latency is measured from the planned time, so a request that could not
//! be sent on time because the server stalled the previous one is charged
//! for the wait (no coordinated omission). A rate of 0 is a closed loop:
//! each request is planned the moment the previous one completed.

/// Nanoseconds per second.
const NS_PER_SEC: u128 = 1_000_000_000;

/// The plan of one connection.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Planned time of request 0, ns since the run's epoch.
    first_ns: u64,
    /// Connections sharing the rate.
    connections: u128,
    /// Total requests per second (0 = closed loop).
    rate: u128,
    /// Index of the next request.
    k: u128,
}

impl Schedule {
    /// Connection `index` of `connections` sharing `rate` requests/s from `start_ns`.
    pub fn new(start_ns: u64, index: usize, connections: usize, rate: u64) -> Schedule {
        let rate = u128::from(rate);
        let offset_ns = (index as u128 * NS_PER_SEC).checked_div(rate).unwrap_or(0);
        Schedule {
            first_ns: start_ns.saturating_add(u64::try_from(offset_ns).unwrap_or(u64::MAX)),
            connections: connections.max(1) as u128,
            rate,
            k: 0,
        }
    }

    /// Whether requests are planned on a clock (rate > 0).
    pub fn is_open_loop(&self) -> bool {
        self.rate > 0
    }

    /// The planned time of the next request (`now_ns` in a closed loop), and moves on.
    pub fn next_due(&mut self, now_ns: u64) -> u64 {
        if self.rate == 0 {
            return now_ns;
        }
        let offset = self.k * self.connections * NS_PER_SEC / self.rate;
        self.k += 1;
        self.first_ns
            .saturating_add(u64::try_from(offset).unwrap_or(u64::MAX))
    }

    /// The planned time of the next request without moving on.
    pub fn peek_due(&self, now_ns: u64) -> u64 {
        self.clone().next_due(now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four connections at 1000/s interleave into one request per millisecond.
    #[test]
    fn interleaved_evenly() {
        let mut all: Vec<u64> = (0..4)
            .flat_map(|i| {
                let mut s = Schedule::new(0, i, 4, 1000);
                (0..5).map(move |_| s.next_due(0)).collect::<Vec<_>>()
            })
            .collect();
        all.sort_unstable();
        let expected: Vec<u64> = (0..20).map(|k| k * 1_000_000).collect();
        assert_eq!(all, expected);
    }

    /// A closed loop plans each request at the moment it is asked for.
    #[test]
    fn closed_loop_is_now() {
        let mut s = Schedule::new(5, 1, 4, 0);
        assert!(!s.is_open_loop());
        assert_eq!(s.next_due(42), 42);
        assert_eq!(s.peek_due(43), 43);
    }

    /// Rates that do not divide a second do not drift: request k is at k/R exactly (floored).
    #[test]
    fn no_drift() {
        let mut s = Schedule::new(0, 0, 1, 3);
        let due: Vec<u64> = (0..4).map(|_| s.next_due(0)).collect();
        assert_eq!(due, vec![0, 333_333_333, 666_666_666, 1_000_000_000]);
    }
}
