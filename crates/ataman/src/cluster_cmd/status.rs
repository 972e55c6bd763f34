//! `ataman cluster status`: asks one node for the cluster's node list, then
//! samples `GET /v0/cluster` of every node twice, `--interval-ms` apart,
//! and prints one block per node: its request rates (from the difference
//! of its counters) and its view of every node.

use super::view::{ClusterView, RequestCounts};
use crate::ctl::{EXIT_NO_ANSWER, EXIT_REFUSED, TIMEOUT_MS_DEFAULT, url_or_default};
use crate::http_client::exchange::exchange;
use crate::http_client::url::{BaseUrl, UrlError};
use ataman_node::health::cluster_health::{self, Observed};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Default time between the two samples, in milliseconds.
pub const INTERVAL_MS_DEFAULT: u64 = 1_000;
/// Longest time between the two samples, in milliseconds (one hour).
pub const INTERVAL_MS_MAX: u64 = 3_600_000;
/// Nodes sampled at the same time, at most (one thread each).
pub const SAMPLE_THREADS_MAX: usize = 16;

/// `ataman cluster status` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Any node of the cluster: `http://HOST[:PORT]` or `https://HOST[:PORT]`
    /// [default: http://127.0.0.1:19234, https:// with --tls-ca].
    #[arg(long, env = "ATAMAN_URL")]
    pub url: Option<String>,
    /// Time between the two samples the rates come from, in ms; 0 takes one sample and prints totals.
    #[arg(long, default_value_t = INTERVAL_MS_DEFAULT)]
    pub interval_ms: u64,
    /// Bound on connecting and on each read and write, in ms.
    #[arg(long, default_value_t = TIMEOUT_MS_DEFAULT)]
    pub timeout_ms: u64,
    /// The CA `https://` nodes' certificates are verified against (PEM).
    #[arg(long)]
    pub tls_ca: Option<std::path::PathBuf>,
}

/// Why `status` could not print a table at all.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// `--url` is not a node URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// `--tls-ca` could not be loaded.
    #[error("{0}")]
    Tls(String),
    /// `--interval-ms` is past [`INTERVAL_MS_MAX`].
    #[error("--interval-ms must be at most {INTERVAL_MS_MAX}, not {0}")]
    Interval(u64),
    /// The node named by `--url` gave no usable answer.
    #[error("{url}: {reason}")]
    NoAnswer {
        /// The `--url` given.
        url: String,
        /// What went wrong.
        reason: String,
    },
}

impl StatusError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            StatusError::Url(_) | StatusError::Interval(_) | StatusError::Tls(_) => EXIT_REFUSED,
            StatusError::NoAnswer { .. } => EXIT_NO_ANSWER,
        }
    }
}

/// One answer of one node.
#[derive(Debug, Clone)]
pub struct Sample {
    /// When the answer arrived.
    pub at: Instant,
    /// What it said.
    pub view: ClusterView,
}

/// What one node said over the two samples, or why it said nothing.
#[derive(Debug, Clone)]
pub struct NodeReport {
    /// The node's URL as listed by the node asked first.
    pub url: String,
    /// The first sample and the second (absent when the interval is 0);
    /// an error when either failed.
    pub outcome: Result<(Sample, Option<Sample>), String>,
}

/// `GET /v0/cluster` from `url`, parsed.
pub fn fetch(url: &str, timeout: Duration) -> Result<ClusterView, String> {
    let base = BaseUrl::parse(url).map_err(|e| e.to_string())?;
    let response =
        exchange(&base, "GET", "/v0/cluster", None, timeout).map_err(|e| e.to_string())?;
    if response.status != 200 {
        return Err(format!("answered {} to GET /v0/cluster", response.status));
    }
    ClusterView::parse(&response.body).map_err(|e| e.to_string())
}

/// Samples every URL, [`SAMPLE_THREADS_MAX`] at a time.
fn sample_all(urls: &[String], timeout: Duration) -> Vec<Result<Sample, String>> {
    let mut samples = Vec::with_capacity(urls.len());
    for group in urls.chunks(SAMPLE_THREADS_MAX) {
        std::thread::scope(|scope| {
            let handles: Vec<_> = group
                .iter()
                .map(|url| {
                    scope.spawn(move || {
                        fetch(url, timeout).map(|view| Sample {
                            at: Instant::now(),
                            view,
                        })
                    })
                })
                .collect();
            for handle in handles {
                samples.push(
                    handle
                        .join()
                        .unwrap_or_else(|_| Err("the sampling thread panicked".into())),
                );
            }
        });
    }
    assert_eq!(samples.len(), urls.len(), "one sample per node");
    samples
}

/// Runs `status`: true when every node answered both samples.
pub fn run(args: &StatusArgs) -> Result<bool, StatusError> {
    let url = url_or_default(args.url.as_deref(), args.tls_ca.as_deref());
    BaseUrl::parse(url)?;
    crate::http_client::tls::set_ca_if(args.tls_ca.as_deref()).map_err(StatusError::Tls)?;
    if args.interval_ms > INTERVAL_MS_MAX {
        return Err(StatusError::Interval(args.interval_ms));
    }
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let first = fetch(url, timeout).map_err(|reason| StatusError::NoAnswer {
        url: url.to_string(),
        reason,
    })?;
    let urls: Vec<String> = if first.nodes.is_empty() {
        vec![url.to_string()]
    } else {
        first.nodes.iter().map(|node| node.url.clone()).collect()
    };
    let firsts = sample_all(&urls, timeout);
    let seconds = if args.interval_ms > 0 {
        std::thread::sleep(Duration::from_millis(args.interval_ms));
        Some(sample_all(&urls, timeout))
    } else {
        None
    };
    let reports: Vec<NodeReport> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| {
            let second = seconds.as_ref().map(|s| s[i].clone()).transpose();
            let outcome = match (firsts[i].clone(), second) {
                (Ok(first), Ok(second)) => Ok((first, second)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
            NodeReport {
                url: url.clone(),
                outcome,
            }
        })
        .collect();
    print!("{}", render(url, &reports));
    println!("{}", health_line(&observed(&first, &reports)));
    Ok(reports.iter().all(|r| r.outcome.is_ok()))
}

/// What the samples showed, for the health rule of
/// `ataman_node::health::cluster_health` (the one `GET /v0/cluster/health`
/// uses): the members `asked` lists, which of them answered this tool,
/// `R` and the transition `asked` reports (reads on an older version
/// than writes).
pub fn observed(asked: &ClusterView, reports: &[NodeReport]) -> Observed {
    let members: Vec<&str> = asked
        .nodes
        .iter()
        .filter(|n| !n.not_member)
        .map(|n| n.url.as_str())
        .collect();
    let answered = |url: &str| reports.iter().any(|r| r.url == url && r.outcome.is_ok());
    let (members_count, answering) = if members.is_empty() {
        // A node that lists none (an older one): the nodes sampled.
        let ok = reports.iter().filter(|r| r.outcome.is_ok()).count();
        (reports.len(), ok)
    } else {
        let ok = members.iter().filter(|u| answered(u)).count();
        (members.len(), ok)
    };
    let (read, newest) = (asked.read_version, asked.layout_version);
    Observed {
        members: members_count,
        answering,
        unknown: 0,
        replication_factor: usize::try_from(asked.replication_factor.max(1)).unwrap_or(1),
        transition: (read > 0 && read < newest).then_some((read, newest)),
    }
}

/// `health: STATUS, quorum: all_keys|some_keys|no_keys; A of N members
/// answer[; transition V -> W]`.
pub fn health_line(o: &Observed) -> String {
    let j = cluster_health::judge(o);
    let mut line = format!(
        "health: {}, quorum: {}; {} of {} members answer",
        j.status,
        j.quorum.label(),
        o.answering,
        o.members
    );
    if let Some((from, to)) = o.transition {
        let _ = write!(line, "; transition {from} -> {to}");
    }
    line
}

/// Per-second rate of a counter between two samples (0 if it went back,
/// as after a restart).
fn rate(before: u64, after: u64, seconds: f64) -> f64 {
    after.saturating_sub(before) as f64 / seconds
}

fn requests_line(first: &Sample, second: Option<&Sample>) -> String {
    let RequestCounts { get, put, delete } = first.view.requests;
    match second {
        None => format!("requests (total): get {get}, put {put}, delete {delete}"),
        Some(second) => {
            let seconds = second
                .at
                .saturating_duration_since(first.at)
                .as_secs_f64()
                .max(1e-3);
            let now = second.view.requests;
            format!(
                "requests/s: get {:.1}, put {:.1}, delete {:.1}",
                rate(get, now.get, seconds),
                rate(put, now.put, seconds),
                rate(delete, now.delete, seconds)
            )
        }
    }
}

/// A peer's state as listed: `(left)` after a node that is a member of
/// no live layout.
fn state_label(peer: &super::view::PeerView) -> String {
    if peer.not_member {
        format!("{}(left)", peer.state)
    } else {
        peer.state.clone()
    }
}

/// The table: one block per node, then a summary line.
pub fn render(asked: &str, reports: &[NodeReport]) -> String {
    let url_width = reports
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok())
        .flat_map(|(first, second)| &second.as_ref().unwrap_or(first).view.nodes)
        .map(|peer| peer.url.len())
        .chain(std::iter::once("peer".len()))
        .max()
        .unwrap_or(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster of {} nodes, as listed by {asked}\n",
        reports.len()
    );
    for (i, report) in reports.iter().enumerate() {
        let _ = write!(out, "node {i} {}", report.url);
        let (first, second) = match &report.outcome {
            Ok(samples) => samples,
            Err(reason) => {
                let _ = writeln!(out, "\n  unreachable: {reason}\n");
                continue;
            }
        };
        let latest = second.as_ref().unwrap_or(first);
        if !latest.view.self_url.is_empty() && latest.view.self_url != report.url {
            let _ = write!(out, " (calls itself {})", latest.view.self_url);
        }
        if latest.view.layout_version > 0 {
            let _ = write!(out, ", layout version {}", latest.view.layout_version);
        }
        let _ = writeln!(out, "\n  {}", requests_line(first, second.as_ref()));
        let _ = writeln!(
            out,
            "  {:<url_width$}  {:<10}  {:>13}  {:>12}  {:>10}  {:>10}",
            "peer", "state", "hints_pending", "hint_bytes", "sent", "failed"
        );
        for peer in &latest.view.nodes {
            let _ = writeln!(
                out,
                "  {:<url_width$}  {:<10}  {:>13}  {:>12}  {:>10}  {:>10}",
                peer.url,
                state_label(peer),
                peer.hints_pending,
                peer.hint_bytes,
                peer.sent,
                peer.failed
            );
        }
        out.push('\n');
    }
    let answered = reports.iter().filter(|r| r.outcome.is_ok()).count();
    let _ = writeln!(out, "{answered} of {} nodes answered", reports.len());
    out
}

#[cfg(test)]
mod tests {
    use super::super::view::PeerView;
    use super::*;

    fn sample(at: Instant, get: u64, states: &[&str]) -> Sample {
        Sample {
            at,
            view: ClusterView {
                self_url: "http://a:1".into(),
                layout_version: 2,
                read_version: 2,
                replication_factor: 3,
                nodes: states
                    .iter()
                    .enumerate()
                    .map(|(i, state)| PeerView {
                        url: format!("http://a:{}", i + 1),
                        state: state.to_string(),
                        hints_pending: i as u64,
                        ..PeerView::default()
                    })
                    .collect(),
                requests: RequestCounts {
                    get,
                    put: 0,
                    delete: 0,
                },
            },
        }
    }

    /// Rates come from the counter difference over the sample interval;
    /// unreachable nodes are named with the reason.
    #[test]
    fn render_rates_states_and_unreachable() {
        let t0 = Instant::now();
        let reports = vec![
            NodeReport {
                url: "http://a:1".into(),
                outcome: Ok((
                    sample(t0, 100, &["self", "down"]),
                    Some(sample(t0 + Duration::from_secs(2), 150, &["self", "up"])),
                )),
            },
            NodeReport {
                url: "http://a:2".into(),
                outcome: Err("cannot connect".into()),
            },
        ];
        let text = render("http://a:1", &reports);
        assert!(
            text.contains("node 0 http://a:1, layout version 2\n"),
            "{text}"
        );
        assert!(
            text.contains("requests/s: get 25.0, put 0.0, delete 0.0"),
            "{text}"
        );
        // The latest view is shown.
        assert!(text.contains("http://a:2  up"), "{text}");
        assert!(!text.contains("down"), "{text}");
        assert!(
            text.contains("node 1 http://a:2\n  unreachable: cannot connect"),
            "{text}"
        );
        assert!(text.ends_with("1 of 2 nodes answered\n"), "{text}");
    }

    /// With one sample, totals are printed; a counter going back is rate 0.
    #[test]
    fn totals_without_interval_and_reset_counters() {
        let t0 = Instant::now();
        let text = render(
            "http://a:1",
            &[NodeReport {
                url: "http://other:9".into(),
                outcome: Ok((sample(t0, 7, &["self"]), None)),
            }],
        );
        assert!(
            text.contains("requests (total): get 7, put 0, delete 0"),
            "{text}"
        );
        assert!(text.contains("(calls itself http://a:1)"), "{text}");
        assert_eq!(rate(10, 3, 1.0), 0.0);
    }

    /// The summary judges the members the asked node lists by which of
    /// them answered the tool, with its R and transition: one of three
    /// unreachable with R = 3 is degraded, two are unavailable.
    #[test]
    fn health_from_the_samples() {
        let t0 = Instant::now();
        let mut asked = sample(t0, 0, &["self", "up", "down"]).view;
        asked.read_version = 1;
        let report = |port: u16, ok: bool| NodeReport {
            url: format!("http://a:{port}"),
            outcome: if ok {
                Ok((sample(t0, 0, &["self"]), None))
            } else {
                Err("refused".into())
            },
        };
        let o = observed(
            &asked,
            &[report(1, true), report(2, true), report(3, false)],
        );
        assert_eq!((o.members, o.answering, o.transition), (3, 2, Some((1, 2))));
        assert_eq!(
            health_line(&o),
            "health: degraded, quorum: all_keys; 2 of 3 members answer; transition 1 -> 2"
        );
        let o = observed(
            &asked,
            &[report(1, true), report(2, false), report(3, false)],
        );
        assert!(health_line(&o).starts_with("health: unavailable, quorum: no_keys; 1 of 3"));
        // A node of no live layout is not counted.
        asked.nodes[2].not_member = true;
        let o = observed(
            &asked,
            &[report(1, true), report(2, true), report(3, false)],
        );
        assert_eq!((o.members, o.answering), (2, 2));
    }
}
