//! A proposer run to its end on its own thread: `super::agreement`'s
//! [`Proposer`] driven over blocking calls to the voters, retried with a
//! higher round a bounded number of times, then the chosen layout sent
//! to every node that must learn it.
//!
//! # Rules
//! - Each phase asks every voter at once (one scoped thread per voter,
//!   each call bounded by the caller's [`Voters`] deadline) and feeds the
//!   replies to the proposer; a voter that does not answer, or answers
//!   something that is not an acceptor's reply, counts as failed.
//! - A retry takes the round above the highest promise met, after a
//!   back-off that grows with the attempt and differs between nodes, so
//!   two proposers do not keep pre-empting each other in step. After
//!   [`PROPOSE_ATTEMPTS_MAX`] attempts the outcome is
//!   [`Outcome::Contended`] (the HTTP answer is 503).
//! - A voter that answers with the layout chosen for the slot
//!   (`Reply::Chosen`) ends the proposal: won when it is the proposed one.
//! - Once chosen, the layout is committed to the voters and to the nodes
//!   it adds, best effort: a node that misses it learns it later from a
//!   peer (issue 16, stage 3). The outcome does not wait for a majority
//!   of commits: the value is chosen already.

use super::agreement::{AcceptorReply, Ballot, Proposer, Step};
use super::agreement_wire::{Reply, Request};
use super::layout::Layout;
use std::time::Duration;

/// Attempts (ballots) one proposal makes before it gives up.
pub const PROPOSE_ATTEMPTS_MAX: u32 = 8;

/// The blocking calls a proposer makes; each is bounded in time by the
/// implementation.
pub trait Voters: Sync {
    /// Sends `request` to the node at `url`; `None` when it did not answer.
    fn call(&self, url: &str, request: &Request) -> Option<Reply>;
}

/// How a proposal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A value was chosen; `own` when it is the proposed one (200, else 409).
    Chosen {
        /// The chosen layout.
        value: Layout,
        /// True if it is this proposal's value.
        own: bool,
    },
    /// The slot was decided already: a voter is at `version` (409).
    Stale {
        /// The version a voter named.
        version: u64,
    },
    /// No majority answered (503).
    NoMajority,
    /// Every attempt was pre-empted by a higher ballot (503).
    Contended,
}

/// Proposes `own` (version = the voters' committed version + 1) to
/// `voters` as node `node`, waiting `backoff` (times the attempt, plus
/// a share that depends on the node) between attempts.
pub fn propose(
    io: &impl Voters,
    node: u64,
    own: &Layout,
    voters: &[String],
    backoff: Duration,
) -> Outcome {
    let mut round = 1u64;
    for attempt in 0..PROPOSE_ATTEMPTS_MAX {
        let ballot = Ballot { round, node };
        let mut proposer = Proposer::new(ballot, own.clone(), voters.to_vec());
        let slot = proposer.slot();
        let mut step = phase(io, &mut proposer, own, &Request::Prepare { slot, ballot });
        if let Step::Accept { ballot, value } = step {
            step = phase(
                io,
                &mut proposer,
                own,
                &Request::Accept {
                    slot,
                    ballot,
                    value,
                },
            );
        }
        match step {
            Step::Chosen { value, own } => {
                commit(io, &value, voters);
                return Outcome::Chosen { value, own };
            }
            Step::Stale { version } => return Outcome::Stale { version },
            Step::Retry { above } => {
                round = above.round.max(round).saturating_add(1);
                std::thread::sleep(pause(backoff, node, attempt));
            }
            Step::NoMajority | Step::Wait | Step::Accept { .. } => return Outcome::NoMajority,
        }
    }
    Outcome::Contended
}

/// The wait before retry `attempt + 1`: `backoff × (attempt + 1)` plus up
/// to one `backoff` more, spread by the node id.
fn pause(backoff: Duration, node: u64, attempt: u32) -> Duration {
    let spread = (node ^ u64::from(attempt)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54;
    backoff * (attempt + 1) + backoff.mul_f64(spread as f64 / 1024.0)
}

/// Sends `request` to every voter at once and feeds the replies to
/// `proposer`; the first step that is not `Wait`, else `Wait`. A voter
/// that names the value chosen for the slot ends the proposal at once.
fn phase(io: &impl Voters, proposer: &mut Proposer, own: &Layout, request: &Request) -> Step {
    let voters = proposer.voters().to_vec();
    let replies = call_all(io, &voters, request);
    for (voter, reply) in voters.iter().zip(replies) {
        let reply = match reply {
            Some(Reply::Chosen { value }) if value.version == proposer.slot() => {
                let own = value == *own;
                return Step::Chosen { value, own };
            }
            Some(Reply::Acceptor(r)) => Some(r),
            _ => None::<AcceptorReply>,
        };
        let step = proposer.on_reply(voter, reply);
        if step != Step::Wait {
            return step;
        }
    }
    Step::Wait
}

/// `request` to each of `urls` at once, the replies in their order.
fn call_all(io: &impl Voters, urls: &[String], request: &Request) -> Vec<Option<Reply>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = urls
            .iter()
            .map(|url| {
                std::thread::Builder::new()
                    .name("ataman-layout-call".into())
                    .spawn_scoped(s, move || io.call(url, request))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.ok().and_then(|h| h.join().ok()).flatten())
            .collect()
    })
}

/// Commits `value` to the voters and the nodes it adds, best effort.
fn commit(io: &impl Voters, value: &Layout, voters: &[String]) {
    let mut urls = voters.to_vec();
    for url in &value.nodes {
        if !urls.contains(url) {
            urls.push(url.clone());
        }
    }
    call_all(
        io,
        &urls,
        &Request::Commit {
            value: value.clone(),
        },
    );
}

#[cfg(test)]
#[path = "propose_tests.rs"]
pub(crate) mod tests;
