//! Refilling: a node whose data directory was wiped or lost comes back
//! empty, and until anti-entropy has brought back what its peers hold, a
//! quorum read it helps answer can miss an acknowledged write (its empty
//! copy plus one that missed the write make a quorum). Started with
//! `--refill`, the node serves no reads (as a coordinator's local replica,
//! to peers, or local-only) until an anti-entropy round with every peer
//! has completed. It stores replicated writes meanwhile but does not count
//! towards their `ack` ([`WRITE_NOT_COUNTED`]): without the versions it
//! has not fetched yet it cannot tell whether a write must be re-stamped
//! (a replica that acknowledged an earlier write was wiped). Rounds run at
//! once and every [`RETRY`] until one completes.
//!
//! The state survives restarts: `--refill` creates `<data-dir>/REFILLING`
//! (made durable before the node serves), and a node that finds the file
//! refills whether or not the option is given again; the file is removed
//! when the refill completes (docs/FORMAT.md, "REFILLING").

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The marker file's name in the data directory.
pub const MARKER: &str = "REFILLING";

/// How long after a failed refill round the next one starts.
pub const RETRY: Duration = Duration::from_millis(500);

/// Why a replica's write does not count during the refill (it is stored,
/// but the replica could not check it against versions it has not
/// fetched yet).
pub const WRITE_NOT_COUNTED: &str = "refilling after a wipe (--refill): the write is kept \
     but does not count towards ack until the refill completes";

/// What a read refused during the refill answers (503, or a peer's
/// `Unavailable`).
pub const REFUSAL: &str = "this node is refilling after its data was wiped (--refill): \
     it serves no reads until an anti-entropy round with every peer completes";

/// Whether the node is refilling, and its marker file.
#[derive(Debug)]
pub struct Refill {
    active: AtomicBool,
    marker: PathBuf,
}

impl Refill {
    /// The state at start: refilling if `requested` or the marker is there
    /// (a refill interrupted by a stop); a new refill's marker is made
    /// durable before this returns.
    pub fn start(data_dir: &Path, requested: bool) -> Result<Refill, String> {
        let marker = data_dir.join(MARKER);
        let present = marker
            .try_exists()
            .map_err(|e| format!("cannot check {}: {e}", marker.display()))?;
        if requested && !present {
            create_durably(data_dir, &marker)
                .map_err(|e| format!("cannot create {}: {e}", marker.display()))?;
        }
        Ok(Refill {
            active: AtomicBool::new(requested || present),
            marker,
        })
    }

    /// A state that is not refilling (tests).
    pub fn off(data_dir: &Path) -> Refill {
        Refill {
            active: AtomicBool::new(false),
            marker: data_dir.join(MARKER),
        }
    }

    /// True while reads are refused.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// A round with every peer completed: reads are served again and the
    /// marker is removed (durably; if that fails, the next start refills
    /// again, which is safe).
    pub fn complete(&self) -> Result<(), String> {
        self.active.store(false, Ordering::Release);
        match std::fs::remove_file(&self.marker) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot remove {}: {e}", self.marker.display())),
        }
        let dir = self.marker.parent().unwrap_or(Path::new("."));
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| format!("cannot sync {}: {e}", dir.display()))
    }
}

fn create_durably(dir: &Path, marker: &Path) -> std::io::Result<()> {
    let mut file = File::create(marker)?;
    file.write_all(b"refilling: reads wait for an anti-entropy round with every peer\n")?;
    file.sync_all()?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--refill` leaves a marker that keeps the next start refilling until
    /// the refill completes; without either, nothing refills.
    #[test]
    fn marker_survives_until_complete() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!Refill::start(dir.path(), false).unwrap().active());
        let r = Refill::start(dir.path(), true).unwrap();
        assert!(r.active() && dir.path().join(MARKER).exists());
        // A restart without the option (say after kill -9) still refills.
        let again = Refill::start(dir.path(), false).unwrap();
        assert!(again.active());
        again.complete().unwrap();
        assert!(!again.active() && !dir.path().join(MARKER).exists());
        assert!(!Refill::start(dir.path(), false).unwrap().active());
        // Completing twice is harmless.
        again.complete().unwrap();
    }
}
