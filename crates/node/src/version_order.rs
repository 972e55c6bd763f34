//! The one rule that says which of two versions of a key wins, used by
//! every place that compares versions: the coordinator (the newest answer,
//! read repair), a replica storing a peer's write (hints, repair), the
//! cluster range's merge, anti-entropy (its digests, what it fetches and
//! pushes) and the transition copy.
//!
//! # Rules
//! Versions are compared field by field; the first difference decides:
//! 1. the timestamp: the newer wins;
//! 2. the kind: tombstone > expiring value > plain value (the engine's own
//!    order, `ataman_engine::key::tie_rank`, so a replica's engine keeps the
//!    same winner whatever order it applied them in);
//! 3. two values of one kind: the greater [`value_digest`] of the value
//!    bytes, then (on a 64-bit collision) the greater bytes.
//!
//! Two versions equal under all three are the same write. A deadline is
//! not compared: it is stamped once with its value's timestamp.
//!
//! Equal timestamps with different contents are a bug (a timestamp issued
//! twice, a bit flip): the rule does not make them right, it makes every
//! replica and every coordinator pick the same one, so replicas converge
//! instead of keeping two values for good. Anti-entropy counts such pairs
//! (`ataman_antientropy_conflicts_total`).
//!
//! [`Tag`] is the rule without the bytes (what a digest carries): its
//! order is [`compare`]'s, except that a digest collision compares equal.

use std::cmp::Ordering;
use xxhash_rust::xxh3::xxh3_64;

/// A version's kind, in the order the rule ranks them (the greater wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A value without a deadline.
    Value = 0,
    /// A value with a deadline.
    Expiring = 1,
    /// A delete (an expired value reads as one).
    Tombstone = 2,
}

/// One version of a key, borrowed: what the rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRef<'a> {
    /// The version's timestamp.
    pub ts: u64,
    /// The value; `None`: a tombstone.
    pub value: Option<&'a [u8]>,
    /// True for a value with a deadline (ignored for a tombstone).
    pub expiring: bool,
}

impl VersionRef<'_> {
    /// The version's kind.
    pub fn kind(&self) -> Kind {
        match (self.value, self.expiring) {
            (None, _) => Kind::Tombstone,
            (Some(_), true) => Kind::Expiring,
            (Some(_), false) => Kind::Value,
        }
    }
}

/// The digest of a value's bytes the rule breaks ties with, and that
/// anti-entropy's digests and tree leaves carry: `xxh3_64(value)`
/// (docs/FORMAT.md, "Tree hashes").
pub fn value_digest(value: &[u8]) -> u64 {
    xxh3_64(value)
}

/// A version without its value: what the rule needs of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    /// The timestamp.
    pub ts: u64,
    /// The kind.
    pub kind: Kind,
    /// [`value_digest`] of the value; 0 for a tombstone.
    pub digest: u64,
}

impl Tag {
    /// The tag of `v` (hashes its value).
    pub fn of(v: VersionRef<'_>) -> Tag {
        Tag {
            ts: v.ts,
            kind: v.kind(),
            digest: v.value.map_or(0, value_digest),
        }
    }
}

/// The rule on tags: `Greater` when `a` wins. Agrees with [`compare`]
/// except on a digest collision (`Equal` here).
pub fn compare_tags(a: &Tag, b: &Tag) -> Ordering {
    (a.ts, a.kind, a.digest).cmp(&(b.ts, b.kind, b.digest))
}

/// The rule: `Greater` when `a` wins over `b`, `Equal` when they are the
/// same write. Hashes values only when timestamp and kind tie.
pub fn compare(a: VersionRef<'_>, b: VersionRef<'_>) -> Ordering {
    let head = (a.ts, a.kind()).cmp(&(b.ts, b.kind()));
    if head != Ordering::Equal {
        return head;
    }
    match (a.value, b.value) {
        (Some(x), Some(y)) if x != y => {
            compare_tags(&Tag::of(a), &Tag::of(b)).then_with(|| x.cmp(y))
        }
        _ => Ordering::Equal,
    }
}

/// True when `a` wins over `b` (strictly).
pub fn wins(a: VersionRef<'_>, b: VersionRef<'_>) -> bool {
    compare(a, b) == Ordering::Greater
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value(ts: u64, v: &[u8]) -> VersionRef<'_> {
        VersionRef {
            ts,
            value: Some(v),
            expiring: false,
        }
    }

    fn expiring(ts: u64, v: &[u8]) -> VersionRef<'_> {
        VersionRef {
            ts,
            value: Some(v),
            expiring: true,
        }
    }

    fn tombstone(ts: u64) -> VersionRef<'static> {
        VersionRef {
            ts,
            value: None,
            expiring: false,
        }
    }

    /// A newer timestamp wins whatever the kinds; at an equal one a
    /// tombstone beats an expiring value beats a plain value.
    #[test]
    fn timestamp_then_kind() {
        assert!(wins(value(6, b"a"), tombstone(5)));
        assert!(wins(tombstone(5), expiring(5, b"a")));
        assert!(wins(expiring(5, b"a"), value(5, b"z")));
        assert!(wins(tombstone(5), value(5, b"a")));
        assert!(!wins(value(5, b"a"), tombstone(5)));
        assert_eq!(compare(tombstone(5), tombstone(5)), Ordering::Equal);
        assert_eq!(compare(value(5, b"a"), value(5, b"a")), Ordering::Equal);
    }

    /// Two values of one kind under one timestamp: the greater digest
    /// wins, on both sides of the comparison (a total order, so every
    /// replica picks the same one).
    #[test]
    fn equal_kinds_order_by_value_digest() {
        let (a, b) = (b"left".as_slice(), b"right".as_slice());
        let a_wins = value_digest(a) > value_digest(b);
        assert_eq!(wins(value(5, a), value(5, b)), a_wins);
        assert_eq!(wins(value(5, b), value(5, a)), !a_wins);
        assert_eq!(wins(expiring(5, a), expiring(5, b)), a_wins);
        assert_eq!(value_digest(b"abc"), xxh3_64(b"abc"));
    }

    /// The documented tag of each kind: the digest of the value, 0 for a tombstone.
    #[test]
    fn tags() {
        assert_eq!(
            Tag::of(value(3, b"v")),
            Tag {
                ts: 3,
                kind: Kind::Value,
                digest: xxh3_64(b"v")
            }
        );
        assert_eq!(Tag::of(expiring(3, b"v")).kind, Kind::Expiring);
        assert_eq!(
            Tag::of(tombstone(3)),
            Tag {
                ts: 3,
                kind: Kind::Tombstone,
                digest: 0
            }
        );
    }

    fn version() -> impl Strategy<Value = (u64, Option<Vec<u8>>, bool)> {
        (
            0u64..3,
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3)),
            any::<bool>(),
        )
    }

    fn as_ref(v: &(u64, Option<Vec<u8>>, bool)) -> VersionRef<'_> {
        VersionRef {
            ts: v.0,
            value: v.1.as_deref(),
            expiring: v.2,
        }
    }

    proptest! {
        /// The rule is a total order (antisymmetric, transitive), Equal
        /// only for the same write, and the tag order agrees with it.
        #[test]
        fn a_total_order_that_tags_agree_with(a in version(), b in version(), c in version()) {
            let (a, b, c) = (as_ref(&a), as_ref(&b), as_ref(&c));
            prop_assert_eq!(compare(a, b), compare(b, a).reverse());
            if compare(a, b) != Ordering::Less && compare(b, c) != Ordering::Less {
                prop_assert_ne!(compare(a, c), Ordering::Less);
            }
            let same = a.ts == b.ts && a.kind() == b.kind() && a.value == b.value;
            prop_assert_eq!(compare(a, b) == Ordering::Equal, same);
            prop_assert_eq!(compare_tags(&Tag::of(a), &Tag::of(b)), compare(a, b));
        }
    }
}
