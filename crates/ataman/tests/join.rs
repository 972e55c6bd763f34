//! `ataman serve --join SEED_URL` on real processes (docs/API.md,
//! "Membership"): the joining node learns the seed's layout, stores it,
//! says on `GET /v0/status` that it is joining and not a member, and
//! answers client requests 503 naming the members (over RESP: `GET` and
//! `SCAN` as errors).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::io::{BufRead, Write};
use support::{Conn, Node};

fn get(node: &Node, path: &str) -> (u16, String) {
    let r = Conn::open(node.addr()).request("GET", path, &[], None);
    (r.status, String::from_utf8(r.body).unwrap())
}

/// A seed with a stored three-node layout (its peers on ports nothing
/// listens on); a node joins it and waits to be added.
#[test]
fn a_joining_node_learns_the_layout_and_serves_no_client() {
    // The seed names itself :1 (any URL: it listens elsewhere, like
    // tests/layout.rs), its peers on ports nothing listens on.
    let cluster = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3";
    let seed = Node::start(&["--cluster", cluster, "--self", "http://127.0.0.1:1"]);
    let seed_url = format!("http://{}", seed.addr());
    let (status, seed_layout) = get(&seed, "/v0/layout");
    assert_eq!(status, 200, "{seed_layout}");
    assert!(seed_layout.contains("\"member\":true"), "{seed_layout}");

    let me = "http://127.0.0.1:4";
    let resp = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut joiner =
        Node::start_logged(&["--self", me, "--join", &seed_url, "--resp-listen", &resp]);
    let (status, doc) = get(&joiner, "/v0/status");
    assert_eq!(status, 200, "{doc}");
    assert!(doc.contains("\"member\":false"), "{doc}");
    assert!(doc.contains("\"joining\":true"), "{doc}");
    assert!(doc.contains("\"safe_to_stop\":true"), "{doc}");
    let (status, layout) = get(&joiner, "/v0/layout");
    assert_eq!(status, 200, "{layout}");
    assert!(layout.starts_with("{\"version\":1,"), "{layout}");
    let nodes = seed_layout.split("\"replication_factor\"").next().unwrap();
    assert!(
        layout.starts_with(nodes),
        "the seed's layout: {layout} vs {seed_layout}"
    );
    assert!(layout.contains("\"joining\":true"), "{layout}");
    assert!(joiner.data_dir().join("LAYOUT").exists());
    // Waiting to be added is what joining is: logged at info (a joining
    // node once logged WARN "not a member of the stored layout").
    let log = joiner.log();
    assert!(
        log.contains("serving no client request until it is added"),
        "{log}"
    );
    assert!(
        !log.contains(" WARN "),
        "normal operation logged a warning:\n{log}"
    );

    let r = Conn::open(joiner.addr()).put(b"k", b"v");
    assert_eq!(r.status, 503);
    let why = String::from_utf8(r.body).unwrap();
    assert!(
        why.contains("joining") && why.contains("http://127.0.0.1:2"),
        "{why}"
    );
    let r = Conn::open(joiner.addr()).get(b"k");
    assert_eq!(r.status, 503);
    // RESP: the same refusal, as an error reply.
    let mut redis = std::net::TcpStream::connect(&resp).unwrap();
    redis
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut replies = std::io::BufReader::new(redis.try_clone().unwrap());
    redis.write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap();
    let mut line = String::new();
    replies.read_line(&mut line).unwrap();
    assert!(line.starts_with('-') && line.contains("joining"), "{line}");
    // SCAN too: a joining node's own copy is no page of the cluster's keys
    // (regression: SCAN bypassed the membership gate).
    redis.write_all(b"*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n").unwrap();
    line.clear();
    replies.read_line(&mut line).unwrap();
    assert!(line.starts_with('-') && line.contains("joining"), "{line}");
    // A restart keeps waiting, with the stored layout (the seed asked again).
    joiner.terminate();
    joiner.restart();
    let (_, doc) = get(&joiner, "/v0/status");
    assert!(doc.contains("\"joining\":true"), "{doc}");
    // The seed is a member and serves as before (its peers are down:
    // a write needing one answer is stored).
    let (status, ok) = get(&seed, "/v0/status");
    assert_eq!((status, ok.as_str()), (200, "ok\n"));
}

/// A node whose stored layout no longer names it (it was removed, then
/// restarted) starts, says it is removed and safe to stop, and answers
/// client requests 503 naming the members.
#[test]
fn a_removed_node_says_so_and_serves_no_client() {
    use ataman_node::cluster::{layout::Layout, layout_file};
    let cluster = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3";
    let mut node = Node::stopped(
        &["--cluster", cluster, "--self", "http://127.0.0.1:1"],
        None,
    );
    std::fs::create_dir_all(node.data_dir()).unwrap();
    let later = Layout::new(
        2,
        vec!["http://127.0.0.1:2".into(), "http://127.0.0.1:3".into()],
        2,
    )
    .unwrap();
    layout_file::store(&node.data_dir(), &later).unwrap();
    node.restart();
    let (status, doc) = get(&node, "/v0/status");
    assert_eq!(status, 200, "{doc}");
    for field in [
        "\"member\":false",
        "\"removed\":true",
        "\"safe_to_stop\":true",
    ] {
        assert!(doc.contains(field), "{field}: {doc}");
    }
    let (_, layout) = get(&node, "/v0/layout");
    assert!(layout.starts_with("{\"version\":2,"), "{layout}");
    assert!(layout.contains("\"removed\":true"), "{layout}");
    let r = Conn::open(node.addr()).get(b"k");
    assert_eq!(r.status, 503);
    let why = String::from_utf8(r.body).unwrap();
    assert!(
        why.contains("removed") && why.contains("http://127.0.0.1:2, http://127.0.0.1:3"),
        "{why}"
    );
}

/// A node asking a seed with a cluster secret, without it or with
/// another one, learns no layout: it exits at once naming the refusal
/// (a seed over TLS: `tests/security.rs`).
#[test]
fn a_joiner_without_the_secret_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let private = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    };
    let secret = private("secret", "a-cluster-secret-0123456789abcdef");
    let wrong = private("wrong", "another-secret-0123456789abcdef00");
    let cluster = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3";
    let secret_arg = secret.display().to_string();
    let seed = Node::start(&[
        "--cluster",
        cluster,
        "--self",
        "http://127.0.0.1:1",
        "--cluster-secret-file",
        &secret_arg,
    ]);
    let seed_url = format!("http://{}", seed.addr());
    let wrong_arg = wrong.display().to_string();
    let me = "http://127.0.0.1:4";
    let without: &[&str] = &["--self", me, "--join", &seed_url];
    let other: &[&str] = &[
        "--self",
        me,
        "--join",
        &seed_url,
        "--cluster-secret-file",
        &wrong_arg,
    ];
    for args in [without, other] {
        let (status, stderr) = Node::stopped(args, None).start_expecting_exit();
        assert!(!status.success(), "{args:?}");
        assert!(
            stderr.contains("cannot learn the cluster's layout") && stderr.contains(" 401"),
            "{args:?}: {stderr}"
        );
    }
    // The same node with the secret learns it and waits to be added.
    let with: Vec<&str> = [without, &["--cluster-secret-file", &secret_arg]].concat();
    let joiner = Node::start(&with);
    let r = Conn::open(joiner.addr()).request("GET", "/v0/status", &[], None);
    let doc = String::from_utf8(r.body).unwrap();
    assert!(doc.contains("\"joining\":true"), "{doc}");
}
