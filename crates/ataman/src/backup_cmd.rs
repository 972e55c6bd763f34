//! `ataman backup`: node checkpoints from the command line (docs/BACKUP.md).
//!
//! - `create --url URL --to DIR`: `POST /v0/backup` (the node takes a
//!   checkpoint and answers where), then the checkpoint copied from the
//!   path the node named into `DIR` (written as `DIR.partial`, renamed when
//!   whole), and checked there. The copy reads the node's disk: the command
//!   runs on the node's host (a copy over HTTP is not built yet).
//! - `verify DIR`: every file against the manifest, then a copy opened as
//!   an engine directory (`ataman_node::backup::verify`).
//! - `list --url URL`, `delete NAME --url URL`: the node's held checkpoints.
//!
//! Exit codes: [`EXIT_OK`], [`EXIT_DAMAGED`], [`EXIT_REFUSED`], [`EXIT_NO_ANSWER`].

use crate::ctl::{TIMEOUT_MS_DEFAULT, url_or_default};
use crate::http_client::exchange::exchange;
use crate::http_client::url::{BaseUrl, target};
use ataman_node::backup::verify::{self, Problem};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Done: the backup is complete and intact (or the request succeeded).
pub const EXIT_OK: u8 = 0;
/// `verify`: the backup is incomplete or damaged (each problem named on stderr).
pub const EXIT_DAMAGED: u8 = 1;
/// The node refused, or bad usage, or local input/output failed.
pub const EXIT_REFUSED: u8 = 2;
/// No valid answer from the node.
pub const EXIT_NO_ANSWER: u8 = 3;
/// `create`: how long the node may take to answer, by default (it answers
/// once the checkpoint is complete).
pub const CREATE_TIMEOUT_MS_DEFAULT: u64 = 600_000;

/// `ataman backup` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: BackupCommand,
}

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

/// One `ataman backup` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BackupCommand {
    /// Take a checkpoint of the node and copy it into DIR (which must not exist).
    Create {
        /// The node.
        #[command(flatten)]
        node: NodeArgs,
        /// Where the backup goes.
        #[arg(long)]
        to: PathBuf,
        /// The lease of the checkpoint on the node, in seconds [default: 3600].
        #[arg(long)]
        lease_s: Option<u64>,
    },
    /// Check a backup: exit 0 only when it is complete and intact and opens.
    Verify {
        /// The backup's directory.
        dir: PathBuf,
    },
    /// List the checkpoints the node holds.
    List {
        /// The node.
        #[command(flatten)]
        node: NodeArgs,
    },
    /// Remove a checkpoint the node holds (releasing what it pins).
    Delete {
        /// Its name.
        name: String,
        /// The node.
        #[command(flatten)]
        node: NodeArgs,
    },
}

/// What went wrong, and its exit code.
#[derive(Debug)]
struct Failed(u8, String);

fn refused(text: impl Into<String>) -> Failed {
    Failed(EXIT_REFUSED, text.into())
}

/// Runs one `ataman backup` command.
pub fn run(args: BackupArgs) -> ExitCode {
    match execute(&args.command) {
        Ok(text) => {
            print!("{text}");
            ExitCode::from(EXIT_OK)
        }
        Err(Failed(code, text)) => {
            eprint!("{text}");
            if !text.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(code)
        }
    }
}

fn execute(command: &BackupCommand) -> Result<String, Failed> {
    match command {
        BackupCommand::Verify { dir } => verify_dir(dir),
        BackupCommand::Create { node, to, lease_s } => create(node, to, *lease_s),
        BackupCommand::List { node } => list(node),
        BackupCommand::Delete { name, node } => delete(node, name),
    }
}

/// `verify DIR`: one line when intact; every problem, each naming its
/// file, when not.
fn verify_dir(dir: &Path) -> Result<String, Failed> {
    match verify::verify(dir) {
        Ok(v) => Ok(format!(
            "ok: {}: checkpoint {}, {} files, {} bytes, {} entries, {} hint entries, engine seq {}\n",
            dir.display(),
            v.manifest.name,
            v.manifest.files.len(),
            v.manifest.bytes(),
            v.entries,
            v.hint_entries,
            v.manifest.engine_seq
        )),
        Err(problems) => Err(Failed(EXIT_DAMAGED, damaged(dir, &problems))),
    }
}

fn damaged(dir: &Path, problems: &[Problem]) -> String {
    let mut text = String::new();
    for p in problems {
        text.push_str(&format!("ataman backup verify: {}: {p}\n", dir.display()));
    }
    text.push_str(&format!(
        "ataman backup verify: {}: NOT a complete, intact backup ({} problems)\n",
        dir.display(),
        problems.len()
    ));
    text
}

/// The node's URL, with the token and CA set up for the shared client.
fn connect(node: &NodeArgs) -> Result<BaseUrl, Failed> {
    crate::http_client::token::init(node.token_file.as_deref()).map_err(refused)?;
    let url = url_or_default(node.url.as_deref(), node.tls_ca.as_deref());
    let url = BaseUrl::parse(url).map_err(|e| refused(e.to_string()))?;
    crate::http_client::tls::set_ca_if(node.tls_ca.as_deref()).map_err(refused)?;
    Ok(url)
}

/// One request; the body when the status is `expected`.
fn ask(
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

fn json(body: &[u8]) -> Result<serde_json::Value, Failed> {
    serde_json::from_slice(body).map_err(|e| {
        Failed(
            EXIT_NO_ANSWER,
            format!("ataman backup: invalid answer: {e}"),
        )
    })
}

fn io_timeout(node: &NodeArgs, default_ms: u64) -> Duration {
    Duration::from_millis(node.timeout_ms.unwrap_or(default_ms).max(1))
}

/// `create`: the checkpoint taken, copied into `to`, checked there.
fn create(node: &NodeArgs, to: &Path, lease_s: Option<u64>) -> Result<String, Failed> {
    if to.exists() {
        return Err(refused(format!(
            "ataman backup create: {} exists: give a new directory",
            to.display()
        )));
    }
    let url = connect(node)?;
    let lease = lease_s.map(|s| s.to_string());
    let query: Vec<(&str, &[u8])> = lease
        .as_deref()
        .map(|s| vec![("lease_s", s.as_bytes())])
        .unwrap_or_default();
    let body = ask(
        &url,
        "POST",
        &target("/v0/backup", &query),
        200,
        io_timeout(node, CREATE_TIMEOUT_MS_DEFAULT),
    )?;
    let answer = json(&body)?;
    let (Some(name), Some(path)) = (answer["name"].as_str(), answer["path"].as_str()) else {
        return Err(Failed(
            EXIT_NO_ANSWER,
            "ataman backup create: the answer names no checkpoint".into(),
        ));
    };
    let partial = PathBuf::from(format!("{}.partial", to.display()));
    let copied = copy_tree(Path::new(path), &partial)
        .map_err(|e| {
            refused(format!(
                "ataman backup create: cannot copy checkpoint {name} from {path} (the copy reads the node's disk: run on its host): {e}"
            ))
        })
        .and_then(|()| {
            std::fs::rename(&partial, to).map_err(|e| {
                refused(format!(
                    "ataman backup create: cannot rename {} to {}: {e}",
                    partial.display(),
                    to.display()
                ))
            })
        });
    if let Err(e) = copied {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    let checked = verify_dir(to)?;
    Ok(format!(
        "checkpoint {name} of {}: {} files, {} bytes, engine seq {}\ncopied to {}\n{checked}",
        url.authority(),
        answer["files"],
        answer["bytes"],
        answer["engine_seq"],
        to.display()
    ))
}

/// Copies a directory tree, fsyncing every file and directory.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
            std::fs::File::open(&target)?.sync_all()?;
        }
    }
    std::fs::File::open(to)?.sync_all()
}

/// `list`: one line per held checkpoint, and the bytes they pin.
fn list(node: &NodeArgs) -> Result<String, Failed> {
    let url = connect(node)?;
    let body = ask(
        &url,
        "GET",
        "/v0/backup",
        200,
        io_timeout(node, TIMEOUT_MS_DEFAULT),
    )?;
    let answer = json(&body)?;
    let mut out =
        String::from("NAME\tCREATED_MS\tLEASE_UNTIL_MS\tFILES\tBYTES\tPINNED_BYTES\tPATH\n");
    for c in answer["checkpoints"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            c["name"].as_str().unwrap_or("?"),
            c["created_ms"],
            c["lease_until_ms"],
            c["files"],
            c["bytes"],
            c["pinned_bytes"],
            c["path"].as_str().unwrap_or("?")
        ));
    }
    out.push_str(&format!("pinned bytes: {}\n", answer["pinned_bytes"]));
    Ok(out)
}

/// `delete NAME`.
fn delete(node: &NodeArgs, name: &str) -> Result<String, Failed> {
    let url = connect(node)?;
    let target = target("/v0/backup", &[("name", name.as_bytes())]);
    ask(
        &url,
        "DELETE",
        &target,
        202,
        io_timeout(node, TIMEOUT_MS_DEFAULT),
    )?;
    Ok(format!("deleted {name}\n"))
}
