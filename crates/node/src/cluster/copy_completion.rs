//! Whether a node's copy for a layout transition is complete: values in,
//! a decision out.
//!
//! Pure: the copier (`antientropy/transfer/copy.rs`, wired in the
//! node's `TransferCopier`) reports, source by source, whether it finished;
//! the caller adds whether the new version removes the source and whether
//! the operator declared it dead (`super::history::History::declared_dead`),
//! and asks [`decide`]. The simulation asks the same rule.
//!
//! # Rules
//! - **Finished.** A source the copy finished (now or before a restart)
//!   holds nothing more this node needs: it counts for completion, unless
//!   the rule "Leaving not acked" holds it.
//! - **Member pending.** A pending source the new version keeps is always
//!   waited for. It answers again, or the operator removes it in a later
//!   change (a node cannot be declared dead while it is a member).
//! - **Leaving pending.** A pending source the new version removes is
//!   waited for too, unless declared dead. Sound: a write acknowledged by
//!   `ack` old replicas may be on removed nodes only (every old replica of
//!   its key leaves, or `ack = 1`): a partitioned or slow leaving node may
//!   hold its only copy, and the cleanup after the transition deletes it.
//!   So a leaving node holds the transition (its copy never completes, the
//!   node never raises `sync`) until it answers.
//! - **Leaving not acked.** A source the new version removes, not declared
//!   dead, counts only if its `ack` for the new version `v` was known
//!   (`>= v`) before the pass against it started; otherwise it is waited
//!   for, finished or not, and read (again) once its `ack` is known.
//!   Why: `copy_may_start` counts only the nodes the new version keeps
//!   (`super::history::History::counted_nodes`), so a leaving node cut
//!   off when `v` was committed may still coordinate writes on the old
//!   version alone while the copy runs. Such a write lands only on nodes
//!   that do not fence it (every staying node acked `v`, so it refuses a
//!   coordinator on an older version): the coordinator itself (a local
//!   write; enough with `ack = 1`) and leaving nodes that have not learned
//!   `v`. Each of them got it before its own fence went up, so before its
//!   `ack >= v`; and the coordinator acknowledged it before its own
//!   `ack >= v` (the rule "Ack" of `super::transition_rules`). A pass
//!   against such a node that starts after its `ack` is known therefore
//!   finds it. A pass started earlier may have missed it, hence the
//!   re-read.
//! - **Declared dead.** A pending source the new version removes and the
//!   operator declared dead is skipped, acked or not. Residual
//!   assumption: the operator's word that its data is gone (a disk lost,
//!   a machine retired); a write only it held is lost by that choice,
//!   which the node logs with the source's URL.
//! - **Complete** once no source is waited for.
//!
//! What a transition waits for, as `GET /v0/layout` says it
//! ([`waiting_for`]): this node's own copy waits (above), then every
//! counted member whose trackers are behind the new version `v`: `ack`
//! below `v` ("not writing to the new version yet"), else `sync` below
//! `v` ("copying"), else `sync_ack` below `v` ("has not seen every node
//! synced").
//!
//! The old rules, kept as planted bugs: [`Mode::PlantedSkipsLeaving`]
//! (`--debug-planted-bug copy-skips-partitioned-leaving-node`): every
//! pending source the new version removes is skipped, declared or not;
//! [`Mode::PlantedIgnoresLeavingAck`] (the simulation's
//! `copy-ignores-leaving-ack`): a leaving source's pass counts whether or
//! not its `ack` was known.

use super::history::{History, Tracker};

/// Where the copy stands with one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    /// Its URL.
    pub url: &'a str,
    /// The copy finished with it (this time or recorded before).
    pub finished: bool,
    /// The new version removes it (it is a member of the old one only).
    pub leaving: bool,
    /// The operator declared it dead for this transition.
    pub declared_dead: bool,
    /// Its `ack` for the new version was known (`>= v`) before the pass
    /// against it started (the rule "Leaving not acked"; read only for a
    /// leaving source).
    pub acked: bool,
}

/// Which rule decides (the sound one, or a planted mistake for the tests'
/// negative controls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// The rules of the module header.
    #[default]
    Sound,
    /// The old rule: pending leaving sources are skipped, declared dead or
    /// not (a partitioned leaving node loses what only it held).
    PlantedSkipsLeaving,
    /// The rules before "Leaving not acked": a leaving source's pass
    /// counts whether or not its `ack` was known (a leaving node still on
    /// the old version may acknowledge a write after its copy was read).
    PlantedIgnoresLeavingAck,
}

/// Why the copy waits for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// A source the new version keeps did not answer (or its session failed).
    SourceNotAnswering,
    /// A source the new version removes did not answer, and it is not
    /// declared dead.
    LeavingSourceNotAnswering,
    /// A source the new version removes, not declared dead, whose `ack`
    /// for the new version is not known yet (it may still acknowledge
    /// writes on the old version alone).
    LeavingSourceNotAcked,
}

impl WaitReason {
    /// The reason as `GET /v0/layout`'s `waiting_for` says it.
    pub fn text(self) -> &'static str {
        match self {
            WaitReason::SourceNotAnswering => "copy source not answering",
            WaitReason::LeavingSourceNotAnswering => {
                "leaving copy source not answering (it may hold the only copy of a write; declare it dead if its data is lost)"
            }
            WaitReason::LeavingSourceNotAcked => {
                "leaving copy source has not acked the new version yet (it may still acknowledge writes on the old one; read once it has)"
            }
        }
    }
}

/// A node the copy waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Its URL.
    pub node: String,
    /// Why.
    pub reason: WaitReason,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Complete; `skipped` are the pending sources left out (declared
    /// dead, or with the planted rule, leaving), to be logged.
    Complete {
        /// Their URLs, in the sources' order.
        skipped: Vec<String>,
    },
    /// Not complete: these nodes are waited for, in the sources' order.
    Waiting(Vec<Wait>),
}

/// Decides whether a copy with `sources` is complete, by `mode`'s rules.
pub fn decide(sources: &[Source<'_>], mode: Mode) -> Completion {
    let mut skipped = Vec::new();
    let mut waits = Vec::new();
    for s in sources {
        let held = match mode {
            Mode::Sound => s.leaving && !s.declared_dead && !s.acked,
            Mode::PlantedSkipsLeaving | Mode::PlantedIgnoresLeavingAck => false,
        };
        let reason = if held {
            WaitReason::LeavingSourceNotAcked
        } else if s.finished {
            continue;
        } else if match mode {
            Mode::Sound | Mode::PlantedIgnoresLeavingAck => s.leaving && s.declared_dead,
            Mode::PlantedSkipsLeaving => s.leaving,
        } {
            skipped.push(s.url.to_owned());
            continue;
        } else if s.leaving {
            WaitReason::LeavingSourceNotAnswering
        } else {
            WaitReason::SourceNotAnswering
        };
        waits.push(Wait {
            node: s.url.to_owned(),
            reason,
        });
    }
    match waits.is_empty() {
        true => Completion::Complete { skipped },
        false => Completion::Waiting(waits),
    }
}

/// What the transition under `history` waits for, as node `me` knows
/// it: `own` (its copy's waits) first, then the members behind (the
/// module header). Empty when settled.
pub fn waiting_for(history: &History, own: &[Wait]) -> Vec<(String, &'static str)> {
    if !history.in_transition() {
        return Vec::new();
    }
    let v = history.current().version;
    let t = history.trackers();
    let mut out: Vec<(String, &'static str)> = own
        .iter()
        .map(|w| (w.node.clone(), w.reason.text()))
        .collect();
    for node in history.counted_nodes() {
        let why = if t.get(Tracker::Ack, &node) < v {
            "not writing to the new version yet (ack)"
        } else if t.get(Tracker::Sync, &node) < v {
            "copying (sync)"
        } else if t.get(Tracker::SyncAck, &node) < v {
            "has not seen every node synced (sync_ack)"
        } else {
            continue;
        };
        out.push((node, why));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(url: &str, finished: bool, leaving: bool, declared_dead: bool) -> Source<'_> {
        Source {
            url,
            finished,
            leaving,
            declared_dead,
            acked: true,
        }
    }

    /// A source whose `ack` was not known before its pass.
    fn unacked(url: &str, finished: bool, leaving: bool, declared_dead: bool) -> Source<'_> {
        Source {
            acked: false,
            ..src(url, finished, leaving, declared_dead)
        }
    }

    fn complete(skipped: &[&str]) -> Completion {
        Completion::Complete {
            skipped: skipped.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn waiting(waits: &[(&str, WaitReason)]) -> Completion {
        Completion::Waiting(
            waits
                .iter()
                .map(|(n, r)| Wait {
                    node: (*n).to_owned(),
                    reason: *r,
                })
                .collect(),
        )
    }

    /// Rule "Complete": no source at all, or every one finished (staying
    /// or leaving, declared or not), is complete with nothing skipped.
    #[test]
    fn every_source_finished_is_complete() {
        assert_eq!(decide(&[], Mode::Sound), complete(&[]));
        let all = [
            src("a", true, false, false),
            src("b", true, true, false),
            src("c", true, true, true),
        ];
        assert_eq!(decide(&all, Mode::Sound), complete(&[]));
    }

    /// Rule "Member pending": a staying source that did not answer is
    /// waited for, even if (wrongly) marked declared dead.
    #[test]
    fn pending_member_is_waited_for() {
        for dead in [false, true] {
            let s = [src("a", true, false, false), src("b", false, false, dead)];
            assert_eq!(
                decide(&s, Mode::Sound),
                waiting(&[("b", WaitReason::SourceNotAnswering)]),
                "declared dead: {dead}"
            );
        }
    }

    /// Rule "Leaving pending": a leaving source that did not answer holds
    /// the copy (the regression: it used to be skipped once it was the
    /// only kind pending).
    #[test]
    fn copy_skips_a_partitioned_leaving_node_regression() {
        let s = [
            src("keep", true, false, false),
            src("gone1", false, true, false),
            src("gone2", false, true, false),
        ];
        assert_eq!(
            decide(&s, Mode::Sound),
            waiting(&[
                ("gone1", WaitReason::LeavingSourceNotAnswering),
                ("gone2", WaitReason::LeavingSourceNotAnswering),
            ])
        );
    }

    /// Rule "Declared dead": a pending leaving source declared dead is
    /// skipped, and named; one declared, one not: still waiting for the
    /// other only.
    #[test]
    fn declared_dead_leaving_source_is_skipped() {
        let one = [
            src("keep", true, false, false),
            src("gone", false, true, true),
        ];
        assert_eq!(decide(&one, Mode::Sound), complete(&["gone"]));
        let two = [
            src("dead", false, true, true),
            src("slow", false, true, false),
        ];
        assert_eq!(
            decide(&two, Mode::Sound),
            waiting(&[("slow", WaitReason::LeavingSourceNotAnswering)])
        );
        // A finished source declared dead is not "skipped": it was copied.
        let copied = [src("gone", true, true, true)];
        assert_eq!(decide(&copied, Mode::Sound), complete(&[]));
    }

    /// Waits list staying and leaving sources in the sources' order, with
    /// their own reasons.
    #[test]
    fn mixed_waits_keep_order_and_reasons() {
        let s = [
            src("l", false, true, false),
            src("m", false, false, false),
            src("d", false, true, true),
        ];
        assert_eq!(
            decide(&s, Mode::Sound),
            waiting(&[
                ("l", WaitReason::LeavingSourceNotAnswering),
                ("m", WaitReason::SourceNotAnswering),
            ])
        );
        assert!(
            WaitReason::LeavingSourceNotAnswering
                .text()
                .contains("declare it dead")
        );
        assert_eq!(
            WaitReason::SourceNotAnswering.text(),
            "copy source not answering"
        );
    }

    /// `waiting_for`: nothing when settled; in a transition, this node's
    /// copy waits first, then each member by its first tracker behind.
    #[test]
    fn waiting_for_names_each_node_and_why() {
        use crate::cluster::layout::{Change, Layout};
        let urls: Vec<String> = (1..=3).map(|p| format!("http://n:{p}")).collect();
        let v1 = Layout::new(1, urls.clone(), 2).unwrap();
        let mut h = History::settled(v1.clone());
        assert!(waiting_for(&h, &[]).is_empty());
        let change = Change {
            remove: vec![urls[2].clone()],
            ..Change::default()
        };
        h.begin(v1.apply(&change).unwrap()).unwrap();
        h.raise(Tracker::Ack, &urls[0], 2);
        h.raise(Tracker::Ack, &urls[1], 2);
        h.raise(Tracker::Sync, &urls[1], 2);
        let own = [Wait {
            node: urls[2].clone(),
            reason: WaitReason::LeavingSourceNotAnswering,
        }];
        let got = waiting_for(&h, &own);
        assert_eq!(
            got,
            vec![
                (
                    urls[2].clone(),
                    WaitReason::LeavingSourceNotAnswering.text()
                ),
                (urls[0].clone(), "copying (sync)"),
                (urls[1].clone(), "has not seen every node synced (sync_ack)"),
            ]
        );
        let mut fresh = History::settled(v1.clone());
        fresh.begin(v1.apply(&change).unwrap()).unwrap();
        assert_eq!(
            waiting_for(&fresh, &[])[0],
            (urls[0].clone(), "not writing to the new version yet (ack)")
        );
    }

    /// The planted rule skips every pending leaving source, declared or
    /// not (what the negative controls must catch), and still waits for
    /// a pending member.
    #[test]
    fn planted_rule_skips_leaving_sources() {
        let s = [
            src("keep", true, false, false),
            src("gone", false, true, false),
        ];
        assert_eq!(decide(&s, Mode::PlantedSkipsLeaving), complete(&["gone"]));
        assert_ne!(
            decide(&s, Mode::Sound),
            decide(&s, Mode::PlantedSkipsLeaving)
        );
        let m = [src("m", false, false, false)];
        assert_eq!(
            decide(&m, Mode::PlantedSkipsLeaving),
            waiting(&[("m", WaitReason::SourceNotAnswering)])
        );
    }

    /// Rule "Leaving not acked": a leaving source whose `ack` was not
    /// known before its pass holds the copy, finished or not (the
    /// regression: lost writes on `--shrink` seeds 1991 and others, a
    /// leaving node on version 1 acknowledging after its copy was read);
    /// once acked it counts; a staying source's `ack` is not asked; a
    /// declared-dead one is skipped acked or not.
    #[test]
    fn leaving_source_counts_only_after_its_ack_regression() {
        for finished in [false, true] {
            let s = [
                src("keep", true, false, false),
                unacked("gone", finished, true, false),
            ];
            assert_eq!(
                decide(&s, Mode::Sound),
                waiting(&[("gone", WaitReason::LeavingSourceNotAcked)]),
                "finished: {finished}"
            );
        }
        let acked = [src("gone", true, true, false)];
        assert_eq!(decide(&acked, Mode::Sound), complete(&[]));
        let member = [unacked("keep", true, false, false)];
        assert_eq!(decide(&member, Mode::Sound), complete(&[]));
        let dead = [unacked("gone", false, true, true)];
        assert_eq!(decide(&dead, Mode::Sound), complete(&["gone"]));
        assert!(
            WaitReason::LeavingSourceNotAcked
                .text()
                .contains("not acked the new version")
        );
    }

    /// The planted rule before "Leaving not acked" counts a finished
    /// leaving source whatever its `ack`, and otherwise decides as the
    /// sound one.
    #[test]
    fn planted_rule_ignores_leaving_ack() {
        let s = [unacked("gone", true, true, false)];
        assert_eq!(decide(&s, Mode::PlantedIgnoresLeavingAck), complete(&[]));
        assert_ne!(
            decide(&s, Mode::Sound),
            decide(&s, Mode::PlantedIgnoresLeavingAck)
        );
        let p = [unacked("gone", false, true, false)];
        assert_eq!(
            decide(&p, Mode::PlantedIgnoresLeavingAck),
            waiting(&[("gone", WaitReason::LeavingSourceNotAnswering)])
        );
    }
}
