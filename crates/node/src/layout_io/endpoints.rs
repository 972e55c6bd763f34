//! `POST /v0/layout` and `POST /v0/internal/layout` off the network
//! threads: each runs as a job on the node's bounded layout workers
//! (`crate::cluster::workers`), which hands back the whole answer and
//! wakes the connection's network thread (docs/API.md, "Layout").
//!
//! # Answers
//! - `POST /v0/layout`: 200 with the new layout's JSON; 409 with the
//!   newest committed layout's JSON and a `"reason"`; 400 and 503 with a
//!   line of text (`crate::cluster::change_request`). A single node keeps
//!   no layout: 400.
//! - `POST /v0/internal/layout`: 200 with the reply's bytes
//!   (`crate::cluster::agreement_wire`); 400 for a body that is not a
//!   request; 500 when the acceptor could not store its state.
//! - Every worker busy: 503 with the reason, at once.

use super::voters_http::HttpVoters;
use crate::cluster::agreement_wire::Request;
use crate::cluster::change_request::{self, ChangeAnswer};
use crate::cluster::layout::{Change, Layout};
use crate::cluster::learn;
use crate::cluster::membership::Membership;
use crate::cluster::workers::{JobReceiver, Wake};
use crate::http::Status;
use crate::http::json::json_string;
use crate::state::NodeShared;
use std::sync::Arc;
use std::time::Duration;

/// The proposer's back-off between ballots (`crate::cluster::propose`).
pub const LAYOUT_PROPOSE_BACKOFF: Duration = Duration::from_millis(50);
/// `Content-Type` of the internal endpoint's bodies.
pub const AGREEMENT_CONTENT_TYPE: &str = "application/octet-stream";
/// `Content-Type` of the layout documents.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// `Content-Type` of a one-line reason.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// What a single node answers `POST /v0/layout` with.
pub const SINGLE_NODE_REFUSAL: &str =
    "a single node keeps no layout: start the nodes with --cluster to change membership";

/// A whole answer: status, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobAnswer {
    /// The status.
    pub status: Status,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl JobAnswer {
    /// A one-line text answer.
    pub fn text(status: Status, reason: &str) -> JobAnswer {
        JobAnswer {
            status,
            content_type: TEXT_CONTENT_TYPE,
            body: format!("{reason}\n").into_bytes(),
        }
    }

    /// A JSON answer (also a cluster hot-key report's).
    pub fn json(status: Status, text: String) -> JobAnswer {
        JobAnswer {
            status,
            content_type: JSON_CONTENT_TYPE,
            body: text.into_bytes(),
        }
    }
}

/// Why a layout request is refused before a job starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// 400: a single node, or a body that is not a request.
    Invalid(String),
    /// 503: every layout worker is busy.
    Busy(String),
}

/// A layout job's waiting end.
pub type LayoutJob = JobReceiver<JobAnswer>;

/// A layout as JSON: `{"version":N,"nodes":[…],"node_ids":{URL:id,…},"replication_factor":R}`,
/// then `"reason"` when given.
pub fn layout_json(layout: &Layout, reason: Option<&str>) -> String {
    let mut out = format!("{{\"version\":{},\"nodes\":[", layout.version);
    for (i, url) in layout.nodes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, url);
    }
    out.push_str("],\"node_ids\":{");
    for (i, (url, id)) in layout.nodes.iter().zip(&layout.ids).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, url);
        out.push_str(&format!(":{id}"));
    }
    out.push_str(&format!(
        "}},\"replication_factor\":{}",
        layout.replication_factor
    ));
    if let Some(reason) = reason {
        out.push_str(",\"reason\":");
        json_string(&mut out, reason);
    }
    out.push('}');
    out
}

/// The HTTP answer of a change request's outcome.
pub fn change_answer(answer: &ChangeAnswer) -> JobAnswer {
    match answer {
        ChangeAnswer::Chosen(layout) => JobAnswer::json(Status::Ok, layout_json(layout, None)),
        ChangeAnswer::Conflict(layout, why) => {
            JobAnswer::json(Status::Conflict, layout_json(layout, Some(why)))
        }
        ChangeAnswer::Invalid(why) => JobAnswer::text(Status::BadRequest, why),
        ChangeAnswer::Unavailable(why) => JobAnswer::text(Status::Unavailable, why),
    }
}

/// Appends the layout workers' gauge to `/metrics`.
pub fn render_metrics(out: &mut String, membership: &Membership) {
    out.push_str(
        "# HELP ataman_layout_workers_active Layout requests (changes, agreement messages, gossip) running on layout workers.\n\
         # TYPE ataman_layout_workers_active gauge\n",
    );
    out.push_str(&format!(
        "ataman_layout_workers_active {}\n",
        membership.workers.active()
    ));
    out.push_str(
        "# HELP ataman_layout_gossip_rounds_total Layout gossip rounds this node sent (each to every node of its live layouts).\n\
         # TYPE ataman_layout_gossip_rounds_total counter\n",
    );
    out.push_str(&format!(
        "ataman_layout_gossip_rounds_total {}\n",
        membership.reach.rounds()
    ));
}

/// A node's id in its ballots: FNV-1a of its URL (distinct URLs, distinct
/// ids, but for a collision that only costs a retry).
pub fn node_id(url: &str) -> u64 {
    url.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The calls a job of `shared` makes.
pub fn voters<'a>(shared: &'a NodeShared, membership: &'a Membership) -> HttpVoters<'a> {
    HttpVoters {
        membership,
        tls: shared.tls.as_ref().and_then(|t| t.client()),
        secret: shared.auth.secret.as_ref(),
        identity_mode: match shared.config.planted_bug {
            Some(crate::config::PlantedBug::AddChecksOnlyStatus) => {
                crate::cluster::added_identity::Mode::PlantedStatusOnly
            }
            _ => crate::cluster::added_identity::Mode::Sound,
        },
    }
}

/// Starts `POST /v0/layout?version=…`; `Err`: refused at once.
pub fn start_change(
    shared: &Arc<NodeShared>,
    wake: Wake,
    version: u64,
    change: Change,
) -> Result<LayoutJob, Refused> {
    let Some(membership) = shared.membership.as_ref() else {
        return Err(Refused::Invalid(SINGLE_NODE_REFUSAL.into()));
    };
    let owner = Arc::clone(shared);
    let job = move || {
        let Some(m) = owner.membership.as_deref() else {
            return JobAnswer::text(Status::BadRequest, SINGLE_NODE_REFUSAL);
        };
        let io = voters(&owner, m);
        let id = node_id(m.self_url());
        let answer = change_request::answer(m, &io, id, version, &change, LAYOUT_PROPOSE_BACKOFF);
        tracing::info!(
            version,
            status = answer.status(),
            "layout change request answered"
        );
        change_answer(&answer)
    };
    membership
        .workers
        .start_client("ataman-layout", job, wake)
        .map_err(|busy| Refused::Busy(busy.to_string()))
}

/// Starts `GET /v0/layout/plan?…`: the keys and bytes this node would
/// send to each gaining node if `change` became the next version
/// (`antientropy::transfer::plan`, a scan of the engine); `Err`: refused
/// at once.
pub fn start_plan(
    shared: &Arc<NodeShared>,
    wake: Wake,
    change: Change,
) -> Result<LayoutJob, Refused> {
    let Some(membership) = shared.membership.as_ref() else {
        return Err(Refused::Invalid(SINGLE_NODE_REFUSAL.into()));
    };
    let current = membership.committed();
    let mut planned = current
        .apply(&change)
        .map_err(|e| Refused::Invalid(e.to_string()))?;
    if membership.history().in_transition() {
        // Planned from the newest version, as the next change would be.
        planned.version = current.version + 1;
    }
    let owner = Arc::clone(shared);
    let job = move || {
        let me = owner.placement.self_url().to_owned();
        match crate::antientropy::transfer::plan::scan_sends(&owner.db, &current, &planned, &me) {
            Ok(sends) => JobAnswer::json(
                Status::Ok,
                crate::antientropy::transfer::plan::render_json(planned.version, &sends),
            ),
            Err(e) => JobAnswer::text(
                Status::InternalError,
                &format!("the plan's scan failed: {e}"),
            ),
        }
    };
    membership
        .workers
        .start_client("ataman-layout", job, wake)
        .map_err(|busy| Refused::Busy(busy.to_string()))
}

/// Starts a peer's `POST /v0/internal/layout` with `body`; `Err`:
/// refused at once.
pub fn start_internal(
    shared: &Arc<NodeShared>,
    wake: Wake,
    body: &[u8],
) -> Result<LayoutJob, Refused> {
    let Some(membership) = shared.membership.as_ref() else {
        return Err(Refused::Invalid(SINGLE_NODE_REFUSAL.into()));
    };
    let request = Request::decode(body).map_err(|e| Refused::Invalid(e.to_string()))?;
    if matches!(request, Request::Gossip { .. }) {
        super::gossip::note_own_copy(shared, membership);
    }
    let m = Arc::clone(membership);
    let job = move || match learn::serve(&m, request) {
        Ok(reply) => JobAnswer {
            status: Status::Ok,
            content_type: AGREEMENT_CONTENT_TYPE,
            body: reply.encode(),
        },
        Err(e) => {
            tracing::warn!(error = %e, "layout agreement: the acceptor could not store its state");
            JobAnswer::text(Status::InternalError, &e.to_string())
        }
    };
    membership
        .workers
        .start("ataman-layout", job, wake)
        .map_err(|busy| Refused::Busy(busy.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1() -> Layout {
        let nodes = ["http://a:1", "http://b:2"].map(String::from).to_vec();
        Layout::new(1, nodes, 2).unwrap()
    }

    /// Each outcome has its status; 200 and 409 carry the layout's JSON,
    /// 409 its reason, 400 and 503 a line of text.
    #[test]
    fn answers() {
        let chosen = change_answer(&ChangeAnswer::Chosen(v1()));
        assert_eq!(chosen.status, Status::Ok);
        assert_eq!(
            String::from_utf8(chosen.body).unwrap(),
            "{\"version\":1,\"nodes\":[\"http://a:1\",\"http://b:2\"],\"node_ids\":{\"http://a:1\":0,\"http://b:2\":1},\"replication_factor\":2}"
        );
        let conflict = change_answer(&ChangeAnswer::Conflict(v1(), "a \"why\"".into()));
        assert_eq!(conflict.status, Status::Conflict);
        assert_eq!(conflict.content_type, JSON_CONTENT_TYPE);
        assert!(
            String::from_utf8(conflict.body)
                .unwrap()
                .ends_with(",\"reason\":\"a \\\"why\\\"\"}")
        );
        let invalid = change_answer(&ChangeAnswer::Invalid("no".into()));
        assert_eq!(
            (invalid.status, invalid.body),
            (Status::BadRequest, b"no\n".to_vec())
        );
        let busy = change_answer(&ChangeAnswer::Unavailable("down".into()));
        assert_eq!(busy.status, Status::Unavailable);
        assert_eq!(busy.content_type, TEXT_CONTENT_TYPE);
    }

    /// Ids differ between nodes of one host.
    #[test]
    fn ids() {
        assert_ne!(node_id("http://127.0.0.1:1"), node_id("http://127.0.0.1:2"));
        assert_eq!(node_id("x"), node_id("x"));
    }
}
