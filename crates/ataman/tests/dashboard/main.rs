//! The dashboard (`GET /ui`, docs/DASHBOARD.md) in a real browser: real
//! `ataman` processes under a bounded load, Debian's headless Chromium
//! driven through the DevTools protocol ([`browser`]), and checks that the
//! panels show the real figures: the members, the layout version, a rate
//! above zero on every node, the key the load made hot, the slow log's
//! entry of a request made slow on purpose, a move under way. Screenshots
//! go to `target/dashboard/`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod browser;
#[path = "../support/mod.rs"]
mod support;

use browser::Browser;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::Node;
use support::cluster::TestCluster;

/// Bound on the page showing what a check expects.
const PAGE_WAIT: Duration = Duration::from_secs(60);
/// Bound on a planted bug's page (it never shows what is expected).
const PLANTED_WAIT: Duration = Duration::from_secs(20);
/// Between two looks at the page.
const LOOK_EVERY: Duration = Duration::from_millis(500);
/// Requests the load sends at most (it stops earlier when the test ends).
const LOAD_REQUESTS_MAX: usize = 200_000;
/// The load's bound in time.
const LOAD_TIME_MAX: Duration = Duration::from_secs(240);
/// The key a third of the load is on.
const HOT_KEY: &str = "hot:dashboard";
/// The key of the request made slow on purpose (the slow log's threshold
/// lowered to 0 for it alone).
const SLOW_KEY: &str = "slow:dashboard";

const READER: &str = "dashboard-reader-token-0123456789";
const WRITER: &str = "dashboard-writer-token-0123456789";
const ADMIN: &str = "dashboard-admin-token-01234567890";

/// What the page reads of itself: each panel's figures.
const FIGURES_JS: &str = r##"(() => {
  if (!document.body || !document.getElementById("token-form")) return { refreshed: 0, loading: true };
  const text = id => (document.getElementById(id) || {}).textContent || "";
  const all = sel => [...document.querySelectorAll(sel)];
  const version = document.getElementById("layout-version");
  return {
    refreshed: Number(document.body.dataset.refreshed || 0),
    token_form: !document.getElementById("token-form").hidden,
    token_message: text("token-message"),
    errors: all(".error").map(e => e.textContent).filter(t => t),
    members: text("members-body"),
    health: text("health-body"),
    layout_version: version ? Number(version.dataset.version) : null,
    layout: text("layout-body"),
    moving: !!document.getElementById("move"),
    rates: all("#rates-body .rate").map(e => Number(e.dataset.perS)),
    rates_text: text("rates-body"),
    hot: all("#hot-body .hot-key").map(e => e.textContent),
    slow: all("#slow-body .slow-key").map(e => e.textContent),
    disk: text("disk-body"),
    ae: text("ae-body"),
    url: location.href,
    stored_token: sessionStorage.getItem("ataman-token")
  };
})()"##;

/// What a check expects the page to show.
struct Expect<'a> {
    /// Every member's URL, in the members panel and with a rate.
    members: &'a [String],
    /// The layout version shown.
    version: u64,
    /// A move under way to this version shown.
    moving_to: Option<u64>,
}

/// Why the page's `figures` do not show what `expect` says; `Ok` when
/// they do.
fn check(figures: &Value, expect: &Expect<'_>) -> Result<(), String> {
    if figures["refreshed"].as_u64().unwrap_or(0) == 0 {
        return Err("the page never refreshed (its script did not run)".into());
    }
    if let Some(error) = figures["errors"].as_array().and_then(|e| e.first()) {
        return Err(format!("a panel shows an error: {error}"));
    }
    let members = figures["members"].as_str().unwrap_or_default();
    if let Some(missing) = expect
        .members
        .iter()
        .find(|m| !members.contains(m.as_str()))
    {
        return Err(format!("member {missing} missing from {members:?}"));
    }
    if figures["layout_version"].as_u64() != Some(expect.version) {
        return Err(format!(
            "layout version {} shown",
            figures["layout_version"]
        ));
    }
    let rates: Vec<f64> = figures["rates"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if rates.len() != expect.members.len() || rates.iter().any(|&r| r <= 0.0) {
        return Err(format!("a rate not above zero on every node: {rates:?}"));
    }
    let listed = |field: &str, key: &str| {
        figures[field]
            .as_array()
            .is_some_and(|a| a.iter().any(|k| k == key))
    };
    if !listed("hot", HOT_KEY) {
        return Err(format!("hot key not listed: {}", figures["hot"]));
    }
    if !listed("slow", SLOW_KEY) {
        return Err(format!("slow-log entry missing: {}", figures["slow"]));
    }
    let layout = figures["layout"].as_str().unwrap_or_default();
    if let Some(to) = expect.moving_to
        && !(figures["moving"] == true && layout.contains(&format!("moving to version {to} ")))
    {
        return Err(format!("no move to version {to} shown: {layout:?}"));
    }
    Ok(())
}

/// Looks at the page until `expect` holds or `bound` passes: the last
/// figures, or why they fell short.
fn wait_for(b: &mut Browser, expect: &Expect<'_>, bound: Duration) -> Result<Value, String> {
    let deadline = Instant::now() + bound;
    let mut why = String::from("never looked");
    while Instant::now() < deadline {
        let figures = b.eval(FIGURES_JS);
        match check(&figures, expect) {
            Ok(()) => return Ok(figures),
            Err(e) => why = e,
        }
        std::thread::sleep(LOOK_EVERY);
    }
    Err(why)
}

/// Looks at the page until `pred` holds on its figures, within [`PAGE_WAIT`].
fn wait_until(b: &mut Browser, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PAGE_WAIT;
    loop {
        let figures = b.eval(FIGURES_JS);
        if pred(&figures) {
            return figures;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the page shows {figures:#}"
        );
        std::thread::sleep(LOOK_EVERY);
    }
}

/// A request with `token` as its Bearer credential (none: `None`).
fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> support::Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    support::Conn::open(addr).request(method, target, &headers, body)
}

/// Puts [`SLOW_KEY`] through `addr` with the slow log recording every
/// request, then nothing: the log holds that one request.
fn make_one_request_slow(addr: SocketAddr, admin: Option<&str>, writer: Option<&str>) {
    let r = send(addr, "POST", "/v0/slowlog?threshold_us=0", admin, None);
    assert_eq!(r.status, 200, "lower the threshold");
    let r = send(
        addr,
        "PUT",
        &support::entity(SLOW_KEY.as_bytes()),
        writer,
        Some(b"v"),
    );
    assert!(
        matches!(r.status, 200 | 201),
        "the slow request: {}",
        r.status
    );
    let r = send(addr, "POST", "/v0/slowlog?threshold_us=-1", admin, None);
    assert_eq!(r.status, 200, "stop recording");
}

/// A bounded load on `addrs` in turn until dropped: a third of the
/// requests on [`HOT_KEY`], the others on keys of their own.
struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Load {
    fn start(addrs: Vec<SocketAddr>, writer: Option<&str>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let writer = writer.map(str::to_owned);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut sent = 0;
            while sent < LOAD_REQUESTS_MAX
                && started.elapsed() < LOAD_TIME_MAX
                && !flag.load(Ordering::Relaxed)
            {
                let addr = addrs[sent % addrs.len()];
                let key = if sent % 3 == 0 {
                    HOT_KEY.to_owned()
                } else {
                    format!("cold:{sent}")
                };
                let target = support::entity(key.as_bytes());
                let r = send(addr, "PUT", &target, writer.as_deref(), Some(b"value"));
                assert!(
                    matches!(r.status, 200 | 201 | 503 | 504),
                    "load: {}",
                    r.status
                );
                sent += 1;
                // A steady trickle, not a flood: the machine is shared.
                std::thread::sleep(Duration::from_millis(5));
            }
            sent
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The URL a node names itself by (`/v0/cluster`'s `self`).
fn self_url(addr: SocketAddr, token: Option<&str>) -> String {
    let r = send(addr, "GET", "/v0/cluster", token, None);
    assert_eq!(r.status, 200, "GET /v0/cluster");
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    doc["self"].as_str().unwrap().to_owned()
}

/// `target/dashboard/NAME`.
fn shot_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/dashboard")
        .join(name)
}

fn token_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("tokens");
    let text = format!("{READER} read\n{WRITER} write\n{ADMIN} admin\n");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn secret_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("secret");
    std::fs::write(&path, "the-dashboard-cluster-secret-0123456789\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Submits the page's token form with `token`, as a user would.
fn enter_token(b: &mut Browser, token: &str) {
    let js = format!(
        "document.getElementById('token').value = {}; \
         document.getElementById('token-form').requestSubmit(); true",
        serde_json::to_string(token).unwrap()
    );
    assert_eq!(b.eval(&js), Value::Bool(true));
}

/// With tokens and the cluster secret on 3 nodes under load: the page
/// loads without a token and asks for one; a wrong token is named as
/// refused; the reader's token (typed into the form, kept in
/// sessionStorage, never in the URL) shows every panel's real figures;
/// a node added by `ataman ctl layout apply` shows as a move under way;
/// a node killed shows as an error in its row while the rest stays.
#[test]
fn a_loaded_cluster_with_tokens_then_a_move() {
    let dir = tempfile::tempdir().unwrap();
    let (tokens, secret) = (token_file(dir.path()), secret_file(dir.path()));
    let (tokens, secret) = (tokens.to_str().unwrap(), secret.to_str().unwrap());
    let extra = ["--auth-token-file", tokens, "--cluster-secret-file", secret];
    let mut c = TestCluster::start(3, &extra);
    let addrs: Vec<SocketAddr> = (0..3).map(|i| c.node(i).addr()).collect();
    make_one_request_slow(addrs[0], Some(ADMIN), Some(WRITER));
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
    let expect = Expect {
        members: c.urls(),
        version: 1,
        moving_to: None,
    };
    let figures = wait_for(&mut b, &expect, PAGE_WAIT).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(figures["stored_token"], READER, "kept in sessionStorage");
    assert!(
        !figures["url"].as_str().unwrap().contains(READER),
        "never in the URL"
    );
    b.screenshot(&shot_path("loaded.png"));

    let (_spare, _proxy, url) = support::spare::held_spare_with(&c, &extra);
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
    // move is done.
    let expect = Expect {
        version: 2,
        moving_to: Some(2),
        ..expect
    };
    wait_for(&mut b, &expect, PAGE_WAIT).unwrap_or_else(|e| panic!("during the move: {e}"));
    b.screenshot(&shot_path("moving.png"));

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

/// The `ataman cert` files of a node of 127.0.0.1 in `dir`, signed by a CA
/// made there; the serve arguments that use them.
fn tls_args(dir: &Path) -> Vec<String> {
    let d = dir.to_str().unwrap();
    let cert = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ataman"))
            .arg("cert")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ataman cert {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    cert(&["create-ca", "--certs-dir", d]);
    let ca_key = dir.join("ca.key");
    cert(&[
        "create-node",
        "--certs-dir",
        d,
        "--ca-key",
        ca_key.to_str().unwrap(),
    ]);
    [
        "--tls-cert",
        "node.crt",
        "--tls-key",
        "node.key",
        "--tls-ca",
        "ca.crt",
    ]
    .chunks(2)
    .flat_map(|kv| {
        [
            kv[0].to_owned(),
            dir.join(kv[1]).to_string_lossy().into_owned(),
        ]
    })
    .collect()
}

/// Over TLS (peers verified by the CA), the page served by each of the 3
/// nodes shows every member and every member's rates (asked by the
/// serving node over TLS), the hot key and the serving node's slow log.
#[test]
fn every_node_serves_it_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    let args = tls_args(certs.path());
    // The test's own requests (and the start-up probe) trust the CA.
    ataman::http_client::tls::set_ca(&certs.path().join("ca.crt")).unwrap();
    let proxies: Vec<ataman::faultproxy::FaultProxy> = (0..3)
        .map(|_| ataman::faultproxy::FaultProxy::start_without_target().unwrap())
        .collect();
    let urls: Vec<String> = proxies
        .iter()
        .map(|p| p.url().replacen("http://", "https://", 1))
        .collect();
    let cluster = urls.join(",");
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            let mut a = vec!["--cluster", cluster.as_str(), "--self", urls[i].as_str()];
            a.extend(args.iter().map(String::as_str));
            let node = Node::start(&a);
            proxies[i].set_target(node.addr());
            node
        })
        .collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::addr).collect();
    let _load = tls_load(&addrs);
    // The browser does not know the test's CA: it is told to go on.
    let mut b = Browser::start(1400, 1800, &["--ignore-certificate-errors"]);
    for (i, addr) in addrs.iter().enumerate() {
        tls_slow_request(*addr);
        b.navigate(&format!("https://{addr}/ui"));
        let expect = Expect {
            members: &urls,
            version: 1,
            moving_to: None,
        };
        wait_for(&mut b, &expect, PAGE_WAIT).unwrap_or_else(|e| panic!("node {i}: {e}"));
    }
    b.screenshot(&shot_path("tls.png"));
}

/// [`make_one_request_slow`] over TLS.
fn tls_slow_request(addr: SocketAddr) {
    use ataman::http_client::{exchange::exchange, url::BaseUrl};
    let base = BaseUrl::parse(&format!("https://{addr}")).unwrap();
    let io = support::IO_TIMEOUT;
    for (method, target, body) in [
        ("POST", "/v0/slowlog?threshold_us=0".to_owned(), None),
        ("PUT", support::entity(SLOW_KEY.as_bytes()), Some(&b"v"[..])),
        ("POST", "/v0/slowlog?threshold_us=-1".to_owned(), None),
    ] {
        let r = exchange(&base, method, &target, body, io).unwrap();
        assert!(
            matches!(r.status, 200 | 201),
            "{method} {target}: {}",
            r.status
        );
    }
}

/// [`Load`] over TLS: a bounded trickle, a third on [`HOT_KEY`].
fn tls_load(addrs: &[SocketAddr]) -> Load {
    use ataman::http_client::{exchange::exchange, url::BaseUrl};
    let bases: Vec<BaseUrl> = addrs
        .iter()
        .map(|a| BaseUrl::parse(&format!("https://{a}")).unwrap())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut sent = 0;
        while sent < LOAD_REQUESTS_MAX
            && started.elapsed() < LOAD_TIME_MAX
            && !flag.load(Ordering::Relaxed)
        {
            let key = if sent % 3 == 0 {
                HOT_KEY.to_owned()
            } else {
                format!("cold:{sent}")
            };
            let target = support::entity(key.as_bytes());
            let r = exchange(
                &bases[sent % bases.len()],
                "PUT",
                &target,
                Some(b"value"),
                support::IO_TIMEOUT,
            );
            assert!(
                r.is_ok_and(|r| matches!(r.status, 200 | 201 | 503 | 504)),
                "load"
            );
            sent += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        sent
    });
    Load {
        stop,
        thread: Some(thread),
    }
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
