//! One acceptor step per key at a time: the order in which a node's
//! acceptor takes the register requests of one key, as a pure table.
//!
//! An acceptor step is *load, [`super::acceptor::step`], write
//! [`super::record::plan`]'s writes durably, then reply*. Two steps of one
//! key must not interleave between the load and the write (the second
//! would decide from a state the first is about to replace: a promise it
//! no longer holds, an accept it overwrites). The node's acceptor runs on
//! every network thread (requests arrive on whichever thread holds the
//! peer connection) and its writes are asynchronous (the engine's group
//! commit, never an fsync on a network thread), so the rule is a table
//! shared by the threads, taken under one lock.
//!
//! # Rules
//! - [`Serial::admit`]: a request of a key with no step running runs now
//!   ([`Admit::Run`]); the key is *busy* from then on. A request of a
//!   busy key waits in the key's queue ([`Admit::Queued`]), in arrival
//!   order.
//! - [`Serial::finish`]: the running step of a key replied (its writes
//!   durable, or failed): the key's next waiting request runs (returned),
//!   else the key is idle again and leaves the table.
//! - Bounds: at most [`Limits::queued_per_key_max`] requests wait for one
//!   key and [`Limits::queued_max`] for all keys together; a request past
//!   either is refused at once ([`Admit::Full`], the caller answers it with
//!   an error: the proposer counts it as a refusal and retries). Busy keys
//!   are bounded by the requests that made them busy, which the peer
//!   connections bound (`net::peer_conn`).
//!
//! # Invariants
//! - A key is in the table exactly while one of its steps runs.
//! - `queued` is the sum of the queues' lengths.

use std::collections::{HashMap, VecDeque};

/// Requests waiting for one busy key at most, by default.
pub const QUEUED_PER_KEY_MAX_DEFAULT: usize = 1024;
/// Requests waiting for all busy keys together at most, by default.
pub const QUEUED_MAX_DEFAULT: usize = 16_384;

/// The table's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Waiting requests of one key at most.
    pub queued_per_key_max: usize,
    /// Waiting requests of all keys at most.
    pub queued_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            queued_per_key_max: QUEUED_PER_KEY_MAX_DEFAULT,
            queued_max: QUEUED_MAX_DEFAULT,
        }
    }
}

/// What [`Serial::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit<T> {
    /// The key was idle: run this request now (the key is busy until
    /// [`Serial::finish`]).
    Run(T),
    /// The key is busy: the request waits its turn.
    Queued,
    /// A bound is reached: refuse the request (given back).
    Full(T),
}

/// The busy keys and their waiting requests (the "Rules").
#[derive(Debug)]
pub struct Serial<T> {
    keys: HashMap<Vec<u8>, VecDeque<T>>,
    queued: usize,
    limits: Limits,
}

impl<T> Serial<T> {
    /// An empty table with `limits`.
    pub fn new(limits: Limits) -> Serial<T> {
        Serial {
            keys: HashMap::new(),
            queued: 0,
            limits,
        }
    }

    /// A request `item` of `key` arrived.
    pub fn admit(&mut self, key: &[u8], item: T) -> Admit<T> {
        match self.keys.get_mut(key) {
            None => {
                self.keys.insert(key.to_vec(), VecDeque::new());
                Admit::Run(item)
            }
            Some(queue) => {
                if queue.len() >= self.limits.queued_per_key_max
                    || self.queued >= self.limits.queued_max
                {
                    return Admit::Full(item);
                }
                queue.push_back(item);
                self.queued += 1;
                Admit::Queued
            }
        }
    }

    /// The running step of `key` replied: its next request, which runs
    /// now; `None`: the key is idle.
    pub fn finish(&mut self, key: &[u8]) -> Option<T> {
        let queue = self.keys.get_mut(key)?;
        match queue.pop_front() {
            Some(next) => {
                self.queued -= 1;
                Some(next)
            }
            None => {
                self.keys.remove(key);
                None
            }
        }
    }

    /// Keys with a step running.
    pub fn busy(&self) -> usize {
        self.keys.len()
    }

    /// Requests waiting, all keys.
    pub fn queued(&self) -> usize {
        debug_assert_eq!(
            self.queued,
            self.keys.values().map(VecDeque::len).sum::<usize>()
        );
        self.queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Serial<u32> {
        Serial::new(Limits {
            queued_per_key_max: 2,
            queued_max: 3,
        })
    }

    /// A second request of a busy key waits and runs, in arrival order,
    /// only once the running one finished; another key is not held up.
    #[test]
    fn one_step_per_key_in_arrival_order() {
        let mut t = small();
        assert_eq!(t.admit(b"k", 1), Admit::Run(1));
        assert_eq!(t.admit(b"k", 2), Admit::Queued);
        assert_eq!(t.admit(b"k", 3), Admit::Queued);
        assert_eq!(t.admit(b"other", 9), Admit::Run(9));
        assert_eq!((t.busy(), t.queued()), (2, 2));
        assert_eq!(t.finish(b"k"), Some(2));
        assert_eq!(t.admit(b"k", 4), Admit::Queued);
        assert_eq!(t.finish(b"k"), Some(3));
        assert_eq!(t.finish(b"k"), Some(4));
        assert_eq!(t.finish(b"k"), None);
        assert_eq!((t.busy(), t.queued()), (1, 0));
        // Idle again: the next request runs at once.
        assert_eq!(t.admit(b"k", 5), Admit::Run(5));
    }

    /// The per-key and the total bounds refuse, and give the request back;
    /// room made by a finish is usable again.
    #[test]
    fn bounds_refuse_at_the_limit() {
        let mut t = small();
        assert_eq!(t.admit(b"a", 1), Admit::Run(1));
        assert_eq!(t.admit(b"a", 2), Admit::Queued);
        assert_eq!(t.admit(b"a", 3), Admit::Queued);
        assert_eq!(t.admit(b"a", 4), Admit::Full(4), "per-key bound");
        assert_eq!(t.admit(b"b", 5), Admit::Run(5));
        assert_eq!(t.admit(b"b", 6), Admit::Queued);
        assert_eq!(t.admit(b"b", 7), Admit::Full(7), "total bound");
        assert_eq!(t.finish(b"a"), Some(2));
        assert_eq!(t.admit(b"b", 7), Admit::Queued);
        assert_eq!(t.queued(), 3);
    }

    /// Finishing a key that is not busy changes nothing.
    #[test]
    fn finish_of_an_idle_key_is_none() {
        let mut t = small();
        assert_eq!(t.finish(b"x"), None);
        assert_eq!((t.busy(), t.queued()), (0, 0));
    }

    /// The rule the table exists for, against the acceptor's rules: two
    /// prepares of one key served through the table see each other's
    /// promise (the second is refused when lower), where two steps that
    /// both loaded the state before either wrote would both promise (the
    /// interleaving the table forbids: the negative control).
    #[test]
    fn serialized_steps_see_each_others_promises() {
        use super::super::acceptor::{self, Answer, KeyState, Mode, Request};
        use super::super::ballot::Ballot;
        let hi = Request::Prepare(Ballot::new(9, 1));
        let lo = Request::Prepare(Ballot::new(5, 2));
        // Serialized: load, step, write, then the next loads.
        let mut disk = KeyState::default();
        let mut t: Serial<Request> = Serial::new(Limits::default());
        let mut answers = Vec::new();
        let mut next = match t.admit(b"k", hi.clone()) {
            Admit::Run(r) => Some(r),
            other => panic!("{other:?}"),
        };
        assert_eq!(t.admit(b"k", lo.clone()), Admit::Queued);
        while let Some(request) = next {
            let step = acceptor::step(&disk, &request, Mode::Sound);
            disk = step.next;
            answers.push(step.answer);
            next = t.finish(b"k");
        }
        assert!(matches!(answers[0], Some(Answer::Promise { .. })));
        assert!(matches!(answers[1], Some(Answer::Refused { .. })));
        // Interleaved (both load before either writes): both promise.
        let before = KeyState::default();
        let a = acceptor::step(&before, &hi, Mode::Sound);
        let b = acceptor::step(&before, &lo, Mode::Sound);
        assert!(matches!(a.answer, Some(Answer::Promise { .. })));
        assert!(matches!(b.answer, Some(Answer::Promise { .. })));
    }
}
