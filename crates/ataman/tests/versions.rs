//! Every answer about a key's version names it (`X-Ataman-Version`,
//! docs/API.md "Versions"), on a real `ataman serve` on 127.0.0.1: a
//! PUT's stamp is what a GET returns (and its `ETag`), a DELETE's newer
//! stamp is what the 404 names, an expired value's 404 names its stamp,
//! a key never written names none, and an error names none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;
use support::cluster::assert_status;
use support::{Node, Response};

fn version(r: &Response) -> Option<u64> {
    r.header_str("X-Ataman-Version")
        .map(|v| v.trim().parse().unwrap())
}

/// A PUT, a GET, a DELETE, a GET, an expiring PUT read after its deadline,
/// a key never written, a refused request: each answer's version.
#[test]
fn answers_name_their_versions() {
    let node = Node::start(&[]);
    let put = node.put(b"k", b"v");
    assert_status(&put, 201, "put");
    let written = version(&put).expect("a PUT names its version");
    let got = node.get(b"k");
    assert_status(&got, 200, "get");
    assert_eq!(
        version(&got),
        Some(written),
        "a GET returns the PUT's version"
    );
    assert_eq!(got.header_str("ETag"), Some(format!("\"{written}\"")));
    let deleted = node.delete(b"k");
    assert_status(&deleted, 202, "delete");
    let tombstone = version(&deleted).expect("a DELETE names its version");
    assert!(tombstone > written, "{tombstone} after {written}");
    let gone = node.get(b"k");
    assert_status(&gone, 404, "get after delete");
    assert_eq!(version(&gone), Some(tombstone), "a 404 names the tombstone");
    assert_eq!(gone.header_str("ETag"), None, "no ETag on a 404");

    let expiring = node
        .conn()
        .request("PUT", "/v0/entity?id=e&ttl_ms=100", &[], Some(b"x"));
    assert_status(&expiring, 201, "expiring put");
    let stamp = version(&expiring).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let expired = node.get(b"e");
    assert_status(&expired, 404, "past the deadline");
    assert_eq!(
        version(&expired),
        Some(stamp),
        "an expired value's 404 names it"
    );

    let never = node.get(b"never");
    assert_status(&never, 404, "never written");
    assert_eq!(version(&never), None);
    let refused = node.get_target("/v0/entity?id=");
    assert_status(&refused, 400, "empty id");
    assert_eq!(version(&refused), None);
}
