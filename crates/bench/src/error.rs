//! Typed errors of the benchmarks.
//!
//! A benchmark that hits an engine error stops and says so: a figure
//! measured over failed writes would be a lie, so nothing is retried
//! silently except `Busy`, which is counted and reported.

use std::path::PathBuf;

/// The benchmarks' result type.
pub type Result<T> = std::result::Result<T, BenchError>;

/// What can stop a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The ataman engine refused or failed an operation.
    #[error("engine: {0}")]
    Engine(#[from] ataman_engine::Error),

    /// A file or directory operation of the benchmark itself failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The parameters make no sense (zero ops, zero writers, ...).
    #[error("invalid benchmark parameters: {0}")]
    InvalidArgument(String),

    /// The run finished but what it measured is inconsistent (a bug in the
    /// engine or the benchmark): e.g. a read of a written key found nothing.
    #[error("benchmark check failed: {0}")]
    Check(String),

    /// The child process that fills a database for the recovery benchmark failed.
    #[error("fill child process: {0}")]
    Child(String),

    /// The report could not be encoded.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// fjall (the comparison engine) failed.
    #[cfg(feature = "fjall")]
    #[error("fjall: {0}")]
    Fjall(#[from] fjall::Error),
}

impl BenchError {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}
