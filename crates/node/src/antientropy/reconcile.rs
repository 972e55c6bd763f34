//! What two replicas must exchange, from their digests of one key range.
//!
//! A digest is the `(key, tag)` of the newest version of every key in the
//! range, in key order (the tag: timestamp, kind and value digest,
//! `crate::version_order::Tag`). Merging the two digests says, key by key,
//! which side is behind, by the one tie rule: the newer timestamp wins; at
//! an equal timestamp the tombstone, then the expiring value, then the
//! greater value digest. Equal tags are the same write. The initiator of a
//! session fetches what the other side has newer and pushes what it has
//! newer itself.
//!
//! Equal timestamps with different tags are a *conflict*: two replicas
//! hold different versions under one timestamp (a timestamp issued twice,
//! a bit flip). The merge resolves it like any other difference (the rule's
//! winner goes to the other side, so both converge) and says so
//! ([`Merge::take_conflict`]), so the session counts and logs it.
//!
//! [`Merge`] is the streaming form (it pulls from both digests as it goes,
//! so a session can feed it a page of the remote digest and a scan of its
//! own engine without collecting either); [`reconcile`] collects it.

use crate::version_order::{Tag, compare_tags};
use std::cmp::Ordering;
use std::iter::Peekable;

/// One thing to do so that both sides hold the newest version of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The remote side has a newer version (or the only one): fetch it.
    Fetch(Vec<u8>),
    /// The local side has a newer version (or the only one): push it.
    Push(Vec<u8>),
}

/// The steps that make two key-ordered digests `(key, tag)` equal.
///
/// Both inputs must be sorted by key with each key at most once (asserted).
pub fn reconcile<L, R>(local: L, remote: R) -> Vec<Step>
where
    L: Iterator<Item = (Vec<u8>, Tag)>,
    R: Iterator<Item = (Vec<u8>, Tag)>,
{
    Merge::new(local, remote).collect()
}

/// The merge-join of two key-ordered digests, yielding [`Step`]s lazily.
///
/// # Invariants
/// Keys come out in increasing order; each key of either input yields at
/// most one step. An input out of order (or with a repeated key) panics:
/// it would make the merge skip keys silently.
pub struct Merge<L: Iterator, R: Iterator> {
    local: Peekable<L>,
    remote: Peekable<R>,
    last_local: Option<Vec<u8>>,
    last_remote: Option<Vec<u8>>,
    conflict: bool,
}

impl<L, R> Merge<L, R>
where
    L: Iterator<Item = (Vec<u8>, Tag)>,
    R: Iterator<Item = (Vec<u8>, Tag)>,
{
    /// A merge of the local and the remote digest.
    pub fn new(local: L, remote: R) -> Self {
        Merge {
            local: local.peekable(),
            remote: remote.peekable(),
            last_local: None,
            last_remote: None,
            conflict: false,
        }
    }

    /// True when the step just yielded resolves a conflict (both sides
    /// hold the key under one timestamp with different tags); cleared by
    /// the call.
    pub fn take_conflict(&mut self) -> bool {
        std::mem::take(&mut self.conflict)
    }

    fn take_local(&mut self) -> Option<(Vec<u8>, Tag)> {
        let item = self.local.next()?;
        check_order(&mut self.last_local, &item.0, "local");
        Some(item)
    }

    fn take_remote(&mut self) -> Option<(Vec<u8>, Tag)> {
        let item = self.remote.next()?;
        check_order(&mut self.last_remote, &item.0, "remote");
        Some(item)
    }
}

fn check_order(last: &mut Option<Vec<u8>>, key: &[u8], side: &str) {
    if let Some(prev) = last.as_deref() {
        assert!(prev < key, "{side} digest out of key order");
    }
    *last = Some(key.to_vec());
}

impl<L, R> Iterator for Merge<L, R>
where
    L: Iterator<Item = (Vec<u8>, Tag)>,
    R: Iterator<Item = (Vec<u8>, Tag)>,
{
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            let order = match (self.local.peek(), self.remote.peek()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(l), Some(r)) => l.0.cmp(&r.0),
            };
            match order {
                Ordering::Less => {
                    let (key, _) = self.take_local()?;
                    return Some(Step::Push(key));
                }
                Ordering::Greater => {
                    let (key, _) = self.take_remote()?;
                    return Some(Step::Fetch(key));
                }
                Ordering::Equal => {
                    let (key, local) = self.take_local()?;
                    let (_, remote) = self.take_remote()?;
                    self.conflict = local.ts == remote.ts && local != remote;
                    match compare_tags(&local, &remote) {
                        Ordering::Less => return Some(Step::Fetch(key)),
                        Ordering::Greater => return Some(Step::Push(key)),
                        Ordering::Equal => continue,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version_order::Kind;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A model version: (ts, kind byte 0..3, value digest).
    type V = (u64, u8, u64);

    fn tag((ts, kind, digest): V) -> Tag {
        let kind = [Kind::Value, Kind::Tombstone, Kind::Expiring][kind as usize % 3];
        Tag { ts, kind, digest }
    }

    fn digest(m: &BTreeMap<Vec<u8>, V>) -> impl Iterator<Item = (Vec<u8>, Tag)> + '_ {
        m.iter().map(|(k, &v)| (k.clone(), tag(v)))
    }

    fn ts(ts: u64) -> Tag {
        tag((ts, 0, 0))
    }

    proptest! {
        /// Two replicas with random keys and random edits (few timestamps,
        /// so versions under one timestamp that differ in kind or value are
        /// common): applying the steps (fetch copies remote to local, push
        /// local to remote) makes both sides equal, each step carries the
        /// tie rule's winner, only keys that differed produce a step, and
        /// exactly those under one timestamp are conflicts.
        #[test]
        fn steps_make_both_sides_equal(
            base in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..5), (1u64..6, 0u8..3, 0u64..3), 0..100),
            edits in proptest::collection::vec(
                (0u8..4, proptest::collection::vec(any::<u8>(), 0..5), (1u64..6, 0u8..3, 0u64..3)), 0..40),
        ) {
            let mut local = base.clone();
            let mut remote = base;
            for (op, key, v) in edits {
                let side = if op % 2 == 0 { &mut local } else { &mut remote };
                if op < 2 { side.insert(key, v); } else { side.remove(&key); }
            }
            let differing = local.keys().chain(remote.keys())
                .filter(|k| local.get(*k).map(|&v| tag(v)) != remote.get(*k).map(|&v| tag(v)))
                .collect::<std::collections::BTreeSet<_>>();
            let conflicts_expected = differing.iter()
                .filter(|k| matches!((local.get(**k), remote.get(**k)), (Some(a), Some(b)) if a.0 == b.0))
                .count();
            let differing = differing.len();
            let mut steps = Vec::new();
            let mut conflicts = 0;
            {
                let mut merge = Merge::new(digest(&local), digest(&remote));
                while let Some(step) = merge.next() {
                    conflicts += usize::from(merge.take_conflict());
                    steps.push(step);
                }
            }
            prop_assert_eq!(steps.len(), differing);
            prop_assert_eq!(conflicts, conflicts_expected);
            let (l0, r0) = (local.clone(), remote.clone());
            for step in steps {
                match step {
                    Step::Fetch(k) => {
                        let v = r0[&k];
                        prop_assert!(l0.get(&k).is_none_or(|&l| compare_tags(&tag(l), &tag(v)).is_lt()));
                        local.insert(k, v);
                    }
                    Step::Push(k) => {
                        let v = l0[&k];
                        prop_assert!(r0.get(&k).is_none_or(|&r| compare_tags(&tag(r), &tag(v)).is_lt()));
                        remote.insert(k, v);
                    }
                }
            }
            let tags = |m: &BTreeMap<Vec<u8>, V>| m.iter().map(|(k, &v)| (k.clone(), tag(v))).collect::<Vec<_>>();
            prop_assert_eq!(tags(&local), tags(&remote));
        }
    }

    /// The cases by hand: only-remote and newer-remote fetch, only-local and
    /// newer-local push, equal does nothing; steps come in key order.
    #[test]
    fn cases() {
        let local = vec![
            (b"a".to_vec(), ts(1)),
            (b"b".to_vec(), ts(5)),
            (b"c".to_vec(), ts(3)),
        ];
        let remote = vec![
            (b"b".to_vec(), ts(6)),
            (b"c".to_vec(), ts(3)),
            (b"d".to_vec(), ts(1)),
        ];
        assert_eq!(
            reconcile(local.into_iter(), remote.into_iter()),
            vec![
                Step::Push(b"a".to_vec()),
                Step::Fetch(b"b".to_vec()),
                Step::Fetch(b"d".to_vec()),
            ]
        );
        let local = vec![(b"b".to_vec(), ts(9))];
        let remote = vec![(b"b".to_vec(), ts(2))];
        assert_eq!(
            reconcile(local.into_iter(), remote.into_iter()),
            vec![Step::Push(b"b".to_vec())]
        );
    }

    /// Regression (issue 31): one timestamp, two versions. The tie rule's
    /// winner goes to the other side (tombstone > expiring > value, then
    /// the greater digest) and the step is a conflict; a newer timestamp
    /// is no conflict. (The merge used to see equal timestamps as one write.)
    #[test]
    fn equal_timestamps_with_other_contents_are_conflicts() {
        let cases = [
            (tag((5, 0, 7)), tag((5, 0, 8)), Step::Fetch(b"k".to_vec())),
            (tag((5, 0, 8)), tag((5, 0, 7)), Step::Push(b"k".to_vec())),
            (tag((5, 1, 0)), tag((5, 2, 9)), Step::Push(b"k".to_vec())),
            (tag((5, 0, 9)), tag((5, 2, 1)), Step::Fetch(b"k".to_vec())),
        ];
        for (l, r, want) in cases {
            let mut merge = Merge::new(
                std::iter::once((b"k".to_vec(), l)),
                std::iter::once((b"k".to_vec(), r)),
            );
            assert_eq!(merge.next(), Some(want));
            assert!(merge.take_conflict());
            assert!(!merge.take_conflict(), "cleared by the call");
            assert_eq!(merge.next(), None);
        }
        let mut merge = Merge::new(
            std::iter::once((b"k".to_vec(), tag((6, 0, 1)))),
            std::iter::once((b"k".to_vec(), tag((5, 0, 2)))),
        );
        assert_eq!(merge.next(), Some(Step::Push(b"k".to_vec())));
        assert!(!merge.take_conflict());
    }

    /// A digest out of key order is a bug upstream, not something to merge.
    #[test]
    #[should_panic(expected = "out of key order")]
    fn unsorted_digest_panics() {
        let local = vec![(b"b".to_vec(), ts(1)), (b"a".to_vec(), ts(1))];
        let _ = reconcile(local.into_iter(), std::iter::empty());
    }
}
