//! What a cluster backup and a restore move through `/v0/backup`
//! (docs/API.md, "Backup"; docs/BACKUP.md): a held checkpoint's files in
//! chunks, and a restore's versions applied where this node keeps them.
//! Both run on the checkpoints' jobs, off the network threads.
//!
//! # Answers
//! - `GET ?name=NAME&file=PATH&offset=N`: 200 with at most
//!   [`FILE_CHUNK_BYTES_MAX`] bytes of the file from `offset`
//!   (`application/octet-stream`; empty at or past its end); 404 for a
//!   checkpoint not held or a path its manifest does not list (nothing
//!   else is served: no path leaves the checkpoint). **Paced**
//!   (docs/BACKUP.md, "Pacing"): a chunk is [`chunk_bytes`] of the rate
//!   (`--backup-rate-bytes`), its bytes taken from the node's bucket
//!   (`Backups::serve_rate`, `antientropy::rate`) before it is read, on a
//!   job thread at background CPU priority (`antientropy::priority`), so
//!   the copy goes at most at the rate and yields the CPU to requests.
//! - `POST ?ingest=1&restore=ID[&t=TS]`: the restore `ID` marked under
//!   way (`crate::backup::restoring`; 503 when too many are), versions stamped after `T` dropped
//!   (`point_in_time::kept`), then 200 with `{"applied":A,"held_newer":H,
//!   "skipped":S,"dropped_after_t":D,"refused":R,"first_refusal":…}` once
//!   the versions of keys this node keeps (by its read layout) are durable
//!   (`antientropy::local::apply_counted`: `A` versions written, `H` not
//!   written because the version held here is newer, `S` of keys this node
//!   does not keep); 400 for a body
//!   that is not a list of versions (`crate::backup::ingest_wire`), 500
//!   when the write failed.
//! - `POST ?ingest=probe`: 200 with `{"empty":true|false}`: whether the
//!   store holds no entry, tombstones included (a restore refuses a
//!   non-empty cluster unless told otherwise).

use super::answer::{Answer, Failure};
use super::dispatch::Dispatched;
use crate::antientropy::local::{Scope, apply_counted};
use crate::backup::Backups;
use crate::backup::figures::Figures;
use crate::backup::manifest::MANIFEST_FILE_NAME;
use crate::backup::{ingest_wire, point_in_time};
use crate::cluster::workers::Wake;
use crate::http::Status;
use crate::layout_io::endpoints::{AGREEMENT_CONTENT_TYPE, JobAnswer};
use crate::state::NodeShared;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

/// The most bytes of a file one answer carries (4 MiB): a client reads a
/// file in chunks, the node holds one chunk per request.
pub const FILE_CHUNK_BYTES_MAX: u64 = 4 * 1024 * 1024;
/// The least bytes of a chunk (not the last of a file), whatever the rate.
pub const FILE_CHUNK_BYTES_MIN: u64 = 256 * 1024;

/// The bytes of one chunk served at `rate_bytes_per_sec`: a thirty-second
/// of a second's worth (1 MiB at the default 32 MiB/s), within
/// [`FILE_CHUNK_BYTES_MIN`] and [`FILE_CHUNK_BYTES_MAX`], so a paced copy
/// reads and sends in steps of about 31 ms, not in bursts (each chunk is
/// copied into the socket on a network thread, between requests).
pub fn chunk_bytes(rate_bytes_per_sec: u64) -> u64 {
    (rate_bytes_per_sec / 32).clamp(FILE_CHUNK_BYTES_MIN, FILE_CHUNK_BYTES_MAX)
}

fn start(
    shared: &NodeShared,
    wake: Wake,
    run: impl FnOnce() -> JobAnswer + Send + 'static,
) -> Dispatched {
    match shared.backups.workers.start("ataman-backup-io", run, wake) {
        Ok(receiver) => Dispatched::Job(receiver),
        Err(busy) => Dispatched::Now(Answer::Failed(Failure::Busy, busy.to_string())),
    }
}

/// `GET /v0/backup?name=NAME&file=PATH&offset=N`.
pub fn file(
    shared: &NodeShared,
    wake: Wake,
    name: String,
    path: String,
    offset: u64,
) -> Dispatched {
    let backups = Arc::clone(&shared.backups);
    start(shared, wake, move || chunk(&backups, &name, &path, offset))
}

fn chunk(backups: &Backups, name: &str, path: &str, offset: u64) -> JobAnswer {
    let Some(manifest) = backups.list().into_iter().find(|m| m.name == name) else {
        return JobAnswer::text(Status::NotFound, &format!("no checkpoint {name} is held"));
    };
    if path != MANIFEST_FILE_NAME && !manifest.files.iter().any(|f| f.path == path) {
        let why = format!("{path} is not a file of checkpoint {name}");
        return JobAnswer::text(Status::NotFound, &why);
    }
    let full = backups.dir().join(name).join(path);
    crate::antientropy::priority::lower_this_thread();
    let rate = &backups.serve_rate;
    let step = chunk_bytes(rate.bytes_per_sec());
    let wanted = chunk_len(&full, offset, step);
    // Bounded: a debt of at most one second plus one chunk over the rate.
    let _ = rate.take(wanted, &|| false);
    match read_chunk(&full, offset, step) {
        Ok(body) => {
            Figures::add(&backups.figures.served_bytes, body.len() as u64);
            JobAnswer {
                status: Status::Ok,
                content_type: AGREEMENT_CONTENT_TYPE,
                body,
            }
        }
        Err(e) => JobAnswer::text(Status::InternalError, &format!("{name}/{path}: {e}")),
    }
}

/// The bytes a chunk of at most `step` from `offset` will hold (what is
/// taken from the bucket; 0 when the file cannot be read: the read says why).
fn chunk_len(path: &std::path::Path, offset: u64, step: u64) -> u64 {
    std::fs::symlink_metadata(path).map_or(0, |m| m.len().saturating_sub(offset).min(step))
}

/// At most `step` bytes of the regular file `path` from `offset`: empty
/// at or past its end (any `u64`, docs/API.md). A symlink or any other
/// non-regular file is refused (`O_NOFOLLOW`), never followed.
fn read_chunk(path: &std::path::Path, offset: u64, step: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let why = format!("{} is not a regular file", path.display());
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
    }
    let mut body = Vec::new();
    if offset >= meta.len() {
        return Ok(body);
    }
    file.seek(SeekFrom::Start(offset))?;
    file.take(step.min(FILE_CHUNK_BYTES_MAX))
        .read_to_end(&mut body)?;
    Ok(body)
}

/// `POST /v0/backup?ingest=1|probe[&t=TS]&restore=ID` (`ask`: probe, `T`,
/// the restore's id).
pub fn ingest(
    shared: &Arc<NodeShared>,
    wake: Wake,
    ask: (bool, Option<u64>, &str),
    body: &[u8],
) -> Dispatched {
    let (probe, t, restore) = ask;
    let owner = Arc::clone(shared);
    if probe {
        return start(shared, wake, move || probe_empty(&owner));
    }
    let mut items = match ingest_wire::decode(body) {
        Ok(items) => items,
        Err(e) => return Dispatched::Now(Answer::Failed(Failure::Invalid, e.to_string())),
    };
    let before = items.len();
    let planted = shared.config.planted_bug == Some(crate::config::PlantedBug::BackupIgnoresT);
    if let Some(t) = t.filter(|_| !planted) {
        items.retain(|(_, v)| point_in_time::kept(v.ts, t));
    }
    let dropped = (before - items.len()) as u64;
    if let Err(full) = shared
        .backups
        .restoring
        .mark(restore, crate::hlc::wall_ms())
    {
        return Dispatched::Now(Answer::Failed(Failure::Busy, full.to_string()));
    }
    start(shared, wake, move || apply_kept(&owner, items, dropped))
}

fn probe_empty(shared: &NodeShared) -> JobAnswer {
    let first = shared
        .db
        .scan(b"", None, true)
        .map(|mut scan| scan.next().is_none());
    match first {
        Ok(empty) => JobAnswer::json(Status::Ok, format!("{{\"empty\":{empty}}}")),
        Err(e) => JobAnswer::text(Status::InternalError, &format!("scan failed: {e}")),
    }
}

/// Applies the versions whose key this node keeps by its read layout.
fn apply_kept(
    shared: &NodeShared,
    items: Vec<(Vec<u8>, crate::peer::frame::Stamped)>,
    dropped: u64,
) -> JobAnswer {
    let node = shared.antientropy_node();
    let view = match node.read_view() {
        Ok(view) => view,
        Err(e) => return JobAnswer::text(Status::Unavailable, &e),
    };
    let node = node.with_view(&view);
    let scope = Scope::new(&node);
    let total = items.len() as u64;
    let kept: Vec<_> = items
        .into_iter()
        .filter(|(key, _)| scope.holders(key).is_some())
        .collect();
    let skipped = total - kept.len() as u64;
    match apply_counted(&node, kept) {
        Ok(done) => {
            let (applied, held_newer, refused) = (done.written, done.held_newer, done.refused);
            let figures = &shared.backups.figures;
            Figures::add(&figures.ingested_versions, applied);
            Figures::add(&figures.ingest_skipped_versions, skipped + held_newer);
            let mut first = String::from("null");
            if let Some((key, why)) = refused.first() {
                first.clear();
                let text = format!("{}: {why}", String::from_utf8_lossy(key));
                crate::http::json::json_string(&mut first, &text);
            }
            JobAnswer::json(
                Status::Ok,
                format!(
                    "{{\"applied\":{applied},\"held_newer\":{held_newer},\"skipped\":{skipped},\"dropped_after_t\":{dropped},\"refused\":{},\"first_refusal\":{first}}}",
                    refused.len()
                ),
            )
        }
        Err(e) => JobAnswer::text(Status::InternalError, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (attacker, 2026-12-07): an offset at or past the end,
    /// up to `u64::MAX`, reads empty (it was a 500, `Invalid argument`);
    /// a symlinked checkpoint file is refused, not followed.
    #[test]
    fn read_chunk_is_empty_past_the_end_and_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("CLOCK");
        std::fs::write(&file, b"abc").unwrap();
        let max = FILE_CHUNK_BYTES_MAX;
        assert_eq!(read_chunk(&file, 1, max).unwrap(), b"bc");
        assert_eq!(read_chunk(&file, 1, 1).unwrap(), b"b");
        assert_eq!(chunk_len(&file, 1, max), 2);
        for offset in [3, 4, 9_223_372_036_854_775_806, u64::MAX] {
            assert!(
                read_chunk(&file, offset, max).unwrap().is_empty(),
                "{offset}"
            );
            assert_eq!(chunk_len(&file, offset, max), 0);
        }
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_chunk(&link, 0, max).is_err());
        assert!(read_chunk(dir.path(), 0, max).is_err());
    }

    /// A chunk is a thirty-second of a second of the rate, within its
    /// bounds (at, below and above each).
    #[test]
    fn chunk_is_a_thirty_second_of_the_rate_within_bounds() {
        let mib = 1024 * 1024;
        assert_eq!(chunk_bytes(32 * mib), mib);
        assert_eq!(chunk_bytes(8 * mib), FILE_CHUNK_BYTES_MIN);
        assert_eq!(chunk_bytes(mib), FILE_CHUNK_BYTES_MIN);
        assert_eq!(chunk_bytes(1), FILE_CHUNK_BYTES_MIN);
        assert_eq!(chunk_bytes(128 * mib), FILE_CHUNK_BYTES_MAX);
        assert_eq!(chunk_bytes(129 * mib), FILE_CHUNK_BYTES_MAX);
        assert_eq!(chunk_bytes(u64::MAX), FILE_CHUNK_BYTES_MAX);
    }
}
