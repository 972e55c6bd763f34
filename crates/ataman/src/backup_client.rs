//! What every `ataman backup` command shares as a client of the nodes
//! (docs/BACKUP.md): the node's arguments as `ataman ctl` takes them, one
//! request and its checked answer, the exit codes and the failure type.

use crate::ctl::url_or_default;
use crate::http_client::exchange::exchange;
use crate::http_client::url::BaseUrl;
use std::path::PathBuf;
use std::time::Duration;

/// Done: the backup is complete and intact (or the request succeeded).
pub const EXIT_OK: u8 = 0;
/// `verify`: the backup is incomplete or damaged (each problem named on stderr).
pub const EXIT_DAMAGED: u8 = 1;
/// The node refused, or bad usage, or local input/output failed.
pub const EXIT_REFUSED: u8 = 2;
/// No valid answer from the node.
pub const EXIT_NO_ANSWER: u8 = 3;

/// The node and the client's options, as `ataman ctl` takes them.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// The node: `http://HOST[:PORT]` or `https://HOST[:PORT]`.
    #[arg(long, env = "ATAMAN_URL")]
    pub url: Option<String>,
    /// The CA an `https://` node's certificate is verified against (PEM).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// A file whose first token is sent as `Authorization: Bearer` (an admin token).
    #[arg(long, env = "ATAMAN_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Bound on connecting and on each read and write, in milliseconds
    /// [default: 10000; for `create`, 600000].
    #[arg(long)]
    pub timeout_ms: Option<u64>,
}

/// What went wrong: the exit code, and the text for stderr.
#[derive(Debug)]
pub struct Failed(pub u8, pub String);

/// A failure with [`EXIT_REFUSED`].
pub fn refused(text: impl Into<String>) -> Failed {
    Failed(EXIT_REFUSED, text.into())
}

/// The node's URL, with the token and CA set up for the shared client.
pub fn connect(node: &NodeArgs) -> Result<BaseUrl, Failed> {
    crate::http_client::token::init(node.token_file.as_deref()).map_err(refused)?;
    let url = url_or_default(node.url.as_deref(), node.tls_ca.as_deref());
    let url = BaseUrl::parse(url).map_err(|e| refused(e.to_string()))?;
    crate::http_client::tls::set_ca_if(node.tls_ca.as_deref()).map_err(refused)?;
    Ok(url)
}

/// One request; the body when the status is `expected`.
pub fn ask(
    url: &BaseUrl,
    method: &str,
    target: &str,
    expected: u16,
    timeout: Duration,
) -> Result<Vec<u8>, Failed> {
    let body: Option<&[u8]> = (method == "POST").then_some(b"");
    let response = exchange(url, method, target, body, timeout)
        .map_err(|e| Failed(EXIT_NO_ANSWER, format!("ataman backup: {e}")))?;
    if response.status != expected {
        return Err(refused(format!(
            "ataman backup: the node answered {} {}: {}",
            response.status,
            response.reason,
            String::from_utf8_lossy(&response.body).trim_end()
        )));
    }
    Ok(response.body)
}

/// The answer's JSON.
pub fn json(body: &[u8]) -> Result<serde_json::Value, Failed> {
    serde_json::from_slice(body).map_err(|e| {
        Failed(
            EXIT_NO_ANSWER,
            format!("ataman backup: invalid answer: {e}"),
        )
    })
}

/// The client's bound on each read and write: `--timeout-ms`, or `default_ms`.
pub fn io_timeout(node: &NodeArgs, default_ms: u64) -> Duration {
    Duration::from_millis(node.timeout_ms.unwrap_or(default_ms).max(1))
}
