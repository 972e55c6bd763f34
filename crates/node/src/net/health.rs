//! The health endpoints of a serving node: the facts gathered from its
//! shared state, the decisions left to the pure rules of
//! `crate::health` (docs/API.md, "Health"). Open to anyone
//! (`super::authorize`): they say nothing about keys.

use super::answer::{self, Answer, Format};
use crate::config::PlantedBug;
use crate::health::cluster_health::{self, Observed};
use crate::health::readiness::{self, Facts, Phase};
use crate::state::NodeShared;

/// `GET /livez`: the process serves HTTP (whatever its peers do; the
/// planted bug `livez-follows-peers` fails it unless every member answers).
pub fn livez(shared: &NodeShared) -> Answer {
    if shared.config.planted_bug == Some(PlantedBug::LivezFollowsPeers) {
        let (observed, _) = observe(shared);
        if cluster_health::judge(&observed).status != "ok" {
            return answer::busy("PLANTED BUG livez-follows-peers: a member does not answer");
        }
    }
    Answer::Document(Format::Line, readiness::LIVE_TEXT.into())
}

/// `GET /readyz`: 200 `ready`, or 503 with the reason's line.
pub fn readyz(shared: &NodeShared) -> Answer {
    let facts = Facts {
        phase: Phase::Serving,
        standing: shared.transition.standing(),
        refilling: shared.refill.active(),
        copying_for: shared
            .membership
            .as_ref()
            .and_then(|m| readiness::joining_copy(&m.history(), m.self_url()))
            .filter(|_| shared.config.planted_bug != Some(PlantedBug::ReadyzIgnoresCopy)),
        restoring_since_ms: (shared.backups.restoring)
            .under_way(crate::hlc::wall_ms())
            .map(|u| u.since_ms),
    };
    match readiness::readiness(&facts) {
        Ok(()) => Answer::Document(Format::Line, readiness::READY_TEXT.into()),
        Err(reason) => answer::busy(reason.line()),
    }
}

/// `GET /v0/cluster/health`: the members of the live layouts, which of
/// them answered this node's last gossip call (this node answers), and
/// the judgement of `crate::health::cluster_health`.
pub fn cluster_health(shared: &NodeShared) -> Answer {
    let (observed, nodes) = observe(shared);
    Answer::Document(Format::Json, cluster_health::render_json(&observed, &nodes))
}

/// The members of the live layouts and what this node saw of each
/// (`None`: not called yet), and the observation judged from them.
fn observe(shared: &NodeShared) -> (Observed, Vec<(String, Option<bool>)>) {
    let placement = shared.placement();
    let me = placement.self_index();
    let mut nodes: Vec<(String, Option<bool>)> = Vec::new();
    for i in (0..placement.len()).filter(|&i| placement.is_live_member(i)) {
        let url = placement.url(i).to_owned();
        let seen = match (&shared.membership, i == me) {
            (_, true) => Some(true),
            (Some(m), false) => m.reach.seen(&url),
            (None, false) => None,
        };
        nodes.push((url, seen));
    }
    let replication_factor = crate::replication::status::replication_factor_min(&placement);
    // As `ataman cluster status` sees it from `/v0/cluster`: reads on an
    // older version than writes.
    let (read, newest) = (placement.read_version(), placement.version());
    let transition = (read < newest).then_some((read, newest));
    let observed = Observed {
        members: nodes.len(),
        answering: nodes.iter().filter(|(_, s)| *s == Some(true)).count(),
        unknown: nodes.iter().filter(|(_, s)| s.is_none()).count(),
        replication_factor,
        transition,
    };
    (observed, nodes)
}
