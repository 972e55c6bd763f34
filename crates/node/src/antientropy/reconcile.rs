//! What two replicas must exchange, from their digests of one key range.
//!
//! A digest is the `(key, ts)` of the newest version of every key in the
//! range, in key order. Merging the two digests says, key by key, which
//! side is behind: the newer timestamp wins (equal timestamps are the same
//! write, see `crate::hlc`). The initiator of a session fetches what the
//! other side has newer and pushes what it has newer itself.
//!
//! [`Merge`] is the streaming form (it pulls from both digests as it goes,
//! so a session can feed it a page of the remote digest and a scan of its
//! own engine without collecting either); [`reconcile`] collects it.

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

/// The steps that make two key-ordered digests `(key, ts)` equal.
///
/// Both inputs must be sorted by key with each key at most once (asserted).
pub fn reconcile<L, R>(local: L, remote: R) -> Vec<Step>
where
    L: Iterator<Item = (Vec<u8>, u64)>,
    R: Iterator<Item = (Vec<u8>, u64)>,
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
}

impl<L, R> Merge<L, R>
where
    L: Iterator<Item = (Vec<u8>, u64)>,
    R: Iterator<Item = (Vec<u8>, u64)>,
{
    /// A merge of the local and the remote digest.
    pub fn new(local: L, remote: R) -> Self {
        Merge {
            local: local.peekable(),
            remote: remote.peekable(),
            last_local: None,
            last_remote: None,
        }
    }

    fn take_local(&mut self) -> Option<(Vec<u8>, u64)> {
        let item = self.local.next()?;
        check_order(&mut self.last_local, &item.0, "local");
        Some(item)
    }

    fn take_remote(&mut self) -> Option<(Vec<u8>, u64)> {
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
    L: Iterator<Item = (Vec<u8>, u64)>,
    R: Iterator<Item = (Vec<u8>, u64)>,
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
                    let (key, local_ts) = self.take_local()?;
                    let (_, remote_ts) = self.take_remote()?;
                    match local_ts.cmp(&remote_ts) {
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
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn digest(m: &BTreeMap<Vec<u8>, u64>) -> impl Iterator<Item = (Vec<u8>, u64)> + '_ {
        m.iter().map(|(k, &ts)| (k.clone(), ts))
    }

    proptest! {
        /// Two replicas with random keys and random edits: applying the
        /// steps (fetch copies remote to local, push local to remote, the
        /// newest timestamp kept) makes both sides equal, and only keys
        /// that differed produce a step.
        #[test]
        fn steps_make_both_sides_equal(
            base in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..5), 1u64..100, 0..100),
            edits in proptest::collection::vec(
                (0u8..4, proptest::collection::vec(any::<u8>(), 0..5), 1u64..100), 0..40),
        ) {
            let mut local = base.clone();
            let mut remote = base;
            for (op, key, ts) in edits {
                let side = if op % 2 == 0 { &mut local } else { &mut remote };
                if op < 2 { side.insert(key, ts); } else { side.remove(&key); }
            }
            let differing = local.keys().chain(remote.keys())
                .filter(|k| local.get(*k) != remote.get(*k))
                .collect::<std::collections::BTreeSet<_>>().len();
            let steps = reconcile(digest(&local), digest(&remote));
            prop_assert_eq!(steps.len(), differing);
            let (l0, r0) = (local.clone(), remote.clone());
            for step in steps {
                match step {
                    Step::Fetch(k) => {
                        let ts = r0[&k];
                        prop_assert!(l0.get(&k).is_none_or(|&l| l < ts));
                        local.insert(k, ts);
                    }
                    Step::Push(k) => {
                        let ts = l0[&k];
                        prop_assert!(r0.get(&k).is_none_or(|&r| r < ts));
                        remote.insert(k, ts);
                    }
                }
            }
            prop_assert_eq!(local, remote);
        }
    }

    /// The cases by hand: only-remote and newer-remote fetch, only-local and
    /// newer-local push, equal does nothing; steps come in key order.
    #[test]
    fn cases() {
        let local = vec![(b"a".to_vec(), 1), (b"b".to_vec(), 5), (b"c".to_vec(), 3)];
        let remote = vec![(b"b".to_vec(), 6), (b"c".to_vec(), 3), (b"d".to_vec(), 1)];
        assert_eq!(
            reconcile(local.into_iter(), remote.into_iter()),
            vec![
                Step::Push(b"a".to_vec()),
                Step::Fetch(b"b".to_vec()),
                Step::Fetch(b"d".to_vec()),
            ]
        );
        let local = vec![(b"b".to_vec(), 9)];
        let remote = vec![(b"b".to_vec(), 2)];
        assert_eq!(
            reconcile(local.into_iter(), remote.into_iter()),
            vec![Step::Push(b"b".to_vec())]
        );
    }

    /// A digest out of key order is a bug upstream, not something to merge.
    #[test]
    #[should_panic(expected = "out of key order")]
    fn unsorted_digest_panics() {
        let local = vec![(b"b".to_vec(), 1), (b"a".to_vec(), 1)];
        let _ = reconcile(local.into_iter(), std::iter::empty());
    }
}
