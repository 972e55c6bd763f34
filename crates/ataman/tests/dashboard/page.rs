//! What the dashboard tests share: the page's figures read in the browser,
//! the checks on them, the load, the slow request, tokens.
#![allow(dead_code)] // each test binary uses a different subset

use crate::browser::Browser;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bound on the page showing what a check expects.
pub const PAGE_WAIT: Duration = Duration::from_secs(60);
/// Bound on a planted bug's page (it never shows what is expected).
pub const PLANTED_WAIT: Duration = Duration::from_secs(20);
/// Between two looks at the page.
pub const LOOK_EVERY: Duration = Duration::from_millis(500);
/// Requests the load sends at most (it stops earlier when the test ends).
pub const LOAD_REQUESTS_MAX: usize = 200_000;
/// The load's bound in time.
pub const LOAD_TIME_MAX: Duration = Duration::from_secs(240);
/// The key a third of the load is on.
pub const HOT_KEY: &str = "hot:dashboard";
/// The key of the request made slow on purpose (the slow log's threshold
/// lowered to 0 for it alone).
pub const SLOW_KEY: &str = "slow:dashboard";

pub const READER: &str = "dashboard-reader-token-0123456789";
pub const WRITER: &str = "dashboard-writer-token-0123456789";
pub const ADMIN: &str = "dashboard-admin-token-01234567890";

/// What the page reads of itself: each panel's figures.
pub const FIGURES_JS: &str = r##"(() => {
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
    slow: all("#slow-body tr").filter(r => r.querySelector(".slow-key")).map(r => ({
      key: r.querySelector(".slow-key").textContent,
      node: (r.querySelector(".slow-node") || {}).textContent || ""
    })),
    percentiles_of: text("percentiles-of"),
    move_rate: (document.getElementById("move-rate") || {dataset: {}}).dataset.bytesPerS || null,
    move_seconds_left: (document.getElementById("move-rate") || {dataset: {}}).dataset.secondsLeft || null,
    move_text: text("move-rate"),
    wal: all("#disk-body .wal").map(e => e.dataset.walBytes),
    free: all("#disk-body .free").map(e => e.dataset.freeBytes),
    disk: text("disk-body"),
    ae: text("ae-body"),
    url: location.href,
    stored_token: sessionStorage.getItem("ataman-token")
  };
})()"##;

/// What a check expects the page to show.
pub struct Expect<'a> {
    /// Every member's URL, in the members panel and with a rate.
    pub members: &'a [String],
    /// The layout version shown.
    pub version: u64,
    /// A move under way to this version shown.
    pub moving_to: Option<u64>,
    /// The member whose slow log holds the request made slow on purpose
    /// (the slow-log panel shows the cluster's entries, each naming its
    /// node).
    pub slow_on: &'a str,
}

/// Why the page's `figures` do not show what `expect` says; `Ok` when
/// they do.
pub fn check(figures: &Value, expect: &Expect<'_>) -> Result<(), String> {
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
    let hot = figures["hot"].as_array();
    if !hot.is_some_and(|a| a.iter().any(|k| k == HOT_KEY)) {
        return Err(format!("hot key not listed: {}", figures["hot"]));
    }
    let slow = figures["slow"].as_array();
    if !slow.is_some_and(|a| {
        a.iter()
            .any(|e| e["key"] == SLOW_KEY && e["node"] == expect.slow_on)
    }) {
        return Err(format!(
            "slow-log entry missing or not naming {}: {}",
            expect.slow_on, figures["slow"]
        ));
    }
    let of = figures["percentiles_of"].as_str().unwrap_or_default();
    if !(of.contains("HTTP entity requests") && of.contains("RESP commands on keys")) {
        return Err(format!(
            "the percentiles do not say what they cover: {of:?}"
        ));
    }
    check_disk(figures, expect.members.len())?;
    let layout = figures["layout"].as_str().unwrap_or_default();
    if let Some(to) = expect.moving_to
        && !(figures["moving"] == true && layout.contains(&format!("moving to version {to} ")))
    {
        return Err(format!("no move to version {to} shown: {layout:?}"));
    }
    Ok(())
}

/// Why the disk panel does not show every member's WAL bytes and free
/// space (a number above zero: the test's file system is not full).
pub fn check_disk(figures: &Value, members: usize) -> Result<(), String> {
    let numbers = |field: &str| -> Vec<Option<u64>> {
        figures[field]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().and_then(|s| s.parse().ok()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (wal, free) = (numbers("wal"), numbers("free"));
    if wal.len() != members || wal.iter().any(Option::is_none) {
        return Err(format!(
            "WAL bytes not shown for every node: {}",
            figures["wal"]
        ));
    }
    if free.len() != members || free.iter().any(|f| !f.is_some_and(|f| f > 0)) {
        return Err(format!(
            "free space not shown for every node: {}",
            figures["free"]
        ));
    }
    Ok(())
}

/// Why the layout panel does not show a move to `version` copying at a
/// rate above zero with its time left.
pub fn check_copying(figures: &Value, version: u64) -> Result<(), String> {
    let layout = figures["layout"].as_str().unwrap_or_default();
    if !(figures["moving"] == true && layout.contains(&format!("moving to version {version} "))) {
        return Err(format!("no move to version {version} shown: {layout:?}"));
    }
    let number = |field: &str| figures[field].as_str().and_then(|s| s.parse::<f64>().ok());
    let (rate, left) = (number("move_rate"), number("move_seconds_left"));
    if !rate.is_some_and(|r| r > 0.0) {
        return Err(format!(
            "no copy rate above zero: {:?}",
            figures["move_text"]
        ));
    }
    let text = figures["move_text"].as_str().unwrap_or_default();
    if !left.is_some_and(f64::is_finite) || text.contains("time left -") {
        return Err(format!("no time left shown: {text:?}"));
    }
    Ok(())
}

/// Looks at the page until `expect` holds or `bound` passes: the last
/// figures, or why they fell short.
pub fn wait_for(b: &mut Browser, expect: &Expect<'_>, bound: Duration) -> Result<Value, String> {
    wait_check(b, bound, |figures| check(figures, expect))
}

/// Looks at the page until `check` passes on its figures or `bound`
/// passes: the figures, or why they last fell short.
pub fn wait_check(
    b: &mut Browser,
    bound: Duration,
    check: impl Fn(&Value) -> Result<(), String>,
) -> Result<Value, String> {
    let deadline = Instant::now() + bound;
    let mut why = String::from("never looked");
    while Instant::now() < deadline {
        let figures = b.eval(FIGURES_JS);
        match check(&figures) {
            Ok(()) => return Ok(figures),
            Err(e) => why = e,
        }
        std::thread::sleep(LOOK_EVERY);
    }
    Err(why)
}

/// Looks at the page until `pred` holds on its figures, within [`PAGE_WAIT`].
pub fn wait_until(b: &mut Browser, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
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
pub fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> crate::support::Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    crate::support::Conn::open(addr).request(method, target, &headers, body)
}

/// Puts [`SLOW_KEY`] through `addr` with the slow log recording every
/// request, then nothing: the log holds that one request.
pub fn make_one_request_slow(addr: SocketAddr, admin: Option<&str>, writer: Option<&str>) {
    let r = send(addr, "POST", "/v0/slowlog?threshold_us=0", admin, None);
    assert_eq!(r.status, 200, "lower the threshold");
    let r = send(
        addr,
        "PUT",
        &crate::support::entity(SLOW_KEY.as_bytes()),
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

/// Keys written before a move so that its copy lasts: [`FILL_KEYS`] of
/// [`FILL_VALUE_BYTES`] (19 MiB) over the cluster's `--anti-entropy-rate-bytes`
/// of 1 MiB/s (its least) per node take seconds to copy on any machine.
pub const FILL_KEYS: usize = 1_200;
/// The size of each value written by [`fill`].
pub const FILL_VALUE_BYTES: usize = 16 * 1024;

/// Writes [`FILL_KEYS`] keys of [`FILL_VALUE_BYTES`] through `addrs` in turn.
pub fn fill(addrs: &[SocketAddr], writer: Option<&str>) {
    let value = vec![b'f'; FILL_VALUE_BYTES];
    for n in 0..FILL_KEYS {
        let target = crate::support::entity(format!("fill:{n}").as_bytes());
        let r = send(addrs[n % addrs.len()], "PUT", &target, writer, Some(&value));
        assert!(matches!(r.status, 200 | 201), "fill {n}: {}", r.status);
    }
}

/// A bounded load on `addrs` in turn until dropped: a third of the
/// requests on [`HOT_KEY`], the others on keys of their own.
pub struct Load {
    pub stop: Arc<AtomicBool>,
    pub thread: Option<std::thread::JoinHandle<usize>>,
}

impl Load {
    pub fn start(addrs: Vec<SocketAddr>, writer: Option<&str>) -> Load {
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
                let target = crate::support::entity(key.as_bytes());
                sent += 1;
                // A node the test killed refuses the connection, or never
                // answers a request in flight; the load goes on through
                // the others.
                let Ok(mut conn) = crate::support::Conn::try_open(addr) else {
                    continue;
                };
                let auth = writer.as_deref().map(|t| format!("Bearer {t}"));
                let headers: Vec<(&str, &str)> =
                    auth.iter().map(|a| ("Authorization", a.as_str())).collect();
                let request = crate::support::request("PUT", &target, &headers, Some(b"value"));
                // Killed while this request was in flight: no answer.
                let Ok(r) = conn
                    .send(&request)
                    .map_err(drop)
                    .and_then(|()| conn.read().map_err(drop))
                else {
                    continue;
                };
                assert!(
                    matches!(r.status, 200 | 201 | 503 | 504),
                    "load: {}",
                    r.status
                );
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
pub fn self_url(addr: SocketAddr, token: Option<&str>) -> String {
    let r = send(addr, "GET", "/v0/cluster", token, None);
    assert_eq!(r.status, 200, "GET /v0/cluster");
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    doc["self"].as_str().unwrap().to_owned()
}

/// `target/dashboard/NAME`.
pub fn shot_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/dashboard")
        .join(name)
}

pub fn token_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("tokens");
    let text = format!("{READER} read\n{WRITER} write\n{ADMIN} admin\n");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

pub fn secret_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("secret");
    std::fs::write(&path, "the-dashboard-cluster-secret-0123456789\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Submits the page's token form with `token`, as a user would.
pub fn enter_token(b: &mut Browser, token: &str) {
    let js = format!(
        "document.getElementById('token').value = {}; \
         document.getElementById('token-form').requestSubmit(); true",
        serde_json::to_string(token).unwrap()
    );
    assert_eq!(b.eval(&js), Value::Bool(true));
}
