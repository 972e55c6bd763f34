//! Removing obsolete tables' files off the threads that drop them.
//!
//! A table a compaction replaced is removed when the last version holding
//! it goes, and that may be a reader's: a network thread that read through
//! an older view. Removing a 64 MiB table (the unlink, and the page cache
//! the kernel drops when its descriptor closes) takes milliseconds of
//! kernel time, all of it on that thread and in front of every request
//! behind it. So the last holder hands the file to the engine's reap
//! thread (`ataman-reap`, at the compaction thread's priority), which
//! removes it; as RocksDB's background purge does.
//!
//! # Rules
//! - A queued file is removed by the reap thread, in queue order.
//! - At the engine's close the thread removes what is queued, then ends;
//!   a file handed over after that is removed by the thread that hands it
//!   over. A file never removed (a crash) is an orphan the next open
//!   removes: the manifest no longer names it.
//! - The queue is bounded by the tables that exist: each table is queued
//!   once, when its last holder drops it.

use crate::fs::FileSystem;
use crate::sst::Table;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A table's file to remove, with the table itself (its descriptor closes
/// when this is dropped).
pub struct Doomed {
    /// The file.
    pub path: PathBuf,
    /// What it is removed through.
    pub fs: Arc<dyn FileSystem>,
    /// The open table.
    pub table: Arc<Table>,
}

impl Doomed {
    /// Removes the file and closes the table (unless another holder keeps
    /// it open). A failure leaves an orphan the next open removes.
    pub fn remove(self) {
        let _ = self.fs.remove_file(&self.path);
        drop(self.table);
    }
}

#[derive(Default)]
struct State {
    queue: Vec<Doomed>,
    closed: bool,
}

/// The queue of files to remove and the reap thread's loop.
#[derive(Default)]
pub struct ObsoleteFiles {
    state: Mutex<State>,
    cond: Condvar,
    removed: AtomicU64,
}

impl ObsoleteFiles {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `doomed` for the reap thread; gives it back once the queue
    /// is closed (the caller removes it).
    pub fn push(&self, doomed: Doomed) -> Result<(), Doomed> {
        let mut state = self.lock();
        if state.closed {
            return Err(doomed);
        }
        state.queue.push(doomed);
        drop(state);
        self.cond.notify_one();
        Ok(())
    }

    /// The reap thread's body: removes queued files until the queue is
    /// closed and empty.
    pub fn run(&self) {
        loop {
            let batch = {
                let mut state = self.lock();
                while state.queue.is_empty() && !state.closed {
                    state = self.cond.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                if state.queue.is_empty() {
                    return;
                }
                std::mem::take(&mut state.queue)
            };
            for doomed in batch {
                doomed.remove();
                self.removed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Closes the queue: the reap thread removes what it holds, then ends.
    pub fn close(&self) {
        self.lock().closed = true;
        self.cond.notify_all();
    }

    /// Files the reap thread removed.
    pub fn removed(&self) -> u64 {
        self.removed.load(Ordering::Relaxed)
    }
}
