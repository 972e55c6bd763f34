//! The dashboard over TLS (docs/DASHBOARD.md), in its own test binary:
//! the process-wide CA it trusts makes the node launcher probe every node
//! over HTTPS, which the plain nodes of `tests/dashboard/` cannot answer.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

#[path = "../dashboard/browser.rs"]
mod browser;
#[path = "../dashboard/page.rs"]
mod page;
#[path = "../support/mod.rs"]
mod support;

use browser::Browser;
use page::*;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::Node;

/// The `ataman cert` files of a node of 127.0.0.1 in `dir`, signed by a CA
/// made there; the serve arguments that use them.
fn tls_args(dir: &Path) -> Vec<String> {
    let d = dir.to_str().unwrap();
    let cert = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ataman"))
            .arg("cert")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ataman cert {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    cert(&["create-ca", "--certs-dir", d]);
    let ca_key = dir.join("ca.key");
    cert(&[
        "create-node",
        "--certs-dir",
        d,
        "--ca-key",
        ca_key.to_str().unwrap(),
    ]);
    [
        "--tls-cert",
        "node.crt",
        "--tls-key",
        "node.key",
        "--tls-ca",
        "ca.crt",
    ]
    .chunks(2)
    .flat_map(|kv| {
        [
            kv[0].to_owned(),
            dir.join(kv[1]).to_string_lossy().into_owned(),
        ]
    })
    .collect()
}

/// `--ignore-certificate-errors-spki-list`'s pin of the key in `key_pem`
/// (PEM): the base64 of the SHA-256 of its SubjectPublicKeyInfo, as the
/// node's certificate carries it (`ataman cert create-node` signs the
/// certificate over this key).
fn spki_pin(key_pem: &str) -> String {
    use sha2::Digest;
    let key = rcgen::KeyPair::from_pem(key_pem).unwrap();
    browser::base64_encode(&sha2::Sha256::digest(key.public_key_der()))
}

/// Over TLS (peers verified by the CA), the page served by each of the 3
/// nodes shows every member and every member's rates (asked by the
/// serving node over TLS), the hot key and the slow log's entry of the
/// node it was made on. The browser trusts the nodes' certificate by its
/// key's pin alone (no certificate error is ignored otherwise); a browser
/// pinned to another key refuses the page (the negative control).
#[test]
fn every_node_serves_it_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    let args = tls_args(certs.path());
    // The test's own requests (and the start-up probe) trust the CA.
    ataman::http_client::tls::set_ca(&certs.path().join("ca.crt")).unwrap();
    let proxies: Vec<ataman::faultproxy::FaultProxy> = (0..3)
        .map(|_| ataman::faultproxy::FaultProxy::start_without_target().unwrap())
        .collect();
    let urls: Vec<String> = proxies
        .iter()
        .map(|p| p.url().replacen("http://", "https://", 1))
        .collect();
    let cluster = urls.join(",");
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            let mut a = vec!["--cluster", cluster.as_str(), "--self", urls[i].as_str()];
            a.extend(args.iter().map(String::as_str));
            let node = Node::start(&a);
            proxies[i].set_target(node.addr());
            node
        })
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::addr).collect();
    // Recording off everywhere, as the plain dashboard test does: on a
    // busy machine the load's own writes over the default 10 ms pushed a
    // node's one deliberate entry out of the page's newest 20 (seen in a
    // full run, 2026-12-07).
    for addr in &addrs {
        recording_off(*addr);
    }
    let _load = tls_load(&addrs);
    // The browser does not know the test's CA: it trusts the nodes' key.
    let key = std::fs::read_to_string(certs.path().join("node.key")).unwrap();
    let other = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let page = format!("https://{}/ui", addrs[0]);
    let pin = |key: &str| format!("--ignore-certificate-errors-spki-list={}", spki_pin(key));
    let mut wrong = Browser::start(800, 600, &[&pin(&other)]);
    let refused = wrong.try_navigate(&page);
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("CERT")),
        "a browser pinned to another key loaded the page: {refused:?}"
    );
    drop(wrong);
    let mut b = Browser::start(1400, 1800, &[&pin(&key)]);
    for (i, addr) in addrs.iter().enumerate() {
        tls_slow_request(*addr);
        b.navigate(&format!("https://{addr}/ui"));
        let expect = Expect {
            members: &urls,
            version: 1,
            moving_to: None,
            slow_on: &urls[i],
        };
        wait_for(&mut b, &expect, PAGE_WAIT).unwrap_or_else(|e| panic!("node {i}: {e}"));
    }
    b.screenshot(&shot_path("tls.png"));
}

/// `POST /v0/slowlog?threshold_us=-1` over TLS: nothing recorded.
fn recording_off(addr: SocketAddr) {
    use ataman::http_client::{exchange::exchange, url::BaseUrl};
    let base = BaseUrl::parse(&format!("https://{addr}")).unwrap();
    let target = "/v0/slowlog?threshold_us=-1";
    let r = exchange(&base, "POST", target, None, support::IO_TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "recording off");
}

/// [`make_one_request_slow`] over TLS.
fn tls_slow_request(addr: SocketAddr) {
    use ataman::http_client::{exchange::exchange, url::BaseUrl};
    let base = BaseUrl::parse(&format!("https://{addr}")).unwrap();
    let io = support::IO_TIMEOUT;
    for (method, target, body) in [
        ("POST", "/v0/slowlog?threshold_us=0".to_owned(), None),
        ("PUT", support::entity(SLOW_KEY.as_bytes()), Some(&b"v"[..])),
        ("POST", "/v0/slowlog?threshold_us=-1".to_owned(), None),
    ] {
        let r = exchange(&base, method, &target, body, io).unwrap();
        assert!(
            matches!(r.status, 200 | 201),
            "{method} {target}: {}",
            r.status
        );
    }
}

/// [`Load`] over TLS: a bounded trickle, a third on [`HOT_KEY`].
fn tls_load(addrs: &[SocketAddr]) -> Load {
    use ataman::http_client::{exchange::exchange, url::BaseUrl};
    let bases: Vec<BaseUrl> = addrs
        .iter()
        .map(|a| BaseUrl::parse(&format!("https://{a}")).unwrap())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut sent = 0;
        while sent < LOAD_REQUESTS_MAX
            && started.elapsed() < LOAD_TIME_MAX
            && !flag.load(Ordering::Relaxed)
        {
            let key = if sent % 3 == 0 {
                HOT_KEY.to_owned()
            } else {
                format!("cold:{sent}")
            };
            let target = support::entity(key.as_bytes());
            let r = exchange(
                &bases[sent % bases.len()],
                "PUT",
                &target,
                Some(b"value"),
                support::IO_TIMEOUT,
            );
            assert!(
                r.is_ok_and(|r| matches!(r.status, 200 | 201 | 503 | 504)),
                "load"
            );
            sent += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        sent
    });
    Load {
        stop,
        thread: Some(thread),
    }
}
