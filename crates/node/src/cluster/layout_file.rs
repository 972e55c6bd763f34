//! `<data-dir>/LAYOUT`: the node's committed layout, and which layout a
//! node starts with.
//!
//! The file holds [`Layout::encode`]'s bytes, written to a temporary file,
//! fsynced, renamed over the file, and the directory fsynced, so a reader
//! sees the old layout or the new one, never a torn one, and the new one
//! survives a power loss once [`store`] returns. A file that does not
//! decode (checksum, format) is an error naming it: the node refuses to
//! start rather than guess its membership.
//!
//! # Rules ([`resolve`])
//! - No stored layout: version 1 is bootstrapped from the `--cluster`
//!   list (`R` defaults to its size) and stored.
//! - A stored layout wins over the flags. When the flags name another set
//!   of nodes (or another `R`), the list is stale: the node says so in
//!   its log and keeps the stored layout.

use super::layout::{Layout, LayoutDecodeError, LayoutError};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The layout file's name in the data directory.
pub const LAYOUT_FILE: &str = "LAYOUT";
/// The temporary file a new layout is written to before the rename.
pub const LAYOUT_TEMP_FILE: &str = "LAYOUT.tmp";

/// Why the layout file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LayoutFileError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file holds no valid layout.
    #[error("{path} is not a valid layout: {source}")]
    Corrupt {
        /// The file.
        path: String,
        /// Why.
        source: LayoutDecodeError,
    },
    /// The flags do not make a valid version 1.
    #[error("cannot bootstrap a layout from --cluster: {0}")]
    Bootstrap(LayoutError),
    /// This node is not a member of the stored layout.
    #[error(
        "this node ({url}) is not a member of the stored layout version {version} (members: {members:?})"
    )]
    NotMember {
        /// This node's URL.
        url: String,
        /// The stored version.
        version: u64,
        /// Its members.
        members: Vec<String>,
    },
}

/// A node list to run with: the URLs, this node's index, each node's dial override.
pub type MemberList = (Vec<String>, usize, Vec<Option<String>>);

/// The node list a node runs with under `layout`: the members in the
/// flags' order first, then the members the flags do not name (sorted),
/// with this node's index and each node's dial override carried over by
/// URL. `self_url` must be a member.
pub fn member_list(
    flags: &[String],
    peer_via: &[Option<String>],
    self_url: &str,
    layout: &Layout,
) -> Result<MemberList, LayoutFileError> {
    let mut list: Vec<String> = flags
        .iter()
        .filter(|u| layout.is_member(u))
        .cloned()
        .collect();
    for url in &layout.nodes {
        if !list.contains(url) {
            list.push(url.clone());
        }
    }
    let self_index =
        list.iter()
            .position(|u| u == self_url)
            .ok_or_else(|| LayoutFileError::NotMember {
                url: self_url.to_owned(),
                version: layout.version,
                members: layout.nodes.clone(),
            })?;
    let via = list
        .iter()
        .map(|u| {
            flags
                .iter()
                .position(|f| f == u)
                .and_then(|i| peer_via.get(i).cloned().flatten())
        })
        .collect();
    Ok((list, self_index, via))
}

/// Writes `layout` to `dir/LAYOUT`, atomically and durably.
pub fn store(dir: &Path, layout: &Layout) -> Result<(), LayoutFileError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| LayoutFileError::Io { path, source }
    };
    let temp = dir.join(LAYOUT_TEMP_FILE);
    let mut file = File::create(&temp).map_err(io(&temp))?;
    file.write_all(&layout.encode()).map_err(io(&temp))?;
    file.sync_all().map_err(io(&temp))?;
    drop(file);
    let target = dir.join(LAYOUT_FILE);
    std::fs::rename(&temp, &target).map_err(io(&target))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// The layout in `dir/LAYOUT`, `None` when there is none.
pub fn load(dir: &Path) -> Result<Option<Layout>, LayoutFileError> {
    let path = dir.join(LAYOUT_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(LayoutFileError::Io {
                path: path.display().to_string(),
                source,
            });
        }
    };
    Layout::decode(&bytes)
        .map(Some)
        .map_err(|source| LayoutFileError::Corrupt {
            path: path.display().to_string(),
            source,
        })
}

/// The layout a node starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Startup {
    /// The layout.
    pub layout: Layout,
    /// True if it was bootstrapped now (it must be stored).
    pub bootstrapped: bool,
    /// True if a stored layout won over flags that name something else.
    pub flags_stale: bool,
}

/// Which layout to start with, from the stored one and the flags.
pub fn resolve(
    stored: Option<Layout>,
    cluster: &[String],
    replication_factor: Option<usize>,
) -> Result<Startup, LayoutFileError> {
    let Some(layout) = stored else {
        let layout =
            Layout::bootstrap(cluster, replication_factor).map_err(LayoutFileError::Bootstrap)?;
        return Ok(Startup {
            layout,
            bootstrapped: true,
            flags_stale: false,
        });
    };
    let mut named = cluster.to_vec();
    named.sort();
    let flags_stale =
        named != layout.nodes || replication_factor.is_some_and(|r| r != layout.replication_factor);
    Ok(Startup {
        layout,
        bootstrapped: false,
        flags_stale,
    })
}

/// Loads the stored layout or bootstraps and stores version 1; logs when
/// the flags are stale.
pub fn open(
    dir: &Path,
    cluster: &[String],
    replication_factor: Option<usize>,
) -> Result<Layout, LayoutFileError> {
    let startup = resolve(load(dir)?, cluster, replication_factor)?;
    if startup.bootstrapped {
        store(dir, &startup.layout)?;
    }
    if startup.flags_stale {
        tracing::warn!(
            version = startup.layout.version,
            nodes = ?startup.layout.nodes,
            replication_factor = startup.layout.replication_factor,
            flags = ?cluster,
            "the --cluster list is stale: the stored layout wins"
        );
    }
    Ok(startup.layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(ports: &[u16]) -> Vec<String> {
        ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    }

    /// No file: version 1 from the flags, stored; reopened with the same
    /// flags: the same layout, not stale.
    #[test]
    fn bootstrap_then_reopen() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_none());
        let first = open(dir.path(), &urls(&[2, 1, 3]), None).unwrap();
        assert_eq!((first.version, first.replication_factor), (1, 3));
        assert_eq!(load(dir.path()).unwrap(), Some(first.clone()));
        let again = resolve(load(dir.path()).unwrap(), &urls(&[3, 2, 1]), None).unwrap();
        assert_eq!(again.layout, first);
        assert!(!again.bootstrapped && !again.flags_stale);
    }

    /// A stored later version wins over the original list, which is stale.
    #[test]
    fn stored_layout_wins_over_stale_flags() {
        let dir = tempfile::tempdir().unwrap();
        let grown = Layout::new(2, urls(&[1, 2, 3, 4]), 3).unwrap();
        store(dir.path(), &grown).unwrap();
        let s = resolve(load(dir.path()).unwrap(), &urls(&[1, 2, 3]), None).unwrap();
        assert_eq!(s.layout, grown);
        assert!(s.flags_stale && !s.bootstrapped);
        assert_eq!(open(dir.path(), &urls(&[1, 2, 3]), None).unwrap(), grown);
        // Another R named on the flags is stale too.
        let s = resolve(Some(grown), &urls(&[1, 2, 3, 4]), Some(2)).unwrap();
        assert!(s.flags_stale);
    }

    /// A damaged file is an error naming it, never a silent bootstrap.
    #[test]
    fn corrupt_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(1, urls(&[1, 2, 3]), 3).unwrap();
        store(dir.path(), &layout).unwrap();
        let path = dir.path().join(LAYOUT_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = open(dir.path(), &urls(&[1, 2, 3]), None).unwrap_err();
        assert!(err.to_string().contains("LAYOUT"), "{err}");
        assert!(matches!(err, LayoutFileError::Corrupt { .. }));
    }

    /// The run list keeps the flags' order, appends members the flags do
    /// not name, drops removed ones, and carries dial overrides by URL.
    #[test]
    fn member_list_follows_the_layout() {
        let flags = urls(&[3, 1, 2]);
        let via = vec![None, Some("127.0.0.1:9".to_owned()), None];
        let layout = Layout::new(3, urls(&[1, 3, 4]), 3).unwrap();
        let (list, me, v) = member_list(&flags, &via, &urls(&[1])[0], &layout).unwrap();
        assert_eq!(list, urls(&[3, 1, 4]));
        assert_eq!(me, 1);
        assert_eq!(v, vec![None, Some("127.0.0.1:9".to_owned()), None]);
        let gone = member_list(&flags, &via, &urls(&[2])[0], &layout).unwrap_err();
        assert!(gone.to_string().contains("not a member"), "{gone}");
    }

    /// Flags that cannot make a layout are refused.
    #[test]
    fn bad_flags_are_refused() {
        assert!(matches!(
            resolve(None, &urls(&[1, 1]), None),
            Err(LayoutFileError::Bootstrap(LayoutError::Duplicate(_)))
        ));
    }
}
