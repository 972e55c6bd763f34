//! A cluster backup at one point in time `T` and its restore, with real
//! processes (docs/BACKUP.md, "A cluster backup at T", "Restore"): a
//! 3-node cluster under write load backed up through one member, then
//! restored onto fresh 3- and 5-node clusters; a corrupted backup named by
//! `verify` and refused by `restore`; `--to -` piped, extracted, verified;
//! the planted bug `backup-ignores-t` caught.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::Node;
use support::cluster::{TestCluster, assert_status, eventually};

/// Bound on waiting for an observable state.
const WAIT: Duration = Duration::from_secs(120);
/// The clock skew the backups assume (one host: the clocks agree).
const SKEW_MS: u64 = 200;
/// Writes the load makes at most.
const WRITES_MAX: usize = 20_000;
/// A short replication timeout, so a member's wait for the point is
/// short; small memtables, so each node reserves little disk for its WAL.
const CLUSTER_ARGS: [&str; 4] = [
    "--replication-timeout-ms",
    "1000",
    "--memtable-bytes-max",
    "1048576",
];

fn ataman(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn wall_ms() -> u64 {
    ataman_node::hlc::wall_ms()
}

/// One write of the load: its key, value, when it was sent and when its
/// acknowledgement arrived (wall ms), and whether it was acknowledged.
#[derive(Clone)]
struct Write {
    key: String,
    value: String,
    sent_ms: u64,
    acked_ms: u64,
    acked: bool,
}

/// Writes unique keys through node 0 until `stop` (at most [`WRITES_MAX`]).
fn load(url: String, stop: Arc<AtomicBool>, count: Arc<AtomicUsize>) -> Vec<Write> {
    let node = ataman::http_client::url::BaseUrl::parse(&url).unwrap();
    let mut out = Vec::new();
    for i in 0..WRITES_MAX {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let key = format!("w{i:06}");
        let value = format!("value-{i}");
        let sent_ms = wall_ms();
        let target = format!("/v0/entity?id={key}");
        let r = ataman::http_client::exchange::exchange(
            &node,
            "PUT",
            &target,
            Some(value.as_bytes()),
            Duration::from_secs(30),
        );
        let acked = matches!(&r, Ok(r) if r.status == 201);
        out.push(Write {
            key,
            value,
            sent_ms,
            acked_ms: wall_ms(),
            acked,
        });
        count.fetch_add(1, Ordering::Release);
    }
    out
}

/// `T`'s milliseconds from `create`'s first line.
fn t_ms(said: &str) -> u64 {
    said.split("(ms ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no T in {said}"))
}

/// Every write acknowledged before `T - SKEW_MS` reads back with its
/// value; no write sent after `T` (stamped after it: one host's clock) is
/// there. The first violation, if any.
fn check_point(cluster: &TestCluster, writes: &[Write], t_ms: u64) -> Result<(), String> {
    let n = cluster.len() as u32;
    for w in writes {
        let before = w.acked && w.acked_ms + SKEW_MS < t_ms;
        let after = w.sent_ms > t_ms;
        if !before && !after {
            continue;
        }
        let r = cluster.get(0, w.key.as_bytes(), 1, n.min(3));
        if before && (r.status != 200 || r.body != w.value.as_bytes()) {
            return Err(format!("{} acknowledged before T: {}", w.key, r.status));
        }
        if after && r.status != 404 {
            return Err(format!("{} sent after T is there: {}", w.key, r.status));
        }
    }
    Ok(())
}

/// `ataman backup create` through `url` into `to`, with [`SKEW_MS`].
fn create(url: &str, to: &Path) -> Output {
    let skew = SKEW_MS.to_string();
    ataman(&[
        "backup",
        "create",
        "--url",
        url,
        "--to",
        to.to_str().unwrap(),
        "--skew-ms",
        &skew,
    ])
}

fn restore_into(dir: &Path, n: usize, extra: &[&str]) -> (TestCluster, Output) {
    let mut args: Vec<&str> = CLUSTER_ARGS.to_vec();
    args.extend_from_slice(extra);
    let cluster = TestCluster::start(n, &args);
    let url = format!("http://{}", cluster.node(0).addr());
    let out = ataman(&["backup", "restore", dir.to_str().unwrap(), "--url", &url]);
    (cluster, out)
}

fn dropped_after_t(said: &str) -> u64 {
    said.split(" dropped as stamped after T")
        .next()
        .and_then(|r| r.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no dropped count in {said}"))
}

/// A 3-node cluster under write load, a backup at T, more writes, then
/// restores onto fresh 3- and 5-node clusters: every write acknowledged
/// before T (less the skew) is there with its value, no write sent after
/// T is, though the checkpoints held some (dropped). Negative control: the
/// planted bug `backup-ignores-t` keeps them, and the check sees it. Then
/// a flipped byte in a member's table is named by `verify` and the
/// restore refuses it, naming the file, writing nothing.
#[test]
fn cluster_backup_at_t_restores_onto_3_and_5_nodes() {
    let source = TestCluster::start(3, &CLUSTER_ARGS);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let url0 = format!("http://{}", source.node(0).addr());
    let writer = {
        let (stop, count) = (Arc::clone(&stop), Arc::clone(&count));
        std::thread::spawn(move || load(url0, stop, count))
    };
    eventually("writes under way", WAIT, || {
        count.load(Ordering::Acquire) >= 200
    });
    // Writes acknowledged more than the skew before T exist (the load goes on).
    std::thread::sleep(Duration::from_millis(2 * SKEW_MS));
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b");
    let url1 = format!("http://{}", source.node(1).addr());
    let out = create(&url1, &backup);
    assert!(out.status.success(), "create: {}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("3 members") && said.contains("released the checkpoints"),
        "{said}"
    );
    let t = t_ms(&said);
    let written = count.load(Ordering::Acquire);
    eventually("writes after the backup", WAIT, || {
        count.load(Ordering::Acquire) >= written + 100
    });
    stop.store(true, Ordering::Release);
    let writes = writer.join().unwrap();
    assert!(
        writes.iter().any(|w| w.acked && w.acked_ms + SKEW_MS < t),
        "writes before T"
    );
    // The members hold no checkpoint once the backup is fetched (pins released).
    for i in 0..3 {
        let listed = text(&source.node(i).get_target("/v0/backup").body);
        assert!(listed.contains("\"checkpoints\":[]"), "{listed}");
    }
    let out = ataman(&["backup", "verify", backup.to_str().unwrap()]);
    assert!(out.status.success(), "verify: {}", text(&out.stderr));

    for (n, extra) in [(3, vec![]), (5, vec!["--replication-factor", "3"])] {
        let (cluster, out) = restore_into(&backup, n, &extra);
        assert!(
            out.status.success(),
            "restore onto {n}: {}",
            text(&out.stderr)
        );
        let said = text(&out.stdout);
        assert!(
            dropped_after_t(&said) > 0,
            "the checkpoints held writes after T: {said}"
        );
        check_point(&cluster, &writes, t).unwrap_or_else(|e| panic!("onto {n}: {e}"));
        // The restore said it is done: every member is ready again (each
        // batch marked it restoring, `/readyz` 503, for minutes).
        for i in 0..n {
            let ready = cluster.node(i).get_target("/readyz");
            assert_eq!(ready.status, 200, "member {i}: {}", text(&ready.body));
        }
        // A second restore into the now non-empty cluster is refused.
        let url = format!("http://{}", cluster.node(1).addr());
        let again = ataman(&["backup", "restore", backup.to_str().unwrap(), "--url", &url]);
        assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
        if n == 3 {
            restored_again_writes_nothing(&backup, &url);
        }
    }

    // Negative control: the planted bug keeps versions after T; caught.
    let (planted, out) = restore_into(&backup, 3, &["--debug-planted-bug", "backup-ignores-t"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        check_point(&planted, &writes, t).is_err(),
        "backup-ignores-t not caught"
    );
    drop(planted);

    corrupted_is_named_and_refused(&backup, dir.path());
}

/// The number before `label` in a restore's summary.
fn count_before(said: &str, label: &str) -> u64 {
    said.split(label)
        .next()
        .and_then(|r| r.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` count in {said}"))
}

/// The same backup restored again with `--into-non-empty`: every version
/// is already held, so none is written, and the summary says so (it
/// counted them all as applied).
fn restored_again_writes_nothing(backup: &Path, url: &str) {
    let args = [
        "backup",
        "restore",
        backup.to_str().unwrap(),
        "--url",
        url,
        "--into-non-empty",
    ];
    let out = ataman(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert_eq!(
        count_before(&said, " versions written on replicas"),
        0,
        "{said}"
    );
    assert!(
        count_before(&said, " not written as the version held wins") > 0,
        "{said}"
    );
}

/// A flipped byte in node-1's first table: `verify` exits 1 naming
/// `node-1/data/…sst`; `restore` exits 1 naming it and writes nothing.
fn corrupted_is_named_and_refused(backup: &Path, scratch: &Path) {
    let bad = scratch.join("bad");
    copy_dir(backup, &bad);
    let data = bad.join("node-1/data");
    let mut tables: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    tables.sort();
    let table = tables.first().expect("a table").clone();
    let mut bytes = std::fs::read(data.join(&table)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(data.join(&table), bytes).unwrap();
    let named = format!("node-1/data/{table}: checksum mismatch");
    let out = ataman(&["backup", "verify", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains(&named), "{}", text(&out.stderr));
    let node = Node::start(&CLUSTER_ARGS);
    let url = format!("http://{}", node.addr());
    let out = ataman(&["backup", "restore", bad.to_str().unwrap(), "--url", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains(&named), "{}", text(&out.stderr));
    let probe = node.get_target("/metrics");
    assert!(text(&probe.body).contains("ataman_backup_ingested_versions_total 0"));
    // The top manifest edited: named too.
    let top = bad.join("CLUSTER-MANIFEST");
    let edited = std::fs::read_to_string(&top)
        .unwrap()
        .replace("skew_ms", "skew_mz");
    std::fs::write(&top, edited).unwrap();
    let out = ataman(&["backup", "verify", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("CLUSTER-MANIFEST"),
        "{}",
        text(&out.stderr)
    );
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

/// `create --to -` piped to a file: a tar stream that `tar -x` extracts
/// into a backup `verify` accepts, the summary on stderr; restored onto a
/// single node, the keys are there.
#[test]
fn to_stdout_is_a_tar_that_extracts_and_verifies() {
    let node = Node::start(&CLUSTER_ARGS);
    let mut conn = node.conn();
    for i in 0..100 {
        assert_eq!(conn.put(format!("k{i}").as_bytes(), b"v").status, 201);
    }
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{}", node.addr());
    let out = ataman(&[
        "backup",
        "create",
        "--url",
        &url,
        "--to",
        "-",
        "--skew-ms",
        "0",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("streamed as tar"),
        "{}",
        text(&out.stderr)
    );
    let tar = dir.path().join("b.tar");
    std::fs::write(&tar, &out.stdout).unwrap();
    let x = dir.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let status = Command::new("tar")
        .args(["-xf", tar.to_str().unwrap(), "-C", x.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = ataman(&["backup", "verify", x.to_str().unwrap()]);
    assert!(out.status.success(), "verify: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("100 entries"),
        "{}",
        text(&out.stdout)
    );
    // A stream cut short does not extract into a backup that verifies.
    let cut = dir.path().join("cut.tar");
    std::fs::write(&cut, out_prefix(&std::fs::read(&tar).unwrap())).unwrap();
    let y = dir.path().join("y");
    std::fs::create_dir(&y).unwrap();
    let _ = Command::new("tar")
        .args(["-xf", cut.to_str().unwrap(), "-C", y.to_str().unwrap()])
        .status();
    let out = ataman(&["backup", "verify", y.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));

    let fresh = Node::start(&CLUSTER_ARGS);
    let url = format!("http://{}", fresh.addr());
    let out = ataman(&["backup", "restore", x.to_str().unwrap(), "--url", &url]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(fresh.get(b"k99").status, 200);
}

/// The first 70% of a stream.
fn out_prefix(bytes: &[u8]) -> Vec<u8> {
    bytes[..bytes.len() * 7 / 10].to_vec()
}

/// A member killed with SIGKILL while every member waits for the point:
/// `create` fails naming it, leaves neither the directory nor its
/// `.partial`, and releases the checkpoints the other members took (none
/// stays held). Restarted, the killed member holds none; a second
/// `create` then succeeds and verifies.
#[test]
fn a_member_killed_during_create_fails_it_cleanly() {
    let mut cluster = TestCluster::start(3, &CLUSTER_ARGS);
    for i in 0..50u32 {
        let key = format!("k{i}");
        assert_status(&cluster.put(0, key.as_bytes(), b"v", 2, 3), 201, &key);
    }
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b");
    let url0 = format!("http://{}", cluster.node(0).addr());
    // A long skew: every member waits about 3 s for the point.
    let child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["backup", "create", "--url", &url0, "--to"])
        .arg(&backup)
        .args(["--skew-ms", "3000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    eventually("node 2 waits for the point", WAIT, || {
        let metrics = text(&cluster.node(2).get_target("/metrics").body);
        metrics.contains("ataman_backup_waiting_for_point 1")
    });
    let killed_url = cluster.urls()[2].clone();
    cluster.kill9(2);
    let out = child.wait_with_output().unwrap();
    let said = text(&out.stderr);
    assert!(
        !out.status.success(),
        "create succeeded: {}",
        text(&out.stdout)
    );
    assert!(
        said.contains(&killed_url),
        "the member is not named: {said}"
    );
    assert!(
        said.contains("released the checkpoints taken on the members"),
        "{said}"
    );
    assert!(!backup.exists(), "the backup directory was left");
    let partial = dir.path().join("b.partial");
    assert!(!partial.exists(), "the .partial directory was left");
    for i in 0..2 {
        let listed = text(&cluster.node(i).get_target("/v0/backup").body);
        assert!(listed.contains("\"checkpoints\":[]"), "node {i}: {listed}");
    }
    cluster.restart(2);
    let listed = text(&cluster.node(2).get_target("/v0/backup").body);
    assert!(listed.contains("\"checkpoints\":[]"), "node 2: {listed}");
    let out = create(&url0, &backup);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("3 members"),
        "{}",
        text(&out.stdout)
    );
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` (needs root, as the suite runs in CI).
    fn mount(bytes: u64) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs to fill a disk and needs root: {}",
            text(&out.stderr)
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// The backup's disk fills during the copy: `create` fails naming the
/// cause, removes what it wrote (the disk is empty again), releases every
/// member's checkpoint, and foreground writes go on throughout.
#[test]
fn the_disk_filling_during_a_backup_fails_it_cleanly() {
    let cluster = TestCluster::start(3, &CLUSTER_ARGS);
    // 1.6 MB of incompressible values: every member's checkpoint is
    // larger than the 1 MiB disk.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..200u32 {
        let value: Vec<u8> = (0..8 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let key = format!("k{i}");
        assert_status(&cluster.put(0, key.as_bytes(), &value, 2, 3), 201, &key);
    }
    let disk = SmallDisk::mount(1024 * 1024);
    let backup = disk.path().join("b");
    let url0 = format!("http://{}", cluster.node(0).addr());
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (stop, count) = (Arc::clone(&stop), Arc::clone(&count));
        let url = url0.clone();
        std::thread::spawn(move || load(url, stop, count))
    };
    let out = create(&url0, &backup);
    let during = count.load(Ordering::Acquire);
    eventually("writes after the failed backup", WAIT, || {
        count.load(Ordering::Acquire) >= during + 50
    });
    stop.store(true, Ordering::Release);
    let writes = writer.join().unwrap();
    let said = text(&out.stderr);
    assert!(
        !out.status.success(),
        "create succeeded: {}",
        text(&out.stdout)
    );
    assert!(said.contains("No space left on device"), "{said}");
    assert!(
        said.contains("released the checkpoints taken on the members"),
        "{said}"
    );
    let left: Vec<_> = std::fs::read_dir(disk.path()).unwrap().collect();
    assert!(left.is_empty(), "left on the full disk: {left:?}");
    for i in 0..3 {
        let listed = text(&cluster.node(i).get_target("/v0/backup").body);
        assert!(listed.contains("\"checkpoints\":[]"), "node {i}: {listed}");
    }
    let after = &writes[during..];
    assert!(
        !after.is_empty() && after.iter().all(|w| w.acked),
        "foreground writes failed after the backup's disk filled"
    );
}
