//! What one node knows of the others, as the `/v0/cluster` JSON that
//! `ataman cluster status` reads and the `/metrics` lines of the links
//! (the figures themselves: [`crate::peer::link::PeerStatus`]).

use crate::api::Route;
use crate::cluster::live::Placement;
use crate::http::json::json_string;
use crate::peer::link::{LinkState, PeerStatus};
use crate::state::NodeShared;
use std::fmt::Write;
use std::sync::atomic::Ordering;

fn route_total(shared: &NodeShared, route: Route) -> u64 {
    shared.metrics.route_total(route)
}

/// The nodes `/v0/cluster` and the metrics list, by index: the members of
/// a live layout, and this node and nodes that left while hints are still
/// pending for them (`"member": false`).
fn listed(shared: &NodeShared, placement: &Placement) -> Vec<usize> {
    (0..placement.len().min(shared.peers.len()))
        .filter(|&i| {
            placement.is_live_member(i)
                || i == placement.self_index()
                || shared.hints.count(placement.url(i)).0 > 0
        })
        .collect()
}

/// `R` of the live version with the fewest replicas: the one the health
/// judgement uses (the health module's `cluster_health`).
pub fn replication_factor_min(placement: &Placement) -> usize {
    placement
        .placed()
        .layouts()
        .map(|l| l.replication_factor)
        .min()
        .unwrap_or(1)
}

/// `/v0/cluster`: this node, the layout version, every listed node's link
/// state, hints pending for it, request counters (docs/CLUSTER.md).
pub fn render_json(shared: &NodeShared) -> String {
    let placement = shared.placement();
    let nodes = listed(shared, &placement);
    let mut out = String::with_capacity(256 + 160 * nodes.len());
    out.push_str("{\"self\":");
    json_string(&mut out, placement.self_url());
    let _ = write!(
        out,
        ",\"layout_version\":{},\"read_version\":{},\"replication_factor\":{}",
        placement.version(),
        placement.read_version(),
        replication_factor_min(&placement)
    );
    out.push_str(",\"nodes\":[");
    for (n, &i) in nodes.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        let (url, peer) = (placement.url(i), &shared.peers[i]);
        let (hints, hint_bytes) = shared.hints.count(url);
        out.push_str("{\"url\":");
        json_string(&mut out, url);
        let _ = write!(
            out,
            ",\"member\":{},\"state\":\"{}\",\"hints_pending\":{hints},\"hint_bytes\":{hint_bytes},\"sent\":{},\"failed\":{},\"batches\":{},\"repairs\":{},\"hints_delivered\":{}}}",
            placement.is_live_member(i),
            peer.state().label(),
            peer.sent.load(Ordering::Relaxed),
            peer.failed.load(Ordering::Relaxed),
            peer.batches.load(Ordering::Relaxed),
            peer.repairs.load(Ordering::Relaxed),
            peer.hints_delivered.load(Ordering::Relaxed),
        );
    }
    let _ = write!(
        out,
        "],\"requests\":{{\"get\":{},\"put\":{},\"delete\":{}}}}}",
        route_total(shared, Route::EntityGet),
        route_total(shared, Route::EntityPut),
        route_total(shared, Route::EntityDelete),
    );
    out
}

/// The replication part of `/metrics`: per-peer link state and counters,
/// batch sizes both ways, read repairs and hints.
pub fn render_metrics(out: &mut String, shared: &NodeShared) {
    use crate::metrics::{gauge, histogram};
    let placement = shared.placement();
    let nodes = listed(shared, &placement);
    gauge(
        out,
        "ataman_layout_version",
        "The layout version this node runs with (docs/API.md, \"Layout\").",
        "gauge",
        placement.version(),
    );
    render_peer_figures(out, shared, &placement, &nodes);
    let m = &shared.metrics;
    histogram(
        out,
        "ataman_peer_batch_frames",
        "Request frames per write to a peer (client side).",
        "",
        1.0,
        &m.peer_batch_frames.snapshot(),
        true,
    );
    histogram(
        out,
        "ataman_peer_reply_batch_frames",
        "Answer frames per write to a peer (server side).",
        "",
        1.0,
        &m.peer_reply_batch_frames.snapshot(),
        true,
    );
    gauge(
        out,
        "ataman_read_repairs_total",
        "Read repairs sent.",
        "counter",
        m.read_repairs.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "ataman_layout_writes_both_sets_total",
        "Writes coordinated while two layout versions were live, each sent to both versions' replica sets (ack needed in each).",
        "counter",
        m.layout_writes_both_sets.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "ataman_peer_requests_fenced_total",
        "Replica requests of client requests a peer refused for naming an older layout version (the fence), held and asked again once this node placed with the newer one.",
        "counter",
        m.peer_requests_fenced.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "ataman_refilling",
        "1 while the node refills after a wipe (--refill) and serves no reads.",
        "gauge",
        u64::from(shared.refill.active()),
    );
    gauge(
        out,
        "ataman_peer_writes_superseded_total",
        "Writes from peers not stored because this replica held a newer version (answered with its timestamp).",
        "counter",
        m.peer_writes_superseded.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "ataman_writes_restamped_total",
        "Coordinated writes re-stamped above a newer version a replica held.",
        "counter",
        m.writes_restamped.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "ataman_writes_restamp_exhausted_total",
        "Coordinated writes answered 504 after the most re-stamps allowed.",
        "counter",
        m.writes_restamp_exhausted.load(Ordering::Relaxed),
    );
    let hints = shared.hints.stats();
    gauge(
        out,
        "ataman_hints_pending",
        "Hints kept for all peers.",
        "gauge",
        hints.pending,
    );
    gauge(
        out,
        "ataman_hint_bytes",
        "Bytes of hints kept for all peers.",
        "gauge",
        hints.pending_bytes,
    );
    gauge(
        out,
        "ataman_hints_added_total",
        "Hints kept.",
        "counter",
        hints.added,
    );
    gauge(
        out,
        "ataman_hints_delivered_total",
        "Hints delivered and removed.",
        "counter",
        hints.delivered,
    );
    gauge(
        out,
        "ataman_hints_dropped_total",
        "Hints not kept because the store was full.",
        "counter",
        hints.dropped,
    );
    gauge(
        out,
        "ataman_hints_failed_total",
        "Hints the store failed to make durable.",
        "counter",
        hints.failed,
    );
}

/// Per-peer lines of `/metrics` for the listed nodes `nodes`: link state,
/// request counters, hints pending, and request latency.
fn render_peer_figures(
    out: &mut String,
    shared: &NodeShared,
    placement: &Placement,
    nodes: &[usize],
) {
    use crate::metrics::histogram;
    let _ = writeln!(
        out,
        "# HELP ataman_peer_up 1 when this node's link to the peer is connected (self: 1).\n# TYPE ataman_peer_up gauge"
    );
    for &i in nodes {
        let (url, peer) = (placement.url(i), &shared.peers[i]);
        let up = matches!(peer.state(), LinkState::Up | LinkState::Myself);
        let _ = writeln!(out, "ataman_peer_up{{peer=\"{url}\"}} {}", u8::from(up));
    }
    type Counter = (&'static str, &'static str, fn(&PeerStatus) -> u64);
    let counters: [Counter; 5] = [
        (
            "ataman_peer_requests_sent_total",
            "Requests sent to the peer.",
            |p| p.sent.load(Ordering::Relaxed),
        ),
        (
            "ataman_peer_requests_failed_total",
            "Requests to the peer that failed (refused, lost, timed out, link full).",
            |p| p.failed.load(Ordering::Relaxed),
        ),
        (
            "ataman_peer_batches_total",
            "Writes of request frames to the peer.",
            |p| p.batches.load(Ordering::Relaxed),
        ),
        (
            "ataman_peer_read_repairs_total",
            "Read repairs sent to the peer.",
            |p| p.repairs.load(Ordering::Relaxed),
        ),
        (
            "ataman_peer_hints_delivered_total",
            "Hints delivered to the peer.",
            |p| p.hints_delivered.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for &i in nodes {
            if i != placement.self_index() {
                let url = placement.url(i);
                let _ = writeln!(out, "{name}{{peer=\"{url}\"}} {}", get(&shared.peers[i]));
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP ataman_peer_hints_pending Writes kept for the peer until it is back.\n# TYPE ataman_peer_hints_pending gauge"
    );
    for &i in nodes {
        let url = placement.url(i);
        let (n, _) = shared.hints.count(url);
        let _ = writeln!(out, "ataman_peer_hints_pending{{peer=\"{url}\"}} {n}");
    }
    let name = "ataman_peer_request_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time from queueing a request on a link to the peer to reading its answer (answered requests; failures are in ataman_peer_requests_failed_total).\n# TYPE {name} histogram"
    );
    for &i in nodes {
        if i == placement.self_index() {
            continue;
        }
        let (url, peer) = (placement.url(i), &shared.peers[i]);
        for (op, h) in [("write", &peer.write_us), ("read", &peer.read_us)] {
            let labels = format!("peer=\"{url}\",op=\"{op}\"");
            histogram(out, name, "", &labels, 1e-6, &h.snapshot(), false);
        }
    }
}
