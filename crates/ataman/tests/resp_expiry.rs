//! RESP expiry on real nodes through a real client (the `redis` crate):
//! `SET … EX|PX|EXAT|PXAT|KEEPTTL`, `SETEX`, `PSETEX`, `TTL`, `PTTL`,
//! `EXPIRE` and its kin, `PERSIST`, `GETEX`, `EXPIRETIME` with Redis's
//! replies, before and after the deadline (reached by sleeping past it,
//! never by a timing threshold), on one node and on a 3-node cluster with
//! `ack=2 from=3`; HTTP reads the same expiry as 404.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::{Connection, Value};

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::Node;
use support::cluster::TestCluster;
use support::resp_client::{ok, run};

/// Bound on any one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The short expiry every test waits out.
const SHORT_MS: u64 = 400;
/// How long past the short deadline the tests sleep: clocks of nodes on
/// one machine agree far better than this.
const PAST_DEADLINE: Duration = Duration::from_millis(SHORT_MS + 600);

fn connect(addr: &str, resp3: bool) -> Connection {
    support::resp_client::connect(addr, resp3, REPLY_TIMEOUT)
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

/// `EXPIRE` and its kin, `PERSIST`, `GETEX`, `SET … KEEPTTL`,
/// `EXPIRETIME`, `PEXPIRETIME` (each a read, then maybe a write) through
/// `con`, keys prefixed `p`.
fn read_then_write_replies(con: &mut Connection, p: &str) {
    let key = |k: &str| format!("{p}{k}");
    let (k, missing, gone, keep, g, pipelined) = (
        key("k"),
        key("missing"),
        key("gone"),
        key("keep"),
        key("g"),
        key("pipelined"),
    );
    for command in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        assert_eq!(
            int(con, &[command, &missing, "100"]),
            0,
            "{command} missing"
        );
    }
    assert_eq!(int(con, &["PERSIST", &missing]), 0);
    assert_eq!(ok(con, &["GETEX", &missing, "PX", "100"]), Value::Nil);
    assert_eq!(int(con, &["EXPIRETIME", &missing]), -2);
    assert_eq!(ok(con, &["GET", &missing]), Value::Nil, "nothing written");
    // EXPIRE on a plain key: same value, a deadline.
    assert_eq!(ok(con, &["SET", &k, "v"]), Value::Okay);
    assert_eq!(int(con, &["EXPIRETIME", &k]), -1);
    assert_eq!(int(con, &["PERSIST", &k]), 0, "no deadline to remove");
    assert_eq!(int(con, &["EXPIRE", &k, "1000"]), 1);
    assert_eq!(ok(con, &["GET", &k]), bulk("v"));
    let ttl = int(con, &["TTL", &k]);
    assert!((1..=1000).contains(&ttl), "TTL {ttl}");
    // The conditions.
    assert_eq!(int(con, &["EXPIRE", &k, "2000", "NX"]), 0);
    assert_eq!(int(con, &["EXPIRE", &k, "500", "GT"]), 0);
    assert_eq!(int(con, &["EXPIRE", &k, "2000", "GT"]), 1);
    assert_eq!(int(con, &["EXPIRE", &k, "3000", "LT"]), 0);
    assert_eq!(int(con, &["PEXPIRE", &k, "1500000", "XX"]), 1);
    let pttl = int(con, &["PTTL", &k]);
    assert!((1_000_001..=1_500_000).contains(&pttl), "PTTL {pttl}");
    let at_s = now_ms() / 1000 + 7200;
    assert_eq!(int(con, &["EXPIREAT", &k, &at_s.to_string()]), 1);
    assert_eq!(int(con, &["EXPIRETIME", &k]), at_s as i64);
    assert_eq!(int(con, &["PEXPIRETIME", &k]), (at_s * 1000) as i64);
    let at_ms = now_ms() + 7_000_000;
    assert_eq!(int(con, &["PEXPIREAT", &k, &at_ms.to_string()]), 1);
    assert_eq!(int(con, &["PEXPIRETIME", &k]), at_ms as i64);
    // KEEPTTL keeps that deadline; PERSIST removes it.
    assert_eq!(ok(con, &["SET", &k, "v2", "KEEPTTL"]), Value::Okay);
    assert_eq!(ok(con, &["GET", &k]), bulk("v2"));
    assert_eq!(int(con, &["PEXPIRETIME", &k]), at_ms as i64);
    assert_eq!(int(con, &["PERSIST", &k]), 1);
    assert_eq!(int(con, &["TTL", &k]), -1);
    assert_eq!(ok(con, &["GET", &k]), bulk("v2"));
    assert_eq!(ok(con, &["SET", &keep, "new", "KEEPTTL"]), Value::Okay);
    assert_eq!(int(con, &["TTL", &keep]), -1, "KEEPTTL on a missing key");
    // GETEX: the value, and the new expiry.
    assert_eq!(ok(con, &["SET", &g, "gv"]), Value::Okay);
    assert_eq!(ok(con, &["GETEX", &g]), bulk("gv"));
    assert_eq!(int(con, &["TTL", &g]), -1);
    assert_eq!(ok(con, &["GETEX", &g, "EX", "1000"]), bulk("gv"));
    let ttl = int(con, &["TTL", &g]);
    assert!((1..=1000).contains(&ttl), "GETEX's TTL {ttl}");
    assert_eq!(ok(con, &["GETEX", &g, "PERSIST"]), bulk("gv"));
    assert_eq!(int(con, &["TTL", &g]), -1);
    // A time not after now deletes the key.
    assert_eq!(ok(con, &["SET", &gone, "x"]), Value::Okay);
    assert_eq!(int(con, &["EXPIRE", &gone, "-1"]), 1);
    assert_eq!(ok(con, &["GET", &gone]), Value::Nil);
    assert_eq!(int(con, &["TTL", &gone]), -2);
    // Errors, with Redis's words.
    assert!(error(con, &["EXPIRE", &k, "1", "NX", "XX"]).contains("not compatible"));
    assert!(error(con, &["EXPIRE", &k, "1", "GT", "LT"]).contains("not compatible"));
    assert!(error(con, &["EXPIRE", &k, "x"]).contains("not an integer"));
    assert!(
        error(con, &["EXPIRE", &k, "99999999999999999"])
            .contains("invalid expire time in 'expire' command")
    );
    // Pipelined: the EXPIRE reads the SET before it; the GET sees both.
    let replies: Vec<Value> = redis::pipe()
        .cmd("SET")
        .arg(&pipelined)
        .arg("pv")
        .cmd("PEXPIRE")
        .arg(&pipelined)
        .arg(SHORT_MS)
        .cmd("GET")
        .arg(&pipelined)
        .query(con)
        .unwrap();
    assert_eq!(replies, vec![Value::Okay, Value::Int(1), bulk("pv")]);
    std::thread::sleep(PAST_DEADLINE);
    assert_eq!(
        ok(con, &["GET", &pipelined]),
        Value::Nil,
        "after EXPIRE's deadline"
    );
    assert_eq!(
        int(con, &["EXPIRE", &pipelined, "100"]),
        0,
        "expired is missing"
    );
}

/// One node, RESP2 and RESP3; HTTP sees the expired key as 404.
#[test]
fn expiry_commands_on_one_node() {
    let addr = support::fixed_resp_addr();
    let node = Node::start(&["--resp-listen", addr.as_str()]);
    for resp3 in [false, true] {
        let mut con = connect(&addr, resp3);
        let prefix = if resp3 { "r3-" } else { "r2-" };
        expiry_replies(&mut con, prefix);
        read_then_write_replies(&mut con, prefix);
        let expired = format!("{prefix}short");
        assert_eq!(node.get(expired.as_bytes()).status, 404);
        assert_eq!(node.get(format!("{prefix}long").as_bytes()).status, 200);
    }
}

/// A 3-node cluster, `ack=2 from=3` (the default): the same replies
/// through every node, the deadline stamped once by the coordinator.
#[test]
fn expiry_commands_on_a_cluster() {
    let addrs: Vec<String> = (0..3).map(|_| support::fixed_resp_addr()).collect();
    let cluster = TestCluster::start_each(3, &[], |i| {
        vec!["--resp-listen".to_string(), addrs[i].clone()]
    });
    for (i, addr) in addrs.iter().enumerate() {
        let mut con = connect(addr, i == 1);
        expiry_replies(&mut con, &format!("n{i}-"));
        read_then_write_replies(&mut con, &format!("n{i}-"));
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
