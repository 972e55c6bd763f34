//! `/v0/backup`'s answers (docs/API.md, "Backup"): `POST` takes a node
//! checkpoint on a job off the network threads and answers when it is
//! complete (with `at=T`, once the clock passed the cluster backup's
//! point, `crate::backup::point_in_time`); `GET` lists the held ones;
//! `DELETE ?name=` removes one. A checkpoint's files and a restore's
//! versions: `super::backup_transfer`.
//!
//! # Answers
//! - `POST`: 200 with the checkpoint's JSON (`crate::backup::lease::render_json`);
//!   409 when one is being taken or `CHECKPOINTS_HELD_MAX` are held; 500
//!   (507 when the disk is full) when it failed, its partial directory
//!   removed; 503 when no job can start; 400 for a point more than
//!   `point_in_time::WAIT_MS_MAX` ahead.
//! - `GET`: 200 with `{"checkpoints":[…],"pinned_bytes":N,"clock_ts":T,
//!   "replication_timeout_ms":N,"body_bytes_max":N,"ingest_body_bytes_max":N,
//!   "key_bytes_max":N,"value_bytes_max":N}` (what a cluster backup and a
//!   restore need of the node: `ingest_body_bytes_max` is the largest
//!   restore batch it reads, `super::body_gate::body_bytes_max`).
//! - `POST ?ingest=begin|done&restore=ID`: 200 with
//!   `{"restoring":B,"restores_under_way":N}`; 503 when
//!   `backup::restoring::RESTORES_MAX` other restores hold their marks.
//! - `DELETE`: 204; 404 for an unknown name.

use super::answer::{Answer, Failure, Format};
use super::dispatch::Dispatched;
use crate::api::{BackupAsk, PointAt};
use crate::backup::job::Job;
use crate::backup::lease::{LEASE_DEFAULT, LEASE_MAX, render_json};
use crate::backup::point_in_time::{self, Decision};
use crate::backup::{Manifest, Refusal};
use crate::cluster::workers::Wake;
use crate::http::Status;
use crate::layout_io::endpoints::{JSON_CONTENT_TYPE, JobAnswer, TEXT_CONTENT_TYPE};
use crate::state::NodeShared;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The job of a checkpoint of this node with a lease of `lease_s` seconds.
pub fn job(shared: &NodeShared, lease_s: Option<u64>) -> Job {
    Job {
        backups: Arc::clone(&shared.backups),
        data_dir: shared.config.data_dir.clone(),
        db: Arc::clone(&shared.db),
        hints: Arc::clone(&shared.hints),
        lease: lease_s.map_or(LEASE_DEFAULT, Duration::from_secs),
    }
}

/// Answers one `/v0/backup` request (`body`: a restore's versions).
pub fn answer(shared: &Arc<NodeShared>, wake: Wake, ask: BackupAsk, body: &[u8]) -> Dispatched {
    match ask {
        BackupAsk::Create { lease_s, at } => create(shared, wake, lease_s, at),
        BackupAsk::List => Dispatched::Now(list(shared)),
        BackupAsk::Delete { name } => Dispatched::Now(delete(shared, &name)),
        BackupAsk::File { name, path, offset } => {
            super::backup_transfer::file(shared, wake, name, path, offset)
        }
        BackupAsk::Ingest { probe, t, restore } => {
            super::backup_transfer::ingest(shared, wake, (probe, t, &restore), body)
        }
        BackupAsk::Restoring { begin, restore } => {
            let restoring = &shared.backups.restoring;
            if !begin {
                restoring.end(&restore);
            } else if let Err(full) = restoring.mark(&restore, crate::hlc::wall_ms()) {
                return Dispatched::Now(Answer::Failed(Failure::Busy, full.to_string()));
            }
            let held = restoring.under_way(crate::hlc::wall_ms());
            Dispatched::Now(Answer::Document(
                Format::Json,
                format!(
                    "{{\"restoring\":{begin},\"restores_under_way\":{}}}",
                    held.map_or(0, |u| u.restores)
                ),
            ))
        }
    }
}

/// Starts `POST /v0/backup`'s job; with `at`, the job first waits for the
/// wall clock to pass the point (holding no store: a node stopping
/// meanwhile is not kept from closing them).
fn create(
    shared: &Arc<NodeShared>,
    wake: Wake,
    lease_s: Option<u64>,
    at: Option<PointAt>,
) -> Dispatched {
    if lease_s.is_some_and(|s| s > LEASE_MAX.as_secs()) {
        let why = format!("lease_s must be from 1 to {}", LEASE_MAX.as_secs());
        return Dispatched::Now(Answer::Failed(Failure::Invalid, why));
    }
    let skew_ms = at
        .and_then(|p| p.skew_ms)
        .unwrap_or(point_in_time::SKEW_MS_DEFAULT);
    if skew_ms > point_in_time::SKEW_MS_MAX {
        let why = format!("skew_ms must be at most {}", point_in_time::SKEW_MS_MAX);
        return Dispatched::Now(Answer::Failed(Failure::Invalid, why));
    }
    let timeout_ms = shared.config.replication_timeout.as_millis() as u64;
    let after_ms = at.map(|p| point_in_time::checkpoint_after_ms(p.ts, timeout_ms, skew_ms));
    if let Some(after_ms) = after_ms
        && point_in_time::decide(crate::hlc::wall_ms(), after_ms) == Decision::TooFar
    {
        let why = format!(
            "at: the checkpoint would wait more than {} ms for the clock",
            point_in_time::WAIT_MS_MAX
        );
        return Dispatched::Now(Answer::Failed(Failure::Invalid, why));
    }
    let weak = Arc::downgrade(shared);
    let run = move || {
        if let Some(after_ms) = after_ms {
            wait_for_point(&weak, after_ms);
        }
        match weak.upgrade() {
            Some(shared) => {
                let job = job(&shared, lease_s);
                drop(shared);
                created(job.run())
            }
            None => created(Err(Refusal::Failed("the node is stopping".into()))),
        }
    };
    let started = shared.backups.workers.start("ataman-backup", run, wake);
    match started {
        Ok(receiver) => Dispatched::Job(receiver),
        Err(busy) => Dispatched::Now(Answer::Failed(Failure::Busy, busy.to_string())),
    }
}

/// Sleeps until the wall clock passed `after_ms` (rule 2 of
/// `point_in_time`), at most `WAIT_MS_MAX`, in steps of at most 100 ms,
/// counted in `ataman_backup_waiting_for_point`; returns early when the
/// node is gone.
fn wait_for_point(weak: &std::sync::Weak<NodeShared>, after_ms: u64) {
    let Some(figures) = weak.upgrade().map(|s| Arc::clone(&s.backups)) else {
        return;
    };
    figures
        .figures
        .waiting
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    while let Decision::WaitMs(ms) = point_in_time::decide(crate::hlc::wall_ms(), after_ms) {
        if weak.strong_count() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(ms.min(100)));
    }
    figures
        .figures
        .waiting
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
}

fn created(result: Result<(PathBuf, Manifest), Refusal>) -> JobAnswer {
    match result {
        Ok((path, manifest)) => JobAnswer {
            status: Status::Ok,
            content_type: JSON_CONTENT_TYPE,
            body: render_json(&manifest, &path).into_bytes(),
        },
        Err(e) => JobAnswer {
            status: status_of(&e),
            content_type: TEXT_CONTENT_TYPE,
            body: format!("{e}\n").into_bytes(),
        },
    }
}

fn failure_of(e: &Refusal) -> Failure {
    match e {
        Refusal::Running | Refusal::Full => Failure::Conflict,
        Refusal::NotFound(_) | Refusal::Invalid(_) => Failure::Invalid,
        Refusal::Failed(text) if text.contains("No space left") => Failure::DiskFull,
        Refusal::Failed(_) => Failure::Internal,
    }
}

fn status_of(e: &Refusal) -> Status {
    match e {
        Refusal::Running | Refusal::Full => Status::Conflict,
        Refusal::NotFound(_) => Status::NotFound,
        Refusal::Invalid(_) => Status::BadRequest,
        Refusal::Failed(text) if text.contains("No space left") => Status::InsufficientStorage,
        Refusal::Failed(_) => Status::InternalError,
    }
}

/// `GET /v0/backup`.
fn list(shared: &NodeShared) -> Answer {
    let dir = shared.backups.dir();
    let held = shared.backups.list();
    let mut out = String::from("{\"checkpoints\":[");
    for (i, m) in held.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&render_json(m, &dir.join(&m.name)));
    }
    // T of a cluster backup: a timestamp of this node's clock (the wall
    // clock's when the node holds no id yet and stamps nothing).
    let clock_ts = shared
        .hlc
        .now()
        .unwrap_or_else(|_| ataman_engine::key::timestamp_from_millis(crate::hlc::wall_ms(), 0));
    let (key_max, value_max) = (shared.config.key_bytes_max, shared.config.value_bytes_max);
    out.push_str(&format!(
        "],\"pinned_bytes\":{},\"clock_ts\":{clock_ts},\"replication_timeout_ms\":{},\"body_bytes_max\":{},\"ingest_body_bytes_max\":{},\"key_bytes_max\":{},\"value_bytes_max\":{}}}",
        shared.backups.pinned_bytes(),
        shared.config.replication_timeout.as_millis(),
        value_max,
        crate::backup::ingest_wire::record_bytes_max(key_max, value_max),
        key_max,
        value_max,
    ));
    Answer::Document(Format::Json, out)
}

/// `DELETE /v0/backup?name=NAME`.
fn delete(shared: &NodeShared, name: &str) -> Answer {
    match shared.backups.delete(name) {
        // The name matched a held checkpoint's (`ckpt-` and digits).
        Ok(()) => Answer::Started(format!("{{\"deleted\":\"{name}\"}}")),
        Err(Refusal::NotFound(_)) => Answer::NotFound(None),
        Err(e) => Answer::Failed(failure_of(&e), e.to_string()),
    }
}
