//! What a layout change would move, before it is made (`ataman ctl layout
//! plan`): per destination, the keys and bytes this node would send.
//!
//! Each node can only count its own sends (a node gains keys that other
//! nodes hold), so each node answers its sends per gaining node, and the
//! caller sums them ([`sum`]): a node's receives are the sum of every
//! node's sends to it. A key is counted once per gaining node, by the old
//! replica whose [`Share`] it is in (its first old replica by rendezvous
//! rank): the one pass of the copy (`super::one_pass`) takes every key
//! from that source, so the sends spread over the old replicas as the
//! copy's do. The figures are what copying moves when the old replicas
//! agree; a replica that holds a newer version than the share's source
//! sends that version instead, and a source the one pass could not reach
//! leaves its share to the comparing pass (`super::pull`, in
//! [`super::scope::source_order`]), neither counted here. Tombstones move
//! and are counted (their key bytes).

use super::moved_bytes;
#[cfg(doc)]
use super::scope::Share;
use super::scope::{ScopeError, check_next};
use crate::cluster::layout::Layout;
use crate::cluster::placement;
use ataman_engine::Db;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Keys and their key and value bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Keys (tombstones included).
    pub keys: u64,
    /// Key and value bytes.
    pub bytes: u64,
}

impl Flow {
    fn add(&mut self, other: Flow) {
        self.keys += other.keys;
        self.bytes += other.bytes;
    }
}

/// One node's sends, per gaining node's URL.
pub type Sends = BTreeMap<String, Flow>;

/// Counts one node's sends, key by key.
#[derive(Debug, Clone)]
pub struct Planner {
    old: Layout,
    new: Layout,
    old_seeds: Vec<u64>,
    new_seeds: Vec<u64>,
    me: Option<usize>,
    sends: Sends,
}

impl Planner {
    /// A planner for node `me` of the transition `old` → `new`.
    pub fn new(old: &Layout, new: &Layout, me: &str) -> Result<Planner, ScopeError> {
        check_next(old, new)?;
        Ok(Planner {
            old: old.clone(),
            new: new.clone(),
            old_seeds: placement::seeds(&old.nodes),
            new_seeds: placement::seeds(&new.nodes),
            me: old.nodes.iter().position(|n| n == me),
            sends: Sends::new(),
        })
    }

    /// Counts `key` (of `bytes` key and value bytes) held by this node,
    /// when this node is the key's first old replica: the source whose
    /// share holds it for every node that gains it (a gaining node is not
    /// an old replica of the key, so it never shifts the first).
    pub fn add(&mut self, key: &[u8], bytes: u64) {
        let Some(me) = self.me else { return };
        let old = placement::rank_with_seeds(&self.old_seeds, key, self.old.replication_factor);
        if old.first() != Some(&me) {
            return;
        }
        for g in placement::rank_with_seeds(&self.new_seeds, key, self.new.replication_factor) {
            let url = &self.new.nodes[g];
            if old.iter().any(|&i| self.old.nodes[i] == *url) {
                continue;
            }
            self.sends
                .entry(url.clone())
                .or_default()
                .add(Flow { keys: 1, bytes });
        }
    }

    /// The sends counted so far.
    pub fn sends(&self) -> &Sends {
        &self.sends
    }
}

/// Node `me`'s sends for `items` (its keys and their key and value bytes).
pub fn tally(
    old: &Layout,
    new: &Layout,
    me: &str,
    items: impl IntoIterator<Item = (Vec<u8>, u64)>,
) -> Result<Sends, ScopeError> {
    let mut planner = Planner::new(old, new, me)?;
    for (key, bytes) in items {
        planner.add(&key, bytes);
    }
    Ok(planner.sends)
}

/// Node `me`'s sends, from one scan of its engine (tombstones included).
/// Blocking and not rate-limited: run it off the network threads.
pub fn scan_sends(db: &Db, old: &Layout, new: &Layout, me: &str) -> Result<Sends, String> {
    let mut planner = Planner::new(old, new, me).map_err(|e| e.to_string())?;
    let scan = db
        .scan_without_filling(b"", None, true)
        .map_err(|e| format!("scan failed: {e}"))?;
    for item in scan {
        let (key, entry) = item.map_err(|e| format!("scan failed: {e}"))?;
        planner.add(&key, moved_bytes(&key, entry.value.as_deref()));
    }
    Ok(planner.sends)
}

/// One node's figures in a summed plan.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NodePlan {
    /// What it sends, to every gaining node.
    pub sends: Flow,
    /// What it receives, from every node.
    pub receives: Flow,
}

/// Every node's sends summed into sends and receives per node.
pub fn sum<'a>(
    answers: impl IntoIterator<Item = (&'a str, &'a Sends)>,
) -> BTreeMap<String, NodePlan> {
    let mut plan: BTreeMap<String, NodePlan> = BTreeMap::new();
    for (from, sends) in answers {
        for (to, flow) in sends {
            plan.entry(from.to_owned()).or_default().sends.add(*flow);
            plan.entry(to.clone()).or_default().receives.add(*flow);
        }
    }
    plan
}

/// `{"version":N,"sends":{"URL":{"keys":K,"bytes":B},…}}`: one node's
/// answer to `GET /v0/layout/plan` (`version`: the planned layout's).
pub fn render_json(version: u64, sends: &Sends) -> String {
    let mut out = format!("{{\"version\":{version},\"sends\":{{");
    for (i, (url, flow)) in sends.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        out.push_str(comma);
        crate::http::json::json_string(&mut out, url);
        let _ = write!(out, ":{{\"keys\":{},\"bytes\":{}}}", flow.keys, flow.bytes);
    }
    out.push_str("}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::antientropy::transfer::scope::{Share, TransitionScope, source_order};
    use crate::cluster::layout::Change;

    fn urls(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("http://127.0.0.1:{i}")).collect()
    }

    /// Every node holding every key it is an old replica of: the summed
    /// plan counts each gained key once per gaining node, by the source
    /// whose share holds it, and matches a direct count from the scopes.
    #[test]
    fn summed_sends_count_each_gained_key_once() {
        let a = Layout::bootstrap(&urls(3), Some(2)).unwrap();
        for change in [
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                ..Change::default()
            },
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                remove: vec!["http://127.0.0.1:2".into()],
                ..Change::default()
            },
        ] {
            let b = a.apply(&change).unwrap();
            let keys: Vec<Vec<u8>> = (0..2000).map(|k| format!("k{k}").into_bytes()).collect();
            let mut answers = Vec::new();
            for me in &a.nodes {
                let held = keys
                    .iter()
                    .filter(|k| a.replicas(k).contains(&me.as_str()))
                    .map(|k| (k.clone(), 10));
                answers.push((me.clone(), tally(&a, &b, me, held).unwrap()));
            }
            let plan = sum(answers.iter().map(|(u, s)| (u.as_str(), s)));
            for g in &b.nodes {
                // Gained keys: covered by some source's scope.
                let gained = keys
                    .iter()
                    .filter(|k| {
                        source_order(&a, &b, g).iter().any(|s| {
                            TransitionScope::new(&a, &b, g, s).is_ok_and(|sc| sc.covers(k))
                        })
                    })
                    .count() as u64;
                let got = plan.get(g).map_or(0, |p| p.receives.keys);
                assert_eq!(got, gained, "{change:?} {g}");
                assert_eq!(plan.get(g).map_or(0, |p| p.receives.bytes), 10 * gained);
            }
            let sent: u64 = plan.values().map(|p| p.sends.keys).sum();
            let received: u64 = plan.values().map(|p| p.receives.keys).sum();
            assert_eq!(sent, received);
            assert!(sent > 0);
        }
    }

    /// The plan shows what the copy's one pass does: each source's sends
    /// to each gaining node are the keys of its share of that node's copy,
    /// so a grow, a shrink and a replace each draw from several sources
    /// (regression: the plan once credited every key to the source asked
    /// first in the comparing pass, one node sending everything).
    #[test]
    fn plan_matches_the_copy_shares() {
        let a = Layout::bootstrap(&urls(4), Some(3)).unwrap();
        let changes = [
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                ..Change::default()
            },
            Change {
                remove: vec!["http://127.0.0.1:4".into()],
                ..Change::default()
            },
            Change {
                add: vec!["http://127.0.0.1:9".into()],
                remove: vec!["http://127.0.0.1:2".into()],
                ..Change::default()
            },
        ];
        for change in changes {
            let b = a.apply(&change).unwrap();
            let keys: Vec<Vec<u8>> = (0..3000).map(|k| format!("k{k}").into_bytes()).collect();
            for source in &a.nodes {
                let held = keys
                    .iter()
                    .filter(|k| a.replicas(k).contains(&source.as_str()))
                    .map(|k| (k.clone(), 1));
                let sends = tally(&a, &b, source, held).unwrap();
                for g in &b.nodes {
                    let share = Share::new(&a, &b, g, source);
                    let in_share = share.map_or(0, |share| {
                        keys.iter().filter(|k| share.covers(k)).count() as u64
                    });
                    let planned = sends.get(g).map_or(0, |f| f.keys);
                    assert_eq!(planned, in_share, "{change:?}: {source} to {g}");
                }
            }
            let answers: Vec<(&str, Sends)> = a
                .nodes
                .iter()
                .map(|u| {
                    let held = keys
                        .iter()
                        .filter(|k| a.replicas(k).contains(&u.as_str()))
                        .map(|k| (k.clone(), 1));
                    (u.as_str(), tally(&a, &b, u, held).unwrap())
                })
                .collect();
            let plan = sum(answers.iter().map(|(u, s)| (*u, s)));
            let senders = plan.values().filter(|p| p.sends.keys > 0).count();
            assert!(senders >= 2, "{change:?}: one sender only: {plan:?}");
        }
    }

    /// The JSON answer names each destination with its keys and bytes.
    #[test]
    fn json_answer() {
        let mut sends = Sends::new();
        sends.insert("http://a:1".into(), Flow { keys: 2, bytes: 30 });
        assert_eq!(
            render_json(4, &sends),
            r#"{"version":4,"sends":{"http://a:1":{"keys":2,"bytes":30}}}"#
        );
        assert_eq!(render_json(4, &Sends::new()), r#"{"version":4,"sends":{}}"#);
    }
}
