//! The cluster's slow log (`GET /v0/slowlog?cluster=1`, docs/API.md "Slow
//! log"): every member's newest entries merged into one list, each entry
//! naming the node that recorded it. Pure: members' documents in, one
//! document out; `net/slowlog_cluster.rs` asks the members.
//!
//! # Rules
//! - A member's part is its own `GET /v0/slowlog?limit=n` document
//!   (`crate::slowlog::render_json`), asked for the same `n` as the
//!   cluster report: the newest `n` of the cluster are among the union of
//!   each member's newest `n`, so nothing that belongs in the list is
//!   left out by asking each member for fewer.
//! - A peer's document is checked before it is used ([`check_member`]):
//!   one JSON object whose `entries` is an array of objects, each with a
//!   numeric `unix_time_s` and `id`; anything else is that member's
//!   failure, named with its reason, never embedded. A member that does
//!   not answer is named the same way; the others are still merged.
//! - The merged list is newest first: by `unix_time_s` descending (each
//!   node's own wall clock, in seconds), then by the member's place in
//!   the layout, then by `id` descending (one node's ids only grow, so
//!   its own entries keep their order). Entries of two nodes in the same
//!   second are in member order: the clocks cannot order them finer.
//! - At most `limit` entries are kept; each gets `"node"`, its member's
//!   URL. Each member's settings (threshold, length, bound) are listed in
//!   `nodes`, in member order, or its error.

use serde_json::{Map, Value};

/// Entries a cluster report lists without `limit`.
pub const CLUSTER_LIMIT_DEFAULT: usize = crate::slowlog::LEN_DEFAULT;
/// Entries a cluster report lists at most (and asks each member for).
pub const CLUSTER_LIMIT_MAX: usize = 1_000;
/// Bytes of one member's document a cluster report reads at most: 4 KiB
/// an entry at [`CLUSTER_LIMIT_MAX`] (a 128-byte key escaped, 16
/// replicas' names, a client name) and the rest.
pub const PEER_LOG_BYTES_MAX: usize = CLUSTER_LIMIT_MAX * 4 * 1024 + 1024;

/// One member's part of a cluster report.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberLog {
    /// The member's URL.
    pub node: String,
    /// Its checked document, or why there is none.
    pub log: Result<Map<String, Value>, String>,
}

/// Checks that `body` is one slow-log document (see the rules): the
/// document, or why it is not one.
pub fn check_member(body: &[u8]) -> Result<Map<String, Value>, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("slow log is not JSON: {e}"))?;
    let Value::Object(doc) = value else {
        return Err("slow log is not a JSON object".into());
    };
    let entries = doc
        .get("entries")
        .and_then(Value::as_array)
        .ok_or("slow log without entries")?;
    let sound = |e: &Value| {
        e.as_object().is_some_and(|e| {
            e.get("unix_time_s").is_some_and(Value::is_u64)
                && e.get("id").is_some_and(Value::is_u64)
        })
    };
    if !entries.iter().all(sound) {
        return Err("slow log with an entry lacking unix_time_s or id".into());
    }
    Ok(doc)
}

/// The cluster's report: `{"limit":n,"nodes":[{"node":…,"threshold_us":…,
/// "len":…,"len_max":…} | {"node":…,"error":…}, …],"entries":[…]}`, the
/// entries merged by the rules, each with its `"node"`.
pub fn merge(members: Vec<MemberLog>, limit: usize) -> String {
    let mut nodes = Vec::with_capacity(members.len());
    // (unix_time_s, member index, id, entry)
    let mut all: Vec<(u64, usize, u64, Value)> = Vec::new();
    for (index, member) in members.into_iter().enumerate() {
        let mut about = Map::new();
        about.insert("node".into(), Value::String(member.node.clone()));
        match member.log {
            Err(error) => {
                about.insert("error".into(), Value::String(error));
            }
            Ok(mut doc) => {
                for field in ["threshold_us", "len", "len_max"] {
                    about.insert(field.into(), doc.remove(field).unwrap_or(Value::Null));
                }
                let entries = match doc.remove("entries") {
                    Some(Value::Array(entries)) => entries,
                    _ => Vec::new(),
                };
                for mut entry in entries.into_iter().take(limit) {
                    let at = entry["unix_time_s"].as_u64().unwrap_or(0);
                    let id = entry["id"].as_u64().unwrap_or(0);
                    if let Value::Object(e) = &mut entry {
                        e.insert("node".into(), Value::String(member.node.clone()));
                    }
                    all.push((at, index, id, entry));
                }
            }
        }
        nodes.push(Value::Object(about));
    }
    all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
    all.truncate(limit);
    let entries: Vec<Value> = all.into_iter().map(|(.., e)| e).collect();
    assert!(entries.len() <= limit);
    serde_json::json!({"limit": limit, "nodes": nodes, "entries": entries}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(entries: &[(u64, u64)]) -> Map<String, Value> {
        let entries: Vec<Value> = entries
            .iter()
            .map(|&(id, at)| serde_json::json!({"id": id, "unix_time_s": at, "key": format!("k{id}")}))
            .collect();
        let text = serde_json::json!({"threshold_us": 0, "len": entries.len(), "len_max": 128, "entries": entries});
        check_member(text.to_string().as_bytes()).expect("a slow log")
    }

    /// Entries of every member merged newest first, each naming its node;
    /// a member without an answer is named, not fatal.
    #[test]
    fn merges_newest_first_naming_the_node() {
        let text = merge(
            vec![
                MemberLog {
                    node: "http://a".into(),
                    log: Ok(doc(&[(7, 100), (6, 90)])),
                },
                MemberLog {
                    node: "http://b".into(),
                    log: Err("connect: refused".into()),
                },
                MemberLog {
                    node: "http://c".into(),
                    log: Ok(doc(&[(3, 100), (2, 95), (1, 80)])),
                },
            ],
            4,
        );
        let v: Value = serde_json::from_str(&text).expect("JSON");
        let got: Vec<(String, u64)> = v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| {
                (
                    e["node"].as_str().unwrap_or("").to_owned(),
                    e["id"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let want = [
            ("http://a", 7),
            ("http://c", 3),
            ("http://c", 2),
            ("http://a", 6),
        ];
        let want: Vec<(String, u64)> = want.iter().map(|&(n, id)| (n.to_owned(), id)).collect();
        assert_eq!(
            got, want,
            "newest first, same second in member order, at most 4"
        );
        assert_eq!(v["nodes"][1]["error"], "connect: refused");
        assert_eq!(v["nodes"][0]["len_max"], 128);
        assert_eq!(v["nodes"][2]["len"], 3);
        assert_eq!(v["limit"], 4);
    }

    /// One node's entries keep their order (ids only grow) within a second.
    #[test]
    fn one_node_keeps_its_order() {
        let text = merge(
            vec![MemberLog {
                node: "http://a".into(),
                log: Ok(doc(&[(9, 5), (8, 5), (4, 5)])),
            }],
            10,
        );
        let v: Value = serde_json::from_str(&text).expect("JSON");
        let ids: Vec<u64> = v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["id"].as_u64())
            .collect();
        assert_eq!(ids, [9, 8, 4]);
    }

    /// A peer's answer that is no slow log is refused, never embedded.
    #[test]
    fn a_bad_member_log_is_refused() {
        for body in [
            &b"[]"[..],
            b"{}",
            b"{\"entries\":{}}",
            b"{\"entries\":[1]}",
            b"{\"entries\":[{\"id\":1}]}",
            b"{\"entries\":[{\"id\":-1,\"unix_time_s\":3}]}",
            b"{\"entries\":[]} junk",
            b"\xff",
        ] {
            assert!(check_member(body).is_err(), "{body:?}");
        }
        assert!(check_member(b"{\"entries\":[]}").is_ok());
    }
}
