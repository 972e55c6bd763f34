//! The pure merge of a cluster range: `k` key-ordered streams of versions
//! (key, timestamp, value or tombstone), one per node, to the newest live
//! version of each key, in key order, each key once.
//!
//! # Rules
//! - Each source yields its keys in strictly increasing order, one version
//!   per key (the node's newest); a source that does not is an error
//!   ([`MergeError::OutOfOrder`]), never silently merged.
//! - For a key, the version the one tie rule ranks first wins
//!   (`crate::version_order`): the greatest timestamp; on equal timestamps
//!   a tombstone, then an expiring value, then a plain value, then the
//!   greater value digest. The same rule on every coordinator and replica,
//!   so a range and a `GET` agree even on versions that share a timestamp
//!   (a bug: a timestamp issued twice).
//! - A key whose winner is a tombstone is not yielded.
//!
//! # Resuming
//! The merge holds no state but the head of each source, so a cursor is
//! just a key: opening the sources at [`key_after`]`(last)` continues the
//! iteration after `last` ([`Merge::next_page`] takes a bounded page), which
//! is what a `SCAN` cursor needs.
//!
//! Cost: each step looks at every source's head (`k` is the number of
//! nodes streamed from, at most the cluster size), so O(k) per version read.

/// One version of a key as a node holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The key.
    pub key: Vec<u8>,
    /// The version's timestamp (the coordinator's clock).
    pub ts: u64,
    /// The value; `None`: a tombstone.
    pub value: Option<Vec<u8>>,
    /// True when the value has a deadline (the deadline itself is not
    /// carried: an expired value comes as a tombstone).
    pub expiring: bool,
}

impl Version {
    /// This version as the tie rule sees it.
    pub fn as_version(&self) -> crate::version_order::VersionRef<'_> {
        crate::version_order::VersionRef {
            ts: self.ts,
            value: self.value.as_deref(),
            expiring: self.expiring,
        }
    }
}

/// A live key the merge yields: its newest version, which is a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// The key.
    pub key: Vec<u8>,
    /// Its newest version's timestamp.
    pub ts: u64,
    /// Its value.
    pub value: Vec<u8>,
}

/// Why a merge stopped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError<E> {
    /// A source failed (a node went away mid-stream, a bad frame).
    #[error("source {source_index}: {error}")]
    Source {
        /// Which source.
        source_index: usize,
        /// Its error.
        error: E,
    },
    /// A source yielded a key not after its previous one.
    #[error("source {0} yielded keys out of order")]
    OutOfOrder(usize),
}

/// The smallest key strictly after `key` (`key` followed by a zero byte):
/// the start that resumes an iteration after `key`.
pub fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// True when version `a` beats version `b` of the same key, by the one
/// tie rule (`crate::version_order`).
pub fn newer(a: &Version, b: &Version) -> bool {
    crate::version_order::wins(a.as_version(), b.as_version())
}

/// The merge of `k` sources (see the module's rules).
pub struct Merge<S> {
    sources: Vec<S>,
    /// Each source's next version, `None` once it ended.
    heads: Vec<Option<Version>>,
    /// Heads not yet read (filled on the first step).
    primed: bool,
    /// The merge failed: it yields nothing more.
    failed: bool,
}

impl<S, E> Merge<S>
where
    S: Iterator<Item = Result<Version, E>>,
{
    /// A merge of `sources` (each already positioned at the range's start).
    pub fn new(sources: Vec<S>) -> Self {
        let heads = sources.iter().map(|_| None).collect();
        Merge {
            sources,
            heads,
            primed: false,
            failed: false,
        }
    }

    /// Replaces source `i`'s head with its next version, which must come
    /// after `prev` (the key just taken from it).
    fn advance(&mut self, i: usize, prev: Option<&[u8]>) -> Result<(), MergeError<E>> {
        let next = match self.sources[i].next() {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(error)) => {
                return Err(MergeError::Source {
                    source_index: i,
                    error,
                });
            }
        };
        if let (Some(prev), Some(next)) = (prev, &next)
            && next.key.as_slice() <= prev
        {
            return Err(MergeError::OutOfOrder(i));
        }
        self.heads[i] = next;
        Ok(())
    }

    /// The next live key, `Ok(None)` at the end of every source.
    pub fn next_live(&mut self) -> Result<Option<Live>, MergeError<E>> {
        if self.failed {
            return Ok(None);
        }
        let result = self.step();
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn step(&mut self) -> Result<Option<Live>, MergeError<E>> {
        if !self.primed {
            self.primed = true;
            for i in 0..self.sources.len() {
                self.advance(i, None)?;
            }
        }
        // Each round consumes at least one version, so this ends with the sources.
        loop {
            let smallest = (0..self.heads.len())
                .filter_map(|i| self.heads[i].as_ref().map(|v| (i, &v.key)))
                .min_by(|a, b| a.1.cmp(b.1))
                .map(|(i, _)| i);
            let Some(first) = smallest else {
                return Ok(None);
            };
            let Some(mut winner) = self.heads[first].take() else {
                return Ok(None);
            };
            self.advance(first, Some(&winner.key))?;
            for i in first + 1..self.heads.len() {
                if self.heads[i].as_ref().is_none_or(|v| v.key != winner.key) {
                    continue;
                }
                let Some(v) = self.heads[i].take() else {
                    continue;
                };
                self.advance(i, Some(&v.key))?;
                if newer(&v, &winner) {
                    winner = v;
                }
            }
            if let Version {
                key,
                ts,
                value: Some(value),
                ..
            } = winner
            {
                return Ok(Some(Live { key, ts, value }));
            }
        }
    }

    /// Up to `count` live keys (fewer only at the end): a bounded page.
    pub fn next_page(&mut self, count: usize) -> Result<Vec<Live>, MergeError<E>> {
        let mut page = Vec::new();
        while page.len() < count {
            match self.next_live()? {
                Some(live) => page.push(live),
                None => break,
            }
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Src = std::vec::IntoIter<Result<Version, String>>;

    fn v(key: &str, ts: u64, value: Option<&str>) -> Version {
        Version {
            key: key.as_bytes().to_vec(),
            ts,
            value: value.map(|s| s.as_bytes().to_vec()),
            expiring: false,
        }
    }

    fn src(versions: Vec<Version>) -> Src {
        versions.into_iter().map(Ok).collect::<Vec<_>>().into_iter()
    }

    fn all(mut merge: Merge<Src>) -> Result<Vec<(String, String)>, MergeError<String>> {
        let mut out = Vec::new();
        while let Some(live) = merge.next_live()? {
            out.push((
                String::from_utf8_lossy(&live.key).into_owned(),
                String::from_utf8_lossy(&live.value).into_owned(),
            ));
        }
        Ok(out)
    }

    #[test]
    fn newest_wins_and_tombstones_hide() {
        let a = src(vec![
            v("a", 1, Some("a1")),
            v("b", 5, None),
            v("c", 2, Some("c2")),
        ]);
        let b = src(vec![
            v("a", 3, Some("a3")),
            v("b", 4, Some("b4")),
            v("d", 1, Some("d1")),
        ]);
        let got = all(Merge::new(vec![a, b]));
        let want = vec![
            ("a".to_owned(), "a3".to_owned()),
            ("c".to_owned(), "c2".to_owned()),
            ("d".to_owned(), "d1".to_owned()),
        ];
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn equal_timestamps_tombstone_wins() {
        for order in [false, true] {
            let x = src(vec![v("k", 7, Some("x"))]);
            let y = src(vec![v("k", 7, None)]);
            let sources = if order { vec![x, y] } else { vec![y, x] };
            assert_eq!(all(Merge::new(sources)), Ok(vec![]));
        }
    }

    /// Regression (issue 31, "the tie rule"): at an equal timestamp an
    /// expiring value beats a plain one, and of two plain values the one
    /// with the greater digest wins, whatever the sources' order (the merge
    /// used to keep the first it met), as a `GET` would answer.
    #[test]
    fn equal_timestamps_follow_the_tie_rule() {
        let expiring = Version {
            expiring: true,
            ..v("k", 7, Some("e"))
        };
        let (a, b) = (v("k", 7, Some("left")), v("k", 7, Some("right")));
        let digest = crate::version_order::value_digest;
        let winner = if digest(b"left") > digest(b"right") {
            "left"
        } else {
            "right"
        };
        for order in [false, true] {
            let pair = |x: &Version, y: &Version| {
                let (x, y) = (src(vec![x.clone()]), src(vec![y.clone()]));
                if order { vec![x, y] } else { vec![y, x] }
            };
            let got = all(Merge::new(pair(&expiring, &a)));
            assert_eq!(got, Ok(vec![("k".to_owned(), "e".to_owned())]));
            let got = all(Merge::new(pair(&a, &b)));
            assert_eq!(got, Ok(vec![("k".to_owned(), winner.to_owned())]));
        }
    }

    #[test]
    fn a_failing_source_fails_the_merge_once() {
        let a = vec![Ok(v("a", 1, Some("1"))), Err("gone".to_owned())].into_iter();
        let mut merge = Merge::new(vec![a]);
        assert!(matches!(
            merge.next_live(),
            Err(MergeError::Source {
                source_index: 0,
                ..
            })
        ));
        assert_eq!(merge.next_live(), Ok(None), "nothing after a failure");
    }

    #[test]
    fn out_of_order_source_is_an_error() {
        let a = src(vec![v("b", 1, Some("1")), v("a", 1, Some("1"))]);
        let got = all(Merge::new(vec![a]));
        assert_eq!(got, Err(MergeError::OutOfOrder(0)));
        let dup = src(vec![v("a", 1, Some("1")), v("a", 2, Some("2"))]);
        assert_eq!(all(Merge::new(vec![dup])), Err(MergeError::OutOfOrder(0)));
    }

    #[test]
    fn key_after_is_the_next_key() {
        assert_eq!(key_after(b"ab"), b"ab\0".to_vec());
        assert!(key_after(b"ab").as_slice() > b"ab".as_slice());
        assert!(key_after(b"ab").as_slice() < b"ab\x00\x00".as_slice());
        assert!(key_after(b"ab").as_slice() < b"ac".as_slice());
    }

    /// One write of the model: a key, a value or a delete, a timestamp
    /// (distinct per write), and the nodes that got it.
    #[derive(Debug, Clone)]
    struct Write {
        key: u8,
        value: Option<u8>,
        nodes: Vec<bool>,
    }

    fn writes(nodes: usize) -> impl Strategy<Value = Vec<Write>> {
        prop::collection::vec(
            (
                0u8..24,
                prop::option::weighted(0.7, any::<u8>()),
                prop::collection::vec(any::<bool>(), nodes),
            )
                .prop_map(|(key, value, nodes)| Write { key, value, nodes }),
            0..80,
        )
    }

    /// Each node's newest version per key (as its engine keeps them), and
    /// the model: the newest version of every key over all writes.
    /// What each node holds: its newest version per key.
    type Held = BTreeMap<Vec<u8>, Version>;
    /// Live keys and their values.
    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    fn build(nodes: usize, writes: &[Write]) -> (Vec<Held>, Model) {
        let mut per_node = vec![BTreeMap::new(); nodes];
        let mut model = BTreeMap::new();
        for (ts, w) in writes.iter().enumerate() {
            let key = vec![b'k', w.key];
            let version = Version {
                key: key.clone(),
                ts: ts as u64 + 1,
                value: w.value.map(|b| vec![b]),
                expiring: false,
            };
            let mut anywhere = false;
            for (n, got) in w.nodes.iter().take(nodes).enumerate() {
                if *got {
                    per_node[n].insert(key.clone(), version.clone());
                    anywhere = true;
                }
            }
            if anywhere {
                match w.value {
                    Some(b) => model.insert(key, vec![b]),
                    None => model.remove(&key),
                };
            }
        }
        (per_node, model)
    }

    /// A merge that keeps the first version it meets instead of the
    /// newest: the negative control the model test must reject.
    fn first_wins(sources: &[BTreeMap<Vec<u8>, Version>]) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut out: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for s in sources {
            for (k, v) in s {
                out.entry(k.clone()).or_insert_with(|| v.value.clone());
            }
        }
        out.into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }

    fn merged(sources: &[BTreeMap<Vec<u8>, Version>]) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let sources: Vec<Src> = sources
            .iter()
            .map(|m| src(m.values().cloned().collect()))
            .collect();
        let mut merge = Merge::new(sources);
        let mut out = BTreeMap::new();
        let mut last: Option<Vec<u8>> = None;
        while let Some(live) = merge.next_live().unwrap() {
            assert!(last.as_ref().is_none_or(|l| *l < live.key), "key order");
            last = Some(live.key.clone());
            assert!(out.insert(live.key, live.value).is_none(), "each key once");
        }
        out
    }

    proptest! {
        #[test]
        fn merge_matches_the_model(nodes in 1usize..6, ws in writes(5)) {
            let (per_node, model) = build(nodes, &ws);
            prop_assert_eq!(merged(&per_node), model);
        }

        #[test]
        fn pages_resume_after_the_cursor(ws in writes(3), page in 1usize..7) {
            let (per_node, model) = build(3, &ws);
            let mut out = BTreeMap::new();
            let mut start: Vec<u8> = Vec::new();
            for _ in 0..=model.len() {
                let sources: Vec<Src> = per_node
                    .iter()
                    .map(|m| src(m.range(start.clone()..).map(|(_, v)| v.clone()).collect()))
                    .collect();
                let got = Merge::new(sources).next_page(page).unwrap();
                for live in &got {
                    out.insert(live.key.clone(), live.value.clone());
                }
                match got.last() {
                    Some(last) if got.len() == page => start = key_after(&last.key),
                    _ => break,
                }
            }
            prop_assert_eq!(out, model);
        }
    }

    /// The negative control: the model test, run on a merge that keeps the
    /// first version rather than the newest, finds a difference.
    #[test]
    fn first_wins_merge_fails_the_model() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let result = runner.run(&writes(3), |ws| {
            let (per_node, model) = build(3, &ws);
            prop_assert_eq!(first_wins(&per_node), model);
            Ok(())
        });
        assert!(
            result.is_err(),
            "the planted first-wins merge passed the model"
        );
    }
}
