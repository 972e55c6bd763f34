//! `ataman backup create`: a cluster backup at one point in time `T`
//! through any member (docs/BACKUP.md, "A cluster backup at T").
//!
//! 1. `T`: the member's clock (`GET /v0/backup`'s `clock_ts`); the members:
//!    its layout (`GET /v0/layout`; a single node is its own).
//! 2. Every member, in parallel: `POST /v0/backup?at=T&skew_ms=S`; each
//!    checkpoints once its clock passed `T` + its replication timeout + `S`
//!    (`ataman_node::backup::point_in_time`). Writes go on meanwhile.
//! 3. Every member's checkpoint copied over HTTP, in parallel
//!    (`GET /v0/backup?name=&file=&offset=`, in chunks), each file's
//!    size and CRC-32C checked against the member's manifest on arrival,
//!    into `DIR.partial/node-INDEX/`.
//! 4. The checkpoints deleted on the members (their pins released), when
//!    the copy is done and when it failed.
//! 5. `CLUSTER-MANIFEST` written, the directory renamed to `DIR`, and
//!    checked there (`verify_cluster`). Exit 0 only then.
//!
//! Bounds: one thread per member (at most `MEMBERS_MAX`); one chunk
//! (`FILE_CHUNK_BYTES_MAX`) in memory per thread. The pace is each
//! member's (`--backup-rate-bytes`, docs/BACKUP.md, "Pacing"): it answers
//! a chunk once its bytes are in its bucket; this process runs at
//! background CPU priority (`backup_cmd::create`).

use crate::backup_client::{Failed, NodeArgs, ask, io_timeout, json, refused};
use crate::http_client::url::{BaseUrl, target};
use ataman_node::backup::cluster_manifest::{ClusterManifest, Member};
use ataman_node::backup::manifest::{MANIFEST_FILE_NAME, Manifest, checked_path};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How long a member may take to answer its checkpoint, by default: its
/// wait for the point plus the checkpoint itself.
pub const CHECKPOINT_TIMEOUT_MS_DEFAULT: u64 = 600_000;

/// What `create` was asked.
pub struct CreateAsk<'a> {
    /// The member it goes through, and the client's options.
    pub node: &'a NodeArgs,
    /// Where the backup goes (must not exist).
    pub to: &'a Path,
    /// The checkpoints' lease on the members, seconds.
    pub lease_s: Option<u64>,
    /// The clock skew assumed between members, milliseconds.
    pub skew_ms: u64,
}

/// One member's checkpoint, taken.
struct Taken {
    member: Member,
    url: BaseUrl,
    manifest: Manifest,
}

/// Takes the backup (module header); the lines to print.
pub fn create(url: &BaseUrl, ask_: &CreateAsk<'_>) -> Result<String, Failed> {
    if ask_.to.exists() {
        return Err(refused(format!(
            "ataman backup create: {} exists: give a new directory",
            ask_.to.display()
        )));
    }
    let partial = PathBuf::from(format!("{}.partial", ask_.to.display()));
    let _ = std::fs::remove_dir_all(&partial);
    let (t_ts, layout) = point_and_layout(url, ask_.node)?;
    let taken = checkpoint_all(&layout.members, t_ts, ask_)?;
    let copied = copy_all(&taken, &partial, ask_.node);
    let released = release_all(&taken, ask_.node);
    let finished = copied.and_then(|()| {
        let manifest = ClusterManifest {
            t_ts,
            skew_ms: ask_.skew_ms,
            layout_version: layout.version,
            replication_factor: layout.replication_factor,
            members: taken.iter().map(|t| t.member.clone()).collect(),
        };
        finish(&partial, ask_.to, &manifest)
    });
    if let Err(Failed(code, e)) = finished {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(Failed(code, with_release(e, &released)));
    }
    let mut out = format!(
        "cluster backup at T {t_ts} (ms {}): {} members, layout version {}, replication factor {}\n",
        t_ts >> 16,
        taken.len(),
        layout.version,
        layout.replication_factor
    );
    for t in &taken {
        out.push_str(&format!(
            "{} {}: checkpoint {}, {} files, {} bytes\n",
            t.member.dir,
            t.member.url,
            t.manifest.name,
            t.manifest.files.len(),
            t.manifest.bytes()
        ));
    }
    out.push_str(&released);
    out.push_str(&format!("written to {}\n", ask_.to.display()));
    Ok(out)
}

/// The members of a layout.
struct Layout {
    version: u64,
    replication_factor: u64,
    members: Vec<String>,
}

fn point_and_layout(url: &BaseUrl, node: &NodeArgs) -> Result<(u64, Layout), Failed> {
    let timeout = io_timeout(node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let info = json(&ask(url, "GET", "/v0/backup", 200, timeout)?)?;
    let t_ts = info["clock_ts"].as_u64().ok_or_else(|| {
        refused("ataman backup create: the node names no clock_ts (an older node?)")
    })?;
    let own = format!(
        "{}://{}",
        if url.https { "https" } else { "http" },
        url.authority()
    );
    let layout = match ask(url, "GET", "/v0/layout", 200, timeout) {
        Ok(body) => {
            let v = json(&body)?;
            let members: Vec<String> = v["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect();
            Layout {
                version: v["version"].as_u64().unwrap_or(0),
                replication_factor: v["replication_factor"].as_u64().unwrap_or(1),
                members,
            }
        }
        Err(_) => Layout {
            version: 0,
            replication_factor: 1,
            members: Vec::new(),
        },
    };
    // A single node is reached at the URL given (its own may be a
    // listening address such as port 0).
    let layout = if layout.members.len() <= 1 {
        Layout {
            members: vec![own],
            ..layout
        }
    } else {
        layout
    };
    if layout.members.len() > ataman_node::backup::cluster_manifest::MEMBERS_MAX {
        return Err(refused(
            "ataman backup create: more members than a backup lists",
        ));
    }
    Ok((t_ts, layout))
}

/// Every member's checkpoint at `t_ts`, in parallel; on any failure the
/// ones taken are deleted (their pins released) and the first error returned.
fn checkpoint_all(
    members: &[String],
    t_ts: u64,
    ask_: &CreateAsk<'_>,
) -> Result<Vec<Taken>, Failed> {
    let results: Vec<Result<Taken, Failed>> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(i, m)| s.spawn(move || checkpoint_one(i, m, t_ts, ask_)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(refused("a member's thread panicked")))
            })
            .collect()
    });
    let mut taken = Vec::new();
    let mut unanswered = Vec::new();
    let mut first = None;
    for (member, result) in members.iter().zip(results) {
        match result {
            Ok(t) => taken.push(t),
            Err(failed) => {
                unanswered.push(member.clone());
                first.get_or_insert(failed);
            }
        }
    }
    if let Some(Failed(code, e)) = first {
        let mut released = release_all(&taken, ask_.node);
        released.push_str(&unanswered_lines(&unanswered));
        return Err(Failed(code, with_release(e, &released)));
    }
    Ok(taken)
}

/// The members whose checkpoint gave no answer the tool could use (a
/// timeout, a refusal, a dead member): one may still have been taken (a
/// slow member takes it after the tool gave up: the black-box attack saw
/// it), held until its lease ends; how to find and release it.
fn unanswered_lines(members: &[String]) -> String {
    members
        .iter()
        .map(|url| {
            format!(
                "member {url} gave no usable answer to its checkpoint: it may still hold one this run did not learn the name of (pinning its files until its lease ends); find it with `ataman backup list --url {url}` and release it with `ataman backup delete NAME --url {url}`\n"
            )
        })
        .collect()
}

fn checkpoint_one(
    index: usize,
    member: &str,
    t_ts: u64,
    ask_: &CreateAsk<'_>,
) -> Result<Taken, Failed> {
    let url = BaseUrl::parse(member)
        .map_err(|e| refused(format!("ataman backup create: member {member}: {e}")))?;
    let (at, skew) = (t_ts.to_string(), ask_.skew_ms.to_string());
    let lease = ask_.lease_s.map(|s| s.to_string());
    let mut query: Vec<(&str, &[u8])> = vec![("at", at.as_bytes()), ("skew_ms", skew.as_bytes())];
    if let Some(l) = &lease {
        query.push(("lease_s", l.as_bytes()));
    }
    let timeout = io_timeout(ask_.node, CHECKPOINT_TIMEOUT_MS_DEFAULT);
    let answer = json(
        &ask(&url, "POST", &target("/v0/backup", &query), 200, timeout)
            .map_err(|Failed(code, e)| Failed(code, format!("member {member}: {e}")))?,
    )?;
    let name = answer["name"].as_str().unwrap_or_default().to_owned();
    let dir = format!("node-{index}");
    let text = fetch_all(&url, &name, MANIFEST_FILE_NAME, ask_.node)?;
    let text = String::from_utf8(text)
        .map_err(|_| refused(format!("{dir}/{MANIFEST_FILE_NAME}: not UTF-8")))?;
    let manifest =
        Manifest::parse(&text).map_err(|e| refused(format!("{dir}/{MANIFEST_FILE_NAME}: {e}")))?;
    if manifest.name != name {
        return Err(refused(format!(
            "member {member}: answered {name}, its manifest names {}",
            manifest.name
        )));
    }
    let member = Member {
        index,
        dir,
        checkpoint: name,
        manifest_crc32c: crc32c::crc32c(text.as_bytes()),
        url: member.to_owned(),
    };
    Ok(Taken {
        member,
        url,
        manifest,
    })
}

/// A whole (small) file of a member's checkpoint, read in chunks.
fn fetch_all(url: &BaseUrl, name: &str, path: &str, node: &NodeArgs) -> Result<Vec<u8>, Failed> {
    let mut out = Vec::new();
    fetch_each(url, name, path, node, &mut |chunk| {
        out.extend_from_slice(chunk);
        Ok(())
    })?;
    Ok(out)
}

/// Calls `sink` with each chunk of a file until an empty chunk ends it.
fn fetch_each(
    url: &BaseUrl,
    name: &str,
    path: &str,
    node: &NodeArgs,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), Failed>,
) -> Result<(), Failed> {
    let timeout = io_timeout(node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let mut offset = 0u64;
    loop {
        let at = offset.to_string();
        let query: [(&str, &[u8]); 3] = [
            ("name", name.as_bytes()),
            ("file", path.as_bytes()),
            ("offset", at.as_bytes()),
        ];
        let chunk = ask(url, "GET", &target("/v0/backup", &query), 200, timeout)?;
        if chunk.is_empty() {
            return Ok(());
        }
        offset += chunk.len() as u64;
        sink(&chunk)?;
    }
}

/// Bytes copied so far, of how many (the progress bar and the summary).
struct Progress {
    done: AtomicU64,
    total: u64,
}

fn copy_all(taken: &[Taken], partial: &Path, node: &NodeArgs) -> Result<(), Failed> {
    let progress = Progress {
        done: AtomicU64::new(0),
        total: taken.iter().map(|t| t.manifest.bytes()).sum(),
    };
    let finished = AtomicU64::new(0);
    let results: Vec<Result<(), Failed>> = std::thread::scope(|s| {
        let bar =
            s.spawn(|| crate::backup_progress::bar(&progress.done, progress.total, &finished));
        let handles: Vec<_> = taken
            .iter()
            .map(|t| s.spawn(|| copy_member(t, &partial.join(&t.member.dir), node, &progress)))
            .collect();
        let results = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(refused("a copy thread panicked")))
            })
            .collect();
        finished.store(1, Ordering::Release);
        let _ = bar.join();
        results
    });
    results
        .into_iter()
        .collect::<Result<Vec<()>, Failed>>()
        .map(drop)
}

fn copy_member(t: &Taken, dir: &Path, node: &NodeArgs, progress: &Progress) -> Result<(), Failed> {
    let io = |e: std::io::Error| refused(format!("ataman backup create: {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::write(dir.join(MANIFEST_FILE_NAME), t.manifest.render()).map_err(io)?;
    for f in &t.manifest.files {
        let rel = checked_path(&f.path).map_err(refused)?;
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut file = std::fs::File::create(&path).map_err(io)?;
        let (mut bytes, mut crc) = (0u64, 0u32);
        fetch_each(&t.url, &t.manifest.name, &f.path, node, &mut |chunk| {
            file.write_all(chunk).map_err(io)?;
            bytes += chunk.len() as u64;
            crc = crc32c::crc32c_append(crc, chunk);
            progress
                .done
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            Ok(())
        })?;
        if bytes != f.bytes || crc != f.crc32c {
            return Err(refused(format!(
                "ataman backup create: {}/{}: arrived with {bytes} bytes, crc32c {crc:08x}; the manifest says {} bytes, {:08x}",
                t.member.dir, f.path, f.bytes, f.crc32c
            )));
        }
        file.sync_all().map_err(io)?;
    }
    sync_tree(dir).map_err(io)
}

/// fsyncs every directory under `dir` (the files were, as written).
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            sync_tree(&entry.path())?;
        }
    }
    std::fs::File::open(dir)?.sync_all()
}

/// Deletes every taken checkpoint on its member; one line for the output
/// (a failure to delete is reported, not fatal: the lease ends anyway).
fn release_all(taken: &[Taken], node: &NodeArgs) -> String {
    let timeout = io_timeout(node, crate::ctl::TIMEOUT_MS_DEFAULT);
    let mut kept = Vec::new();
    for t in taken {
        let q = target("/v0/backup", &[("name", t.manifest.name.as_bytes())]);
        if ask(&t.url, "DELETE", &q, 202, timeout).is_err() {
            kept.push((t.manifest.name.clone(), t.member.url.clone()));
        }
    }
    release_line(&kept)
}

/// What [`release_all`] reports: every checkpoint it could not delete
/// (its member did not answer: killed, partitioned) and how to release it
/// before its lease ends.
fn release_line(kept: &[(String, String)]) -> String {
    if kept.is_empty() {
        return "released the checkpoints taken on the members\n".into();
    }
    let mut out = String::new();
    for (name, url) in kept {
        out.push_str(&format!(
            "could not delete checkpoint {name} on {url}: it stays held (pinning its files) until its lease ends; release it sooner with `ataman backup delete {name} --url {url}`\n"
        ));
    }
    out
}

/// A failed create's message, followed by what its release did (a taken
/// checkpoint a dead member still holds is named, not left silent).
fn with_release(error: String, released: &str) -> String {
    let mut out = error;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("ataman backup create: ");
    out.push_str(released);
    out
}

fn finish(partial: &Path, to: &Path, manifest: &ClusterManifest) -> Result<(), Failed> {
    let io =
        |e: std::io::Error| refused(format!("ataman backup create: {}: {e}", partial.display()));
    std::fs::create_dir_all(partial).map_err(io)?;
    let top = partial.join(ataman_node::backup::cluster_manifest::CLUSTER_MANIFEST_FILE_NAME);
    let mut file = std::fs::File::create(&top).map_err(io)?;
    file.write_all(manifest.render().as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::File::open(partial)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    std::fs::rename(partial, to).map_err(io)?;
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_not_released_is_named_with_how_to_release_it() {
        assert_eq!(
            release_line(&[]),
            "released the checkpoints taken on the members\n"
        );
        let slow = unanswered_lines(&["http://127.0.0.1:4101".to_owned()]);
        assert!(slow.contains("http://127.0.0.1:4101"), "{slow}");
        assert!(
            slow.contains("ataman backup list --url http://127.0.0.1:4101"),
            "{slow}"
        );
        assert_eq!(unanswered_lines(&[]), "");
        let kept = [("ckpt-7".to_owned(), "http://127.0.0.1:4100".to_owned())];
        let line = release_line(&kept);
        assert!(
            line.contains("checkpoint ckpt-7 on http://127.0.0.1:4100"),
            "{line}"
        );
        assert!(
            line.contains("`ataman backup delete ckpt-7 --url http://127.0.0.1:4100`"),
            "{line}"
        );
        let failed = with_release(
            "member http://127.0.0.1:4100: connection refused".into(),
            &line,
        );
        let lines: Vec<&str> = failed.lines().collect();
        assert_eq!(lines.len(), 2, "{failed}");
        assert!(lines[1].starts_with("ataman backup create: could not delete checkpoint ckpt-7"));
    }
}
