//! The stored layout on real processes (docs/API.md, "Layout"): a node
//! started with `--cluster` bootstraps version 1 and serves it on
//! `GET /v0/layout` (and `ataman_layout_version` on `/metrics`); a restart with a list naming other nodes logs that
//! the list is stale and keeps the stored layout.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use support::{Conn, Node};

fn urls(ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect()
}

fn write_config(path: &std::path::Path, cluster: &[String]) {
    let text = format!(
        "cluster = \"{}\"\nself = \"{}\"\n",
        cluster.join(","),
        cluster[0]
    );
    std::fs::write(path, text).unwrap();
}

fn layout_of(node: &Node) -> String {
    let r = Conn::open(node.addr()).request("GET", "/v0/layout", &[], None);
    assert_eq!(r.status, 200, "GET /v0/layout");
    String::from_utf8(r.body).unwrap()
}

fn nodes_json(urls: &[String]) -> String {
    let quoted: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!("\"nodes\":[{}]", quoted.join(","))
}

/// Version 1 from the list; a restart with a four-node list keeps the
/// stored three-node layout and says the list is stale.
#[test]
fn a_stale_cluster_list_keeps_the_stored_layout() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.toml");
    // Peers on ports nothing listens on: the node serves without them.
    let three = urls(&[1, 2, 3]);
    write_config(&config, &three);
    let mut node = Node::start_logged(&["--config", config.to_str().unwrap()]);
    let doc = layout_of(&node);
    assert!(doc.starts_with("{\"version\":1,"), "{doc}");
    assert!(doc.contains(&nodes_json(&three)), "{doc}");
    assert!(doc.contains("\"replication_factor\":3"), "{doc}");
    assert!(doc.contains("\"settled\":true"), "{doc}");
    assert!(node.data_dir().join("LAYOUT").exists());
    assert!(!node.log().contains("stale"), "no stale list yet");
    let metrics = Conn::open(node.addr()).request("GET", "/metrics", &[], None);
    let metrics = String::from_utf8(metrics.body).unwrap();
    assert!(metrics.contains("\nataman_layout_version 1\n"), "{metrics}");

    // `ataman ctl layout show` prints the same layout as text.
    let url = format!("http://{}", node.addr());
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["ctl", "layout", "show", "--url", &url])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{shown:?}");
    assert_eq!(
        String::from_utf8(shown.stdout).unwrap(),
        format!(
            "layout version 1, replication factor 3, settled\n{} (node id 0, this node)\n{} (node id 1)\n{} (node id 2)\n",
            three[0], three[1], three[2]
        )
    );

    node.terminate();
    let four = urls(&[1, 2, 3, 4]);
    write_config(&config, &four);
    node.restart();
    let doc = layout_of(&node);
    assert!(
        doc.contains(&nodes_json(&three)),
        "the stored layout won: {doc}"
    );
    assert!(doc.contains("\"replication_factor\":3"), "{doc}");
    assert!(
        node.log()
            .contains("the --cluster list is stale: the stored layout wins"),
        "{}",
        node.log()
    );
}
