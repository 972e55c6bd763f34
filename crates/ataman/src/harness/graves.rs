//! Graves: keys written once and left dead, so a run collects tombstones
//! and expired values (docs/RELIABILITY.md, "Collection during a run").
//!
//! The `register` and `deletes` workloads rewrite each of their keys
//! several times a second, so no version of theirs is both its key's
//! newest and dead for the grace: a run collected nothing. A share of the
//! `deletes` workload's operations ([`GRAVE_PERCENT`]) goes to graves
//! instead, one client's in three steps:
//!
//! 1. **Dig** (the first [`GRAVES_PER_CLIENT`] keys, early in the run): a
//!    put of a fresh key `g<client>-<n>` and, at the client's next grave
//!    operation, its delete; or one expiring put of a fresh key
//!    `x<client>-<n>` ([`GRAVE_TTL_MS`]). Neither key is written again.
//! 2. **Visit**, meanwhile and after: a read of one of the client's dead
//!    keys ([`VISIT_PERCENT`] of grave operations while digging, every one
//!    after), so reads before and after the grace, and after collection,
//!    are judged by the checker (absent; never an older value back).
//! 3. **Final reads**: every key written is read at the end, as always.
//!
//! Grave values are [`GRAVE_VALUE_BYTES`] long (the run's `--value-bytes`
//! if larger): they fill the memtables, so the tables holding the
//! tombstones flush early and compactions past the grace merge them.
//!
//! The phase is bounded: at most [`GRAVES_PER_CLIENT`] keys per client,
//! so at most that many grave keys per client are read at the end.
//! Everything here is a function of the client's generator alone (the
//! seed), never of what the cluster answered.

use super::history::OpKind;
use ataman_testkit::rng::Rng;

/// Percent of the `deletes` workload's operations that go to graves.
pub const GRAVE_PERCENT: u64 = 30;
/// Grave keys one client makes at most (put-then-delete or expiring).
pub const GRAVES_PER_CLIENT: u64 = 40;
/// Percent of grave operations that visit a dead key while digging.
pub const VISIT_PERCENT: u64 = 25;
/// Percent of new graves that are expiring puts (the rest put, then delete).
pub const EXPIRING_GRAVE_PERCENT: u64 = 40;
/// `ttl_ms` of an expiring grave: dead a moment after it was written.
pub const GRAVE_TTL_MS: u64 = 100;
/// Bytes of a grave's value (its id, padded).
pub const GRAVE_VALUE_BYTES: usize = 1024;

/// True for a key of the graves (`g…` deleted, `x…` expiring).
pub fn is_grave(key: &str) -> bool {
    key.starts_with('g') || key.starts_with('x')
}

/// The padded length of `key`'s values: [`GRAVE_VALUE_BYTES`] for a
/// grave (or `run_bytes` if larger), else the run's `--value-bytes`.
pub fn value_bytes(key: &str, run_bytes: usize) -> usize {
    if is_grave(key) {
        run_bytes.max(GRAVE_VALUE_BYTES)
    } else {
        run_bytes
    }
}

/// One grave operation: the kind, the key, a put's `ttl_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraveOp {
    /// Put, delete or get.
    pub kind: OpKind,
    /// The key.
    pub key: String,
    /// An expiring put's `ttl_ms`.
    pub ttl_ms: Option<u64>,
}

/// One client's graves.
///
/// # Invariants
/// - `made <= GRAVES_PER_CLIENT`; every key is written by one put (and at
///   most one delete) of this client, never again.
/// - `open`, when set, names the last key made, put and not yet deleted.
#[derive(Debug, Clone, Default)]
pub struct Graves {
    client: u32,
    made: u64,
    open: Option<String>,
    dead: Vec<String>,
}

impl Graves {
    /// Client `client`'s graves, none dug yet.
    pub fn new(client: u32) -> Graves {
        Graves {
            client,
            ..Graves::default()
        }
    }

    /// The next grave operation, drawn from `rng`.
    pub fn next_op(&mut self, rng: &mut Rng) -> GraveOp {
        if let Some(key) = self.open.take() {
            self.dead.push(key.clone());
            return GraveOp {
                kind: OpKind::Delete,
                key,
                ttl_ms: None,
            };
        }
        let digging = self.made < GRAVES_PER_CLIENT;
        let visit = !self.dead.is_empty() && (!digging || rng.percent(VISIT_PERCENT));
        if visit {
            let key = self.dead[rng.below(self.dead.len() as u64) as usize].clone();
            return GraveOp {
                kind: OpKind::Get,
                key,
                ttl_ms: None,
            };
        }
        if !digging {
            // Nothing dead yet and nothing left to dig: only possible with
            // GRAVES_PER_CLIENT = 0; a read of a key never written.
            return GraveOp {
                kind: OpKind::Get,
                key: format!("g{}-none", self.client),
                ttl_ms: None,
            };
        }
        self.made += 1;
        assert!(self.made <= GRAVES_PER_CLIENT);
        if rng.percent(EXPIRING_GRAVE_PERCENT) {
            let key = format!("x{}-{}", self.client, self.made);
            self.dead.push(key.clone());
            GraveOp {
                kind: OpKind::Put,
                key,
                ttl_ms: Some(GRAVE_TTL_MS),
            }
        } else {
            let key = format!("g{}-{}", self.client, self.made);
            self.open = Some(key.clone());
            GraveOp {
                kind: OpKind::Put,
                key,
                ttl_ms: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Every grave key is written once (and a `g` key deleted once, right
    /// after), visits read only dead keys, and digging stops at the bound.
    #[test]
    fn graves_are_written_once_and_left_dead() {
        let mut rng = Rng::new(7);
        let mut graves = Graves::new(3);
        let mut writes: BTreeMap<String, Vec<OpKind>> = BTreeMap::new();
        let mut visits = 0;
        let mut previous: Option<GraveOp> = None;
        for _ in 0..2_000 {
            let op = graves.next_op(&mut rng);
            assert!(is_grave(&op.key), "{op:?}");
            match op.kind {
                OpKind::Get => {
                    visits += 1;
                    let w = writes.get(&op.key).expect("a visit to a key never written");
                    let dead = w == &[OpKind::Put, OpKind::Delete] || op.key.starts_with('x');
                    assert!(dead, "{op:?} {w:?}");
                }
                OpKind::Delete => {
                    let p = previous.as_ref().expect("a delete first");
                    assert_eq!((p.kind, &p.key), (OpKind::Put, &op.key));
                    writes.get_mut(&op.key).unwrap().push(OpKind::Delete);
                }
                OpKind::Put => {
                    assert!(writes.insert(op.key.clone(), vec![OpKind::Put]).is_none());
                    assert_eq!(op.ttl_ms.is_some(), op.key.starts_with('x'), "{op:?}");
                }
            }
            previous = Some(op);
        }
        assert_eq!(writes.len() as u64, GRAVES_PER_CLIENT);
        assert!(writes.keys().any(|k| k.starts_with('x')));
        assert!(writes.keys().any(|k| k.starts_with('g')));
        assert!(visits > 1_500, "{visits}");
    }

    /// Grave values are padded long; other keys keep the run's size.
    #[test]
    fn grave_values_are_long() {
        assert_eq!(value_bytes("g1-2", 0), GRAVE_VALUE_BYTES);
        assert_eq!(value_bytes("x1-2", 5000), 5000);
        assert_eq!(value_bytes("d1", 0), 0);
        assert_eq!(value_bytes("s1-2", 7), 7);
        assert!(!is_grave("r3") && !is_grave("s0-1") && !is_grave("d4"));
    }
}
