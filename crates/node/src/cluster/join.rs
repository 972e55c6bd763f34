//! `ataman serve --join SEED_URL`: a node that is not yet a member learns
//! the cluster's layout from a member, keeps it as its `LAYOUT`, and keeps
//! up with it while it waits to be added, so that the commit that adds it
//! is its next version.
//!
//! # Rules
//! - At start the node asks the seed ([`AskSeed`]) and stores the
//!   seed's settled layout (its only live one, or the older of a
//!   transition's two) unless its own stored one is as new, or the seed's
//!   newest already names it (that one arrives as a commit, with its
//!   transition; [`choose`]). Never the newest of a transition under way:
//!   a node holding only that layout looks, to the members it gossips to,
//!   like a node that pruned the transition
//!   (`super::transition_rules::adopt_peer_prune`).
//! - While it is not a member, every [`JOIN_REFRESH`] it asks again: a
//!   newer layout that does not name it and that the seed reports settled
//!   replaces its current one (`AcceptorNode::replace_current`); the
//!   version right after its own that names it is learned as a commit it
//!   missed (`AcceptorNode::learn`, `History::begin`).
//! - The seed is asked as a peer asks (`POST /v0/internal/layout`, a
//!   read: `super::agreement_wire::Request::Read`), dialled with the
//!   node's `--tls-ca` and cluster secret, so a seed that demands either
//!   is joined like any member is reached. Its newest live layout counts
//!   as settled when it is the seed's only live one.

use super::layout::Layout;
use super::membership::Membership;
use std::sync::Arc;
use std::time::Duration;

/// How often a node waiting to be added asks its seed again.
pub const JOIN_REFRESH: Duration = Duration::from_secs(2);
/// The wait between two questions to the seed at start.
pub const SEED_RETRY: Duration = Duration::from_secs(2);
/// Questions to the seed at start before giving up.
pub const SEED_ATTEMPTS_MAX: u32 = 5;

/// A seed's layout and whether it said it was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedLayout {
    /// The layout.
    pub layout: Layout,
    /// Whether it was the seed's only live layout.
    pub settled: bool,
}

/// How a node started with `--join` asks its seed: the seed's live
/// layouts, oldest first (one, or a transition's two). The node's own
/// implementation (`layout_io::seed`) asks the seed's internal
/// layout endpoint as a peer does, with the node's TLS and cluster
/// secret.
pub trait AskSeed: Send + Sync {
    /// The live layouts of the node at `seed`, oldest first.
    fn live(&self, seed: &str) -> Result<Vec<Layout>, SeedError>;
}

/// Why the seed gave no layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeedError {
    /// No answer (down, cut, slow, undecodable): asking again may help.
    #[error("{0}")]
    Unreachable(String),
    /// The seed answered and refused (401 or 403: this node lacks the
    /// cluster's secret or a certificate it trusts): asking again with
    /// the same credentials cannot help.
    #[error("{0}")]
    Refused(String),
}

/// `--join`'s seed and how to ask it.
#[derive(Clone)]
pub struct Seed {
    /// The seed's URL.
    pub url: String,
    /// How it is asked.
    pub ask: Arc<dyn AskSeed>,
}

impl Seed {
    /// The seed's newest live layout, settled when it is its only one.
    pub fn layout(&self) -> Result<SeedLayout, SeedError> {
        seed_layout(self.ask.live(&self.url)?)
            .ok_or_else(|| SeedError::Unreachable(format!("{}: no layout", self.url)))
    }
}

/// The newest of a seed's live layouts, and whether it was the only one.
pub fn seed_layout(live: Vec<Layout>) -> Option<SeedLayout> {
    let settled = live.len() == 1;
    live.into_iter()
        .max_by_key(|l| l.version)
        .map(|layout| SeedLayout { layout, settled })
}

/// Which layout a joining node `me` starts with, given the seed's live
/// layouts (`seed`, oldest first, as [`AskSeed::live`] gives them) and its
/// stored one: the seed's settled layout (the oldest live one) when it is
/// newer than the stored one and the seed's newest does not name `me` (a
/// layout that adds `me` must not become `LAYOUT` without its transition:
/// it arrives as a commit, `LAYOUT-NEXT`); else the stored one. `Err`
/// when there is neither, or the seed gave no layout. Returns the layout
/// and whether to store it.
pub fn choose(me: &str, seed: &[Layout], stored: Option<Layout>) -> Result<(Layout, bool), String> {
    let (Some(settled), Some(newest)) = (
        seed.iter().min_by_key(|l| l.version),
        seed.iter().max_by_key(|l| l.version),
    ) else {
        return Err("the seed gave no layout".to_owned());
    };
    match stored {
        Some(own) if own.version >= settled.version || newest.is_member(me) => Ok((own, false)),
        None if newest.is_member(me) => Err(format!(
            "the seed's layout version {} already names this node ({me}), but this data directory holds no layout: remove it from the cluster and add it again",
            newest.version
        )),
        _ => Ok((settled.clone(), true)),
    }
}

/// The layout a joining node `me` starts with ([`choose`]), the seed
/// asked up to [`SEED_ATTEMPTS_MAX`] times (once when a layout is stored). Returns the layout and
/// whether it must be stored.
pub fn initial(me: &str, seed: &Seed, stored: Option<Layout>) -> Result<(Layout, bool), String> {
    let mut last = String::new();
    // With a stored layout, one question: the node starts without the
    // seed and keeps asking it while it waits (`JOIN_REFRESH`).
    let attempts = if stored.is_some() {
        1
    } else {
        SEED_ATTEMPTS_MAX
    };
    for attempt in 0..attempts {
        if attempt > 0 {
            std::thread::sleep(SEED_RETRY);
        }
        match seed.ask.live(&seed.url) {
            Ok(live) => return choose(me, &live, stored),
            Err(SeedError::Refused(e)) => {
                return Err(format!("cannot learn the cluster's layout: {e}"));
            }
            Err(SeedError::Unreachable(e)) => last = e,
        }
    }
    match stored {
        Some(own) => {
            // Normal when the whole cluster restarts at once (the seed is
            // starting too): the node runs with what it stored and learns
            // newer layouts from its peers or, not a member yet, from the
            // seed it keeps asking (which warns if that keeps failing).
            tracing::info!("cannot ask the seed, starting with the stored layout: {last}");
            Ok((own, false))
        }
        None => Err(format!("cannot learn the cluster's layout: {last}")),
    }
}

/// One refresh from the seed while not a member (the rules above);
/// returns what changed, for the log.
pub fn refresh(membership: &Membership, seed: &SeedLayout) -> Result<Option<String>, String> {
    let me = membership.self_url().to_owned();
    let l = &seed.layout;
    membership.update(|s| {
        let committed = s.acceptor.committed().version;
        if l.is_member(&me) {
            if l.version != committed + 1 {
                return (false, Ok(None));
            }
            if let Err(e) = s.acceptor.learn(l.clone()) {
                return (false, Err(e.to_string()));
            }
            let begun = s.history.begin(l.clone()).is_ok();
            let said = format!(
                "learned version {} from the seed: this node is added",
                l.version
            );
            return (begun, Ok(Some(said)));
        }
        if !seed.settled || l.version <= committed {
            return (false, Ok(None));
        }
        match s.acceptor.replace_current(l.clone()) {
            Ok(true) => {
                s.history = super::history::History::settled(l.clone());
                let said = format!(
                    "the cluster is at version {}: still waiting to be added",
                    l.version
                );
                (true, Ok(Some(said)))
            }
            Ok(false) => (false, Ok(None)),
            Err(e) => (false, Err(e.to_string())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::acceptor_node::AcceptorNode;

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    /// The newest live layout is the seed's; settled only alone.
    #[test]
    fn the_seeds_newest_live_layout() {
        let v1 = Layout::new(1, vec![url(1), url(2)], 2).unwrap();
        let v2 = Layout::new(2, vec![url(1), url(2), url(3)], 2).unwrap();
        let alone = seed_layout(vec![v1.clone()]).unwrap();
        assert_eq!((alone.layout, alone.settled), (v1.clone(), true));
        let moving = seed_layout(vec![v1, v2.clone()]).unwrap();
        assert_eq!((moving.layout, moving.settled), (v2, false));
        assert_eq!(seed_layout(Vec::new()), None);
    }

    /// The seed's settled layout is taken only when newer and while the
    /// seed's newest does not name this node; never the newest of a
    /// transition under way.
    #[test]
    fn choose_never_skips_a_transition() {
        let me = url(9);
        let v1 = Layout::new(1, vec![url(1), url(2)], 2).unwrap();
        let v2 = Layout::new(2, vec![url(1), url(2), url(3)], 2).unwrap();
        let adds_me = Layout::new(2, vec![url(1), url(2), me.clone()], 2).unwrap();
        let one = |l: &Layout| vec![l.clone()];
        assert_eq!(choose(&me, &one(&v1), None).unwrap(), (v1.clone(), true));
        assert_eq!(
            choose(&me, &one(&v2), Some(v1.clone())).unwrap(),
            (v2.clone(), true)
        );
        assert_eq!(
            choose(&me, &one(&v1), Some(v2.clone())).unwrap(),
            (v2.clone(), false)
        );
        assert_eq!(
            choose(&me, &one(&adds_me), Some(v1.clone())).unwrap(),
            (v1.clone(), false)
        );
        assert!(choose(&me, &one(&adds_me), None).is_err());
        // The seed moves from 1 to 2 (not naming this node): version 1.
        let moving = vec![v1.clone(), v2.clone()];
        assert_eq!(choose(&me, &moving, None).unwrap(), (v1.clone(), true));
        assert_eq!(
            choose(&me, &moving, Some(v1.clone())).unwrap(),
            (v1.clone(), false)
        );
        // Moving to a version that adds it: the stored one, or refused.
        let adding = vec![v1.clone(), adds_me];
        assert_eq!(choose(&me, &adding, Some(v1.clone())).unwrap(), (v1, false));
        assert!(choose(&me, &adding, None).is_err());
        assert!(choose(&me, &[], None).is_err());
    }

    /// A waiting node follows newer settled layouts that do not name it,
    /// and learns the one right after its own that adds it.
    #[test]
    fn refresh_follows_then_joins() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = Layout::new(1, vec![url(1), url(2)], 2).unwrap();
        let a = AcceptorNode::open(dir.path(), v1).unwrap();
        let m = Membership::new(url(9), a);
        let v2 = Layout::new(2, vec![url(1), url(2), url(3)], 2).unwrap();
        let unsettled = SeedLayout {
            layout: v2.clone(),
            settled: false,
        };
        assert_eq!(refresh(&m, &unsettled).unwrap(), None);
        let settled = SeedLayout {
            layout: v2.clone(),
            settled: true,
        };
        assert!(refresh(&m, &settled).unwrap().is_some());
        assert_eq!(m.committed(), v2);
        assert!(m.history().removed(&url(9)));
        let skip = Layout::new(4, vec![url(1), url(9)], 2).unwrap();
        let skip = SeedLayout {
            layout: skip,
            settled: false,
        };
        assert_eq!(refresh(&m, &skip).unwrap(), None, "not the next version");
        let v3 = Layout::new(3, vec![url(1), url(2), url(3), url(9)], 2).unwrap();
        let added = SeedLayout {
            layout: v3.clone(),
            settled: false,
        };
        assert!(refresh(&m, &added).unwrap().is_some());
        let h = m.history();
        assert!(h.in_transition() && !h.removed(&url(9)));
        assert_eq!(m.read(|s| s.acceptor.next().cloned()), Some(v3));
    }
}
