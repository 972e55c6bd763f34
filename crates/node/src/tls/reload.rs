//! The node's TLS state and its replacement without a restart.
//!
//! The configurations are rebuilt from the files on SIGHUP, or when a
//! file's modification time changed (checked every
//! [`RELOAD_CHECK_INTERVAL`]). New connections use the new certificate;
//! open ones keep theirs. A pair that does not load (a key that does not
//! match, a file half written) keeps the old configuration and is logged;
//! the next change is tried again.

use super::load::{self, Identity, TlsError};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// How often the files' modification times are compared.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Makes SIGHUP ask for a reload (instead of ending the process).
pub fn install_hangup_handler() -> std::io::Result<()> {
    crate::hangup::install()
}

/// The files given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--tls-cert`: the node's certificate chain (PEM).
    pub cert: PathBuf,
    /// `--tls-key`: its private key (PEM).
    pub key: PathBuf,
    /// `--tls-ca`: the cluster CA (PEM); peers are dialled and verified with it.
    pub ca: Option<PathBuf>,
}

/// The configurations in use.
struct Current {
    server: Arc<ServerConfig>,
    /// For dialling peers (only with a CA).
    client: Option<Arc<ClientConfig>>,
}

/// The node's TLS state, shared by every thread.
pub struct NodeTls {
    files: TlsFiles,
    current: RwLock<Current>,
    /// The files' modification times at the last load, and the last check.
    stamps: Mutex<(Vec<Option<SystemTime>>, Instant)>,
    /// The SIGHUPs already acted on.
    hangups: crate::hangup::Seen,
}

fn build(files: &TlsFiles) -> Result<Current, TlsError> {
    let roots: Option<Arc<RootCertStore>> = files.ca.as_deref().map(load::roots).transpose()?;
    let server = load::server_config(Identity::load(&files.cert, &files.key)?, roots.as_ref())?;
    let client = match &roots {
        Some(roots) => Some(load::client_config(
            roots,
            Some(Identity::load(&files.cert, &files.key)?),
        )?),
        None => None,
    };
    Ok(Current { server, client })
}

fn mtimes(files: &TlsFiles) -> Vec<Option<SystemTime>> {
    let mut paths: Vec<&Path> = vec![&files.cert, &files.key];
    paths.extend(files.ca.as_deref());
    paths
        .into_iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

impl NodeTls {
    /// Loads the files (a failure here stops the node from starting).
    pub fn load(files: TlsFiles) -> Result<NodeTls, TlsError> {
        let stamps = mtimes(&files);
        let current = build(&files)?;
        Ok(NodeTls {
            files,
            current: RwLock::new(current),
            stamps: Mutex::new((stamps, Instant::now())),
            hangups: crate::hangup::Seen::now(),
        })
    }

    /// The listener's configuration for a connection accepted now.
    pub fn server(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(c) => Arc::clone(&c.server),
            Err(poisoned) => Arc::clone(&poisoned.into_inner().server),
        }
    }

    /// The configuration for dialling a peer (`None` without `--tls-ca`).
    pub fn client(&self) -> Option<Arc<ClientConfig>> {
        match self.current.read() {
            Ok(c) => c.client.clone(),
            Err(poisoned) => poisoned.into_inner().client.clone(),
        }
    }

    /// True with `--tls-ca`: a peer upgrade needs a verified certificate.
    pub fn verifies_peers(&self) -> bool {
        self.files.ca.is_some()
    }

    /// Reloads after SIGHUP or a changed file, at most once per
    /// [`RELOAD_CHECK_INTERVAL`] for the file check. Called often (the
    /// node's main loop); returns what a reload attempt gave, if one was made.
    pub fn tick(&self) -> Option<Result<(), TlsError>> {
        let hangup = self.hangups.take();
        let Ok(mut stamps) = self.stamps.lock() else {
            return None;
        };
        if !hangup && stamps.1.elapsed() < RELOAD_CHECK_INTERVAL {
            return None;
        }
        stamps.1 = Instant::now();
        let now = mtimes(&self.files);
        if !hangup && now == stamps.0 {
            return None;
        }
        stamps.0 = now;
        Some(self.reload())
    }

    /// Rebuilds the configurations from the files; on failure the old ones stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = build(&self.files)?;
        match self.current.write() {
            Ok(mut c) => *c = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }

    /// Logs what [`NodeTls::tick`] did.
    pub fn tick_and_log(&self) {
        match self.tick() {
            None => {}
            Some(Ok(())) => tracing::info!(
                cert = %self.files.cert.display(),
                "TLS certificate reloaded; new connections use it"
            ),
            Some(Err(e)) => tracing::warn!(
                error = %e,
                "TLS certificate not reloaded; the previous one stays in use"
            ),
        }
    }
}
