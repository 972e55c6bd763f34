//! Security across front ends, on real processes: RESP authentication
//! over TLS, protected mode on `--resp-listen`, and a 3-node cluster with
//! tokens, a secret and TLS whose internal range only peers open.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::FaultProxy;
use ataman::http_client::exchange::secure;
use ataman::http_client::url::BaseUrl;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use support::{IO_TIMEOUT, Node};

const READER: &str = "reader-token-0123456789";
const WRITER: &str = "writer-token-0123456789";
const ADMIN: &str = "admin-token-01234567890";

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_ataman")
}

fn cert(args: &[&str]) {
    let out = Command::new(exe()).arg("cert").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a node certificate, trusted by this process.
fn certs() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_owned();
        let key = format!("{d}/ca.key");
        cert(&["create-ca", "--certs-dir", &d, "--ca-key", &key]);
        cert(&["create-node", "--certs-dir", &d, "--ca-key", &key]);
        ataman::http_client::tls::set_ca(&dir.path().join("ca.crt")).unwrap();
        dir
    })
    .path()
}

fn private(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn tokens(dir: &Path) -> PathBuf {
    private(
        dir,
        "tokens",
        &format!("{READER} read\n{WRITER} write\n{ADMIN} admin\n"),
    )
}

fn tls_args() -> Vec<String> {
    let d = certs();
    [
        ("--tls-cert", "node.crt"),
        ("--tls-key", "node.key"),
        ("--tls-ca", "ca.crt"),
    ]
    .iter()
    .flat_map(|(o, f)| [o.to_string(), d.join(f).display().to_string()])
    .collect()
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Sends one RESP command and reads one reply line (and a bulk's body).
fn ask(stream: &mut impl ReadWrite, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(out.as_bytes()).unwrap();
    stream.flush().unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    // Bounded: one reply of at most a few hundred bytes.
    while reply.len() < 4096 {
        stream.read_exact(&mut byte).unwrap();
        reply.push(byte[0]);
        if reply.ends_with(b"\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&reply).trim_end().to_owned()
}

/// The first `lines` lines of the reply to `args` (a multi-line reply).
fn ask_lines(stream: &mut impl ReadWrite, args: &[&str], lines: usize) -> Vec<String> {
    let mut out = vec![ask(stream, args)];
    while out.len() < lines {
        out.push(ask_more(stream));
    }
    out
}

/// The next line of a reply already asked for.
fn ask_more(stream: &mut impl ReadWrite) -> String {
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while reply.len() < 4096 {
        stream.read_exact(&mut byte).unwrap();
        reply.push(byte[0]);
        if reply.ends_with(b"\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&reply).trim_end().to_owned()
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// RESP over TLS with tokens: NOAUTH before AUTH, WRONGPASS for a wrong
/// token or user, NOPERM for a role too weak, and both AUTH forms.
#[test]
fn resp_auth_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens(dir.path());
    let resp = free_addr();
    let mut args = vec![
        "--resp-listen".to_string(),
        resp.clone(),
        "--auth-token-file".into(),
        tokens.display().to_string(),
    ];
    args.extend(tls_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _node = Node::start(&args);
    let url = BaseUrl::parse(&format!("https://{resp}")).unwrap();
    let sock = TcpStream::connect(&resp).unwrap();
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut s = secure(&url, sock, IO_TIMEOUT).unwrap();
    assert_eq!(ask(&mut s, &["PING"]), "-NOAUTH Authentication required.");
    assert_eq!(
        ask(&mut s, &["GET", "k"]),
        "-NOAUTH Authentication required."
    );
    assert_eq!(
        ask(&mut s, &["SCAN", "0"]),
        "-NOAUTH Authentication required."
    );
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.";
    assert_eq!(ask(&mut s, &["AUTH", "not-a-token-0123456"]), wrongpass);
    assert_eq!(ask(&mut s, &["AUTH", "bob", READER]), wrongpass);
    assert_eq!(ask(&mut s, &["AUTH", READER]), "+OK");
    assert!(ask(&mut s, &["SET", "k", "v"]).starts_with("-NOPERM "));
    assert_eq!(ask(&mut s, &["GET", "k"]), "$-1");
    assert_eq!(ask(&mut s, &["AUTH", "default", WRITER]), "+OK");
    assert_eq!(ask(&mut s, &["SET", "k", "v"]), "+OK");
    // A read-then-write command needs the write role whatever its read
    // finds: a reader may read the deadline, not set one.
    assert_eq!(ask(&mut s, &["AUTH", READER]), "+OK");
    assert_eq!(ask(&mut s, &["TTL", "k"]), ":-1");
    assert_eq!(
        ask(&mut s, &["EXPIRE", "k", "100"]),
        "-NOPERM User default has no permissions to run the 'expire' command"
    );
    assert_eq!(
        ask(&mut s, &["PERSIST", "k"]),
        "-NOPERM User default has no permissions to run the 'persist' command"
    );
    assert_eq!(ask(&mut s, &["AUTH", "default", WRITER]), "+OK");
    assert_eq!(ask(&mut s, &["EXPIRE", "k", "100"]), ":1");
    // A second connection: HELLO 3 AUTH default TOKEN.
    let sock = TcpStream::connect(&resp).unwrap();
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut s = secure(&url, sock, IO_TIMEOUT).unwrap();
    assert_eq!(
        ask(
            &mut s,
            &["HELLO", "3", "AUTH", "default", "nope-0123456789abc"]
        ),
        wrongpass
    );
    assert!(ask(&mut s, &["HELLO", "3", "AUTH", "default", READER]).starts_with('%'));
}

/// `--resp-listen` on a non-loopback address without tokens refuses to
/// start and names the option; `--tls-ca` counts as peer authentication.
#[test]
fn protected_mode_covers_resp_and_counts_tls_ca() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(exe())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--resp-listen",
            "0.0.0.0:0",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("d"))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--resp-listen 0.0.0.0:0"), "{stderr}");
    assert!(stderr.contains("--auth-token-file"), "{stderr}");
    // A cluster with a non-loopback member: refused without a secret or a
    // CA, started with --tls-ca.
    let proxy = FaultProxy::start_without_target().unwrap();
    let self_url = proxy.url().replacen("http://", "https://", 1);
    let cluster = format!("{self_url},https://192.0.2.1:19234");
    let tokens = tokens(dir.path());
    let mut args = vec![
        "--cluster".to_string(),
        cluster,
        "--self".into(),
        self_url,
        "--auth-token-file".into(),
        tokens.display().to_string(),
    ];
    args.extend(tls_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = Node::start(&args);
    proxy.set_target(node.addr());
    drop(node);
}

/// `n` pass-through proxies (targets set once the nodes listen) and the
/// `https` URLs the nodes are known by.
fn https_proxies(n: usize) -> (Vec<FaultProxy>, Vec<String>) {
    let proxies: Vec<FaultProxy> = (0..n)
        .map(|_| FaultProxy::start_without_target().unwrap())
        .collect();
    let urls = proxies
        .iter()
        .map(|p| p.url().replacen("http://", "https://", 1))
        .collect();
    (proxies, urls)
}

fn curl(args: &[&str]) -> (String, String) {
    let ca = certs().join("ca.crt");
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--max-time",
            "10",
            "--cacert",
        ])
        .arg(&ca)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("this test runs curl, which could not start ({e}): install curl")
        });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
    (body.to_owned(), code.to_owned())
}

/// Three nodes with tokens, a secret and TLS: writes replicate, a
/// cluster range through one node merges the others' internal ranges
/// (the coordinator proves the secret), and the internal range gives
/// nothing without the proof or a node certificate, a token included.
#[test]
fn cluster_with_tokens_secret_and_tls() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens(dir.path());
    let secret = private(dir.path(), "secret", "a-cluster-secret-0123456789abcdef");
    let (proxies, urls) = https_proxies(3);
    let cluster = urls.join(",");
    let resp = free_addr();
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            let mut args = vec![
                "--cluster".to_string(),
                cluster.clone(),
                "--self".into(),
                urls[i].clone(),
                "--auth-token-file".into(),
                tokens.display().to_string(),
                "--cluster-secret-file".into(),
                secret.display().to_string(),
            ];
            if i == 1 {
                args.extend(["--resp-listen".to_string(), resp.clone()]);
            }
            args.extend(tls_args());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let node = Node::start(&args);
            proxies[i].set_target(node.addr());
            node
        })
        .collect();
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    for k in ["key-a", "key-b", "key-c", "key-d"] {
        let url = format!("{}/v0/entity?id={k}&ack=3", urls[0]);
        let (_, code) = curl(&["-X", "PUT", "--data", "v", "-H", &bearer(WRITER), &url]);
        assert_eq!(code, "201", "PUT {k}");
    }
    // ack=3 of 3: every node's stream is needed, two of them peers'.
    let url = format!("{}/v0/entities?start=a&cluster=1&ack=3&from=3", urls[1]);
    let (body, code) = curl(&["-H", &bearer(READER), &url]);
    assert_eq!(code, "200", "{body}");
    for k in ["key-a", "key-b", "key-c", "key-d"] {
        assert!(body.contains(k), "{k} in {body:?}");
    }
    // RESP SCAN over TLS, a reader's token: every node's stream, two of
    // them peers' dialled over TLS with the secret's proof.
    let resp_url = BaseUrl::parse(&format!("https://{resp}")).unwrap();
    let sock = TcpStream::connect(&resp).unwrap();
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut s = secure(&resp_url, sock, IO_TIMEOUT).unwrap();
    assert_eq!(ask(&mut s, &["AUTH", READER]), "+OK");
    let replication = ask_lines(&mut s, &["ATAMAN.REPLICATION", "3", "3"], 3);
    assert_eq!(replication, ["*2", ":3", ":3"]);
    let page = ask_lines(&mut s, &["SCAN", "0", "COUNT", "10"], 12);
    let keys: Vec<&str> = page[4..]
        .iter()
        .skip(1)
        .step_by(2)
        .map(String::as_str)
        .collect();
    assert_eq!(page[..4], ["*2", "$1", "0", "*4"], "{page:?}");
    assert_eq!(keys, ["key-a", "key-b", "key-c", "key-d"]);
    let internal = format!("{}/v0/internal/range?start=a", urls[2]);
    let (body, code) = curl(&[&internal]);
    assert_eq!((code.as_str(), body.as_str()), ("401", ""));
    let (body, code) = curl(&["-H", &bearer(ADMIN), &internal]);
    assert_eq!(code, "401");
    assert!(!body.contains("key-"), "{body}");
    // A CA-verified node certificate opens it.
    let crt = certs().join("node.crt");
    let key = certs().join("node.key");
    let (crt, key) = (crt.to_str().unwrap(), key.to_str().unwrap());
    let (body, code) = curl(&["--cert", crt, "--key", key, &internal]);
    assert_eq!(code, "200");
    assert!(body.contains("key-a"), "{body:?}");
    drop(nodes);
}

/// A node joins a cluster with tokens, a secret and TLS through an
/// `https` seed: it asks the seed as a peer does (over TLS, with its node
/// certificate and the secret), an admin adds it, and it serves what it
/// copied.
#[test]
fn join_through_a_protected_seed() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens(dir.path());
    let secret = private(dir.path(), "secret", "a-cluster-secret-0123456789abcdef");
    let (proxies, urls) = https_proxies(4);
    let protected = |me: &str| {
        let mut args = vec![
            "--self".to_string(),
            me.to_owned(),
            "--auth-token-file".into(),
            tokens.display().to_string(),
            "--cluster-secret-file".into(),
            secret.display().to_string(),
        ];
        args.extend(tls_args());
        args
    };
    let start = |mut args: Vec<String>, extra: &[&str], i: usize| {
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let node = Node::start(&args);
        proxies[i].set_target(node.addr());
        node
    };
    let cluster = urls[..3].join(",");
    let members: Vec<Node> = (0..3)
        .map(|i| start(protected(&urls[i]), &["--cluster", &cluster], i))
        .collect();
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let keys: Vec<String> = (0..20).map(|i| format!("joined-{i}")).collect();
    for k in &keys {
        let url = format!("{}/v0/entity?id={k}&ack=3", urls[0]);
        let (_, code) = curl(&["-X", "PUT", "--data", k, "-H", &bearer(WRITER), &url]);
        assert_eq!(code, "201", "PUT {k}");
    }

    let joiner = start(protected(&urls[3]), &["--join", &urls[0]], 3);
    let status_url = format!("{}/v0/status", urls[3]);
    let (doc, code) = curl(&[&status_url]);
    assert_eq!(code, "200", "{doc}");
    assert!(doc.contains("\"joining\":true"), "{doc}");
    let add = format!("{}/v0/layout?version=2&add={}", urls[1], urls[3]);
    let (body, code) = curl(&["-X", "POST", "-H", &bearer(ADMIN), &add]);
    assert_eq!(code, "200", "{body}");
    let started = std::time::Instant::now();
    for url in &urls {
        let layout = format!("{url}/v0/layout");
        loop {
            let (doc, _) = curl(&["-H", &bearer(READER), &layout]);
            if doc.starts_with("{\"version\":2,") && doc.contains("\"settled\":true") {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "{url} not settled at version 2: {doc}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // The joiner holds its copies: one reply (ack=1 of its own replica
    // set, which holds it for every key at R = 3 of 4) is enough only
    // when the copy reached it; read through it with a quorum too.
    for k in &keys {
        let url = format!("{}/v0/entity?id={k}&ack=3&from=3", urls[3]);
        let (body, code) = curl(&["-H", &bearer(READER), &url]);
        assert_eq!((code.as_str(), body.as_str()), ("200", k.as_str()), "{k}");
    }
    drop((members, joiner));
}
