//! The `crash` fault: every member killed at once (every SIGKILL sent
//! before any process is reaped, `Cluster::kill9_at_once`), after a moment of a slow disk on every one of them; healed
//! by restarting every member on its data.
//!
//! Why: an acknowledgement sent before the write is durable loses the
//! write only when *every* replica that holds it dies before its sync. A
//! `kill` of one node at a time never shows that with `R` = 3 (the other
//! replicas keep the write, and repair brings it back), and on a fast disk
//! the window between an acknowledgement and the WAL's `write(2)` is too
//! short for a kill to land in. So the fault first makes every member's
//! file syncs [`CRASH_SYNC_DELAY_MS`] slower for [`CRASH_LEAD`] (the
//! fault-control file's `sync_delay_ms`, docs/API.md "Test hooks"): a
//! correct node then acknowledges later, and a node that acknowledges
//! before its WAL (the planted `ack-before-wal`) holds a whole sync's
//! worth of acknowledged writes in its WAL queue, outside the page cache,
//! when every process dies. A correct node loses nothing: what it
//! acknowledged was synced.
//!
//! Bounds: [`CRASH_LEAD`] before the kills, then the fault's scheduled
//! duration (`faults::duration_range`) down; every member is restarted at
//! the heal, each start bounded by `cluster::START_TIMEOUT`.

use super::cluster::{Cluster, Control};
use ataman_testkit::lock::lock;
use std::sync::Mutex;
use std::time::Duration;

/// How much slower every member's file syncs are in the lead-up to the
/// kills, ms (a slow disk, as docs/RELIABILITY.md's control 1 uses).
pub const CRASH_SYNC_DELAY_MS: u64 = 50;
/// How long the disks are slow before every member is killed.
pub const CRASH_LEAD: Duration = Duration::from_millis(300);

/// Slows every member's disk, waits [`CRASH_LEAD`], then `kill -9`s every
/// member that runs. Returns the members killed, and those that had
/// already exited (a crash of their own, for the caller to record).
pub fn inject(cluster: &Mutex<Cluster>) -> (Vec<usize>, Vec<(usize, String)>) {
    let members = lock(cluster).member_slots();
    for &node in &members {
        set_sync_delay(cluster, node, CRASH_SYNC_DELAY_MS);
    }
    std::thread::sleep(CRASH_LEAD);
    let mut killed = Vec::new();
    let mut gone = Vec::new();
    let mut c = lock(cluster);
    let up: Vec<usize> = members.into_iter().filter(|&n| c.is_up(n)).collect();
    for (node, result) in c.kill9_at_once(&up) {
        match result {
            Ok(()) => killed.push(node),
            Err(status) => gone.push((node, status)),
        }
    }
    (killed, gone)
}

/// Puts every member's disk back to its run's speed (before a restart:
/// the node reads its control file as it starts).
pub fn restore_disks(cluster: &Mutex<Cluster>) {
    let members = lock(cluster).member_slots();
    for node in members {
        set_sync_delay(cluster, node, 0);
    }
}

fn set_sync_delay(cluster: &Mutex<Cluster>, node: usize, sync_delay_ms: u64) {
    let control = Control {
        sync_delay_ms,
        ..Control::default()
    };
    if let Err(e) = lock(cluster).set_control(node, control) {
        tracing::warn!(node, error = %e, "test-cluster: cannot set the node's disk delay");
    }
}
