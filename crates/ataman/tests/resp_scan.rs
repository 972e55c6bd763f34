//! RESP `SCAN` over a whole 3-node cluster (docs/RESP.md), on real
//! processes through a real client (the `redis` crate's scan iterator):
//! the keys it returns against a model of what was written through RESP
//! and HTTP and deleted, `MATCH`, `COUNT`, `TYPE`, unknown cursors,
//! pipelining, and Redis's guarantee while keys come and go.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::{Connection, ScanOptions, TypedCommands, Value};
use std::collections::BTreeSet;

use std::time::Duration;
use support::cluster::{TestCluster, assert_status};

/// Bound on any one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A 3-node cluster serving RESP on each node, and the RESP addresses.
fn cluster() -> (TestCluster, Vec<String>) {
    let addrs: Vec<String> = (0..3).map(|_| support::fixed_resp_addr()).collect();
    let cluster = TestCluster::start_each(3, &[], |i| {
        vec!["--resp-listen".to_string(), addrs[i].clone()]
    });
    (cluster, addrs)
}

fn connect(addr: &str) -> Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let con = client.get_connection().unwrap();
    con.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con
}

/// Every key a scan iterator returns (each once in the set) and how many
/// it returned in all.
fn scan_all(con: &mut Connection, opts: ScanOptions) -> (BTreeSet<Vec<u8>>, usize) {
    let mut keys = BTreeSet::new();
    let mut returned = 0;
    for key in con.scan_options::<Vec<u8>>(opts).unwrap() {
        keys.insert(key.unwrap());
        returned += 1;
    }
    (keys, returned)
}

/// One raw `SCAN` step: the next cursor and the page's keys.
fn step(con: &mut Connection, cursor: &str, options: &[&str]) -> (String, Vec<Vec<u8>>) {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor);
    for o in options {
        cmd.arg(*o);
    }
    let (cursor, keys): (String, Vec<Vec<u8>>) = cmd.query(con).unwrap();
    (cursor, keys)
}

/// 50,000 keys written through RESP (`MSET`, pipelined) and HTTP, some
/// deleted through both: a full `SCAN` from another node returns exactly
/// the live ones, each once; `MATCH`, `COUNT` and `TYPE` filter and bound
/// pages; an unknown cursor is a clear error.
#[test]
fn scan_over_50000_keys_on_three_nodes_equals_the_model() {
    const KEYS: usize = 50_000;
    const HTTP_KEYS: usize = 300;
    const MSET_KEYS: usize = 500;
    let (cluster, addrs) = cluster();
    let mut model = BTreeSet::new();
    let mut writer = connect(&addrs[0]);
    let resp_keys: Vec<String> = (HTTP_KEYS..KEYS).map(|i| format!("k{i:05}")).collect();
    for chunk in resp_keys.chunks(MSET_KEYS) {
        let mut mset = redis::cmd("MSET");
        for key in chunk {
            mset.arg(key).arg("v");
        }
        mset.exec(&mut writer).unwrap();
    }
    model.extend(resp_keys.iter().map(|k| k.as_bytes().to_vec()));
    for i in 0..HTTP_KEYS {
        let key = format!("k{i:05}");
        assert_status(&cluster.put(i % 3, key.as_bytes(), b"h", 2, 3), 201, "put");
        model.insert(key.into_bytes());
    }
    // Deletes: every 10th key through RESP, every 7th HTTP key through HTTP.
    let deleted: Vec<String> = (0..KEYS).step_by(10).map(|i| format!("k{i:05}")).collect();
    for chunk in deleted.chunks(MSET_KEYS) {
        redis::cmd("DEL").arg(chunk).exec(&mut writer).unwrap();
    }
    for key in &deleted {
        model.remove(key.as_bytes());
    }
    for i in (1..HTTP_KEYS).step_by(7) {
        let key = format!("k{i:05}");
        assert_status(&cluster.delete(1, key.as_bytes(), 2, 3), 202, "delete");
        model.remove(key.as_bytes());
    }

    let mut reader = connect(&addrs[1]);
    let (keys, returned) = scan_all(&mut reader, ScanOptions::default().with_count(1000));
    assert_eq!(keys.len(), model.len(), "keys returned");
    assert!(keys == model, "SCAN's keys differ from the model");
    assert_eq!(returned, model.len(), "no key returned twice");

    // MATCH filters pages: exactly the model's matching keys.
    let opts = ScanOptions::default()
        .with_count(1000)
        .with_pattern("k1?3*");
    let (matched, _) = scan_all(&mut reader, opts);
    let expected: BTreeSet<Vec<u8>> = model
        .iter()
        .filter(|k| k[1] == b'1' && k[3] == b'3')
        .cloned()
        .collect();
    assert!(!expected.is_empty());
    assert!(matched == expected, "MATCH's keys differ from the model");
    // A page may come back empty with a non-zero cursor, as in Redis.
    let (cursor, page) = step(&mut reader, "0", &["COUNT", "5", "MATCH", "nothing*"]);
    assert!(page.is_empty() && cursor != "0", "{cursor} {page:?}");

    // COUNT bounds a page; pages resume where the last ended; the default is 10.
    let (cursor, first) = step(&mut reader, "0", &["COUNT", "7"]);
    let model_order: Vec<&Vec<u8>> = model.iter().collect();
    assert_eq!(first.iter().collect::<Vec<_>>(), model_order[..7]);
    let (_, second) = step(&mut reader, &cursor, &["count", "7"]);
    assert_eq!(second.iter().collect::<Vec<_>>(), model_order[7..14]);
    let (_, default) = step(&mut reader, "0", &[]);
    assert_eq!(default.len(), 10);
    // A cursor resumes on any connection to the node that gave it.
    let (_, again) = step(&mut connect(&addrs[1]), &cursor, &["COUNT", "7"]);
    assert_eq!(again, second);

    // TYPE: every value is a string.
    let (cursor, page) = step(&mut reader, "0", &["TYPE", "hash"]);
    assert!(cursor == "0" && page.is_empty());
    let (_, page) = step(&mut reader, "0", &["TYPE", "string", "COUNT", "3"]);
    assert_eq!(page.len(), 3);

    // Unknown cursors and bad arguments: clear errors.
    let e = redis::cmd("SCAN")
        .arg("123456789")
        .query::<Value>(&mut reader)
        .unwrap_err();
    assert!(e.to_string().contains("invalid cursor"), "{e}");
    assert!(
        e.to_string().contains("restart the iteration from 0"),
        "{e}"
    );
    for bad in [&["x"][..], &["0", "COUNT", "0"], &["0", "MATCH"]] {
        let mut cmd = redis::cmd("SCAN");
        for a in bad {
            cmd.arg(*a);
        }
        assert!(cmd.query::<Value>(&mut reader).is_err(), "{bad:?}");
    }
    let e = redis::cmd("KEYS").arg("*").query::<Value>(&mut reader);
    assert!(e.unwrap_err().to_string().contains("SCAN"));
}

/// Redis's guarantee: a key present for the whole iteration is returned,
/// while other keys are added and deleted between pages; every key
/// returned existed at some point; pipelined commands around a `SCAN` are
/// answered in order.
#[test]
fn keys_present_throughout_are_returned_while_others_come_and_go() {
    const STABLE: usize = 1500;
    const CHURN: usize = 1500;
    let (_cluster, addrs) = cluster();
    let mut writer = connect(&addrs[2]);
    for i in 0..STABLE {
        redis::cmd("MSET")
            .arg(format!("s{i:04}"))
            .arg("v")
            .arg(format!("g{i:04}"))
            .arg("v")
            .exec(&mut writer)
            .unwrap();
    }
    let stable: BTreeSet<Vec<u8>> = (0..STABLE)
        .map(|i| format!("s{i:04}").into_bytes())
        .collect();
    let mut ever: BTreeSet<Vec<u8>> = stable.clone();
    ever.extend((0..STABLE).map(|i| format!("g{i:04}").into_bytes()));

    let mut reader = connect(&addrs[0]);
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut churned = 0;
    for page_index in 0..=(3 * (STABLE + CHURN)) {
        let (next, keys) = step(&mut reader, &cursor, &["COUNT", "40"]);
        seen.extend(keys);
        // Between pages: delete some `g` keys, add some `a`…`z` keys, on
        // both sides of where the scan is.
        let mut pipe = redis::pipe();
        for _ in 0..10 {
            if churned < CHURN {
                pipe.cmd("DEL").arg(format!("g{churned:04}")).ignore();
                for prefix in ["a", "t"] {
                    let key = format!("{prefix}{churned:04}");
                    pipe.cmd("SET").arg(&key).arg("new").ignore();
                    ever.insert(key.into_bytes());
                }
                churned += 1;
            }
        }
        pipe.exec(&mut writer).unwrap();
        if next == "0" {
            break;
        }
        assert!(page_index < 3 * (STABLE + CHURN), "the scan did not end");
        cursor = next;
    }
    let missing: Vec<_> = stable.difference(&seen).take(5).collect();
    assert!(missing.is_empty(), "stable keys not returned: {missing:?}");
    let strangers: Vec<_> = seen.difference(&ever).take(5).collect();
    assert!(strangers.is_empty(), "keys never written: {strangers:?}");

    // Pipelining: the SCAN's reply comes between the commands around it.
    let replies: (String, (String, Vec<Vec<u8>>), Option<String>) = redis::pipe()
        .cmd("SET")
        .arg("s0000")
        .arg("w")
        .cmd("SCAN")
        .arg("0")
        .arg("COUNT")
        .arg("2")
        .cmd("GET")
        .arg("s0000")
        .query(&mut reader)
        .unwrap();
    assert_eq!(replies.0, "OK");
    assert_eq!(replies.1.1.len(), 2);
    assert_eq!(replies.2.as_deref(), Some("w"));
}

/// One node alone: the default `COUNT` (10) pages through every key, in
/// RESP3 as in RESP2.
#[test]
fn a_single_node_scans_with_the_default_count() {
    let addr = support::fixed_resp_addr();
    let _node = support::Node::start(&["--resp-listen", addr.as_str()]);
    let mut con = connect(&addr);
    let model: BTreeSet<Vec<u8>> = (0..25).map(|i| format!("one{i}").into_bytes()).collect();
    for key in &model {
        redis::cmd("SET").arg(key).arg("v").exec(&mut con).unwrap();
    }
    let (keys, returned) = scan_all(&mut con, ScanOptions::default());
    assert!(keys == model && returned == model.len(), "{keys:?}");
    let client = redis::Client::open(format!("redis://{addr}/?protocol=resp3")).unwrap();
    let mut resp3 = client.get_connection().unwrap();
    resp3.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    let (keys, _) = scan_all(&mut resp3, ScanOptions::default().with_pattern("one1*"));
    let expected: BTreeSet<Vec<u8>> = model
        .iter()
        .filter(|k| k.starts_with(b"one1"))
        .cloned()
        .collect();
    assert!(keys == expected, "{keys:?}");
}
