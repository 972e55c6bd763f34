//! The hot-key report as JSON (`GET /v0/hotkeys`, `GET
//! /v0/internal/hotkeys`), its parse (a peer's report, for the cluster
//! view) and the cluster merge (docs/API.md "Hot keys").
//!
//! # Rules
//! - A key is written twice: `key`, its bytes as text (invalid UTF-8
//!   replaced, as the slow log does; for reading), and `key_hex`, its
//!   exact bytes (for merging and for binary keys).
//! - `share` is the key's estimated count over the window's samples, an
//!   upper bound; `share_error` the summary's error over the same
//!   samples: the sampled share lies in `[share - share_error, share]`.
//!   `unlisted_share_max` bounds the share of any key not listed.
//! - A cluster report merges the members' reports with
//!   `space_saving::merge` (the bound holds for the merge); a member that
//!   did not answer is listed with its error, and its traffic is missing.

use super::sampler::{COUNTERS, SAMPLE_EVERY, Snapshot};
use super::space_saving::{Counter, Report, merge};
use crate::http::json::json_string;
use std::fmt::Write;

/// Keys listed when the request names no `limit`.
pub const KEYS_DEFAULT: usize = 20;
/// The largest report a peer may send, bytes.
pub const PEER_REPORT_BYTES_MAX: usize = 256 * 1024;

/// One member's part in a cluster report.
#[derive(Debug, Clone, PartialEq)]
pub enum Member {
    /// Its report.
    Answered {
        /// Its URL.
        node: String,
        /// Its summary and window.
        snapshot: Snapshot,
    },
    /// Why it has none.
    Failed {
        /// Its URL.
        node: String,
        /// What went wrong.
        error: String,
    },
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Appends the fields every report has, then its `keys` (at most
/// `limit`), each with its replicas' URLs from `replicas`.
fn render_body(
    out: &mut String,
    snapshot: &Snapshot,
    limit: usize,
    replicas: &dyn Fn(&[u8]) -> Vec<String>,
) {
    let r = &snapshot.report;
    let _ = write!(
        out,
        "\"window_ms\":{},\"sample_every\":{SAMPLE_EVERY},\"samples\":{},\"counters\":{COUNTERS},\"unlisted_max\":{},\"unlisted_share_max\":{:.6},\"keys\":[",
        snapshot.window_ms,
        r.seen,
        r.unlisted_max,
        ratio(r.unlisted_max, r.seen)
    );
    for (i, c) in r.counters.iter().take(limit).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":");
        json_string(out, &String::from_utf8_lossy(&c.key));
        let _ = write!(
            out,
            ",\"key_hex\":\"{}\",\"share\":{:.6},\"share_error\":{:.6},\"count\":{},\"error\":{},\"replicas\":[",
            hex(&c.key),
            ratio(c.count, r.seen),
            ratio(c.error, r.seen),
            c.count,
            c.error
        );
        for (j, url) in replicas(&c.key).iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            json_string(out, url);
        }
        out.push_str("]}");
    }
    out.push(']');
}

/// This node's report: `{"node":URL, …, "keys":[…]}`.
pub fn render_node(
    node: &str,
    snapshot: &Snapshot,
    limit: usize,
    replicas: &dyn Fn(&[u8]) -> Vec<String>,
) -> String {
    let mut out = String::from("{\"node\":");
    json_string(&mut out, node);
    out.push(',');
    render_body(&mut out, snapshot, limit, replicas);
    out.push('}');
    out
}

/// The cluster's report: the members' merged, with each member's samples
/// or error under `nodes`.
pub fn render_cluster(
    members: &[Member],
    limit: usize,
    replicas: &dyn Fn(&[u8]) -> Vec<String>,
) -> String {
    let reports: Vec<Report> = members
        .iter()
        .filter_map(|m| match m {
            Member::Answered { snapshot, .. } => Some(snapshot.report.clone()),
            Member::Failed { .. } => None,
        })
        .collect();
    let window_ms = members
        .iter()
        .filter_map(|m| match m {
            Member::Answered { snapshot, .. } => Some(snapshot.window_ms),
            Member::Failed { .. } => None,
        })
        .max()
        .unwrap_or(0);
    let merged = Snapshot {
        report: merge(&reports, COUNTERS),
        window_ms,
    };
    let mut out = String::from("{\"cluster\":true,\"nodes\":[");
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"node\":");
        match m {
            Member::Answered { node, snapshot } => {
                json_string(&mut out, node);
                let _ = write!(out, ",\"samples\":{}}}", snapshot.report.seen);
            }
            Member::Failed { node, error } => {
                json_string(&mut out, node);
                out.push_str(",\"error\":");
                json_string(&mut out, error);
                out.push('}');
            }
        }
    }
    out.push_str("],");
    render_body(&mut out, &merged, limit, replicas);
    out.push('}');
    out
}

/// A node's report read back (a peer's `GET /v0/internal/hotkeys`,
/// rendered with every key).
pub fn parse_node(body: &[u8]) -> Result<Snapshot, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a hot-key report: {e}"))?;
    let int = |v: &serde_json::Value, name: &str| {
        v.get(name)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| format!("hot-key report: no integer {name}"))
    };
    let keys = v
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or("hot-key report: no keys")?;
    if keys.len() > COUNTERS {
        return Err(format!("hot-key report: over {COUNTERS} keys"));
    }
    let mut counters = Vec::with_capacity(keys.len());
    for k in keys {
        let key = k
            .get("key_hex")
            .and_then(serde_json::Value::as_str)
            .and_then(unhex)
            .ok_or("hot-key report: a key without a valid key_hex")?;
        let (count, error) = (int(k, "count")?, int(k, "error")?);
        if error > count {
            return Err("hot-key report: an error over its count".into());
        }
        counters.push(Counter { key, count, error });
    }
    Ok(Snapshot {
        report: Report {
            counters,
            unlisted_max: int(&v, "unlisted_max")?,
            seen: int(&v, "samples")?,
        },
        window_ms: int(&v, "window_ms")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(keys: &[(&[u8], u64, u64)], unlisted_max: u64, seen: u64) -> Snapshot {
        Snapshot {
            report: Report {
                counters: keys
                    .iter()
                    .map(|&(k, count, error)| Counter {
                        key: k.to_vec(),
                        count,
                        error,
                    })
                    .collect(),
                unlisted_max,
                seen,
            },
            window_ms: 1_500,
        }
    }

    /// A report renders binary keys escaped and exact in hex, and reads
    /// back to the same summary.
    #[test]
    fn renders_and_reads_back() {
        let s = snapshot(&[(b"a\"\n\xff", 40, 2), (b"b", 10, 0)], 3, 100);
        let text = render_node("http://n1", &s, 100, &|_| vec!["http://n1".into()]);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["keys"][0]["key"], "a\"\n\u{fffd}");
        assert_eq!(v["keys"][0]["key_hex"], "61220aff");
        assert_eq!(v["keys"][0]["share"], 0.4);
        assert_eq!(v["keys"][0]["share_error"], 0.02);
        assert_eq!(v["keys"][0]["replicas"][0], "http://n1");
        assert_eq!(v["window_ms"], 1_500);
        assert_eq!(parse_node(text.as_bytes()).unwrap(), s);
        let one = render_node("n", &s, 1, &|_| Vec::new());
        assert_eq!(parse_node(one.as_bytes()).unwrap().report.counters.len(), 1);
    }

    /// Bad reports are refused with a reason, never a panic.
    #[test]
    fn refuses_bad_reports() {
        for bad in [
            &b"not json"[..],
            b"{}",
            b"{\"keys\":[{\"key_hex\":\"6\",\"count\":1,\"error\":0}],\"samples\":1,\"unlisted_max\":0,\"window_ms\":1}",
            b"{\"keys\":[{\"key_hex\":\"61\",\"count\":1,\"error\":2}],\"samples\":1,\"unlisted_max\":0,\"window_ms\":1}",
            b"{\"keys\":[],\"samples\":-1,\"unlisted_max\":0,\"window_ms\":1}",
        ] {
            assert!(parse_node(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// The cluster report sums the members' samples and counts, and names
    /// a member that did not answer.
    #[test]
    fn cluster_merges_and_names_the_silent() {
        let members = [
            Member::Answered {
                node: "http://n1".into(),
                snapshot: snapshot(&[(b"hot", 30, 0)], 0, 60),
            },
            Member::Answered {
                node: "http://n2".into(),
                snapshot: snapshot(&[(b"hot", 10, 0), (b"x", 5, 0)], 0, 40),
            },
            Member::Failed {
                node: "http://n3".into(),
                error: "connect: refused".into(),
            },
        ];
        let text = render_cluster(&members, 10, &|_| Vec::new());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["samples"], 100);
        assert_eq!(v["keys"][0]["key"], "hot");
        assert_eq!(v["keys"][0]["count"], 40);
        assert_eq!(v["keys"][0]["share"], 0.4);
        assert_eq!(v["nodes"][2]["error"], "connect: refused");
        assert_eq!(v["nodes"][0]["samples"], 60);
    }
}
