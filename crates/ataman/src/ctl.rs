//! `ataman ctl`: a small command-line client of the `/v0` HTTP API
//! (docs/API.md), documented in docs/CTL.md.
//!
//! The requests go through the shared blocking client
//! ([`crate::http_client`]); this file maps commands to requests and
//! answers to output and exit codes.
//!
//! Exit codes: [`EXIT_OK`], [`EXIT_NOT_FOUND`], [`EXIT_REFUSED`],
//! [`EXIT_NO_ANSWER`], [`EXIT_REPAIR_FAILED`].

pub mod layout;
mod layout_run;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::http_client::exchange::{ClientError, exchange};
use crate::http_client::response::Response;
use crate::http_client::url::{BaseUrl, target};

/// The command succeeded.
pub const EXIT_OK: u8 = 0;
/// `get`: the key is absent or deleted (404).
pub const EXIT_NOT_FOUND: u8 = 1;
/// The node answered with an unexpected status, or the arguments or local
/// input/output failed (clap also exits 2 on bad usage).
pub const EXIT_REFUSED: u8 = 2;
/// No valid answer: the connection failed, timed out, or the answer was
/// not valid HTTP or not in the documented format.
pub const EXIT_NO_ANSWER: u8 = 3;
/// `repair`: the round finished, but a session with a peer failed.
pub const EXIT_REPAIR_FAILED: u8 = 4;

/// Address used when neither `--url` nor `ATAMAN_URL` is given.
pub const URL_DEFAULT: &str = "http://127.0.0.1:19234";
/// [`URL_DEFAULT`] when `--tls-ca` is given: a CA means the node speaks TLS.
pub const URL_DEFAULT_TLS: &str = "https://127.0.0.1:19234";

/// The node URL of a command: `--url` (or `ATAMAN_URL`) when given, else
/// the default port on 127.0.0.1, over `https://` when a CA was given (a
/// `--tls-ca` is only ever needed for a TLS node, so the plain default
/// would only fail against it).
pub fn url_or_default<'a>(url: Option<&'a str>, tls_ca: Option<&std::path::Path>) -> &'a str {
    match (url, tls_ca) {
        (Some(url), _) => url,
        (None, Some(_)) => URL_DEFAULT_TLS,
        (None, None) => URL_DEFAULT,
    }
}
/// Bound on connecting and on every read and write, in milliseconds.
pub const TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// `repair`: bound on the whole command (start, wait, report), in milliseconds.
pub const REPAIR_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// `repair`: time between two polls of `GET /v0/repair`.
const REPAIR_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// `ataman ctl` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct CtlArgs {
    /// Node to talk to: `http://HOST[:PORT]` or `https://HOST[:PORT]` [default:
    /// http://127.0.0.1:19234, https:// with --tls-ca].
    #[arg(long, global = true, env = "ATAMAN_URL")]
    pub url: Option<String>,
    /// The CA an `https://` node's certificate is verified against (PEM).
    #[arg(long, global = true)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// `ack` query parameter, passed through as is (the node validates it).
    #[arg(long, global = true)]
    pub ack: Option<String>,
    /// `from` query parameter, passed through as is (the node validates it).
    #[arg(long, global = true)]
    pub from: Option<String>,
    /// Bound on connecting and on each read and write, in milliseconds
    /// [default: 10000]; for `repair`, the bound on the whole wait [default: 60000].
    #[arg(long, global = true)]
    pub timeout_ms: Option<u64>,
    /// A file whose first token is sent as `Authorization: Bearer` (default: the `ATAMAN_TOKEN` variable).
    #[arg(long, global = true, env = "ATAMAN_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: CtlCommand,
}

/// One `ataman ctl` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CtlCommand {
    /// Print the value of KEY, raw bytes, to stdout.
    Get {
        /// The key (its bytes as given on the command line).
        key: OsString,
    },
    /// Store a value: VALUE, the contents of --file, or stdin when VALUE is `-`.
    Put {
        /// The key.
        key: OsString,
        /// The value; `-` reads it from stdin.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        value: Option<OsString>,
        /// Read the value from this file.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Delete KEY (succeeds also when the key never existed).
    Delete {
        /// The key.
        key: OsString,
    },
    /// Print the live entries from --start (inclusive) to --end (exclusive),
    /// one `key<TAB>value` line each, bytes raw.
    Range {
        /// First key (inclusive).
        #[arg(long)]
        start: OsString,
        /// End key (exclusive); no end when absent.
        #[arg(long)]
        end: Option<OsString>,
    },
    /// Print the node's status answer.
    Status,
    /// Run an anti-entropy round on the node now (POST /v0/repair), wait
    /// until it finished, print what each peer session did; exit 0 when
    /// every session succeeded.
    Repair,
    /// The cluster's layout (docs/API.md, "Layout").
    Layout {
        /// What to do with it.
        #[command(subcommand)]
        command: layout::LayoutCommand,
    },
}

/// What went wrong, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
enum CtlError {
    #[error("{0}")]
    Usage(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("the node answered {status} {reason}: {body}")]
    Status {
        status: u16,
        reason: String,
        body: String,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("invalid answer: {0}")]
    Format(String),
    #[error("repair round {round} did not finish within {timeout_ms} ms")]
    RepairTimeout { round: u64, timeout_ms: u64 },
    #[error("repair round {0} failed (see the peers above)")]
    RepairFailed(u64),
    #[error("{what}: {source}")]
    LocalIo {
        what: String,
        source: std::io::Error,
    },
}

impl CtlError {
    fn exit_code(&self) -> u8 {
        match self {
            CtlError::NotFound(_) => EXIT_NOT_FOUND,
            CtlError::Usage(_) | CtlError::Status { .. } | CtlError::LocalIo { .. } => EXIT_REFUSED,
            CtlError::Client(_) | CtlError::Format(_) | CtlError::RepairTimeout { .. } => {
                EXIT_NO_ANSWER
            }
            CtlError::RepairFailed(_) => EXIT_REPAIR_FAILED,
        }
    }
}

/// Runs one `ataman ctl` command, printing to stdout and stderr.
pub fn run(args: CtlArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match execute(&args, &mut out) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("ataman ctl: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The `ack`/`from` query pairs given on the command line.
fn consistency(args: &CtlArgs) -> Vec<(&'static str, &[u8])> {
    let mut query = Vec::new();
    if let Some(ack) = &args.ack {
        query.push(("ack", ack.as_bytes()));
    }
    if let Some(from) = &args.from {
        query.push(("from", from.as_bytes()));
    }
    query
}

/// The answer's status unless it is `expected`, as an error with the body.
fn expect_status(response: &Response, expected: u16) -> Result<(), CtlError> {
    if response.status == expected {
        return Ok(());
    }
    Err(CtlError::Status {
        status: response.status,
        reason: response.reason.clone(),
        body: String::from_utf8_lossy(&response.body)
            .trim_end()
            .to_string(),
    })
}

fn read_value(value: Option<&OsString>, file: Option<&PathBuf>) -> Result<Vec<u8>, CtlError> {
    match (value, file) {
        (_, Some(path)) => std::fs::read(path).map_err(|source| CtlError::LocalIo {
            what: format!("reading {}", path.display()),
            source,
        }),
        (Some(v), None) if v.as_bytes() == b"-" => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut bytes)
                .map_err(|source| CtlError::LocalIo {
                    what: "reading stdin".to_string(),
                    source,
                })?;
            Ok(bytes)
        }
        (Some(v), None) => Ok(v.as_bytes().to_vec()),
        (None, None) => Err(CtlError::Usage(
            "put needs a VALUE, `-` (stdin) or --file".to_string(),
        )),
    }
}

/// Writes a `/v0/entities` answer as `key<TAB>value` lines. Each chunk is
/// one entry, `key \n value`; the key ends at the first `\n`.
pub fn write_range(chunks: &[Vec<u8>], out: &mut dyn Write) -> Result<(), String> {
    for (i, chunk) in chunks.iter().enumerate() {
        let newline = chunk
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| format!("entry {i} has no newline between key and value"))?;
        let (key, value) = (&chunk[..newline], &chunk[newline + 1..]);
        let line = [key, b"\t", value, b"\n"].concat();
        out.write_all(&line)
            .map_err(|e| format!("writing to stdout: {e}"))?;
    }
    Ok(())
}

fn write_out(out: &mut dyn Write, bytes: &[u8]) -> Result<(), CtlError> {
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|source| CtlError::LocalIo {
            what: "writing to stdout".to_string(),
            source,
        })
}

fn execute(args: &CtlArgs, out: &mut dyn Write) -> Result<(), CtlError> {
    crate::http_client::token::init(args.token_file.as_deref()).map_err(CtlError::Usage)?;
    let url = url_or_default(args.url.as_deref(), args.tls_ca.as_deref());
    let url = BaseUrl::parse(url).map_err(|e| CtlError::Usage(e.to_string()))?;
    crate::http_client::tls::set_ca_if(args.tls_ca.as_deref()).map_err(CtlError::Usage)?;
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT).max(1));
    let consistency = consistency(args);
    match &args.command {
        CtlCommand::Get { key } => {
            let query = [&[("id", key.as_bytes())][..], &consistency].concat();
            let response = exchange(&url, "GET", &target("/v0/entity", &query), None, timeout)?;
            if response.status == 404 {
                return Err(CtlError::NotFound(key.to_string_lossy().into_owned()));
            }
            expect_status(&response, 200)?;
            write_out(out, &response.body)
        }
        CtlCommand::Put { key, value, file } => {
            let body = read_value(value.as_ref(), file.as_ref())?;
            let query = [&[("id", key.as_bytes())][..], &consistency].concat();
            let target = target("/v0/entity", &query);
            let response = exchange(&url, "PUT", &target, Some(&body), timeout)?;
            expect_status(&response, 201)
        }
        CtlCommand::Delete { key } => {
            let query = [&[("id", key.as_bytes())][..], &consistency].concat();
            let target = target("/v0/entity", &query);
            let response = exchange(&url, "DELETE", &target, None, timeout)?;
            expect_status(&response, 202)
        }
        CtlCommand::Range { start, end } => {
            let mut query = vec![("start", start.as_bytes())];
            if let Some(end) = end {
                query.push(("end", end.as_bytes()));
            }
            query.extend_from_slice(&consistency);
            let target = target("/v0/entities", &query);
            let response = exchange(&url, "GET", &target, None, timeout)?;
            expect_status(&response, 200)?;
            let chunks = response
                .chunks
                .as_ref()
                .ok_or_else(|| CtlError::Format("the range answer is not chunked".to_string()))?;
            write_range(chunks, out).map_err(CtlError::Format)
        }
        CtlCommand::Repair => {
            let total_ms = args.timeout_ms.unwrap_or(REPAIR_TIMEOUT_MS_DEFAULT).max(1);
            repair(&url, Duration::from_millis(total_ms), out)
        }
        CtlCommand::Layout { command } => {
            let total = args.timeout_ms.map(Duration::from_millis);
            let io = timeout.min(Duration::from_millis(TIMEOUT_MS_DEFAULT));
            layout_run::run(&url, command, io, total, out)
        }
        CtlCommand::Status => {
            let response = exchange(&url, "GET", "/v0/status", None, timeout)?;
            expect_status(&response, 200)?;
            let mut body = response.body;
            if body.last() != Some(&b'\n') {
                body.push(b'\n');
            }
            write_out(out, &body)
        }
    }
}

/// `repair`: starts a round, polls until a round at least as new finished
/// (before `total`), prints it.
fn repair(url: &BaseUrl, total: Duration, out: &mut dyn Write) -> Result<(), CtlError> {
    let deadline = std::time::Instant::now() + total;
    let io_timeout = total.min(Duration::from_millis(TIMEOUT_MS_DEFAULT));
    let response = exchange(url, "POST", "/v0/repair", Some(&[]), io_timeout)?;
    expect_status(&response, 202)?;
    let started: serde_json::Value = serde_json::from_slice(&response.body)
        .map_err(|e| CtlError::Format(format!("POST /v0/repair: {e}")))?;
    let round = started["round"]
        .as_u64()
        .ok_or_else(|| CtlError::Format("POST /v0/repair: no round number".into()))?;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(CtlError::RepairTimeout {
                round,
                timeout_ms: total.as_millis() as u64,
            });
        }
        let response = exchange(url, "GET", "/v0/repair", None, io_timeout.min(left))?;
        expect_status(&response, 200)?;
        let state: serde_json::Value = serde_json::from_slice(&response.body)
            .map_err(|e| CtlError::Format(format!("GET /v0/repair: {e}")))?;
        let last = &state["last"];
        if last["round"].as_u64().is_some_and(|r| r >= round) {
            let (text, ok) = repair_summary(last).map_err(CtlError::Format)?;
            write_out(out, text.as_bytes())?;
            return if ok {
                Ok(())
            } else {
                Err(CtlError::RepairFailed(
                    last["round"].as_u64().unwrap_or(round),
                ))
            };
        }
        std::thread::sleep(REPAIR_POLL_INTERVAL.min(left));
    }
}

/// The report of a finished round (the `last` object of `GET /v0/repair`)
/// as lines: the round, then one line per peer. Returns the text and `ok`.
pub fn repair_summary(last: &serde_json::Value) -> Result<(String, bool), String> {
    let number = |v: &serde_json::Value, name: &str| {
        v[name]
            .as_u64()
            .ok_or_else(|| format!("round report without {name}"))
    };
    let ok = last["ok"]
        .as_bool()
        .ok_or_else(|| "round report without ok".to_string())?;
    let round = number(last, "round")?;
    let took_ms = number(last, "finished_ms")?.saturating_sub(number(last, "started_ms")?);
    let peers = last["peers"]
        .as_array()
        .ok_or_else(|| "round report without peers".to_string())?;
    let mut text = format!(
        "round {round}: {} in {took_ms} ms, {} peer(s)\n",
        if ok { "ok" } else { "FAILED" },
        peers.len()
    );
    for p in peers {
        let url = p["url"].as_str().unwrap_or("?");
        let _ = std::fmt::Write::write_fmt(
            &mut text,
            format_args!(
                "{url}\t{}\tbuckets_differing={}\tkeys_fetched={}\tkeys_pushed={}\tkeys_refused={}\tbytes_sent={}\tbytes_received={}",
                if p["ok"].as_bool() == Some(true) {
                    "ok"
                } else {
                    "failed"
                },
                number(p, "buckets_differing")?,
                number(p, "keys_fetched")?,
                number(p, "keys_pushed")?,
                number(p, "keys_refused")?,
                number(p, "bytes_sent")?,
                number(p, "bytes_received")?,
            ),
        );
        if let Some(e) = p["error"].as_str() {
            text.push_str("\terror=");
            text.push_str(e);
        }
        text.push('\n');
    }
    Ok((text, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries print as key TAB value lines; the key ends at the first newline.
    #[test]
    fn range_lines() {
        let mut out = Vec::new();
        let chunks = vec![b"a\n1".to_vec(), b"b\nx\ny".to_vec(), b"c\n".to_vec()];
        write_range(&chunks, &mut out).unwrap();
        assert_eq!(out, b"a\t1\nb\tx\ny\nc\t\n");
    }

    /// A round report prints one line for the round and one per peer, with
    /// the error of a failed peer; a report missing a field is an error.
    #[test]
    fn repair_summary_lines() {
        let last: serde_json::Value = serde_json::from_str(
            r#"{"round":2,"started_ms":10,"finished_ms":25,"ok":false,"peers":[
            {"url":"http://a:1","ok":true,"error":null,"buckets_differing":3,"keys_fetched":4,"keys_pushed":5,"keys_refused":1,"bytes_sent":6,"bytes_received":7},
            {"url":"http://b:2","ok":false,"error":"cannot connect","buckets_differing":0,"keys_fetched":0,"keys_pushed":0,"keys_refused":0,"bytes_sent":0,"bytes_received":0}]}"#,
        )
        .unwrap();
        let (text, ok) = repair_summary(&last).unwrap();
        assert!(!ok);
        assert_eq!(
            text,
            "round 2: FAILED in 15 ms, 2 peer(s)\n\
             http://a:1\tok\tbuckets_differing=3\tkeys_fetched=4\tkeys_pushed=5\tkeys_refused=1\tbytes_sent=6\tbytes_received=7\n\
             http://b:2\tfailed\tbuckets_differing=0\tkeys_fetched=0\tkeys_pushed=0\tkeys_refused=0\tbytes_sent=0\tbytes_received=0\terror=cannot connect\n"
        );
        let broken: serde_json::Value = serde_json::from_str(r#"{"round":1,"ok":true}"#).unwrap();
        assert!(repair_summary(&broken).is_err());
        assert_eq!(CtlError::RepairFailed(2).exit_code(), EXIT_REPAIR_FAILED);
    }

    /// Without `--url` the node is the default port on 127.0.0.1, over
    /// https:// when `--tls-ca` is given (docs/CTL.md, "Options"); a given
    /// URL is kept as it is.
    #[test]
    fn default_url_follows_tls_ca() {
        let ca = std::path::Path::new("ca.crt");
        assert_eq!(url_or_default(None, None), "http://127.0.0.1:19234");
        assert_eq!(url_or_default(None, Some(ca)), "https://127.0.0.1:19234");
        assert_eq!(url_or_default(Some("http://h:1"), Some(ca)), "http://h:1");
        assert_eq!(url_or_default(Some("https://h:1"), None), "https://h:1");
    }

    /// A chunk without a newline is a format error, not a panic.
    #[test]
    fn range_chunk_without_newline_is_error() {
        let mut out = Vec::new();
        assert!(write_range(&[b"abc".to_vec()], &mut out).is_err());
    }

    /// Exit codes: 404 → 1, other statuses and usage → 2, no answer → 3.
    #[test]
    fn exit_codes() {
        assert_eq!(CtlError::NotFound("k".into()).exit_code(), EXIT_NOT_FOUND);
        let status = CtlError::Status {
            status: 400,
            reason: "Bad Request".into(),
            body: "missing id".into(),
        };
        assert_eq!(status.exit_code(), EXIT_REFUSED);
        assert_eq!(
            status.to_string(),
            "the node answered 400 Bad Request: missing id"
        );
        assert_eq!(CtlError::Usage("x".into()).exit_code(), EXIT_REFUSED);
        assert_eq!(CtlError::Format("x".into()).exit_code(), EXIT_NO_ANSWER);
        let client = CtlError::Client(ClientError::TooManyInformational("h:1".into()));
        assert_eq!(client.exit_code(), EXIT_NO_ANSWER);
    }
}
