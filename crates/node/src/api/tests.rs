//! The router's unit tests (`super`).

use super::*;
use crate::http::request::{Limits, Parsed, parse_head};

const CFG: RouteConfig = RouteConfig {
    key_bytes_max: 8,
    cluster_size: 1,
    from_default: 1,
};

fn act(req: &str) -> Action {
    let limits = Limits {
        header_bytes_max: 4096,
        body_bytes_max: 1 << 20,
    };
    match parse_head(req.as_bytes(), limits) {
        Parsed::Head(h) => route(&h, CFG).1,
        other => panic!("{other:?}"),
    }
}

fn status(req: &str) -> Status {
    match act(req) {
        Action::Error(e) => e.status,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// `/v0/slowlog`: GET reads (all, or `limit`), POST changes (one
/// reset, or a threshold and/or a capacity within its bound); the
/// rest is 400 or 405.
#[test]
fn slowlog_routes() {
    use crate::slowlog::{LEN_MAX, Op};
    let get = |q: &str| act(&format!("GET /v0/slowlog{q} HTTP/1.1\r\n\r\n"));
    let post = |q: &str| act(&format!("POST /v0/slowlog{q} HTTP/1.1\r\n\r\n"));
    assert_eq!(get(""), Action::Slowlog(Op::Get { count: usize::MAX }));
    assert_eq!(get("?limit=3"), Action::Slowlog(Op::Get { count: 3 }));
    assert_eq!(post("?reset=1"), Action::Slowlog(Op::Reset));
    assert_eq!(
        post("?threshold_us=-1"),
        Action::Slowlog(Op::Set {
            threshold_us: Some(-1),
            len_max: None
        })
    );
    assert_eq!(
        post(&format!("?max_len={LEN_MAX}&threshold_us=0")),
        Action::Slowlog(Op::Set {
            threshold_us: Some(0),
            len_max: Some(LEN_MAX)
        })
    );
    for q in [
        "",
        "?reset=2",
        "?reset=1&max_len=3",
        "?threshold_us=x",
        "?max_len=-1",
        "?max_len=10001",
    ] {
        let a = post(q);
        assert!(
            matches!(&a, Action::Error(e) if e.status == Status::BadRequest),
            "{q}: {a:?}"
        );
    }
    assert!(matches!(get("?limit=x"), Action::Error(_)));
    assert_eq!(
        status("DELETE /v0/slowlog HTTP/1.1\r\n\r\n"),
        Status::MethodNotAllowed
    );
    assert_eq!(allow_for(b"/v0/slowlog"), "GET, HEAD, POST");
}

/// `GET /v0/slowlog?cluster=1` asks every member for at most `limit`
/// entries (by default 128, at most 1,000); a peer's internal ask carries
/// the same bound; out of it is 400.
#[test]
fn cluster_slowlog_routes() {
    use crate::slowlog_cluster::{CLUSTER_LIMIT_DEFAULT, CLUSTER_LIMIT_MAX};
    let get = |q: &str| act(&format!("GET /v0/slowlog{q} HTTP/1.1\r\n\r\n"));
    let internal = |q: &str| act(&format!("GET /v0/internal/slowlog{q} HTTP/1.1\r\n\r\n"));
    let default = CLUSTER_LIMIT_DEFAULT;
    assert_eq!(get("?cluster=1"), Action::ClusterSlowlog { limit: default });
    assert_eq!(
        get("?cluster=1&limit=20"),
        Action::ClusterSlowlog { limit: 20 }
    );
    assert_eq!(
        get("?cluster=0&limit=2"),
        Action::Slowlog(crate::slowlog::Op::Get { count: 2 })
    );
    assert_eq!(internal("?limit=7"), Action::InternalSlowlog { limit: 7 });
    assert_eq!(internal(""), Action::InternalSlowlog { limit: default });
    let over = format!("?limit={}", CLUSTER_LIMIT_MAX + 1);
    for a in [
        get("?cluster=2"),
        get("?cluster=1&limit=0"),
        get(&format!("?cluster=1&{}", &over[1..])),
        internal(&over),
        internal("?limit=x"),
    ] {
        assert!(
            matches!(&a, Action::Error(e) if e.status == Status::BadRequest),
            "{a:?}"
        );
    }
    assert_eq!(
        status("POST /v0/internal/slowlog HTTP/1.1\r\n\r\n"),
        Status::MethodNotAllowed
    );
}

/// `/v0/hotkeys`: GET, a limit within the counters, a cluster flag.
#[test]
fn hotkeys_routes() {
    let get = |q: &str| act(&format!("GET /v0/hotkeys{q} HTTP/1.1\r\n\r\n"));
    let hot = |limit, cluster| Action::HotKeys { limit, cluster };
    assert_eq!(get(""), hot(crate::hotkeys::report::KEYS_DEFAULT, false));
    assert_eq!(get("?limit=256&cluster=1"), hot(256, true));
    for q in ["?limit=0", "?limit=257", "?limit=x", "?cluster=2"] {
        assert!(matches!(get(q), Action::Error(e) if e.status == Status::BadRequest));
    }
    let post = status("POST /v0/hotkeys HTTP/1.1\r\n\r\n");
    assert_eq!(post, Status::MethodNotAllowed);
    let internal = act("GET /v0/internal/hotkeys HTTP/1.1\r\n\r\n");
    assert_eq!(internal, Action::InternalHotKeys);
}

/// `If-Match` and `If-None-Match` on `/v0/entity` become the action's
/// preconditions; a malformed one is a 400 naming the header (the
/// connection kept); other paths ignore them.
#[test]
fn conditional_headers_route() {
    use crate::http::conditional::{Preconditions, Tag, Tags};
    let put = act("PUT /v0/entity?id=k HTTP/1.1\r\nIf-Match: \"5\"\r\nIf-None-Match: *\r\n\r\n");
    let want = Preconditions {
        if_match: Some(Tags::List(vec![Tag {
            weak: false,
            version: Some(5),
        }])),
        if_none_match: Some(Tags::Any),
    };
    match put {
        Action::Put { preconditions, .. } => assert_eq!(preconditions.as_deref(), Some(&want)),
        other => panic!("{other:?}"),
    }
    let get = act("GET /v0/entity?id=k HTTP/1.1\r\nIf-None-Match: W/\"5\"\r\n\r\n");
    assert!(
        matches!(
            get,
            Action::Get {
                preconditions: Some(_),
                ..
            }
        ),
        "{get:?}"
    );
    let delete = act("DELETE /v0/entity?id=k HTTP/1.1\r\nIf-Match: *\r\n\r\n");
    assert!(
        matches!(
            delete,
            Action::Delete {
                preconditions: Some(_),
                ..
            }
        ),
        "{delete:?}"
    );
    for bad in ["If-Match: 5", "If-None-Match: ", "If-Match: \"5"] {
        let req = format!("PUT /v0/entity?id=k HTTP/1.1\r\n{bad}\r\n\r\n");
        match act(&req) {
            Action::Error(e) => {
                assert_eq!(e.status, Status::BadRequest, "{bad}");
                assert!(!e.close, "{bad}: the connection is kept");
                assert!(
                    e.message.starts_with("malformed If-"),
                    "{bad}: {}",
                    e.message
                );
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(
        act("GET /v0/status HTTP/1.1\r\nIf-Match: 5\r\n\r\n"),
        Action::Status
    );
}

/// Valid requests map to their actions.
#[test]
fn routes() {
    assert_eq!(
        act("GET /v0/entity?id=a%20b HTTP/1.1\r\n\r\n"),
        Action::Get {
            key: b"a b".to_vec(),
            ack: 1,
            from: 1,
            preconditions: None,
        }
    );
    assert_eq!(
        act("PUT /v0/entity?id=k&ack=1&from=1 HTTP/1.1\r\n\r\n"),
        Action::Put {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            ttl_ms: None,
            preconditions: None,
        }
    );
    assert_eq!(
        act("PUT /v0/entity?id=k&ttl_ms=500 HTTP/1.1\r\n\r\n"),
        Action::Put {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            ttl_ms: Some(500),
            preconditions: None,
        }
    );
    assert_eq!(
        act("DELETE /v0/entity?id=k HTTP/1.1\r\n\r\n"),
        Action::Delete {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            preconditions: None,
        }
    );
    assert_eq!(act("GET /v0/cluster HTTP/1.1\r\n\r\n"), Action::Cluster);
    assert_eq!(act("GET /v0/layout HTTP/1.1\r\n\r\n"), Action::Layout);
    assert_eq!(
        act("GET /v0/peer HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: ataman-peer/1\r\n\r\n"),
        Action::PeerUpgrade
    );
    assert_eq!(
        act("GET /v0/entities?start=a&end=c HTTP/1.1\r\n\r\n"),
        Action::Range {
            start: b"a".to_vec(),
            end: Some(b"c".to_vec())
        }
    );
    assert_eq!(act("GET /v0/status HTTP/1.1\r\n\r\n"), Action::Status);
    assert_eq!(act("GET /livez HTTP/1.1\r\n\r\n"), Action::Livez);
    assert_eq!(act("GET /readyz HTTP/1.1\r\n\r\n"), Action::Readyz);
    assert_eq!(
        act("GET /v0/cluster/health HTTP/1.1\r\n\r\n"),
        Action::ClusterHealth
    );
    assert_eq!(
        status("POST /readyz HTTP/1.1\r\n\r\n"),
        Status::MethodNotAllowed
    );
    assert_eq!(
        act("GET /v0/peer HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: ataman-sync/1\r\n\r\n"),
        Action::SyncUpgrade
    );
    assert_eq!(act("GET /v0/repair HTTP/1.1\r\n\r\n"), Action::RepairStatus);
    assert_eq!(act("POST /v0/repair HTTP/1.1\r\n\r\n"), Action::RepairStart);
    assert_eq!(
        status("PUT /v0/repair HTTP/1.1\r\n\r\n"),
        Status::MethodNotAllowed
    );
    assert_eq!(allow_for(b"/v0/repair"), "GET, HEAD, POST");
}

#[test]
fn cluster_ranges() {
    let cfg = RouteConfig {
        key_bytes_max: 8,
        cluster_size: 5,
        from_default: 5,
    };
    let act5 = |req: &str| {
        let limits = Limits {
            header_bytes_max: 4096,
            body_bytes_max: 1 << 20,
        };
        match parse_head(req.as_bytes(), limits) {
            Parsed::Head(h) => route(&h, cfg),
            other => panic!("{other:?}"),
        }
    };
    let cluster = |ack, from| Action::ClusterRange {
        start: b"a".to_vec(),
        end: None,
        ack,
        from,
    };
    let range = Action::Range {
        start: b"a".to_vec(),
        end: None,
    };
    assert_eq!(
        act5("GET /v0/entities?start=a&cluster=1 HTTP/1.1\r\n\r\n").1,
        cluster(3, 5)
    );
    assert_eq!(
        act5("GET /v0/entities?start=a&cluster=1&ack=2&from=3 HTTP/1.1\r\n\r\n").1,
        cluster(2, 3)
    );
    // Without cluster=1, node-local as before (ack and from ignored).
    assert_eq!(
        act5("GET /v0/entities?start=a&ack=9 HTTP/1.1\r\n\r\n").1,
        range
    );
    assert_eq!(
        act5("GET /v0/entities?start=a&cluster=0 HTTP/1.1\r\n\r\n").1,
        range
    );
    for bad in [
        "cluster=2",
        "cluster=",
        "cluster=1&cluster=1",
        "cluster=1&from=6",
        "cluster=1&ack=4&from=3",
    ] {
        let (_, action) = act5(&format!("GET /v0/entities?start=a&{bad} HTTP/1.1\r\n\r\n"));
        assert!(
            matches!(&action, Action::Error(e) if e.status == Status::BadRequest),
            "{bad}: {action:?}"
        );
    }
    let (route_taken, action) = act5("GET /v0/internal/range?start=a&end=%00 HTTP/1.1\r\n\r\n");
    assert_eq!(route_taken, Route::InternalRange);
    assert_eq!(
        action,
        Action::InternalRange {
            start: b"a".to_vec(),
            end: Some(vec![0])
        }
    );
    // One byte past the key limit: a resumed start.
    let (_, action) = act5("GET /v0/internal/range?start=123456789 HTTP/1.1\r\n\r\n");
    assert!(matches!(action, Action::InternalRange { .. }));
    let (_, action) = act5("PUT /v0/internal/range?start=a HTTP/1.1\r\n\r\n");
    assert!(matches!(&action, Action::Error(e) if e.status == Status::MethodNotAllowed));
}

/// Every invalid request gets the status docs/API.md promises.
#[test]
fn statuses() {
    assert_eq!(
        status("GET /v0/entity HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    assert_eq!(
        status("GET /v0/entity?id= HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    assert_eq!(
        status("GET /v0/entity?id=123456789 HTTP/1.1\r\n\r\n"),
        Status::UriTooLong
    );
    assert_eq!(
        status("POST /v0/entity?id=a HTTP/1.1\r\n\r\n"),
        Status::MethodNotAllowed
    );
    assert_eq!(
        status("GET /v1/entity?id=a HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    assert_eq!(
        status("GET /v0/entity?id=%zz HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    for q in [
        "PUT /v0/entity?id=a&ttl_ms=0",
        "PUT /v0/entity?id=a&ttl_ms=-1",
        "PUT /v0/entity?id=a&ttl_ms=abc",
        "PUT /v0/entity?id=a&ttl_ms=",
        "PUT /v0/entity?id=a&ttl_ms=281474976710656",
        "PUT /v0/entity?id=a&ttl_ms=99999999999999999999999",
        "PUT /v0/entity?id=a&ttl_ms=5&ttl_ms=6",
        "GET /v0/entity?id=a&ttl_ms=5",
        "DELETE /v0/entity?id=a&ttl_ms=5",
    ] {
        assert_eq!(
            status(&format!("{q} HTTP/1.1\r\n\r\n")),
            Status::BadRequest,
            "{q}"
        );
    }
    for q in [
        "ack=0&from=1",
        "ack=2&from=1",
        "ack=1&from=2",
        "ack=abc",
        "from=0",
        "ack=1&ack=1",
    ] {
        assert_eq!(
            status(&format!("GET /v0/entity?id=a&{q} HTTP/1.1\r\n\r\n")),
            Status::BadRequest,
            "{q}"
        );
    }
    assert_eq!(
        status("GET /v0/entities HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    assert_eq!(
        status("GET /v0/entities?start= HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    assert_eq!(
        status("GET /v0/entities?start=a&end= HTTP/1.1\r\n\r\n"),
        Status::BadRequest
    );
    assert_eq!(
        status("PUT /v0/entities?start=a HTTP/1.1\r\n\r\n"),
        Status::MethodNotAllowed
    );
    assert_eq!(status("GET /v0/peer HTTP/1.1\r\n\r\n"), Status::BadRequest);
    assert_eq!(
        status("GET /v0/peer HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"),
        Status::BadRequest
    );
}

/// Replication defaults and bounds for three nodes.
#[test]
fn replication_bounds() {
    assert_eq!(replication(None, None, 3), Ok((2, 3)));
    assert_eq!(replication(None, Some(2), 3), Ok((2, 2)));
    for (a, f) in [(0, 2), (3, 2), (0, 3), (4, 3), (1, 4)] {
        assert!(replication(Some(a), Some(f), 3).is_err(), "{a}/{f}");
    }
}
