//! Cleanup after a transition: deleting the local copies of the keys this
//! node no longer replicates, once the new layout is the only live one
//! (docs/ARCHITECTURE.md, "Membership", "Cleanup").
//!
//! When to clean is `super::transition_rules`' rule; the driver
//! (`super::transition`) runs one [`Cleaner::clean`] at a time on its own
//! thread, never beside a copy. What to keep is [`KeepSet`]: every key of
//! which this node is a replica in ANY layout live when the cleanup
//! starts (the driver asks just before starting; a settled history has
//! one). The node's cleaner is an engine purge (`ataman_engine::Db::purge`):
//! it drops every version of the other keys without a tombstone, and
//! keeps whatever is written after it began.

use super::layout::Layout;
use super::placement;
use std::sync::Arc;

/// What a cleanup dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Keys whose local versions were dropped.
    pub keys: u64,
    /// Their bytes (internal keys and stored values).
    pub bytes: u64,
}

/// Says which user keys this node keeps: `Send + Sync`, for the engine.
pub type KeepFn = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// Deletes this node's copies of the keys `keep` rejects, then records
/// that the cleanup for `version` is done (durably, before returning), so
/// a restart does not run it again. Blocking; idempotent.
pub trait Cleaner: Send + Sync {
    /// Runs the cleanup for `version` to its end.
    fn clean(&self, version: u64, keep: KeepFn) -> Result<Purged, String>;
    /// The newest version whose cleanup is recorded done, if any.
    fn cleaned(&self) -> Option<u64>;
}

/// The cleaner of a build (or a test) without one: it deletes nothing
/// and records nothing; copies a node no longer replicates are kept.
pub struct KeepEverything;

impl Cleaner for KeepEverything {
    fn clean(&self, _version: u64, _keep: KeepFn) -> Result<Purged, String> {
        Ok(Purged::default())
    }

    fn cleaned(&self) -> Option<u64> {
        None
    }
}

/// The keys `node` replicates in any of `live`, as a predicate that
/// hashes each key once per layout (the definition is
/// `super::transition_rules::keeps`; a test holds them equal).
#[derive(Debug, Clone)]
pub struct KeepSet {
    /// Per live layout that has `node` as a member: the seeds, `R`, and
    /// the node's index.
    layouts: Vec<(Vec<u64>, usize, usize)>,
}

impl KeepSet {
    /// The keys `node` replicates in any of `live` (none when it is a
    /// member of none: a removed node keeps nothing).
    pub fn new(live: &[Layout], node: &str) -> Self {
        let layouts = live
            .iter()
            .filter_map(|l| {
                let me = l.nodes.iter().position(|n| n == node)?;
                Some((placement::seeds(&l.nodes), l.replication_factor, me))
            })
            .collect();
        KeepSet { layouts }
    }

    /// True when the node replicates `key` in one of the layouts.
    pub fn keeps(&self, key: &[u8]) -> bool {
        self.layouts
            .iter()
            .any(|(seeds, r, me)| placement::rank_with_seeds(seeds, key, *r).contains(me))
    }

    /// The predicate, for a cleaner.
    pub fn into_fn(self) -> KeepFn {
        Arc::new(move |key: &[u8]| self.keeps(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::transition_rules::keeps;

    fn layout(version: u64, ports: &[u16], r: usize) -> Layout {
        let nodes = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        Layout::new(version, nodes, r).unwrap()
    }

    /// The fast predicate agrees with the rule's definition, for members,
    /// a node in one of two live layouts, and a removed node.
    #[test]
    fn keep_set_is_the_rule() {
        let old = layout(4, &[1, 2, 3], 2);
        let new = layout(5, &[1, 3, 4, 5], 3);
        let lives = [vec![new.clone()], vec![old.clone(), new.clone()]];
        for live in &lives {
            for p in [1u16, 2, 4, 9] {
                let me = format!("http://127.0.0.1:{p}");
                let set = KeepSet::new(live, &me);
                let mut kept = 0;
                for k in 0..500u32 {
                    let key = format!("key-{k}");
                    let want = keeps(live, &me, key.as_bytes());
                    assert_eq!(set.keeps(key.as_bytes()), want, "{me} {key} {live:?}");
                    kept += usize::from(want);
                }
                if p == 9 || (p == 2 && live.len() == 1) {
                    assert_eq!(kept, 0, "{me} is a member of no live layout");
                } else {
                    assert!(kept > 0 && kept < 500, "{me}: {kept}");
                }
            }
        }
    }
}
