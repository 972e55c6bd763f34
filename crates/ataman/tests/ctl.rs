//! Black-box tests of `ataman ctl` against a real node: output and exit
//! codes as docs/CTL.md describes them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use support::Node;

/// Runs `ataman ctl ARGS --url URL` with `stdin` as its input.
fn ctl(node_url: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .arg("ctl")
        .args(args)
        .args(["--url", node_url, "--timeout-ms", "10000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ataman ctl");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("ctl exited by a signal")
}

/// put/get/delete/range/status print what docs/CTL.md says and exit 0,
/// 404 exits 1, a refused request exits 2, no node exits 3.
#[test]
fn ctl_commands_and_exit_codes() {
    let node = Node::start(&[]);
    let url = format!("http://{}", node.addr());

    let status = ctl(&url, &["status"], b"");
    assert_eq!((code(&status), status.stdout.as_slice()), (0, &b"ok\n"[..]));

    assert_eq!(code(&ctl(&url, &["put", "a/b+c", "value one"], b"")), 0);
    let get = ctl(&url, &["get", "a/b+c"], b"");
    assert_eq!((code(&get), get.stdout.as_slice()), (0, &b"value one"[..]));
    // The key was percent-encoded: the node stored "a/b+c" exactly.
    assert_eq!(node.get(b"a/b+c").body, b"value one");

    let binary: Vec<u8> = (0..=255u8).collect();
    assert_eq!(code(&ctl(&url, &["put", "bin", "-"], &binary)), 0);
    assert_eq!(ctl(&url, &["get", "bin"], b"").stdout, binary);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("value");
    std::fs::write(&file, b"from a file").unwrap();
    let put_file = ctl(&url, &["put", "f", "--file", file.to_str().unwrap()], b"");
    assert_eq!(code(&put_file), 0, "{put_file:?}");
    assert_eq!(node.get(b"f").body, b"from a file");

    let range = ctl(&url, &["range", "--start", "a", "--end", "c"], b"");
    assert_eq!(code(&range), 0);
    let mut expected = b"a/b+c\tvalue one\nbin\t".to_vec();
    expected.extend_from_slice(&binary);
    expected.push(b'\n');
    assert_eq!(range.stdout, expected);

    assert_eq!(code(&ctl(&url, &["delete", "a/b+c"], b"")), 0);
    let missing = ctl(&url, &["get", "a/b+c"], b"");
    assert_eq!(code(&missing), 1, "{missing:?}");
    assert!(missing.stdout.is_empty());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));

    let refused = ctl(&url, &["get", "k", "--ack", "2", "--from", "1"], b"");
    assert_eq!(code(&refused), 2, "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("400"));
    assert_eq!(
        code(&ctl(&url, &["get", "f", "--ack", "1", "--from", "1"], b"")),
        0
    );

    // A port nobody listens on: connection error, exit 3.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let unreachable = ctl(&dead, &["status"], b"");
    assert_eq!(code(&unreachable), 3, "{unreachable:?}");
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("cannot connect"));
}
