//! The `--fault-control FILE` test hook: faults a test switches on and off
//! in a running node by rewriting a file (docs/API.md, "Test hooks").
//!
//! A thread (`ataman-fault-control`) reads the file every
//! [`POLL_INTERVAL`] and applies its lines:
//!
//! - `disk_full=0|1`: while 1, the engine's file writes (the main engine and
//!   the hint store) fail with ENOSPC (`ataman_engine::fs::FaultFs`). An
//!   engine that met the failure stays poisoned after 0; a restart heals it.
//! - `clock_offset_ms=N`: the hybrid logical clock reads the wall clock
//!   shifted by `N` ms (signed); timestamps still never go back.
//! - `sync_delay_ms=N` (0..=60000): every file and directory sync of the
//!   engines takes `N` ms longer (a slow disk).
//!
//! A missing file, a missing line or a line that does not parse means 0
//! (a bad line is reported once on stderr). Without the option no thread
//! runs and the node's clock and file system are the plain ones.
//!
//! # Thread safety
//! The switches are atomics shared with the file system wrapper and the
//! clock; the thread only stores to them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// How often the file is read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(75);
/// Largest file read; the rest is ignored (a few short lines are expected).
pub const FILE_BYTES_MAX: usize = 4096;

/// The switches one fault-control file drives.
#[derive(Debug, Clone, Default)]
pub struct FaultSwitches {
    /// File writes fail with ENOSPC while set.
    pub disk_full: Arc<AtomicBool>,
    /// Milliseconds added to the wall clock the HLC reads.
    pub clock_offset_ms: Arc<AtomicI64>,
    /// Milliseconds added to every file sync of the engines (a slow disk).
    pub sync_delay_ms: Arc<AtomicU64>,
}

/// What one reading of the file asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultState {
    /// `disk_full=1`.
    pub disk_full: bool,
    /// `clock_offset_ms=N`.
    pub clock_offset_ms: i64,
    /// `sync_delay_ms=N`.
    pub sync_delay_ms: u64,
}

/// Parses the file's text; returns the state and the lines it did not understand.
pub fn parse(text: &str) -> (FaultState, Vec<String>) {
    let mut state = FaultState::default();
    let mut bad = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            continue;
        }
        match line.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("disk_full", "0")) => state.disk_full = false,
            Some(("disk_full", "1")) => state.disk_full = true,
            Some(("clock_offset_ms", v)) => match v.parse::<i64>() {
                Ok(ms) => state.clock_offset_ms = ms,
                Err(_) => bad.push(line.to_owned()),
            },
            // At most a minute: a test hook, not a way to hang a node.
            Some(("sync_delay_ms", v)) => match v.parse::<u64>() {
                Ok(ms) if ms <= 60_000 => state.sync_delay_ms = ms,
                _ => bad.push(line.to_owned()),
            },
            _ => bad.push(line.to_owned()),
        }
    }
    (state, bad)
}

impl FaultSwitches {
    /// Sets the switches to `state`.
    pub fn apply(&self, state: FaultState) {
        self.disk_full.store(state.disk_full, Ordering::Relaxed);
        self.clock_offset_ms
            .store(state.clock_offset_ms, Ordering::Relaxed);
        self.sync_delay_ms
            .store(state.sync_delay_ms, Ordering::Relaxed);
    }
}

/// Starts the thread polling `path` for the life of the process; it stops
/// when `stop` returns true. The first reading happens before this returns,
/// so faults present at start apply to the engine's open.
pub fn start(
    path: PathBuf,
    switches: FaultSwitches,
    stop: fn() -> bool,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut last_bad: Vec<String> = Vec::new();
    poll_once(&path, &switches, &mut last_bad);
    std::thread::Builder::new()
        .name("ataman-fault-control".into())
        .spawn(move || {
            // Runs for the life of the node, one reading per interval.
            while !stop() {
                std::thread::sleep(POLL_INTERVAL);
                poll_once(&path, &switches, &mut last_bad);
            }
        })
}

fn poll_once(path: &PathBuf, switches: &FaultSwitches, last_bad: &mut Vec<String>) {
    let text = match std::fs::read(path) {
        Ok(mut bytes) => {
            bytes.truncate(FILE_BYTES_MAX);
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(_) => String::new(),
    };
    let (state, bad) = parse(&text);
    if !bad.is_empty() && bad != *last_bad {
        tracing::warn!(
            file = %path.display(),
            lines = ?bad,
            "fault-control: ignoring lines that do not parse"
        );
    }
    *last_bad = bad;
    let before = FaultState {
        disk_full: switches.disk_full.load(Ordering::Relaxed),
        clock_offset_ms: switches.clock_offset_ms.load(Ordering::Relaxed),
        sync_delay_ms: switches.sync_delay_ms.load(Ordering::Relaxed),
    };
    if before != state {
        tracing::info!(
            file = %path.display(),
            disk_full = u8::from(state.disk_full),
            clock_offset_ms = state.clock_offset_ms,
            sync_delay_ms = state.sync_delay_ms,
            "fault-control: faults changed"
        );
    }
    switches.apply(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known lines set the state, the last one wins, anything else is reported.
    #[test]
    fn parses_lines() {
        let (state, bad) =
            parse("disk_full=1\n clock_offset_ms = -30000 \n# note\nsync_delay_ms=20\n\n");
        assert_eq!(
            state,
            FaultState {
                disk_full: true,
                clock_offset_ms: -30_000,
                sync_delay_ms: 20,
            }
        );
        assert!(bad.is_empty());
        let (state, bad) = parse(
            "disk_full=1\ndisk_full=0\nclock_offset_ms=x\nfoo\nsync_delay_ms=-1\nsync_delay_ms=60001\n",
        );
        assert_eq!(state, FaultState::default());
        assert_eq!(
            bad,
            vec![
                "clock_offset_ms=x".to_string(),
                "foo".to_string(),
                "sync_delay_ms=-1".to_string(),
                "sync_delay_ms=60001".to_string()
            ]
        );
        assert_eq!(parse("").0, FaultState::default());
    }

    /// A reading of the file flips the shared switches; a missing file clears them.
    #[test]
    fn poll_applies_the_file() {
        let dir = std::env::temp_dir().join(format!("ataman-fault-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("faults");
        let switches = FaultSwitches::default();
        std::fs::write(&path, "disk_full=1\nclock_offset_ms=1500\n").unwrap();
        poll_once(&path, &switches, &mut Vec::new());
        assert!(switches.disk_full.load(Ordering::Relaxed));
        assert_eq!(switches.clock_offset_ms.load(Ordering::Relaxed), 1500);
        std::fs::remove_file(&path).unwrap();
        poll_once(&path, &switches, &mut Vec::new());
        assert!(!switches.disk_full.load(Ordering::Relaxed));
        assert_eq!(switches.clock_offset_ms.load(Ordering::Relaxed), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
