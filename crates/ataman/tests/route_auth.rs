//! Every route of the HTTP router against every role, on a real node with
//! client tokens and a cluster secret. The walk is driven by the router's
//! own table (`ataman_node::api::ENDPOINTS`, the only way a request
//! reaches an endpoint) and by `ataman_node::api::route` itself, and the
//! role each action needs is an exhaustive match without a catch-all arm:
//! a new path, method or action cannot be left out without this test
//! failing to compile or failing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman_node::api::{self, Action, Endpoint, RouteConfig};
use ataman_node::http::request::{Limits, Parsed, parse_head};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::Node;

const READER: &str = "reader-token-0123456789";
const WRITER: &str = "writer-token-0123456789";
const ADMIN: &str = "admin-token-01234567890";

/// Who may use an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Needs {
    /// Anyone (health checks).
    Nothing,
    /// At least this client role (1 read, 2 write, 3 admin).
    Role(u8),
    /// A peer's proof of the cluster secret; no client token opens it.
    PeerProof,
    /// The router answers an error, the same whoever asks.
    RouterError,
}

/// The policy, written out per action (docs/SECURITY.md, "Roles"). No `_`
/// arm: a new action does not compile until it is placed here.
fn needs(action: &Action) -> Needs {
    match action {
        Action::Status | Action::Livez | Action::Readyz | Action::ClusterHealth => Needs::Nothing,
        // The dashboard's files hold no data (docs/DASHBOARD.md).
        Action::Ui(_) => Needs::Nothing,
        // Rates, latencies, disk use: read.
        Action::Recent { .. } => Needs::Role(1),
        Action::Get { .. }
        | Action::Range { .. }
        | Action::ClusterRange { .. }
        | Action::Cluster
        | Action::Layout
        | Action::RepairStatus
        | Action::Metrics => Needs::Role(1),
        Action::Put { .. } | Action::Delete { .. } => Needs::Role(2),
        // Reading the slow log: read; changing it: admin (docs/API.md).
        Action::Slowlog(op) if op.changes() => Needs::Role(3),
        Action::Slowlog(_) => Needs::Role(1),
        // Every member's slow log: read, as one node's.
        Action::ClusterSlowlog { .. } => Needs::Role(1),
        // Hot keys: keys and shares, never values.
        Action::HotKeys { .. } => Needs::Role(1),
        Action::LayoutChange { .. } | Action::LayoutPlan { .. } | Action::RepairStart => {
            Needs::Role(3)
        }
        // A checkpoint holds every value and pins disk (docs/BACKUP.md).
        Action::Backup(_) => Needs::Role(3),
        Action::InternalRange { .. }
        | Action::InternalLayout
        | Action::InternalHotKeys
        | Action::InternalRecent
        | Action::InternalSlowlog { .. }
        | Action::PeerUpgrade
        | Action::SyncUpgrade => Needs::PeerProof,
        Action::Error(_) => Needs::RouterError,
    }
}

/// The queries and extra headers each endpoint is tried with: the valid
/// forms of each of its actions. No `_` arm: a new endpoint does not
/// compile until it is given its requests here.
fn examples(endpoint: Endpoint) -> Vec<(&'static str, &'static str)> {
    const UPGRADE_PEER: &str = "Connection: Upgrade\r\nUpgrade: ataman-peer/1\r\n";
    const UPGRADE_SYNC: &str = "Connection: Upgrade\r\nUpgrade: ataman-sync/1\r\n";
    match endpoint {
        Endpoint::Entity => vec![("id=route-auth-key", ""), ("id=k&ttl_ms=60000", "")],
        Endpoint::Entities => vec![("start=a", ""), ("start=a&cluster=1&ack=1&from=1", "")],
        Endpoint::InternalRange => vec![("start=a", "")],
        Endpoint::Status
        | Endpoint::Cluster
        | Endpoint::Metrics
        | Endpoint::InternalLayout
        | Endpoint::Livez
        | Endpoint::Readyz
        | Endpoint::ClusterHealth => vec![("", "")],
        Endpoint::Peer => vec![("", UPGRADE_PEER), ("", UPGRADE_SYNC), ("", "")],
        Endpoint::Layout => vec![("", ""), ("version=2&replication_factor=1", "")],
        Endpoint::LayoutPlan => vec![("replication_factor=1", "")],
        Endpoint::Repair => vec![("", "")],
        Endpoint::Backup => vec![("", ""), ("name=ckpt-1", ""), ("lease_s=60", "")],
        Endpoint::HotKeys => vec![("", ""), ("limit=5&cluster=1", "")],
        Endpoint::InternalHotKeys | Endpoint::InternalRecent | Endpoint::Ui => vec![("", "")],
        Endpoint::Recent => vec![("", ""), ("cluster=1", "")],
        Endpoint::InternalSlowlog => vec![("", ""), ("limit=5", "")],
        Endpoint::Slowlog => vec![
            ("", ""),
            ("limit=1", ""),
            ("cluster=1", ""),
            ("cluster=1&limit=5", ""),
            ("reset=1", ""),
            ("threshold_us=10000&max_len=128", ""),
        ],
    }
}

const METHODS: [&str; 4] = ["GET", "PUT", "DELETE", "POST"];

/// The credentials: the header sent, and the client level it stands for
/// (0: no role).
const CREDENTIALS: [(Option<&str>, u8); 6] = [
    (None, 0),
    (Some("Bearer not-a-token-0123456789"), 0),
    (Some("Basic dXNlcjpwYXNz"), 0),
    (Some("Bearer reader-token-0123456789"), 1),
    (Some("Bearer writer-token-0123456789"), 2),
    (Some("Bearer admin-token-01234567890"), 3),
];

fn private(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// What the router makes of `head` (the same function the node runs).
fn action_of(head: &[u8]) -> Action {
    let limits = Limits {
        header_bytes_max: 64 * 1024,
        body_bytes_max: 1 << 20,
    };
    let cfg = RouteConfig {
        key_bytes_max: 1024,
        cluster_size: 1,
        from_default: 1,
    };
    match parse_head(head, limits) {
        Parsed::Head(h) => api::route(&h, cfg).1,
        other => panic!("the test's request did not parse: {other:?}"),
    }
}

/// Every (path, method, example) of the route table against every
/// credential: refused with 401/403 exactly below the role its action
/// needs, peer surfaces refused to every client credential, router errors
/// the same for all.
#[test]
fn every_route_against_every_role() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = private(
        dir.path(),
        "tokens",
        &format!("{READER} read\n{WRITER} write\n{ADMIN} admin\n"),
    );
    let secret = private(dir.path(), "secret", "the-cluster-secret-0123456789ab");
    let node = Node::start(&[
        "--auth-token-file",
        tokens.to_str().unwrap(),
        "--cluster-secret-file",
        secret.to_str().unwrap(),
    ]);
    let mut seen = std::collections::BTreeSet::new();
    let mut tried = 0;
    for (path, endpoint) in api::ENDPOINTS {
        assert_eq!(api::endpoint(path.as_bytes()), Some(endpoint), "{path}");
        for (query, extra) in examples(endpoint) {
            for method in METHODS {
                let target = if query.is_empty() {
                    path.to_owned()
                } else {
                    format!("{path}?{query}")
                };
                let head = format!("{method} {target} HTTP/1.1\r\nHost: ataman\r\n{extra}\r\n");
                let action = action_of(head.as_bytes());
                let needs = needs(&action);
                seen.insert(format!("{needs:?}"));
                for (credential, level) in CREDENTIALS {
                    let mut headers: Vec<(&str, &str)> =
                        extra.lines().filter_map(|l| l.split_once(": ")).collect();
                    if let Some(c) = credential {
                        headers.push(("Authorization", c));
                    }
                    let body: Option<&[u8]> = matches!(method, "PUT" | "POST").then_some(b"v");
                    let r = node.conn().request(method, &target, &headers, body);
                    tried += 1;
                    let context =
                        format!("{method} {target} {extra:?} as {credential:?}: {needs:?}");
                    let text = String::from_utf8_lossy(&r.body).into_owned();
                    match needs {
                        Needs::Nothing => {
                            // Open to anyone, and saying nothing about keys
                            // (one was written above) or credentials.
                            assert_eq!(r.status, 200, "{context}: {text}");
                            for secret in ["route-auth-key", "token-0123", "cluster-secret"] {
                                assert!(!text.contains(secret), "{context} leaked: {text}");
                            }
                        }
                        Needs::Role(least) if level >= least => assert!(
                            r.status != 401 && r.status != 403,
                            "{context}: admitted, got {} {text}",
                            r.status
                        ),
                        Needs::Role(_) => {
                            let expected = if level == 0 { 401 } else { 403 };
                            assert_eq!(r.status, expected, "{context}: {text}");
                            for secret in ["route-auth-key", "token-0123"] {
                                assert!(!text.contains(secret), "{context} leaked: {text}");
                            }
                        }
                        Needs::PeerProof => {
                            // A challenge or a refusal of the cluster
                            // secret's scheme: never what a token opens.
                            assert_eq!(r.status, 401, "{context}: {text}");
                            let scheme = r.header_str("WWW-Authenticate").unwrap_or_default();
                            assert!(scheme.starts_with("Ataman-Peer"), "{context}: {scheme}");
                        }
                        Needs::RouterError => {
                            let Action::Error(e) = &action else {
                                unreachable!()
                            };
                            assert_eq!(r.status, e.status.code(), "{context}: {text}");
                        }
                    }
                }
            }
        }
    }
    // Every kind of policy was met, and every path.
    for kind in [
        "Nothing",
        "Role(1)",
        "Role(2)",
        "Role(3)",
        "PeerProof",
        "RouterError",
    ] {
        assert!(seen.contains(kind), "no route needs {kind}: {seen:?}");
    }
    assert!(tried >= api::ENDPOINTS.len() * METHODS.len() * CREDENTIALS.len());
    // A path outside the table is 400 to everyone, token or not.
    for (credential, _) in CREDENTIALS {
        let headers: Vec<(&str, &str)> = credential.iter().map(|c| ("Authorization", *c)).collect();
        let r = node
            .conn()
            .request("GET", "/v0/not-a-route", &headers, None);
        assert_eq!(r.status, 400, "{credential:?}");
    }
}
