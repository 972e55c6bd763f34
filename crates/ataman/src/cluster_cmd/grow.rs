//! `ataman cluster add` and `ataman cluster remove`: grow or shrink a
//! local cluster that `ataman cluster start` runs (docs/CLUSTER.md,
//! "Growing and shrinking").
//!
//! - `add` picks the next node index `K`, asks the supervisor to start
//!   node `K` with `--join` (the `JOIN` marker, `super::local_members`),
//!   waits until it answers, commits the layout that adds it
//!   (`POST /v0/layout`), and waits until the layout is settled.
//! - `remove --node K` commits the layout without node `K`, waits until
//!   it is settled, then asks the supervisor to stop the node (the
//!   `REMOVED` marker). With `--dead` the removal also declares the node
//!   dead (`dead=URL`): copies skip it instead of waiting for it.

use super::local_members::{self, Supervisor};
use crate::ctl::layout as text;
use crate::http_client::exchange::exchange;
use crate::http_client::url::{BaseUrl, target};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default bound on the whole command, in ms (starting, committing, settling).
pub const TIMEOUT_MS_DEFAULT: u64 = 600_000;
/// Bound on one request, in ms.
const REQUEST_TIMEOUT_MS: u64 = 15_000;
/// Pause between two polls, in ms.
const POLL_INTERVAL_MS: u64 = 500;

/// `ataman cluster add` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct AddArgs {
    /// The directory `cluster start` runs the cluster in.
    #[arg(long, default_value = super::start::DIR_DEFAULT)]
    pub dir: PathBuf,
    /// Return once the layout is committed, without waiting until it settles.
    #[arg(long)]
    pub no_wait: bool,
    /// Bound on the whole command, in ms.
    #[arg(long, default_value_t = TIMEOUT_MS_DEFAULT)]
    pub timeout_ms: u64,
}

/// `ataman cluster remove` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoveArgs {
    /// The node to remove (its index, as `cluster start` printed it).
    #[arg(long)]
    pub node: usize,
    /// The node is dead and its data lost (Cassandra's `removenode`, not
    /// `decommission`): the survivors copy from each other and skip it.
    /// Without it the node must answer: its data is copied first.
    #[arg(long)]
    pub dead: bool,
    /// The directory `cluster start` runs the cluster in.
    #[arg(long, default_value = super::start::DIR_DEFAULT)]
    pub dir: PathBuf,
    /// Bound on the whole command, in ms.
    #[arg(long, default_value_t = TIMEOUT_MS_DEFAULT)]
    pub timeout_ms: u64,
}

/// Why a node could not be added or removed.
#[derive(Debug, thiserror::Error)]
pub enum GrowError {
    /// No running `cluster start` in the directory.
    #[error("{0}")]
    Supervisor(String),
    /// The cluster or a node answered something else than expected.
    #[error("{0}")]
    Cluster(String),
    /// The bound passed.
    #[error("{0} within {1} ms")]
    Timeout(String, u64),
}

/// A running supervisor's record in `dir`.
fn supervisor(dir: &Path) -> Result<Supervisor, GrowError> {
    let file = dir.join(local_members::SUPERVISOR_FILE);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        GrowError::Supervisor(format!(
            "cannot read {} ({e}): is `ataman cluster start --dir {}` running?",
            file.display(),
            dir.display()
        ))
    })?;
    let s = Supervisor::parse(&text)
        .map_err(|e| GrowError::Supervisor(format!("{}: {e}", file.display())))?;
    let alive = libc::pid_t::try_from(s.pid).is_ok_and(|pid| {
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) == 0 }
    });
    if !alive {
        return Err(GrowError::Supervisor(format!(
            "the `cluster start` of {} (pid {}) is not running",
            dir.display(),
            s.pid
        )));
    }
    Ok(s)
}

fn request(url: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    let base = BaseUrl::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let body = (method == "POST").then_some(&[][..]);
    let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
    let r = exchange(&base, method, path, body, timeout).map_err(|e| format!("{url}: {e}"))?;
    Ok((r.status, String::from_utf8_lossy(&r.body).into_owned()))
}

fn layout_of(url: &str) -> Result<serde_json::Value, String> {
    match request(url, "GET", "/v0/layout")? {
        (200, body) => serde_json::from_str(&body).map_err(|e| format!("{url}/v0/layout: {e}")),
        (status, body) => Err(format!(
            "{url}/v0/layout answered {status}: {}",
            body.trim()
        )),
    }
}

/// The first node of the directory (other than `except`) that answers
/// `GET /v0/layout` as a member: its URL and document.
fn seed(
    dir: &Path,
    s: &Supervisor,
    except: Option<usize>,
) -> Result<(String, serde_json::Value), GrowError> {
    for k in local_members::node_indices(dir) {
        if Some(k) == except || local_members::is_removed(dir, k) {
            continue;
        }
        let Some(url) = s.url(k) else { continue };
        if let Ok(doc) = layout_of(&url)
            && text::members(&doc).is_ok_and(|m| m.contains(&url))
        {
            return Ok((url, doc));
        }
    }
    Err(GrowError::Cluster(format!(
        "no member of the cluster in {} answers GET /v0/layout",
        dir.display()
    )))
}

fn version_of(doc: &serde_json::Value) -> Result<u64, GrowError> {
    doc["version"]
        .as_u64()
        .ok_or_else(|| GrowError::Cluster("a layout without an integer version".into()))
}

/// Commits `change` (`add=URL`, `remove=URL`, each with `dead=URL` or
/// not) as the next version through `seed`; prints the chosen layout.
fn commit(seed: &str, version: u64, change: &[(&str, &str)]) -> Result<(), GrowError> {
    let v = version.to_string();
    let mut query = vec![("version", v.as_bytes())];
    query.extend(change.iter().map(|(k, u)| (*k, u.as_bytes())));
    let path = target("/v0/layout", &query);
    match request(seed, "POST", &path).map_err(GrowError::Cluster)? {
        (200, body) => {
            // Committed: an answer this command cannot print changes nothing.
            let shown = serde_json::from_str::<serde_json::Value>(&body)
                .map_err(|e| e.to_string())
                .and_then(|doc| text::show_text(&doc));
            match shown {
                Ok(shown) => print!("{shown}"),
                Err(e) => println!("layout version {version} committed ({e}: {})", body.trim()),
            }
            Ok(())
        }
        (status, body) => Err(GrowError::Cluster(format!(
            "POST {path} answered {status}: {}",
            body.trim()
        ))),
    }
}

/// Polls `url`'s layout until settled, printing progress, before `deadline`.
fn wait_settled(url: &str, deadline: Instant, total_ms: u64) -> Result<(), GrowError> {
    let mut last = String::new();
    loop {
        if let Ok(doc) = layout_of(url) {
            let members = text::members(&doc).unwrap_or_default();
            let mut docs = vec![doc];
            docs.extend(
                members
                    .iter()
                    .filter(|m| *m != url)
                    .filter_map(|m| layout_of(m).ok()),
            );
            let (line, settled) = text::progress_line(&docs).map_err(GrowError::Cluster)?;
            if line != last {
                print!("{line}");
                last = line;
            }
            if settled {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(GrowError::Timeout(
                "the layout did not settle".into(),
                total_ms,
            ));
        }
        std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
    }
}

/// `cluster add`.
pub fn add(args: &AddArgs) -> Result<(), GrowError> {
    let deadline = Instant::now() + Duration::from_millis(args.timeout_ms);
    let s = supervisor(&args.dir)?;
    let (seed_url, doc) = seed(&args.dir, &s, None)?;
    let version = version_of(&doc)?;
    let k = local_members::node_indices(&args.dir)
        .last()
        .map_or(s.nodes, |last| (last + 1).max(s.nodes));
    let url = s
        .url(k)
        .ok_or_else(|| GrowError::Cluster(format!("node {k}'s port does not fit below 65536")))?;
    let node_dir = local_members::node_dir(&args.dir, k);
    let io = |e: std::io::Error| GrowError::Cluster(format!("{}: {e}", node_dir.display()));
    std::fs::create_dir_all(&node_dir).map_err(io)?;
    std::fs::write(
        node_dir.join(local_members::JOIN_FILE),
        format!("{seed_url}\n"),
    )
    .map_err(io)?;
    println!("node {k}: {url} starting, joining through {seed_url}");
    let answered = loop {
        if request(&url, "GET", "/v0/status").is_ok_and(|(status, _)| status == 200) {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
    };
    let committed = if answered {
        commit(&seed_url, version + 1, &[("add", &url)])
    } else {
        Err(GrowError::Timeout(
            format!("node {k} did not answer GET /v0/status"),
            args.timeout_ms,
        ))
    };
    if let Err(e) = committed {
        // Not a member: the supervisor stops it and does not start it again.
        let _ = std::fs::write(node_dir.join(local_members::REMOVED_FILE), "");
        return Err(e);
    }
    if args.no_wait {
        return Ok(());
    }
    wait_settled(&seed_url, deadline, args.timeout_ms)
}

/// `cluster remove`.
pub fn remove(args: &RemoveArgs) -> Result<(), GrowError> {
    let deadline = Instant::now() + Duration::from_millis(args.timeout_ms);
    let s = supervisor(&args.dir)?;
    let url = s
        .url(args.node)
        .ok_or_else(|| GrowError::Cluster(format!("node {}'s port does not fit", args.node)))?;
    let (seed_url, doc) = seed(&args.dir, &s, Some(args.node))?;
    let members = text::members(&doc).map_err(GrowError::Cluster)?;
    if !members.contains(&url) {
        return Err(GrowError::Cluster(format!(
            "node {} ({url}) is not a member of layout version {}",
            args.node,
            version_of(&doc)?
        )));
    }
    let mut change = vec![("remove", url.as_str())];
    if args.dead {
        change.push(("dead", url.as_str()));
    }
    commit(&seed_url, version_of(&doc)? + 1, &change)?;
    wait_settled(&seed_url, deadline, args.timeout_ms)?;
    let marker = local_members::node_dir(&args.dir, args.node).join(local_members::REMOVED_FILE);
    std::fs::write(&marker, "")
        .map_err(|e| GrowError::Cluster(format!("{}: {e}", marker.display())))?;
    println!(
        "node {}: {url} removed; `cluster start` stops it (its data stays in {})",
        args.node,
        local_members::node_dir(&args.dir, args.node).display()
    );
    Ok(())
}
