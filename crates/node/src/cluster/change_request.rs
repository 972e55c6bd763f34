//! `POST /v0/layout?version=N[&add=URL]…[&remove=URL]…[&replication_factor=R][&dead=URL]…`
//! from its parameters to its answer, run on a thread of its own (it
//! blocks on the voters): admission (`super::admission`) against the
//! node's committed layouts, what each added node says it is
//! (`super::added_identity`), then the agreement (`super::propose`).
//!
//! # Dead declarations (`dead=URL`)
//! The operator's word that a node's data is lost, so the transition's
//! copies skip it (`super::copy_completion`); without it a leaving node
//! that does not answer holds the transition.
//! - With a change: every `dead` URL must be one the change removes
//!   (400 otherwise); once the change is chosen (or continues the plan
//!   under way) the URLs are declared dead for version `N`.
//! - Alone (`version=N&dead=URL…`): `N` must be the transition under way
//!   (409 otherwise) and every URL a node it removes (400 otherwise);
//!   answered 200 with the layout once the declaration is stored.
//!
//! A declaration is no agreement round: it only grows (no two can
//! conflict), it is stored by this node before the answer, and it spreads
//! with the layout gossip like the trackers (`super::history`).
//!
//! # Answers (docs/API.md, "Layout")
//! - 200 with the new layout once a majority accepted it (or when the
//!   request repeats the plan already chosen).
//! - 409 with the node's newest committed layout: `N` is not current + 1,
//!   a chosen next version is pending, another proposal won the slot, or
//!   a voter had decided the slot already.
//! - 400: a parameter is malformed, the change cannot apply (`R` the
//!   nodes cannot hold, a URL removed that is not a member, one added that
//!   is), or an added node does not answer or is not a node waiting to
//!   join this cluster under exactly that URL (`super::added_identity`).
//! - 503: no majority answered, or every attempt was pre-empted.
//!
//! The chosen version is learned by the node (`super::learn`): stored as
//! its next layout and begun in its live history.

use super::added_identity::{self, Heard, Mode as IdentityMode};
use super::admission::{Admission, admit};
use super::history::DeadError;
use super::layout::{Change, Layout};
use super::learn::learn;
use super::membership::Membership;
use super::propose::{Outcome, Voters, propose};
use std::time::Duration;

/// Parameters `add`, `remove` and `dead` a request may name, together.
pub const CHANGE_URLS_MAX: usize = 64;

/// What a change request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeAnswer {
    /// 200 with the new layout.
    Chosen(Layout),
    /// 409 with the newest committed layout, and why.
    Conflict(Layout, String),
    /// 400, and why.
    Invalid(String),
    /// 503, and why.
    Unavailable(String),
}

impl ChangeAnswer {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            ChangeAnswer::Chosen(_) => 200,
            ChangeAnswer::Conflict(..) => 409,
            ChangeAnswer::Invalid(_) => 400,
            ChangeAnswer::Unavailable(_) => 503,
        }
    }
}

/// What an added node says about itself, bounded in time by the
/// implementation; decided on by `super::added_identity`.
pub trait Reach {
    /// What the node at `url` answered on `GET /v0/status`.
    fn introduce(&self, url: &str) -> Heard;

    /// The rule that decides on it (a planted mistake only in the tests'
    /// negative controls).
    fn identity_mode(&self) -> IdentityMode {
        IdentityMode::Sound
    }
}

/// The version and change a request's parameters name, in order.
pub fn parse<'a>(
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(u64, Change), String> {
    let mut version = None;
    let mut change = Change::default();
    for (name, value) in params {
        match name {
            "version" if version.is_none() => {
                version = Some(value.parse::<u64>().map_err(|_| bad(name, value))?);
            }
            "add" => change.add.push(value.to_owned()),
            "remove" => change.remove.push(value.to_owned()),
            "dead" => change.dead.push(value.to_owned()),
            "replication_factor" if change.replication_factor.is_none() => {
                let r = value.parse::<usize>().map_err(|_| bad(name, value))?;
                change.replication_factor = Some(r);
            }
            _ => return Err(format!("unexpected parameter {name:?}")),
        }
        if change.add.len() + change.remove.len() + change.dead.len() > CHANGE_URLS_MAX {
            return Err(format!(
                "more than {CHANGE_URLS_MAX} URLs to add, remove and declare dead"
            ));
        }
    }
    let version = version.ok_or("the parameter version is required")?;
    Ok((version, change))
}

fn bad(name: &str, value: &str) -> String {
    format!("bad {name}: {value:?}")
}

/// Answers a change request as node `self_id` (its ballots' node id) of
/// `membership`: admission against its live history, what the added
/// nodes say they are, then the agreement; a chosen layout is learned here too
/// (`super::learn`), whether or not the commit to this node got through.
pub fn answer(
    membership: &Membership,
    io: &(impl Voters + Reach),
    self_id: u64,
    version: u64,
    change: &Change,
    backoff: Duration,
) -> ChangeAnswer {
    let only_dead = change.add.is_empty()
        && change.remove.is_empty()
        && change.replication_factor.is_none()
        && !change.dead.is_empty();
    if only_dead {
        return declare(membership, version, &change.dead);
    }
    if let Some(url) = change.dead.iter().find(|u| !change.remove.contains(u)) {
        return ChangeAnswer::Invalid(format!(
            "dead={url} names a node the change does not remove (declare dead only a node removed: remove={url}&dead={url})"
        ));
    }
    let (layout, voters) = match admit(&membership.history(), version, change) {
        Admission::Propose { layout, voters } => (layout, voters),
        Admission::Continues(layout) => {
            return match change.dead.is_empty() {
                true => ChangeAnswer::Chosen(layout),
                false => declare(membership, version, &change.dead),
            };
        }
        Admission::Conflict { current: _, why } => {
            return ChangeAnswer::Conflict(membership.committed(), why);
        }
        Admission::Invalid(e) => return ChangeAnswer::Invalid(e.to_string()),
    };
    // Each added node must say it waits to join this cluster under
    // exactly the URL added (`super::added_identity`): an alias of a
    // member, or a node that never learns it was added, wedges the
    // transition for good.
    for url in &change.add {
        let heard = io.introduce(url);
        if let Err(refusal) = added_identity::decide(url, &heard, &voters, io.identity_mode()) {
            return ChangeAnswer::Invalid(refusal.to_string());
        }
    }
    match propose(io, self_id, &layout, &voters, backoff) {
        Outcome::Chosen { value, own } => {
            if let Err(e) = learn(membership, value.clone()) {
                tracing::warn!(version = value.version, error = %e, "chosen layout not stored");
            }
            if own && !change.dead.is_empty() {
                declare(membership, version, &change.dead)
            } else if own {
                ChangeAnswer::Chosen(value)
            } else {
                ChangeAnswer::Conflict(
                    value,
                    format!("another change was chosen as version {version}"),
                )
            }
        }
        Outcome::Stale { version: at } => ChangeAnswer::Conflict(
            membership.committed(),
            format!("version {version} was decided already (a member is at version {at})"),
        ),
        Outcome::NoMajority => ChangeAnswer::Unavailable(format!(
            "no majority of the {} members of version {} answered",
            voters.len(),
            version - 1
        )),
        Outcome::Contended => ChangeAnswer::Unavailable(format!(
            "every attempt at version {version} was pre-empted by another proposal"
        )),
    }
}

/// Declares `dead` dead for the transition to `version` (the rules
/// above): 200 with the layout once stored, 409 when `version` is not
/// the transition under way, 400 for a URL it does not remove, 503 when
/// the declaration could not be stored.
fn declare(membership: &Membership, version: u64, dead: &[String]) -> ChangeAnswer {
    let history = membership.history();
    if let Err(e) = history.clone().declare_dead_all(dead, version) {
        return match e {
            DeadError::NotLeaving(_) => ChangeAnswer::Invalid(e.to_string()),
            DeadError::NotInTransition { .. } | DeadError::OtherVersion { .. } => {
                ChangeAnswer::Conflict(membership.committed(), e.to_string())
            }
        };
    }
    match membership.declare_dead(dead, version) {
        Ok(()) => {
            tracing::warn!(
                version,
                nodes = ?dead,
                "layout transition: declared dead by the operator; copies skip them (a write only they held is lost)"
            );
            ChangeAnswer::Chosen(membership.committed())
        }
        Err(e) => ChangeAnswer::Unavailable(e),
    }
}

#[cfg(test)]
#[path = "change_request_tests.rs"]
mod tests;
