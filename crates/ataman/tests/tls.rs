//! Black-box tests of TLS (docs/SECURITY.md, "TLS"): a node behind `--tls-cert` and
//! `--tls-key` answers HTTPS clients that trust its CA and gives a plaintext
//! client nothing, a `--tls-ca` cluster replicates over TLS, a certificate
//! is replaced without a restart, and `ataman cert` makes the files.
//!
//! One CA serves the whole test binary (the readiness probe of the test
//! launcher trusts one CA per process); each test makes its own node
//! certificates with `ataman cert create-node`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::FaultProxy;
use ataman::http_client::exchange::{exchange, secure};
use ataman::http_client::response::{Response, read_response};
use ataman::http_client::url::{BaseUrl, target};
use ataman_node::tls::blocking::BlockingStream;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use support::{IO_TIMEOUT, Node};

/// Bound on a replaced certificate being presented.
const RELOAD_BOUND: Duration = Duration::from_secs(10);
/// Time between two looks at the presented certificate.
const RELOAD_POLL: Duration = Duration::from_millis(100);

/// The binary-wide CA directory (`ca.crt`, `ca.key`), trusted by this process.
fn ca_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        cert(&["create-ca", "--certs-dir", dir.path().to_str().unwrap()]);
        ataman::http_client::tls::set_ca(&dir.path().join("ca.crt")).unwrap();
        dir
    })
    .path()
}

/// Runs `ataman cert ARGS`, which must succeed.
fn cert(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .arg("cert")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ataman cert {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `node.crt` and `node.key` in `dir`, signed by the binary-wide CA.
fn node_cert(dir: &Path, overwrite: bool) {
    let ca_key = ca_dir().join("ca.key");
    let mut args = vec![
        "create-node",
        "--certs-dir",
        dir.to_str().unwrap(),
        "--ca-key",
        ca_key.to_str().unwrap(),
    ];
    if overwrite {
        args.push("--overwrite");
    }
    cert(&args);
}

/// The serve arguments of a TLS node whose files are in `dir` (with the CA: peers verified).
fn tls_args(dir: &Path, with_ca: bool) -> Vec<String> {
    let mut args = vec![
        "--tls-cert".to_owned(),
        dir.join("node.crt").to_string_lossy().into_owned(),
        "--tls-key".to_owned(),
        dir.join("node.key").to_string_lossy().into_owned(),
    ];
    if with_ca {
        args.push("--tls-ca".to_owned());
        args.push(ca_dir().join("ca.crt").to_string_lossy().into_owned());
    }
    args
}

fn https(addr: SocketAddr) -> BaseUrl {
    BaseUrl::parse(&format!("https://{addr}")).unwrap()
}

fn put(addr: SocketAddr, target: &str, value: &[u8]) -> Response {
    exchange(&https(addr), "PUT", target, Some(value), IO_TIMEOUT).unwrap()
}

fn get(addr: SocketAddr, target: &str) -> Response {
    exchange(&https(addr), "GET", target, None, IO_TIMEOUT).unwrap()
}

/// The certificate the node at `addr` presents now (DER).
fn presented_certificate(addr: SocketAddr) -> Vec<u8> {
    let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    sock.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let stream = secure(&https(addr), sock, IO_TIMEOUT).unwrap();
    let BlockingStream::Tls(tls) = stream else {
        panic!("an https:// URL gave a plain stream");
    };
    tls.0.peer_certificates().unwrap()[0].to_vec()
}

fn file_certificate(path: &Path) -> Vec<u8> {
    ataman_node::tls::load::certificates(path).unwrap()[0].to_vec()
}

/// A plaintext HTTP request on the TLS port: what comes back within the bound.
fn plaintext_answer(addr: SocketAddr) -> Vec<u8> {
    let mut sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    sock.write_all(b"GET /v0/status HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = sock.read_to_end(&mut got); // a reset is an answer too
    got
}

/// A TLS node serves an HTTPS client that trusts its CA (the Rust client
/// and curl); a plaintext client gets no HTTP answer (`ctl` and `cluster
/// status` say the server speaks TLS), and the node goes on serving.
#[test]
fn tls_node_serves_https_and_refuses_plaintext() {
    let certs = tempfile::tempdir().unwrap();
    node_cert(certs.path(), false);
    let args = tls_args(certs.path(), false);
    let node = Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let addr = node.addr();
    let key = target("/v0/entity", &[("id", b"k")]);
    assert_eq!(put(addr, &key, b"over tls").status, 201);
    let got = get(addr, &key);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"over tls"[..]));

    for _ in 0..3 {
        let answer = plaintext_answer(addr);
        assert!(
            !answer.starts_with(b"HTTP/"),
            "a plaintext client got an HTTP answer: {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
    // Still serving, over TLS.
    assert_eq!(get(addr, "/v0/status").status, 200);

    // The project's own clients name the mistake of a plaintext URL.
    for command in [
        &["ctl", "status"][..],
        &["cluster", "status", "--interval-ms", "0"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ataman"))
            .args(command)
            .args(["--url", &format!("http://{addr}")])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{command:?}: {stderr}");
        assert!(
            stderr.contains("the server answered with TLS: use an https:// URL"),
            "{command:?}: {stderr}"
        );
    }

    // curl --cacert (`.ci/run` installs curl; a machine without it fails
    // here, naming it, rather than passing without the check).
    let curl = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca_dir().join("ca.crt"))
        .arg(format!("https://{addr}{key}"))
        .output()
        .unwrap_or_else(|e| {
            panic!("this test runs curl, which could not start ({e}): install curl")
        });
    assert!(
        curl.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&curl.stderr)
    );
    assert_eq!(curl.stdout, b"over tls");
    // Without the CA, curl refuses the certificate.
    let untrusted = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .arg(format!("https://{addr}/v0/status"))
        .output()
        .unwrap();
    assert!(!untrusted.status.success(), "curl trusted an unknown CA");
}

/// Large values cross TLS whole both ways (many records, partial writes).
#[test]
fn large_values_round_trip_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    node_cert(certs.path(), false);
    let args = tls_args(certs.path(), false);
    let node = Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut rng = support::Rng::new(7);
    for (i, len) in [0usize, 1, 16 * 1024 - 1, 16 * 1024 + 1, 3 * 1024 * 1024]
        .into_iter()
        .enumerate()
    {
        let value: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let key = target("/v0/entity", &[("id", format!("big{i}").as_bytes())]);
        assert_eq!(put(node.addr(), &key, &value).status, 201, "len {len}");
        let got = get(node.addr(), &key);
        assert_eq!(got.status, 200, "len {len}");
        assert!(
            got.body == value,
            "len {len}: the value came back different"
        );
    }
}

/// A three-node `--tls-ca` cluster (member URLs `https://`) replicates:
/// writes with ack=2 from=3 through each node, reads through each node, an
/// anti-entropy round with both peers. A peer upgrade from a client without a certificate of the CA is refused.
#[test]
fn tls_cluster_replicates() {
    let certs = tempfile::tempdir().unwrap();
    node_cert(certs.path(), false);
    let args = tls_args(certs.path(), true);
    let proxies: Vec<FaultProxy> = (0..3)
        .map(|_| FaultProxy::start_without_target().unwrap())
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
    for (i, node) in nodes.iter().enumerate() {
        let key = target(
            "/v0/entity",
            &[
                ("id", format!("k{i}").as_bytes()),
                ("ack", b"2"),
                ("from", b"3"),
            ],
        );
        let answer = put(node.addr(), &key, format!("v{i}").as_bytes());
        assert_eq!(
            answer.status,
            201,
            "write through node {i}: {:?}",
            String::from_utf8_lossy(&answer.body)
        );
    }
    for (n, node) in nodes.iter().enumerate() {
        for i in 0..3 {
            let key = target(
                "/v0/entity",
                &[
                    ("id", format!("k{i}").as_bytes()),
                    ("ack", b"2"),
                    ("from", b"3"),
                ],
            );
            let got = get(node.addr(), &key);
            assert_eq!(
                (got.status, got.body.clone()),
                (200, format!("v{i}").into_bytes()),
                "k{i} through node {n}"
            );
        }
    }
    // Every node's links are up over TLS.
    for (n, node) in nodes.iter().enumerate() {
        let cluster = get(node.addr(), "/v0/cluster");
        let text = String::from_utf8_lossy(&cluster.body);
        assert_eq!(text.matches("\"up\"").count(), 2, "node {n}: {text}");
    }

    // An anti-entropy round over TLS (the sync sessions, both ends).
    let repair = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["ctl", "--url", &format!("https://{}", nodes[0].addr())])
        .arg("--tls-ca")
        .arg(ca_dir().join("ca.crt"))
        .args(["--timeout-ms", "30000", "repair"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&repair.stdout);
    assert!(
        repair.status.success() && text.matches("\tok\t").count() == 2,
        "repair: {text} {}",
        String::from_utf8_lossy(&repair.stderr)
    );

    // A TLS client without a node certificate asks for a peer upgrade.
    let addr = nodes[0].addr();
    let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut stream = secure(&https(addr), sock, IO_TIMEOUT).unwrap();
    let hello = ataman_node::peer::handshake::upgrade_request(&addr.to_string(), &urls[1]);
    stream.write_all(&hello).unwrap();
    stream.flush().unwrap();
    let answer = read_response(&mut BufReader::new(&mut stream)).unwrap();
    assert_eq!(
        answer.status,
        403,
        "{:?}",
        String::from_utf8_lossy(&answer.body)
    );
    assert!(String::from_utf8_lossy(&answer.body).contains("certificate"));
    drop(nodes);
}

/// The certificate is replaced without a restart: a new pair in place is
/// presented to the next clients (on SIGHUP, and on a changed file alone),
/// and a pair that does not match keeps the old one in use.
#[test]
fn certificate_replaced_without_restart() {
    let certs = tempfile::tempdir().unwrap();
    node_cert(certs.path(), false);
    let args = tls_args(certs.path(), false);
    let node = Node::start_logged(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let addr = node.addr();
    let crt = certs.path().join("node.crt");
    let first = file_certificate(&crt);
    assert_eq!(presented_certificate(addr), first);

    // A new pair, found by its modification time.
    let staging = tempfile::tempdir().unwrap();
    node_cert(staging.path(), false);
    replace_pair(staging.path(), certs.path());
    let second = file_certificate(&crt);
    assert_ne!(first, second);
    wait_presented(addr, &second, None);

    // A new pair on SIGHUP.
    node_cert(staging.path(), true);
    replace_pair(staging.path(), certs.path());
    let third = file_certificate(&crt);
    wait_presented(addr, &third, Some(node.pid()));

    // A certificate with the wrong key: the third stays, the log says why.
    node_cert(staging.path(), true);
    std::fs::copy(staging.path().join("node.crt"), &crt).unwrap();
    // SAFETY: kill(2) on the node this test started.
    unsafe { libc::kill(node.pid() as libc::pid_t, libc::SIGHUP) };
    let deadline = Instant::now() + RELOAD_BOUND;
    while !node.log().contains("not reloaded") {
        assert!(
            Instant::now() < deadline,
            "no refusal logged: {}",
            node.log()
        );
        std::thread::sleep(RELOAD_POLL);
    }
    assert_eq!(presented_certificate(addr), third);
    assert_eq!(get(addr, "/v0/status").status, 200);
}

/// Moves `node.crt` and `node.key` from `from` into `to` (each by rename).
fn replace_pair(from: &Path, to: &Path) {
    for name in ["node.key", "node.crt"] {
        let tmp: PathBuf = to.join(format!("{name}.new"));
        std::fs::copy(from.join(name), &tmp).unwrap();
        std::fs::rename(&tmp, to.join(name)).unwrap();
    }
}

/// Waits until the node presents `want`, sending SIGHUP to `hup` first.
fn wait_presented(addr: SocketAddr, want: &[u8], hup: Option<u32>) {
    if let Some(pid) = hup {
        // SAFETY: kill(2) on the node this test started.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) };
    }
    let deadline = Instant::now() + RELOAD_BOUND;
    while presented_certificate(addr) != want {
        assert!(
            Instant::now() < deadline,
            "the new certificate was not presented within {RELOAD_BOUND:?}"
        );
        std::thread::sleep(RELOAD_POLL);
    }
}

/// `ataman ARGS`, which must succeed; its stdout.
fn ataman_ok(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ataman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A value of exactly `--value-bytes-max` backed up and restored over TLS
/// with client tokens (`--tls-ca`, an admin `--token-file`): the restore's
/// batch of one version (over the value bound by its key and framing)
/// crosses TLS and the token gate, and the value reads back byte for byte
/// through `ataman ctl get`. A bound of 4 MiB keeps it quick; the 16 MiB
/// default is `tests/backup.rs`.
#[test]
fn a_value_at_the_bound_is_restored_over_tls_with_tokens() {
    const BOUND: usize = 4 * 1024 * 1024;
    let certs = tempfile::tempdir().unwrap();
    node_cert(certs.path(), false);
    let tokens = certs.path().join("tokens");
    std::fs::write(&tokens, "admin-token-0123456789abcdef admin\n").unwrap();
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let bound = BOUND.to_string();
    let mut args = tls_args(certs.path(), false);
    args.extend(["--auth-token-file".into(), tokens.display().to_string()]);
    args.extend(["--value-bytes-max".into(), bound]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (source, target) = (Node::start(&args), Node::start(&args));
    let ca = ca_dir().join("ca.crt");
    let ca = ca.to_str().unwrap();
    let tok = tokens.to_str().unwrap();
    let url = |n: &Node| format!("https://{}", n.addr());
    let client = |n: &Node| -> Vec<String> {
        ["--url", &url(n), "--tls-ca", ca, "--token-file", tok]
            .map(str::to_owned)
            .to_vec()
    };
    let run = |cmd: &[&str], n: &Node, rest: &[&str]| {
        let mut all: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        all.extend(client(n));
        all.extend(rest.iter().map(|s| s.to_string()));
        ataman_ok(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let mut rng = support::Rng::new(34);
    let value: Vec<u8> = (0..BOUND).map(|_| rng.next_u64() as u8).collect();
    let file = certs.path().join("value");
    std::fs::write(&file, &value).unwrap();
    run(
        &["ctl", "put", "big"],
        &source,
        &["--file", file.to_str().unwrap()],
    );
    run(&["ctl", "put", "small"], &source, &["one"]);
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("b");
    let to = to.to_str().unwrap();
    run(&["backup", "create"], &source, &["--to", to]);
    let said = run(&["backup", "restore", to], &target, &[]);
    let said = String::from_utf8_lossy(&said);
    assert!(said.contains("2 versions read"), "{said}");
    let back = run(&["ctl", "get", "big"], &target, &[]);
    assert_eq!(back.len(), BOUND);
    assert!(back == value, "the value came back different");
    assert_eq!(run(&["ctl", "get", "small"], &target, &[]), b"one");
}
