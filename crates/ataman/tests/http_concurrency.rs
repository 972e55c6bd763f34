//! Black-box concurrency test: many clients racing on one node, checked
//! against a model.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{Conn, Node, Rng};

/// Client threads.
const THREADS: usize = 16;
/// Operations per thread, at most.
const OPS_PER_THREAD: usize = 300;
/// Wall-clock bound on the load phase; threads stop early past it.
const LOAD_DURATION_MAX: Duration = Duration::from_secs(20);
/// Keys private to each thread.
const PRIVATE_KEYS: usize = 8;
/// Keys all threads race on.
const SHARED_KEYS: usize = 8;

/// A write (PUT, or DELETE as `None`) to a shared key, with the instants
/// just before sending it and just after its answer.
#[derive(Clone)]
struct Write {
    value: Option<Vec<u8>>,
    start: Instant,
    end: Instant,
}

/// A GET of a shared key and what it returned.
struct Read {
    key: usize,
    got: Option<Vec<u8>>,
    start: Instant,
    end: Instant,
    thread: usize,
}

fn private_key(thread: usize, k: usize) -> Vec<u8> {
    format!("private/{thread:02}/{k}").into_bytes()
}

fn shared_key(k: usize) -> Vec<u8> {
    format!("shared/{k}").into_bytes()
}

/// A value no other write uses: thread, operation number, variable padding.
fn unique_value(thread: usize, op: usize) -> Vec<u8> {
    let mut value = format!("t{thread}-op{op}-").into_bytes();
    value.resize(
        value.len() + (thread * 31 + op) % 64,
        b'a' + (op % 26) as u8,
    );
    value
}

/// The value of a GET answer: `Some` for 200, `None` for 404, panic otherwise.
fn observed(response: &support::Response, what: &str) -> Option<Vec<u8>> {
    match response.status {
        200 => Some(response.body.clone()),
        404 => None,
        other => panic!("{what}: unexpected status {other}: {response:?}"),
    }
}

/// Whether a read of a register returning `read.got` is allowed by
/// linearizability, given every write to it (`writes`, with `initial` the
/// state before the test). A value is allowed iff some write `w` produced
/// it, `w` was sent before the read was answered, and no other write
/// `w2` both began after `w` was answered and was answered before the read
/// was sent (which would have overwritten `w` for certain).
fn read_allowed(read: &Read, writes: &[Write], initial: &Write) -> bool {
    std::iter::once(initial)
        .chain(writes.iter())
        .filter(|w| w.value == read.got && w.start < read.end)
        .any(|w| {
            !writes
                .iter()
                .any(|w2| w.end < w2.start && w2.end < read.start)
        })
}

/// What one client thread did.
struct ThreadLog {
    private_model: BTreeMap<Vec<u8>, Vec<u8>>,
    shared_writes: Vec<(usize, Write)>,
    shared_reads: Vec<Read>,
    ops: usize,
}

fn client(node_addr: std::net::SocketAddr, thread: usize, deadline: Instant) -> ThreadLog {
    let mut conn = Conn::open(node_addr);
    let mut rng = Rng::new(0xc0ff_ee00 + thread as u64);
    let mut log = ThreadLog {
        private_model: BTreeMap::new(),
        shared_writes: Vec::new(),
        shared_reads: Vec::new(),
        ops: 0,
    };
    for op in 0..OPS_PER_THREAD {
        if Instant::now() >= deadline {
            break;
        }
        log.ops += 1;
        let kind = rng.below(100);
        if rng.below(2) == 0 {
            // A private key: only this thread touches it, so every read
            // must equal the model exactly.
            let key = private_key(thread, rng.below(PRIVATE_KEYS as u64) as usize);
            if kind < 45 {
                let value = unique_value(thread, op);
                assert_eq!(conn.put(&key, &value).status, 201);
                log.private_model.insert(key, value);
            } else if kind < 60 {
                assert_eq!(conn.delete(&key).status, 202);
                log.private_model.remove(&key);
            } else {
                let got = observed(&conn.get(&key), "private GET");
                assert_eq!(
                    got.as_ref(),
                    log.private_model.get(&key),
                    "thread {thread} op {op}: private key {} read a stale or foreign value",
                    String::from_utf8_lossy(&key)
                );
            }
        } else {
            let k = rng.below(SHARED_KEYS as u64) as usize;
            let key = shared_key(k);
            let start = Instant::now();
            if kind < 45 {
                let value = unique_value(thread, op);
                assert_eq!(conn.put(&key, &value).status, 201);
                let end = Instant::now();
                log.shared_writes.push((
                    k,
                    Write {
                        value: Some(value),
                        start,
                        end,
                    },
                ));
            } else if kind < 60 {
                assert_eq!(conn.delete(&key).status, 202);
                let end = Instant::now();
                log.shared_writes.push((
                    k,
                    Write {
                        value: None,
                        start,
                        end,
                    },
                ));
            } else {
                let got = observed(&conn.get(&key), "shared GET");
                let end = Instant::now();
                log.shared_reads.push(Read {
                    key: k,
                    got,
                    start,
                    end,
                    thread,
                });
            }
        }
    }
    log
}

/// 16 clients race PUT/DELETE/GET on private and shared keys; the node
/// must behave as one linearizable register per key.
///
/// Design: each thread owns 8 private keys that no other thread touches, so
/// its GETs must return exactly its own last acknowledged write (a
/// sequential model per thread). On 8 shared keys every write carries a
/// unique value and is timed (sent, answered); each shared GET, and the
/// final GET of every key after all threads joined, must return a value
/// some write produced that was sent before the GET was answered and was
/// not certainly overwritten before the GET was sent ([`read_allowed`]).
/// Bounded: 300 operations per thread and 20 s of load.
#[test]
fn concurrent_clients_match_the_model() {
    let node = Node::start(&["--net-threads", "2"]);
    let addr = node.addr();
    let test_start = Instant::now();
    let deadline = test_start + LOAD_DURATION_MAX;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| std::thread::spawn(move || client(addr, t, deadline)))
        .collect();
    let logs: Vec<ThreadLog> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    let initial = Write {
        value: None,
        start: test_start,
        end: test_start,
    };
    let mut writes: Vec<Vec<Write>> = vec![Vec::new(); SHARED_KEYS];
    for log in &logs {
        for (k, w) in &log.shared_writes {
            writes[*k].push(w.clone());
        }
    }
    let writes = Arc::new(writes);
    let mut reads_checked = 0usize;
    for log in &logs {
        for read in &log.shared_reads {
            assert!(
                read_allowed(read, &writes[read.key], &initial),
                "thread {}: GET shared/{} returned {:?}, which no write could have left there",
                read.thread,
                read.key,
                read.got
                    .as_ref()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            );
            reads_checked += 1;
        }
    }

    // The final state, read after every thread finished.
    let mut conn = node.conn();
    for log in &logs {
        for (key, value) in &log.private_model {
            let got = observed(&conn.get(key), "final private GET");
            assert_eq!(
                got.as_ref(),
                Some(value),
                "final value of {}",
                String::from_utf8_lossy(key)
            );
        }
    }
    for (thread, log) in logs.iter().enumerate() {
        for k in 0..PRIVATE_KEYS {
            let key = private_key(thread, k);
            if !log.private_model.contains_key(&key) {
                assert_eq!(
                    conn.get(&key).status,
                    404,
                    "deleted or unwritten key is back"
                );
            }
        }
    }
    for k in 0..SHARED_KEYS {
        let start = Instant::now();
        let got = observed(&conn.get(&shared_key(k)), "final shared GET");
        let read = Read {
            key: k,
            got,
            start,
            end: Instant::now(),
            thread: usize::MAX,
        };
        assert!(
            read_allowed(&read, &writes[k], &initial),
            "final value of shared/{k} is {:?}, not the last write of any client",
            read.got
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
        );
    }
    let ops: usize = logs.iter().map(|l| l.ops).sum();
    assert!(ops > THREADS, "almost no operation ran ({ops})");
    eprintln!(
        "concurrency: {ops} operations in {:.1}s, {reads_checked} shared reads checked",
        test_start.elapsed().as_secs_f64()
    );
}

/// The checker itself: it rejects a value overwritten before the read
/// began, and accepts values of writes concurrent with the read.
#[test]
fn read_allowed_rejects_stale_values() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let initial = Write {
        value: None,
        start: t0,
        end: t0,
    };
    let write = |v: &str, start: u64, end: u64| Write {
        value: Some(v.as_bytes().to_vec()),
        start: at(start),
        end: at(end),
    };
    let writes = vec![write("a", 10, 20), write("b", 30, 40), write("c", 35, 60)];
    let read = |got: Option<&str>, start: u64, end: u64| Read {
        key: 0,
        got: got.map(|v| v.as_bytes().to_vec()),
        start: at(start),
        end: at(end),
        thread: 0,
    };
    // Before any write completed: absent or a write in progress.
    assert!(read_allowed(&read(None, 1, 15), &writes, &initial));
    assert!(read_allowed(&read(Some("a"), 1, 15), &writes, &initial));
    // "a" was overwritten by "b" (30..40) before a read starting at 50.
    assert!(!read_allowed(&read(Some("a"), 50, 55), &writes, &initial));
    assert!(!read_allowed(&read(None, 50, 55), &writes, &initial));
    // "b" and "c" overlap: either may be last.
    assert!(read_allowed(&read(Some("b"), 70, 75), &writes, &initial));
    assert!(read_allowed(&read(Some("c"), 70, 75), &writes, &initial));
    // A value from a write sent after the read was answered is impossible.
    assert!(!read_allowed(&read(Some("c"), 21, 25), &writes, &initial));
    // A value nobody wrote is impossible.
    assert!(!read_allowed(&read(Some("z"), 70, 75), &writes, &initial));
}
