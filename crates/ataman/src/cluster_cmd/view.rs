//! One node's answer to `GET /v0/cluster`, parsed leniently:
//!
//! ```json
//! {"self":"http://127.0.0.1:19234","layout_version":1,"read_version":1,"replication_factor":1,
//!  "nodes":[{"url":"http://127.0.0.1:19234","member":true,"state":"self","hints_pending":0,
//!            "hint_bytes":0,"sent":0,"failed":0}],
//!  "requests":{"get":0,"put":0,"delete":0}}
//! ```
//!
//! Unknown fields are ignored; a missing or mistyped counter reads as 0 and
//! a missing string as empty, so `status` keeps working while the node side
//! grows. Only an answer that is not a JSON object is an error.

use serde_json::Value;

/// Largest `/v0/cluster` answer read, in bytes (a cluster of many nodes
/// stays far below it).
pub const VIEW_BYTES_MAX: usize = 1024 * 1024;
/// Peers listed in one answer, at most (the rest are ignored).
pub const VIEW_NODES_MAX: usize = 1024;

/// How one node sees another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerView {
    /// The peer's URL as in `--cluster`.
    pub url: String,
    /// `self`, `up`, `connecting`, `down`, or whatever the node said.
    pub state: String,
    /// Writes held for the peer until it is reachable again.
    pub hints_pending: u64,
    /// Bytes of those hints.
    pub hint_bytes: u64,
    /// Requests sent to the peer.
    pub sent: u64,
    /// Requests to the peer that failed.
    pub failed: u64,
    /// True for a node that is a member of no live layout (`"member":
    /// false`: listed while hints are pending for it, or this node while it
    /// joins or after it was removed).
    pub not_member: bool,
}

/// Requests a node served as coordinator, by method, since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// `GET /v0/entity`.
    pub get: u64,
    /// `PUT /v0/entity`.
    pub put: u64,
    /// `DELETE /v0/entity`.
    pub delete: u64,
}

/// A node's whole answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// The answering node's own URL.
    pub self_url: String,
    /// The newest live layout version it runs with (0: not said).
    pub layout_version: u64,
    /// The version its reads use (below `layout_version` during a
    /// transition; 0: not said).
    pub read_version: u64,
    /// `R` of its live version with the fewest replicas (0: not said).
    pub replication_factor: u64,
    /// Every node of the cluster as the answering node sees it.
    pub nodes: Vec<PeerView>,
    /// The answering node's request counters.
    pub requests: RequestCounts,
}

/// Why an answer could not be read as a view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// The body is not JSON.
    #[error("the answer is not JSON: {0}")]
    Json(String),
    /// The body is JSON but not an object.
    #[error("the answer is not a JSON object")]
    NotObject,
    /// The body is larger than [`VIEW_BYTES_MAX`].
    #[error("the answer has {0} bytes, more than {VIEW_BYTES_MAX}")]
    TooLarge(usize),
}

fn counter(object: &Value, name: &str) -> u64 {
    object.get(name).and_then(Value::as_u64).unwrap_or(0)
}

fn text(object: &Value, name: &str) -> String {
    object
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl ClusterView {
    /// Parses a `/v0/cluster` body.
    pub fn parse(body: &[u8]) -> Result<ClusterView, ViewError> {
        if body.len() > VIEW_BYTES_MAX {
            return Err(ViewError::TooLarge(body.len()));
        }
        let value: Value =
            serde_json::from_slice(body).map_err(|e| ViewError::Json(e.to_string()))?;
        if !value.is_object() {
            return Err(ViewError::NotObject);
        }
        let nodes = value
            .get("nodes")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .take(VIEW_NODES_MAX)
                    .map(|node| PeerView {
                        url: text(node, "url"),
                        state: text(node, "state"),
                        hints_pending: counter(node, "hints_pending"),
                        hint_bytes: counter(node, "hint_bytes"),
                        sent: counter(node, "sent"),
                        failed: counter(node, "failed"),
                        not_member: node.get("member").and_then(Value::as_bool) == Some(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let requests = value
            .get("requests")
            .map(|r| RequestCounts {
                get: counter(r, "get"),
                put: counter(r, "put"),
                delete: counter(r, "delete"),
            })
            .unwrap_or_default();
        Ok(ClusterView {
            self_url: text(&value, "self"),
            layout_version: counter(&value, "layout_version"),
            read_version: counter(&value, "read_version"),
            replication_factor: counter(&value, "replication_factor"),
            nodes,
            requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented example parses field by field.
    #[test]
    fn parses_the_documented_format() {
        let body = br#"{"self":"http://127.0.0.1:19234","layout_version":3,"nodes":[
            {"url":"http://127.0.0.1:19234","state":"self","hints_pending":0,"hint_bytes":0,"sent":0,"failed":0},
            {"url":"http://127.0.0.1:19235","member":false,"state":"down","hints_pending":7,"hint_bytes":700,"sent":9,"failed":2}],
            "requests":{"get":1,"put":2,"delete":3}}"#;
        let view = ClusterView::parse(body).unwrap();
        assert_eq!(view.self_url, "http://127.0.0.1:19234");
        assert_eq!(view.layout_version, 3);
        assert_eq!(view.nodes.len(), 2);
        assert!(!view.nodes[0].not_member);
        assert_eq!(
            view.nodes[1],
            PeerView {
                url: "http://127.0.0.1:19235".into(),
                state: "down".into(),
                hints_pending: 7,
                hint_bytes: 700,
                sent: 9,
                failed: 2,
                not_member: true,
            }
        );
        assert_eq!(
            view.requests,
            RequestCounts {
                get: 1,
                put: 2,
                delete: 3
            }
        );
    }

    /// Unknown fields are ignored, missing or mistyped counters are 0.
    #[test]
    fn parses_leniently() {
        let body = br#"{"version":2,"nodes":[{"url":"http://a:1","state":"up","sent":"x","extra":[1]},{}]}"#;
        let view = ClusterView::parse(body).unwrap();
        assert_eq!(view.self_url, "");
        assert_eq!(view.nodes[0].url, "http://a:1");
        assert_eq!((view.nodes[0].sent, view.nodes[0].hints_pending), (0, 0));
        assert_eq!(view.nodes[1], PeerView::default());
        assert_eq!(view.requests, RequestCounts::default());
        assert_eq!(ClusterView::parse(b"{}").unwrap(), ClusterView::default());
    }

    /// Non-JSON, non-objects and oversized bodies are errors, not panics.
    #[test]
    fn rejects_what_is_not_a_view() {
        assert!(matches!(
            ClusterView::parse(b"not found"),
            Err(ViewError::Json(_))
        ));
        assert_eq!(ClusterView::parse(b"[1,2]"), Err(ViewError::NotObject));
        let big = vec![b' '; VIEW_BYTES_MAX + 1];
        assert_eq!(
            ClusterView::parse(&big),
            Err(ViewError::TooLarge(VIEW_BYTES_MAX + 1))
        );
    }
}
