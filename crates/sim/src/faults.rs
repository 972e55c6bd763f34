//! The faults a run injects, drawn from the world's random number
//! generator: what happens, to whom, and for how long. The driver
//! (`sim`) carries them out.
//!
//! | fault | what the driver does | healed |
//! | --- | --- | --- |
//! | crash, power loss | `SimFs::crash_image(seed)`: only synced data survives | restart after `down_ms` |
//! | crash, kill -9 | `SimFs::process_crash_image()`: the page cache survives | restart after `down_ms` |
//! | partition | both directions of every link between a minority and the rest are cut | after `heal_ms` |
//! | one-way cut | one direction of one link is cut | after `heal_ms` |
//! | message loss | a share of all messages is lost | after `for_ms` |
//! | clock skew | a node's wall clock is stepped within ±[`SKEW_MS_MAX`] of the virtual clock | stays |
//! | disk fault | `SimFs::inject`: the `nth` next write or sync of a WAL segment, SSTable or the manifest fails; the engine refuses writes from then on | the node is restarted (kill -9) once a write or flush fails |
//! | hints dropped | the node's pending hints are dropped (the store's byte bound) | anti-entropy and read repair |

use crate::config::{CrashKind, FaultMix};
use ataman_engine::fs::sim::{FaultKind, FaultOp};
use ataman_testkit::rng::Rng;

/// Largest clock skew, either way, milliseconds: well within the peer
/// tolerance (`hlc::PEER_CLOCK_AHEAD_MS_MAX`, one hour).
pub const SKEW_MS_MAX: i64 = 2000;
/// Shortest and longest time a crashed node stays down, ms.
pub const DOWN_MS: (u64, u64) = (20, 1500);
/// Shortest and longest partition or cut, ms.
pub const CUT_MS: (u64, u64) = (50, 1500);
/// Largest share of messages lost in a lossy period, per mille.
pub const LOSS_PER_MILLE_MAX: u32 = 500;
/// Shortest and longest lossy period, ms.
pub const LOSS_MS: (u64, u64) = (50, 1000);
/// Shortest and longest gap between two faults, ms.
pub const FAULT_GAP_MS: (u64, u64) = (50, 600);
/// Largest `nth` of an injected disk fault (how many matching operations pass first).
pub const DISK_FAULT_NTH_MAX: u64 = 8;
/// The kinds of file a disk fault hits (path substrings): WAL segments,
/// SSTables, the manifest. Each is written by one engine thread at a time,
/// so which operation meets the fault does not depend on thread timing.
/// Directory syncs are not failed: the WAL thread (a new segment) and the
/// background thread (a new table) both sync the directory during a flush.
pub const DISK_FAULT_FILES: [&str; 3] = [".wal", ".sst", "MANIFEST"];
/// Shortest and longest delay before a node whose disk failed is restarted, ms.
pub const DISK_RESTART_MS: (u64, u64) = (10, 500);

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Node `node` crashes and comes back after `down_ms`.
    Crash {
        /// Which node.
        node: usize,
        /// Power loss or kill -9.
        kind: CrashKind,
        /// How long it stays down.
        down_ms: u64,
        /// Seeds the power-loss image's choices.
        image_seed: u64,
    },
    /// The nodes in `minority` and the others cannot reach each other.
    Partition {
        /// One side.
        minority: Vec<usize>,
        /// Until when, from now.
        heal_ms: u64,
    },
    /// Messages from `from` to `to` are lost.
    OneWayCut {
        /// Sender side.
        from: usize,
        /// Receiver side.
        to: usize,
        /// Until when, from now.
        heal_ms: u64,
    },
    /// `per_mille` of all messages are lost.
    Loss {
        /// Share lost.
        per_mille: u32,
        /// For how long.
        for_ms: u64,
    },
    /// Node `node`'s wall clock is `skew_ms` off the virtual clock.
    Skew {
        /// Which node.
        node: usize,
        /// How far off.
        skew_ms: i64,
    },
    /// The `nth` next `op` on a file of node `node` whose path contains
    /// `file`, fails with `kind`.
    Disk {
        /// Which node.
        node: usize,
        /// Which operations count and fail: writes or syncs.
        op: FaultOp,
        /// Which files: [`DISK_FAULT_FILES`].
        file: &'static str,
        /// Which one fails.
        nth: u64,
        /// EIO or ENOSPC.
        kind: FaultKind,
    },
    /// Node `node` drops its pending hints.
    DropHints {
        /// Which node.
        node: usize,
    },
}

#[derive(Clone, Copy)]
enum Choice {
    Crash(CrashKind),
    Partition,
    OneWayCut,
    Loss,
    Skew,
    Disk,
    DropHints,
}

fn range(rng: &mut Rng, (lo, hi): (u64, u64)) -> u64 {
    rng.between(lo, hi)
}

/// Draws the next fault among those `mix` allows; `up[i]` says whether node
/// `i` runs. `None` when nothing applies (no fault enabled, or no node up
/// for a fault that needs one).
pub fn choose(rng: &mut Rng, mix: &FaultMix, up: &[bool]) -> Option<Fault> {
    let nodes = up.len();
    let mut choices: Vec<Choice> = mix.crashes.iter().map(|k| Choice::Crash(*k)).collect();
    if mix.partitions && nodes >= 2 {
        choices.push(Choice::Partition);
    }
    if mix.one_way_cuts && nodes >= 2 {
        choices.push(Choice::OneWayCut);
    }
    if mix.message_loss {
        choices.push(Choice::Loss);
    }
    if mix.clock_skew {
        choices.push(Choice::Skew);
    }
    if mix.disk_faults {
        choices.push(Choice::Disk);
    }
    if mix.hint_drops {
        choices.push(Choice::DropHints);
    }
    let choice = *rng.pick(&choices)?;
    let running: Vec<usize> = (0..nodes).filter(|&i| up[i]).collect();
    let any = rng.index(nodes);
    Some(match choice {
        Choice::Crash(kind) => Fault::Crash {
            node: *rng.pick(&running)?,
            kind,
            down_ms: range(rng, DOWN_MS),
            image_seed: rng.next_u64(),
        },
        Choice::Partition => {
            let size = 1 + rng.index(nodes / 2);
            let mut all: Vec<usize> = (0..nodes).collect();
            let mut minority = Vec::with_capacity(size);
            for _ in 0..size {
                minority.push(all.swap_remove(rng.index(all.len())));
            }
            minority.sort_unstable();
            Fault::Partition {
                minority,
                heal_ms: range(rng, CUT_MS),
            }
        }
        Choice::OneWayCut => {
            let to = (any + 1 + rng.index(nodes - 1)) % nodes;
            Fault::OneWayCut {
                from: any,
                to,
                heal_ms: range(rng, CUT_MS),
            }
        }
        Choice::Loss => Fault::Loss {
            per_mille: 1 + rng.below(u64::from(LOSS_PER_MILLE_MAX)) as u32,
            for_ms: range(rng, LOSS_MS),
        },
        Choice::Skew => Fault::Skew {
            node: any,
            skew_ms: rng.between(0, 2 * SKEW_MS_MAX.unsigned_abs()) as i64 - SKEW_MS_MAX,
        },
        Choice::Disk => Fault::Disk {
            node: *rng.pick(&running)?,
            op: *rng.pick(&[FaultOp::Write, FaultOp::Sync])?,
            file: rng.pick(&DISK_FAULT_FILES)?,
            nth: rng.between(1, DISK_FAULT_NTH_MAX),
            kind: *rng.pick(&[FaultKind::Io, FaultKind::NoSpace])?,
        },
        Choice::DropHints => Fault::DropHints { node: any },
    })
}

/// The gap before the next fault, ms.
pub fn gap_ms(rng: &mut Rng) -> u64 {
    range(rng, FAULT_GAP_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Faults stay within their bounds; a mix without faults draws none;
    /// crashes only hit running nodes.
    #[test]
    fn bounded_choices() {
        let mut rng = Rng::new(3);
        assert_eq!(choose(&mut rng, &FaultMix::NONE, &[true; 3]), None);
        let up = [false, true, false];
        for _ in 0..2000 {
            match choose(&mut rng, &FaultMix::ALL, &up) {
                Some(Fault::Crash { node, down_ms, .. }) => {
                    assert_eq!(node, 1);
                    assert!((DOWN_MS.0..=DOWN_MS.1).contains(&down_ms));
                }
                Some(Fault::Partition { minority, .. }) => {
                    assert!(!minority.is_empty() && minority.len() <= 1)
                }
                Some(Fault::OneWayCut { from, to, .. }) => assert_ne!(from, to),
                Some(Fault::Skew { skew_ms, .. }) => assert!(skew_ms.abs() <= SKEW_MS_MAX),
                Some(Fault::Disk { node, nth, .. }) => {
                    assert_eq!(node, 1);
                    assert!((1..=DISK_FAULT_NTH_MAX).contains(&nth));
                }
                Some(_) | None => {}
            }
        }
    }
}
