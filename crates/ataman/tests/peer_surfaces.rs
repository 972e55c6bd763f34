//! The peer surfaces on real processes (docs/SECURITY.md, "Threat
//! model"): protected mode looks at the listening address, and a node's
//! peer gate follows what is true now (a joined node with tokens and a CA
//! takes its peers' certificates).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::Node;

const ADMIN: &str = "admin-token-01234567890";

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_ataman")
}

fn private(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Bound on a refused start: the refusal comes before anything is bound.
const REFUSAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `ataman serve ARGS` on a fresh data directory, expected to refuse to
/// start before it binds anything: its stderr. A node still running after
/// [`REFUSAL_TIMEOUT`] started: it is killed and the test fails.
fn refused_start(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(exe())
        .arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > REFUSAL_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("ataman serve {args:?} started instead of refusing");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "started: {stderr}");
    stderr
}

/// The reported case: `--listen 0.0.0.0:P` with tokens and loopback
/// member URLs started, and answered `/v0/peer` and `/v0/internal/range`
/// to anyone. It now refuses to start, naming both peer options.
#[test]
fn listen_beyond_loopback_with_loopback_members_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = private(dir.path(), "tokens", &format!("{ADMIN} admin\n"));
    // Ports nothing listens on: the node refuses before it binds.
    let cluster = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3";
    let tokens = tokens.to_str().unwrap();
    let base = [
        "--listen",
        "0.0.0.0:1",
        "--cluster",
        cluster,
        "--self",
        "http://127.0.0.1:1",
        "--auth-token-file",
        tokens,
    ];
    let stderr = refused_start(&base);
    for part in [
        "--listen 0.0.0.0:1",
        "--cluster-secret-file",
        "--tls-ca",
        "--allow-unauthenticated",
    ] {
        assert!(stderr.contains(part), "{part} not in {stderr}");
    }
    // Negative control: with a secret it gets past protected mode (and
    // then fails on the unreadable secret file, still before binding).
    let mut with_secret = base.to_vec();
    with_secret.extend(["--cluster-secret-file", "/nonexistent/secret"]);
    let stderr = refused_start(&with_secret);
    assert!(!stderr.contains("--tls-ca"), "{stderr}");
    assert!(
        stderr.contains("cannot read /nonexistent/secret"),
        "{stderr}"
    );
    // A --join seed beyond loopback counts as a peer too.
    let stderr = refused_start(&[
        "--join",
        "http://192.0.2.1:19234",
        "--auth-token-file",
        tokens,
    ]);
    assert!(
        stderr.contains("--join seed http://192.0.2.1:19234") && stderr.contains("--tls-ca"),
        "{stderr}"
    );
}

/// A CA and a node certificate; this process trusts the CA and presents
/// the node certificate (as a peer does).
fn certs(dir: &Path) {
    let d = dir.to_str().unwrap();
    let key = format!("{d}/ca.key");
    for args in [
        ["create-ca", "--certs-dir", d, "--ca-key", &key],
        ["create-node", "--certs-dir", d, "--ca-key", &key],
    ] {
        let out = Command::new(exe()).arg("cert").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ataman::http_client::tls::set_certs_dir(dir).unwrap();
}

/// A node started with `--join`, client tokens and `--tls-ca` but no
/// cluster secret refused every peer upgrade forever (it was alone in its
/// start-up `--cluster`): a peer presenting a certificate of the CA is
/// now served, one without is still refused.
#[test]
fn a_joined_node_with_tokens_and_a_ca_takes_its_peers() {
    let dir = tempfile::tempdir().unwrap();
    certs(dir.path());
    let tokens = private(dir.path(), "tokens", &format!("{ADMIN} admin\n"));
    ataman::http_client::token::init(Some(&tokens)).unwrap();
    let mut args: Vec<String> = ataman::http_client::tls::serve_args(dir.path());
    args.extend(["--auth-token-file".into(), tokens.display().to_string()]);
    // The seed's peers are on ports nothing listens on.
    let cluster = "https://127.0.0.1:1,https://127.0.0.1:2,https://127.0.0.1:3";
    let mut seed_args = args.clone();
    seed_args.extend(["--cluster", cluster, "--self", "https://127.0.0.1:1"].map(String::from));
    let seed = Node::start(&seed_args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut joiner_args = args;
    let seed_url = format!("https://{}", seed.addr());
    joiner_args.extend(["--self", "https://127.0.0.1:4", "--join", &seed_url].map(String::from));
    let joiner = Node::start(&joiner_args.iter().map(String::as_str).collect::<Vec<_>>());

    // A peer's read of the joiner's own copies: the upgrade with this
    // process's node certificate, naming the layout version.
    let copies = ataman::harness::converge::read_copies(joiner.addr(), &["k"], None);
    let copies = copies.unwrap_or_else(|e| panic!("the joiner refused its peer: {e}"));
    assert_eq!(copies.len(), 1);
    // Without a certificate: still refused (403, naming the certificate).
    let sock = std::net::TcpStream::connect(joiner.addr()).unwrap();
    sock.set_read_timeout(Some(support::IO_TIMEOUT)).unwrap();
    let url = ataman::http_client::url::BaseUrl {
        host: "127.0.0.1".into(),
        port: joiner.addr().port(),
        https: true,
    };
    let ca_only = ataman_node::tls::load::client_config_for_ca(&dir.path().join("ca.crt")).unwrap();
    let name = ataman_node::tls::load::server_name(&url.host).unwrap();
    let mut stream = ataman_node::tls::blocking::BlockingStream::connect_tls(
        sock,
        ca_only,
        name,
        support::IO_TIMEOUT,
    )
    .unwrap();
    let hello = ataman_node::peer::handshake::with_layout(
        ataman_node::peer::handshake::upgrade_request(&joiner.addr().to_string(), "https://x:9"),
        1,
    );
    std::io::Write::write_all(&mut stream, &hello).unwrap();
    let answer =
        ataman::http_client::response::read_response(&mut std::io::BufReader::new(&mut stream))
            .unwrap();
    assert_eq!(
        answer.status,
        403,
        "{:?}",
        String::from_utf8_lossy(&answer.body)
    );
    assert!(String::from_utf8_lossy(&answer.body).contains("certificate"));
    drop((seed, joiner));
}
