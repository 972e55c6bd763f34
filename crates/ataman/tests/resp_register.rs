//! Atomic read-modify-writes of keys with replicas on other nodes,
//! through the consensus register (`net::register_rmw`,
//! `replication::register_ops`, `net::register_acceptor`), on three real
//! `ataman serve` processes with `--replication-factor 3`: concurrent
//! `INCR`s from clients on every node on one hot key hand out every value
//! once and end at the count of acknowledged increments; a `SET NX` lock
//! is taken by exactly one client; a `GETSET` chain hands each value out
//! once; a replica killed with SIGKILL mid-run leaves the operations
//! working on 2 of 3, and the restarted replica agrees.
//!
//! Errors are allowed within a bound ([`ERRORS_PERCENT_MAX`]: competing
//! proposers on one hot key answer "the outcome is unknown … may or may
//! not have taken effect"); the rate is printed, and each check counts an
//! unknown outcome as either: the final counter lies between the
//! acknowledged count and that plus the errors, no value is handed out
//! twice, at most one acknowledged `GETSET` value per unknown outcome is
//! never seen again. The planted bug `register-accepts-below-promise` is
//! caught by the simulation's register check (`crates/sim/tests/register.rs`),
//! which runs the same acceptor rules the node runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use redis::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::cluster::TestCluster;
use support::resp_client::{connect, ok, run};

/// Clients per node.
const CLIENTS_PER_NODE: usize = 2;
/// `INCR`s per client.
const INCRS: usize = 40;
/// Errors allowed per 100 operations: six clients on one key through
/// three nodes duel (one coordinator per key, forwarding to the key's
/// first replica, is not built), and a round whose accept another
/// proposer's prepare overtook answers "the outcome is unknown". Measured
/// 16% to 33% (240 INCRs) and 28% to 34% (320, a replica killed midway: its
/// doubts cannot be cleared without every replica) when this was
/// written, run alone; over 50% once (GETSET) with this file's five
/// clusters running at once on two shared cores. The bound catches a
/// regression to nearly every operation failing; the checks above hold
/// whatever the rate.
const ERRORS_PERCENT_MAX: usize = 75;
/// Reads and writes of the clients.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Three nodes, `--replication-factor 3`, each with a RESP listener: the
/// cluster and the RESP addresses.
fn three() -> (TestCluster, Vec<String>) {
    three_with(&[])
}

/// [`three`] with `extra` arguments for every node.
fn three_with(extra: &[&str]) -> (TestCluster, Vec<String>) {
    let addrs: Vec<String> = (0..3).map(|_| support::fixed_resp_addr()).collect();
    let own = addrs.clone();
    // The register is on by default; the flag says so explicitly.
    let mut args = vec!["--replication-factor", "3", "--consensus-register"];
    args.extend_from_slice(extra);
    let cluster = TestCluster::start_each(3, &args, move |i| {
        vec!["--resp-listen".to_owned(), own[i].clone()]
    });
    (cluster, addrs)
}

/// An integer reply's value.
fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The replies of `INCR key` sent `INCRS` times by `CLIENTS_PER_NODE`
/// clients on each of `nodes`: the values acknowledged, and the errors.
fn incr_storm(addrs: &[String], nodes: &[usize], key: &str) -> (Vec<i64>, Vec<String>) {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for &n in nodes {
        for _ in 0..CLIENTS_PER_NODE {
            let (addr, key) = (addrs[n].clone(), key.to_owned());
            let (acked, errors) = (Arc::clone(&acked), Arc::clone(&errors));
            threads.push(std::thread::spawn(move || {
                let mut con = connect(&addr, false, TIMEOUT);
                for _ in 0..INCRS {
                    match run(&mut con, &["INCR", &key]) {
                        Ok(v) => acked.lock().unwrap().push(int(&v)),
                        Err(e) => errors.lock().unwrap().push(e.to_string()),
                    }
                }
            }));
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let errors = errors.lock().unwrap().clone();
    (acked, errors)
}

/// Whether the counter's history breaks what [`check_counter`] asserts:
/// a value handed out twice, or a final value outside the bounds.
fn counter_broken(acked: &[i64], errors: &[String], final_value: i64, base: i64) -> bool {
    let distinct: HashSet<i64> = acked.iter().copied().collect();
    let low = base + acked.len() as i64;
    let high = base + (acked.len() + errors.len()) as i64;
    distinct.len() != acked.len() || !(low..=high).contains(&final_value)
}

/// Every acknowledged `INCR` got its own value (a linearizable counter
/// hands each out once), and the final value lies between the
/// acknowledged count and that plus the errors (each error may or may
/// not have taken effect).
fn check_counter(acked: &[i64], errors: &[String], final_value: i64, base: i64) {
    let distinct: HashSet<i64> = acked.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        acked.len(),
        "an INCR value was handed out twice: {acked:?}"
    );
    let (low, high) = (
        base + acked.len() as i64,
        base + (acked.len() + errors.len()) as i64,
    );
    assert!(
        (low..=high).contains(&final_value),
        "final {final_value} outside {low}..={high} (errors: {errors:?})"
    );
    for e in errors {
        assert!(
            e.contains("may or may not have taken effect") || e.contains("TRYAGAIN"),
            "an error that is neither a retry nor an unknown outcome: {e}"
        );
    }
    let total = acked.len() + errors.len();
    println!(
        "register INCR: {} acknowledged, {} errors of {total} ({:.1}%)",
        acked.len(),
        errors.len(),
        100.0 * errors.len() as f64 / total.max(1) as f64
    );
    assert!(
        errors.len() * 100 <= total * ERRORS_PERCENT_MAX,
        "{} errors of {total}, over {ERRORS_PERCENT_MAX}%: {errors:?}",
        errors.len()
    );
}

/// The value of the counter `key` as the register decides it now (an
/// `INCRBY 0` through node `n` reads it with a consensus round).
fn counter(addrs: &[String], n: usize, key: &str) -> i64 {
    let mut con = connect(&addrs[n], false, TIMEOUT);
    int(&ok(&mut con, &["INCRBY", key, "0"]))
}

/// Proves the hot-key counter is exact: 240 `INCR`s from six clients
/// through three nodes, each value handed out once, the end at the count.
#[test]
fn concurrent_incrs_through_three_nodes_are_exact() {
    let (cluster, addrs) = three();
    let (acked, errors) = incr_storm(&addrs, &[0, 1, 2], "hot");
    let final_value = counter(&addrs, 1, "hot");
    check_counter(&acked, &errors, final_value, 0);
    assert_eq!(
        final_value,
        counter(&addrs, 2, "hot"),
        "two nodes decide one value"
    );
    drop(cluster);
}

/// Proves mutual exclusion: of six clients racing `SET lock me NX`
/// through three nodes exactly one gets `OK`, and the lock holds its value.
#[test]
fn set_nx_lock_is_taken_once() {
    let (cluster, addrs) = three();
    let mut threads = Vec::new();
    for c in 0..6 {
        let addr = addrs[c % 3].clone();
        threads.push(std::thread::spawn(move || {
            let mut con = connect(&addr, false, TIMEOUT);
            let me = format!("client-{c}");
            let reply = run(&mut con, &["SET", "lock", &me, "NX"]).map_err(|e| e.to_string());
            (me, reply)
        }));
    }
    let results: Vec<(String, Result<Value, String>)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let winners: Vec<&String> = results
        .iter()
        .filter(|(_, v)| matches!(v, Ok(Value::Okay)))
        .map(|(me, _)| me)
        .collect();
    assert!(winners.len() <= 1, "two holders: {results:?}");
    let unknown: Vec<&String> = results
        .iter()
        .filter(|(_, v)| v.is_err())
        .map(|(me, _)| me)
        .collect();
    assert!(
        results
            .iter()
            .all(|(_, v)| matches!(v, Ok(Value::Okay | Value::Nil) | Err(_))),
        "{results:?}"
    );
    let mut con = connect(&addrs[2], false, TIMEOUT);
    let held = match ok(&mut con, &["GETSET", "lock", "released"]) {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("the lock holds no value: {other:?}"),
    };
    match winners.first() {
        // The one `OK` holds the lock.
        Some(winner) => assert_eq!(&held, *winner),
        // The holder's `SET` answered an unknown outcome.
        None => assert!(unknown.contains(&&held), "{held} never asked: {results:?}"),
    }
    println!(
        "register SET NX: {} OK, {} unknown outcomes of 6",
        winners.len(),
        unknown.len()
    );
    drop(cluster);
}

/// Proves a `GETSET` chain hands every value out exactly once: each
/// value a `GETSET` wrote and was acknowledged for comes back from
/// exactly one later `GETSET` (or is the last); a value whose `GETSET`
/// answered an unknown outcome comes back at most once; nothing else
/// comes back.
#[test]
fn getset_chain_hands_each_value_out_once() {
    let (cluster, addrs) = three();
    let mut threads = Vec::new();
    for c in 0..6 {
        let addr = addrs[c % 3].clone();
        threads.push(std::thread::spawn(move || {
            let mut con = connect(&addr, false, TIMEOUT);
            let mut got = Vec::new();
            for j in 0..15 {
                let mine = format!("v{c}-{j}");
                let reply = match run(&mut con, &["GETSET", "chain", &mine]) {
                    Ok(Value::BulkString(b)) => Ok(Some(String::from_utf8(b).unwrap())),
                    Ok(Value::Nil) => Ok(None),
                    Ok(other) => panic!("{other:?}"),
                    Err(e) => Err(e.to_string()),
                };
                got.push((mine, reply));
            }
            got
        }));
    }
    let got: Vec<(String, Result<Option<String>, String>)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let mut con = connect(&addrs[0], false, TIMEOUT);
    let last = match ok(&mut con, &["GETSET", "chain", "end"]) {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let mut handed: Vec<String> = got
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().cloned().flatten())
        .collect();
    handed.push(last);
    let nils = got.iter().filter(|(_, r)| matches!(r, Ok(None))).count();
    assert!(nils <= 1, "two GETSETs found the key absent: {got:?}");
    let count = |v: &String| handed.iter().filter(|h| *h == v).count();
    for (mine, _) in &got {
        assert!(count(mine) <= 1, "{mine} handed out {} times", count(mine));
    }
    let written: HashSet<&String> = got.iter().map(|(mine, _)| mine).collect();
    assert!(
        handed.iter().all(|h| written.contains(h)),
        "a value nobody wrote came back"
    );
    // An acknowledged value comes back once, unless the GETSET that
    // replaced it answered an unknown outcome (its reply, that value, was
    // lost): at most one such value per unknown outcome.
    let errors = got.iter().filter(|(_, r)| r.is_err()).count();
    let unseen = got
        .iter()
        .filter(|(mine, r)| r.is_ok() && count(mine) == 0)
        .count();
    assert!(
        unseen <= errors,
        "{unseen} acknowledged values never came back, {errors} unknown outcomes"
    );
    println!(
        "register GETSET: {errors} unknown outcomes of {}",
        got.len()
    );
    assert!(
        errors * 100 <= got.len() * ERRORS_PERCENT_MAX,
        "{errors} errors"
    );
    drop(cluster);
}

/// Proves the register keeps working on 2 of 3 replicas: a replica is
/// killed with SIGKILL while clients on the other two nodes increment,
/// the increments go on, and the restarted replica decides the same
/// counter (then one more increment through it is exact).
#[test]
fn a_killed_replica_leaves_two_of_three_working() {
    let (mut cluster, addrs) = three();
    let before = incr_storm(&addrs, &[0, 1], "k");
    cluster.kill9(2);
    let during = incr_storm(&addrs, &[0, 1], "k");
    let mut acked = before.0;
    acked.extend(during.0);
    let mut errors = before.1;
    errors.extend(during.1);
    let value = counter(&addrs, 0, "k");
    check_counter(&acked, &errors, value, 0);
    cluster.restart(2);
    // Uncontended now: one client, so no duel.
    let mut con = connect(&addrs[2], false, TIMEOUT);
    let next = int(&ok(&mut con, &["INCR", "k"]));
    assert_eq!(
        next,
        value + 1,
        "the restarted replica continues the counter"
    );
    assert_eq!(counter(&addrs, 1, "k"), value + 1);
    assert_eq!(counter(&addrs, 2, "k"), value + 1);
}

/// The negative control: with the acceptor's promise check planted away
/// (`register-accepts-below-promise`), competing proposers both decide
/// from one value, and the counter's checks see it (a value handed out
/// twice or increments lost) within a few storms.
#[test]
fn planted_acceptor_below_promise_is_caught() {
    let (cluster, addrs) = three_with(&["--debug-planted-bug", "register-accepts-below-promise"]);
    let mut caught = None;
    for round in 0..5 {
        let key = format!("planted-{round}");
        let (acked, errors) = incr_storm(&addrs, &[0, 1, 2], &key);
        let final_value = counter(&addrs, 0, &key);
        if counter_broken(&acked, &errors, final_value, 0) {
            caught = Some(round);
            break;
        }
    }
    println!("planted acceptor caught in storm {caught:?}");
    assert!(caught.is_some(), "the planted acceptor was never caught");
    drop(cluster);
}

/// Rounds of the pipelined write-after-register check.
const PIPELINED_ROUNDS: usize = 20;

/// A plain `SET` pipelined behind a register command on one connection
/// is applied after it: it waits for the register's commit, so every
/// replica ends with the `SET`'s value (black-box attack, 2026-12-07:
/// the `SET` was stamped before the commit and lost to it, every run).
/// And `INCR`, `SET 100`, `INCR` pipelined answer 1, OK, 101 as Redis.
#[test]
fn a_set_pipelined_behind_a_register_command_is_not_lost() {
    use support::raw_resp::{Raw, frame};
    let (_cluster, addrs) = three();
    let mut raw = Raw::connect(&addrs[0]);
    let mut judged = 0;
    for round in 0..PIPELINED_ROUNDS {
        let key = format!("piped:{round}");
        let k = key.as_bytes();
        let mut bytes = frame(&[b"APPEND", k, b"a"]);
        bytes.extend(frame(&[b"SET", k, b"s"]));
        bytes.extend(frame(&[b"GET", k]));
        raw.send(&bytes);
        let replies: Vec<Vec<u8>> = (0..3).map(|_| raw.reply()).collect();
        if replies[0].starts_with(b"-") {
            continue; // an explicit register error: nothing to judge
        }
        judged += 1;
        assert_eq!(replies[0], b":1\r\n", "{key}");
        assert_eq!(replies[1], b"+OK\r\n", "{key}");
        assert_eq!(replies[2], b"$1\r\ns\r\n", "{key}: GET behind the SET");
        for addr in &addrs {
            let mut other = Raw::connect(addr);
            let got = other.call(&[b"GET", k]);
            assert_eq!(got, b"$1\r\ns\r\n", "{key} on {addr}: the SET was lost");
        }
    }
    // One client, no contention: errors here would be a regression.
    assert!(judged * 2 >= PIPELINED_ROUNDS, "{judged} rounds judged");
    let mut bytes = frame(&[b"INCR", b"piped:n"]);
    bytes.extend(frame(&[b"SET", b"piped:n", b"100"]));
    bytes.extend(frame(&[b"INCR", b"piped:n"]));
    raw.send(&bytes);
    let replies: Vec<Vec<u8>> = (0..3).map(|_| raw.reply()).collect();
    if !replies.iter().any(|r| r.starts_with(b"-")) {
        assert_eq!(replies, [&b":1\r\n"[..], b"+OK\r\n", b":101\r\n"]);
    }
}

/// `INCR`-then-`GET` rounds of [`a_get_right_after_an_incr_reads_it`].
const READ_AFTER_ROUNDS: usize = 150;

/// A register write is answered only once a quorum stores its value, so
/// a plain `GET` through another node right after the reply reads it
/// (black-box attack, 2026-12-07: answered at the accept quorum, about 1
/// `GET` in 100 read the value before the `INCR`; the simulation's
/// `planted_replies_before_commit_is_caught` is the deterministic
/// negative control of the same rule).
#[test]
fn a_get_right_after_an_incr_reads_it() {
    let (_cluster, addrs) = three();
    let mut writer = connect(&addrs[0], false, TIMEOUT);
    let mut readers: Vec<_> = addrs[1..]
        .iter()
        .map(|a| connect(a, false, TIMEOUT))
        .collect();
    let mut errors = Vec::new();
    for round in 0..READ_AFTER_ROUNDS {
        let last = match run(&mut writer, &["INCR", "ryw"]) {
            Ok(v) => int(&v),
            Err(e) => {
                // Unknown outcome: re-read the value the register decided.
                errors.push(e.to_string());
                counter(&addrs, 0, "ryw")
            }
        };
        let reader = &mut readers[round % 2];
        let got = ok(reader, &["GET", "ryw"]);
        assert_eq!(
            got,
            Value::BulkString(last.to_string().into_bytes()),
            "round {round}: GET right after INCR answered {last}"
        );
    }
    // One writer, no contention: errors would be a regression.
    assert!(errors.len() * 10 <= READ_AFTER_ROUNDS, "{errors:?}");
}

/// The register's value carries its deadline (Redis's rules): `INCR`
/// keeps the key's TTL, an expired value reads as absent (`INCR` starts
/// from 0, with no TTL), `SET … NX PX` through the register stamps one,
/// `GETSET` drops it; `PTTL` through every node agrees.
#[test]
fn register_writes_keep_and_judge_the_deadline() {
    let (_cluster, addrs) = three();
    let mut c: Vec<_> = addrs.iter().map(|a| connect(a, false, TIMEOUT)).collect();
    let pttl = |con: &mut redis::Connection, key: &str| int(&ok(con, &["PTTL", key]));
    // A plain SET with a TTL, then INCR through another node: kept.
    assert_eq!(
        ok(&mut c[0], &["SET", "t", "5", "PX", "60000"]),
        Value::Okay
    );
    assert_eq!(int(&ok(&mut c[1], &["INCR", "t"])), 6);
    for (i, con) in c.iter_mut().enumerate() {
        let left = pttl(con, "t");
        assert!((1..=60_000).contains(&left), "node {i}: PTTL {left}");
    }
    // An expired value reads as absent.
    assert_eq!(
        ok(&mut c[0], &["SET", "gone", "41", "PX", "200"]),
        Value::Okay
    );
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(int(&ok(&mut c[1], &["INCR", "gone"])), 1);
    assert_eq!(pttl(&mut c[2], "gone"), -1);
    // SET NX PX through the register stamps a deadline; a second NX fails.
    assert_eq!(
        ok(&mut c[2], &["SET", "lock", "me", "NX", "PX", "60000"]),
        Value::Okay
    );
    assert_eq!(ok(&mut c[0], &["SET", "lock", "you", "NX"]), Value::Nil);
    let left = pttl(&mut c[1], "lock");
    assert!((1..=60_000).contains(&left), "PTTL {left}");
    // GETSET replaces the value and drops the deadline.
    assert_eq!(
        ok(&mut c[0], &["GETSET", "lock", "free"]),
        Value::BulkString(b"me".to_vec())
    );
    assert_eq!(pttl(&mut c[2], "lock"), -1);
    // A register value with a deadline expires for plain reads too.
    assert_eq!(
        ok(&mut c[1], &["SET", "brief", "x", "NX", "PX", "300"]),
        Value::Okay
    );
    std::thread::sleep(Duration::from_millis(800));
    for (i, con) in c.iter_mut().enumerate() {
        assert_eq!(ok(con, &["GET", "brief"]), Value::Nil, "node {i}");
    }
}

/// A `MULTI … EXEC` on one key with replicas on other nodes runs through
/// the register as one update: its replies are the steps', and every
/// node reads its end.
#[test]
fn an_unwatched_transaction_on_one_key_runs_through_the_register() {
    let (_cluster, addrs) = three();
    let mut con = connect(&addrs[0], false, TIMEOUT);
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("INCR")
        .arg("tx")
        .cmd("INCRBY")
        .arg("tx")
        .arg(5)
        .cmd("APPEND")
        .arg("tx")
        .arg("0");
    let replies: Vec<Value> = pipe.query(&mut con).expect("EXEC");
    assert_eq!(
        replies,
        vec![Value::Int(1), Value::Int(6), Value::Int(2)],
        "the steps' replies"
    );
    for addr in &addrs {
        let mut other = connect(addr, false, TIMEOUT);
        assert_eq!(
            ok(&mut other, &["GET", "tx"]),
            Value::BulkString(b"60".to_vec()),
            "{addr}"
        );
    }
}

/// Clients of [`a_hundred_clients_incr_one_key_through_one_node`].
const HOT_CLIENTS: usize = 100;
/// `INCR`s each.
const HOT_INCRS: usize = 10;

/// The hot key: 100 clients × 10 `INCR` of one key through one
/// node of three (R = 3) end at exactly 1,000 with every reply distinct:
/// the node's waiting operations of the key ride one round each
/// (`replication::register_ops`), so they neither duel nor queue one
/// round per command. The time is printed (figures: docs/BENCHMARKS.md).
#[test]
fn a_hundred_clients_incr_one_key_through_one_node() {
    let (_cluster, addrs) = three();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let started = std::time::Instant::now();
    let threads: Vec<_> = (0..HOT_CLIENTS)
        .map(|_| {
            let addr = addrs[0].clone();
            let (acked, errors) = (Arc::clone(&acked), Arc::clone(&errors));
            std::thread::spawn(move || {
                let mut con = connect(&addr, false, TIMEOUT);
                for _ in 0..HOT_INCRS {
                    match run(&mut con, &["INCR", "hot1000"]) {
                        Ok(v) => acked.lock().unwrap().push(int(&v)),
                        Err(e) => errors.lock().unwrap().push(e.to_string()),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let took = started.elapsed();
    let acked = acked.lock().unwrap().clone();
    let errors = errors.lock().unwrap().clone();
    let final_value = counter(&addrs, 2, "hot1000");
    println!(
        "{HOT_CLIENTS} clients x {HOT_INCRS} INCR through one node: {} acknowledged, {} errors, final {final_value}, {took:?}",
        acked.len(),
        errors.len()
    );
    check_counter(&acked, &errors, final_value, 0);
    assert!(
        errors.is_empty(),
        "one node's clients do not duel: {errors:?}"
    );
    assert_eq!(final_value, (HOT_CLIENTS * HOT_INCRS) as i64);
}

/// Register operations node `i` counted as decided (`/metrics`).
fn decided(cluster: &TestCluster, i: usize) -> u64 {
    let text = support::cluster::body(&cluster.node(i).get_target("/metrics"));
    text.lines()
        .find_map(|l| l.strip_prefix("ataman_register_operations_total{outcome=\"decided\"} "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no decided register operations in /metrics:\n{text}"))
}

/// `GETRANGE` of a key with replicas on other nodes is a register read
/// (linearizable with the register's writes; a plain quorum read may miss
/// a commit that reached one replica only): each one through node 1 or 2
/// counts as a decided register operation there and reads the `INCR`
/// answered just before through node 0. With `--consensus-register=false`
/// it is a plain read again and counts none.
#[test]
fn getrange_of_a_replicated_key_is_a_register_read() {
    const ROUNDS: usize = 20;
    let (cluster, addrs) = three();
    let mut writer = connect(&addrs[0], false, TIMEOUT);
    let mut readers: Vec<_> = addrs[1..]
        .iter()
        .map(|a| connect(a, false, TIMEOUT))
        .collect();
    let before = [decided(&cluster, 1), decided(&cluster, 2)];
    for round in 0..ROUNDS {
        let last = int(&ok(&mut writer, &["INCR", "gr"]));
        let got = ok(&mut readers[round % 2], &["GETRANGE", "gr", "0", "-1"]);
        assert_eq!(
            got,
            Value::BulkString(last.to_string().into_bytes()),
            "round {round}"
        );
    }
    let counted = decided(&cluster, 1) - before[0] + decided(&cluster, 2) - before[1];
    assert!(
        counted >= ROUNDS as u64,
        "{counted} register operations for {ROUNDS} GETRANGEs"
    );
    drop(cluster);
    let addrs: Vec<String> = (0..3).map(|_| support::fixed_resp_addr()).collect();
    let own = addrs.clone();
    let args = ["--replication-factor", "3", "--consensus-register=false"];
    let off = TestCluster::start_each(3, &args, move |i| {
        vec!["--resp-listen".to_owned(), own[i].clone()]
    });
    let mut c = connect(&addrs[1], false, TIMEOUT);
    assert_eq!(ok(&mut c, &["SET", "p", "abc"]), Value::Okay);
    let got = ok(&mut c, &["GETRANGE", "p", "0", "-1"]);
    assert_eq!(got, Value::BulkString(b"abc".to_vec()));
    assert_eq!(
        decided(&off, 1),
        0,
        "a plain read counted as a register operation"
    );
}
