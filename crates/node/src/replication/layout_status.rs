//! `GET /v0/layout`: the layout this node runs with (docs/API.md,
//! "GET /v0/layout").
//!
//! ```text
//! {"version":1,"nodes":["http://...",...],"replication_factor":3,
//!  "self":"http://...","removed":false,"settled":true,
//!  "moving":[{"url":"http://...","keys_to_copy":0,"bytes_to_copy":0,
//!             "keys_copied":0,"bytes_copied":0},...]}
//! ```
//!
//! The node does not run layout transitions yet (docs/ARCHITECTURE.md,
//! "Membership"): it is always settled and moves nothing.

use crate::http::json::json_string;

/// The document for the layout `version` of `nodes` (any order; shown
/// sorted) with `replication_factor`, as node `self_url` sees it.
pub fn render_json(
    version: u64,
    nodes: &[String],
    replication_factor: usize,
    self_url: &str,
) -> String {
    let mut sorted: Vec<&String> = nodes.iter().collect();
    sorted.sort();
    let mut out = String::with_capacity(128 + 160 * nodes.len());
    out.push_str(&format!("{{\"version\":{version},\"nodes\":["));
    for (i, url) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, url);
    }
    out.push_str(&format!(
        "],\"replication_factor\":{replication_factor},\"self\":"
    ));
    json_string(&mut out, self_url);
    let removed = !nodes.iter().any(|n| n == self_url);
    out.push_str(&format!(
        ",\"removed\":{removed},\"settled\":true,\"moving\":["
    ));
    for (i, url) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"url\":");
        json_string(&mut out, url);
        out.push_str(
            ",\"keys_to_copy\":0,\"bytes_to_copy\":0,\"keys_copied\":0,\"bytes_copied\":0}",
        );
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document holds the fixed fields, members sorted, valid JSON
    /// shape (balanced, quoted URLs).
    #[test]
    fn document_shape() {
        let nodes = vec!["http://b:2".to_owned(), "http://a:1".to_owned()];
        let doc = render_json(3, &nodes, 2, "http://b:2");
        assert_eq!(
            doc,
            "{\"version\":3,\"nodes\":[\"http://a:1\",\"http://b:2\"],\"replication_factor\":2,\
             \"self\":\"http://b:2\",\"removed\":false,\"settled\":true,\"moving\":[\
             {\"url\":\"http://a:1\",\"keys_to_copy\":0,\"bytes_to_copy\":0,\"keys_copied\":0,\"bytes_copied\":0},\
             {\"url\":\"http://b:2\",\"keys_to_copy\":0,\"bytes_to_copy\":0,\"keys_copied\":0,\"bytes_copied\":0}]}"
        );
        assert!(render_json(1, &nodes, 1, "http://c:3").contains("\"removed\":true"));
    }
}
