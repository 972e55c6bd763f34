//! `POST /v0/layout?version=N[&add=URL]…[&remove=URL]…[&replication_factor=R]`
//! from its parameters to its answer, run on a thread of its own (it
//! blocks on the voters): admission (`super::admission`) against the
//! node's committed layouts, the added nodes' reachability, then the
//! agreement (`super::propose`).
//!
//! # Answers (docs/API.md, "Layout")
//! - 200 with the new layout once a majority accepted it (or when the
//!   request repeats the plan already chosen).
//! - 409 with the node's newest committed layout: `N` is not current + 1,
//!   a chosen next version is pending, another proposal won the slot, or
//!   a voter had decided the slot already.
//! - 400: a parameter is malformed, the change cannot apply (`R` the
//!   nodes cannot hold, a URL removed that is not a member, one added that
//!   is), or an added node does not answer.
//! - 503: no majority answered, or every attempt was pre-empted.
//!
//! The chosen version is learned by the node (`super::learn`): stored as
//! its next layout and begun in its live history.

use super::admission::{Admission, admit};
use super::layout::{Change, Layout};
use super::learn::learn;
use super::membership::Membership;
use super::propose::{Outcome, Voters, propose};
use std::time::Duration;

/// Parameters `add` and `remove` a request may name, together.
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

/// Whether an added node answers, bounded in time by the implementation.
pub trait Reach {
    /// True when the node at `url` answered.
    fn reachable(&self, url: &str) -> bool;
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
            "replication_factor" if change.replication_factor.is_none() => {
                let r = value.parse::<usize>().map_err(|_| bad(name, value))?;
                change.replication_factor = Some(r);
            }
            _ => return Err(format!("unexpected parameter {name:?}")),
        }
        if change.add.len() + change.remove.len() > CHANGE_URLS_MAX {
            return Err(format!(
                "more than {CHANGE_URLS_MAX} URLs to add and remove"
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
/// `membership`: admission against its live history, the added nodes'
/// reachability, then the agreement; a chosen layout is learned here too
/// (`super::learn`), whether or not the commit to this node got through.
pub fn answer(
    membership: &Membership,
    io: &(impl Voters + Reach),
    self_id: u64,
    version: u64,
    change: &Change,
    backoff: Duration,
) -> ChangeAnswer {
    let (layout, voters) = match admit(&membership.history(), version, change) {
        Admission::Propose { layout, voters } => (layout, voters),
        Admission::Continues(layout) => return ChangeAnswer::Chosen(layout),
        Admission::Conflict { current: _, why } => {
            return ChangeAnswer::Conflict(membership.committed(), why);
        }
        Admission::Invalid(e) => return ChangeAnswer::Invalid(e.to_string()),
    };
    if let Some(url) = change.add.iter().find(|u| !io.reachable(u)) {
        return ChangeAnswer::Invalid(format!("the added node {url} does not answer"));
    }
    match propose(io, self_id, &layout, &voters, backoff) {
        Outcome::Chosen { value, own } => {
            if let Err(e) = learn(membership, value.clone()) {
                tracing::warn!(version = value.version, error = %e, "chosen layout not stored");
            }
            if own {
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

#[cfg(test)]
#[path = "change_request_tests.rs"]
mod tests;
