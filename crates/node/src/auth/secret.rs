//! The cluster secret (`--cluster-secret-file`): the key of the peers'
//! HMAC handshake ([`super::peer_proof`]). It is never sent, logged or
//! shown; `Debug` prints a placeholder.

use super::private_file::{PrivateFileError, read_private};
use std::path::Path;

/// The shortest secret accepted, bytes.
pub const SECRET_BYTES_MIN: usize = 16;

/// The cluster secret's bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(Vec<u8>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Why a secret file is refused.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// Its permissions, or reading it.
    #[error(transparent)]
    File(#[from] PrivateFileError),
    /// Too short once surrounding white space is dropped.
    #[error("{file}: the cluster secret must be at least {SECRET_BYTES_MIN} bytes")]
    Short {
        /// The file.
        file: String,
    },
}

impl ClusterSecret {
    /// A secret from bytes (tests, the fuzz target); `None` when too short.
    pub fn from_bytes(bytes: &[u8]) -> Option<ClusterSecret> {
        (bytes.len() >= SECRET_BYTES_MIN).then(|| ClusterSecret(bytes.to_vec()))
    }

    /// Reads the secret from `path` (the file's text, white space around it dropped).
    pub fn read(path: &Path) -> Result<ClusterSecret, SecretFileError> {
        let text = read_private(path)?;
        ClusterSecret::from_bytes(text.trim().as_bytes()).ok_or_else(|| SecretFileError::Short {
            file: path.display().to_string(),
        })
    }

    /// The key bytes (for the HMAC only).
    pub(crate) fn key(&self) -> &[u8] {
        &self.0
    }
}
