//! Command-line spellings of the engine's per-write and per-node modes.

use ataman_engine::{Durability, WalMode};

/// `--durability`: when a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityArg {
    /// After the WAL made it durable (fsync in `--wal-mode fsync`).
    Complete,
    /// After the WAL thread took it into a group.
    Submit,
    /// After it is in the memtable.
    None,
}

impl DurabilityArg {
    /// The engine's value.
    pub fn to_engine(self) -> Durability {
        match self {
            DurabilityArg::Complete => Durability::Complete,
            DurabilityArg::Submit => Durability::Submit,
            DurabilityArg::None => Durability::None,
        }
    }

    /// The spelling used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DurabilityArg::Complete => "complete",
            DurabilityArg::Submit => "submit",
            DurabilityArg::None => "none",
        }
    }
}

/// `--wal-mode`: what the WAL thread does with each group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WalModeArg {
    /// write + fdatasync per group.
    Fsync,
    /// write only.
    Write,
    /// no WAL at all.
    None,
}

impl WalModeArg {
    /// The engine's value.
    pub fn to_engine(self) -> WalMode {
        match self {
            WalModeArg::Fsync => WalMode::Fsync,
            WalModeArg::Write => WalMode::Write,
            WalModeArg::None => WalMode::None,
        }
    }

    /// The spelling used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            WalModeArg::Fsync => "fsync",
            WalModeArg::Write => "write",
            WalModeArg::None => "none",
        }
    }
}
