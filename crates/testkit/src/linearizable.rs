//! A linearizability checker: is there an order of a history's operations,
//! each placed between its call and its return, in which a sequential
//! model gives every observed result?
//!
//! The search is Wing & Gong's (1993) with Lowe's memoization (2017), as
//! Porcupine (Athalye) implements it: the calls and returns in time order
//! form a list; the search linearizes the first call whose operation the
//! model accepts in the current state, lifts its call and return out of
//! the list and starts again from the head; meeting a return whose
//! operation is not linearized yet means the choices so far were wrong,
//! so it backtracks. A set of (linearized operations, state) pairs already
//! tried cuts repeated work. Its cost is exponential in the number of
//! operations concurrent at once only, so a history of a few clients is
//! checked in milliseconds.
//!
//! An operation without a return (the client timed out, the outcome is
//! unknown) returns "at infinity": it may take effect any time after its
//! call, or after everything else. Its model step must accept every
//! outcome it could have had (a compare-and-set whose result is unknown
//! swaps or not); a read whose result is unknown says nothing and is left
//! out by the caller.
//!
//! # Bounds
//! The search takes at most [`SEARCH_STEPS_MAX`] steps; past it the
//! verdict is [`Verdict::Undecided`], never a pass.

use std::collections::HashSet;
use std::hash::Hash;

/// Search steps (a call tried or a return backtracked) before giving up.
pub const SEARCH_STEPS_MAX: u64 = 20_000_000;

/// A sequential model of the object the history is about.
pub trait Model {
    /// The object's state.
    type State: Clone + Eq + Hash;
    /// An operation with its observed result.
    type Op;
    /// The state before the first operation.
    fn init(&self) -> Self::State;
    /// The state after `op` in `state`, or `None` if `op`'s observed
    /// result is impossible there.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
}

/// One operation of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<Op> {
    /// The operation and what it observed.
    pub op: Op,
    /// When the client called it.
    pub call: u64,
    /// When the client got its result (`None`: never; unknown outcome).
    pub ret: Option<u64>,
}

/// The checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An order exists.
    Linearizable,
    /// None exists. The deepest attempt linearized `depth` operations
    /// and then met the return of `stuck` (index in the history), which
    /// no remaining order could place.
    Violation {
        /// The operation the deepest attempt could not place.
        stuck: usize,
        /// Operations linearized by that attempt.
        depth: usize,
    },
    /// The search passed [`SEARCH_STEPS_MAX`].
    Undecided,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    op: usize,
    is_call: bool,
}

/// Checks `history` against `model` (the module's search).
pub fn check<M: Model>(model: &M, history: &[Entry<M::Op>]) -> Verdict {
    let n = history.len();
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, e) in history.iter().enumerate() {
        events.push((e.call, true, i));
        events.push((e.ret.unwrap_or(u64::MAX), false, i));
    }
    // Calls before returns at one instant: such operations count as
    // concurrent (the permissive reading; a strict one could flag a
    // correct history whose clock ticks are coarse).
    events.sort_by_key(|&(t, is_call, i)| (t, !is_call, i));
    let list: Vec<Event> = events
        .iter()
        .map(|&(_, is_call, op)| Event { op, is_call })
        .collect();
    if list.is_empty() {
        return Verdict::Linearizable;
    }
    // A doubly linked list over `list`; node `len` is the head sentinel,
    // `NONE` the end.
    const NONE: usize = usize::MAX;
    let len = list.len();
    let head = len;
    let mut next: Vec<usize> = (1..=len).map(|i| if i == len { NONE } else { i }).collect();
    next.push(0);
    let mut prev: Vec<usize> = (0..len)
        .map(|i| if i == 0 { head } else { i - 1 })
        .collect();
    prev.push(NONE);
    let mut ret_pos = vec![0usize; n];
    let mut call_pos = vec![0usize; n];
    for (pos, ev) in list.iter().enumerate() {
        if ev.is_call {
            call_pos[ev.op] = pos;
        } else {
            ret_pos[ev.op] = pos;
        }
    }
    let unlink = |pos: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>| {
        let (p, q) = (prev[pos], next[pos]);
        next[p] = q;
        if q != NONE {
            prev[q] = p;
        }
    };
    let relink = |pos: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>| {
        let (p, q) = (prev[pos], next[pos]);
        next[p] = pos;
        if q != NONE {
            prev[q] = pos;
        }
    };
    let words = n.div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut cursor = next[head];
    let mut steps: u64 = 0;
    let mut deepest: Option<(usize, usize)> = None;
    while next[head] != NONE {
        steps += 1;
        if steps > SEARCH_STEPS_MAX {
            return Verdict::Undecided;
        }
        if cursor == NONE {
            // Only returns of linearized operations can end the list walk
            // without a return being met; cannot happen while it is non-empty.
            return Verdict::Violation { stuck: 0, depth: 0 };
        }
        let ev = list[cursor];
        if ev.is_call {
            let op = ev.op;
            let tried = model.step(&state, &history[op].op).and_then(|s| {
                let mut bits = linearized.clone();
                bits[op / 64] |= 1 << (op % 64);
                cache.insert((bits, s.clone())).then_some(s)
            });
            match tried {
                Some(s) => {
                    stack.push((op, state));
                    state = s;
                    linearized[op / 64] |= 1 << (op % 64);
                    unlink(call_pos[op], &mut next, &mut prev);
                    unlink(ret_pos[op], &mut next, &mut prev);
                    cursor = next[head];
                }
                None => cursor = next[cursor],
            }
        } else {
            if deepest.is_none_or(|(_, depth)| stack.len() > depth) {
                deepest = Some((ev.op, stack.len()));
            }
            let Some((op, before)) = stack.pop() else {
                let (stuck, depth) = deepest.unwrap_or((ev.op, 0));
                return Verdict::Violation { stuck, depth };
            };
            state = before;
            linearized[op / 64] &= !(1 << (op % 64));
            relink(ret_pos[op], &mut next, &mut prev);
            relink(call_pos[op], &mut next, &mut prev);
            cursor = next[call_pos[op]];
        }
    }
    Verdict::Linearizable
}

/// A register of `u64` values (absent at first): reads, writes,
/// compare-and-sets.
#[derive(Debug, Clone, Copy, Default)]
pub struct Register;

/// An operation on a [`Register`] with what it observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterOp {
    /// A read that returned this value.
    Read(Option<u64>),
    /// A write of this value.
    Write(u64),
    /// Set `new` if the value is `expect`; `swapped`: the result seen
    /// (`None`: unknown, either is possible).
    Cas {
        /// The value compared with.
        expect: Option<u64>,
        /// The value set when equal.
        new: u64,
        /// Whether it swapped, if known.
        swapped: Option<bool>,
    },
}

impl Model for Register {
    type State = Option<u64>;
    type Op = RegisterOp;

    fn init(&self) -> Option<u64> {
        None
    }

    fn step(&self, state: &Option<u64>, op: &RegisterOp) -> Option<Option<u64>> {
        match op {
            RegisterOp::Read(seen) => (seen == state).then_some(*state),
            RegisterOp::Write(v) => Some(Some(*v)),
            RegisterOp::Cas {
                expect,
                new,
                swapped,
            } => match (expect == state, swapped) {
                (true, Some(true)) | (true, None) => Some(Some(*new)),
                (false, Some(false)) | (false, None) => Some(*state),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(op: RegisterOp, call: u64, ret: u64) -> Entry<RegisterOp> {
        Entry {
            op,
            call,
            ret: Some(ret),
        }
    }

    /// Concurrent operations may take effect in either order.
    #[test]
    fn concurrent_reads_may_see_either_value() {
        let h = vec![
            e(RegisterOp::Write(1), 0, 10),
            e(RegisterOp::Write(2), 5, 20),
            e(RegisterOp::Read(Some(1)), 12, 25),
            e(RegisterOp::Read(Some(2)), 30, 31),
        ];
        assert_eq!(check(&Register, &h), Verdict::Linearizable);
        assert_eq!(check(&Register, &[]), Verdict::Linearizable);
    }

    /// Negative control: a read after a completed write sees the older value.
    #[test]
    fn stale_read_is_flagged() {
        let h = vec![
            e(RegisterOp::Write(1), 0, 10),
            e(RegisterOp::Write(2), 11, 20),
            e(RegisterOp::Read(Some(1)), 21, 30),
        ];
        assert_eq!(
            check(&Register, &h),
            Verdict::Violation { stuck: 2, depth: 2 }
        );
    }

    /// Negative control: two compare-and-sets from the same value both
    /// succeed (a lost update), even overlapping in time.
    #[test]
    fn lost_update_is_flagged() {
        let h = vec![
            e(RegisterOp::Write(0), 0, 1),
            e(
                RegisterOp::Cas {
                    expect: Some(0),
                    new: 1,
                    swapped: Some(true),
                },
                2,
                10,
            ),
            e(
                RegisterOp::Cas {
                    expect: Some(0),
                    new: 2,
                    swapped: Some(true),
                },
                3,
                11,
            ),
        ];
        assert!(matches!(check(&Register, &h), Verdict::Violation { .. }));
    }

    /// An unknown outcome may have happened, late, or not at all for a
    /// compare-and-set; a write with an unknown outcome still happened
    /// no earlier than its call.
    #[test]
    fn unknown_outcomes_are_either() {
        let unknown_write = Entry {
            op: RegisterOp::Write(7),
            call: 0,
            ret: None,
        };
        let h = vec![
            unknown_write.clone(),
            e(RegisterOp::Read(None), 1, 2),
            e(RegisterOp::Read(Some(7)), 3, 4),
        ];
        assert_eq!(check(&Register, &h), Verdict::Linearizable);
        let before_call = vec![
            e(RegisterOp::Read(Some(7)), 0, 1),
            Entry {
                call: 2,
                ..unknown_write
            },
        ];
        assert!(matches!(
            check(&Register, &before_call),
            Verdict::Violation { .. }
        ));
        let cas = Entry {
            op: RegisterOp::Cas {
                expect: None,
                new: 3,
                swapped: None,
            },
            call: 0,
            ret: None,
        };
        let h = vec![cas, e(RegisterOp::Read(None), 5, 6)];
        assert_eq!(check(&Register, &h), Verdict::Linearizable);
    }

    /// A larger concurrent history of a correct sequential run passes fast
    /// (the memoization's point): 8 clients, 200 operations in all.
    #[test]
    fn sequential_run_with_overlap_passes() {
        let mut rng = crate::rng::Rng::new(3);
        let mut value: Option<u64> = None;
        let mut h = Vec::new();
        for t in 0..200u64 {
            let op = match rng.below(3) {
                0 => RegisterOp::Read(value),
                1 => {
                    let v = rng.below(4);
                    value = Some(v);
                    RegisterOp::Write(v)
                }
                _ => {
                    let expect = Some(rng.below(4));
                    let new = rng.below(4);
                    let swapped = expect == value;
                    if swapped {
                        value = Some(new);
                    }
                    RegisterOp::Cas {
                        expect,
                        new,
                        swapped: Some(swapped),
                    }
                }
            };
            // Each op takes effect at 10 t + 5; its interval covers up to
            // 8 neighbours on each side.
            let call = (10 * t + 5).saturating_sub(rng.below(80));
            let ret = 10 * t + 5 + rng.below(80);
            h.push(e(op, call, ret));
        }
        assert_eq!(check(&Register, &h), Verdict::Linearizable);
    }
}
