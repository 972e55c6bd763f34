//! Black-box durability tests: what a node serves after SIGTERM, after a
//! wiped data directory, and after kill -9 in the middle of a write load.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::http_client::url::target;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::{Conn, Node, Rng, entity, request};

/// Kill cycles of the kill -9 test.
const KILL_CYCLES: u64 = 3;
/// Writer connections during a kill cycle.
const WRITERS: usize = 4;
/// Keys per writer (overwrites are part of the test).
const KEYS_PER_WRITER: usize = 32;
/// PUTs per writer per cycle, at most.
const PUTS_PER_CYCLE_MAX: usize = 20_000;
/// Bound on one cycle's load, should the kill not stop it.
const LOAD_DURATION_MAX: Duration = Duration::from_secs(5);

/// Every live entry from the smallest non-empty key on, as (key, value).
fn all_entries(node: &Node) -> Vec<(Vec<u8>, Vec<u8>)> {
    let response = node.get_target(&target("/v0/entities", &[("start", b"\x00")]));
    assert_eq!(response.status, 200, "range: {response:?}");
    response
        .chunks
        .expect("chunked range")
        .into_iter()
        .map(|chunk| {
            let newline = chunk.iter().position(|&b| b == b'\n').expect("key\\nvalue");
            (chunk[..newline].to_vec(), chunk[newline + 1..].to_vec())
        })
        .collect()
}

/// After SIGTERM the node exits 0 within the bound, and a restart on the
/// same directory serves the same data (values, deletions, range).
#[test]
fn sigterm_then_restart_serves_same_data() {
    let mut node = Node::start(&[]);
    let mut conn = node.conn();
    let mut model = BTreeMap::new();
    for i in 0..50u32 {
        let key = format!("k{i:02}").into_bytes();
        let value = format!("value {i}").repeat(i as usize % 7 + 1).into_bytes();
        assert_eq!(conn.put(&key, &value).status, 201);
        model.insert(key, value);
    }
    for i in (0..50u32).step_by(5) {
        let key = format!("k{i:02}").into_bytes();
        assert_eq!(conn.delete(&key).status, 202);
        model.remove(&key);
    }
    drop(conn);
    let status = node.terminate();
    assert!(status.success(), "SIGTERM exit status {status}");
    node.restart();
    for i in 0..50u32 {
        let key = format!("k{i:02}").into_bytes();
        let got = node.get(&key);
        match model.get(&key) {
            Some(value) => assert_eq!((got.status, &got.body), (200, value), "k{i:02}"),
            None => assert_eq!(got.status, 404, "deleted k{i:02} came back"),
        }
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(all_entries(&node), expected);
}

/// A node restarted on a wiped data directory serves an empty database.
#[test]
fn wiped_data_dir_serves_empty_database() {
    let mut node = Node::start(&[]);
    assert_eq!(node.put(b"gone", b"soon").status, 201);
    assert!(node.terminate().success());
    node.wipe_data();
    node.restart();
    assert_eq!(node.get(b"gone").status, 404);
    assert!(all_entries(&node).is_empty(), "a wiped node still has data");
}

/// What one writer connection saw: its acknowledged values and the PUT
/// that was in flight when the connection broke, if any.
struct WriterLog {
    acked: BTreeMap<Vec<u8>, Vec<u8>>,
    acked_puts: usize,
    in_flight: Option<(Vec<u8>, Vec<u8>)>,
}

/// PUTs on its own keys until the connection fails, `stop` is set, or a bound.
fn writer(addr: SocketAddr, cycle: u64, id: usize, stop: Arc<AtomicBool>) -> WriterLog {
    let mut log = WriterLog {
        acked: BTreeMap::new(),
        acked_puts: 0,
        in_flight: None,
    };
    let mut conn = Conn::open(addr);
    let started = Instant::now();
    for i in 0..PUTS_PER_CYCLE_MAX {
        if stop.load(Ordering::SeqCst) || started.elapsed() > LOAD_DURATION_MAX {
            break;
        }
        let key = format!("w{id}/{}", (i * 7) % KEYS_PER_WRITER).into_bytes();
        let mut value = format!("c{cycle}-w{id}-i{i}-").into_bytes();
        value.resize(value.len() + i % 300, b'v');
        log.in_flight = Some((key.clone(), value.clone()));
        if conn
            .send(&request("PUT", &entity(&key), &[], Some(&value)))
            .is_err()
        {
            break;
        }
        match conn.read() {
            Ok(response) if response.status == 201 => {
                log.acked.insert(key, value);
                log.acked_puts += 1;
                log.in_flight = None;
            }
            Ok(response) => panic!("writer {id}: PUT answered {response:?}"),
            Err(_) => break, // the node died under us
        }
    }
    log
}

/// Runs one load cycle, stops the node with `stop_node` after `delay`, and
/// returns the writers' logs.
fn load_cycle(
    node: &mut Node,
    cycle: u64,
    delay: Duration,
    stop_node: impl FnOnce(&mut Node),
) -> Vec<WriterLog> {
    let stop = Arc::new(AtomicBool::new(false));
    let addr = node.addr();
    let handles: Vec<_> = (0..WRITERS)
        .map(|id| {
            let stop = stop.clone();
            std::thread::spawn(move || writer(addr, cycle, id, stop))
        })
        .collect();
    std::thread::sleep(delay);
    stop_node(node);
    stop.store(true, Ordering::SeqCst);
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Checks the restarted node against `model` and this cycle's logs, then
/// folds what it found into `model`. A key's value must be its last
/// acknowledged one, or the value of the PUT in flight on that key at the
/// kill (which may or may not have become durable); keys not written this
/// cycle keep the model's value.
fn check_and_update(
    node: &Node,
    cycle: u64,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    logs: &[WriterLog],
) {
    let mut conn = node.conn();
    assert_eq!(logs.len(), WRITERS);
    for (id, log) in logs.iter().enumerate() {
        for k in 0..KEYS_PER_WRITER {
            let key = format!("w{id}/{k}").into_bytes();
            let mut allowed: Vec<Option<&Vec<u8>>> =
                vec![log.acked.get(&key).or_else(|| model.get(&key))];
            if let Some((flight_key, flight_value)) = &log.in_flight
                && *flight_key == key
            {
                allowed.push(Some(flight_value));
            }
            let response = conn.get(&key);
            let got = match response.status {
                200 => Some(response.body),
                404 => None,
                other => panic!(
                    "cycle {cycle}: GET {} answered {other}",
                    String::from_utf8_lossy(&key)
                ),
            };
            assert!(
                allowed.contains(&got.as_ref()),
                "cycle {cycle}: {} holds {:?}, expected one of {:?} (an acknowledged PUT was lost)",
                String::from_utf8_lossy(&key),
                got.as_ref()
                    .map(|v| String::from_utf8_lossy(v).into_owned()),
                allowed
                    .iter()
                    .map(|v| v.map(|v| String::from_utf8_lossy(v).into_owned()))
                    .collect::<Vec<_>>()
            );
            match got {
                Some(value) => {
                    model.insert(key, value);
                }
                None => {
                    model.remove(&key);
                }
            }
        }
    }
}

/// Every PUT acknowledged before a kill -9 (several connections, a few
/// cycles of a few hundred milliseconds of load) is readable after a
/// restart, and no value appears that was never written; a last cycle
/// stops with SIGTERM under load, which must exit 0 and lose nothing.
#[test]
fn acknowledged_puts_survive_kill_9() {
    let mut node = Node::start(&[]);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng::new(0x5eed ^ u64::from(std::process::id()));
    let mut acked_total = 0usize;
    for cycle in 1..=KILL_CYCLES + 1 {
        let delay = Duration::from_millis(300 + rng.below(700));
        let sigterm = cycle > KILL_CYCLES;
        let logs = load_cycle(&mut node, cycle, delay, |node| {
            if sigterm {
                let status = node.terminate();
                assert!(status.success(), "SIGTERM under load: exit status {status}");
            } else {
                node.kill9();
            }
        });
        acked_total += logs.iter().map(|l| l.acked_puts).sum::<usize>();
        node.restart();
        check_and_update(&node, cycle, &mut model, &logs);
        // Nothing else is in the database.
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = all_entries(&node).into_iter().collect();
        assert_eq!(
            entries, model,
            "cycle {cycle}: the range differs from the model"
        );
    }
    assert!(acked_total > 0, "no PUT was ever acknowledged");
    eprintln!(
        "kill -9: {KILL_CYCLES} kill cycles + 1 SIGTERM cycle, {acked_total} PUTs acknowledged"
    );
}
