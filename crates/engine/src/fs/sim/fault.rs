//! Injected write and sync failures, and the operation counters.

use std::io;
use std::path::Path;

/// Which operations a [`Fault`] counts and fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// [`WritableFile::append`](crate::fs::WritableFile::append).
    Write,
    /// [`WritableFile::sync`](crate::fs::WritableFile::sync).
    Sync,
    /// Either of the two above.
    WriteOrSync,
    /// [`FileSystem::sync_dir`](crate::fs::FileSystem::sync_dir).
    SyncDir,
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// EIO: `io::ErrorKind::Other` with a message naming the operation and path.
    Io,
    /// ENOSPC: `io::ErrorKind::StorageFull`.
    NoSpace,
}

/// One armed failure: the `nth` future matching operation fails once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Operations that count towards `nth` and may fail.
    pub op: FaultOp,
    /// 1 fails the next matching operation, 2 the one after, and so on (0 acts as 1).
    pub nth: u64,
    /// The error returned.
    pub kind: FaultKind,
    /// When set, only operations on paths containing this substring match.
    /// A file handle matches by the path it was opened with.
    pub path_contains: Option<String>,
}

impl Fault {
    /// Fails the `nth` future `op` on any path with `kind`.
    pub fn new(op: FaultOp, nth: u64, kind: FaultKind) -> Fault {
        Fault {
            op,
            nth,
            kind,
            path_contains: None,
        }
    }

    /// Restricts the fault to paths containing `needle` (e.g. `".wal"`).
    pub fn on_paths_containing(mut self, needle: &str) -> Fault {
        self.path_contains = Some(needle.to_owned());
        self
    }

    fn matches(&self, op: FaultOp, path: &Path) -> bool {
        let op_matches = self.op == op
            || (self.op == FaultOp::WriteOrSync && matches!(op, FaultOp::Write | FaultOp::Sync));
        let path_matches = match &self.path_contains {
            Some(needle) => path.to_string_lossy().contains(needle.as_str()),
            None => true,
        };
        op_matches && path_matches
    }
}

/// Operation counters, for tests. Failed operations are not counted as done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Appends that succeeded.
    pub writes: u64,
    /// Bytes those appends wrote.
    pub bytes_written: u64,
    /// File syncs that succeeded.
    pub syncs: u64,
    /// Directory syncs that succeeded.
    pub dir_syncs: u64,
    /// Injected faults that fired.
    pub faults_fired: u64,
}

/// Armed faults (each with its countdown) and the counters.
#[derive(Debug, Clone, Default)]
pub(super) struct Faults {
    armed: Vec<(Fault, u64)>,
    /// The counters.
    pub stats: SimStats,
}

impl Faults {
    /// Arms `fault`; several faults may be armed at once.
    pub fn arm(&mut self, fault: Fault) {
        let countdown = fault.nth.max(1);
        self.armed.push((fault, countdown));
    }

    /// Disarms every fault.
    pub fn clear(&mut self) {
        self.armed.clear();
    }

    /// Faults still armed.
    pub fn armed(&self) -> usize {
        self.armed.len()
    }

    /// Counts one `op` on `path` against every matching fault; the error of
    /// the first fault whose countdown reaches zero (each fault fires once).
    pub fn before(&mut self, op: FaultOp, path: &Path) -> io::Result<()> {
        let mut fired = None;
        self.armed.retain_mut(|(fault, countdown)| {
            if !fault.matches(op, path) {
                return true;
            }
            *countdown -= 1;
            if *countdown > 0 {
                return true;
            }
            if fired.is_none() {
                fired = Some(fault.kind);
            }
            false
        });
        let Some(kind) = fired else {
            return Ok(());
        };
        self.stats.faults_fired += 1;
        let what = format!("injected fault on {op:?} of {}", path.display());
        Err(match kind {
            FaultKind::Io => io::Error::other(format!("{what}: EIO")),
            FaultKind::NoSpace => {
                io::Error::new(io::ErrorKind::StorageFull, format!("{what}: ENOSPC"))
            }
        })
    }
}
