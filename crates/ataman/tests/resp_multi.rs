//! `MULTI`/`EXEC`/`DISCARD` of one key on a real `ataman serve`
//! (`net::resp::multi`, `net::resp::multi_apply`): the replies of a real
//! `redis-server`, byte for byte, for sequences with errors; a transaction
//! on several keys refused with nothing applied; the real redis-py's
//! `pipeline()` (transaction=True); concurrent transactions of two
//! increments each ending exact with consecutive replies; pipelined and
//! split input while queued. Negative control: `--debug-planted-bug
//! rmw-skips-conflict-check` (the transaction's write no longer checked
//! against concurrent writes) loses increments, and the exact count says so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::raw_resp::{Raw, frame, start};

/// Concurrent clients of the transaction workload.
const CLIENTS: usize = 8;
/// Transactions per client.
const TXS: usize = 60;
/// Rounds the planted bug gets to lose an increment.
const PLANTED_ROUNDS: usize = 5;

/// `words` (split at spaces) as one command.
fn command_bytes(words: &str) -> Vec<u8> {
    let args: Vec<&[u8]> = words.split(' ').map(str::as_bytes).collect();
    frame(&args)
}

/// Sends `words` as one command; its whole reply (never a cut one).
fn call(raw: &mut Raw, command: &str) -> Vec<u8> {
    raw.send(&command_bytes(command));
    reply_whole(raw)
}

/// The next reply, which must not be cut.
fn reply_whole(raw: &mut Raw) -> Vec<u8> {
    let reply = raw.reply();
    assert!(reply.ends_with(b"\r\n"), "cut reply {reply:?}");
    reply
}

/// Transactions with every kind of error, side by side with redis-server.
const SCRIPT: &[&str] = &[
    "EXEC",
    "DISCARD",
    "MULTI",
    "MULTI",
    "WATCH k",
    "SET k 1",
    "INCR k",
    "INCRBY k x",
    "GET k",
    "APPEND k 0",
    "STRLEN k",
    "EXPIRE k 100",
    "TTL k",
    "PING",
    "ECHO hi",
    "EXEC",
    "GET k",
    "TTL k",
    "MULTI",
    "EXEC",
    "MULTI",
    "PING hello",
    "UNWATCH",
    "EXEC",
    "MULTI",
    "SET k v",
    "NOSUCHCOMMAND k",
    "EXEC",
    "GET k",
    "MULTI",
    "GET",
    "SET k v",
    "EXEC",
    "MULTI",
    "SET k v",
    "DISCARD",
    "GET k",
    "MULTI",
    "MULTI x",
    "EXEC",
    "MULTI",
    "SET k 5",
    "EXEC x",
    "EXEC",
    "GET k",
    "MULTI",
    "DEL k",
    "SET k 5",
    "GETSET k 6",
    "GETDEL k",
    "EXISTS k k",
    "SETNX k a",
    "EXISTS k k",
    "PTTL k",
    "SET k v BAD",
    "SET k 10 EX 100",
    "TTL k",
    "DECRBY k 3",
    "INCRBYFLOAT k 1.5",
    "GETRANGE k 0 1",
    "SETRANGE k 1 xx",
    "PEXPIRE k 0",
    "GET k",
    "DEL k k",
    "EXEC",
    "EXISTS k",
    "UNWATCH",
];

/// Every step of [`SCRIPT`] answers as redis-server answers it.
#[test]
fn multi_exec_discard_sequences_match_redis_server() {
    let server = support::redis_server::start();
    let (_node, addr) = start(&[]);
    let mut redis = Raw::connect(&server.addr);
    let mut ours = Raw::connect(&addr);
    let mut diffs = Vec::new();
    for words in SCRIPT {
        let (theirs, mine) = (call(&mut redis, words), call(&mut ours, words));
        if theirs != mine {
            diffs.push(format!(
                "{words}: redis {:?}, ours {:?}",
                String::from_utf8_lossy(&theirs),
                String::from_utf8_lossy(&mine)
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// A transaction naming a second key is refused when queued, `EXEC`
/// discards it, and nothing of it is applied.
#[test]
fn a_transaction_on_two_keys_is_refused_and_applies_nothing() {
    let (_node, addr) = start(&[]);
    let mut c = Raw::connect(&addr);
    assert_eq!(call(&mut c, "MULTI"), b"+OK\r\n");
    assert_eq!(call(&mut c, "SET a 1"), b"+QUEUED\r\n");
    let refused = String::from_utf8(call(&mut c, "SET b 2")).unwrap();
    assert!(
        refused.starts_with("-ERR a transaction touches one key: 'b' after 'a'"),
        "{refused}"
    );
    let exec = String::from_utf8(call(&mut c, "EXEC")).unwrap();
    assert!(exec.starts_with("-EXECABORT"), "{exec}");
    assert_eq!(call(&mut c, "EXISTS a b"), b":0\r\n");
    let mget = String::from_utf8({
        call(&mut c, "MULTI");
        call(&mut c, "MGET a")
    })
    .unwrap();
    assert!(
        mget.contains("MGET inside MULTI is not supported"),
        "{mget}"
    );
    assert!(call(&mut c, "EXEC").starts_with(b"-EXECABORT"));
}

/// A whole transaction in one write, then byte by byte: the same replies.
#[test]
fn pipelined_and_split_transactions() {
    let (_node, addr) = start(&[]);
    let words = ["MULTI", "SET p 1", "INCR p", "GET p", "EXEC", "GET p"];
    let expected: Vec<&[u8]> = vec![
        b"+OK\r\n",
        b"+QUEUED\r\n",
        b"+QUEUED\r\n",
        b"+QUEUED\r\n",
        b"*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n",
        b"$1\r\n2\r\n",
    ];
    let all: Vec<u8> = words.iter().flat_map(|w| command_bytes(w)).collect();
    let mut whole = Raw::connect(&addr);
    whole.send(&all);
    for e in &expected {
        assert_eq!(reply_whole(&mut whole), *e);
    }
    let mut split = Raw::connect(&addr);
    for byte in &all {
        split.send(std::slice::from_ref(byte));
    }
    for e in &expected {
        assert_eq!(reply_whole(&mut split), *e);
    }
}

/// The redis-py of `target/redis-py-venv`, installed when missing: once
/// per test binary (two tests run redis-py at once; creating one venv
/// twice at the same moment fails).
fn python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(install_redis_py).clone()
}

fn install_redis_py() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let venv = root.join("redis-py-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success(), "python3 -m venv failed");
    }
    let has = Command::new(&python)
        .args(["-c", "import redis"])
        .status()
        .unwrap();
    if !has.success() {
        let pip = venv.join("bin/pip");
        let installed = Command::new(pip)
            .args(["install", "-q", "redis"])
            .status()
            .unwrap();
        assert!(installed.success(), "pip install redis failed");
    }
    python
}

/// redis-py: a `pipeline()` (MULTI … EXEC) of SET, INCR, GET answers
/// `[True, 2, b'2']`; then `CLIENTS` threads each run `TXS` pipelines of
/// two INCRs; prints the final count and whether every pipeline's two
/// replies were consecutive.
const REDIS_PY: &str = r#"
import sys, threading, redis
host, port = sys.argv[1].split(":")
clients, txs = int(sys.argv[2]), int(sys.argv[3])
r = redis.Redis(host=host, port=int(port), socket_timeout=30)
p = r.pipeline()
p.set("pk", 1); p.incr("pk"); p.get("pk")
print("pipeline", p.execute())
r.delete("n")
pairs = []
def work():
    c = redis.Redis(host=host, port=int(port), socket_timeout=30)
    for _ in range(txs):
        p = c.pipeline()
        p.incr("n"); p.incr("n")
        a, b = p.execute()
        pairs.append(b == a + 1)
threads = [threading.Thread(target=work) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
print("count", int(r.get("n")), "consecutive", all(pairs), len(pairs))
"#;

/// Runs [`REDIS_PY`] against `addr`: its output lines.
fn redis_py(addr: &str) -> Vec<String> {
    let out = Command::new(python())
        .args(["-c", REDIS_PY, addr, &CLIENTS.to_string(), &TXS.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "redis-py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn exact_line() -> String {
    format!(
        "count {} consecutive True {}",
        CLIENTS * TXS * 2,
        CLIENTS * TXS
    )
}

/// redis-py's transactional pipeline works, and concurrent transactions
/// on two network threads end exact, each one's increments consecutive.
#[test]
fn redis_py_pipelines_are_atomic() {
    let (_node, addr) = start(&["--net-threads", "2"]);
    let lines = redis_py(&addr);
    assert_eq!(lines[0], "pipeline [True, 2, b'2']");
    assert_eq!(lines[1], exact_line());
}

/// Negative control: with the conditional write's check planted away,
/// concurrent transactions lose increments (within a few rounds).
#[test]
fn the_planted_bug_breaks_the_exact_count() {
    let planted = [
        "--net-threads",
        "2",
        "--debug-planted-bug",
        "rmw-skips-conflict-check",
    ];
    let (_node, addr) = start(&planted);
    let caught = (0..PLANTED_ROUNDS).any(|_| redis_py(&addr)[1] != exact_line());
    assert!(
        caught,
        "the planted bug lost no increment in {PLANTED_ROUNDS} rounds"
    );
}
