//! The dashboard (`GET /ui`, docs/DASHBOARD.md) in a real browser: real
//! `ataman` processes under a bounded load, Debian's headless Chromium
//! driven through the DevTools protocol ([`browser`]), and checks that the
//! panels show the real figures: the members, the layout version, a rate
//! above zero on every node, the key the load made hot, the slow log's
//! entry of a request made slow on purpose, a move under way. Screenshots
//! go to `target/dashboard/`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod browser;
mod page;
#[path = "../support/mod.rs"]
mod support;

use browser::Browser;
use page::*;
use serde_json::Value;
use std::net::SocketAddr;
use support::Node;
use support::cluster::TestCluster;

/// With tokens and the cluster secret on 3 nodes under load: the page
/// loads without a token and asks for one; a wrong token is named as
/// refused; the reader's token (typed into the form, kept in
/// sessionStorage, never in the URL) shows every panel's real figures,
/// the slow log's entry of another member naming that member; a node
/// added by `ataman ctl layout apply` shows as a move under way, copying
/// at a rate above zero with its time left (the copy paced by the
/// slowest `--anti-entropy-rate-bytes` over 19 MiB so that it lasts);
/// a node killed shows as an error in its row while the rest stays.
#[test]
fn a_loaded_cluster_with_tokens_then_a_move() {
    let dir = tempfile::tempdir().unwrap();
    let (tokens, secret) = (token_file(dir.path()), secret_file(dir.path()));
    let (tokens, secret) = (tokens.to_str().unwrap(), secret.to_str().unwrap());
    let slow_copy = ["--anti-entropy-rate-bytes", "1048576"];
    let extra = [
        "--auth-token-file",
        tokens,
        "--cluster-secret-file",
        secret,
        slow_copy[0],
        slow_copy[1],
    ];
    let mut c = TestCluster::start(3, &extra);
    let addrs: Vec<SocketAddr> = (0..3).map(|i| c.node(i).addr()).collect();
    // Recording off everywhere (the load's own requests over 10 ms on a
    // busy machine would push it out of the page's newest 20), then one
    // request on node 1: the page, served by node 0, shows it from the
    // cluster's log.
    for addr in &addrs {
        let r = send(
            *addr,
            "POST",
            "/v0/slowlog?threshold_us=-1",
            Some(ADMIN),
            None,
        );
        assert_eq!(r.status, 200, "recording off");
    }
    make_one_request_slow(addrs[1], Some(ADMIN), Some(WRITER));
    fill(&addrs, Some(WRITER));
    let load = Load::start(addrs.clone(), Some(WRITER));
    let mut b = Browser::start(1400, 1800, &[]);
    b.navigate(&format!("http://{}/ui", addrs[0]));
    let asked = wait_until(&mut b, "the token form", |f| f["token_form"] == true);
    assert!(
        asked["token_message"]
            .as_str()
            .unwrap()
            .contains("needs a token"),
        "{asked}"
    );
    enter_token(&mut b, "not-a-token-of-this-node-0123456789");
    wait_until(&mut b, "the wrong token named", |f| {
        f["token_form"] == true
            && f["token_message"]
                .as_str()
                .unwrap_or("")
                .contains("refused")
    });
    enter_token(&mut b, READER);
    let urls = c.urls().to_vec();
    let expect = Expect {
        members: &urls,
        version: 1,
        moving_to: None,
        slow_on: &urls[1],
    };
    let figures = wait_for(&mut b, &expect, PAGE_WAIT).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(figures["stored_token"], READER, "kept in sessionStorage");
    assert!(
        !figures["url"].as_str().unwrap().contains(READER),
        "never in the URL"
    );
    b.screenshot(&shot_path("loaded.png"));

    let (_spare, _proxy, url) = support::spare::spare_with(&c, &extra);
    let admin_file = dir.path().join("admin-token");
    std::fs::write(&admin_file, format!("{ADMIN}\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["ctl", "--url", &format!("http://{}", addrs[1])])
        .args(["--token-file", admin_file.to_str().unwrap()])
        .args(["layout", "apply", "--version", "2", "--add", &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl layout apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The newest version is 2 from the commit on; 1 stays live until the
    // copy is done, and the page measures it between two refreshes.
    let moving = wait_check(&mut b, PAGE_WAIT, |f| {
        if f["layout_version"].as_u64() != Some(2) {
            return Err(format!("layout version {} shown", f["layout_version"]));
        }
        if !f["members"].as_str().unwrap_or_default().contains(&url) {
            return Err(format!("the added node {url} not among the members"));
        }
        check_copying(f, 2)
    })
    .unwrap_or_else(|e| panic!("during the move: {e}"));
    b.screenshot(&shot_path("moving.png"));
    eprintln!("during the move: {}", moving["move_text"]);

    c.kill9(2);
    let down = wait_until(&mut b, "node 2's row names its failure", |f| {
        f["rates_text"].as_str().unwrap_or("").contains("no answer")
    });
    assert!(
        down["members"].as_str().unwrap().contains(&c.urls()[0]),
        "{down}"
    );
    assert!(
        down["hot"].as_array().is_some_and(|h| !h.is_empty()),
        "{down}"
    );
    drop(load);
}

/// The checks' negative controls, on one node each: the same load and
/// checks pass on a sound node, and fail on a node whose script is served
/// cut in half (a broken asset: nothing is drawn) and on one whose
/// recent-figures ring counts nothing (no rate above zero).
#[test]
fn a_broken_asset_and_a_silent_ring_are_caught() {
    let cases: [(&[&str], Option<&str>); 3] = [
        (&[], None),
        (
            &["--debug-planted-bug", "ui-script-broken"],
            Some("never refreshed"),
        ),
        (
            &["--debug-planted-bug", "recent-counts-nothing"],
            Some("rate not above zero"),
        ),
    ];
    let mut b = Browser::start(1200, 1400, &[]);
    for (args, caught) in cases {
        let node = Node::start(args);
        let url = format!("http://{}", node.addr());
        make_one_request_slow(node.addr(), None, None);
        let _load = Load::start(vec![node.addr()], None);
        b.navigate(&format!("{url}/ui"));
        let members = [self_url(node.addr(), None)];
        let expect = Expect {
            members: &members,
            version: 1,
            moving_to: None,
            slow_on: &members[0],
        };
        let bound = if caught.is_some() {
            PLANTED_WAIT
        } else {
            PAGE_WAIT
        };
        match (wait_for(&mut b, &expect, bound), caught) {
            (Ok(_), None) => {}
            (Err(why), Some(expected)) => assert!(why.contains(expected), "{args:?}: {why}"),
            (got, _) => panic!("{args:?}: {got:?}"),
        }
    }
}

/// The files' types and headers, 404 for a missing one, 405 for another
/// method; with tokens the page loads without one and the figures do not.
#[test]
fn assets_headers_and_auth() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let node = Node::start(&["--auth-token-file", tokens.to_str().unwrap()]);
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let r = send(node.addr(), "GET", path, None, None);
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.header_str("content-type")
                .unwrap_or_default()
                .starts_with(kind),
            "{path}"
        );
        let csp = r.header_str("content-security-policy").unwrap_or_default();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{path}: {csp}"
        );
        assert_eq!(
            r.header_str("cache-control").as_deref(),
            Some("no-cache"),
            "{path}"
        );
        assert_eq!(
            r.header_str("x-content-type-options").as_deref(),
            Some("nosniff"),
            "{path}"
        );
    }
    assert_eq!(
        send(node.addr(), "GET", "/ui/missing.js", None, None).status,
        404
    );
    assert_eq!(send(node.addr(), "POST", "/ui", None, None).status, 405);
    assert_eq!(
        send(node.addr(), "GET", "/v0/recent", None, None).status,
        401
    );
    let r = send(
        node.addr(),
        "GET",
        "/v0/recent?cluster=1",
        Some(READER),
        None,
    );
    assert_eq!(r.status, 200);
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(doc["nodes"][0]["node"], self_url(node.addr(), Some(READER)));
    assert!(doc["nodes"][0]["points"].is_array(), "{doc}");
    assert_eq!(
        send(
            node.addr(),
            "GET",
            "/v0/recent?cluster=2",
            Some(READER),
            None
        )
        .status,
        400
    );
}
