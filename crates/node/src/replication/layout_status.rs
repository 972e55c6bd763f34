//! `GET /v0/layout`: the layout this node runs with (docs/API.md,
//! "GET /v0/layout").
//!
//! ```text
//! {"version":1,"nodes":["http://...",...],"replication_factor":3,
//!  "self":"http://...","removed":false,"settled":true,
//!  "next":null,"live_versions":[1],
//!  "moving":[{"url":"http://...","keys_to_copy":0,"bytes_to_copy":0,
//!             "keys_copied":0,"bytes_copied":0},...]}
//! ```
//!
//! `"next"` is the chosen next version while a transition is under way
//! (else `null`), `"live_versions"` the versions of the node's live
//! history, and `"settled"` true when one version is live (a single node,
//! which keeps no history, always is). Nothing is counted as moving yet.

use crate::cluster::history::History;

use crate::http::json::json_string;

/// The document for the layout `version` of `nodes` (any order; shown
/// sorted) with `replication_factor`, as node `self_url` sees it.
pub fn render_json(
    version: u64,
    nodes: &[String],
    ids: &[u16],
    replication_factor: usize,
    self_url: &str,
    history: Option<&History>,
) -> String {
    let mut sorted: Vec<(&String, Option<&u16>)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n, ids.get(i)))
        .collect();
    sorted.sort();
    let mut out = String::with_capacity(128 + 160 * nodes.len());
    out.push_str(&format!("{{\"version\":{version},\"nodes\":["));
    for (i, (url, _)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, url);
    }
    // Each member's node id (its clock's node bits, `cluster::node_ids`).
    out.push_str("],\"node_ids\":{");
    for (i, (url, id)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, url);
        match id {
            Some(id) => out.push_str(&format!(":{id}")),
            None => out.push_str(":null"),
        }
    }
    out.push_str(&format!(
        "}},\"replication_factor\":{replication_factor},\"self\":"
    ));
    json_string(&mut out, self_url);
    let removed = !nodes.iter().any(|n| n == self_url);
    let live: Vec<u64> = history.map_or_else(
        || vec![version],
        |h| h.live().iter().map(|l| l.version).collect(),
    );
    let settled = live.len() == 1;
    let next = match history {
        Some(h) if h.in_transition() => h.current().version.to_string(),
        _ => "null".to_owned(),
    };
    let live: Vec<String> = live.iter().map(u64::to_string).collect();
    out.push_str(&format!(
        ",\"removed\":{removed},\"settled\":{settled},\"next\":{next},\"live_versions\":[{}],\"moving\":[",
        live.join(",")
    ));
    for (i, (url, _)) in sorted.iter().enumerate() {
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
        let doc = render_json(3, &nodes, &[7, 4], 2, "http://b:2", None);
        assert_eq!(
            doc,
            "{\"version\":3,\"nodes\":[\"http://a:1\",\"http://b:2\"],\"node_ids\":{\"http://a:1\":4,\"http://b:2\":7},\"replication_factor\":2,\
             \"self\":\"http://b:2\",\"removed\":false,\"settled\":true,\"next\":null,\"live_versions\":[3],\"moving\":[\
             {\"url\":\"http://a:1\",\"keys_to_copy\":0,\"bytes_to_copy\":0,\"keys_copied\":0,\"bytes_copied\":0},\
             {\"url\":\"http://b:2\",\"keys_to_copy\":0,\"bytes_to_copy\":0,\"keys_copied\":0,\"bytes_copied\":0}]}"
        );
        assert!(
            render_json(1, &nodes, &[0, 1], 1, "http://c:3", None).contains("\"removed\":true")
        );
    }

    /// In transition the document names the next version and both live
    /// ones, and is not settled; settled again once one is live.
    #[test]
    fn transition_fields() {
        use crate::cluster::layout::{Change, Layout};
        let nodes = vec!["http://a:1".to_owned(), "http://b:2".to_owned()];
        let v1 = Layout::new(1, nodes.clone(), 2).unwrap();
        let mut h = History::settled(v1.clone());
        let doc = render_json(1, &nodes, &v1.ids, 2, "http://a:1", Some(&h));
        assert!(
            doc.contains("\"settled\":true,\"next\":null,\"live_versions\":[1],"),
            "{doc}"
        );
        let change = Change {
            add: vec!["http://c:3".into()],
            ..Change::default()
        };
        h.begin(v1.apply(&change).unwrap()).unwrap();
        let doc = render_json(1, &nodes, &v1.ids, 2, "http://a:1", Some(&h));
        assert!(
            doc.contains("\"settled\":false,\"next\":2,\"live_versions\":[1,2],"),
            "{doc}"
        );
    }
}
