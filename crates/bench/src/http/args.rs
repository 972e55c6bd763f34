//! `ataman bench http` options and the parsers of their spellings
//! (`10s`, `100-200`, `zipf:0.99`, `mixed:90`).

use std::path::PathBuf;
use std::time::Duration;

/// `ataman bench http` options (wrk2's, plus the key-value workload).
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Target, e.g. http://127.0.0.1:19234, or several separated by commas
    /// (http://127.0.0.1:19234,http://127.0.0.1:19235): connection i goes to
    /// target i mod N. Requests go to `<path>/v0/entity?id=K`.
    #[arg(long)]
    pub url: String,
    /// The CA the certificates of `https://` targets are verified against (PEM).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Total requests per second over all connections; 0 = closed loop, as fast as possible.
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// Measured run length (`500ms`, `10s`, `2m`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Keep-alive connections, each with one request in flight.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Client threads; connections are spread round-robin over them.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// put-random | get-existing | get-random | delete-random | mixed:READ%.
    #[arg(long, default_value = "get-random", value_parser = parse_workload)]
    pub workload: WorkloadKind,
    /// Ids are 1..=keys (decimal, unpadded, as in the published wrk scripts).
    #[arg(long, default_value_t = 10_000_000)]
    pub keys: u64,
    /// PUT body bytes: `S` or `MIN-MAX` (uniform).
    #[arg(long, default_value = "8", value_parser = parse_value_size)]
    pub value_size: ValueSize,
    /// uniform | zipf:THETA (0 < THETA < 1; id 1 is the hottest).
    #[arg(long, default_value = "uniform", value_parser = parse_distribution)]
    pub distribution: Distribution,
    /// `ack` query parameter (sent only when given).
    #[arg(long)]
    pub ack: Option<u32>,
    /// `from` query parameter (sent only when given).
    #[arg(long)]
    pub from: Option<u32>,
    /// Before the run, PUT ids 1..=N (closed loop); get-existing and mixed reads then draw from them.
    #[arg(long, default_value_t = 0)]
    pub fill: u64,
    /// Run the schedule this long before measuring (`0s` = none).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// A request without its response this long after it was sent is a timeout; the connection is reopened.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// While requests are in flight, a planned send may wait this long for
    /// a response's wake-up instead of a timer's of its own (`0us` = wake
    /// exactly; at most 1ms); used only from rate/threads >= 1/slack. Never
    /// early; the lag is charged and reported.
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    pub send_slack: Duration,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw latency by percentile and throughput over time into this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Name of the run in the JSON and in plots (default: workload and rate).
    #[arg(long)]
    pub label: Option<String>,
    /// Print the live progress line even when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Omit the detailed percentile spectrum from the text output.
    #[arg(long)]
    pub no_spectrum: bool,
    /// RNG seed (ids, values).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A file whose first token is sent as `Authorization: Bearer` (default: the `ATAMAN_TOKEN` variable).
    #[arg(long, env = "ATAMAN_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
}

impl HttpArgs {
    /// Defaults for everything but the target (for tests and scripts).
    pub fn new(url: &str) -> Self {
        HttpArgs {
            url: url.to_string(),
            tls_ca: None,
            rate: 1000,
            duration: Duration::from_secs(10),
            connections: 16,
            threads: 2,
            workload: WorkloadKind::GetRandom,
            keys: 10_000_000,
            value_size: ValueSize { min: 8, max: 8 },
            distribution: Distribution::Uniform,
            ack: None,
            from: None,
            fill: 0,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(2),
            send_slack: Duration::from_micros(100),
            json: None,
            plot: None,
            label: None,
            progress: false,
            no_spectrum: false,
            seed: 1,
            token_file: None,
        }
    }

    /// The bearer token to send: the first field of the first line of
    /// `--token-file` that is neither blank nor a comment, else `ATAMAN_TOKEN`.
    pub fn bearer(&self) -> Result<Option<String>, String> {
        let Some(path) = &self.token_file else {
            return Ok(std::env::var("ATAMAN_TOKEN")
                .ok()
                .filter(|t| !t.trim().is_empty()));
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?;
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .and_then(|l| l.split_ascii_whitespace().next())
            .map(|t| Some(t.to_owned()))
            .ok_or_else(|| format!("--token-file {}: no token in it", path.display()))
    }
}

/// Which requests a run sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WorkloadKind {
    /// PUT of random ids.
    PutRandom,
    /// GET of ids loaded before (1..=fill, or 1..=keys without --fill).
    GetExisting,
    /// GET of random ids in 1..=keys (misses are 404, counted as non-2xx).
    GetRandom,
    /// DELETE of random ids.
    DeleteRandom,
    /// This percentage of GETs of existing ids, the rest PUTs of random ids.
    Mixed {
        /// 0..=100.
        read_percent: u8,
    },
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadKind::PutRandom => f.write_str("put-random"),
            WorkloadKind::GetExisting => f.write_str("get-existing"),
            WorkloadKind::GetRandom => f.write_str("get-random"),
            WorkloadKind::DeleteRandom => f.write_str("delete-random"),
            WorkloadKind::Mixed { read_percent } => write!(f, "mixed:{read_percent}"),
        }
    }
}

/// PUT body sizes, uniform in `min..=max` bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueSize {
    /// Smallest body, bytes.
    pub min: usize,
    /// Largest body, bytes.
    pub max: usize,
}

/// How ids are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Every id equally likely.
    Uniform,
    /// Zipfian with this skew: id 1 the most frequent.
    Zipf {
        /// In (0, 1).
        theta: f64,
    },
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::Uniform => f.write_str("uniform"),
            Distribution::Zipf { theta } => write!(f, "zipf:{theta}"),
        }
    }
}

/// Largest PUT body the generator builds, bytes (values are windows of a
/// pool this large plus the body, so a run costs no per-byte RNG work).
pub const VALUE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit_ms) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3_600_000.0)
    } else {
        (text, 1000.0)
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("bad duration {text:?} (try 500ms, 10s, 2m)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("bad duration {text:?}"));
    }
    Ok(Duration::from_secs_f64(value * unit_ms / 1000.0))
}

/// `put-random`, `get-existing`, `get-random`, `delete-random`, `mixed:READ%`.
pub fn parse_workload(text: &str) -> Result<WorkloadKind, String> {
    match text {
        "put-random" => Ok(WorkloadKind::PutRandom),
        "get-existing" => Ok(WorkloadKind::GetExisting),
        "get-random" => Ok(WorkloadKind::GetRandom),
        "delete-random" => Ok(WorkloadKind::DeleteRandom),
        _ => {
            let percent = text
                .strip_prefix("mixed:")
                .map(|p| p.trim_end_matches('%'))
                .and_then(|p| p.parse::<u8>().ok())
                .filter(|p| *p <= 100)
                .ok_or_else(|| {
                    format!(
                        "bad workload {text:?}: put-random, get-existing, get-random, delete-random or mixed:READ% (0..=100)"
                    )
                })?;
            Ok(WorkloadKind::Mixed {
                read_percent: percent,
            })
        }
    }
}

/// `S` or `MIN-MAX` bytes, at most [`VALUE_BYTES_MAX`].
pub fn parse_value_size(text: &str) -> Result<ValueSize, String> {
    let bad = || format!("bad value size {text:?}: S or MIN-MAX bytes");
    let (min, max) = match text.split_once('-') {
        Some((a, b)) => (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        ),
        None => {
            let s: usize = text.trim().parse().map_err(|_| bad())?;
            (s, s)
        }
    };
    if min > max || max > VALUE_BYTES_MAX {
        return Err(format!(
            "bad value size {text:?}: need MIN <= MAX <= {VALUE_BYTES_MAX}"
        ));
    }
    Ok(ValueSize { min, max })
}

/// `uniform` or `zipf:THETA` with 0 < THETA < 1.
pub fn parse_distribution(text: &str) -> Result<Distribution, String> {
    if text == "uniform" {
        return Ok(Distribution::Uniform);
    }
    text.strip_prefix("zipf:")
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| *t > 0.0 && *t < 1.0)
        .map(|theta| Distribution::Zipf { theta })
        .ok_or_else(|| format!("bad distribution {text:?}: uniform or zipf:THETA, 0 < THETA < 1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every documented spelling parses and nonsense is refused.
    #[test]
    fn spellings() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_duration("0us"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("x").is_err());
        assert_eq!(
            parse_workload("mixed:90%"),
            Ok(WorkloadKind::Mixed { read_percent: 90 })
        );
        assert!(parse_workload("mixed:101").is_err());
        assert_eq!(
            parse_value_size("100-200"),
            Ok(ValueSize { min: 100, max: 200 })
        );
        assert!(parse_value_size("200-100").is_err());
        assert_eq!(
            parse_distribution("zipf:0.99"),
            Ok(Distribution::Zipf { theta: 0.99 })
        );
        assert!(parse_distribution("zipf:1").is_err());
        assert_eq!(
            parse_workload("get-existing")
                .map(|w| w.to_string())
                .as_deref(),
            Ok("get-existing")
        );
    }
}
