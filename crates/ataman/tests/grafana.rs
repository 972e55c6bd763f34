//! The Grafana dashboard in the repository (`deploy/grafana/ataman.json`)
//! queries only metrics a running node exports: every `ataman_…` name in
//! its panels' expressions is a family on `/metrics` of a node of a
//! 2-node cluster that served a write (a histogram's `_bucket`, `_sum`
//! and `_count` count as its family).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::collections::BTreeSet;
use support::cluster::{TestCluster, body};

/// Every metric name the dashboard's expressions name.
fn queried(dashboard: &serde_json::Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("ataman_") {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
    }
    names
}

/// The families a `/metrics` page declares (`# TYPE name kind`) or has
/// samples of.
fn exported(page: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in page.lines() {
        let name = match line.strip_prefix("# TYPE ") {
            Some(rest) => rest.split(' ').next().unwrap_or_default(),
            None if line.starts_with('#') => continue,
            None => line.split(['{', ' ']).next().unwrap_or_default(),
        };
        names.insert(name.to_owned());
    }
    names
}

/// The queried names a page does not export.
fn missing(queried: &BTreeSet<String>, exported: &BTreeSet<String>) -> Vec<String> {
    queried
        .iter()
        .filter(|name| {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            !exported.contains(*name) && !exported.contains(family)
        })
        .cloned()
        .collect()
}

/// Every metric the dashboard queries is on a running node's `/metrics`;
/// a planted unknown name (the negative control) is reported missing.
#[test]
fn every_queried_metric_is_exported() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/ataman.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let names = queried(&dashboard);
    assert!(names.len() >= 20, "{names:?}");
    let cluster = TestCluster::start(2, &[]);
    let put = cluster.put(0, b"grafana", b"v", 2, 2).status;
    assert!(put == 200 || put == 201, "{put}");
    let r = cluster.node(0).get_target("/metrics");
    assert_eq!(r.status, 200);
    let page = exported(&body(&r));
    assert_eq!(missing(&names, &page), Vec::<String>::new());
    let mut planted = names.clone();
    planted.insert("ataman_no_such_metric_total".into());
    assert_eq!(missing(&planted, &page), ["ataman_no_such_metric_total"]);
}
