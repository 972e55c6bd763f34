//! The recent-figures ring: a node's requests per second by kind and its
//! p50 and p99 latency, one point a second for the last ten minutes, in
//! memory only (`GET /v0/recent`, read by the dashboard at `/ui`).
//!
//! - [`ring`]: the rules (samples, bound, rates and percentiles), pure.
//! - [`disk`]: the WAL's bytes and the data directory's free space.
//!
//! The samples are taken from the node's metrics by the main thread
//! (`NodeMetrics::recent_sample` in the metrics module; every 50 ms it looks,
//! once a second it keeps one); the JSON is rendered here.
//!
//! # Thread safety
//! [`Recent`] is a mutex over the ring, taken by the main thread once a
//! second to push and by a network thread or a peer-report job to read
//! (a copy of 600 small points, microseconds).

pub mod disk;
pub mod ring;

use ring::{KINDS, Ring, SAMPLE_EVERY_MS, SAMPLES_MAX, Sample};
use std::fmt::Write;
use std::sync::Mutex;

/// Bytes of one member's report a cluster report reads at most (600
/// points of at most about 200 bytes each, and the rest).
pub const PEER_REPORT_BYTES_MAX: usize = 256 * 1024;

/// What a point's p50 and p99 are of (a node report's `percentiles_of`):
/// the client's data requests of both protocols.
pub const PERCENTILES_OF: &str = "[\"http_entity\",\"resp_key_command\"]";

/// The ring, shared.
#[derive(Debug, Default)]
pub struct Recent {
    ring: Mutex<Ring>,
}

/// What a node's report says beside its points: its disk use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Disk {
    /// Bytes in SSTables, every level.
    pub sstable_bytes: u64,
    /// Bytes in memtables (the mutable one and those being flushed).
    pub memtable_bytes: u64,
    /// Bytes of hints held for other nodes.
    pub hint_bytes: u64,
    /// Bytes of the WAL's segments.
    pub wal_bytes: u64,
    /// The data directory's file system: free and total bytes (`None`:
    /// `statvfs` failed).
    pub space: Option<disk::Space>,
}

impl Recent {
    /// Keeps a sample if one is due at `now_ms`; `take` reads the metrics
    /// only then.
    pub fn tick(&self, now_ms: u64, take: impl FnOnce() -> Sample) {
        let mut ring = ataman_testkit::lock::lock(&self.ring);
        if ring.due(now_ms) {
            ring.push(take());
        }
    }

    /// This node's report: `{"node":…,"sample_every_ms":1000,
    /// "points_max":600,"columns":[…],"points":[[…],…],"disk":{…}}`
    /// (docs/API.md "Recent figures").
    pub fn render_node(&self, node: &str, disk: Disk) -> String {
        let points = ataman_testkit::lock::lock(&self.ring).points();
        let mut out = String::with_capacity(256 + 64 * points.len());
        out.push_str("{\"node\":");
        crate::http::json::json_string(&mut out, node);
        let _ = write!(
            out,
            ",\"sample_every_ms\":{SAMPLE_EVERY_MS},\"points_max\":{},\"columns\":[\"at_ms\"",
            SAMPLES_MAX - 1
        );
        for kind in KINDS {
            let _ = write!(out, ",\"{kind}_per_s\"");
        }
        out.push_str(",\"p50_us\",\"p99_us\"],\"percentiles_of\":");
        out.push_str(PERCENTILES_OF);
        out.push_str(",\"points\":[");
        for (i, p) in points.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(out, "{sep}[{}", p.at_ms);
            for r in p.per_s {
                let _ = write!(out, ",{r:.1}");
            }
            for q in [p.p50_us, p.p99_us] {
                match q {
                    Some(us) => {
                        let _ = write!(out, ",{us}");
                    }
                    None => out.push_str(",null"),
                }
            }
            out.push(']');
        }
        let _ = write!(
            out,
            "],\"disk\":{{\"sstable_bytes\":{},\"memtable_bytes\":{},\"hint_bytes\":{},\"wal_bytes\":{}",
            disk.sstable_bytes, disk.memtable_bytes, disk.hint_bytes, disk.wal_bytes
        );
        match disk.space {
            Some(s) => {
                let _ = write!(
                    out,
                    ",\"free_bytes\":{},\"total_bytes\":{}}}}}",
                    s.free_bytes, s.total_bytes
                );
            }
            None => out.push_str(",\"free_bytes\":null,\"total_bytes\":null}}"),
        }
        out
    }
}

/// One member's part of a cluster report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// Its report, checked to be one JSON object.
    Answered(String),
    /// Why it has none.
    Failed {
        /// The member's URL.
        node: String,
        /// Why.
        error: String,
    },
}

/// Checks that a peer's report is one JSON object naming a node.
pub fn check_peer_report(body: &[u8]) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("report is not JSON: {e}"))?;
    if !value.get("node").is_some_and(serde_json::Value::is_string)
        || !value.get("points").is_some_and(serde_json::Value::is_array)
    {
        return Err("report without node or points".into());
    }
    Ok(value.to_string())
}

/// The cluster's report: `{"nodes":[report | {"node":…,"error":…}, …]}`.
pub fn render_cluster(members: &[Member]) -> String {
    let mut out = String::from("{\"nodes\":[");
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match m {
            Member::Answered(text) => out.push_str(text),
            Member::Failed { node, error } => {
                out.push_str("{\"node\":");
                crate::http::json::json_string(&mut out, node);
                out.push_str(",\"error\":");
                crate::http::json::json_string(&mut out, error);
                out.push('}');
            }
        }
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_engine::metrics::HISTOGRAM_BUCKETS;

    fn sample(at_ms: u64, gets: u64) -> Sample {
        let mut latency_buckets = [0; HISTOGRAM_BUCKETS];
        latency_buckets[10] = gets;
        Sample {
            at_ms,
            counts: [gets, 0, 0, 7, 0],
            latency_buckets,
        }
    }

    /// A node's report is JSON with a row per interval, columns as named,
    /// and a cluster report carries each member's report or its failure.
    #[test]
    fn reports_are_json() {
        let recent = Recent::default();
        recent.tick(1_000, || sample(1_000, 0));
        recent.tick(1_500, || panic!("not due"));
        recent.tick(2_000, || sample(2_000, 40));
        let text = recent.render_node(
            "http://a",
            Disk {
                sstable_bytes: 5,
                wal_bytes: 9,
                space: Some(disk::Space {
                    free_bytes: 100,
                    total_bytes: 400,
                }),
                ..Disk::default()
            },
        );
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let columns = v["columns"].as_array().expect("columns");
        let row = v["points"][0].as_array().expect("a point");
        assert_eq!(columns.len(), row.len());
        assert_eq!(row[0], 2_000);
        assert_eq!(row[1], 40.0);
        assert_eq!(row[4], 0.0, "resp did not grow");
        assert_eq!(row[6], 1_024, "p50");
        assert_eq!(v["disk"]["sstable_bytes"], 5);
        assert_eq!(v["disk"]["wal_bytes"], 9);
        assert_eq!(v["disk"]["free_bytes"], 100);
        assert_eq!(v["disk"]["total_bytes"], 400);
        assert_eq!(v["percentiles_of"][1], "resp_key_command");
        let unknown = recent.render_node("http://a", Disk::default());
        let unknown: serde_json::Value = serde_json::from_str(&unknown).expect("JSON");
        assert!(unknown["disk"]["free_bytes"].is_null(), "{unknown}");
        let checked = check_peer_report(text.as_bytes()).expect("a report");
        let all = render_cluster(&[
            Member::Answered(checked),
            Member::Failed {
                node: "http://b".into(),
                error: "connect: refused".into(),
            },
        ]);
        let v: serde_json::Value = serde_json::from_str(&all).expect("JSON");
        assert_eq!(v["nodes"][0]["node"], "http://a");
        assert_eq!(v["nodes"][1]["error"], "connect: refused");
    }

    /// The ring's percentiles cover RESP commands on keys as well as HTTP
    /// entity requests: a node serving only RESP has a p50.
    #[test]
    fn percentiles_cover_resp_commands() {
        use crate::recent::ring::point;
        let m = crate::metrics::NodeMetrics::default();
        let before = m.recent_sample(1_000);
        for _ in 0..10 {
            m.resp_key_latency_us.record(3_000);
        }
        let after = m.recent_sample(2_000);
        let p = point(&before, &after);
        assert_eq!(p.p50_us, Some(4_096), "RESP latency in the ring");
        assert_eq!(p.p99_us, Some(4_096));
    }

    /// A peer's answer that is no report is refused, never embedded.
    #[test]
    fn a_bad_peer_report_is_refused() {
        for body in [
            &b"{\"node\":1}"[..],
            b"[]",
            b"{\"node\":\"x\"}",
            b"{\"node\":\"x\",\"points\":[]} junk",
            b"\xff",
        ] {
            assert!(check_peer_report(body).is_err(), "{body:?}");
        }
    }
}
