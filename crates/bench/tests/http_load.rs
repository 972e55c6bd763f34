#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `ataman bench http` against tiny servers started by the tests: a fast
//! one, one that stalls once for a second, one that answers 500, one that
//! never answers, one that counts what it is sent, and a port with nothing
//! listening.
//!
//! No assertion bounds how fast anything was (the machine is shared): the
//! tests check counts, the report's shape and relations that hold on any
//! machine. The only lower bounds on latencies are those the test server's
//! own one-second stall forces; every timeout only bounds a wait.

use ataman_bench::http::args::{HttpArgs, parse_workload};
use ataman_bench::http::{self, HttpReport};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the test server answers.
#[derive(Clone)]
enum Behaviour {
    /// 200 at once.
    Fast,
    /// 200, but once, from the `after_requests`-th request on (counted
    /// over all connections), every request waits until `length` has passed
    /// since that request came (a pause of the whole server, like a GC or
    /// a stuck disk). Counted, not timed, so the stall falls inside the run
    /// however slowly the machine goes.
    StallOnce {
        after_requests: u64,
        length: Duration,
        served: Arc<AtomicU64>,
        until: Arc<Mutex<Option<Instant>>>,
    },
    /// 500 at once.
    Error500,
    /// Reads requests, never answers.
    Silent,
    /// 200 for requests whose Host header names this server (400 for
    /// others), each counted.
    Counted(Arc<AtomicU64>),
}

/// Starts a thread-per-connection HTTP/1.1 server on a free port.
fn server(behaviour: Behaviour) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let behaviour = behaviour.clone();
            std::thread::spawn(move || serve(stream, &behaviour));
        }
    });
    addr
}

fn serve(stream: TcpStream, behaviour: &Behaviour) {
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let own_host = format!("host: {}\r\n", writer.local_addr().unwrap());
    loop {
        let mut content_length = 0usize;
        let mut host_is_own = false;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                content_length = v.trim().parse().unwrap();
            }
            host_is_own |= lower == own_host;
        }
        let mut body = vec![0u8; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer: &[u8] = match behaviour {
            Behaviour::Fast => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            Behaviour::StallOnce {
                after_requests,
                length,
                served,
                until,
            } => {
                let number = served.fetch_add(1, Ordering::Relaxed) + 1;
                let wait_until = {
                    let mut until = until.lock().unwrap();
                    if until.is_none() && number >= *after_requests {
                        *until = Some(Instant::now() + *length);
                    }
                    *until
                };
                if let Some(t) = wait_until {
                    let now = Instant::now();
                    if t > now {
                        std::thread::sleep(t - now);
                    }
                }
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            }
            Behaviour::Error500 => {
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops"
            }
            Behaviour::Silent => continue,
            Behaviour::Counted(requests) => {
                requests.fetch_add(1, Ordering::Relaxed);
                if host_is_own {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                } else {
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 8\r\n\r\nbad host"
                }
            }
        };
        if writer.write_all(answer).is_err() {
            return;
        }
    }
}

/// Bound on one request's wait for its answer in these runs: far past any
/// scheduling delay of a loaded machine, so a run against a server that
/// answers counts no timeout (a bound on a wait, not a speed target).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

fn args(addr: SocketAddr, rate: u64, seconds: f64, connections: usize) -> HttpArgs {
    let mut a = HttpArgs::new(&format!("http://{addr}"));
    a.timeout = REQUEST_TIMEOUT;
    a.rate = rate;
    a.duration = Duration::from_secs_f64(seconds);
    a.connections = connections;
    a.threads = 2;
    a.keys = 1000;
    a
}

fn run(a: &HttpArgs) -> HttpReport {
    http::run(a).unwrap().0
}

/// Every requests a run plans, answered or not, is in the report: what an
/// open loop plans is exactly rate x duration.
fn assert_all_planned_accounted(report: &HttpReport, planned: u64) {
    assert_eq!(
        report.requests + report.errors + report.unsent,
        planned,
        "{report:?}"
    );
}

/// A one-second stall of the whole server shows in the corrected
/// percentiles (coordinated omission, as wrk2 corrects it): the requests
/// the schedule planned during the stall are charged from their planned
/// time. Only what the stall forces on any machine is asserted; how small
/// the uncorrected percentiles stay depends on the machine, so it is not.
#[test]
fn stall_shows_in_corrected_percentiles() {
    let addr = server(Behaviour::StallOnce {
        after_requests: 3000,
        length: Duration::from_secs(1),
        served: Arc::new(AtomicU64::new(0)),
        until: Arc::new(Mutex::new(None)),
    });
    // 2000/s for 5 s = 10,000 requests; the stall starts at the 3,000th
    // (planned at 1.5 s, or later on a slow machine). The requests planned
    // in its first half (at least 1,000: 10% of the run) wait at least
    // 500 ms from their planned time, so the corrected p99 is at least
    // 500 ms; uncorrected, only the 4 requests in flight when it began
    // waited, and the one that began it waited the whole second.
    let report = run(&args(addr, 2000, 5.0, 4));
    eprintln!(
        "corrected {:?}\nuncorrected {:?}",
        report.latency_ms, report.uncorrected_latency_ms
    );
    assert_eq!(report.errors, 0, "{report:?}");
    assert_all_planned_accounted(&report, 10_000);
    assert!(
        report.latency_ms.p99 >= 500.0,
        "corrected p99 {} ms hides the 1 s stall",
        report.latency_ms.p99
    );
    assert!(
        report.uncorrected_latency_ms.max >= 999.0,
        "the request that met the stall waited it whole: uncorrected max {}",
        report.uncorrected_latency_ms.max
    );
    // Each request's corrected latency includes its uncorrected one.
    let (c, u) = (&report.latency_ms, &report.uncorrected_latency_ms);
    for (corrected, uncorrected) in [
        (c.p50, u.p50),
        (c.p90, u.p90),
        (c.p99, u.p99),
        (c.p99_9, u.p99_9),
        (c.max, u.max),
    ] {
        assert!(corrected >= uncorrected, "{c:?} vs {u:?}");
    }
}

/// At a fixed offered rate the run sends exactly the planned requests, all
/// answered, and reports the rate it achieved as requests over elapsed
/// time (how close that is to the offered rate depends on the machine and
/// is not asserted).
#[test]
fn open_loop_sends_exactly_the_planned_requests() {
    let addr = server(Behaviour::Fast);
    let report = run(&args(addr, 1000, 3.0, 8));
    assert_eq!(report.errors, 0, "{report:?}");
    assert_eq!(report.non_2xx, 0);
    assert_eq!(report.unsent, 0);
    assert_eq!(report.offered_rps, 1000.0);
    assert_eq!(report.requests, 3000, "{report:?}");
    assert!(report.elapsed_sec >= 3.0, "{report:?}");
    let implied = report.achieved_rps * report.elapsed_sec;
    assert!(
        (implied - report.requests as f64).abs() < 1.0,
        "achieved {} /s over {} s is not {} requests",
        report.achieved_rps,
        report.elapsed_sec,
        report.requests
    );
    assert!(report.series.len() >= 3, "{:?}", report.series);
    assert!(report.generator.cpu_us_per_request > 0.0);
}

/// Answers outside 2xx are counted as non-2xx, not as errors.
#[test]
fn non_2xx_counted() {
    let addr = server(Behaviour::Error500);
    let report = run(&args(addr, 500, 1.0, 4));
    assert!(report.requests > 0);
    assert_eq!(report.non_2xx, report.requests);
    assert_eq!(report.errors, 0);
}

/// A port with nothing listening gives connect errors and no responses.
#[test]
fn connection_errors_counted() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let report = run(&args(addr, 200, 1.0, 4));
    assert_eq!(report.requests, 0);
    assert!(report.errors_connect > 0, "{report:?}");
    assert_eq!(report.errors, report.errors_connect);
    // Closed loop too: the reconnect backoff keeps it from spinning.
    let report = run(&args(addr, 0, 0.5, 2));
    assert_eq!(report.requests, 0);
    assert!(report.errors_connect > 0);
}

/// A server that never answers produces timeouts, and the run still ends.
#[test]
fn timeouts_counted() {
    let addr = server(Behaviour::Silent);
    let mut a = args(addr, 50, 1.0, 2);
    a.timeout = Duration::from_millis(200);
    let report = run(&a);
    assert_eq!(report.requests, 0);
    assert!(report.timeouts > 0, "{report:?}");
}

/// --fill, a closed loop, the JSON contract's keys, and an overlay plot.
#[test]
fn fill_closed_loop_json_and_plot() {
    let addr = server(Behaviour::Fast);
    let mut a = args(addr, 0, 1.0, 4);
    a.fill = 200;
    a.workload = parse_workload("mixed:50").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("run.json");
    a.json = Some(json_path.clone());
    a.plot = Some(dir.path().join("run.svg"));
    http::main(&a).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    for key in [
        "offered_rps",
        "achieved_rps",
        "requests",
        "errors",
        "non_2xx",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for hist in ["latency_ms", "uncorrected_latency_ms"] {
        for key in ["mean", "max", "p50", "p90", "p99", "p99.9", "p99.99"] {
            assert!(json[hist].get(key).is_some(), "missing {hist}.{key}");
        }
    }
    assert_eq!(json["fill"]["keys"], 200);
    assert!(json["requests"].as_u64().unwrap() > 0);
    let svg = std::fs::read_to_string(dir.path().join("run.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline"));

    let other = dir.path().join("other.json");
    std::fs::copy(&json_path, &other).unwrap();
    let out = dir.path().join("both.svg");
    ataman_bench::http::plot::main(&ataman_bench::http::plot::PlotArgs {
        files: vec![json_path, other],
        out: out.clone(),
    })
    .unwrap();
    let svg = std::fs::read_to_string(out).unwrap();
    assert!(svg.contains("(other)"), "duplicate labels are told apart");
}

/// With two targets in --url, connections are spread over both, each
/// request carries its own target's Host, and the report lists each
/// target's share. The fill's connections take ids from one shared
/// counter, so how the 100 filled keys split between the targets depends
/// on timing: only their total is checked.
#[test]
fn several_targets_share_the_connections() {
    let counters = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let addrs = counters.clone().map(|c| server(Behaviour::Counted(c)));
    let mut a = args(addrs[0], 400, 1.0, 5);
    a.url = format!("http://{},http://{}", addrs[0], addrs[1]);
    a.fill = 100;
    a.workload = parse_workload("mixed:50").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("run.json");
    a.json = Some(json_path.clone());
    http::main(&a).unwrap();
    let report: HttpReport =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report.errors, 0, "{report:?}");
    assert_eq!(
        report.non_2xx, 0,
        "every request named its own target's host"
    );
    assert_eq!(report.targets.len(), 2);
    for (i, t) in report.targets.iter().enumerate() {
        assert_eq!(t.url, format!("http://{}", addrs[i]));
        assert!(
            t.requests > 0,
            "target {i} got nothing: {:?}",
            report.targets
        );
        assert!(
            counters[i].load(Ordering::Relaxed) >= t.requests,
            "target {i} served fewer requests than the report gives it"
        );
    }
    // Connections 0, 2, 4 to the first target; 1, 3 to the second.
    assert_eq!(
        (report.targets[0].connections, report.targets[1].connections),
        (3, 2)
    );
    assert_eq!(
        report.targets.iter().map(|t| t.requests).sum::<u64>(),
        report.requests
    );
    let served: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(served, 100 + report.requests, "fill plus the measured run");

    // Fewer connections than targets is refused.
    a.connections = 1;
    assert!(http::run(&a).is_err());
}

/// The send slack never sends a request before its planned time (counted
/// per request, must be 0), sends every planned request, and is reported with
/// the lag it added and whether it was in use (from one planned send per
/// slack per thread: 2000/s over 2 threads is 1 ms apart); a slack past
/// the bound is refused.
#[test]
fn send_slack_never_early_and_keeps_the_rate() {
    let addr = server(Behaviour::Fast);
    for (slack_us, in_use) in [
        (0u64, false),
        (100, false),
        (ataman_bench::http::wake::SEND_SLACK_US_MAX, true),
    ] {
        let mut a = args(addr, 2000, 2.0, 8);
        a.send_slack = Duration::from_micros(slack_us);
        let report = run(&a);
        assert_eq!(report.errors, 0, "{report:?}");
        assert_eq!(report.sent_early, 0, "slack {slack_us} us");
        assert_eq!(report.send_slack_us, slack_us);
        assert_eq!(report.send_slack_in_use, in_use, "slack {slack_us} us");
        // The schedule plans exactly rate x duration requests; all are answered.
        assert_eq!(report.requests, 4000, "slack {slack_us} us: {report:?}");
        // The lag is part of the corrected latency, never more than it.
        assert!(report.send_lag_ms.p50 <= report.latency_ms.p50);
        assert!(report.send_lag_ms.max <= report.latency_ms.max);
    }
    let mut a = args(addr, 2000, 1.0, 8);
    a.send_slack = Duration::from_micros(ataman_bench::http::wake::SEND_SLACK_US_MAX + 1);
    assert!(http::run(&a).is_err());
}
