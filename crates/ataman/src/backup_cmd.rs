//! `ataman backup`: cluster backups and node checkpoints from the command
//! line (docs/BACKUP.md).
//!
//! - `create --url URL --to DIR`: a cluster backup at one point in time,
//!   copied over HTTP (`crate::backup_cluster`); `--to -` writes it as one
//!   tar stream on stdout (`crate::backup_tar`).
//! - `verify DIR`: a cluster backup (its `CLUSTER-MANIFEST`, then every
//!   member's checkpoint) or one node checkpoint: every file against its
//!   manifest, then a copy opened as an engine directory
//!   (`ataman_node::backup::verify`).
//! - `restore DIR --url URL`: the backup written into a running, empty
//!   cluster of any size (`crate::backup_restore`); `restore DIR
//!   --data-dir PATH --node N`: member `N`'s checkpoint put back as a
//!   stopped node's data directory, offline
//!   (`ataman_node::backup::place`).
//! - `list --url URL`, `delete NAME --url URL`: the node's held checkpoints.
//!
//! Exit codes: [`EXIT_OK`], [`EXIT_DAMAGED`], [`EXIT_REFUSED`], [`EXIT_NO_ANSWER`].

pub use crate::backup_client::{
    EXIT_DAMAGED, EXIT_NO_ANSWER, EXIT_OK, EXIT_REFUSED, Failed, NodeArgs,
};
use crate::backup_client::{ask, connect, io_timeout, json};
use crate::ctl::TIMEOUT_MS_DEFAULT;
use crate::http_client::url::target;
use ataman_node::backup::cluster_manifest;
use ataman_node::backup::verify::{self, Problem};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `ataman backup` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: BackupCommand,
}

/// One `ataman backup` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BackupCommand {
    /// Take a cluster backup at one point in time through any member and
    /// copy it into DIR (which must not exist; `-`: a tar stream on stdout).
    Create {
        /// A member of the cluster.
        #[command(flatten)]
        node: NodeArgs,
        /// Where the backup goes (`-`: one tar stream on stdout).
        #[arg(long)]
        to: PathBuf,
        /// The lease of the checkpoints on the members, in seconds [default: 3600].
        #[arg(long)]
        lease_s: Option<u64>,
        /// The clock skew assumed between members, in milliseconds: every
        /// member checkpoints once its clock passed T + its replication
        /// timeout + this.
        #[arg(long, default_value_t = ataman_node::backup::point_in_time::SKEW_MS_DEFAULT)]
        skew_ms: u64,
    },
    /// Check a backup: exit 0 only when it is complete and intact and opens.
    Verify {
        /// The backup's directory.
        dir: PathBuf,
    },
    /// Write a backup into a running, empty cluster of any size; or, with
    /// --data-dir, put one member's checkpoint back as a stopped node's
    /// data directory (the same-layout restore, offline, at disk speed).
    Restore {
        /// The backup's directory.
        dir: PathBuf,
        /// A member of the target cluster.
        #[command(flatten)]
        node: NodeArgs,
        /// Restore into a cluster that already holds entries (a newer
        /// version held wins over a restored one).
        #[arg(long)]
        into_non_empty: bool,
        /// Offline: the data directory to fill (absent or empty) with the
        /// checkpoint of member --node; no node is contacted.
        #[arg(long, conflicts_with_all = ["url", "into_non_empty"])]
        data_dir: Option<PathBuf>,
        /// With --data-dir: which member's checkpoint (its index in the
        /// backup, `node-INDEX`; may be left out for a backup of one).
        #[arg(long = "node", requires = "data_dir")]
        member: Option<usize>,
        /// With --data-dir: copy the tables too, instead of hard-linking
        /// them (the backup then shares no file with the node).
        #[arg(long, requires = "data_dir")]
        copy: bool,
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
        BackupCommand::Create {
            node,
            to,
            lease_s,
            skew_ms,
        } => create(node, to, *lease_s, *skew_ms),
        BackupCommand::Restore {
            dir,
            data_dir: Some(data_dir),
            member,
            copy,
            ..
        } => crate::backup_restore::restore_offline(dir, data_dir, *member, *copy),
        BackupCommand::Restore {
            dir,
            node,
            into_non_empty,
            ..
        } => {
            let url = connect(node)?;
            let ask = crate::backup_restore::RestoreAsk {
                dir,
                node,
                into_non_empty: *into_non_empty,
            };
            crate::backup_restore::restore(&url, &ask)
        }
        BackupCommand::List { node } => list(node),
        BackupCommand::Delete { name, node } => delete(node, name),
    }
}

/// `verify DIR`: one line when intact; every problem, each naming its
/// file, when not.
fn verify_dir(dir: &Path) -> Result<String, Failed> {
    if cluster_manifest::is_cluster_backup(dir) {
        return verify_cluster_dir(dir);
    }
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

/// `verify DIR` of a cluster backup: one line for the whole, one per member.
fn verify_cluster_dir(dir: &Path) -> Result<String, Failed> {
    match cluster_manifest::verify_cluster(dir) {
        Ok(m) => {
            let mut out = format!(
                "ok: {}: cluster backup at T {} (ms {}), {} members, layout version {}, replication factor {}\n",
                dir.display(),
                m.t_ts,
                ataman_node::backup::point_in_time::millis(m.t_ts),
                m.members.len(),
                m.layout_version,
                m.replication_factor
            );
            for member in &m.members {
                out.push_str(&verify_dir(&dir.join(&member.dir))?);
            }
            Ok(out)
        }
        Err(problems) => {
            let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
            Err(Failed(EXIT_DAMAGED, damaged_lines(dir, &lines)))
        }
    }
}

fn damaged_lines(dir: &Path, lines: &[String]) -> String {
    let mut text = String::new();
    for l in lines {
        text.push_str(&format!("ataman backup verify: {}: {l}\n", dir.display()));
    }
    text.push_str(&format!(
        "ataman backup verify: {}: NOT a complete, intact backup ({} problems)\n",
        dir.display(),
        lines.len()
    ));
    text
}

fn damaged(dir: &Path, problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    damaged_lines(dir, &lines)
}

/// `create`: the cluster backup taken into `to` (or a temporary directory
/// streamed as tar on stdout for `-`), checked there.
fn create(
    node: &NodeArgs,
    to: &Path,
    lease_s: Option<u64>,
    skew_ms: u64,
) -> Result<String, Failed> {
    let url = connect(node)?;
    // The copy, its checksums and the check after are background work for
    // the machine they run on (often a member's): every thread of this
    // process yields the CPU to the foreground (threads started after
    // inherit the nice value). Best effort.
    let _ = ataman_engine::thread_priority::lower_this_thread(
        ataman_node::antientropy::priority::BACKGROUND_NICE_STEP,
    );
    if to == Path::new("-") {
        return crate::backup_tar::create_to_stdout(&url, node, lease_s, skew_ms);
    }
    let ask = crate::backup_cluster::CreateAsk {
        node,
        to,
        lease_s,
        skew_ms,
    };
    let taken = crate::backup_cluster::create(&url, &ask)?;
    let checked = verify_dir(to)?;
    Ok(format!("{taken}{checked}"))
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
