//! Node checkpoints on a real node (docs/BACKUP.md): `ataman backup
//! create|verify|list|delete`, `/v0/backup`, the pinned-bytes gauge, a
//! corrupted or missing file named by `verify`, kill -9 in the middle of
//! checkpoints, and RESP's `BGSAVE` and `LASTSAVE`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;
use support::Node;
use support::cluster::eventually;

/// Bound on waiting for an observable state.
const WAIT: Duration = Duration::from_secs(60);

fn ataman(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn url(node: &Node) -> String {
    format!("http://{}", node.addr())
}

/// Writes `n` keys `{prefix}{i}` (each acknowledged, 201).
fn write_keys(node: &Node, prefix: &str, n: usize) {
    let mut conn = node.conn();
    for i in 0..n {
        let key = format!("{prefix}{i:05}");
        let value = format!("value-{i}-{}", "v".repeat(i % 64));
        let r = conn.put(key.as_bytes(), value.as_bytes());
        assert_eq!(r.status, 201, "{key}");
    }
}

fn metric(node: &Node, name: &str) -> u64 {
    let body = text(&node.get_target("/metrics").body);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// `create` copies a backup (of a cluster of one node) that `verify`
/// accepts, holding the keys written before it, and releases the node's
/// checkpoint; a checkpoint taken with `POST /v0/backup` is listed and
/// `/metrics` counts the bytes it pins; a flipped byte and a removed file are each named by `verify`
/// (exit 1) — the negative control; `delete` releases the pin.
#[test]
fn create_verify_list_delete_and_corruption_named() {
    let node = Node::start(&["--memtable-bytes-max", "65536"]);
    write_keys(&node, "k", 3_000);
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("b1");
    let to_s = to.to_str().unwrap();
    let out = ataman(&["backup", "create", "--url", &url(&node), "--to", to_s]);
    assert!(out.status.success(), "create: {}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("ok: "), "{said}");
    assert!(said.contains("3000 entries"), "{said}");
    let out = ataman(&["backup", "verify", to_s]);
    assert!(out.status.success(), "verify: {}", text(&out.stderr));

    // The backup fetched, the node holds no checkpoint (its pin released).
    assert!(said.contains("released the checkpoints"), "{said}");
    assert_eq!(metric(&node, "ataman_backup_pinned_bytes"), 0);
    let mut conn = node.conn();
    conn.send(&support::request("POST", "/v0/backup", &[], Some(b"")))
        .unwrap();
    assert_eq!(conn.read().unwrap().status, 200);
    // A cluster backup of one node: its checkpoint is `node-0`.
    let ck = to.join("node-0");
    let out = ataman(&["backup", "list", "--url", &url(&node)]);
    assert!(out.status.success(), "list: {}", text(&out.stderr));
    let listed = text(&out.stdout);
    let name = listed
        .lines()
        .nth(1)
        .and_then(|l| l.split('\t').next())
        .unwrap()
        .to_owned();
    assert!(name.starts_with("ckpt-"), "{listed}");
    let pinned = metric(&node, "ataman_backup_pinned_bytes");
    assert!(pinned > 0, "a store of tables pins bytes: {listed}");
    assert!(
        listed.contains(&format!("pinned bytes: {pinned}")),
        "{listed}"
    );

    // Negative control: one flipped byte in a table, then a missing file.
    let bad = dir.path().join("bad");
    copy_dir(&ck, &bad);
    let table = first_table(&bad.join("data"));
    let mut bytes = std::fs::read(bad.join("data").join(&table)).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(bad.join("data").join(&table), bytes).unwrap();
    std::fs::remove_file(bad.join("data/CLOCK")).unwrap();
    let out = ataman(&["backup", "verify", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!("data/{table}: checksum mismatch")),
        "{said}"
    );
    assert!(said.contains("data/CLOCK: missing"), "{said}");
    // A torn manifest (a kill before its last line): not complete.
    let torn = dir.path().join("torn");
    copy_dir(&ck, &torn);
    let manifest = std::fs::read_to_string(torn.join("BACKUP-MANIFEST")).unwrap();
    let cut = manifest.rfind("end ").unwrap();
    std::fs::write(torn.join("BACKUP-MANIFEST"), &manifest[..cut]).unwrap();
    let out = ataman(&["backup", "verify", torn.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("BACKUP-MANIFEST"));
    // A listed file replaced by a link to the intact copy's (the backup
    // would not be self-contained), and a FIFO beside it (reading it
    // would hang): both named, and the check ends.
    let linked = dir.path().join("linked");
    copy_dir(&ck, &linked);
    std::fs::remove_file(linked.join("data/CLOCK")).unwrap();
    std::os::unix::fs::symlink(ck.join("data/CLOCK"), linked.join("data/CLOCK")).unwrap();
    let fifo = std::ffi::CString::new(linked.join("extra-fifo").to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let out = ataman(&["backup", "verify", linked.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let said = text(&out.stderr);
    assert!(said.contains("data/CLOCK: not a regular file"), "{said}");
    assert!(said.contains("extra-fifo: not in the manifest"), "{said}");

    let out = ataman(&["backup", "delete", &name, "--url", &url(&node)]);
    assert!(out.status.success(), "delete: {}", text(&out.stderr));
    assert_eq!(metric(&node, "ataman_backup_pinned_bytes"), 0);
    let out = ataman(&["backup", "delete", &name, "--url", &url(&node)]);
    assert_eq!(out.status.code(), Some(2), "a second delete: 404");
    // The copy does not depend on the node's checkpoint.
    let out = ataman(&["backup", "verify", to_s]);
    assert!(out.status.success(), "verify: {}", text(&out.stderr));
}

fn first_table(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names.into_iter().next().expect("a table")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// kill -9 while checkpoints are being taken (a bounded loop, the kill at
/// a different moment each round): the node restarts with every
/// acknowledged key, and every checkpoint directory is either complete and
/// verifiable or absent (no `.tmp-` directory survives the restart).
#[test]
fn kill_during_checkpoints_leaves_complete_or_absent() {
    const ROUNDS: u64 = 6;
    let mut node = Node::start(&["--memtable-bytes-max", "65536"]);
    write_keys(&node, "k", 4_000);
    for round in 0..ROUNDS {
        write_keys(&node, &format!("r{round}-"), 200);
        let mut conn = node.conn();
        conn.send(&support::request("POST", "/v0/backup", &[], Some(b"")))
            .unwrap();
        // A different moment each round: from at once to well past the end.
        std::thread::sleep(Duration::from_millis(round * round * 15));
        node.kill9();
        node.restart();
        let backups = node.data_dir().join("backups");
        let names: Vec<String> = match std::fs::read_dir(&backups) {
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        for name in &names {
            assert!(!name.starts_with(".tmp-"), "round {round}: {name} left");
            let out = ataman(&["backup", "verify", backups.join(name).to_str().unwrap()]);
            assert!(
                out.status.success(),
                "round {round}: {name}: {}",
                text(&out.stderr)
            );
        }
        for key in ["k00000", "k03999", &format!("r{round}-00199")] {
            assert_eq!(node.get(key.as_bytes()).status, 200, "round {round}: {key}");
        }
    }
    // After the kills, a checkpoint taken to its end is complete and verifies.
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("after");
    let out = ataman(&[
        "backup",
        "create",
        "--url",
        &url(&node),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "create: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("5200 entries"),
        "{}",
        text(&out.stdout)
    );
}

/// `BGSAVE` answers as Redis does and takes a checkpoint; `LASTSAVE` moves
/// from the node's start to that checkpoint's time; a second `BGSAVE`
/// while one runs is refused or answered, never both at once; with client
/// tokens a read token's `BGSAVE` is refused (`NOPERM`) — the negative
/// control of its admin role.
#[test]
fn bgsave_and_lastsave_over_resp() {
    let addr = support::fixed_resp_addr();
    let node = Node::start(&["--resp-listen", addr.as_str()]);
    write_keys(&node, "k", 100);
    let mut con = support::resp_client::connect(&addr, false, WAIT);
    let before = support::resp_client::ok(&mut con, &["LASTSAVE"]);
    let redis::Value::Int(started_s) = before else {
        panic!("LASTSAVE: {before:?}")
    };
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(started_s > 0 && started_s <= now_s, "{started_s}");
    let reply = support::resp_client::ok(&mut con, &["BGSAVE"]);
    assert_eq!(
        reply,
        redis::Value::SimpleString("Background saving started".into())
    );
    eventually("a checkpoint listed", WAIT, || {
        text(&node.get_target("/v0/backup").body).contains("ckpt-")
    });
    let listed = text(&node.get_target("/v0/backup").body);
    let created_ms: i64 = listed
        .split("\"created_ms\":")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    let after = support::resp_client::ok(&mut con, &["LASTSAVE"]);
    assert_eq!(after, redis::Value::Int(created_ms / 1000), "{listed}");
    let wrong = support::resp_client::run(&mut con, &["BGSAVE", "NOW"]);
    assert!(wrong.is_err(), "{wrong:?}");

    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "reader-token-0123456789 read\n").unwrap();
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let addr2 = support::fixed_resp_addr();
    let guarded = Node::start(&[
        "--resp-listen",
        addr2.as_str(),
        "--auth-token-file",
        tokens.to_str().unwrap(),
    ]);
    let mut con = support::resp_client::connect(&addr2, false, WAIT);
    support::resp_client::ok(&mut con, &["AUTH", "reader-token-0123456789"]);
    let refused = support::resp_client::run(&mut con, &["BGSAVE"]).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("no permissions to run the 'bgsave'"),
        "{refused}"
    );
    assert!(matches!(
        support::resp_client::ok(&mut con, &["LASTSAVE"]),
        redis::Value::Int(_)
    ));
    assert!(!guarded.data_dir().join("backups").exists());
}

/// `POST /v0/backup?ingest=WHAT&restore=ID` on `node`: the status.
fn mark(node: &Node, what: &str, id: &str) -> u16 {
    let path = format!("/v0/backup?ingest={what}&restore={id}");
    node.conn().request("POST", &path, &[], Some(b"")).status
}

/// A restore holds readiness (`GET /readyz` 503 `restoring`) from its
/// `ingest=begin` to its `ingest=done`, and a whole `ataman backup
/// restore` leaves the node ready with the keys back. Two restores each
/// hold their own mark: the first one's done, or a whole `ataman backup
/// restore` run meanwhile, leaves the node restoring while the other's
/// holds (the attacker's finding: with one mark for all, the first to
/// finish made the node ready while the other still wrote: the check
/// after the whole run is the negative control). Without the done (each
/// batch marks the node restoring for minutes) the last check fails.
#[test]
fn a_restore_holds_readiness_until_it_is_done() {
    let source = Node::start(&[]);
    write_keys(&source, "r", 50);
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("b");
    let to_s = to.to_str().unwrap();
    let out = ataman(&["backup", "create", "--url", &url(&source), "--to", to_s]);
    assert!(out.status.success(), "create: {}", text(&out.stderr));

    let target = Node::start(&[]);
    let readyz = || {
        let r = target.get_target("/readyz");
        (r.status, text(&r.body))
    };
    assert_eq!(readyz().0, 200);
    assert_eq!(mark(&target, "begin", "a"), 200);
    let (status, body) = readyz();
    assert_eq!(status, 503);
    assert!(body.starts_with("restoring: "), "{body}");
    assert_eq!(mark(&target, "done", "a"), 200);
    assert_eq!(readyz().0, 200);
    assert_eq!(
        mark(&target, "later", "a"),
        400,
        "an unknown mark is refused"
    );
    assert_eq!(mark(&target, "begin", "a%20b"), 400, "a bad id is refused");

    // Two restores: a's done leaves b's mark.
    assert_eq!(mark(&target, "begin", "a"), 200);
    assert_eq!(mark(&target, "begin", "b"), 200);
    assert_eq!(mark(&target, "done", "a"), 200);
    assert_eq!(readyz().0, 503, "b still writes");
    // A whole restore run while b's mark holds: its done is its own.
    let out = ataman(&["backup", "restore", to_s, "--url", &url(&target)]);
    assert!(out.status.success(), "restore: {}", text(&out.stderr));
    let (status, body) = readyz();
    assert_eq!(status, 503, "the run's done cleared b's mark: {body}");
    assert_eq!(mark(&target, "done", "b"), 200);
    let (status, body) = readyz();
    assert_eq!(status, 200, "{body}");
    let back = target.conn().get(b"r00007");
    assert_eq!(back.status, 200);
    assert_eq!(back.body, b"value-7-vvvvvvv");
}

/// The default `--value-bytes-max` (16 MiB).
const VALUE_BOUND: usize = 16 * 1024 * 1024;

/// A value of exactly `--value-bytes-max` (the default, 16 MiB) is backed
/// up and restored, and reads back byte for byte: its batch (the version,
/// its key and framing) is over the value bound, and the ingest route
/// admits one such version (the attacker's finding: the restore failed
/// with "Connection reset by peer" and left the node restoring). Bounds
/// by route: the ingest route refuses a body one byte over its own bound
/// with 413, a PUT one byte over the value bound. Into a node whose value
/// bound is one byte less, the restore fails naming the key, with no
/// connection reset.
#[test]
fn a_value_at_the_bound_is_restored_byte_for_byte() {
    let source = Node::start(&[]);
    let mut rng = support::Rng::new(33);
    let value: Vec<u8> = (0..VALUE_BOUND).map(|_| rng.next_u64() as u8).collect();
    write_keys(&source, "a", 5);
    assert_eq!(source.conn().put(b"big", &value).status, 201);
    write_keys(&source, "z", 5);
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("b");
    let to_s = to.to_str().unwrap();
    let out = ataman(&["backup", "create", "--url", &url(&source), "--to", to_s]);
    assert!(out.status.success(), "create: {}", text(&out.stderr));

    let target = Node::start(&[]);
    let info: serde_json::Value =
        serde_json::from_slice(&target.get_target("/v0/backup").body).unwrap();
    let ingest_max = info["ingest_body_bytes_max"].as_u64().unwrap();
    assert_eq!(ingest_max, (VALUE_BOUND + 4096 + 25) as u64, "{info}");
    assert_eq!(info["body_bytes_max"].as_u64(), Some(VALUE_BOUND as u64));
    // A head declaring one byte over a route's bound, no body: 413.
    let head_only = |method: &str, path: &str, len: u64| {
        let mut conn = target.conn();
        let len = len.to_string();
        let head = support::request(method, path, &[("Content-Length", &len)], None);
        conn.send(&head).unwrap();
        conn.read().unwrap().status
    };
    let ingest = "/v0/backup?ingest=1&restore=probe413";
    assert_eq!(head_only("POST", ingest, ingest_max + 1), 413);
    assert_eq!(
        head_only("PUT", "/v0/entity?id=k", VALUE_BOUND as u64 + 1),
        413
    );
    assert_eq!(target.get_target("/readyz").status, 200, "nothing marked");

    let out = ataman(&["backup", "restore", to_s, "--url", &url(&target)]);
    assert!(out.status.success(), "restore: {}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("11 versions read"), "{said}");
    let back = target.conn().get(b"big");
    assert_eq!(back.status, 200);
    assert_eq!(back.body.len(), VALUE_BOUND);
    assert!(back.body == value, "the value came back different");
    assert_eq!(target.conn().get(b"z00004").status, 200);
    assert_eq!(target.get_target("/readyz").status, 200);

    // A target that cannot take it: a clear error naming the key.
    let smaller = (VALUE_BOUND - 1).to_string();
    let small = Node::start(&["--value-bytes-max", &smaller]);
    let out = ataman(&["backup", "restore", to_s, "--url", &url(&small)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("key \"big\""), "{err}");
    assert!(
        err.contains(&format!("--value-bytes-max {smaller}")),
        "{err}"
    );
    assert!(!err.contains("reset"), "{err}");
    assert_eq!(small.conn().get(b"big").status, 404);
}

/// The same-layout restore, offline (`restore DIR --data-dir PATH --node
/// N`): a node's backup put back into its wiped data directory, the
/// node restarted on it serves every key, its tables hard links of the
/// backup's. A flipped byte in the backup's table is refused (exit 1)
/// naming the file, the directory not written; an occupied directory is
/// refused (exit 2).
#[test]
fn same_layout_restore_puts_a_checkpoint_back_offline() {
    let mut node = Node::start(&[]);
    write_keys(&node, "s", 200);
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("b");
    let good_s = good.to_str().unwrap();
    let out = ataman(&["backup", "create", "--url", &url(&node), "--to", good_s]);
    assert!(out.status.success(), "create: {}", text(&out.stderr));
    node.terminate();
    node.wipe_data();
    let data_dir = node.data_dir();
    let dd = data_dir.to_str().unwrap();

    let bad = dir.path().join("bad");
    copy_dir(&good, &bad);
    let table = first_table(&bad.join("node-0/data"));
    let path = bad.join("node-0/data").join(&table);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let restore =
        |from: &str| ataman(&["backup", "restore", from, "--data-dir", dd, "--node", "0"]);
    let out = restore(bad.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    let named = format!("node-0/data/{table}: checksum mismatch");
    assert!(err.contains(&named), "{err}");
    assert!(!data_dir.exists(), "written despite the damage");
    // With --copy the table is checked by its one read, as it is copied:
    // the same exit, the same file named, nothing written.
    let bad_s = bad.to_str().unwrap();
    let copied = [
        "backup",
        "restore",
        bad_s,
        "--data-dir",
        dd,
        "--node",
        "0",
        "--copy",
    ];
    let out = ataman(&copied);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains(&named), "{err}");
    assert!(!data_dir.exists(), "written despite the damage (--copy)");

    let out = restore(good_s);
    assert!(out.status.success(), "restore: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("tables linked"),
        "{}",
        text(&out.stdout)
    );
    let placed = data_dir.join(first_table(&data_dir));
    let links = std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(&placed).unwrap());
    assert_eq!(links, 2, "the backup's table and the node's");
    let out = restore(good_s);
    assert_eq!(out.status.code(), Some(2), "an occupied directory");
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );

    node.restart();
    assert_eq!(node.get_target("/readyz").status, 200);
    let mut conn = node.conn();
    for i in 0..200 {
        let key = format!("s{i:05}");
        let r = conn.get(key.as_bytes());
        assert_eq!(r.status, 200, "{key}");
        let want = format!("value-{i}-{}", "v".repeat(i % 64));
        assert_eq!(r.body, want.as_bytes(), "{key}");
    }
}
