//! The simulated world's clock, its queue of future events and its one
//! source of randomness.
//!
//! Time is virtual, in milliseconds since the simulation started; it moves
//! only when the next event is taken from the queue. Events are ordered by
//! `(time, sequence)`, the sequence being the order they were scheduled
//! in, so two events at the same millisecond always run in the same order.
//! Every random choice of a run is drawn from [`World::rng`], seeded once:
//! the seed alone decides the run. The generator is the test kit's, whose
//! stream the project owns, so a seed replays the same run with every
//! version of every dependency.
//!
//! # Invariants
//! - `now_ms` never decreases: an event is never scheduled in the past.
//! - At most [`EVENTS_MAX`] events are ever taken from one world: every
//!   run is bounded even if a bug keeps rescheduling work.

use ataman_testkit::rng::Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Most events one world runs; past it [`World::pop`] returns `None` and
/// [`World::exhausted`] says so.
pub const EVENTS_MAX: u64 = 5_000_000;

/// One scheduled event.
struct Scheduled<E> {
    at_ms: u64,
    sequence: u64,
    event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ms, self.sequence) == (other.at_ms, other.sequence)
    }
}

impl<E> Eq for Scheduled<E> {}

impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Scheduled<E> {
    /// Reversed, so the max-heap yields the earliest `(time, sequence)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_ms, other.sequence).cmp(&(self.at_ms, self.sequence))
    }
}

/// The clock, the event queue and the random number generator of one run.
pub struct World<E> {
    now_ms: u64,
    /// `now_ms`, shared with the nodes' engine clocks (`node::SimClock`).
    now_cell: std::sync::Arc<std::sync::atomic::AtomicU64>,
    sequence: u64,
    taken: u64,
    queue: BinaryHeap<Scheduled<E>>,
    /// Every random choice of the run comes from here.
    pub rng: Rng,
}

impl<E> World<E> {
    /// A world at time 0 whose randomness is decided by `seed`.
    pub fn new(seed: u64) -> Self {
        World {
            now_ms: 0,
            now_cell: std::sync::Arc::default(),
            sequence: 0,
            taken: 0,
            queue: BinaryHeap::new(),
            rng: Rng::new(seed),
        }
    }

    /// Virtual milliseconds since the start.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// A cell that always holds [`World::now_ms`] (for clocks read from
    /// other threads, such as an engine's).
    pub fn now_cell(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        std::sync::Arc::clone(&self.now_cell)
    }

    /// Runs `event` `after_ms` milliseconds from now.
    pub fn schedule(&mut self, after_ms: u64, event: E) {
        let at_ms = self.now_ms.saturating_add(after_ms);
        self.sequence += 1;
        self.queue.push(Scheduled {
            at_ms,
            sequence: self.sequence,
            event,
        });
    }

    /// Takes the next event and moves the clock to its time; `None` when the
    /// queue is empty or [`EVENTS_MAX`] events were taken.
    pub fn pop(&mut self) -> Option<E> {
        if self.taken >= EVENTS_MAX {
            return None;
        }
        let next = self.queue.pop()?;
        assert!(next.at_ms >= self.now_ms, "event scheduled in the past");
        self.now_ms = next.at_ms;
        self.now_cell
            .store(next.at_ms, std::sync::atomic::Ordering::SeqCst);
        self.taken += 1;
        Some(next.event)
    }

    /// Time of the next event, if any.
    pub fn next_at_ms(&self) -> Option<u64> {
        self.queue.peek().map(|s| s.at_ms)
    }

    /// Events waiting.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Events taken so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// True once [`EVENTS_MAX`] events were taken.
    pub fn exhausted(&self) -> bool {
        self.taken >= EVENTS_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events come out by time, then in the order they were scheduled; the clock follows.
    #[test]
    fn ordered_by_time_then_sequence() {
        let mut w: World<&str> = World::new(1);
        w.schedule(5, "b");
        w.schedule(1, "a");
        w.schedule(5, "c");
        assert_eq!(w.pop(), Some("a"));
        assert_eq!(w.now_ms(), 1);
        w.schedule(4, "d"); // at 5, after b and c
        assert_eq!(w.pop(), Some("b"));
        assert_eq!(w.pop(), Some("c"));
        assert_eq!(w.pop(), Some("d"));
        assert_eq!(w.now_ms(), 5);
        assert_eq!(w.pop(), None);
    }

    /// One seed, one stream of random numbers; another seed, another stream.
    #[test]
    fn seeded() {
        let draw = |seed| {
            let mut w: World<()> = World::new(seed);
            (0..8).map(|_| w.rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }
}
