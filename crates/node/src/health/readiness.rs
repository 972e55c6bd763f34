//! Whether this node is ready for client traffic (`GET /readyz`): a pure
//! rule over facts the node gathers, with the one-line reason a probe and
//! an operator read (docs/API.md, "Health").
//!
//! # Rules
//! Liveness (`GET /livez`) is no rule: a process that answers HTTP is
//! live. Nothing a restart cannot mend fails it (a peer down, a quorum
//! lost): a liveness probe that failed on those would restart healthy
//! nodes in a row (etcd's `/health` did).
//!
//! Readiness fails for the first of these that holds, in this order
//! (the order a starting node passes them):
//! 1. `replaying`: the engine is still replaying its write-ahead log;
//!    only the start-up responder answers (`super::startup`).
//! 2. `starting`: the log is replayed, the node is not serving yet
//!    (layout, hints, clock; the start-up responder answers).
//! 3. `joining`: started with `--join` and not added to the layout yet
//!    (`crate::cluster::transition_state::Standing::Joining`).
//! 4. `removed`: a member of no live layout version.
//! 5. `refilling`: `--refill` after a wipe: it serves no reads until a
//!    round with every peer completed (`crate::refill`).
//! 6. `copying`: during a transition, a member of the newest version
//!    that was not one of the old version, whose data for the newest
//!    version is not fully received yet (its `sync` tracker below the
//!    version, `crate::cluster::history`): a joining node copying.
//!    A node that was a member already and gains some keys stays ready:
//!    it serves them from the old version's replicas meanwhile, and
//!    failing it would take every member out of rotation at once.
//! 7. `restoring`: `ataman backup restore` is writing into this node and
//!    has not said it is done (`crate::backup::restoring`: until every
//!    member holds every restored version, or a lease after the
//!    restore's last batch). Every member fails it at once, on purpose:
//!    a half-restored cluster answers no client.
//!
//! Peers and quorum are not part of readiness, for the same reason as
//! liveness: a node whose peers are down still answers what it can, and
//! failing every member at once when a quorum is lost empties a load
//! balancer. The cluster's state is `super::cluster_health`'s.

use crate::cluster::history::{History, Tracker};
use crate::cluster::transition_state::Standing;

/// How far the process is in its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The engine replays its write-ahead log.
    Replaying,
    /// The log is replayed; the node is not serving yet.
    Starting,
    /// The network threads serve.
    Serving,
}

/// What readiness is decided from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// How far the start is.
    pub phase: Phase,
    /// Where the node stands in its layout.
    pub standing: Standing,
    /// `--refill` is under way.
    pub refilling: bool,
    /// The version this node, new in it, still copies its data for
    /// ([`joining_copy`]).
    pub copying_for: Option<u64>,
    /// Milliseconds since the last batch of a restore under way
    /// (`crate::backup::restoring::under_way`).
    pub restoring_since_ms: Option<u64>,
}

/// Why the node is not ready. The codes ([`NotReady::code`]) are stable:
/// a probe's log or a script may match them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    /// Rule 1.
    Replaying,
    /// Rule 2.
    Starting,
    /// Rule 3.
    Joining,
    /// Rule 4.
    Removed,
    /// Rule 5.
    Refilling,
    /// Rule 6: the version copied for.
    Copying {
        /// The newest layout version.
        version: u64,
    },
    /// Rule 7: seconds since the restore's last batch.
    Restoring {
        /// Whole seconds since the restore's last begin or batch.
        since_s: u64,
    },
}

impl NotReady {
    /// The stable code: the first word of the 503's body.
    pub fn code(self) -> &'static str {
        match self {
            NotReady::Replaying => "replaying",
            NotReady::Starting => "starting",
            NotReady::Joining => "joining",
            NotReady::Removed => "removed",
            NotReady::Refilling => "refilling",
            NotReady::Copying { .. } => "copying",
            NotReady::Restoring { .. } => "restoring",
        }
    }

    /// The 503's body: `CODE: explanation` on one line.
    pub fn line(self) -> String {
        let why = match self {
            NotReady::Replaying => "replaying the write-ahead log".to_owned(),
            NotReady::Starting => "the log is replayed; the node is not serving yet".to_owned(),
            NotReady::Joining => "started with --join and not added to the layout yet".to_owned(),
            NotReady::Removed => "a member of no live layout version".to_owned(),
            NotReady::Refilling => {
                "refilling after a wipe (--refill): no reads until a round with every peer completes"
                    .to_owned()
            }
            NotReady::Copying { version } => {
                format!("joining: copying its data for layout version {version}")
            }
            NotReady::Restoring { since_s } => format!(
                "a backup restore is writing into this node (its last batch {since_s} s ago); \
                 ready once it completes, or {} s after its last batch",
                crate::backup::restoring::RESTORE_LEASE_MS / 1_000
            ),
        };
        format!("{}: {why}", self.code())
    }
}

/// The body of a ready node's `GET /readyz`.
pub const READY_TEXT: &str = "ready";
/// The body of `GET /livez`.
pub const LIVE_TEXT: &str = "live";

/// The rule (see the module header): `Ok` when ready, else the first
/// reason that holds.
pub fn readiness(facts: &Facts) -> Result<(), NotReady> {
    match facts.phase {
        Phase::Replaying => return Err(NotReady::Replaying),
        Phase::Starting => return Err(NotReady::Starting),
        Phase::Serving => {}
    }
    match facts.standing {
        Standing::Joining => return Err(NotReady::Joining),
        Standing::Removed => return Err(NotReady::Removed),
        Standing::Member => {}
    }
    if facts.refilling {
        return Err(NotReady::Refilling);
    }
    if let Some(version) = facts.copying_for {
        return Err(NotReady::Copying { version });
    }
    match facts.restoring_since_ms {
        Some(ms) => Err(NotReady::Restoring {
            since_s: ms / 1_000,
        }),
        None => Ok(()),
    }
}

/// Rule 6's fact: the newest version, when `history` is in a transition
/// whose newest version has `self_url` as a member and the old one does
/// not, and `self_url`'s `sync` tracker is below it.
pub fn joining_copy(history: &History, self_url: &str) -> Option<u64> {
    let [old, new] = history.live() else {
        return None;
    };
    let new_here = new.is_member(self_url) && !old.is_member(self_url);
    let received = history.trackers().get(Tracker::Sync, self_url) >= new.version;
    (new_here && !received).then_some(new.version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::layout::Layout;

    const READY: Facts = Facts {
        phase: Phase::Serving,
        standing: Standing::Member,
        refilling: false,
        copying_for: None,
        restoring_since_ms: None,
    };

    /// Each fact alone fails readiness with its own reason; all clear is ready.
    #[test]
    fn each_fact_has_its_reason() {
        assert_eq!(readiness(&READY), Ok(()));
        let cases = [
            (
                Facts {
                    phase: Phase::Replaying,
                    ..READY
                },
                NotReady::Replaying,
            ),
            (
                Facts {
                    phase: Phase::Starting,
                    ..READY
                },
                NotReady::Starting,
            ),
            (
                Facts {
                    standing: Standing::Joining,
                    ..READY
                },
                NotReady::Joining,
            ),
            (
                Facts {
                    standing: Standing::Removed,
                    ..READY
                },
                NotReady::Removed,
            ),
            (
                Facts {
                    refilling: true,
                    ..READY
                },
                NotReady::Refilling,
            ),
            (
                Facts {
                    copying_for: Some(4),
                    ..READY
                },
                NotReady::Copying { version: 4 },
            ),
            (
                Facts {
                    restoring_since_ms: Some(2_500),
                    ..READY
                },
                NotReady::Restoring { since_s: 2 },
            ),
        ];
        for (facts, reason) in cases {
            assert_eq!(readiness(&facts), Err(reason), "{facts:?}");
            assert!(reason.line().starts_with(&format!("{}: ", reason.code())));
            assert!(!reason.line().contains('\n'));
        }
    }

    /// The first reason in the start's order wins when several hold.
    #[test]
    fn the_earliest_reason_wins() {
        let all = Facts {
            phase: Phase::Replaying,
            standing: Standing::Joining,
            refilling: true,
            copying_for: Some(2),
            restoring_since_ms: Some(1),
        };
        assert_eq!(readiness(&all), Err(NotReady::Replaying));
        let serving = Facts {
            phase: Phase::Serving,
            ..all
        };
        assert_eq!(readiness(&serving), Err(NotReady::Joining));
        let member = Facts {
            standing: Standing::Member,
            ..serving
        };
        assert_eq!(readiness(&member), Err(NotReady::Refilling));
        let copying = Facts {
            refilling: false,
            ..member
        };
        assert_eq!(readiness(&copying), Err(NotReady::Copying { version: 2 }));
        let restoring = Facts {
            copying_for: None,
            ..copying
        };
        assert_eq!(
            readiness(&restoring),
            Err(NotReady::Restoring { since_s: 0 })
        );
    }

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    /// A node new in the newest version copies until its `sync` reaches
    /// the version; a node of both versions, or of a settled layout, does not.
    #[test]
    fn joining_copy_only_for_a_node_new_in_the_version() {
        let v1 = Layout::new(1, vec![url(1), url(2), url(3)], 3).unwrap();
        let mut h = History::settled(v1.clone());
        assert_eq!(joining_copy(&h, &url(4)), None);
        let v2 = Layout::new(2, vec![url(1), url(2), url(3), url(4)], 3).unwrap();
        h.begin(v2).unwrap();
        assert_eq!(joining_copy(&h, &url(4)), Some(2));
        assert_eq!(
            joining_copy(&h, &url(1)),
            None,
            "a member of both stays ready"
        );
        assert_eq!(
            joining_copy(&h, &url(9)),
            None,
            "not a member of the newest"
        );
        h.raise(Tracker::Sync, &url(4), 2);
        assert_eq!(joining_copy(&h, &url(4)), None, "its data received");
    }
}
