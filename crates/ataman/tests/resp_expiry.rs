//! RESP expiry on real nodes through a real client (the `redis` crate):
//! `SET … EX|PX|EXAT|PXAT`, `SETEX`, `PSETEX`, `TTL`, `PTTL` with Redis's
//! replies, before and after the deadline (reached by sleeping past it,
//! never by a timing threshold), on one node and on a 3-node cluster with
//! `ack=2 from=3`; HTTP reads the same expiry as 404.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::{Connection, Value};
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::Node;
use support::cluster::TestCluster;

/// Bound on any one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The short expiry every test waits out.
const SHORT_MS: u64 = 400;
/// How long past the short deadline the tests sleep: clocks of nodes on
/// one machine agree far better than this.
const PAST_DEADLINE: Duration = Duration::from_millis(SHORT_MS + 600);

fn free_resp_addr() -> String {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    format!("127.0.0.1:{}", listener.local_addr().unwrap().port())
}

fn connect(addr: &str, resp3: bool) -> Connection {
    let protocol = if resp3 { "?protocol=resp3" } else { "" };
    let client = redis::Client::open(format!("redis://{addr}/{protocol}")).unwrap();
    let con = client.get_connection().unwrap();
    con.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con
}

fn run(con: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con)
}

fn ok(con: &mut Connection, args: &[&str]) -> Value {
    run(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn int(con: &mut Connection, args: &[&str]) -> i64 {
    match ok(con, args) {
        Value::Int(n) => n,
        other => panic!("{args:?} answered {other:?}, not an integer"),
    }
}

fn error(con: &mut Connection, args: &[&str]) -> String {
    match run(con, args) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} answered {v:?}, not an error"),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn bulk(bytes: &str) -> Value {
    Value::BulkString(bytes.as_bytes().to_vec())
}

/// Every expiry command's replies through `con`, keys prefixed `p`;
/// returns once the short keys have expired.
fn expiry_replies(con: &mut Connection, p: &str) {
    let key = |k: &str| format!("{p}{k}");
    let (plain, long, short, short_px, at, setex, psetex) = (
        key("plain"),
        key("long"),
        key("short"),
        key("short-px"),
        key("at"),
        key("setex"),
        key("psetex"),
    );
    // Missing: -2; no expiry: -1.
    assert_eq!(int(con, &["TTL", &key("missing")]), -2);
    assert_eq!(int(con, &["PTTL", &key("missing")]), -2);
    assert_eq!(ok(con, &["SET", &plain, "p"]), Value::Okay);
    assert_eq!(int(con, &["TTL", &plain]), -1);
    assert_eq!(int(con, &["PTTL", &plain]), -1);
    // With an expiry: the time left, never more than asked.
    assert_eq!(ok(con, &["SET", &long, "l", "EX", "1000"]), Value::Okay);
    let ttl = int(con, &["TTL", &long]);
    assert!((1..=1000).contains(&ttl), "TTL {ttl}");
    let pttl = int(con, &["PTTL", &long]);
    assert!((1..=1_000_000).contains(&pttl), "PTTL {pttl}");
    let at_ms = now_ms() + 3_600_000;
    let at_s = (at_ms / 1000).to_string();
    assert_eq!(ok(con, &["SET", &at, "a", "EXAT", &at_s]), Value::Okay);
    let ttl = int(con, &["TTL", &at]);
    assert!((1..=3600).contains(&ttl), "EXAT's TTL {ttl}");
    assert_eq!(
        ok(con, &["SET", &at, "a", "PXAT", &at_ms.to_string()]),
        Value::Okay
    );
    let pttl = int(con, &["PTTL", &at]);
    assert!((1..=3_600_000).contains(&pttl), "PXAT's PTTL {pttl}");
    // A plain SET over an expiring value clears its deadline, as in Redis.
    assert_eq!(ok(con, &["SET", &at, "a2"]), Value::Okay);
    assert_eq!(int(con, &["TTL", &at]), -1);
    // A PXAT in the past: the key is gone at once.
    assert_eq!(
        ok(con, &["SET", &key("past"), "x", "PXAT", "1000"]),
        Value::Okay
    );
    assert_eq!(ok(con, &["GET", &key("past")]), Value::Nil);
    assert_eq!(int(con, &["TTL", &key("past")]), -2);
    // Bad expiries, with Redis's words.
    for args in [
        &["SET", &plain, "x", "EX", "0"][..],
        &["SET", &plain, "x", "PX", "-1"],
        &["SET", &plain, "x", "PXAT", "99999999999999999"],
        &["SET", &plain, "x", "PX", "99999999999999999"],
    ] {
        let e = error(con, args);
        assert!(
            e.contains("invalid expire time in 'set' command"),
            "{args:?}: {e}"
        );
    }
    assert!(error(con, &["SETEX", &plain, "0", "x"]).contains("invalid expire time in 'setex'"));
    assert!(error(con, &["SET", &plain, "x", "EX", "ten"]).contains("not an integer"));
    assert_eq!(
        ok(con, &["GET", &plain]),
        bulk("p"),
        "refused SETs wrote nothing"
    );
    // Short expiries: present before the deadline, gone after it.
    let short_ms = SHORT_MS.to_string();
    let short_s = "1";
    assert_eq!(ok(con, &["SET", &short, "s", "PX", &short_ms]), Value::Okay);
    assert_eq!(
        ok(con, &["SET", &short_px, "s", "PX", &short_ms]),
        Value::Okay
    );
    assert_eq!(ok(con, &["PSETEX", &psetex, &short_ms, "s"]), Value::Okay);
    assert_eq!(ok(con, &["SETEX", &setex, short_s, "s"]), Value::Okay);
    std::thread::sleep(PAST_DEADLINE);
    for k in [&short, &short_px, &psetex, &setex] {
        assert_eq!(ok(con, &["GET", k]), Value::Nil, "{k} after its deadline");
        assert_eq!(int(con, &["TTL", k]), -2, "{k}'s TTL after its deadline");
        assert_eq!(int(con, &["PTTL", k]), -2, "{k}'s PTTL after its deadline");
        assert_eq!(int(con, &["EXISTS", k]), 0, "{k} exists after its deadline");
    }
    // The others are still there.
    assert_eq!(ok(con, &["GET", &long]), bulk("l"));
    assert_eq!(ok(con, &["GET", &plain]), bulk("p"));
}

/// One node, RESP2 and RESP3; HTTP sees the expired key as 404.
#[test]
fn expiry_commands_on_one_node() {
    let addr = free_resp_addr();
    let node = Node::start(&["--resp-listen", addr.as_str()]);
    for resp3 in [false, true] {
        let mut con = connect(&addr, resp3);
        let prefix = if resp3 { "r3-" } else { "r2-" };
        expiry_replies(&mut con, prefix);
        let expired = format!("{prefix}short");
        assert_eq!(node.get(expired.as_bytes()).status, 404);
        assert_eq!(node.get(format!("{prefix}long").as_bytes()).status, 200);
    }
}

/// A 3-node cluster, `ack=2 from=3` (the default): the same replies
/// through every node, the deadline stamped once by the coordinator.
#[test]
fn expiry_commands_on_a_cluster() {
    let addrs: Vec<String> = (0..3).map(|_| free_resp_addr()).collect();
    let cluster = TestCluster::start_each(3, &[], |i| {
        vec!["--resp-listen".to_string(), addrs[i].clone()]
    });
    for (i, addr) in addrs.iter().enumerate() {
        let mut con = connect(addr, i == 1);
        expiry_replies(&mut con, &format!("n{i}-"));
    }
    // A key set with an expiry through one node reads expired through
    // every other node, RESP and HTTP.
    let mut first = connect(&addrs[0], false);
    let short_ms = SHORT_MS.to_string();
    assert_eq!(
        ok(&mut first, &["SET", "shared", "v", "PX", &short_ms]),
        Value::Okay
    );
    std::thread::sleep(PAST_DEADLINE);
    for (i, addr) in addrs.iter().enumerate() {
        let mut con = connect(addr, false);
        assert_eq!(ok(&mut con, &["GET", "shared"]), Value::Nil, "node {i}");
        assert_eq!(int(&mut con, &["PTTL", "shared"]), -2, "node {i}");
        assert_eq!(cluster.node(i).get(b"shared").status, 404, "node {i}");
    }
}
