//! `WATCH` of a key with replicas on other nodes, through the consensus
//! register (`net::register_rmw`, "Versions"), on three real
//! `ataman serve` processes with `--replication-factor 3`: a transaction
//! runs only on the version its `WATCH` saw, whichever node the watch,
//! the change and the `EXEC` went through; the check-and-set loop Redis
//! clients build from it (`WATCH`, `GET`, `MULTI`, `SET`, `EXEC`, again
//! on a null reply) loses no update with clients on every node; and the
//! planted `register-watch-ignores-version` (the watch not evaluated) is
//! caught by the same checks.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::{Connection, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::cluster::TestCluster;
use support::resp_client::{connect, ok, run};

/// Reads and writes of the clients.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Clients per node in the loop.
const CLIENTS_PER_NODE: usize = 2;
/// Increments each client makes.
const INCREMENTS: usize = 8;
/// Tries of one increment before the client gives up (a null `EXEC`,
/// another client won; an error, the outcome unknown).
const TRIES_MAX: usize = 400;

/// Three nodes, `--replication-factor 3`, each with a RESP listener,
/// with `extra` arguments: the cluster and the RESP addresses.
fn three_with(extra: &[&str]) -> (TestCluster, Vec<String>) {
    let addrs: Vec<String> = (0..3).map(|_| support::fixed_resp_addr()).collect();
    let own = addrs.clone();
    let mut args = vec!["--replication-factor", "3"];
    args.extend_from_slice(extra);
    let cluster = TestCluster::start_each(3, &args, move |i| {
        vec!["--resp-listen".to_owned(), own[i].clone()]
    });
    (cluster, addrs)
}

/// The integer a bulk reply holds (absent: 0).
fn number(v: &Value) -> i64 {
    match v {
        Value::Nil => 0,
        Value::BulkString(b) => String::from_utf8_lossy(b).parse().unwrap(),
        other => panic!("not a number: {other:?}"),
    }
}

/// `WATCH key`, `GET key`: the value read.
fn watch_and_read(con: &mut Connection, key: &str) -> redis::RedisResult<i64> {
    let watched = run(con, &["WATCH", key])?;
    assert_eq!(watched, Value::Okay, "WATCH");
    Ok(number(&run(con, &["GET", key])?))
}

/// `MULTI`, `SET key value`, `EXEC`: `Some(true)` when it ran, `Some(false)`
/// on the null reply (a watched key changed), `None` on an error.
fn set_in_transaction(con: &mut Connection, key: &str, value: i64) -> Option<bool> {
    let value = value.to_string();
    assert_eq!(ok(con, &["MULTI"]), Value::Okay);
    assert_eq!(
        ok(con, &["SET", key, &value]),
        Value::SimpleString("QUEUED".into())
    );
    match run(con, &["EXEC"]) {
        Ok(Value::Nil) => Some(false),
        Ok(Value::Array(replies)) => {
            assert_eq!(replies, vec![Value::Okay], "EXEC's replies");
            Some(true)
        }
        Ok(other) => panic!("EXEC answered {other:?}"),
        Err(_) => None,
    }
}

/// Two clients on different nodes watch and read the same version; a
/// third, on the third node, changes the key in between; then both
/// `EXEC`: the first finds the key changed (null), and so does the second.
/// Returns what the two `EXEC`s answered.
fn interleaved(addrs: &[String], key: &str) -> (Option<bool>, Option<bool>) {
    let mut a = connect(&addrs[0], false, TIMEOUT);
    let mut b = connect(&addrs[1], false, TIMEOUT);
    let mut c = connect(&addrs[2], false, TIMEOUT);
    assert_eq!(ok(&mut c, &["INCR", key]), Value::Int(1));
    assert_eq!(watch_and_read(&mut a, key).unwrap(), 1);
    assert_eq!(watch_and_read(&mut b, key).unwrap(), 1);
    assert_eq!(ok(&mut c, &["INCR", key]), Value::Int(2));
    (
        set_in_transaction(&mut a, key, 10),
        set_in_transaction(&mut b, key, 20),
    )
}

/// Every client adds 1 to `key` [`INCREMENTS`] times with the
/// check-and-set loop, clients on every node at once: the increments
/// acknowledged (`EXEC` ran) and the outcomes unknown (an error).
fn cas_loop(addrs: &[String], key: &'static str) -> (usize, usize) {
    let acked = Arc::new(Mutex::new(0usize));
    let unknown = Arc::new(Mutex::new(0usize));
    let clients: Vec<_> = (0..addrs.len() * CLIENTS_PER_NODE)
        .map(|i| {
            let addr = addrs[i % addrs.len()].clone();
            let (acked, unknown) = (Arc::clone(&acked), Arc::clone(&unknown));
            std::thread::spawn(move || {
                let mut con = connect(&addr, false, TIMEOUT);
                for _ in 0..INCREMENTS {
                    let mut tries = 0;
                    loop {
                        tries += 1;
                        assert!(tries <= TRIES_MAX, "no progress through {addr}");
                        // A failed WATCH or GET wrote nothing: again.
                        let Ok(n) = watch_and_read(&mut con, key) else {
                            continue;
                        };
                        match set_in_transaction(&mut con, key, n + 1) {
                            Some(true) => {
                                *acked.lock().unwrap() += 1;
                                break;
                            }
                            Some(false) => continue,
                            None => *unknown.lock().unwrap() += 1,
                        }
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let acked = *acked.lock().unwrap();
    let unknown = *unknown.lock().unwrap();
    (acked, unknown)
}

/// The counter `key` read through every node with a quorum read: they
/// agree, and its value.
fn settled(addrs: &[String], key: &str) -> i64 {
    let values: Vec<i64> = addrs
        .iter()
        .map(|addr| {
            let mut con = connect(addr, false, TIMEOUT);
            number(&ok(&mut con, &["GETRANGE", key, "0", "-1"]))
        })
        .collect();
    assert!(values.windows(2).all(|w| w[0] == w[1]), "{values:?}");
    values[0]
}

/// The semantics, one order at a time: a `WATCH` of a key with replicas
/// on other nodes answers `+OK`; a change through another node between
/// it and `EXEC` makes `EXEC` answer null with nothing written; a watch
/// with no change in between runs. Then the loop through three nodes
/// ends at exactly the increments acknowledged, plus at most one per
/// outcome unknown.
#[test]
fn watch_through_the_register_guards_exec() {
    let (_cluster, addrs) = three_with(&[]);
    assert_eq!(interleaved(&addrs, "w1"), (Some(false), Some(false)));
    assert_eq!(settled(&addrs, "w1"), 2, "nothing written by either EXEC");
    let mut a = connect(&addrs[0], false, TIMEOUT);
    assert_eq!(watch_and_read(&mut a, "w1").unwrap(), 2);
    assert_eq!(set_in_transaction(&mut a, "w1", 3), Some(true));
    assert_eq!(settled(&addrs, "w1"), 3);
    // A key absent when watched and still absent: it runs.
    assert_eq!(watch_and_read(&mut a, "w2").unwrap(), 0);
    assert_eq!(set_in_transaction(&mut a, "w2", 7), Some(true));
    assert_eq!(settled(&addrs, "w2"), 7);

    let (acked, unknown) = cas_loop(&addrs, "counter");
    let total = settled(&addrs, "counter") as usize;
    println!("check-and-set loop: {acked} acknowledged, {unknown} unknown, counter {total}");
    assert_eq!(acked, addrs.len() * CLIENTS_PER_NODE * INCREMENTS);
    assert!(
        (acked..=acked + unknown).contains(&total),
        "lost or phantom increments: counter {total}, {acked} acknowledged, {unknown} unknown"
    );
}

/// Negative control: with the watch not evaluated
/// (`--debug-planted-bug register-watch-ignores-version`), the second
/// `EXEC` of the interleaving writes over the change it never saw.
#[test]
fn planted_watch_ignoring_the_version_is_caught() {
    let (_cluster, addrs) = three_with(&["--debug-planted-bug", "register-watch-ignores-version"]);
    let (first, second) = interleaved(&addrs, "w");
    assert_eq!(
        (first, second),
        (Some(true), Some(true)),
        "the planted bug lets both EXECs write over the change"
    );
}
