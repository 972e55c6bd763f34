//! `GET /v0/slowlog?cluster=1` (every member's newest slow-log entries,
//! merged) and `GET /v0/internal/slowlog` (a peer's ask for this node's);
//! the merge is `crate::slowlog_cluster`'s, each node's entries are what
//! its own reader (`crate::slowlog::render_json`) returns.
//!
//! A cluster report runs on a layout worker as a client's job, like the
//! cluster's recent figures (`super::recent`): each other live member is
//! asked through [`super::peer_get`] (the proof bound to
//! [`SLOWLOG_PROTOCOL`]), one after the other, within the replication
//! timeout each; a member that does not answer is listed with its error,
//! the others' entries still merged.

use super::answer::{self, Answer, Format};
use super::dispatch::Dispatched;
use crate::http::response::Status;
use crate::layout_io::endpoints::JobAnswer;
use crate::replication::ReplyTo;
use crate::slowlog::render_json;
use crate::slowlog_cluster::{MemberLog, PEER_LOG_BYTES_MAX, check_member, merge};
use crate::state::NetContext;

/// The name a peer's proof for `GET /v0/internal/slowlog` is bound to.
pub const SLOWLOG_PROTOCOL: &str = "ataman-internal-slowlog/1";
/// The internal path a cluster report asks each member (with `?limit=n`).
pub const INTERNAL_PATH: &str = "/v0/internal/slowlog";

/// `GET /v0/slowlog?cluster=1`: the cluster's newest `limit` entries, as
/// a job (or at once on a node without a cluster).
pub fn answer(ctx: &NetContext, reply_to: ReplyTo, limit: usize) -> Dispatched {
    let text = render_json(&ctx.shared.metrics.slowlog, limit);
    let own = check_member(text.as_bytes());
    let me = ctx.shared.placement.self_url().to_owned();
    let Some(membership) = ctx.shared.membership.as_ref() else {
        let only = vec![MemberLog { node: me, log: own }];
        return Dispatched::Now(Answer::Document(Format::Json, merge(only, limit)));
    };
    let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
    let shared = std::sync::Arc::clone(&ctx.shared);
    let job = move || {
        let path = format!("{INTERNAL_PATH}?limit={limit}");
        let ask = (path.as_str(), SLOWLOG_PROTOCOL, PEER_LOG_BYTES_MAX);
        let members = super::peer_get::each_member(&shared, own, ask, check_member)
            .into_iter()
            .map(|(node, log)| MemberLog { node, log })
            .collect();
        JobAnswer::json(Status::Ok, merge(members, limit))
    };
    match membership.workers.start_client("ataman-slowlog", job, wake) {
        Ok(receiver) => Dispatched::Job(receiver),
        Err(busy) => Dispatched::Now(answer::busy(busy.to_string())),
    }
}

/// `GET /v0/internal/slowlog?limit=n`: this node's newest `limit` entries.
pub fn internal(ctx: &NetContext, limit: usize) -> Answer {
    let text = render_json(&ctx.shared.metrics.slowlog, limit);
    Answer::Document(Format::Json, text)
}
