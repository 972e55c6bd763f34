//! `ataman backup restore DIR --url URL`: a backup's versions written into
//! a running cluster of any size, placed by that cluster's layout
//! (docs/BACKUP.md, "Restore").
//!
//! 1. The backup checked whole first (`verify_cluster`, or `verify` for a
//!    single checkpoint): a damaged one is refused, each problem naming
//!    its file, before anything is written (exit 1).
//! 2. The target's members (`GET /v0/layout` through `--url`; a single
//!    node is its own), and the largest batch each reads
//!    (`ingest_body_bytes_max`: one version at its value bound with its
//!    framing, `ataman_node::net::body_gate`).
//! 3. Every member must hold no entry (`POST /v0/backup?ingest=probe`),
//!    unless `--into-non-empty` (exit 2 otherwise).
//! 4. Every checkpoint's versions read back (`read_back::each_version`:
//!    an engine opened from a temporary copy), in batches of about
//!    [`BATCH_BYTES_MAX`] and never over the smallest member's bound
//!    (`ingest_wire::batch_step`: a large version goes alone; one no
//!    member batch can hold is refused naming its key, exit 2), each batch
//!    sent to every member in parallel
//!    (`POST /v0/backup?ingest=1&restore=ID&t=T`); a member drops the versions stamped
//!    after `T` and applies those of keys it keeps, each with its own
//!    timestamp, deadline or tombstone, durably, before it answers. A
//!    version older than the one a member holds is not written, so the
//!    replicas' copies of a key in several checkpoints converge on the
//!    newest at or before `T`.
//! 5. Exit 0 once every member answered every batch: every restored
//!    version is on every replica the target's layout names for it.
//!
//! [`restore_offline`] (`--data-dir PATH --node N`) is the same-layout
//! path: member `N`'s checkpoint put back as a stopped node's data
//! directory, tables hard-linked (`ataman_node::backup::place`).
//!
//! From step 4 to 5 every member answers `GET /readyz` 503 `restoring`
//! (`POST /v0/backup?ingest=begin&restore=ID` first, `ingest=done` last;
//! `ataman_node::backup::restoring`): a half-restored cluster answers no
//! client behind a load balancer. `ID` is this run's own
//! ([`restore_id`]): another restore's done leaves its mark. A restore
//! that fails leaves the mark to end with its lease.
//!

use crate::backup_client::{EXIT_DAMAGED, Failed, NodeArgs, ask, io_timeout, json, refused};
use crate::http_client::url::{BaseUrl, target};
use ataman_node::backup::cluster_manifest::{self, ClusterManifest};
use ataman_node::backup::ingest_wire::{self, BatchStep};
use ataman_node::backup::{read_back, verify};
use ataman_node::peer::frame::Stamped;
use std::path::{Path, PathBuf};

/// The bytes an ingest batch aims at: a version longer than that goes in
/// a batch of its own (at most the members' bound).
pub const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// How long a member may take to apply one batch, by default.
pub const BATCH_TIMEOUT_MS_DEFAULT: u64 = 120_000;

/// What `restore` was asked.
pub struct RestoreAsk<'a> {
    /// The backup.
    pub dir: &'a Path,
    /// A member of the target cluster, and the client's options.
    pub node: &'a NodeArgs,
    /// Write into a cluster that holds entries.
    pub into_non_empty: bool,
}

/// What was restored, for the summary.
#[derive(Default)]
struct Counts {
    read: u64,
    sent_batches: u64,
    applied: u64,
    held_newer: u64,
    dropped_after_t: u64,
}

/// Restores (module header); the lines to print.
pub fn restore(url: &BaseUrl, ask_: &RestoreAsk<'_>) -> Result<String, Failed> {
    let (t, sources) = checked_sources(ask_.dir)?;
    let members = members(url, ask_.node)?;
    let bound = body_bound(&members, ask_.node)?;
    if !ask_.into_non_empty {
        refuse_non_empty(&members, ask_.node)?;
    }
    let run = Run {
        t,
        members: &members,
        bound: &bound,
        node: ask_.node,
        id: restore_id(),
    };
    mark_restoring(&run, b"begin")?;
    let mut counts = Counts::default();
    for source in &sources {
        if let Err(Failed(code, text)) = restore_one(source, &run, &mut counts) {
            return Err(Failed(code, after_failure(&run, &counts, text)));
        }
    }
    mark_restoring(&run, b"done")?;
    let t_text = t.map_or_else(
        || "none (a node checkpoint: every version)".into(),
        |t| t.to_string(),
    );
    Ok(format!(
        "restored {} into {} members: T {t_text}; {} versions read, {} batches, {} versions written on replicas, {} not written as the version held wins, {} dropped as stamped after T\n",
        ask_.dir.display(),
        members.len(),
        counts.read,
        counts.sent_batches,
        counts.applied,
        counts.held_newer,
        counts.dropped_after_t
    ))
}

/// A failed run's last words: with no batch sent, nothing was written and
/// its marks are released (`done`); else they hold until their lease ends.
fn after_failure(run: &Run<'_>, counts: &Counts, text: String) -> String {
    let text = text.trim_end();
    if counts.sent_batches == 0 && mark_restoring(run, b"done").is_ok() {
        return format!(
            "{text}\nataman backup restore: nothing written; the members are ready again\n"
        );
    }
    let lease_s = ataman_node::backup::restoring::RESTORE_LEASE_MS / 1_000;
    format!(
        "{text}\nataman backup restore: the members answer /readyz 503 (restoring, this run's id {}) for up to {lease_s} s after its last batch, or until they restart\n",
        run.id
    )
}

/// `T` (none for a node checkpoint) and the checkpoints' directories,
/// once the backup is whole; every problem, each naming its file, if not.
fn checked_sources(dir: &Path) -> Result<(Option<u64>, Vec<PathBuf>), Failed> {
    let damaged = |lines: Vec<String>| {
        let mut text = String::new();
        for l in &lines {
            text.push_str(&format!("ataman backup restore: {}: {l}\n", dir.display()));
        }
        text.push_str(&format!(
            "ataman backup restore: {}: refused: NOT a complete, intact backup ({} problems); nothing written\n",
            dir.display(),
            lines.len()
        ));
        Failed(EXIT_DAMAGED, text)
    };
    if cluster_manifest::is_cluster_backup(dir) {
        let m: ClusterManifest = cluster_manifest::verify_cluster(dir)
            .map_err(|ps| damaged(ps.iter().map(ToString::to_string).collect()))?;
        let sources = m.members.iter().map(|m| dir.join(&m.dir)).collect();
        return Ok((Some(m.t_ts), sources));
    }
    verify::verify(dir).map_err(|ps| damaged(ps.iter().map(ToString::to_string).collect()))?;
    Ok((None, vec![dir.to_path_buf()]))
}

fn members(url: &BaseUrl, node: &NodeArgs) -> Result<Vec<BaseUrl>, Failed> {
    let timeout = io_timeout(node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let listed: Vec<String> = match ask(url, "GET", "/v0/layout", 200, timeout) {
        Ok(body) => json(&body)?["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        Err(_) => Vec::new(),
    };
    // A single node is reached at the URL given.
    if listed.len() <= 1 {
        return Ok(vec![url.clone()]);
    }
    listed
        .iter()
        .map(|m| BaseUrl::parse(m).map_err(|e| refused(format!("member {m}: {e}"))))
        .collect()
}

/// One restore run: what every request of it carries.
struct Run<'a> {
    t: Option<u64>,
    members: &'a [BaseUrl],
    bound: &'a Bound,
    node: &'a NodeArgs,
    /// This run's restore id (`ingest=…&restore=ID`).
    id: String,
}

/// The smallest bounds among the members: the batch each reads
/// (`ingest_body_bytes_max`), its longest key and largest value.
struct Bound {
    bytes: usize,
    key_bytes_max: usize,
    value_bytes_max: usize,
}

/// A restore id of this run: its start time and process id, in hex
/// (`backup::restoring::valid_id`): two runs differ unless one process
/// starts two within a nanosecond.
pub fn restore_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("r{now:x}-{:x}", std::process::id())
}

/// The batch bound: the smallest ingest body a member reads.
fn body_bound(members: &[BaseUrl], node: &NodeArgs) -> Result<Bound, Failed> {
    let timeout = io_timeout(node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let mut bound = Bound {
        bytes: usize::MAX,
        key_bytes_max: usize::MAX,
        value_bytes_max: usize::MAX,
    };
    for m in members {
        let info = json(&ask(m, "GET", "/v0/backup", 200, timeout)?)?;
        let field = |name: &str| {
            info[name].as_u64().ok_or_else(|| {
                refused(format!(
                    "member {}: names no {name} (an older node?)",
                    m.authority()
                ))
            })
        };
        let size = |name: &str| field(name).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        bound.bytes = bound.bytes.min(size("ingest_body_bytes_max")?);
        bound.key_bytes_max = bound.key_bytes_max.min(size("key_bytes_max")?);
        bound.value_bytes_max = bound.value_bytes_max.min(size("value_bytes_max")?);
    }
    Ok(bound)
}

fn refuse_non_empty(members: &[BaseUrl], node: &NodeArgs) -> Result<(), Failed> {
    let timeout = io_timeout(node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let target = target("/v0/backup", &[("ingest", b"probe")]);
    let mut full = Vec::new();
    for m in members {
        let answer = json(&ask(m, "POST", &target, 200, timeout)?)?;
        if answer["empty"].as_bool() != Some(true) {
            full.push(m.authority());
        }
    }
    if full.is_empty() {
        return Ok(());
    }
    Err(refused(format!(
        "ataman backup restore: refused: {} already hold entries (a restore goes into an empty cluster; --into-non-empty writes anyway, a newer version held winning)",
        full.join(", ")
    )))
}

/// Marks every member restoring (`begin`) or done (`done`) for this
/// run: `/readyz`.
fn mark_restoring(run: &Run<'_>, mark: &[u8]) -> Result<(), Failed> {
    let timeout = io_timeout(run.node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let target = target(
        "/v0/backup",
        &[("ingest", mark), ("restore", run.id.as_bytes())],
    );
    for m in run.members {
        ask(m, "POST", &target, 200, timeout)?;
    }
    Ok(())
}

/// The error for a version a member cannot take, or `None`: a key or
/// value over a member's bound, or a record over its batch bound.
fn too_large(source: &Path, key: &[u8], version: &Stamped, bound: &Bound) -> Option<Failed> {
    let value = version.value.as_ref().map_or(0, Vec::len);
    let len = ingest_wire::encoded_len(key, version);
    let fits = key.len() <= bound.key_bytes_max
        && value <= bound.value_bytes_max
        && ingest_wire::batch_step(0, len, BATCH_BYTES_MAX, bound.bytes) != BatchStep::TooLarge;
    (!fits).then(|| {
        refused(format!(
            "ataman backup restore: {}: key {:?} ({} bytes, its value {value} bytes): over what a member takes (--key-bytes-max {}, --value-bytes-max {}, a batch of {} bytes); not restored",
            source.display(),
            String::from_utf8_lossy(key),
            key.len(),
            bound.key_bytes_max,
            bound.value_bytes_max,
            bound.bytes
        ))
    })
}

fn restore_one(source: &Path, run: &Run<'_>, counts: &mut Counts) -> Result<(), Failed> {
    let mut batch = Vec::new();
    let mut failure: Option<Failed> = None;
    let mut fail = |e: Failed| {
        let text = e.1.clone();
        failure = Some(e);
        text
    };
    let mut sink = |key: Vec<u8>, version: Stamped| {
        counts.read += 1;
        if let Some(e) = too_large(source, &key, &version, run.bound) {
            return Err(fail(e));
        }
        let len = ingest_wire::encoded_len(&key, &version);
        match ingest_wire::batch_step(batch.len(), len, BATCH_BYTES_MAX, run.bound.bytes) {
            // Checked by `too_large` above; named the same way if not.
            BatchStep::TooLarge => {
                let why = format!(
                    "key {:?}: over the batch bound",
                    String::from_utf8_lossy(&key)
                );
                return Err(fail(refused(why)));
            }
            BatchStep::SendFirst => {
                send(&std::mem::take(&mut batch), run, counts).map_err(&mut fail)?;
            }
            BatchStep::Append => {}
        }
        ingest_wire::encode(&mut batch, &key, &version);
        Ok(())
    };
    let read = read_back::each_version(source, &mut sink);
    if let Some(e) = failure {
        return Err(e);
    }
    read.map_err(|e| refused(format!("ataman backup restore: {}: {e}", source.display())))?;
    if !batch.is_empty() {
        send(&batch, run, counts)?;
    }
    Ok(())
}

/// One batch to every member, in parallel; each answers once its share is durable.
fn send(batch: &[u8], run: &Run<'_>, counts: &mut Counts) -> Result<(), Failed> {
    let (members, node) = (run.members, run.node);
    let t_text = run.t.map(|t| t.to_string());
    let mut query: Vec<(&str, &[u8])> = vec![("ingest", b"1"), ("restore", run.id.as_bytes())];
    if let Some(t) = &t_text {
        query.push(("t", t.as_bytes()));
    }
    let target = target("/v0/backup", &query);
    let timeout = io_timeout(node, BATCH_TIMEOUT_MS_DEFAULT);
    let answers: Vec<Result<serde_json::Value, Failed>> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .map(|m| {
                let target = &target;
                s.spawn(move || {
                    let body = crate::http_client::exchange::exchange(
                        m,
                        "POST",
                        target,
                        Some(batch),
                        timeout,
                    )
                    .map_err(|e| {
                        refused(format!("ataman backup restore: {}: {e}", m.authority()))
                    })?;
                    if body.status != 200 {
                        return Err(refused(format!(
                            "ataman backup restore: {} answered {}: {}",
                            m.authority(),
                            body.status,
                            String::from_utf8_lossy(&body.body).trim_end()
                        )));
                    }
                    json(&body.body)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(refused("a member's thread panicked")))
            })
            .collect()
    });
    let mut dropped = 0;
    for a in answers {
        let a = a?;
        if a["refused"].as_u64().unwrap_or(0) > 0 {
            return Err(refused(format!(
                "ataman backup restore: a member refused versions: {}",
                a["first_refusal"]
            )));
        }
        counts.applied += a["applied"].as_u64().unwrap_or(0);
        counts.held_newer += a["held_newer"].as_u64().unwrap_or(0);
        // Every member drops the same versions of the batch.
        dropped = a["dropped_after_t"].as_u64().unwrap_or(0);
    }
    counts.dropped_after_t += dropped;
    counts.sent_batches += 1;
    Ok(())
}

/// `restore DIR --data-dir PATH [--node N] [--copy]`: member `N`'s
/// checkpoint placed into `PATH` (`ataman_node::backup::place`: checked
/// first, the files to be copied checked by their copy as it reads them,
/// linked and copied into a temporary tree, fsynced, renamed).
pub fn restore_offline(
    dir: &Path,
    data_dir: &Path,
    member: Option<usize>,
    copy: bool,
) -> Result<String, Failed> {
    use ataman_node::backup::place::{self, PlaceError};
    let started = std::time::Instant::now();
    let said = |e: PlaceError| match e {
        PlaceError::Damaged(problems) => {
            let mut text = String::new();
            for p in &problems {
                text.push_str(&format!("ataman backup restore: {}: {p}\n", dir.display()));
            }
            text.push_str(&format!(
                "ataman backup restore: {}: refused: NOT a complete, intact backup ({} problems); {} not written\n",
                dir.display(),
                problems.len(),
                data_dir.display()
            ));
            Failed(EXIT_DAMAGED, text)
        }
        PlaceError::Refused(why) | PlaceError::Failed(why) => refused(format!(
            "ataman backup restore: {why}; {} not written",
            data_dir.display()
        )),
    };
    let (source, manifest) = place::checked_source(dir, member, copy).map_err(said)?;
    // A copy's mismatch names the file within the checkpoint; the reader
    // is told where in the backup (`node-0/data/…`), as the first check does.
    let within = source
        .strip_prefix(dir)
        .ok()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| format!("{}/", p.display()))
        .unwrap_or_default();
    let placed = place::place(&source, &manifest, data_dir, copy)
        .map_err(|e| match e {
            PlaceError::Damaged(problems) => PlaceError::Damaged(
                problems
                    .into_iter()
                    .map(|p| format!("{within}{p}"))
                    .collect(),
            ),
            other => other,
        })
        .map_err(said)?;
    Ok(format!(
        "restored checkpoint {} ({}) into {}: {} tables linked ({} bytes), {} files copied ({} bytes), in {:.2} s; start the node on it with the addresses it had\n",
        manifest.name,
        source.display(),
        data_dir.display(),
        placed.linked.0,
        placed.linked.1,
        placed.copied.0,
        placed.copied.1,
        started.elapsed().as_secs_f64()
    ))
}
