//! `ataman healthcheck`: one probe of a node's `GET /livez` (or
//! `GET /readyz` with `--ready`), for a container image without a shell
//! or `curl` (docs/API.md, "Health").
//!
//! Exit codes: [`EXIT_HEALTHY`] on a 200, [`EXIT_UNHEALTHY`] on any other
//! status, [`EXIT_USAGE`] on bad arguments, [`EXIT_NO_ANSWER`] when no
//! answer came within `--timeout-ms`; every failure says why on one line
//! of stderr. The whole probe is bounded by `--timeout-ms`.

use crate::ctl::url_or_default;
use crate::http_client::exchange::exchange_prefix;
use crate::http_client::url::BaseUrl;
use std::process::ExitCode;
use std::time::Duration;

/// The node answered 200.
pub const EXIT_HEALTHY: u8 = 0;
/// The node answered, not 200 (a 503 with its reason).
pub const EXIT_UNHEALTHY: u8 = 1;
/// The arguments are wrong (clap also exits 2 on bad usage).
pub const EXIT_USAGE: u8 = 2;
/// No answer: refused, reset, not HTTP, or not within the timeout.
pub const EXIT_NO_ANSWER: u8 = crate::ctl::EXIT_NO_ANSWER;
/// Default bound on the whole probe, in milliseconds.
pub const HEALTHCHECK_TIMEOUT_MS_DEFAULT: u64 = 3_000;
/// Largest `--timeout-ms` (one minute: a probe, not a wait).
pub const HEALTHCHECK_TIMEOUT_MS_MAX: u64 = 60_000;
/// Longest part of the node's answer quoted in the message, in bytes
/// (before escaping).
pub const HEALTHCHECK_MESSAGE_BYTES_MAX: usize = 200;
/// Most bytes of the answer's body read; the rest is left unread.
pub const HEALTHCHECK_BODY_BYTES_MAX: usize = 4 * 1024;

/// `ataman healthcheck` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthcheckArgs {
    /// The node: `http://HOST[:PORT]` or `https://HOST[:PORT]` [default:
    /// http://127.0.0.1:19234, https:// with --tls-ca].
    #[arg(long, env = "ATAMAN_URL")]
    pub url: Option<String>,
    /// Probe `GET /readyz` (ready for client traffic) instead of `GET /livez`.
    #[arg(long)]
    pub ready: bool,
    /// Bound on the whole probe, in milliseconds.
    #[arg(long, default_value_t = HEALTHCHECK_TIMEOUT_MS_DEFAULT)]
    pub timeout_ms: u64,
    /// The CA an `https://` node's certificate is verified against (PEM).
    #[arg(long)]
    pub tls_ca: Option<std::path::PathBuf>,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 200, with the body's first line.
    Healthy(String),
    /// Another status, with the body's first line.
    Unhealthy(u16, String),
    /// No answer, and why.
    NoAnswer(String),
}

/// The first line of `body`, at most [`HEALTHCHECK_MESSAGE_BYTES_MAX`]
/// bytes of it, printable ASCII only: every other byte (a terminal
/// escape, a control, non-ASCII) is written `\xNN`.
fn first_line(body: &[u8]) -> String {
    let line = body.split(|&b| b == b'\n').next().unwrap_or(b"");
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = &line[..line.len().min(HEALTHCHECK_MESSAGE_BYTES_MAX)];
    let mut out = String::with_capacity(line.len());
    for &b in line {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.trim().to_owned()
}

/// Probes `path` of `url` once, bounded by `timeout` as a whole.
pub fn probe(url: &BaseUrl, path: &'static str, timeout: Duration) -> Outcome {
    let (tx, rx) = std::sync::mpsc::channel();
    let url = url.clone();
    // The exchange bounds each step; the channel bounds the whole. A
    // probe that overruns is left behind: the process exits.
    let spawned = std::thread::Builder::new()
        .name("ataman-healthcheck".into())
        .spawn(move || {
            let _ = tx.send(exchange_prefix(
                &url,
                "GET",
                path,
                timeout,
                HEALTHCHECK_BODY_BYTES_MAX,
            ));
        });
    if let Err(e) = spawned {
        return Outcome::NoAnswer(format!("cannot start the probe: {e}"));
    }
    match rx.recv_timeout(timeout) {
        Ok(Ok(r)) if r.status == 200 => Outcome::Healthy(first_line(&r.body)),
        Ok(Ok(r)) => Outcome::Unhealthy(r.status, first_line(&r.body)),
        Ok(Err(e)) => Outcome::NoAnswer(e.to_string()),
        Err(_) => Outcome::NoAnswer(format!("no answer within {} ms", timeout.as_millis())),
    }
}

/// Runs `healthcheck`: the exit code, a line on stdout when healthy and
/// on stderr otherwise.
pub fn run(args: &HealthcheckArgs) -> ExitCode {
    let url_text = url_or_default(args.url.as_deref(), args.tls_ca.as_deref());
    // `http://h:p/` is the node too; its paths are printed without `//`.
    let url_text = url_text.trim_end_matches('/');
    let usage = |why: String| {
        eprintln!("ataman healthcheck: {why}");
        ExitCode::from(EXIT_USAGE)
    };
    let url = match BaseUrl::parse(url_text) {
        Ok(url) => url,
        Err(e) => return usage(e.to_string()),
    };
    if args.timeout_ms == 0 || args.timeout_ms > HEALTHCHECK_TIMEOUT_MS_MAX {
        return usage(format!(
            "--timeout-ms must be between 1 and {HEALTHCHECK_TIMEOUT_MS_MAX}, not {}",
            args.timeout_ms
        ));
    }
    if url.https && args.tls_ca.is_none() {
        return usage(format!("{url_text}: an https:// URL needs --tls-ca FILE"));
    }
    if let Err(e) = crate::http_client::tls::set_ca_if(args.tls_ca.as_deref()) {
        return usage(e);
    }
    let path = if args.ready { "/readyz" } else { "/livez" };
    match probe(&url, path, Duration::from_millis(args.timeout_ms)) {
        Outcome::Healthy(_) => {
            // The documented form, not the node's text.
            let word = if args.ready { "ready" } else { "live" };
            println!("{url_text}{path}: {word}");
            ExitCode::from(EXIT_HEALTHY)
        }
        Outcome::Unhealthy(status, line) => {
            eprintln!("ataman healthcheck: {url_text}{path} answered {status}: {line}");
            ExitCode::from(EXIT_UNHEALTHY)
        }
        Outcome::NoAnswer(why) => {
            eprintln!("ataman healthcheck: {url_text}{path}: no answer: {why}");
            ExitCode::from(EXIT_NO_ANSWER)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message is the body's first line, cut at the bound.
    #[test]
    fn first_line_is_bounded() {
        assert_eq!(
            first_line(b"replaying: the log\nmore"),
            "replaying: the log"
        );
        assert_eq!(first_line(b""), "");
        let long = "a".repeat(2 * HEALTHCHECK_MESSAGE_BYTES_MAX);
        assert_eq!(
            first_line(long.as_bytes()).len(),
            HEALTHCHECK_MESSAGE_BYTES_MAX
        );
        assert_eq!(first_line(b"ok\r\nnext"), "ok");
    }

    /// A terminal escape, a control, a backslash and non-ASCII are
    /// written `\xNN`: nothing the node sends reaches a terminal raw.
    #[test]
    fn first_line_escapes_what_is_not_printable() {
        assert_eq!(
            first_line("\x1b[31mred\x07 \\ é".as_bytes()),
            "\\x1b[31mred\\x07 \\x5c \\xc3\\xa9"
        );
    }
}
