//! Black-box tests of docs/API.md "Requests" and "Errors": every status
//! code and body of the `/v0` API, against a real `ataman serve` process.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::http_client::url::target;
use support::{Node, assert_error, entity};

/// PUT answers 201 with an empty body, GET returns the exact bytes as
/// octet-stream, DELETE answers 202, and a GET after it is 404.
#[test]
fn put_get_delete_get() {
    let node = Node::start(&[]);
    let put = node.put(b"k1", b"value one");
    assert_eq!(put.status, 201, "PUT: {put:?}");
    assert!(put.body.is_empty(), "PUT body not empty: {:?}", put.body);

    let get = node.get(b"k1");
    assert_eq!(get.status, 200, "GET: {get:?}");
    assert_eq!(get.body, b"value one");
    assert_eq!(
        get.header_str("content-type").as_deref(),
        Some("application/octet-stream")
    );

    let overwrite = node.put(b"k1", b"value two");
    assert_eq!(overwrite.status, 201);
    assert_eq!(node.get(b"k1").body, b"value two");

    let delete = node.delete(b"k1");
    assert_eq!(delete.status, 202, "DELETE: {delete:?}");
    assert_error(&node.get(b"k1"), 404, "GET after DELETE");
}

/// A GET of a key that was never written is 404.
#[test]
fn get_absent_is_404() {
    let node = Node::start(&[]);
    assert_error(&node.get(b"never-written"), 404, "GET absent key");
}

/// DELETE of a key that never existed is 202 and leaves it absent.
#[test]
fn delete_never_existing_is_202() {
    let node = Node::start(&[]);
    assert_eq!(node.delete(b"ghost").status, 202);
    assert_error(&node.get(b"ghost"), 404, "GET after DELETE of a ghost");
}

/// An empty body stores an empty value: 201, then GET is 200 with an empty body.
#[test]
fn empty_value_is_stored() {
    let node = Node::start(&[]);
    assert_eq!(node.put(b"empty", b"").status, 201);
    let get = node.get(b"empty");
    assert_eq!(get.status, 200, "GET of an empty value: {get:?}");
    assert!(get.body.is_empty());
    assert_eq!(get.header_str("content-length").as_deref(), Some("0"));
}

/// Missing or empty `id` is 400 for every method of `/v0/entity`.
#[test]
fn missing_or_empty_id_is_400() {
    let node = Node::start(&[]);
    for method in ["GET", "PUT", "DELETE"] {
        let body = (method == "PUT").then_some(&b"v"[..]);
        for target in [
            "/v0/entity",
            "/v0/entity?",
            "/v0/entity?id=",
            "/v0/entity?other=1",
            "/v0/entity?ack=1&from=1",
        ] {
            // A 400 may close the connection; use a new one each time.
            let response = node.conn().request(method, target, &[], body);
            assert_error(&response, 400, &format!("{method} {target}"));
        }
    }
}

/// Unknown paths are 400.
#[test]
fn unknown_path_is_400() {
    let node = Node::start(&[]);
    for target in [
        "/",
        "/v0",
        "/v0/",
        "/v0/nope",
        "/v1/entity?id=a",
        "/v0/entity/a",
        "/v0/entityx?id=a",
        "/metricsx",
    ] {
        let response = node.conn().request("GET", target, &[], None);
        assert_error(&response, 400, &format!("GET {target}"));
    }
}

/// Other methods on `/v0/entity` are 405 with `Allow: GET, HEAD, PUT, DELETE`.
#[test]
fn other_method_is_405_with_allow() {
    let node = Node::start(&[]);
    for method in ["POST", "PATCH", "OPTIONS"] {
        let response = node.conn().request(method, &entity(b"a"), &[], Some(b""));
        assert_error(&response, 405, &format!("{method} /v0/entity"));
        let allow = response.header_str("allow").unwrap_or_default();
        let mut methods: Vec<String> = allow.split(',').map(|m| m.trim().to_string()).collect();
        methods.sort();
        assert_eq!(
            methods,
            ["DELETE", "GET", "HEAD", "PUT"],
            "{method}: Allow header was {allow:?}"
        );
    }
    assert_error(&node.get(b"a"), 404, "a refused POST stored a value");
}

/// `ack=1&from=1` (and absent) are accepted on every entity method.
#[test]
fn ack_from_one_of_one_is_accepted() {
    let node = Node::start(&[]);
    let with = |key: &[u8]| format!("{}&ack=1&from=1", entity(key));
    let mut conn = node.conn();
    assert_eq!(
        conn.request("PUT", &with(b"k"), &[], Some(b"v")).status,
        201
    );
    let get = conn.request("GET", &with(b"k"), &[], None);
    assert_eq!((get.status, get.body.as_slice()), (200, &b"v"[..]));
    assert_eq!(conn.request("DELETE", &with(b"k"), &[], None).status, 202);
    assert_error(
        &conn.request("GET", &with(b"k"), &[], None),
        404,
        "GET 1/1 after DELETE",
    );
}

/// `ack`/`from` outside `1 <= ack <= from <= 1` or not numbers are 400,
/// and a refused PUT stores nothing.
#[test]
fn bad_ack_from_is_400() {
    let node = Node::start(&[]);
    for query in [
        "ack=0&from=1",
        "ack=2&from=1",
        "ack=1&from=2",
        "ack=abc&from=1",
        "ack=1&from=abc",
        "ack=-1&from=1",
        "ack=&from=1",
    ] {
        for method in ["GET", "PUT", "DELETE"] {
            let target = format!("{}&{query}", entity(b"acked"));
            let body = (method == "PUT").then_some(&b"v"[..]);
            let response = node.conn().request(method, &target, &[], body);
            assert_error(&response, 400, &format!("{method} {target}"));
        }
    }
    assert_error(&node.get(b"acked"), 404, "a refused PUT stored a value");
}

/// Range: start inclusive, end exclusive, tombstones skipped, one chunk
/// `key\nvalue` per live entry in key order, `Transfer-Encoding: chunked`.
#[test]
fn entities_range_semantics() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    for (key, value) in [
        (&b"a"[..], &b"va"[..]),
        (b"b", b"vb\nwith newline"),
        (b"c", b"vc"),
        (b"d", b""),
        (b"e", b"ve"),
    ] {
        assert_eq!(conn.put(key, value).status, 201);
    }
    assert_eq!(conn.delete(b"c").status, 202);
    let range = |start: &[u8], end: Option<&[u8]>| {
        let mut query = vec![("start", start)];
        if let Some(end) = end {
            query.push(("end", end));
        }
        let response = node
            .conn()
            .request("GET", &target("/v0/entities", &query), &[], None);
        assert_eq!(response.status, 200, "range: {response:?}");
        assert_eq!(
            response
                .header_str("transfer-encoding")
                .map(|v| v.to_ascii_lowercase())
                .as_deref(),
            Some("chunked")
        );
        response.chunks.expect("chunked body")
    };
    let chunk = |k: &str, v: &str| format!("{k}\n{v}").into_bytes();
    assert_eq!(
        range(b"b", Some(b"e")),
        vec![chunk("b", "vb\nwith newline"), chunk("d", "")],
        "start inclusive, end exclusive, tombstone c skipped"
    );
    assert_eq!(
        range(b"a", None),
        vec![
            chunk("a", "va"),
            chunk("b", "vb\nwith newline"),
            chunk("d", ""),
            chunk("e", "ve")
        ]
    );
    assert_eq!(range(b"bb", Some(b"d")), Vec::<Vec<u8>>::new());
    assert_eq!(range(b"f", None), Vec::<Vec<u8>>::new());
    assert_eq!(range(b"c", Some(b"c")), Vec::<Vec<u8>>::new());
    assert_eq!(range(b"e", Some(b"ea")), vec![chunk("e", "ve")]);
}

/// Range parameters: missing or blank `start`, or blank `end`, are 400.
#[test]
fn entities_bad_parameters_are_400() {
    let node = Node::start(&[]);
    for target in [
        "/v0/entities",
        "/v0/entities?",
        "/v0/entities?end=b",
        "/v0/entities?start=",
        "/v0/entities?start=&end=b",
        "/v0/entities?start=a&end=",
    ] {
        let response = node.conn().request("GET", target, &[], None);
        assert_error(&response, 400, &format!("GET {target}"));
    }
}

/// `GET /v0/status` is 200 `ok`.
#[test]
fn status_is_200_ok() {
    let node = Node::start(&[]);
    let status = node.get_target("/v0/status");
    assert_eq!(status.status, 200);
    let body = String::from_utf8_lossy(&status.body);
    assert_eq!(body.trim_end_matches('\n'), "ok", "status body {body:?}");
}

/// `GET /metrics` is 200 Prometheus text with at least one `# TYPE` line.
#[test]
fn metrics_are_prometheus_text() {
    let node = Node::start(&[]);
    assert_eq!(node.put(b"m", b"1").status, 201);
    let metrics = node.get_target("/metrics");
    assert_eq!(metrics.status, 200);
    let content_type = metrics.header_str("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("text/plain"),
        "metrics Content-Type {content_type:?}"
    );
    let text = String::from_utf8(metrics.body).expect("metrics are UTF-8");
    assert!(
        text.lines().any(|l| l.starts_with("# TYPE ")),
        "no `# TYPE` line in:\n{text}"
    );
    // Every non-comment line is `name[{labels}] value`.
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let value = line.rsplit(' ').next().unwrap_or("");
        assert!(
            value.parse::<f64>().is_ok() || ["NaN", "+Inf", "-Inf"].contains(&value),
            "metrics line without a number: {line:?}"
        );
    }
}

/// A full disk (injected through the `--fault-control` test hook: the
/// engine's writes fail with ENOSPC) answers 507 naming it, every later
/// write too (the engine is read-only until a restart), reads go on, and
/// a restart with space again takes writes.
#[test]
fn disk_full_is_507() {
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("fault-control");
    std::fs::write(&control, "disk_full=0\n").unwrap();
    let control_arg = control.to_str().unwrap().to_owned();
    let mut node = Node::start(&["--fault-control", &control_arg]);
    assert_eq!(node.put(b"before", b"v").status, 201);
    std::fs::write(&control, "disk_full=1\n").unwrap();
    // The hook polls the file every 75 ms; bounded wait for the first 507.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let full = loop {
        let r = node.put(b"during", b"v");
        if r.status != 201 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    };
    assert_error(&full, 507, "a write on a full disk");
    let text = String::from_utf8_lossy(&full.body);
    assert!(
        text.contains("disk full") && text.contains("No space left on device"),
        "{text}"
    );
    std::fs::write(&control, "disk_full=0\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Sticky until a restart; reads still work.
    assert_error(
        &node.put(b"after", b"v"),
        507,
        "a write after the disk was full",
    );
    assert_eq!(node.get(b"before").status, 200);
    let _ = node.terminate();
    node.restart();
    assert_eq!(node.put(b"after", b"v").status, 201);
    assert_eq!(node.get(b"before").body, b"v");
}
