//! Which keys a transition session covers: the keys node `G` gains going
//! from layout `A` to layout `B` that old member `S` holds a replica of,
//!
//! ```text
//! G ∈ B.replicas(key)  &&  G ∉ A.replicas(key)  &&  S ∈ A.replicas(key)
//! ```
//!
//! (`cluster::history::History::gains` and `sources`). Both sides of a
//! session compute it from the same two layouts, which the initiator `G`
//! sends in its `Transition` frame, so their trees cover the same keys.
//! The order in which `G` asks its sources ([`source_order`]) is also
//! pure: the plan (`super::plan`) counts a key for the first of its old
//! replicas in that order.

use crate::cluster::layout::Layout;
use crate::cluster::placement;

/// Why two layouts and two nodes make no transition scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The new layout is not the old one's next version.
    #[error("layout version {new} does not follow version {old}")]
    NotNext {
        /// The old layout's version.
        old: u64,
        /// The new layout's version.
        new: u64,
    },
    /// The gaining node is not a member of the new layout.
    #[error("{0} is not a member of the new layout")]
    NotGaining(String),
    /// The source is not a member of the old layout.
    #[error("{0} is not a member of the old layout")]
    NotSource(String),
    /// The source and the gaining node are the same node.
    #[error("{0} cannot copy from itself")]
    Itself(String),
}

/// The keys `gaining` copies from `source` in the transition `old` → `new`.
#[derive(Debug, Clone)]
pub struct TransitionScope {
    old_seeds: Vec<u64>,
    old_replicas: usize,
    new_seeds: Vec<u64>,
    new_replicas: usize,
    /// The gaining node's index in `new`.
    gaining_new: usize,
    /// The gaining node's index in `old`, when it was a member.
    gaining_old: Option<usize>,
    /// The source's index in `old`.
    source: usize,
}

/// Checks that `new` is the version after `old`.
pub fn check_next(old: &Layout, new: &Layout) -> Result<(), ScopeError> {
    if old.version.checked_add(1) != Some(new.version) {
        return Err(ScopeError::NotNext {
            old: old.version,
            new: new.version,
        });
    }
    Ok(())
}

impl TransitionScope {
    /// The scope of `gaining` (a member of `new`) copying from `source` (a
    /// member of `old`), `new` being `old`'s next version.
    pub fn new(
        old: &Layout,
        new: &Layout,
        gaining: &str,
        source: &str,
    ) -> Result<TransitionScope, ScopeError> {
        check_next(old, new)?;
        if gaining == source {
            return Err(ScopeError::Itself(gaining.to_owned()));
        }
        let gaining_new =
            position(new, gaining).ok_or_else(|| ScopeError::NotGaining(gaining.to_owned()))?;
        let source =
            position(old, source).ok_or_else(|| ScopeError::NotSource(source.to_owned()))?;
        Ok(TransitionScope {
            old_seeds: placement::seeds(&old.nodes),
            old_replicas: old.replication_factor,
            new_seeds: placement::seeds(&new.nodes),
            new_replicas: new.replication_factor,
            gaining_new,
            gaining_old: position(old, gaining),
            source,
        })
    }

    /// True when the gaining node gains `key` and the source held a replica of it.
    pub fn covers(&self, key: &[u8]) -> bool {
        let new = placement::rank_with_seeds(&self.new_seeds, key, self.new_replicas);
        if !new.contains(&self.gaining_new) {
            return false;
        }
        let old = placement::rank_with_seeds(&self.old_seeds, key, self.old_replicas);
        old.contains(&self.source) && self.gaining_old.is_none_or(|g| !old.contains(&g))
    }
}

/// Sample keys behind [`Share::estimate`].
pub const ESTIMATE_SAMPLE_KEYS: u64 = 65_536;

/// The source's share of a bulk copy: the keys of its scope whose first
/// old replica (the highest rendezvous rank, the gaining node left out)
/// it is. The shares of a gaining node's sources are disjoint and
/// together cover every key it gains, so a bulk pass over every source at
/// once moves each key once; the ranks spread the keys over the sources.
#[derive(Debug, Clone)]
pub struct Share {
    scope: TransitionScope,
}

impl Share {
    /// The share of `source` in `gaining`'s copy going from `old` to `new`.
    pub fn new(
        old: &Layout,
        new: &Layout,
        gaining: &str,
        source: &str,
    ) -> Result<Share, ScopeError> {
        let scope = TransitionScope::new(old, new, gaining, source)?;
        Ok(Share { scope })
    }

    /// The keys of the source's whole scope (its share and the keys other
    /// old replicas rank before it for).
    pub fn scope(&self) -> &TransitionScope {
        &self.scope
    }

    /// The share's keys and bytes among a source store of `entries` keys
    /// and `bytes` bytes, estimated without a scan: the fraction of
    /// [`ESTIMATE_SAMPLE_KEYS`] sample keys held by the source in the old
    /// layout that the share covers (placement hashes keys uniformly, so a
    /// sample stands for any key set). For progress figures only.
    pub fn estimate(&self, entries: u64, bytes: u64) -> (u64, u64) {
        let sc = &self.scope;
        let (mut held, mut covered) = (0u64, 0u64);
        for i in 0..ESTIMATE_SAMPLE_KEYS {
            let key = format!("{i:016x}").into_bytes();
            let old = placement::rank_with_seeds(&sc.old_seeds, &key, sc.old_replicas);
            if !old.contains(&sc.source) {
                continue;
            }
            held += 1;
            covered += u64::from(self.covers(&key));
        }
        let part = |n: u64| match held {
            0 => 0,
            _ => (u128::from(n) * u128::from(covered) / u128::from(held)) as u64,
        };
        (part(entries), part(bytes))
    }

    /// True when the gaining node gains `key` and the source is its first
    /// old replica.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.classify(key) == Some(true)
    }

    /// `Some(true)` for a key of the share, `Some(false)` for a key of
    /// the rest of the source's scope, `None` outside the scope.
    pub fn classify(&self, key: &[u8]) -> Option<bool> {
        let sc = &self.scope;
        let new = placement::rank_with_seeds(&sc.new_seeds, key, sc.new_replicas);
        if !new.contains(&sc.gaining_new) {
            return None;
        }
        let old = placement::rank_with_seeds(&sc.old_seeds, key, sc.old_replicas);
        if sc.gaining_old.is_some_and(|g| old.contains(&g)) || !old.contains(&sc.source) {
            return None;
        }
        Some(old.first() == Some(&sc.source))
    }
}

fn position(layout: &Layout, url: &str) -> Option<usize> {
    layout.nodes.iter().position(|n| n == url)
}

/// False when `node` gains no key at all going from `old` to `new`, known
/// from the layouts alone: a node leaving gains nothing, and a node kept
/// while nodes are only added and `R` does not grow only loses keys
/// (rendezvous hashing: more competitors, no more places). True when it
/// may gain some (a new node, a removal, a larger `R`). Saves the old
/// members of a grow a full scan per source.
pub fn may_gain(old: &Layout, new: &Layout, node: &str) -> bool {
    if !new.is_member(node) {
        return false;
    }
    if !old.is_member(node) {
        return true;
    }
    new.replication_factor > old.replication_factor || old.nodes.iter().any(|n| !new.is_member(n))
}

/// The old members `gaining` copies from, in the order it asks them: the
/// members that leave first (they give up every key they hold), then the
/// others, each group in URL order; `gaining` itself is left out.
pub fn source_order<'a>(old: &'a Layout, new: &Layout, gaining: &str) -> Vec<&'a str> {
    let others = old.nodes.iter().filter(|n| *n != gaining);
    let leaving = others.clone().filter(|n| !new.is_member(n));
    let staying = others.filter(|n| new.is_member(n));
    leaving.chain(staying).map(String::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::history::History;
    use crate::cluster::layout::Change;

    fn urls(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("http://127.0.0.1:{i}")).collect()
    }

    /// A grow, a shrink, a replace, and `R` raised to `r`.
    fn changes(r: usize) -> [Change; 4] {
        [
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                ..Change::default()
            },
            Change {
                remove: vec!["http://127.0.0.1:2".into()],
                ..Change::default()
            },
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                remove: vec!["http://127.0.0.1:3".into()],
                ..Change::default()
            },
            Change {
                replication_factor: Some(r),
                ..Change::default()
            },
        ]
    }

    /// Grow, shrink, replace and a change of `R`: `covers` is exactly
    /// "`G` gains the key (history) and `S` is one of its sources".
    #[test]
    fn covers_is_gains_and_sources() {
        let a = Layout::bootstrap(&urls(4), Some(2)).unwrap();
        for change in &changes(3) {
            let b = a.apply(change).unwrap();
            let mut h = History::settled(a.clone());
            assert!(h.begin(b.clone()).unwrap());
            let mut covered = 0;
            for g in &b.nodes {
                for s in a.nodes.iter().filter(|s| *s != g) {
                    let scope = TransitionScope::new(&a, &b, g, s).unwrap();
                    for k in 0..400 {
                        let key = format!("k{k}");
                        let key = key.as_bytes();
                        let expected = h.gains(g, key) && h.sources(key).contains(&s.as_str());
                        assert_eq!(scope.covers(key), expected, "{change:?} {g} {s} {k}");
                        covered += usize::from(expected);
                    }
                }
            }
            assert!(covered > 0, "{change:?} moves nothing");
        }
    }

    /// Grow, shrink, replace, a larger `R`: a share's estimate from the
    /// source's store size is close to the exact count over a real
    /// key set (keys the source holds), within 10% and four standard
    /// deviations of the count (both are samples; a wrong formula is off
    /// by far more), and 0 of an empty store.
    #[test]
    fn a_share_estimate_is_close_to_the_count() {
        let a = Layout::bootstrap(&urls(5), Some(3)).unwrap();
        for change in changes(4) {
            let b = a.apply(&change).unwrap();
            for g in &b.nodes {
                for s in source_order(&a, &b, g) {
                    let share = Share::new(&a, &b, g, s).unwrap();
                    let old = placement::seeds(&a.nodes);
                    let source = position(&a, s).unwrap();
                    let held: Vec<Vec<u8>> = (0..20_000)
                        .map(|k| format!("key{k:08}").into_bytes())
                        .filter(|key| {
                            placement::rank_with_seeds(&old, key, a.replication_factor)
                                .contains(&source)
                        })
                        .collect();
                    let exact = held.iter().filter(|key| share.covers(key)).count() as f64;
                    let n = held.len() as u64;
                    let (entries, bytes) = share.estimate(n, n * 100);
                    let slack = exact * 0.1 + 4.0 * exact.sqrt();
                    assert!(
                        (entries as f64 - exact).abs() <= slack,
                        "{change:?} {g} {s}: estimated {entries}, counted {exact}"
                    );
                    assert_eq!(bytes / 100, entries);
                    assert_eq!(share.estimate(0, 0), (0, 0));
                }
            }
        }
    }

    /// Grow, shrink, replace, a larger `R`: every key a node gains is in
    /// exactly one of its sources' shares (its first old replica), a share
    /// is part of the source's scope (and `classify` says which part), and
    /// a new node's shares spread over every old member.
    #[test]
    fn shares_split_the_gained_keys() {
        let a = Layout::bootstrap(&urls(5), Some(3)).unwrap();
        for change in changes(4) {
            let b = a.apply(&change).unwrap();
            let mut gained = 0;
            for g in &b.nodes {
                let sources = source_order(&a, &b, g);
                let shares: Vec<(TransitionScope, Share)> = sources
                    .iter()
                    .map(|s| {
                        let scope = TransitionScope::new(&a, &b, g, s).unwrap();
                        (scope, Share::new(&a, &b, g, s).unwrap())
                    })
                    .collect();
                let mut per_source = vec![0; shares.len()];
                for k in 0..600 {
                    let key = format!("k{k}");
                    let key = key.as_bytes();
                    let in_scope = shares.iter().filter(|(sc, _)| sc.covers(key)).count();
                    for (scope, share) in &shares {
                        // classify: in the scope exactly when Some, the share when Some(true).
                        let class = share.classify(key);
                        assert_eq!(class.is_some(), scope.covers(key), "{change:?} {g} {k}");
                        assert_eq!(class == Some(true), share.covers(key));
                    }
                    let in_share: Vec<usize> = (0..shares.len())
                        .filter(|i| shares[*i].1.covers(key))
                        .collect();
                    assert_eq!(
                        in_share.len(),
                        usize::from(in_scope > 0),
                        "{change:?} {g} {k}"
                    );
                    if let Some(&i) = in_share.first() {
                        assert!(shares[i].0.covers(key));
                        gained += 1;
                        per_source[i] += 1;
                    }
                }
                if !a.is_member(g) {
                    // A new node's keys come from every old member, not one.
                    assert!(
                        per_source.iter().all(|n| *n > 0),
                        "{change:?} {per_source:?}"
                    );
                }
            }
            assert!(gained > 0, "{change:?} moves nothing");
        }
    }

    /// `may_gain` is false only for nodes that gain no key of thousands.
    #[test]
    fn may_gain_is_never_wrong_when_false() {
        let a = Layout::bootstrap(&urls(4), Some(2)).unwrap();
        let mut false_seen = 0;
        for change in [
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                ..Change::default()
            },
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                replication_factor: Some(1),
                ..Change::default()
            },
            Change {
                remove: vec!["http://127.0.0.1:2".into()],
                ..Change::default()
            },
            Change {
                replication_factor: Some(3),
                ..Change::default()
            },
        ] {
            let b = a.apply(&change).unwrap();
            let mut h = History::settled(a.clone());
            assert!(h.begin(b.clone()).unwrap());
            for g in a.nodes.iter().chain(&b.nodes) {
                let gains = (0..3000).any(|k| h.gains(g, format!("k{k}").as_bytes()));
                if !may_gain(&a, &b, g) {
                    false_seen += 1;
                    assert!(!gains, "{change:?} {g}");
                }
                if !a.is_member(g) {
                    assert!(may_gain(&a, &b, g) && gains);
                }
            }
        }
        assert!(false_seen >= 8, "{false_seen}");
    }

    /// Layouts that are not one transition, and nodes outside them, are refused.
    #[test]
    fn bad_scopes_are_refused() {
        let a = Layout::bootstrap(&urls(3), None).unwrap();
        let b = a
            .apply(&Change {
                add: vec!["http://127.0.0.1:9".into()],
                ..Change::default()
            })
            .unwrap();
        let g = "http://127.0.0.1:9";
        let s = "http://127.0.0.1:1";
        assert!(TransitionScope::new(&a, &b, g, s).is_ok());
        assert!(matches!(
            TransitionScope::new(&b, &a, g, s),
            Err(ScopeError::NotNext { .. })
        ));
        assert!(matches!(
            TransitionScope::new(&a, &b, "http://127.0.0.1:7", s),
            Err(ScopeError::NotGaining(_))
        ));
        assert!(matches!(
            TransitionScope::new(&a, &b, g, g),
            Err(ScopeError::Itself(_))
        ));
        assert!(matches!(
            TransitionScope::new(&a, &b, "http://127.0.0.1:1", "http://127.0.0.1:7"),
            Err(ScopeError::NotSource(_))
        ));
    }

    /// Leaving members come first; the gaining node is never its own source.
    #[test]
    fn sources_leaving_first() {
        let a = Layout::bootstrap(&urls(4), Some(2)).unwrap();
        let b = a
            .apply(&Change {
                add: vec!["http://127.0.0.1:9".into()],
                remove: vec!["http://127.0.0.1:3".into()],
                ..Change::default()
            })
            .unwrap();
        assert_eq!(
            source_order(&a, &b, "http://127.0.0.1:2"),
            vec![
                "http://127.0.0.1:3",
                "http://127.0.0.1:1",
                "http://127.0.0.1:4"
            ]
        );
    }
}
