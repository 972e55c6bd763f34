//! Authentication on real processes (docs/SECURITY.md): every role against
//! every endpoint, refusals that leak nothing, token rotation without a
//! restart, the refusals to start (file permissions, protected mode), a
//! node with the wrong cluster secret, and a raw peer upgrade without proof.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::cluster::{TestCluster, assert_status, body, entity, eventually};
use support::{Node, Response};

const READER: &str = "reader-token-0123456789";
const WRITER: &str = "writer-token-0123456789";
const ADMIN: &str = "admin-token-01234567890";
/// Bound on a rotated token file being picked up (checked every second).
const ROTATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on the cluster settling (links up, or refused).
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes `text` to `dir/name` with permissions `mode`.
fn private_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn tokens_text() -> String {
    format!("# the test's tokens\n{READER} read\n\n{WRITER} write\n{ADMIN} admin\n")
}

fn send(
    node: &Node,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    node.conn().request(method, target, &headers, body)
}

fn metric(node: &Node, token: &str, line_start: &str) -> u64 {
    let r = send(node, "GET", "/metrics", Some(token), None);
    assert_status(&r, 200, "metrics");
    body(&r)
        .lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in /metrics"))
}

/// An endpoint: method, target, body, the least role (0 open, 1 read, 2
/// write, 3 admin), and its status when admitted.
type Endpoint<'a> = (&'a str, String, Option<&'a [u8]>, u8, u16);

/// Every credential against every endpoint: the status each gets, and a
/// 401 or 403 that names no key, value or token.
#[test]
fn every_role_against_every_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o600);
    let node = Node::start(&["--auth-token-file", tokens.to_str().unwrap()]);
    let key = b"the-secret-key";
    let value = b"the-secret-value";
    assert_status(
        &send(&node, "PUT", &entity(key, 1, 1), Some(ADMIN), Some(value)),
        201,
        "seed",
    );
    let get = entity(key, 1, 1);
    let put = entity(b"another-secret-key", 1, 1);
    let endpoints: Vec<Endpoint<'_>> = vec![
        ("GET", "/v0/status".into(), None, 0, 200),
        ("GET", get.clone(), None, 1, 200),
        ("GET", "/v0/entities?start=a".into(), None, 1, 200),
        ("GET", "/v0/cluster".into(), None, 1, 200),
        ("GET", "/v0/repair".into(), None, 1, 200),
        ("GET", "/metrics".into(), None, 1, 200),
        ("PUT", put.clone(), Some(value), 2, 201),
        ("DELETE", put.clone(), None, 2, 202),
        ("POST", "/v0/repair".into(), None, 3, 202),
    ];
    let credentials: [(Option<&str>, u8); 6] = [
        (None, 0),
        (Some("not-a-token-0123456789"), 0),
        (Some(""), 0),
        (Some(READER), 1),
        (Some(WRITER), 2),
        (Some(ADMIN), 3),
    ];
    for (method, target, body_bytes, least, admitted) in &endpoints {
        for (token, level) in credentials {
            let r = send(&node, method, target, token, *body_bytes);
            let context = format!("{method} {target} with {token:?}");
            let expected = if level >= *least {
                *admitted
            } else if level == 0 {
                401
            } else {
                403
            };
            assert_status(&r, expected, &context);
            if expected == 401 {
                assert_eq!(
                    r.header_str("WWW-Authenticate").as_deref(),
                    Some("Bearer"),
                    "{context}"
                );
            }
            if expected == 401 || expected == 403 {
                let text = body(&r);
                for secret in ["the-secret", "another-secret", "token-0123"] {
                    assert!(!text.contains(secret), "{context} leaked {secret}: {text}");
                }
            }
        }
    }
    assert!(
        metric(
            &node,
            READER,
            "ataman_auth_failures_total{reason=\"missing\"}"
        ) >= 8
    );
    assert!(
        metric(
            &node,
            READER,
            "ataman_auth_failures_total{reason=\"unknown_token\"}"
        ) >= 8
    );
    assert!(
        metric(
            &node,
            READER,
            "ataman_auth_failures_total{reason=\"forbidden\"}"
        ) >= 3
    );
    // The value is still there, for a reader.
    let r = send(&node, "GET", &get, Some(READER), None);
    assert_eq!(r.body, value);
}

/// A new token file is used without a restart; a bad one keeps the old
/// tokens; SIGHUP rereads the file.
#[test]
fn tokens_rotate_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = private_file(dir.path(), "tokens", &format!("{READER} read\n"), 0o600);
    let node = Node::start(&["--auth-token-file", tokens.to_str().unwrap()]);
    let status = |token: &str| send(&node, "GET", "/v0/cluster", Some(token), None).status;
    assert_eq!((status(READER), status(WRITER)), (200, 401));
    private_file(dir.path(), "tokens", &format!("{WRITER} read\n"), 0o600);
    eventually("the rotated token works", ROTATION_TIMEOUT, || {
        status(WRITER) == 200
    });
    assert_eq!(status(READER), 401, "the old token is gone");
    // A bad file (and one others may read) leaves the tokens as they are.
    private_file(dir.path(), "tokens", "no role here\n", 0o600);
    eventually("the bad file is tried", ROTATION_TIMEOUT, || {
        metric(
            &node,
            WRITER,
            "ataman_auth_token_reloads_total{result=\"failed\"}",
        ) >= 1
    });
    private_file(dir.path(), "tokens", &format!("{ADMIN} read\n"), 0o644);
    eventually("the exposed file is refused", ROTATION_TIMEOUT, || {
        metric(
            &node,
            WRITER,
            "ataman_auth_token_reloads_total{result=\"failed\"}",
        ) >= 2
    });
    assert_eq!((status(WRITER), status(ADMIN)), (200, 401));
    // SIGHUP rereads even a file whose metadata did not change since.
    let ok_before = metric(
        &node,
        WRITER,
        "ataman_auth_token_reloads_total{result=\"ok\"}",
    );
    private_file(dir.path(), "tokens", &format!("{ADMIN} read\n"), 0o600);
    unsafe { libc::kill(node.pid() as i32, libc::SIGHUP) };
    eventually("SIGHUP reloads", ROTATION_TIMEOUT, || status(ADMIN) == 200);
    assert!(
        metric(
            &node,
            ADMIN,
            "ataman_auth_token_reloads_total{result=\"ok\"}"
        ) > ok_before
    );
    assert!(node.is_running(), "SIGHUP does not stop the node");
}

/// A token file or a secret file that group or others may read: the node
/// refuses to start and names the file.
#[test]
fn exposed_files_refuse_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o640);
    let node = Node::stopped(&["--auth-token-file", tokens.to_str().unwrap()], None);
    let (status, stderr) = node.start_expecting_exit();
    assert!(!status.success());
    assert!(stderr.contains(tokens.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("group or others"), "{stderr}");
    assert!(!stderr.contains(READER), "a token in the log: {stderr}");
    let secret = private_file(
        dir.path(),
        "secret",
        "0123456789abcdef0123456789abcdef",
        0o604,
    );
    let node = Node::stopped(&["--cluster-secret-file", secret.to_str().unwrap()], None);
    let (status, stderr) = node.start_expecting_exit();
    assert!(!status.success());
    assert!(stderr.contains(secret.to_str().unwrap()), "{stderr}");
    // A malformed token file names its line, and not the token.
    let bad = private_file(
        dir.path(),
        "bad",
        &format!("{READER} read\n{WRITER} root\n"),
        0o600,
    );
    let node = Node::stopped(&["--auth-token-file", bad.to_str().unwrap()], None);
    let (_, stderr) = node.start_expecting_exit();
    assert!(
        stderr.contains(&format!("{}:2: unknown role", bad.display())),
        "{stderr}"
    );
    assert!(!stderr.contains(WRITER), "{stderr}");
}

/// `ataman serve` with `args` and a fresh data directory, expected to
/// refuse to start (it refuses before it binds anything): its stderr.
fn refused_start(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "started: {stderr}");
    stderr
}

/// Protected mode: a non-loopback listener without tokens, or a cluster on
/// non-loopback addresses without a secret, refuses to start and names the
/// options; from a flag, the environment or the config file alike.
#[test]
fn protected_mode_refusals() {
    let stderr = refused_start(&["--listen", "0.0.0.0:0"], &[]);
    assert!(stderr.contains("--auth-token-file"), "{stderr}");
    assert!(stderr.contains("--allow-unauthenticated"), "{stderr}");
    let stderr = refused_start(&[], &[("ATAMAN_LISTEN", "0.0.0.0:0")]);
    assert!(stderr.contains("--auth-token-file"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o600);
    let config = dir.path().join("node.toml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let me = format!("http://127.0.0.1:{port}");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\ncluster = \"{me},http://192.0.2.1:19234\"\nself = \"{me}\"\nauth_token_file = \"{}\"\n",
            tokens.display()
        ),
    )
    .unwrap();
    let stderr = refused_start(&["--config", config.to_str().unwrap()], &[]);
    assert!(stderr.contains("--cluster-secret-file"), "{stderr}");
    assert!(stderr.contains("http://192.0.2.1:19234"), "{stderr}");
    // Negative control: the same cluster with a secret gets past protected
    // mode (and then fails on an unreadable secret file, before binding).
    let stderr = refused_start(
        &["--config", config.to_str().unwrap()],
        &[("ATAMAN_CLUSTER_SECRET_FILE", "/nonexistent/secret")],
    );
    assert!(!stderr.contains("is given"), "{stderr}");
    assert!(
        stderr.contains("cannot read /nonexistent/secret"),
        "{stderr}"
    );
}

/// A node whose secret differs is neither a replica nor able to read: the
/// others refuse its links and it refuses theirs, each counted; the two
/// nodes that share the secret replicate as before.
#[test]
fn a_node_with_the_wrong_secret_is_shut_out() {
    let dir = tempfile::tempdir().unwrap();
    let good = private_file(
        dir.path(),
        "good",
        "the-good-cluster-secret-0123456789",
        0o600,
    );
    let bad = private_file(
        dir.path(),
        "bad",
        "another-cluster-secret-0123456789",
        0o600,
    );
    let files = [good.clone(), good, bad];
    let cluster = TestCluster::start_each(3, &[], |i| {
        vec![
            "--cluster-secret-file".into(),
            files[i].display().to_string(),
        ]
    });
    let keys: Vec<Vec<u8>> = (0..20).map(|i| format!("key-{i}").into_bytes()).collect();
    for key in &keys {
        assert_status(
            &cluster.put(0, key, b"value", 2, 3),
            201,
            "write through the good pair",
        );
    }
    for key in &keys {
        // ack=2 of 3 on the outsider: only itself can answer.
        let r = cluster.get(2, key, 2, 3);
        assert_eq!(r.status, 504, "the outsider read {key:?}: {}", body(&r));
        // Its own copy, where it is the first replica, is empty.
        let r = cluster.get(2, key, 1, 1);
        assert_ne!(r.status, 200, "the outsider holds {key:?}");
        // The good pair reads back what was written (2 of the 3 replicas).
        let r = cluster.get(1, key, 2, 3);
        assert_eq!(r.body, b"value", "{key:?}");
    }
    let refused = |i: usize| {
        let r = cluster.node(i).get_target("/metrics");
        body(&r)
            .lines()
            .find_map(|l| l.strip_prefix("ataman_peer_auth_failures_total{reason=\"bad_proof\"}"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    eventually("the outsider is refused by node 0", CLUSTER_TIMEOUT, || {
        refused(0) > 0
    });
    eventually("node 0 is refused by the outsider", CLUSTER_TIMEOUT, || {
        refused(2) > 0
    });
}

/// A raw `/v0/peer` upgrade without a proof (or with a client's bearer
/// token, or a forged proof) gets a challenge or a refusal and never a
/// frame of data.
#[test]
fn a_raw_peer_upgrade_without_proof_gets_no_data() {
    let dir = tempfile::tempdir().unwrap();
    let secret = private_file(
        dir.path(),
        "secret",
        "the-cluster-secret-0123456789ab",
        0o600,
    );
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o600);
    let node = Node::start(&[
        "--cluster-secret-file",
        secret.to_str().unwrap(),
        "--auth-token-file",
        tokens.to_str().unwrap(),
    ]);
    assert_status(
        &send(
            &node,
            "PUT",
            &entity(b"k", 1, 1),
            Some(ADMIN),
            Some(b"the-stored-value"),
        ),
        201,
        "seed",
    );
    let upgrade = |extra: &str| {
        format!(
            "GET /v0/peer HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: ataman-peer/1\r\nX-Ataman-Peer: http://127.0.0.1:9\r\n{extra}\r\n"
        )
    };
    // A peer Read frame of key "k" (docs/FORMAT.md), sent right after the head.
    let mut read_frame = Vec::new();
    ataman_node::peer::frame::encode(
        &ataman_node::peer::frame::Message::Read {
            id: 1,
            key: b"k".to_vec(),
        },
        &mut read_frame,
    );
    let attempts = [
        upgrade(""),
        upgrade(&format!("Authorization: Bearer {ADMIN}\r\n")),
        upgrade(&format!(
            "Authorization: Ataman-Peer v=1, nonce={}, proof={}\r\n",
            "ab".repeat(32),
            "cd".repeat(32)
        )),
    ];
    for (i, head) in attempts.iter().enumerate() {
        let mut stream = std::net::TcpStream::connect(node.addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut bytes = head.clone().into_bytes();
        bytes.extend_from_slice(&read_frame);
        stream.write_all(&bytes).unwrap();
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 401 "), "attempt {i}: {text}");
        assert!(!text.contains("101 Switching"), "attempt {i}: {text}");
        assert!(
            !text.contains("the-stored-value"),
            "attempt {i} got data: {text}"
        );
        assert!(
            text.contains("WWW-Authenticate: Ataman-Peer v=1"),
            "attempt {i}: {text}"
        );
    }
    let refusals: u64 = ["no_challenge", "missing_proof", "malformed", "bad_proof"]
        .iter()
        .map(|r| {
            metric(
                &node,
                READER,
                &format!("ataman_peer_auth_failures_total{{reason=\"{r}\"}}"),
            )
        })
        .sum();
    assert!(refusals >= 2, "refusals counted: {refusals}");
}

/// `ataman ctl repair` with `--token-file`: exit status and output.
fn ctl_repair(addr: std::net::SocketAddr, token_file: Option<&Path>) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ataman"));
    command.args([
        "ctl",
        "repair",
        "--url",
        &format!("http://{addr}"),
        "--timeout-ms",
        "20000",
    ]);
    if let Some(file) = token_file {
        command.arg("--token-file").arg(file);
    }
    let out = command.env_remove("ATAMAN_TOKEN").output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Anti-entropy's sync sessions prove the secret too: a round between nodes
/// sharing it succeeds (started by `ctl repair` with an admin token, refused
/// without one); a round with the outsider fails.
#[test]
fn sync_sessions_prove_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let good = private_file(
        dir.path(),
        "good",
        "the-good-cluster-secret-0123456789",
        0o600,
    );
    let bad = private_file(
        dir.path(),
        "bad",
        "another-cluster-secret-0123456789",
        0o600,
    );
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o600);
    let admin = private_file(dir.path(), "admin", &format!("{ADMIN}\n"), 0o600);
    let reader = private_file(dir.path(), "reader", &format!("{READER}\n"), 0o600);
    let files = [good.clone(), good, bad];
    let tokens_arg = tokens.display().to_string();
    let cluster = TestCluster::start_each(3, &[], |i| {
        vec![
            "--cluster-secret-file".into(),
            files[i].display().to_string(),
            "--auth-token-file".into(),
            tokens_arg.clone(),
        ]
    });
    let (ok, out) = ctl_repair(cluster.node(0).addr(), None);
    assert!(!ok && out.contains("401"), "{out}");
    let (ok, out) = ctl_repair(cluster.node(0).addr(), Some(&reader));
    assert!(!ok && out.contains("403"), "{out}");
    let (ok, out) = ctl_repair(cluster.node(0).addr(), Some(&admin));
    assert!(!ok, "a round including the outsider succeeded: {out}");
    let lines: Vec<&str> = out.lines().collect();
    let with = |url: &str| {
        lines
            .iter()
            .find(|l| l.contains(url))
            .copied()
            .unwrap_or("")
    };
    assert!(with(&cluster.urls()[1]).contains("\tok\t"), "{out}");
    assert!(with(&cluster.urls()[2]).contains("\tfailed\t"), "{out}");
    assert!(with(&cluster.urls()[2]).contains("401"), "{out}");
}

/// `ataman test-cluster` with tokens and a secret on its nodes: with
/// `--token-file` the run passes, its clients and its peer reads proving
/// who they are; without it every request is refused and the run fails.
#[test]
fn the_harness_runs_with_tokens_and_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret = private_file(
        dir.path(),
        "secret",
        "the-harness-cluster-secret-0123",
        0o600,
    );
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o600);
    let admin = private_file(dir.path(), "admin", &format!("{ADMIN}\n"), 0o600);
    let run = |token: Option<&Path>, extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ataman"));
        command.args([
            "test-cluster",
            "--nodes",
            "3",
            "--duration-s",
            "2",
            "--seed",
            "3",
        ]);
        command.args(["--faults", "none", "--converge-timeout-s", "5"]);
        command.args(extra).env_remove("ATAMAN_TOKEN");
        if let Some(file) = token {
            command.arg("--token-file").arg(file);
        }
        command.arg("--").arg("--auth-token-file").arg(&tokens);
        command.arg("--cluster-secret-file").arg(&secret);
        let out = command.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success(), text)
    };
    let (ok, text) = run(Some(&admin), &[]);
    assert!(ok, "{text}");
    assert!(text.contains("acknowledged writes lost: 0"), "{text}");
    assert!(text.contains("0 keys divergent"), "{text}");
    // Few keys: every refused final read is retried until its deadline.
    let (ok, text) = run(None, &["--workloads", "register"]);
    assert!(!ok, "passed without a token: {text}");
    assert!(text.contains("401"), "{text}");
}

/// Reads from `stream` until it closes or what came ends with `tail`
/// (bounded by the read timeout and 64 KiB).
fn read_until(stream: &mut std::net::TcpStream, tail: &[u8]) -> (String, bool) {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut closed = false;
    while !got.ends_with(tail) && got.len() < 64 * 1024 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => {
                closed = true;
                break;
            }
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

/// Before a client proves a token, RESP allows it 10 arguments and bulks
/// of 16 KiB (the error names the bound, then the connection closes), and
/// HTTP refuses a head declaring more than 16 KiB of body with 401 before
/// reading the body, and closes; at the bounds both are served as before,
/// and a client with a token sends what the value limit allows.
#[test]
fn unauthenticated_clients_get_small_limits_at_and_past_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = private_file(dir.path(), "tokens", &tokens_text(), 0o600);
    let resp = support::fixed_resp_addr();
    let node = Node::start(&[
        "--auth-token-file",
        tokens.to_str().unwrap(),
        "--resp-listen",
        resp.as_str(),
    ]);
    let resp_send = |bytes: &[u8], tail: &[u8]| {
        let mut s = std::net::TcpStream::connect(&resp).unwrap();
        s.write_all(bytes).unwrap();
        read_until(&mut s, tail)
    };
    let multibulk = |n: usize, len: usize| {
        let mut out = format!("*{n}\r\n").into_bytes();
        for _ in 0..n {
            out.extend_from_slice(format!("${len}\r\n").as_bytes());
            out.extend(std::iter::repeat_n(b'a', len));
            out.extend_from_slice(b"\r\n");
        }
        out
    };
    // At the bounds: answered (NOAUTH), the connection kept.
    let (got, _) = resp_send(&multibulk(10, 1), b"\r\n");
    assert!(got.starts_with("-NOAUTH"), "{got}");
    let (got, _) = resp_send(&multibulk(1, 16 * 1024), b"\r\n");
    assert!(got.starts_with("-NOAUTH"), "{got}");
    // Past them: the error, then the end of the connection.
    let (got, closed) = resp_send(b"*11\r\n", b"\n\n");
    assert_eq!(
        got,
        "-ERR Protocol error: unauthenticated multibulk length 11 over 10 (AUTH first)\r\n"
    );
    assert!(closed);
    let (got, closed) = resp_send(b"*2\r\n$3\r\nSET\r\n$16385\r\n", b"\n\n");
    assert_eq!(
        got,
        "-ERR Protocol error: unauthenticated bulk length 16385 over 16384 (AUTH first)\r\n"
    );
    assert!(closed);
    // Authenticated, the same connection sends more.
    let mut big = format!("AUTH {WRITER}\r\n").into_bytes();
    big.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n");
    big.extend(std::iter::repeat_n(b'v', 100_000));
    big.extend_from_slice(b"\r\n");
    let (got, closed) = resp_send(&big, b"+OK\r\n+OK\r\n");
    assert_eq!(got, "+OK\r\n+OK\r\n");
    assert!(!closed);

    // HTTP: a head declaring 16 KiB + 1 without a token is refused before
    // its body is sent, and the connection closes.
    let put = entity(b"k", 1, 1);
    for auth in ["", "Authorization: Bearer not-a-token-0123456789\r\n"] {
        let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
        let head = format!("PUT {put} HTTP/1.1\r\n{auth}Content-Length: 16385\r\n\r\n");
        s.write_all(head.as_bytes()).unwrap();
        let (got, closed) = read_until(&mut s, b"\n\n\n");
        assert!(got.starts_with("HTTP/1.1 401 "), "{got}");
        assert!(got.contains("before a token is proved"), "{got}");
        assert!(closed, "{got}");
    }
    // A chunked body declares no size: without a token it is refused on
    // its head like one over the bound (it was read up to the value limit
    // when chunked bodies arrived beside the body gate).
    let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
    let head = format!("PUT {put} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let (got, closed) = read_until(&mut s, b"\n\n\n");
    assert!(got.starts_with("HTTP/1.1 401 "), "{got}");
    assert!(got.contains("before a token is proved"), "{got}");
    assert!(closed, "{got}");
    // At the bound: the body is read, and the 401 keeps the connection.
    let body = vec![b'v'; 16 * 1024];
    let mut conn = node.conn();
    let r = conn.request("PUT", &put, &[], Some(&body));
    assert_status(&r, 401, "at the bound");
    let r = conn.request("GET", "/v0/status", &[], None);
    assert_status(&r, 200, "same connection");
    // With a token, a large body is read.
    let big = vec![b'v'; 1 << 20];
    assert_status(
        &send(&node, "PUT", &put, Some(WRITER), Some(&big)),
        201,
        "token",
    );
}
