//! `GET /v0/hotkeys` (this node's report, or the cluster's with
//! `cluster=1`) and `GET /v0/internal/hotkeys` (a peer's ask for this
//! node's whole report); the rules are `crate::hotkeys`'.
//!
//! A cluster report runs on a layout worker, as a client's job (within
//! the workers' bound for clients, never on a network thread): it asks every other live member
//! for its report as a cluster range asks for a peer's versions
//! ([`super::peer_get`], the proof bound to [`HOTKEYS_PROTOCOL`]), each
//! within the replication timeout, one after the other, and merges them
//! with this node's.

use super::answer::{self, Answer, Format};
use super::dispatch::Dispatched;
use crate::hotkeys::report::{Member, PEER_REPORT_BYTES_MAX, parse_node, render_cluster};
use crate::hotkeys::sampler::{COUNTERS, Snapshot};
use crate::http::response::Status;
use crate::layout_io::endpoints::JobAnswer;
use crate::net::resp::encode::Reply;
use crate::replication::ReplyTo;
use crate::state::{NetContext, NodeShared};

/// The name a peer's proof for `GET /v0/internal/hotkeys` is bound to.
pub const HOTKEYS_PROTOCOL: &str = "ataman-internal-hotkeys/1";
/// The internal path a cluster report asks each member.
pub const INTERNAL_PATH: &str = "/v0/internal/hotkeys";

/// This node's snapshot now.
pub fn snapshot(shared: &NodeShared) -> Snapshot {
    let hot = &shared.metrics.hotkeys;
    hot.snapshot(hot.ms_at(std::time::Instant::now()))
}

/// The URLs of `key`'s replicas under the live placement (both sets
/// while a layout changes).
fn replicas_of(shared: &NodeShared) -> impl Fn(&[u8]) -> Vec<String> {
    let placement = shared.placement();
    move |key: &[u8]| {
        let r = placement.replication_factor().max(1);
        placement
            .write(key, r)
            .replicas
            .iter()
            .map(|&i| placement.url(i).to_owned())
            .collect()
    }
}

/// This node's report, at most `limit` keys (`GET /v0/hotkeys`,
/// `ATAMAN.HOTKEYS`).
pub fn node_report(shared: &NodeShared, limit: usize) -> (Snapshot, String) {
    let s = snapshot(shared);
    let me = shared.placement.self_url().to_owned();
    let text = crate::hotkeys::report::render_node(&me, &s, limit, &replicas_of(shared));
    (s, text)
}

/// `GET /v0/hotkeys`: this node's report now, or a cluster report's job.
pub fn answer(ctx: &NetContext, reply_to: ReplyTo, limit: usize, cluster: bool) -> Dispatched {
    if !cluster {
        let text = node_report(&ctx.shared, limit).1;
        return Dispatched::Now(Answer::Document(Format::Json, text));
    }
    let Some(membership) = ctx.shared.membership.as_ref() else {
        // A single node: the cluster is this node.
        let members = gather(&ctx.shared);
        let text = render_cluster(&members, limit, &replicas_of(&ctx.shared));
        return Dispatched::Now(Answer::Document(Format::Json, text));
    };
    let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
    let shared = std::sync::Arc::clone(&ctx.shared);
    let job = move || {
        let members = gather(&shared);
        JobAnswer::json(
            Status::Ok,
            render_cluster(&members, limit, &replicas_of(&shared)),
        )
    };
    match membership.workers.start_client("ataman-hotkeys", job, wake) {
        Ok(receiver) => Dispatched::Job(receiver),
        Err(busy) => Dispatched::Now(answer::busy(busy.to_string())),
    }
}

/// `GET /v0/internal/hotkeys`: every key this node holds.
pub fn internal(ctx: &NetContext) -> Answer {
    Answer::Document(Format::Json, node_report(&ctx.shared, COUNTERS).1)
}

/// Every live member's report: this node's own, the others' asked.
fn gather(shared: &NodeShared) -> Vec<Member> {
    let placement = shared.placement();
    let me = placement.self_index();
    (0..placement.len())
        .filter(|&i| i == me || placement.is_live_member(i))
        .map(|i| {
            let node = placement.url(i).to_owned();
            if i == me {
                return Member::Answered {
                    node,
                    snapshot: snapshot(shared),
                };
            }
            match ask(shared, &placement.dial(i)) {
                Ok(snapshot) => Member::Answered { node, snapshot },
                Err(error) => Member::Failed { node, error },
            }
        })
        .collect()
}

/// A member's report, asked at `host` (`host:port`).
fn ask(shared: &NodeShared, host: &str) -> Result<Snapshot, String> {
    let body = super::peer_get::get(
        shared,
        host,
        INTERNAL_PATH,
        HOTKEYS_PROTOCOL,
        PEER_REPORT_BYTES_MAX,
    )?;
    parse_node(&body)
}

/// `ATAMAN.HOTKEYS`' reply: the fields of `GET /v0/hotkeys` as a flat
/// array of names and values (a map in RESP3), each key as
/// `[key, share, share_error, [replica…]]` (docs/RESP.md "Hot keys").
pub fn resp_reply(ctx: &NetContext, count: usize) -> Reply {
    let snapshot = crate::net::hotkeys::snapshot(&ctx.shared);
    let r = &snapshot.report;
    let share = |n: u64| Reply::text(format!("{:.6}", n as f64 / r.seen.max(1) as f64));
    let placement = ctx.placement();
    let keys = r
        .counters
        .iter()
        .take(count)
        .map(|c| {
            let replicas = placement
                .write(&c.key, placement.replication_factor().max(1))
                .replicas
                .iter()
                .map(|&i| Reply::text(placement.url(i)))
                .collect();
            Reply::Array(vec![
                Reply::Bulk(c.key.clone()),
                share(c.count),
                share(c.error),
                Reply::Array(replicas),
            ])
        })
        .collect();
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    Reply::Map(vec![
        (Reply::text("window_ms"), int(snapshot.window_ms)),
        (
            Reply::text("sample_every"),
            int(crate::hotkeys::sampler::SAMPLE_EVERY),
        ),
        (Reply::text("samples"), int(r.seen)),
        (Reply::text("unlisted_share_max"), share(r.unlisted_max)),
        (Reply::text("keys"), Reply::Array(keys)),
    ])
}
