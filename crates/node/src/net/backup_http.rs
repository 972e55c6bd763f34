//! `/v0/backup`'s answers (docs/API.md, "Backup"): `POST` takes a node
//! checkpoint on a job off the network threads and answers when it is
//! complete; `GET` lists the held ones; `DELETE ?name=` removes one.
//!
//! # Answers
//! - `POST`: 200 with the checkpoint's JSON (`crate::backup::lease::render_json`);
//!   409 when one is being taken or `CHECKPOINTS_HELD_MAX` are held; 500
//!   (507 when the disk is full) when it failed, its partial directory
//!   removed; 503 when no job can start.
//! - `GET`: 200 with `{"checkpoints":[…],"pinned_bytes":N}`.
//! - `DELETE`: 204; 404 for an unknown name.

use super::answer::{Answer, Failure, Format};
use super::dispatch::Dispatched;
use crate::backup::job::Job;
use crate::backup::lease::{LEASE_DEFAULT, LEASE_MAX, render_json};
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

/// Starts `POST /v0/backup`'s job.
pub fn create(shared: &Arc<NodeShared>, wake: Wake, lease_s: Option<u64>) -> Dispatched {
    if lease_s.is_some_and(|s| s > LEASE_MAX.as_secs()) {
        let why = format!("lease_s must be from 1 to {}", LEASE_MAX.as_secs());
        return Dispatched::Now(Answer::Failed(Failure::Invalid, why));
    }
    let job = job(shared, lease_s);
    let started = shared
        .backups
        .workers
        .start("ataman-backup", move || created(job.run()), wake);
    match started {
        Ok(receiver) => Dispatched::Job(receiver),
        Err(busy) => Dispatched::Now(Answer::Failed(Failure::Busy, busy.to_string())),
    }
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
pub fn list(shared: &NodeShared) -> Answer {
    let dir = shared.backups.dir();
    let held = shared.backups.list();
    let mut out = String::from("{\"checkpoints\":[");
    for (i, m) in held.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&render_json(m, &dir.join(&m.name)));
    }
    out.push_str(&format!(
        "],\"pinned_bytes\":{}}}",
        shared.backups.pinned_bytes()
    ));
    Answer::Document(Format::Json, out)
}

/// `DELETE /v0/backup?name=NAME`.
pub fn delete(shared: &NodeShared, name: &str) -> Answer {
    match shared.backups.delete(name) {
        // The name matched a held checkpoint's (`ckpt-` and digits).
        Ok(()) => Answer::Started(format!("{{\"deleted\":\"{name}\"}}")),
        Err(Refusal::NotFound(_)) => Answer::NotFound(None),
        Err(e) => Answer::Failed(failure_of(&e), e.to_string()),
    }
}
