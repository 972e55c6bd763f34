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
//! The chosen version is stored as the node's next layout
//! (`super::acceptor_node`) and not acted on: the node keeps its placement
//! until transitions are wired in (issue 16, stage 4).

use super::acceptor_node::AcceptorNode;
use super::admission::{Admission, admit};
use super::history::History;
use super::layout::{Change, Layout};
use super::propose::{Outcome, Voters, propose};
use std::sync::Mutex;
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

/// The history admission sees: the current layout, and the chosen next
/// one as a transition under way.
fn history_of(node: &AcceptorNode) -> History {
    let mut history = History::settled(node.current().clone());
    if let Some(next) = node.next() {
        // `begin` refuses only a version that is not current + 1, which
        // `AcceptorNode` never stores as next.
        let _ = history.begin(next.clone());
    }
    history
}

/// Answers a change request as node `self_id` (its placement seed).
pub fn answer(
    node: &Mutex<AcceptorNode>,
    io: &(impl Voters + Reach),
    self_id: u64,
    version: u64,
    change: &Change,
    backoff: Duration,
) -> ChangeAnswer {
    let committed =
        |node: &Mutex<AcceptorNode>| ataman_testkit::lock::lock(node).committed().clone();
    let admission = admit(
        &history_of(&ataman_testkit::lock::lock(node)),
        version,
        change,
    );
    let (layout, voters) = match admission {
        Admission::Propose { layout, voters } => (layout, voters),
        Admission::Continues(layout) => return ChangeAnswer::Chosen(layout),
        Admission::Conflict { current: _, why } => {
            return ChangeAnswer::Conflict(committed(node), why);
        }
        Admission::Invalid(e) => return ChangeAnswer::Invalid(e.to_string()),
    };
    if let Some(url) = change.add.iter().find(|u| !io.reachable(u)) {
        return ChangeAnswer::Invalid(format!("the added node {url} does not answer"));
    }
    match propose(io, self_id, &layout, &voters, backoff) {
        Outcome::Chosen { value, own: true } => ChangeAnswer::Chosen(value),
        Outcome::Chosen { value, own: false } => ChangeAnswer::Conflict(
            value,
            format!("another change was chosen as version {version}"),
        ),
        Outcome::Stale { version: at } => ChangeAnswer::Conflict(
            committed(node),
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
