//! `GET /v0/recent` (this node's recent figures, or every member's with
//! `cluster=1`), `GET /v0/internal/recent` (a peer's ask for this node's)
//! and `GET /ui` (the dashboard's files); the rules are `crate::recent`'s
//! and `crate::ui`'s.
//!
//! A cluster report runs on a layout worker as a client's job, like the
//! cluster's hot keys (`super::hotkeys`): each other live member is asked
//! through [`super::peer_get`] (the proof bound to [`RECENT_PROTOCOL`]),
//! one after the other, within the replication timeout each; a member
//! that does not answer is listed with its error, the others still shown.

use super::answer::{self, Answer, Format};
use super::dispatch::Dispatched;
use crate::http::response::Status;
use crate::layout_io::endpoints::JobAnswer;
use crate::recent::{Disk, Member, PEER_REPORT_BYTES_MAX, check_peer_report, render_cluster};
use crate::replication::ReplyTo;
use crate::state::{NetContext, NodeShared};
use crate::ui::Asset;

/// The name a peer's proof for `GET /v0/internal/recent` is bound to.
pub const RECENT_PROTOCOL: &str = "ataman-internal-recent/1";
/// The internal path a cluster report asks each member.
pub const INTERNAL_PATH: &str = "/v0/internal/recent";

/// `GET /ui`, `/ui/app.js`, `/ui/app.css`; 404 for another path under `/ui/`.
pub fn asset(shared: &NodeShared, asset: Option<Asset>) -> Answer {
    use crate::config::PlantedBug::UiScriptBroken;
    match asset {
        Some(Asset::Script) if shared.config.planted_bug == Some(UiScriptBroken) => {
            let body = Asset::Script.body();
            let half = (0..=body.len() / 2)
                .rev()
                .find(|&i| body.is_char_boundary(i))
                .unwrap_or(0);
            Answer::Document(Format::Asset(Asset::Script), body[..half].to_owned())
        }
        Some(a) => Answer::Document(Format::Asset(a), a.body().to_owned()),
        None => Answer::NotFound(None),
    }
}

/// This node's report now.
pub fn node_report(shared: &NodeShared, db: &ataman_engine::Db) -> String {
    let stats = db.stats();
    let url = shared.placement.self_url().to_owned();
    let hint_bytes = shared.hints.stats().pending_bytes;
    let dir = &shared.config.data_dir;
    let disk = Disk {
        sstable_bytes: stats.level_bytes.iter().sum(),
        memtable_bytes: stats.memtable_bytes + stats.immutable_memtable_bytes,
        hint_bytes,
        wal_bytes: crate::recent::disk::wal_bytes(dir),
        space: crate::recent::disk::space(dir),
    };
    shared.metrics.recent.render_node(&url, disk)
}

/// `GET /v0/recent`: this node's report now, or a cluster report's job.
pub fn answer(ctx: &NetContext, reply_to: ReplyTo, cluster: bool) -> Dispatched {
    let own = node_report(&ctx.shared, &ctx.db);
    let Some(membership) = ctx.shared.membership.as_ref().filter(|_| cluster) else {
        let text = if cluster {
            render_cluster(&[Member::Answered(own)])
        } else {
            own
        };
        return Dispatched::Now(Answer::Document(Format::Json, text));
    };
    let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
    let shared = std::sync::Arc::clone(&ctx.shared);
    let job = move || JobAnswer::json(Status::Ok, render_cluster(&gather(&shared, own)));
    match membership.workers.start_client("ataman-recent", job, wake) {
        Ok(receiver) => Dispatched::Job(receiver),
        Err(busy) => Dispatched::Now(answer::busy(busy.to_string())),
    }
}

/// `GET /v0/internal/recent`: this node's report.
pub fn internal(ctx: &NetContext) -> Answer {
    Answer::Document(Format::Json, node_report(&ctx.shared, &ctx.db))
}

/// Every live member's report: this node's `own`, the others' asked.
fn gather(shared: &NodeShared, own: String) -> Vec<Member> {
    let ask = (INTERNAL_PATH, RECENT_PROTOCOL, PEER_REPORT_BYTES_MAX);
    super::peer_get::each_member(shared, Ok(own), ask, check_peer_report)
        .into_iter()
        .map(|(node, report)| match report {
            Ok(text) => Member::Answered(text),
            Err(error) => Member::Failed { node, error },
        })
        .collect()
}
