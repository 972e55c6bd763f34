//! The slow log (docs/RESP.md "Slow log", docs/API.md "GET /v0/slowlog")
//! on real nodes: requests made slow on purpose (a threshold of 0, a slow
//! disk through `--fault-control`, a delayed replica behind a fault
//! proxy) read back through `SLOWLOG GET` and `GET /v0/slowlog`, with
//! their stages and the slowest replica named and never a value; and the
//! reply's shape compared field by field with a real `redis-server`, and
//! read by `redis-cli`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::LinkMode;
use redis::{Connection, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use support::Node;
use support::cluster::TestCluster;
use support::resp_client::{ok, run};

/// Bound on any one reply, and on every wait below.
const WAIT: Duration = Duration::from_secs(30);
/// The slow disk's delay per sync (`sync_delay_ms`).
const SYNC_DELAY_MS: u64 = 150;
/// The delay the fault proxy adds to the traffic to the slow replica.
const REPLICA_DELAY_MS: u64 = 300;

fn connect(addr: &str) -> Connection {
    support::resp_client::connect(addr, false, WAIT)
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn entries(v: Value) -> Vec<Vec<Value>> {
    let Value::Array(entries) = v else {
        panic!("SLOWLOG GET is not an array: {v:?}")
    };
    entries
        .into_iter()
        .map(|e| match e {
            Value::Array(fields) => fields,
            other => panic!("an entry is not an array: {other:?}"),
        })
        .collect()
}

/// The entry's argument array as text.
fn args_of(entry: &[Value]) -> Vec<String> {
    match &entry[3] {
        Value::Array(args) => args.iter().map(text).collect(),
        other => panic!("arguments are not an array: {other:?}"),
    }
}

/// This connection's `ip:port`, as the node sees it (`CLIENT INFO`).
fn client_addr(con: &mut Connection) -> String {
    let info = text(&ok(con, &["CLIENT", "INFO"]));
    let addr = info
        .split_whitespace()
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap();
    addr.to_owned()
}

/// `GET /v0/slowlog` as text.
fn slowlog_json(node: &Node, query: &str) -> String {
    let r = node.get_target(&format!("/v0/slowlog{query}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    String::from_utf8(r.body).unwrap()
}

/// The JSON entries (objects) of a `/v0/slowlog` document, as text.
fn json_entries(doc: &str) -> Vec<String> {
    doc.split("{\"id\":")
        .skip(1)
        .map(|e| format!("{{\"id\":{e}"))
        .collect()
}

/// True when `text` (a slow-log reply or document) holds `value`.
fn leaks(text: &str, value: &str) -> bool {
    text.contains(value)
}

/// The number after `"name":` in `object`.
fn json_number(object: &str, name: &str) -> i64 {
    let at = object.find(&format!("\"{name}\":")).unwrap() + name.len() + 3;
    let digits: String = object[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().unwrap()
}

/// Through RESP and HTTP on one node: a threshold of 0 records every key
/// command with its key, value size and client, never the value; the
/// settings change at run time (`CONFIG SET`, `POST /v0/slowlog`); a
/// smaller max-len drops the oldest; `RESET` empties; a negative
/// threshold records nothing; and at the default threshold a write on a
/// slow disk is recorded with a duration of at least the disk's delay.
#[test]
fn slow_requests_read_back_through_resp_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("fault-control");
    std::fs::write(&control, "sync_delay_ms=0\n").unwrap();
    let addr = support::fixed_resp_addr();
    let node = Node::start(&[
        "--resp-listen",
        &addr,
        "--fault-control",
        control.to_str().unwrap(),
    ]);
    let mut con = connect(&addr);
    let me = client_addr(&mut con);
    assert_eq!(
        ok(&mut con, &["CONFIG", "GET", "slowlog-*"]),
        Value::Array(vec![
            Value::BulkString(b"slowlog-log-slower-than".to_vec()),
            Value::BulkString(b"10000".to_vec()),
            Value::BulkString(b"slowlog-max-len".to_vec()),
            Value::BulkString(b"128".to_vec()),
        ])
    );
    assert_eq!(
        ok(&mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        Value::Okay
    );
    assert_eq!(
        ok(
            &mut con,
            &["SET", "resp:key", "secret-value-1", "EX", "100"]
        ),
        Value::Okay
    );
    assert_eq!(node.put(b"http:key", b"secret-value-22").status, 201);
    // RESP: the SET, its key, its value's size, this connection.
    let got = entries(ok(&mut con, &["SLOWLOG", "GET", "-1"]));
    let set = got
        .iter()
        .find(|e| args_of(e).first().is_some_and(|a| a == "set"))
        .unwrap_or_else(|| panic!("no SET in {got:?}"));
    assert_eq!(set.len(), 6);
    assert_eq!(
        args_of(set),
        [
            "set",
            "resp:key",
            "(value of 14 bytes)",
            "... (2 more arguments)"
        ]
    );
    assert!(int(&set[2]) >= 0);
    assert_eq!(text(&set[4]), me);
    assert_eq!(text(&set[5]), "");
    let ids: Vec<i64> = got.iter().map(|e| int(&e[0])).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    // HTTP: the PUT, and the RESP SET, with sizes, never a value.
    let doc = slowlog_json(&node, "");
    assert!(doc.contains("\"command\":\"PUT /v0/entity\""), "{doc}");
    assert!(doc.contains("\"key\":\"http:key\""), "{doc}");
    assert!(doc.contains("\"value_bytes\":15"), "{doc}");
    assert!(doc.contains("\"key\":\"resp:key\""), "{doc}");
    assert!(
        !leaks(&doc, "secret-value"),
        "a value in the slow log: {doc}"
    );
    assert!(!leaks(&format!("{got:?}"), "secret-value"));
    assert_eq!(json_entries(&slowlog_json(&node, "?limit=1")).len(), 1);
    // A smaller max-len drops the oldest at once; RESET empties.
    let len = int(&ok(&mut con, &["SLOWLOG", "LEN"]));
    assert!(len >= 2, "{len}");
    ok(&mut con, &["CONFIG", "SET", "slowlog-max-len", "1"]);
    assert_eq!(int(&ok(&mut con, &["SLOWLOG", "LEN"])), 1);
    assert_eq!(ok(&mut con, &["SLOWLOG", "RESET"]), Value::Okay);
    assert_eq!(int(&ok(&mut con, &["SLOWLOG", "LEN"])), 0);
    // Off: nothing recorded.
    ok(&mut con, &["CONFIG", "SET", "slowlog-max-len", "128"]);
    ok(
        &mut con,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    );
    ok(&mut con, &["SET", "off", "v"]);
    assert_eq!(node.put(b"off", b"v").status, 201);
    assert_eq!(int(&ok(&mut con, &["SLOWLOG", "LEN"])), 0);
    // The default threshold, set over HTTP, and a slow disk: a write
    // takes at least the sync delay and is recorded.
    let r = node.conn().request(
        "POST",
        "/v0/slowlog?threshold_us=10000&max_len=128",
        &[],
        Some(b""),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    std::fs::write(&control, format!("sync_delay_ms={SYNC_DELAY_MS}\n")).unwrap();
    let started = Instant::now();
    // Once the hook applies the delay (it polls its file), every write
    // takes at least the delay, and is recorded.
    loop {
        ok(&mut con, &["SET", "slow:disk", "v"]);
        let got = entries(ok(&mut con, &["SLOWLOG", "GET", "-1"]));
        let slowest = got
            .iter()
            .filter(|e| args_of(e).get(1).is_some_and(|k| k == "slow:disk"))
            .map(|e| int(&e[2]))
            .max();
        if slowest.is_some_and(|us| us >= (SYNC_DELAY_MS * 1000) as i64) {
            break;
        }
        assert!(started.elapsed() < WAIT, "no slow write recorded: {got:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let doc = slowlog_json(&node, "");
    let http = json_entries(&doc);
    assert!(
        http.iter()
            .any(|e| e.contains("slow:disk") && json_number(e, "duration_us") >= 150_000),
        "{doc}"
    );
    // Reset over HTTP.
    let r = node
        .conn()
        .request("POST", "/v0/slowlog?reset=1", &[], Some(b""));
    assert_eq!(r.status, 200);
    assert!(slowlog_json(&node, "").contains("\"len\":0"));
    let r = node.conn().request("POST", "/v0/slowlog", &[], Some(b""));
    assert_eq!(r.status, 400, "a POST without a change is refused");
}

/// The negative control of "never a value": with the planted bug
/// `slowlog-keeps-value` (an HTTP write's value kept where its key
/// belongs) the same check finds the value.
#[test]
fn the_value_check_catches_a_planted_leak() {
    let node = Node::start(&["--debug-planted-bug", "slowlog-keeps-value"]);
    let r = node
        .conn()
        .request("POST", "/v0/slowlog?threshold_us=0", &[], Some(b""));
    assert_eq!(r.status, 200);
    assert_eq!(node.put(b"http:key", b"secret-value-22").status, 201);
    let doc = slowlog_json(&node, "");
    assert!(
        leaks(&doc, "secret-value-22"),
        "the plant did not leak: {doc}"
    );
}

/// A 3-node cluster with the traffic to node 2 delayed: a write on node 0
/// waiting for all three replicas (RESP and HTTP) is recorded there with
/// three replica answers, node 2 named the slowest, its answer at least
/// the delay after it was asked.
#[test]
fn the_slowest_replica_is_named() {
    let addr = support::fixed_resp_addr();
    // The delay holds each direction: a round trip to node 2 takes twice
    // it, well within the replication timeout.
    let cluster = TestCluster::start_each(3, &["--replication-timeout-ms", "20000"], |i| {
        if i == 0 {
            vec!["--resp-listen".into(), addr.clone()]
        } else {
            Vec::new()
        }
    });
    let node = cluster.node(0);
    let r = node
        .conn()
        .request("POST", "/v0/slowlog?threshold_us=0", &[], Some(b""));
    assert_eq!(r.status, 200);
    cluster
        .proxy(2)
        .set_mode(LinkMode::Delay(Duration::from_millis(REPLICA_DELAY_MS)));
    let mut con = connect(&addr);
    ok(&mut con, &["ATAMAN.REPLICATION", "3", "3"]);
    assert_eq!(ok(&mut con, &["SET", "resp:slow", "v"]), Value::Okay);
    assert_eq!(cluster.put(0, b"http:slow", b"v", 3, 3).status, 201);
    cluster.proxy(2).set_mode(LinkMode::Pass);
    let doc = slowlog_json(node, "");
    let slow_url = &cluster.urls()[2];
    for key in ["resp:slow", "http:slow"] {
        let entry = json_entries(&doc)
            .into_iter()
            .find(|e| e.contains(&format!("\"key\":\"{key}\"")))
            .unwrap_or_else(|| panic!("{key} not in {doc}"));
        assert_eq!(entry.matches("\"answer_us\":").count(), 3, "{entry}");
        assert!(
            entry.contains(&format!("\"slowest_replica\":\"{slow_url}\"")),
            "{entry}"
        );
        let at = entry.find(&format!("{{\"node\":\"{slow_url}\"")).unwrap();
        assert!(
            json_number(&entry[at..], "answer_us") >= (REPLICA_DELAY_MS * 1000) as i64,
            "{entry}"
        );
        assert!(json_number(&entry, "queue_us") >= 0);
    }
}

/// The shape of a reply: its types, recursively (an array's elements
/// each), not its values.
fn shape(v: &Value) -> String {
    match v {
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Int(_) => "int".into(),
        Value::BulkString(_) => "bulk".into(),
        Value::SimpleString(_) | Value::Okay => "simple".into(),
        Value::Nil => "nil".into(),
        other => format!("{other:?}"),
    }
}

/// The fields of two `SLOWLOG GET` entries whose types differ (empty:
/// the same shape), field by field.
fn entry_differences(ours: &[Value], theirs: &[Value]) -> Vec<String> {
    let mut diffs = Vec::new();
    if ours.len() != theirs.len() {
        diffs.push(format!("{} fields, Redis {}", ours.len(), theirs.len()));
    }
    let names = ["id", "time", "duration", "arguments", "client", "name"];
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let (sa, sb) = (shape(a), shape(b));
        // Arguments: an array of bulk strings, however many.
        let (sa, sb) = if i == 3 {
            (sa.replace(",bulk", ""), sb.replace(",bulk", ""))
        } else {
            (sa, sb)
        };
        if sa != sb {
            diffs.push(format!("{}: {sa}, Redis {sb}", names[i.min(5)]));
        }
    }
    diffs
}

/// `SLOWLOG GET`, `LEN`, `RESET`, `HELP` and `CONFIG GET slowlog-*` against
/// ataman and a real redis-server: the same shape field by field, the
/// same error words; `redis-cli slowlog get` reads ataman's. The
/// comparison is shown catching a wrong shape first.
#[test]
fn slowlog_replies_have_the_shape_of_redis() {
    let redis = support::redis_server::start();
    let addr = support::fixed_resp_addr();
    let _node = Node::start(&["--resp-listen", &addr]);
    let mut ours = connect(&addr);
    let mut theirs = connect(&redis.addr);
    for con in [&mut ours, &mut theirs] {
        ok(con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        ok(con, &["SET", "shape:key", "value"]);
        ok(con, &["GET", "shape:key"]);
    }
    let a = entries(ok(&mut ours, &["SLOWLOG", "GET", "1"]));
    let b = entries(ok(&mut theirs, &["SLOWLOG", "GET", "1"]));
    assert_eq!((a.len(), b.len()), (1, 1));
    // The checker catches a wrong shape (a duration sent as a string).
    let mut wrong = a[0].clone();
    wrong[2] = Value::BulkString(b"12".to_vec());
    assert_eq!(
        entry_differences(&wrong, &b[0]),
        ["duration: bulk, Redis int"]
    );
    assert_eq!(entry_differences(&a[0], &b[0]), Vec::<String>::new());
    assert_eq!(
        args_of(&a[0]),
        ["get", "shape:key"],
        "Redis: {:?}",
        args_of(&b[0])
    );
    for words in [
        &["SLOWLOG", "LEN"][..],
        &["SLOWLOG", "HELP"],
        &["CONFIG", "GET", "slowlog-max-len"],
        &["SLOWLOG", "RESET"],
        &["SLOWLOG", "GET"],
    ] {
        let (x, y) = (ok(&mut ours, words), ok(&mut theirs, words));
        let (sx, sy) = (shape(&x), shape(&y));
        if words[1] == "HELP" {
            // Our help names our subcommands: lines of simple strings.
            assert!(sx.starts_with("[simple") && sy.starts_with("[simple"));
        } else if words == ["SLOWLOG", "GET"] {
            // After RESET: one entry each (the RESET itself in Redis,
            // none here: SLOWLOG is not a key command).
            assert!(sx == "[]" || sx.starts_with("[["), "{sx}");
        } else {
            assert_eq!(sx, sy, "{words:?}: {x:?} / Redis {y:?}");
        }
    }
    for words in [
        &["SLOWLOG", "GET", "-2"][..],
        &["SLOWLOG", "LEN", "1"],
        &["SLOWLOG", "NOPE"],
    ] {
        let x = run(&mut ours, words).unwrap_err().to_string();
        let y = run(&mut theirs, words).unwrap_err().to_string();
        assert_eq!(x, y, "{words:?}");
    }
    // redis-cli reads ataman's slow log.
    ok(&mut ours, &["SET", "cli:key", "v"]);
    let cli = support::redis_server::tool("redis-cli");
    let port = addr.rsplit(':').next().unwrap();
    let out = Command::new(cli)
        .args(["-p", port, "slowlog", "get"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("cli:key"), "{printed}");
}
