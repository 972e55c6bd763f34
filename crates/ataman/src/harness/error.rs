//! Why a run could not be carried out (not what it found: that is the
//! report's findings).

/// Why a run could not be carried out (not what it found).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A node would not start or stop.
    #[error("node {node}: {reason}")]
    Node {
        /// The node.
        node: usize,
        /// What went wrong.
        reason: String,
    },
    /// Arguments that cannot make a run.
    #[error("{0}")]
    Usage(String),
    /// SIGINT or SIGTERM: the nodes were stopped, nothing was checked.
    #[error("interrupted: the nodes were stopped, nothing was checked")]
    Interrupted,
}
