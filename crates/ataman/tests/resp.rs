//! The Redis protocol front end (docs/RESP.md) on real nodes, through a
//! real client (the `redis` crate), RESP2 and RESP3: every command, errors
//! and refusals, pipelines, binary-safe keys and values, a 1 MiB value,
//! HTTP on the same data, acknowledged SETs across `kill -9`, and a
//! 3-node cluster with one node paused.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::{Connection, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::Node;
use support::cluster::TestCluster;

/// Bound on any one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A node serving RESP, and its RESP address.
fn resp_node(extra: &[&str]) -> (Node, String) {
    let addr = support::fixed_resp_addr();
    let mut args = vec!["--resp-listen", addr.as_str()];
    args.extend_from_slice(extra);
    (Node::start(&args), addr)
}

fn connect(addr: &str, resp3: bool) -> Connection {
    let protocol = if resp3 { "?protocol=resp3" } else { "" };
    let client = redis::Client::open(format!("redis://{addr}/{protocol}")).unwrap();
    let con = client.get_connection().unwrap();
    con.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con
}

fn run(con: &mut Connection, args: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con)
}

fn ok(con: &mut Connection, args: &[&[u8]]) -> Value {
    run(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn error(con: &mut Connection, args: &[&[u8]]) -> String {
    match run(con, args) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} answered {v:?}, not an error"),
    }
}

fn bulk(bytes: &[u8]) -> Value {
    Value::BulkString(bytes.to_vec())
}

/// A map's pairs: a RESP3 map, or RESP2's flat array of keys and values.
fn pairs_of(v: Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(pairs) => pairs,
        Value::Array(flat) => flat
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

/// The connection, string-key and server commands on one node, in RESP2
/// and RESP3 (the expiry commands are in `resp_expiry.rs`, SCAN in
/// `resp_scan.rs`).
#[test]
fn connection_key_and_server_commands_in_resp2_and_resp3() {
    let (node, addr) = resp_node(&[]);
    for resp3 in [false, true] {
        let mut con = connect(&addr, resp3);
        let p = if resp3 { "3-" } else { "2-" };
        let key = |k: &str| format!("{p}{k}").into_bytes();
        let (a, b, c) = (key("a"), key("b"), key("c"));
        assert_eq!(ok(&mut con, &[b"PING"]), Value::SimpleString("PONG".into()));
        assert_eq!(ok(&mut con, &[b"PING", b"hi"]), bulk(b"hi"));
        assert_eq!(ok(&mut con, &[b"ECHO", b"x\r\ny"]), bulk(b"x\r\ny"));
        assert_eq!(ok(&mut con, &[b"SET", &a, b"1"]), Value::Okay);
        assert_eq!(ok(&mut con, &[b"GET", &a]), bulk(b"1"));
        assert_eq!(ok(&mut con, &[b"GET", &c]), Value::Nil);
        assert_eq!(ok(&mut con, &[b"MSET", &b, b"2", &c, b"3"]), Value::Okay);
        assert_eq!(
            ok(&mut con, &[b"MGET", &a, &b, b"none"]),
            Value::Array(vec![bulk(b"1"), bulk(b"2"), Value::Nil])
        );
        assert_eq!(ok(&mut con, &[b"EXISTS", &a, &a, b"none"]), Value::Int(2));
        assert_eq!(ok(&mut con, &[b"DEL", &a]), Value::Int(1));
        assert_eq!(ok(&mut con, &[b"UNLINK", &b]), Value::Int(1));
        // Counted as Redis counts: keys that existed, each once.
        assert_eq!(ok(&mut con, &[b"DEL", &a, b"none"]), Value::Int(0));
        assert_eq!(ok(&mut con, &[b"MSET", &a, b"1", &b, b"2"]), Value::Okay);
        assert_eq!(ok(&mut con, &[b"DEL", &a, &a, &b, b"none"]), Value::Int(2));
        assert_eq!(ok(&mut con, &[b"EXISTS", &a, &b]), Value::Int(0));
        assert_eq!(ok(&mut con, &[b"EXISTS", &a, &b, &c]), Value::Int(1));
        assert_eq!(
            ok(&mut con, &[b"SET", &a, b"v", b"PX", b"600000"]),
            Value::Okay
        );
        assert_eq!(
            ok(&mut con, &[b"DBSIZE"]),
            Value::Int(if resp3 { 4 } else { 2 })
        );
        let Value::Array(time) = ok(&mut con, &[b"TIME"]) else {
            panic!("TIME")
        };
        assert_eq!(time.len(), 2);
        let Value::BulkString(info) = ok(&mut con, &[b"INFO"]) else {
            panic!("INFO")
        };
        let info = String::from_utf8(info).unwrap();
        for section in [
            "# Server",
            "# Clients",
            "# Persistence",
            "# Stats",
            "# Replication",
        ] {
            assert!(info.contains(section), "{section} missing: {info}");
        }
        assert!(
            info.contains("loading:0") && info.contains("db0:keys="),
            "{info}"
        );
        let pairs = pairs_of(ok(&mut con, &[b"CONFIG", b"GET", b"save", b"append*"]));
        assert!(
            pairs.contains(&(bulk(b"appendfsync"), bulk(b"always"))),
            "{pairs:?}"
        );
        assert!(pairs.contains(&(bulk(b"save"), bulk(b""))), "{pairs:?}");
        assert!(error(&mut con, &[b"CONFIG", b"SET", b"save", b""]).contains("not supported"));
        assert_eq!(ok(&mut con, &[b"SELECT", b"0"]), Value::Okay);
        assert!(error(&mut con, &[b"SELECT", b"1"]).contains("out of range"));
        assert_eq!(ok(&mut con, &[b"CLIENT", b"SETNAME", b"me"]), Value::Okay);
        assert_eq!(ok(&mut con, &[b"CLIENT", b"GETNAME"]), bulk(b"me"));
        assert!(matches!(ok(&mut con, &[b"CLIENT", b"ID"]), Value::Int(_)));
        let setinfo = ok(&mut con, &[b"CLIENT", b"SETINFO", b"LIB-NAME", b"t"]);
        assert_eq!(setinfo, Value::Okay);
        let Value::BulkString(client) = ok(&mut con, &[b"CLIENT", b"INFO"]) else {
            panic!("CLIENT INFO")
        };
        assert!(String::from_utf8_lossy(&client).contains("name=me"));
        let Value::Int(count) = ok(&mut con, &[b"COMMAND", b"COUNT"]) else {
            panic!("COMMAND COUNT")
        };
        let Value::Array(infos) = ok(&mut con, &[b"COMMAND", b"INFO", b"get", b"nosuch"]) else {
            panic!("COMMAND INFO")
        };
        assert_eq!((infos.len(), &infos[1]), (2, &Value::Nil));
        assert!(count >= 20, "{count}");
        let docs = ok(&mut con, &[b"COMMAND", b"DOCS", b"set"]);
        assert!(matches!(docs, Value::Map(_) | Value::Array(_)), "{docs:?}");
        assert_eq!(ok(&mut con, &[b"WAIT", b"0", b"0"]), Value::Int(0));
        assert_eq!(
            ok(&mut con, &[b"ATAMAN.REPLICATION"]),
            Value::Array(vec![Value::Int(1), Value::Int(1)])
        );
        for (args, words) in [
            (
                &[&b"NOSUCH"[..], b"x"][..],
                "unknown command 'NOSUCH', with args beginning with: 'x'",
            ),
            (&[b"GET"], "wrong number of arguments for 'get' command"),
            (
                &[b"INCR", b"k", b"x"],
                "wrong number of arguments for 'incr'",
            ),
            (&[b"WATCH", b"k", b"j"], "a transaction touches one key"),
            (&[b"MSETNX", b"k", b"v"], "atomic read-modify-write"),
            (&[b"KEYS", b"*"], "no bound"),
            (&[b"HSET", b"k", b"f", b"v"], "string values only"),
            (&[b"PUBLISH", b"c", b"m"], "pub/sub"),
            (&[b"EVAL", b"return 1", b"0"], "scripting"),
        ] {
            let e = error(&mut con, args);
            assert!(e.contains(words), "{args:?}: {e}");
        }
        // A transaction with a refused command applies nothing at EXEC.
        assert_eq!(ok(&mut con, &[b"MULTI"]), Value::Okay);
        let queued = ok(&mut con, &[b"SET", &a, b"in-multi"]);
        assert_eq!(queued, Value::SimpleString("QUEUED".into()));
        assert!(error(&mut con, &[b"MGET", &a]).contains("inside MULTI is not supported"));
        let e = error(&mut con, &[b"EXEC"]);
        assert!(e.contains("Transaction discarded"), "{e}");
        // A refusal leaves the connection serving.
        assert_eq!(ok(&mut con, &[b"GET", &a]), bulk(b"v"));
        let hello = pairs_of(ok(&mut con, &[b"HELLO"]));
        let proto = Value::Int(if resp3 { 3 } else { 2 });
        assert!(hello.contains(&(bulk(b"proto"), proto)), "{hello:?}");
        assert_eq!(
            ok(&mut con, &[b"RESET"]),
            Value::SimpleString("RESET".into())
        );
        assert_eq!(ok(&mut con, &[b"CLIENT", b"GETNAME"]), Value::Nil);
        assert_eq!(ok(&mut con, &[b"QUIT"]), Value::Okay);
    }
    let metrics = String::from_utf8(node.get_target("/metrics").body).unwrap();
    for command in ["set", "get", "mset", "other"] {
        let line = format!("ataman_resp_commands_total{{command=\"{command}\"}}");
        assert!(metrics.contains(&line), "{line} missing");
    }
}

/// A pipeline of thousands of commands, binary-safe keys and values (CR,
/// LF, NUL), a 1 MiB value, and HTTP on the same data.
#[test]
fn pipelines_binary_values_a_large_value_and_http_on_the_same_data() {
    let (node, addr) = resp_node(&[]);
    let mut con = connect(&addr, false);
    const N: usize = 5000;
    let key = |i: usize| format!("k\r\n\0{i}").into_bytes();
    let value = |i: usize| format!("v\0\r\n{i}\n").into_bytes();
    let mut pipe = redis::pipe();
    for i in 0..N {
        pipe.cmd("SET").arg(key(i)).arg(value(i));
        pipe.cmd("GET").arg(key(i));
    }
    let replies: Vec<Value> = pipe.query(&mut con).unwrap();
    assert_eq!(replies.len(), 2 * N);
    for i in 0..N {
        assert_eq!(replies[2 * i], Value::Okay, "SET {i}");
        assert_eq!(replies[2 * i + 1], bulk(&value(i)), "GET {i} after its SET");
    }
    let big: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    assert_eq!(ok(&mut con, &[b"SET", b"big", &big]), Value::Okay);
    assert_eq!(ok(&mut con, &[b"GET", b"big"]), bulk(&big));
    assert_eq!(node.get(b"big").body, big);
    // RESP writes, HTTP reads; HTTP writes and deletes, RESP reads.
    assert_eq!(node.get(&key(7)).body, value(7));
    assert_eq!(node.put(b"from-http", b"h").status, 201);
    assert_eq!(ok(&mut con, &[b"GET", b"from-http"]), bulk(b"h"));
    assert_eq!(node.delete(&key(8)).status, 202);
    assert_eq!(ok(&mut con, &[b"GET", &key(8)]), Value::Nil);
    assert_eq!(ok(&mut con, &[b"DBSIZE"]), Value::Int(N as i64 + 1));
}

/// Runs of pipelined GETs answer exactly what GETs one at a time do:
/// repeats, absent keys, a key over the limit refused in the middle of a
/// run, an inline GET, and a SET between two runs that the GETs after it
/// see (a guard for any batching of pipelined reads).
#[test]
fn pipelined_get_runs_answer_as_single_gets() {
    let (_node, addr) = resp_node(&["--key-bytes-max", "16"]);
    let mut con = connect(&addr, false);
    const N: usize = 300;
    let key = |i: usize| format!("key:{i:06}").into_bytes();
    let mut pipe = redis::pipe();
    for i in (0..N).step_by(2) {
        pipe.cmd("SET").arg(key(i)).arg(format!("v{i}"));
    }
    let _: Vec<Value> = pipe.query(&mut con).unwrap();
    let want = |i: usize| {
        if i.is_multiple_of(2) {
            bulk(format!("v{i}").as_bytes())
        } else {
            Value::Nil
        }
    };
    let mut pipe = redis::pipe();
    let mut expected = Vec::new();
    for i in (0..N).rev().chain(0..5).chain([7, 7, 4]) {
        pipe.cmd("GET").arg(key(i));
        expected.push(want(i));
    }
    pipe.cmd("GET").arg(key(2));
    expected.push(want(2));
    pipe.cmd("SET").arg(key(1)).arg("now");
    expected.push(Value::Okay);
    for i in [1, 2, 1] {
        pipe.cmd("GET").arg(key(i));
        expected.push(if i == 1 { bulk(b"now") } else { want(i) });
    }
    let replies: Vec<Value> = pipe.query(&mut con).unwrap();
    assert_eq!(replies.len(), expected.len());
    for (i, (got, want)) in replies.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "reply {i}");
    }
    // Raw: a key over the limit refused between pre-read GETs, an inline
    // GET, a lower-case one.
    let mut raw = TcpStream::connect(&addr).unwrap();
    raw.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    let get = |k: &str| format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len());
    let input = [
        get("key:000002"),
        get("a-key-longer-than-sixteen-bytes"),
        get("key:000003"),
        "GET key:000004\r\n".to_string(),
        get("key:000002").replace("GET", "get"),
    ]
    .concat();
    raw.write_all(input.as_bytes()).unwrap();
    let tail = b"$-1\r\n$2\r\nv4\r\n$2\r\nv2\r\n";
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    while !got.ends_with(tail) && got.len() < 4096 {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    let got = String::from_utf8_lossy(&got).into_owned();
    assert!(got.starts_with("$2\r\nv2\r\n-ERR "), "{got:?}");
    assert!(got.ends_with("$-1\r\n$2\r\nv4\r\n$2\r\nv2\r\n"), "{got:?}");
    assert_eq!(got.matches("\r\n").count(), 8, "{got:?}");
}

/// Reads what the server sends until it closes (bounded by the timeout).
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    got
}

/// Malformed framing and an oversized bulk: an error, then that
/// connection closes; the node serves everyone else on.
#[test]
fn malformed_framing_and_oversized_bulks_close_only_their_connection() {
    let (_node, addr) = resp_node(&["--value-bytes-max", "1024", "--key-bytes-max", "16"]);
    let addr: SocketAddr = addr.parse().unwrap();
    let mut other = connect(&addr.to_string(), false);
    for (input, words) in [
        (&b"*1\r\n$x\r\n"[..], "-ERR Protocol error: "),
        (
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
            "-ERR Protocol error: expected '$'",
        ),
        (
            b"*1\r\n$2000\r\n",
            "-ERR Protocol error: a bulk of 2000 bytes over the limit of 1024",
        ),
        (
            b"*99999999\r\n",
            "-ERR Protocol error: 99999999 arguments over the limit",
        ),
        (
            b"GET \"unbalanced\r\n",
            "-ERR Protocol error: unbalanced quotes",
        ),
    ] {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"PING\r\n").unwrap();
        stream.write_all(input).unwrap();
        let got = String::from_utf8_lossy(&read_to_close(&mut stream)).into_owned();
        assert!(got.starts_with("+PONG\r\n"), "{got}");
        assert!(got[7..].starts_with(words), "{input:?}: {got}");
        assert!(
            got.ends_with("\r\n") && got.matches("\r\n").count() == 2,
            "{got}"
        );
        assert_eq!(
            ok(&mut other, &[b"PING"]),
            Value::SimpleString("PONG".into())
        );
    }
    // Over the key or value limit but framed well: an error, and the
    // connection goes on.
    let e = error(&mut other, &[b"SET", b"a-key-of-17-bytes", b"v"]);
    assert!(e.contains("--key-bytes-max"), "{e}");
    let e = error(&mut other, &[b"SET", b"k", &[b'v'; 1024 + 1]]);
    assert!(e.contains("bulk of 1025 bytes"), "{e}");
}

/// Acknowledged SETs survive `kill -9`.
#[test]
fn acknowledged_sets_survive_kill_9() {
    let (mut node, addr) = resp_node(&[]);
    let mut con = connect(&addr, false);
    const N: usize = 2000;
    let mut pipe = redis::pipe();
    for i in 0..N {
        pipe.cmd("SET").arg(format!("d{i}")).arg(format!("v{i}"));
    }
    let replies: Vec<Value> = pipe.query(&mut con).unwrap();
    assert!(replies.iter().all(|r| *r == Value::Okay));
    drop(con);
    node.kill9();
    node.restart();
    let mut con = connect(&addr, true);
    let keys: Vec<String> = (0..N).map(|i| format!("d{i}")).collect();
    let mut mget = redis::cmd("MGET");
    for k in &keys {
        mget.arg(k);
    }
    let Value::Array(values) = mget.query::<Value>(&mut con).unwrap() else {
        panic!("MGET")
    };
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, bulk(format!("v{i}").as_bytes()), "key d{i}");
    }
}

/// Any key through any node's RESP port of a 3-node cluster, with one
/// node paused (SIGSTOP): `ack=2 from=3` by default.
#[test]
fn a_cluster_serves_any_key_through_any_node_with_one_paused() {
    let addrs: Vec<String> = (0..3).map(|_| support::fixed_resp_addr()).collect();
    let cluster = TestCluster::start_each(3, &[], |i| {
        vec!["--resp-listen".to_string(), addrs[i].clone()]
    });
    const KEYS: usize = 60;
    for (i, addr) in addrs.iter().enumerate() {
        let mut con = connect(addr, i == 1);
        assert_eq!(
            ok(&mut con, &[b"ATAMAN.REPLICATION"]),
            Value::Array(vec![Value::Int(2), Value::Int(3)])
        );
        for k in (i..KEYS).step_by(3) {
            let (key, value) = (format!("c{k}"), format!("v{k}"));
            assert_eq!(
                ok(&mut con, &[b"SET", key.as_bytes(), value.as_bytes()]),
                Value::Okay
            );
        }
    }
    // A read-modify-write of a key with other replicas takes the
    // consensus register, even on a connection that asked for one
    // replica: the layout's R decides, not the connection's `from` (with
    // `from` deciding, the keys first in placement here were incremented
    // from whatever this node held). Another node reads each result.
    {
        let mut con = connect(&addrs[0], false);
        assert_eq!(
            ok(&mut con, &[b"ATAMAN.REPLICATION", b"1", b"1"]),
            Value::Array(vec![Value::Int(1), Value::Int(1)])
        );
        let mut other = connect(&addrs[1], false);
        for k in 0..30 {
            let key = format!("rmw{k}");
            assert_eq!(ok(&mut con, &[b"INCR", key.as_bytes()]), Value::Int(1));
            assert_eq!(ok(&mut other, &[b"GET", key.as_bytes()]), bulk(b"1"));
        }
    }
    let paused = cluster.node(2).pid();
    // SAFETY: kill(2) on a node process this test started.
    assert_eq!(
        unsafe { libc::kill(paused as libc::pid_t, libc::SIGSTOP) },
        0
    );
    for addr in &addrs[..2] {
        let mut con = connect(addr, false);
        for k in 0..KEYS {
            let (key, value) = (format!("c{k}"), format!("v{k}"));
            assert_eq!(
                ok(&mut con, &[b"GET", key.as_bytes()]),
                bulk(value.as_bytes())
            );
        }
        assert_eq!(
            ok(&mut con, &[b"SET", b"while-paused", addr.as_bytes()]),
            Value::Okay
        );
        assert_eq!(
            ok(&mut con, &[b"GET", b"while-paused"]),
            bulk(addr.as_bytes())
        );
        // ack=3 cannot be met with a node paused: a clear error.
        assert_eq!(
            ok(&mut con, &[b"ATAMAN.REPLICATION", b"3", b"3"]),
            Value::Array(vec![Value::Int(3), Value::Int(3)])
        );
        let e = error(&mut con, &[b"SET", b"all-three", b"v"]);
        assert!(e.contains("not enough replicas"), "{e}");
    }
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::kill(paused as libc::pid_t, libc::SIGCONT) },
        0
    );
}

/// `DBSIZE` is exact (a scan) while the engine holds at most 10 000 entries
/// and an estimate from the engine's counts past that, which counts every
/// version not yet compacted away (docs/RESP.md).
#[test]
fn dbsize_is_exact_below_the_scan_bound_and_estimated_above_it() {
    let (_node, addr) = resp_node(&[]);
    let mut con = connect(&addr, false);
    let set_all = |con: &mut Connection, keys: std::ops::Range<usize>| {
        let mut pipe = redis::pipe();
        for i in keys {
            pipe.cmd("SET").arg(format!("key{i}")).arg("v");
        }
        let replies: Vec<Value> = pipe.query(con).unwrap();
        assert!(replies.iter().all(|r| *r == Value::Okay), "a SET failed");
    };
    set_all(&mut con, 0..100);
    set_all(&mut con, 0..5);
    assert_eq!(
        ok(&mut con, &[b"DBSIZE"]),
        Value::Int(100),
        "exact: 100 keys"
    );
    set_all(&mut con, 100..12_000);
    assert_eq!(
        ok(&mut con, &[b"DBSIZE"]),
        Value::Int(12_005),
        "estimated: 12 000 keys and 5 overwritten versions"
    );
}

/// Reads from `raw` until what came ends with `tail` (bounded by the
/// read timeout and 64 KiB); what came.
fn read_until_tail(raw: &mut TcpStream, tail: &[u8]) -> String {
    raw.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(tail) && got.len() < 64 * 1024 {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// `SET a b\r\nSET k\r\n` in one write panicked the network thread (the
/// second SET, parsed while the first one's write was pending, sliced its
/// arguments before the arity check) and the node exited. Now the short
/// SET, and every other short command behind a pending write, gets its
/// arity error, and the node serves on.
#[test]
fn resp_short_set_behind_a_pending_write_does_not_stop_the_node() {
    let (node, addr) = resp_node(&[]);
    let mut raw = TcpStream::connect(&addr).unwrap();
    raw.write_all(b"SET a b\r\nSET k\r\n").unwrap();
    let got = read_until_tail(&mut raw, b"command\r\n");
    assert_eq!(
        got,
        "+OK\r\n-ERR wrong number of arguments for 'set' command\r\n"
    );
    for command in ["MSET", "SETEX k", "PSETEX", "GET", "EXPIRE k", "DEL"] {
        let mut raw = TcpStream::connect(&addr).unwrap();
        raw.write_all(format!("SET a b\r\n{command}\r\nPING\r\n").as_bytes())
            .unwrap();
        let got = read_until_tail(&mut raw, b"+PONG\r\n");
        assert!(got.starts_with("+OK\r\n-ERR "), "{command}: {got:?}");
    }
    assert!(node.is_running());
    let mut con = connect(&addr, false);
    assert_eq!(ok(&mut con, &[b"GET", b"a"]), bulk(b"b"));
}

/// The containment of a panic: with the planted bug `connection-panic`
/// (the `planted-bugs` feature, which this test build has), the command
/// `ATAMAN.PLANTED-PANIC` panics the network thread while it handles that
/// connection. Only that connection closes; a client connected before and
/// new clients are served; the panic is logged at error with the peer's
/// address and counted once in `ataman_connection_panics_total`.
#[test]
fn a_panic_on_one_connection_closes_it_and_the_node_serves_the_others() {
    let addr = support::fixed_resp_addr();
    let node = Node::start_logged(&[
        "--resp-listen",
        addr.as_str(),
        "--net-threads",
        "1",
        "--debug-planted-bug",
        "connection-panic",
    ]);
    let mut before = connect(&addr, false);
    assert_eq!(ok(&mut before, &[b"SET", b"a", b"1"]), Value::Okay);
    let mut victim = TcpStream::connect(&addr).unwrap();
    let victim_addr = victim.local_addr().unwrap().to_string();
    victim
        .write_all(b"PING\r\nATAMAN.PLANTED-PANIC\r\nPING\r\n")
        .unwrap();
    // The connection ends; nothing after the panic is answered (the first
    // PING's answer, still in the connection's buffer, may go with it).
    let got = read_to_close(&mut victim);
    assert!(b"+PONG\r\n".starts_with(&got), "{got:?}");
    assert!(node.is_running());
    assert_eq!(ok(&mut before, &[b"GET", b"a"]), bulk(b"1"));
    let mut after = connect(&addr, false);
    assert_eq!(ok(&mut after, &[b"SET", b"b", b"2"]), Value::Okay);
    let metrics = node.get_target("/metrics");
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        text.lines()
            .any(|l| l == "ataman_connection_panics_total 1"),
        "{text}"
    );
    let log = node.log();
    let line = log
        .lines()
        .find(|l| l.contains("a connection panicked"))
        .unwrap_or_else(|| panic!("no panic logged: {log}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains(&victim_addr), "{line}");
}

/// The keys of `[start, end)` node `addr` holds itself, tombstones left out
/// (its own versions, `GET /v0/internal/range`).
fn local_keys(addr: SocketAddr, start: &str, end: &str) -> Vec<Vec<u8>> {
    let target = format!("/v0/internal/range?start={start}&end={end}");
    let r = support::Conn::open(addr).request("GET", &target, &[], None);
    assert_eq!(r.status, 200, "internal range: {:?}", r.body);
    let mut keys = Vec::new();
    for chunk in r.chunks.unwrap_or_default() {
        // ts (8), kind (1), key length (4, big-endian), key, value.
        let len = u32::from_be_bytes(chunk[9..13].try_into().unwrap()) as usize;
        if chunk[8] != 0 {
            keys.push(chunk[13..13 + len].to_vec());
        }
    }
    keys
}

/// True when the node at `addr` holds only layout `version`, settled.
fn settled_at(addr: SocketAddr, version: u64) -> bool {
    let r = support::Conn::open(addr).request("GET", "/v0/layout", &[], None);
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&r.body) else {
        return false;
    };
    doc["version"] == version
        && doc["settled"] == true
        && doc["live_versions"] == serde_json::json!([version])
}

/// A RESP connection opened on a two-node cluster with R=1 (ack=1 from=1)
/// and kept across a layout change to three nodes with R=3 writes with
/// the new layout's defaults, ack=2 from=3, as HTTP does: every node
/// gets the write (regression: the connection kept the defaults and the
/// cluster size of the moment it connected).
#[test]
fn a_connection_opened_before_a_layout_change_writes_with_the_new_defaults() {
    use support::cluster::eventually;
    let no_rounds = ["--anti-entropy-interval-ms", "0"];
    let resp = support::fixed_resp_addr();
    let c = TestCluster::start_each(
        2,
        &["--replication-factor", "1", no_rounds[0], no_rounds[1]],
        |i| match i {
            0 => vec!["--resp-listen".to_string(), resp.clone()],
            _ => Vec::new(),
        },
    );
    let mut con = connect(&resp, false);
    assert_eq!(
        ok(&mut con, &[b"ATAMAN.REPLICATION"]),
        Value::Array(vec![Value::Int(1), Value::Int(1)])
    );
    assert_eq!(ok(&mut con, &[b"SET", b"grow-before", b"v"]), Value::Okay);
    // One copy: none besides it.
    assert_eq!(ok(&mut con, &[b"WAIT", b"1", b"0"]), Value::Int(0));

    let proxy = ataman::faultproxy::FaultProxy::start_without_target().unwrap();
    let added = Node::start(&[
        "--self",
        &proxy.url(),
        "--join",
        &c.urls()[0],
        no_rounds[0],
        no_rounds[1],
    ]);
    proxy.set_target(added.addr());
    let target = format!(
        "/v0/layout?version=2&add={}&replication_factor=3",
        proxy.url()
    );
    let r = support::Conn::open(c.node(0).addr()).request("POST", &target, &[], None);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let all = [c.node(0).addr(), c.node(1).addr(), added.addr()];
    for addr in all {
        eventually(
            &format!("{addr} settles at 2"),
            Duration::from_secs(120),
            || settled_at(addr, 2),
        );
    }

    // The same connection, never reset.
    assert_eq!(
        ok(&mut con, &[b"ATAMAN.REPLICATION"]),
        Value::Array(vec![Value::Int(2), Value::Int(3)])
    );
    assert_eq!(ok(&mut con, &[b"SET", b"grow-after", b"v"]), Value::Okay);
    // Confirmed on ack=2 copies: one besides the first.
    assert_eq!(ok(&mut con, &[b"WAIT", b"1", b"0"]), Value::Int(1));
    for addr in all {
        eventually(
            &format!("{addr} holds the write sent from=3"),
            Duration::from_secs(30),
            || local_keys(addr, "grow-after", "grow-after0") == vec![b"grow-after".to_vec()],
        );
    }
}

/// `WAIT` answers the fewest copies the connection's writes since the
/// last `WAIT` were confirmed on, less one, whatever the session's `ack`
/// is now (regression: it answered `ack - 1`, copies a write sent with a
/// smaller `ack` never had).
#[test]
fn wait_counts_the_copies_earlier_writes_were_confirmed_on() {
    let resp = support::fixed_resp_addr();
    let _cluster = TestCluster::start_each(3, &[], |i| match i {
        0 => vec!["--resp-listen".to_string(), resp.clone()],
        _ => Vec::new(),
    });
    let mut con = connect(&resp, false);
    assert_eq!(
        ok(&mut con, &[b"WAIT", b"0", b"0"]),
        Value::Int(0),
        "no write"
    );
    let set = |con: &mut Connection, ack: &[u8], key: &[u8]| {
        assert_eq!(
            ok(con, &[b"ATAMAN.REPLICATION", ack, b"3"]),
            Value::Array(vec![
                Value::Int(std::str::from_utf8(ack).unwrap().parse().unwrap()),
                Value::Int(3)
            ])
        );
        assert_eq!(ok(con, &[b"SET", key, b"v"]), Value::Okay);
    };
    set(&mut con, b"1", b"w1");
    set(&mut con, b"3", b"w2");
    // w1 was confirmed on one copy: none besides it, whatever ack is now.
    assert_eq!(ok(&mut con, &[b"WAIT", b"2", b"0"]), Value::Int(0));
    set(&mut con, b"3", b"w3");
    assert_eq!(ok(&mut con, &[b"WAIT", b"2", b"0"]), Value::Int(2));
    // No write since: the answer stands.
    assert_eq!(ok(&mut con, &[b"WAIT", b"2", b"0"]), Value::Int(2));
    set(&mut con, b"2", b"w4");
    assert_eq!(ok(&mut con, &[b"DEL", b"w4"]), Value::Int(1));
    assert_eq!(ok(&mut con, &[b"WAIT", b"2", b"0"]), Value::Int(1));
}

/// The metric `name` (unlabelled) on the node at `addr`.
fn metric(node: &Node, name: &str) -> u64 {
    let page = String::from_utf8(node.get_target("/metrics").body).unwrap();
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing"))
}

/// What Redis's tools ask per key and of the node: `TYPE`, `STRLEN`,
/// `MEMORY USAGE`, `CLIENT HELP`, `INFO memory` and the true `expires=`;
/// `DBSIZE` and `INFO keyspace` are counted on a range thread, never on
/// the network thread (regression: a scan of up to 10 000 entries with
/// their values ran on it), which the range threads' counter shows.
#[test]
fn type_memory_usage_info_memory_and_counts_off_the_network_thread() {
    let (node, addr) = resp_node(&[]);
    let mut con = connect(&addr, false);
    assert_eq!(ok(&mut con, &[b"SET", b"plain", b"hello"]), Value::Okay);
    let long = vec![b'x'; 1000];
    assert_eq!(
        ok(&mut con, &[b"SET", b"expiring", &long[..], b"EX", b"600"]),
        Value::Okay
    );
    assert_eq!(
        ok(&mut con, &[b"TYPE", b"plain"]),
        Value::SimpleString("string".into())
    );
    assert_eq!(
        ok(&mut con, &[b"TYPE", b"absent"]),
        Value::SimpleString("none".into())
    );
    assert_eq!(ok(&mut con, &[b"STRLEN", b"expiring"]), Value::Int(1000));
    assert_eq!(ok(&mut con, &[b"STRLEN", b"absent"]), Value::Int(0));
    let Value::Int(small) = ok(&mut con, &[b"MEMORY", b"USAGE", b"plain"]) else {
        panic!("MEMORY USAGE")
    };
    let usage = [&b"MEMORY"[..], b"USAGE", b"expiring", b"SAMPLES", b"0"];
    let Value::Int(large) = ok(&mut con, &usage) else {
        panic!("MEMORY USAGE … SAMPLES")
    };
    // Key and value at least, and the same overhead for both.
    assert!(small > 5 + 5, "{small}");
    assert_eq!(large - small, (8 + 1000) - (5 + 5));
    assert_eq!(ok(&mut con, &[b"MEMORY", b"USAGE", b"absent"]), Value::Nil);
    let Value::Array(help) = ok(&mut con, &[b"CLIENT", b"HELP"]) else {
        panic!("CLIENT HELP")
    };
    assert!(help.contains(&Value::SimpleString("SETNAME <name>".into())));

    let started = "ataman_cluster_ranges_started_total";
    let before = metric(&node, started);
    assert_eq!(ok(&mut con, &[b"DBSIZE"]), Value::Int(2));
    let Value::BulkString(info) = ok(&mut con, &[b"INFO"]) else {
        panic!("INFO")
    };
    let info = String::from_utf8(info).unwrap();
    assert_eq!(
        metric(&node, started),
        before + 2,
        "DBSIZE, INFO: one count each"
    );
    let keyspace = info.lines().find(|l| l.starts_with("db0:")).unwrap();
    assert!(
        keyspace.starts_with("db0:keys=2,expires=1,avg_ttl="),
        "{keyspace}"
    );
    let avg_ttl: u64 = keyspace.rsplit('=').next().unwrap().parse().unwrap();
    assert!(avg_ttl > 0 && avg_ttl <= 600_000, "{keyspace}");
    let field = |name: &str| -> u64 {
        let line = info.lines().find(|l| l.starts_with(name)).unwrap();
        line[name.len() + 1..].trim().parse().unwrap()
    };
    // The memtable holds both values at least.
    assert!(field("used_memory") > 1000, "{info}");
    assert!(info.contains("used_memory_human:"), "{info}");
    // INFO without its keyspace counts nothing.
    let Value::BulkString(memory) = ok(&mut con, &[b"INFO", b"memory"]) else {
        panic!("INFO memory")
    };
    assert!(
        String::from_utf8(memory)
            .unwrap()
            .starts_with("# Memory\r\nused_memory:")
    );
    assert_eq!(metric(&node, started), before + 2);
}
