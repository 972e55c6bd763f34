//! The token set shared with the network threads, and its rotation without
//! a restart: the file is re-read on SIGHUP and when its modification time,
//! size or inode changes (checked by the main thread at most once a
//! second). A bad new file keeps the old tokens and says why.
//!
//! The network threads read the set through an `ArcSwap`: a lock-free load
//! per request; a reload swaps in a whole new set.

use super::metrics::AuthMetrics;
use super::policy::Role;
use super::private_file::read_private;
use super::tokens::TokenSet;
use arc_swap::ArcSwap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the token file's metadata is looked at.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// SIGHUP asks for a reload of the token file (instead of ending the process).
pub fn install_sighup() {
    if let Err(e) = crate::hangup::install() {
        tracing::warn!("auth: cannot install the SIGHUP handler: {e}");
    }
}

/// What identifies a version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified_ns: i128,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        len: meta.len(),
        inode: meta.ino(),
    })
}

/// Reads and parses the token file.
pub fn read_tokens(path: &Path) -> Result<TokenSet, String> {
    let text = read_private(path).map_err(|e| e.to_string())?;
    TokenSet::parse(path, &text).map_err(|e| e.to_string())
}

/// The token file and its current set.
pub struct TokenStore {
    path: PathBuf,
    tokens: ArcSwap<TokenSet>,
    /// The file's stamp when last read (or tried), and when it was last checked.
    checked: Mutex<(Option<Stamp>, Instant)>,
    /// The SIGHUPs already acted on.
    hangups: crate::hangup::Seen,
}

impl TokenStore {
    /// Reads `path` (refusing a file others may read).
    pub fn open(path: &Path) -> Result<TokenStore, String> {
        let before = stamp(path);
        let tokens = read_tokens(path)?;
        tracing::info!(file = %path.display(), tokens = tokens.len(), "auth: client tokens loaded");
        Ok(TokenStore {
            path: path.to_owned(),
            tokens: ArcSwap::from_pointee(tokens),
            checked: Mutex::new((before, Instant::now())),
            hangups: crate::hangup::Seen::now(),
        })
    }

    /// The role of `token`, if any.
    pub fn role_of(&self, token: &[u8]) -> Option<Role> {
        self.tokens.load().role_of(token)
    }

    /// Reloads on SIGHUP, or once [`CHECK_INTERVAL`] passed and the file
    /// changed. Called by the main thread.
    pub fn tick(&self, metrics: &AuthMetrics) {
        let hangup = self.hangups.take();
        let Ok(mut checked) = self.checked.lock() else {
            return;
        };
        if !hangup && checked.1.elapsed() < CHECK_INTERVAL {
            return;
        }
        checked.1 = Instant::now();
        let now = stamp(&self.path);
        if !hangup && now == checked.0 {
            return;
        }
        checked.0 = now;
        match read_tokens(&self.path) {
            Ok(tokens) => {
                tracing::info!(
                    file = %self.path.display(),
                    tokens = tokens.len(),
                    "auth: client tokens reloaded"
                );
                self.tokens.store(Arc::new(tokens));
                metrics.reloaded(true);
            }
            Err(e) => {
                tracing::error!(
                    file = %self.path.display(),
                    "auth: token file not reloaded, the previous tokens stay in force: {e}"
                );
                metrics.reloaded(false);
            }
        }
    }
}
