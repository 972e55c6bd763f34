//! Hot keys (docs/API.md "Hot keys", docs/RESP.md "ATAMAN.HOTKEYS") on
//! real nodes: a key the load made hot is the top key of a node's report
//! and of the cluster's merged through any node, with its replicas; the
//! RESP command reports the same keys, binary ones exact.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::Value;
use serde_json::Value as Json;
use std::time::Duration;
use support::Node;
use support::cluster::{TestCluster, eventually};
use support::resp_client::ok;

/// Bound on every wait below.
const WAIT: Duration = Duration::from_secs(60);
/// Requests in one round of load (a third of them on the hot key).
const ROUND: usize = 150;

fn json(node: &Node, target: &str) -> Json {
    let r = node.get_target(target);
    assert_eq!(
        r.status,
        200,
        "{target}: {}",
        String::from_utf8_lossy(&r.body)
    );
    serde_json::from_slice(&r.body).unwrap()
}

/// One round of load through the nodes `vias`, in turn (the windows are
/// 1 to 2 s long: every node's traffic is recent when the round ends):
/// every third request writes or reads `hot`, the others write keys of
/// their own.
fn load(cluster: &TestCluster, vias: &[usize], round: usize, hot: &[u8]) {
    for i in 0..ROUND {
        let via = vias[(i + i / 3) % vias.len()];
        let r = if i % 3 == 0 {
            if i % 2 == 0 {
                cluster.put(via, hot, b"v", 1, 2)
            } else {
                cluster.get(via, hot, 1, 2)
            }
        } else {
            let key = format!("cold:{via}:{round}:{i}");
            cluster.put(via, key.as_bytes(), b"v", 1, 2)
        };
        assert!(matches!(r.status, 200 | 201 | 404), "{}", r.status);
    }
}

fn top_key(report: &Json) -> Option<&str> {
    report["keys"].get(0)?["key"].as_str()
}

/// Under a load a third of which is on one key, that key is the top key
/// of each node's report and of the cluster report asked through any
/// node, which sums every node's samples and names the key's replicas.
#[test]
fn the_hot_key_tops_node_and_cluster_reports() {
    let cluster = TestCluster::start(3, &["--replication-factor", "2"]);
    let hot = b"hot:key";
    let mut round = 0;
    let mut last = Json::Null;
    eventually(
        "the cluster report through node 2 tops the hot key",
        WAIT,
        || {
            load(&cluster, &[0, 1, 2], round, hot);
            round += 1;
            last = json(cluster.node(2), "/v0/hotkeys?cluster=1&limit=5");
            top_key(&last) == Some("hot:key")
                && last["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|n| n["samples"].as_u64() > Some(0))
        },
    );
    let nodes = last["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{last}");
    let summed: u64 = nodes.iter().map(|n| n["samples"].as_u64().unwrap()).sum();
    assert_eq!(last["samples"].as_u64().unwrap(), summed, "{last}");
    let key = &last["keys"][0];
    assert_eq!(key["key_hex"], "686f743a6b6579");
    let (share, error) = (
        key["share"].as_f64().unwrap(),
        key["share_error"].as_f64().unwrap(),
    );
    assert!(share > 0.0 && share <= 1.0 && error <= share, "{key}");
    let mut replicas: Vec<String> = key["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_owned())
        .collect();
    replicas.sort();
    let mut expected: Vec<String> = cluster
        .replicas(hot, 2)
        .into_iter()
        .map(|i| cluster.urls()[i].clone())
        .collect();
    expected.sort();
    assert_eq!(replicas, expected, "{key}");
    assert!(last["keys"].as_array().unwrap().len() <= 5);
    // Each node's own report tops it too, and counts only its samples.
    eventually("node 1's own report tops the hot key", WAIT, || {
        load(&cluster, &[1], round, hot);
        round += 1;
        let own = json(cluster.node(1), "/v0/hotkeys");
        own["node"] == cluster.urls()[1].as_str() && top_key(&own) == Some("hot:key")
    });
}

/// `ATAMAN.HOTKEYS` names the same hot key as `GET /v0/hotkeys`, a binary
/// key exact (and escaped in the JSON), with its share and replicas; a
/// bad count is an error.
#[test]
fn resp_command_reports_binary_keys_exactly() {
    let addr = support::fixed_resp_addr();
    let node = Node::start(&["--resp-listen", &addr]);
    let mut con = support::resp_client::connect(&addr, false, WAIT);
    let hot = b"bin\x00\xff\"key";
    let mut report = Json::Null;
    let mut round = 0;
    eventually("the binary key tops the report", WAIT, || {
        for i in 0..ROUND {
            let key: Vec<u8> = if i % 2 == 0 {
                hot.to_vec()
            } else {
                format!("cold:{round}:{i}").into_bytes()
            };
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg("v")
                .query(&mut con)
                .unwrap();
        }
        round += 1;
        report = json(&node, "/v0/hotkeys?limit=3");
        report["keys"].get(0).map(|k| k["key_hex"].clone()) == Some("62696e00ff226b6579".into())
    });
    assert_eq!(report["keys"][0]["key"], "bin\u{0}\u{fffd}\"key");
    let reply = ok(&mut con, &["ATAMAN.HOTKEYS", "3"]);
    let Value::Array(fields) = reply else {
        panic!("not an array: {reply:?}")
    };
    let names: Vec<String> = fields
        .iter()
        .step_by(2)
        .map(|v| match v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "window_ms",
            "sample_every",
            "samples",
            "unlisted_share_max",
            "keys"
        ]
    );
    let Value::Array(keys) = &fields[9] else {
        panic!("{:?}", fields[9])
    };
    assert!(!keys.is_empty() && keys.len() <= 3);
    let Value::Array(first) = &keys[0] else {
        panic!("{:?}", keys[0])
    };
    // Windows may have moved on between the two reads: the key, not its share.
    let hot_again = keys
        .iter()
        .any(|k| matches!(k, Value::Array(f) if f[0] == Value::BulkString(hot.to_vec())));
    assert!(hot_again, "{keys:?}");
    assert_eq!(first.len(), 4, "{first:?}");
    assert!(
        matches!(&first[3], Value::Array(r) if r.len() == 1),
        "{first:?}"
    );
    for bad in [
        &["ATAMAN.HOTKEYS", "0"][..],
        &["ATAMAN.HOTKEYS", "x"],
        &["ATAMAN.HOTKEYS", "1", "2"],
    ] {
        assert!(support::resp_client::run(&mut con, bad).is_err(), "{bad:?}");
    }
}
