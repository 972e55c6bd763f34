//! What `cluster start` and `cluster add|remove` share about a local
//! cluster's directory (docs/CLUSTER.md, "Growing and shrinking"):
//!
//! - `DIR/SUPERVISOR`: written by `cluster start`: its pid, the scheme,
//!   the base ports and the number of nodes it started with, one
//!   `name value` line each.
//! - `DIR/node-K/JOIN`: written by `cluster add`: the seed URL node `K`
//!   joins through. The supervisor starts such a node with `--join SEED`
//!   (also after a restart of `cluster start`).
//! - `DIR/node-K/REMOVED`: written by `cluster remove` once the layout
//!   without node `K` is settled: the supervisor stops the node and no
//!   longer starts it.

use std::path::{Path, PathBuf};

/// The supervisor's file in the cluster directory.
pub const SUPERVISOR_FILE: &str = "SUPERVISOR";
/// A node to start with `--join` (holds the seed URL).
pub const JOIN_FILE: &str = "JOIN";
/// A node removed from the layout: not started, stopped if running.
pub const REMOVED_FILE: &str = "REMOVED";

/// What `cluster start` records for `cluster add|remove`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supervisor {
    /// The supervisor's process id.
    pub pid: u32,
    /// `http` or `https`.
    pub scheme: String,
    /// Node 0's HTTP port.
    pub base_port: u16,
    /// Node 0's RESP port.
    pub resp_base_port: u16,
    /// Nodes started from `--nodes`.
    pub nodes: usize,
}

impl Supervisor {
    /// The file's text.
    pub fn render(&self) -> String {
        format!(
            "pid {}\nscheme {}\nbase_port {}\nresp_base_port {}\nnodes {}\n",
            self.pid, self.scheme, self.base_port, self.resp_base_port, self.nodes
        )
    }

    /// Parses the file's text, or says what is wrong.
    pub fn parse(text: &str) -> Result<Supervisor, String> {
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .map(str::trim)
                .ok_or(format!("no `{name}` line"))
        };
        let number = |name: &str| -> Result<u64, String> {
            field(name)?.parse().map_err(|e| format!("`{name}`: {e}"))
        };
        let port = |name: &str| -> Result<u16, String> {
            u16::try_from(number(name)?).map_err(|e| format!("`{name}`: {e}"))
        };
        let scheme = field("scheme")?;
        if scheme != "http" && scheme != "https" {
            return Err(format!("`scheme` is {scheme}, not http or https"));
        }
        Ok(Supervisor {
            pid: u32::try_from(number("pid")?).map_err(|e| format!("`pid`: {e}"))?,
            scheme: scheme.to_owned(),
            base_port: port("base_port")?,
            resp_base_port: port("resp_base_port")?,
            nodes: usize::try_from(number("nodes")?).map_err(|e| format!("`nodes`: {e}"))?,
        })
    }

    /// Node `k`'s HTTP port, if it fits.
    pub fn port(&self, k: usize) -> Option<u16> {
        u16::try_from(usize::from(self.base_port) + k).ok()
    }

    /// Node `k`'s RESP port, if it fits.
    pub fn resp_port(&self, k: usize) -> Option<u16> {
        u16::try_from(usize::from(self.resp_base_port) + k).ok()
    }

    /// Node `k`'s URL, if its port fits.
    pub fn url(&self, k: usize) -> Option<String> {
        Some(format!("{}://127.0.0.1:{}", self.scheme, self.port(k)?))
    }
}

/// Node `k`'s data directory.
pub fn node_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("node-{k}"))
}

/// The indices of the `node-K` directories in `dir`, ascending.
pub fn node_indices(dir: &Path) -> Vec<usize> {
    let mut out: Vec<usize> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node-")?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// The seed node `k` joins through, when it was added by `cluster add`.
pub fn join_seed(dir: &Path, k: usize) -> Option<String> {
    let text = std::fs::read_to_string(node_dir(dir, k).join(JOIN_FILE)).ok()?;
    let seed = text.trim();
    (!seed.is_empty()).then(|| seed.to_owned())
}

/// True once `cluster remove` removed node `k`.
pub fn is_removed(dir: &Path, k: usize) -> bool {
    node_dir(dir, k).join(REMOVED_FILE).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file round-trips; a damaged one names what is wrong.
    #[test]
    fn supervisor_file() {
        let s = Supervisor {
            pid: 42,
            scheme: "http".into(),
            base_port: 19234,
            resp_base_port: 20234,
            nodes: 3,
        };
        assert_eq!(Supervisor::parse(&s.render()).unwrap(), s);
        assert_eq!(s.url(3).unwrap(), "http://127.0.0.1:19237");
        assert_eq!(s.resp_port(3), Some(20237));
        let bad = s.render().replace("scheme http", "scheme ftp");
        assert!(Supervisor::parse(&bad).unwrap_err().contains("scheme"));
        let missing = s.render().replace("nodes 3\n", "");
        assert!(Supervisor::parse(&missing).unwrap_err().contains("nodes"));
    }

    /// Node directories are found in order; markers are read back.
    #[test]
    fn markers() {
        let dir = tempfile::tempdir().unwrap();
        for k in [2, 0, 10] {
            std::fs::create_dir_all(node_dir(dir.path(), k)).unwrap();
        }
        std::fs::write(dir.path().join("node-x"), "").unwrap();
        assert_eq!(node_indices(dir.path()), vec![0, 2, 10]);
        assert_eq!(join_seed(dir.path(), 2), None);
        std::fs::write(
            node_dir(dir.path(), 2).join(JOIN_FILE),
            "http://127.0.0.1:1\n",
        )
        .unwrap();
        assert_eq!(
            join_seed(dir.path(), 2).as_deref(),
            Some("http://127.0.0.1:1")
        );
        assert!(!is_removed(dir.path(), 0));
        std::fs::write(node_dir(dir.path(), 0).join(REMOVED_FILE), "").unwrap();
        assert!(is_removed(dir.path(), 0));
    }
}
