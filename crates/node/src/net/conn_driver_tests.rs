//! The connection state machine fed by [`super::conn_driver`]: the
//! regression tests of inputs that once stopped a node, and a property
//! test that arbitrary bytes, split anywhere, with writes pending or not,
//! never panic a connection.

use super::conn_driver::{ADMIN_TOKEN, Driven, Step, TestNode, play, script_of};
use proptest::prelude::*;

fn node(tokens: bool) -> TestNode {
    TestNode::start(tokens).unwrap()
}

fn text(d: &Driven) -> String {
    String::from_utf8_lossy(d.output()).into_owned()
}

// `SET a b\r\nSET k\r\n` in one write: the second command, parsed while the
// first write was pending, sliced `args[3..]` in `names_a_write` and
// panicked the network thread. It must get an arity error instead.
#[test]
fn resp_short_set_behind_a_pending_write_is_an_arity_error_not_a_panic() {
    let node = node(false);
    let mut d = node.connect(true).unwrap();
    assert!(d.send(b"SET a b\r\nSET k\r\n"));
    assert_eq!(text(&d), "", "the SET waits for its write");
    d.complete_writes(true);
    assert!(d.is_open());
    assert!(d.wait_output(|o| o.ends_with(b"\r\n") && o.len() > 5));
    let out = text(&d);
    assert!(
        out.starts_with("+OK\r\n-ERR wrong number of arguments"),
        "{out:?}"
    );
    assert!(d.send(b"PING\r\n"));
    assert!(
        d.wait_output(|o| o.ends_with(b"+PONG\r\n")),
        "{:?}",
        text(&d)
    );
}

// Every other command short of its arguments behind a pending write gets
// its arity error too (the same class as the `SET k` panic).
#[test]
fn resp_short_commands_behind_a_pending_write_get_arity_errors() {
    let node = node(false);
    for command in [
        "SET",
        "SET k",
        "MSET",
        "SETEX k",
        "PSETEX",
        "SETEX",
        "GET",
        "DEL",
        "EXPIRE k",
        "GETEX",
        "MGET",
        "INCR",
        "AUTH",
        "HELLO 3 AUTH",
        "CLIENT",
        "CONFIG",
        "SCAN",
        "TTL",
        "EXISTS",
    ] {
        let mut d = node.connect(true).unwrap();
        let input = format!("SET a b\r\n{command}\r\nPING\r\n");
        assert!(d.send(input.as_bytes()), "{command}");
        d.complete_writes(true);
        d.complete_writes(true);
        d.wait_output(|o| o.ends_with(b"+PONG\r\n"));
        let out = text(&d);
        assert!(d.is_open(), "{command}: {out:?}");
        assert!(out.starts_with("+OK\r\n-ERR "), "{command}: {out:?}");
        assert!(out.ends_with("+PONG\r\n"), "{command}: {out:?}");
    }
}

// With tokens, an unauthenticated RESP connection is refused politely
// and an authenticated one served (the driver reaches both states).
#[test]
fn resp_driver_reaches_the_authenticated_state() {
    let node = node(true);
    let mut d = node.connect(true).unwrap();
    assert!(d.send(b"GET k\r\n"));
    assert!(d.wait_output(|o| o.ends_with(b"\r\n")));
    assert!(text(&d).starts_with("-NOAUTH"), "{:?}", text(&d));
    assert!(d.send(format!("AUTH {ADMIN_TOKEN}\r\nSET k v\r\nPING\r\n").as_bytes()));
    d.complete_writes(true);
    assert!(
        d.wait_output(|o| o.ends_with(b"+PONG\r\n")),
        "{:?}",
        text(&d)
    );
    assert!(
        text(&d).ends_with("+OK\r\n+OK\r\n+PONG\r\n"),
        "{:?}",
        text(&d)
    );
}

/// Pieces of RESP a client may send, good and bad, short and long.
const RESP_PIECES: &[&str] = &[
    "SET a b\r\n",
    "SET k\r\n",
    "SET k v KEEPTTL\r\n",
    "SET k v EX\r\n",
    "GET a\r\n",
    "MSET a 1 b\r\n",
    "MSET a 1 b 2\r\n",
    "SETEX k\r\n",
    "EXPIRE a 10\r\n",
    "GETEX a PERSIST\r\n",
    "GETDEL a\r\n",
    "DEL a b\r\n",
    "TTL a\r\n",
    "AUTH @T\r\n",
    "AUTH default @T\r\n",
    "AUTH x\r\n",
    "HELLO 3 AUTH default @T\r\n",
    "HELLO 3 AUTH\r\n",
    "HELLO 2\r\n",
    "CLIENT SETNAME x\r\n",
    "CLIENT\r\n",
    "SCAN 0 COUNT 5\r\n",
    "SCAN\r\n",
    "INFO keyspace\r\n",
    "DBSIZE\r\n",
    "CONFIG GET *\r\n",
    "ATAMAN.REPLICATION 1 1\r\n",
    "QUIT\r\n",
    "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
    "*2\r\n$3\r\nSET\r\n$1\r\nk\r\n",
    "*1\r\n$3\r\nGET\r\n",
    "*2\r\n$3\r\nGET\r\n$-1\r\n",
    "*0\r\n",
    "*-1\r\n",
    "*1\r\n$99999999999\r\n",
    "*20\r\n",
    "$3\r\nabc\r\n",
    "\r\n",
    "\"unterminated\r\n",
];

/// Pieces of HTTP a client may send.
const HTTP_PIECES: &[&str] = &[
    "PUT /v0/entity?id=a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
    "PUT /v0/entity?id=a HTTP/1.1\r\nAuthorization: Bearer @T\r\nContent-Length: 2\r\n\r\nxy",
    "PUT /v0/entity?id=a&ack=1&from=1 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    "abc",
    "GET /v0/entity?id=a HTTP/1.1\r\n\r\n",
    "GET /v0/entity?id=a HTTP/1.1\r\nAuthorization: Bearer @T\r\n\r\n",
    "GET /v0/entity?id= HTTP/1.1\r\n\r\n",
    "DELETE /v0/entity?id=a HTTP/1.1\r\nAuthorization: Bearer @T\r\n\r\n",
    "GET /v0/entities?start=a&end=b HTTP/1.1\r\nAuthorization: Bearer @T\r\n\r\n",
    "GET /v0/status HTTP/1.1\r\n\r\n",
    "GET /v0/metrics HTTP/1.0\r\n\r\n",
    "GET /v0/layout HTTP/1.1\r\nConnection: close\r\n\r\n",
    "POST /v0/layout HTTP/1.1\r\nContent-Length: 4\r\n\r\n{}{}",
    "GET /v0/peer HTTP/1.1\r\nUpgrade: ataman-peer/1\r\nConnection: Upgrade\r\n\r\n",
    "PUT /v0/entity?id=a HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
    "PUT /v0/entity?id=a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: \u{7f}\r\n\r\n",
    "\r\n",
    "GARBAGE\r\n\r\n",
];

/// A script of pieces (or random bytes) and engine answers.
fn script(pieces: &'static [&'static str]) -> impl Strategy<Value = Vec<Step>> {
    let piece = prop_oneof![
        6 => prop::sample::select(pieces).prop_map(|p| Step::Send(p.as_bytes().to_vec())),
        1 => prop::collection::vec(any::<u8>(), 1..40).prop_map(Step::Send),
        2 => any::<bool>().prop_map(Step::CompleteWrites),
        1 => Just(Step::TimeOut),
        1 => Just(Step::ShutWrite),
    ];
    prop::collection::vec(piece, 1..12)
}

/// The same script with its bytes sent in two parts cut at `at`.
fn cut(script: &[Step], at: usize) -> Vec<Step> {
    let mut seen = 0;
    let mut out = Vec::new();
    for step in script {
        match step {
            Step::Send(bytes) if seen <= at && at < seen + bytes.len() => {
                let (a, b) = bytes.split_at(at - seen);
                out.push(Step::Send(a.to_vec()));
                out.push(Step::Send(b.to_vec()));
                seen += bytes.len();
            }
            Step::Send(bytes) => {
                seen += bytes.len();
                out.push(step.clone());
            }
            _ => out.push(step.clone()),
        }
    }
    out
}

fn sent_bytes(script: &[Step]) -> usize {
    script
        .iter()
        .map(|s| match s {
            Step::Send(b) => b.len(),
            _ => 0,
        })
        .sum()
}

/// Plays `script` whole, then cut at every byte boundary; a panic fails.
fn play_every_cut(node: &TestNode, resp: bool, script: &[Step]) {
    play(node, resp, script).unwrap();
    for at in 0..sent_bytes(script) {
        play(node, resp, &cut(script, at)).unwrap();
    }
}

thread_local! {
    static NODES: [TestNode; 2] = [node(false), node(true)];
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    // The real RESP connection, with and without tokens, writes pending
    // or answered at any point, its input split at every byte: no input
    // panics it.
    #[test]
    fn resp_connection_never_panics_on_any_input(script in script(RESP_PIECES), tokens in any::<bool>()) {
        NODES.with(|nodes| play_every_cut(&nodes[usize::from(tokens)], true, &script));
    }

    // The same for the real HTTP connection.
    #[test]
    fn http_connection_never_panics_on_any_input(script in script(HTTP_PIECES), tokens in any::<bool>()) {
        NODES.with(|nodes| play_every_cut(&nodes[usize::from(tokens)], false, &script));
    }

    // Arbitrary bytes decoded as the fuzz target decodes them.
    #[test]
    fn fuzz_scripts_never_panic(data in prop::collection::vec(any::<u8>(), 0..200), resp in any::<bool>(), tokens in any::<bool>()) {
        NODES.with(|nodes| play(&nodes[usize::from(tokens)], resp, &script_of(&data)).unwrap());
    }
}
