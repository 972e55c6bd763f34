//! The simulated network between nodes: what they say to each other, and
//! what happens to it on the way.
//!
//! Every message gets its own delay, drawn from the world's random number
//! generator, so messages overtake each other (reordering) exactly as
//! often as their delays say. A message is dropped when its link is cut
//! when it is sent or when it would arrive, and otherwise with the current
//! loss rate. Cuts are directed (`from → to`): a partition is both
//! directions of every link across it, a one-way cut one direction of one
//! link. Every cut heals at its `until_ms`. Duplication is not modelled.
//! Once healed for good ([`Network::heal_all`]) no message is slow.
//!
//! A request that reaches a node whose process died (kill -9, a disk
//! failure) is answered with a failure ("connection refused"), as a closed
//! port or a reset connection answers at once; a node that lost power, a
//! cut and a loss are silence, detected only by deadlines (see
//! `sim`).

use ataman_node::peer::frame::Stamped;
use ataman_node::replication::driver::{PeerRequest, Waiter};
use ataman_testkit::rng::Rng;

/// Shortest delay of a message, milliseconds.
pub const DELAY_MS_MIN: u64 = 1;
/// Longest ordinary delay, milliseconds.
pub const DELAY_MS_MAX: u64 = 10;
/// Per mille of messages that are slow: delayed up to [`SLOW_DELAY_MS_MAX`].
pub const SLOW_PER_MILLE: u32 = 30;
/// Longest delay of a slow message, milliseconds (past the replication timeout).
pub const SLOW_DELAY_MS_MAX: u64 = 1500;
/// Directed cuts in force at once, at most (older ones are healed first).
pub const CUTS_MAX: usize = 64;

/// A replica's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The write is durable.
    Written,
    /// The write was not stored: the replica holds a newer version stamped so.
    HoldsNewer(u64),
    /// The newest version, if any.
    Read(Option<Stamped>),
    /// Not done: why.
    Failed(String),
}

/// A message between nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A request, from a sender in its `incarnation`.
    Request {
        /// Who waits for the answer.
        waiter: Waiter,
        /// The sender's incarnation when it sent the request.
        incarnation: u64,
        /// What to do.
        request: PeerRequest,
    },
    /// The answer to a request, echoing its waiter and incarnation.
    Answer {
        /// Who waits for it.
        waiter: Waiter,
        /// The incarnation the request came from.
        incarnation: u64,
        /// The answer.
        answer: Answer,
    },
}

/// A directed cut: messages from `from` to `to` are lost until `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cut {
    from: usize,
    to: usize,
    until_ms: u64,
}

/// Counters of one run's network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetworkStats {
    /// Messages sent.
    pub sent: u64,
    /// Messages lost to a cut (at send or arrival).
    pub cut: u64,
    /// Messages lost to the loss rate.
    pub lost: u64,
    /// Messages that arrived.
    pub delivered: u64,
}

/// The links between nodes: cuts and loss.
#[derive(Debug, Default)]
pub struct Network {
    cuts: Vec<Cut>,
    loss_per_mille: u32,
    lossy_until_ms: u64,
    calm: bool,
    in_flight: usize,
    /// Counters.
    pub stats: NetworkStats,
}

impl Network {
    /// A network with no cuts and no loss.
    pub fn new() -> Self {
        Network::default()
    }

    /// True when messages from `from` to `to` are lost now.
    pub fn is_cut(&self, from: usize, to: usize, now_ms: u64) -> bool {
        self.cuts
            .iter()
            .any(|c| c.from == from && c.to == to && c.until_ms > now_ms)
    }

    /// Cuts `from → to` until `until_ms`.
    pub fn cut(&mut self, from: usize, to: usize, until_ms: u64, now_ms: u64) {
        assert_ne!(from, to, "a node is never cut from itself");
        self.cuts.retain(|c| c.until_ms > now_ms);
        if self.cuts.len() >= CUTS_MAX {
            self.cuts.remove(0);
        }
        self.cuts.push(Cut { from, to, until_ms });
    }

    /// Loses `per_mille` of the messages sent until `until_ms`.
    pub fn lossy(&mut self, per_mille: u32, until_ms: u64) {
        assert!(per_mille <= 1000, "loss {per_mille} per mille");
        self.loss_per_mille = per_mille;
        self.lossy_until_ms = until_ms;
    }

    /// Heals every cut and ends any loss now; from now on no message is
    /// slow either (every delay is at most [`DELAY_MS_MAX`]).
    pub fn heal_all(&mut self) {
        self.cuts.clear();
        self.loss_per_mille = 0;
        self.lossy_until_ms = 0;
        self.calm = true;
    }

    /// Directed cuts in force now.
    pub fn cuts_in_force(&self, now_ms: u64) -> usize {
        self.cuts.iter().filter(|c| c.until_ms > now_ms).count()
    }

    /// Messages sent and not yet arrived or lost.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Sends a message `from → to` now: its delay in milliseconds, or `None` if it is lost.
    pub fn send(&mut self, rng: &mut Rng, from: usize, to: usize, now_ms: u64) -> Option<u64> {
        self.stats.sent += 1;
        if self.is_cut(from, to, now_ms) {
            self.stats.cut += 1;
            return None;
        }
        // Draw the delay first so the number of draws does not depend on the loss rate.
        let slow = rng.below(1000) < u64::from(SLOW_PER_MILLE) && !self.calm;
        let delay_ms = if slow {
            rng.between(DELAY_MS_MAX, SLOW_DELAY_MS_MAX)
        } else {
            rng.between(DELAY_MS_MIN, DELAY_MS_MAX)
        };
        let roll = rng.below(1000);
        if now_ms < self.lossy_until_ms && roll < u64::from(self.loss_per_mille) {
            self.stats.lost += 1;
            return None;
        }
        self.in_flight += 1;
        Some(delay_ms)
    }

    /// A message sent `from → to` reaches its arrival time: true when it
    /// arrives, false when a cut made since it was sent loses it.
    pub fn arrive(&mut self, from: usize, to: usize, now_ms: u64) -> bool {
        assert!(self.in_flight > 0, "arrival of a message never sent");
        self.in_flight -= 1;
        if self.is_cut(from, to, now_ms) {
            self.stats.cut += 1;
            return false;
        }
        self.stats.delivered += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cut loses messages in its direction only, until it heals.
    #[test]
    fn cuts_are_directed_and_heal() {
        let mut rng = Rng::new(1);
        let mut n = Network::new();
        n.cut(0, 1, 100, 0);
        assert!(n.send(&mut rng, 0, 1, 50).is_none());
        assert!(n.send(&mut rng, 1, 0, 50).is_some());
        assert!(n.send(&mut rng, 0, 1, 100).is_some());
        assert_eq!(n.stats.cut, 1);
        assert_eq!(n.in_flight(), 2);
        // A message in flight when a cut starts is lost at arrival.
        n.cut(1, 0, 300, 150);
        assert!(!n.arrive(1, 0, 200));
        assert!(n.arrive(0, 1, 200));
        assert_eq!(n.in_flight(), 0);
    }

    /// Total loss loses everything until it ends; delays stay within bounds.
    #[test]
    fn loss_and_delays() {
        let mut rng = Rng::new(2);
        let mut n = Network::new();
        n.lossy(1000, 10);
        assert!((0..100).all(|_| n.send(&mut rng, 0, 1, 5).is_none()));
        for _ in 0..1000 {
            let d = n.send(&mut rng, 0, 1, 10).unwrap_or(0);
            assert!((DELAY_MS_MIN..=SLOW_DELAY_MS_MAX).contains(&d), "{d}");
        }
        assert_eq!(n.stats.lost, 100);
    }
}
