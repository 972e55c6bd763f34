//! Black-box tests of the limits in docs/API.md ("Starting a node",
//! "Errors"): header, key and value sizes, malformed input, idle and
//! request timeouts, the connection limit. After each abuse the node must
//! still serve a new connection.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::http_client::url::target;
use std::time::{Duration, Instant};
use support::{Conn, Node, ResponseError, assert_error, entity, request};

/// How long a test waits for the server to close a connection it must close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// Default `--key-bytes-max`.
const KEY_BYTES_MAX: usize = 4096;
/// Default `--header-bytes-max`.
const HEADER_BYTES_MAX: usize = 16384;

/// Panics unless the node answers `GET /v0/status` 200 on a new connection.
fn assert_still_serving(node: &Node, after: &str) {
    let status = node.get_target("/v0/status");
    assert_eq!(status.status, 200, "node not serving after {after}");
}

/// A GET whose request line + headers total `head_bytes` (padded with one header).
fn padded_get(head_bytes: usize) -> Vec<u8> {
    let start = b"GET /v0/status HTTP/1.1\r\nHost: ataman\r\nX-Pad: ";
    let end = b"\r\n\r\n";
    let pad = head_bytes - start.len() - end.len();
    [&start[..], &vec![b'p'; pad], end].concat()
}

/// Request line + headers under 16 KiB are served; over 16 KiB is 431 and
/// the connection is closed.
#[test]
fn header_over_limit_is_431() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    conn.send(&padded_get(HEADER_BYTES_MAX - 100)).unwrap();
    assert_eq!(
        conn.read().unwrap().status,
        200,
        "a head under the limit was refused"
    );

    let mut conn = node.conn();
    conn.send(&padded_get(HEADER_BYTES_MAX + 1024)).unwrap();
    let answer = conn.read().expect("an answer to an oversized head");
    assert_error(&answer, 431, "head over 16 KiB");
    assert!(
        conn.closed_within(CLOSE_WAIT),
        "connection left open after 431"
    );
    assert_still_serving(&node, "a 431");
}

/// A head of 64 header lines (`HEADERS_MAX`, docs/API.md "Errors") is
/// served; 65, however short, is 431 naming the bound, and the
/// connection closes.
#[test]
fn more_than_64_header_lines_is_431() {
    let node = Node::start(&[]);
    let head = |lines: usize| {
        let mut bytes = b"GET /v0/status HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 1..lines {
            bytes.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
        bytes
    };
    let mut conn = node.conn();
    conn.send(&head(64)).unwrap();
    assert_eq!(conn.read().unwrap().status, 200, "64 lines were refused");
    let mut conn = node.conn();
    conn.send(&head(65)).unwrap();
    let answer = conn.read().expect("an answer to 65 header lines");
    assert_error(&answer, 431, "65 header lines");
    let text = String::from_utf8_lossy(&answer.body);
    assert!(text.contains("more than 64 headers"), "{text}");
    assert!(
        conn.closed_within(CLOSE_WAIT),
        "connection left open after 431"
    );
    assert_still_serving(&node, "a 431 for 65 header lines");
}

/// Keys of exactly the limit (decoded) are served; one byte more is 414 for
/// every method and for range bounds.
#[test]
fn key_over_limit_is_414() {
    let node = Node::start(&[]);
    let at_limit = vec![b'k'; KEY_BYTES_MAX];
    assert_eq!(
        node.put(&at_limit, b"v").status,
        201,
        "key at the limit refused"
    );
    assert_eq!(node.get(&at_limit).body, b"v");
    // The limit applies after decoding: 4096 bytes sent as 12288 characters.
    let encoded_at_limit = vec![0xffu8; KEY_BYTES_MAX];
    assert_eq!(
        node.put(&encoded_at_limit, b"w").status,
        201,
        "encoded key at the limit refused"
    );
    assert_eq!(node.get(&encoded_at_limit).body, b"w");

    let over = vec![b'k'; KEY_BYTES_MAX + 1];
    assert_error(&node.put(&over, b"v"), 414, "PUT key over the limit");
    assert_error(&node.get(&over), 414, "GET key over the limit");
    assert_error(&node.delete(&over), 414, "DELETE key over the limit");
    let range_start = target("/v0/entities", &[("start", &over)]);
    assert_error(
        &node.get_target(&range_start),
        414,
        "range start over the limit",
    );
    let range_end = target("/v0/entities", &[("start", b"a"), ("end", &over)]);
    assert_error(
        &node.get_target(&range_end),
        414,
        "range end over the limit",
    );
    assert_still_serving(&node, "414s");
}

/// With `--value-bytes-max 1024`: 1024 bytes are stored, 1025 and 2048
/// are 413 with the connection closed, and nothing is stored.
#[test]
fn value_over_limit_is_413() {
    let node = Node::start(&["--value-bytes-max", "1024"]);
    assert_eq!(
        node.put(b"v", &[b'a'; 1024]).status,
        201,
        "value at the limit refused"
    );
    for size in [1025usize, 2048] {
        let mut conn = node.conn();
        conn.send(&request("PUT", &entity(b"v"), &[], Some(&vec![b'b'; size])))
            .unwrap();
        let answer = conn.read().expect("an answer to an oversized body");
        assert_error(&answer, 413, &format!("PUT of {size} bytes"));
        assert!(
            conn.closed_within(CLOSE_WAIT),
            "connection left open after 413"
        );
    }
    assert_eq!(
        node.get(b"v").body,
        vec![b'a'; 1024],
        "a refused PUT changed the value"
    );
}

/// Malformed requests get a 400 (the head errors also close the connection)
/// and the node serves new connections afterwards.
#[test]
fn malformed_requests_are_400_and_node_survives() {
    let node = Node::start(&[]);
    let head_errors: [(&str, &[u8]); 5] = [
        ("garbage bytes", b"\x00\x01\x02\xff garbage\r\n\r\n"),
        ("no HTTP version", b"GET /v0/status\r\n\r\n"),
        (
            "header without a colon",
            b"GET /v0/status HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n",
        ),
        (
            "bad Content-Length",
            b"PUT /v0/entity?id=a HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        ),
        (
            "two Content-Lengths",
            b"PUT /v0/entity?id=a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        ),
    ];
    for (what, bytes) in head_errors {
        let mut conn = node.conn();
        conn.send(bytes).unwrap();
        let answer = conn
            .read()
            .unwrap_or_else(|e| panic!("{what}: no answer ({e})"));
        assert_error(&answer, 400, what);
        assert!(
            conn.closed_within(CLOSE_WAIT),
            "{what}: connection left open"
        );
        assert_still_serving(&node, what);
    }
    for (what, target) in [
        ("bad escape %G1", "/v0/entity?id=a%G1"),
        ("short escape %4", "/v0/entity?id=a%4"),
        ("short escape %4 before &", "/v0/entity?id=%4&ack=1"),
        ("lone %", "/v0/entity?id=%"),
        ("bad escape in start", "/v0/entities?start=%zz"),
    ] {
        let answer = node.conn().request("GET", target, &[], None);
        assert_error(&answer, 400, what);
        assert_still_serving(&node, what);
    }
    assert_eq!(node.get(b"a").status, 404, "a malformed PUT stored a value");
}

/// A request cut off by the client closing its side (in the head or in
/// the body): the server notices the end of input and closes the
/// connection at once (with or without a 400), rather than holding it
/// until `--request-timeout-ms` (10 s by default); it keeps serving.
#[test]
fn truncated_request_then_close() {
    let node = Node::start(&[]);
    for partial in [
        &b"GET /v0/sta"[..],
        b"GET /v0/status HTTP/1.1\r\nHost: a",
        b"PUT /v0/entity?id=cut HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
    ] {
        let what = String::from_utf8_lossy(partial);
        let mut conn = node.conn();
        conn.set_read_timeout(CLOSE_WAIT);
        conn.send(partial).unwrap();
        conn.shutdown_write();
        match conn.read() {
            Ok(answer) => {
                assert_error(&answer, 400, &format!("truncated {what:?}"));
                assert!(
                    conn.closed_within(CLOSE_WAIT),
                    "{what:?}: left open after 400"
                );
            }
            Err(ResponseError::Closed) => {}
            Err(ResponseError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => panic!(
                "{what:?} then the client's close: no close and no 400 within {CLOSE_WAIT:?} ({e})"
            ),
        }
        assert_still_serving(&node, "a truncated request");
    }
    assert_eq!(
        node.get(b"cut").status,
        404,
        "a truncated PUT stored a value"
    );
}

/// A PUT with neither `Content-Length` nor chunked has an empty body:
/// 201, and the stored value is empty.
#[test]
fn put_without_content_length_stores_empty_value() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    conn.send(format!("PUT {} HTTP/1.1\r\nHost: a\r\n\r\n", entity(b"nolen")).as_bytes())
        .unwrap();
    assert_eq!(conn.read().unwrap().status, 201);
    let get = node.get(b"nolen");
    assert_eq!((get.status, get.body), (200, Vec::new()));
}

/// With `--idle-timeout-ms 300` an idle keep-alive connection is closed by
/// the server (waiting at most 5 s), and new connections still work.
#[test]
fn idle_connection_is_closed() {
    let node = Node::start(&["--idle-timeout-ms", "300"]);
    let mut conn = node.conn();
    assert_eq!(conn.request("GET", "/v0/status", &[], None).status, 200);
    assert!(conn.closed_within(CLOSE_WAIT), "idle connection still open");
    assert_still_serving(&node, "an idle close");
}

/// With `--request-timeout-ms 300` a head that never completes is 408 and
/// the connection is closed.
#[test]
fn incomplete_request_is_408() {
    let node = Node::start(&["--request-timeout-ms", "300"]);
    let mut conn = node.conn();
    conn.send(b"GET /v0/status HTTP/1.1\r\nHost: a\r\n")
        .unwrap();
    let answer = conn.read().expect("an answer to a stalled head");
    assert_error(&answer, 408, "stalled head");
    assert!(
        conn.closed_within(CLOSE_WAIT),
        "connection left open after 408"
    );
    assert_still_serving(&node, "a 408");
}

/// Opens a connection the node serves, retrying while earlier connections
/// may still be counted (closes are noticed asynchronously); bounded 5 s.
fn serving_conn(node: &Node) -> Conn {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut conn = node.conn();
        let ok = conn.send(&request("GET", "/v0/status", &[], None)).is_ok()
            && conn.read().is_ok_and(|r| r.status == 200);
        if ok {
            return conn;
        }
        assert!(
            Instant::now() < deadline,
            "no connection was served within 5 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With `--connections-max 4`: a 5th connection is closed at once while
/// the 4 stay usable; after closing them new connections are served.
#[test]
fn connections_over_limit_are_closed() {
    let node = Node::start(&["--connections-max", "4"]);
    let mut open: Vec<Conn> = (0..4).map(|_| serving_conn(&node)).collect();
    let mut fifth = node.conn();
    assert!(
        fifth.closed_within(CLOSE_WAIT),
        "a 5th connection was kept open"
    );
    for (i, conn) in open.iter_mut().enumerate() {
        let status = conn.request("GET", "/v0/status", &[], None);
        assert_eq!(status.status, 200, "connection {i} of 4 stopped working");
    }
    drop(open);
    let again: Vec<Conn> = (0..4).map(|_| serving_conn(&node)).collect();
    assert_eq!(again.len(), 4);
}
