//! Crash images: the states a power cut at this moment could leave.
//!
//! An image is built from the model in two steps, drawing from one
//! [`Rng`] stream (the test kit's) in a fixed order (directories by path,
//! then files by inode number), so a seed always gives the same image.
//!
//! 1. **Names.** For each directory, a number `k` of its pending namespace
//!    changes (creations, renames, removals since its last `sync_dir`) is
//!    chosen by [`NamespaceMode`], and the first `k` are applied to the
//!    durable names. Changes reach the disk in order (as a journal commits
//!    them), and a rename is one change, so a file is never lost or doubled
//!    by a half-done rename.
//! 2. **Bytes.** Each file named in the image keeps its durable bytes (those
//!    covered by a successful `sync` or `truncate`) plus a part of its
//!    unsynced tail chosen by [`TailMode`]. Nothing else: never bytes that
//!    were not written, never a hole.
//!
//! The image holds only those names and bytes, all of them durable; it has
//! no open handles, locks or armed faults, and zeroed counters.

use super::model::{Ino, Inode, Model};
use ataman_testkit::rng::Rng;
use std::collections::BTreeMap;

/// Size of a disk sector: the smallest unit a torn write is cut at.
pub const SECTOR_BYTES: usize = 512;

/// Size of a page: the unit the page cache writes back.
pub const PAGE_BYTES: usize = 4096;

/// How much of a file's unsynced tail an image keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailMode {
    /// None of it: the file ends at its durable length.
    Drop,
    /// All of it, as if written back just before the cut.
    Keep,
    /// A prefix of uniformly random length (any byte offset, including none and all).
    RandomPrefix,
    /// Every unsynced append but the last whole; the last cut at a random
    /// multiple of [`SECTOR_BYTES`] (file offset) inside it, or dropped
    /// whole if it crosses no sector boundary.
    TornSector,
    /// Like `TornSector`, at a multiple of [`PAGE_BYTES`].
    TornPage,
    /// One of the five modes above, chosen per file.
    Random,
}

/// How many of a directory's pending namespace changes an image applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceMode {
    /// None: the names as of the last `sync_dir`.
    Durable,
    /// All: the live names.
    Live,
    /// A random number of them (0 to all), in order, chosen per directory.
    RandomPrefix,
}

/// Everything that decides a crash image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashMode {
    /// Which unsynced bytes survive.
    pub tail: TailMode,
    /// Which unsynced namespace changes survive.
    pub namespace: NamespaceMode,
    /// Seeds the random choices.
    pub seed: u64,
}

impl CrashMode {
    /// The mode of [`SimFs::crash_image`](super::SimFs::crash_image): everything random.
    pub fn random(seed: u64) -> CrashMode {
        CrashMode {
            tail: TailMode::Random,
            namespace: NamespaceMode::RandomPrefix,
            seed,
        }
    }

    /// Only what was synced: no unsynced byte or name change survives.
    pub fn durable_only() -> CrashMode {
        CrashMode {
            tail: TailMode::Drop,
            namespace: NamespaceMode::Durable,
            seed: 0,
        }
    }
}

/// Builds the crash image of `model` under `mode`.
pub(super) fn crash_image(model: &Model, mode: CrashMode) -> Model {
    let mut rng = Rng::new(mode.seed);
    let mut image = Model {
        next_ino: model.next_ino,
        ..Model::default()
    };
    for (path, dir) in &model.dirs {
        let pending = dir.pending.len() as u64;
        let applied = match mode.namespace {
            NamespaceMode::Durable => 0,
            NamespaceMode::Live => pending,
            NamespaceMode::RandomPrefix => rng.between(0, pending),
        };
        let names = dir.names_after(applied as usize);
        let entry = image.dirs.entry(path.clone()).or_default();
        entry.live = names.clone();
        entry.durable = names;
    }
    let mut survivors: Vec<Ino> = image
        .dirs
        .values()
        .flat_map(|d| d.live.values().copied())
        .collect();
    survivors.sort_unstable();
    survivors.dedup();
    let mut inodes = BTreeMap::new();
    for ino in survivors {
        let Some(inode) = model.inodes.get(&ino) else {
            continue;
        };
        let len = surviving_len(inode, mode.tail, &mut rng);
        let data = inode.data[..len].to_vec();
        inodes.insert(
            ino,
            Inode {
                durable_len: data.len(),
                data,
                write_ends: Vec::new(),
            },
        );
    }
    image.inodes = inodes;
    image
}

/// How many bytes of `inode` survive under `tail`.
pub(super) fn surviving_len(inode: &Inode, tail: TailMode, rng: &mut Rng) -> usize {
    let durable = inode.durable_len;
    let live = inode.data.len();
    let tail = match tail {
        TailMode::Random => match rng.below(5) {
            0 => TailMode::Drop,
            1 => TailMode::Keep,
            2 => TailMode::RandomPrefix,
            3 => TailMode::TornSector,
            _ => TailMode::TornPage,
        },
        other => other,
    };
    let len = match tail {
        TailMode::Drop | TailMode::Random => durable,
        TailMode::Keep => live,
        TailMode::RandomPrefix => rng.between(durable as u64, live as u64) as usize,
        TailMode::TornSector => torn_last_write(inode, SECTOR_BYTES, rng),
        TailMode::TornPage => torn_last_write(inode, PAGE_BYTES, rng),
    };
    debug_assert!(durable <= len && len <= live);
    len
}

/// The file length when the last unsynced append is cut at a multiple of `unit`.
fn torn_last_write(inode: &Inode, unit: usize, rng: &mut Rng) -> usize {
    let Some(&end) = inode.write_ends.last() else {
        return inode.durable_len;
    };
    let start = match inode.write_ends.len() {
        1 => inode.durable_len,
        n => inode.write_ends[n - 2],
    };
    // Boundaries in [start, end): first_cut, first_cut + unit, ...
    let first_cut = start.div_ceil(unit) * unit;
    if first_cut >= end {
        return start;
    }
    let cuts = (end - 1 - first_cut) / unit + 1;
    first_cut + rng.below(cuts as u64) as usize * unit
}
