//! `<data-dir>/LAYOUT`: the node's committed layout, and which layout a
//! node starts with; `<data-dir>/LAYOUT-ACCEPTOR`: its Paxos acceptor's
//! state for the next version (`super::agreement`).
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

use super::agreement::{Acceptor, AcceptorDecodeError};
use super::layout::{Layout, LayoutDecodeError, LayoutError};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The layout file's name in the data directory.
pub const LAYOUT_FILE: &str = "LAYOUT";
/// The temporary file a new layout is written to before the rename.
pub const LAYOUT_TEMP_FILE: &str = "LAYOUT.tmp";
/// The Paxos acceptor's state for the next version (`agreement::Acceptor`).
pub const ACCEPTOR_FILE: &str = "LAYOUT-ACCEPTOR";
/// The temporary file a new acceptor state is written to before the rename.
pub const ACCEPTOR_TEMP_FILE: &str = "LAYOUT-ACCEPTOR.tmp";
/// The next layout, chosen by the agreement but not acted on yet
/// (`super::acceptor_node`): the node still serves with `LAYOUT`.
pub const NEXT_FILE: &str = "LAYOUT-NEXT";
/// The temporary file a new next layout is written to before the rename.
pub const NEXT_TEMP_FILE: &str = "LAYOUT-NEXT.tmp";

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
    /// The acceptor file holds no valid state.
    #[error("{path} is not a valid acceptor state: {source}")]
    AcceptorCorrupt {
        /// The file.
        path: String,
        /// Why.
        source: AcceptorDecodeError,
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

/// Writes `bytes` to `dir/name` through `dir/temp`, atomically and durably.
fn store_bytes(dir: &Path, name: &str, temp: &str, bytes: &[u8]) -> Result<(), LayoutFileError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| LayoutFileError::Io { path, source }
    };
    let temp = dir.join(temp);
    let mut file = File::create(&temp).map_err(io(&temp))?;
    file.write_all(bytes).map_err(io(&temp))?;
    file.sync_all().map_err(io(&temp))?;
    drop(file);
    let target = dir.join(name);
    std::fs::rename(&temp, &target).map_err(io(&target))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// The bytes of `dir/name`, `None` when there is no file.
fn load_bytes(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, LayoutFileError> {
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LayoutFileError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Writes `layout` to `dir/LAYOUT`, atomically and durably.
pub fn store(dir: &Path, layout: &Layout) -> Result<(), LayoutFileError> {
    store_bytes(dir, LAYOUT_FILE, LAYOUT_TEMP_FILE, &layout.encode())
}

/// The layout in `dir/LAYOUT`, `None` when there is none.
pub fn load(dir: &Path) -> Result<Option<Layout>, LayoutFileError> {
    let Some(bytes) = load_bytes(dir, LAYOUT_FILE)? else {
        return Ok(None);
    };
    Layout::decode(&bytes)
        .map(Some)
        .map_err(|source| LayoutFileError::Corrupt {
            path: dir.join(LAYOUT_FILE).display().to_string(),
            source,
        })
}

/// Writes the acceptor's state to `dir/LAYOUT-ACCEPTOR`, atomically and
/// durably: an acceptor answers a prepare or accept that changed its state
/// only after this returned.
pub fn store_acceptor(dir: &Path, acceptor: &Acceptor) -> Result<(), LayoutFileError> {
    store_bytes(dir, ACCEPTOR_FILE, ACCEPTOR_TEMP_FILE, &acceptor.encode())
}

/// Writes the chosen next layout to `dir/LAYOUT-NEXT`, atomically and durably.
pub fn store_next(dir: &Path, layout: &Layout) -> Result<(), LayoutFileError> {
    store_bytes(dir, NEXT_FILE, NEXT_TEMP_FILE, &layout.encode())
}

/// Removes `dir/LAYOUT-NEXT` (after a promotion), the directory fsynced.
pub fn remove_next(dir: &Path) -> Result<(), LayoutFileError> {
    let path = dir.join(NEXT_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(LayoutFileError::Io {
                path: path.display().to_string(),
                source,
            });
        }
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| LayoutFileError::Io {
            path: dir.display().to_string(),
            source,
        })
}

/// The chosen next layout in `dir/LAYOUT-NEXT`, `None` when there is none.
pub fn load_next(dir: &Path) -> Result<Option<Layout>, LayoutFileError> {
    let Some(bytes) = load_bytes(dir, NEXT_FILE)? else {
        return Ok(None);
    };
    Layout::decode(&bytes)
        .map(Some)
        .map_err(|source| LayoutFileError::Corrupt {
            path: dir.join(NEXT_FILE).display().to_string(),
            source,
        })
}

/// The acceptor state in `dir/LAYOUT-ACCEPTOR`, or a fresh one for the slot
/// after `committed` when there is none (or it is for a slot already
/// committed).
pub fn load_acceptor(dir: &Path, committed: u64) -> Result<Acceptor, LayoutFileError> {
    let Some(bytes) = load_bytes(dir, ACCEPTOR_FILE)? else {
        return Ok(Acceptor::new(committed + 1));
    };
    let mut acceptor =
        Acceptor::decode(&bytes).map_err(|source| LayoutFileError::AcceptorCorrupt {
            path: dir.join(ACCEPTOR_FILE).display().to_string(),
            source,
        })?;
    acceptor.advance(committed);
    Ok(acceptor)
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

/// How loudly start-up reports a fact about its layout: what happens in
/// normal operation (a grown cluster restarted, a node joining) is `Info`;
/// what an operator should look at is `Warn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loudness {
    /// Normal operation.
    Info,
    /// Worth an operator's look.
    Warn,
}

/// The `--cluster` list differs from the stored layout (the stored one
/// wins either way). Normal once the layout changed through the API
/// (version > 1): the flags go on naming the members the cluster was
/// bootstrapped with, as `ataman cluster start` passes them at every
/// restart. At version 1 nothing changed the layout, so the flags were
/// edited, and the edit is ignored: a warning.
pub fn stale_flags_loudness(stored_version: u64) -> Loudness {
    if stored_version > 1 {
        Loudness::Info
    } else {
        Loudness::Warn
    }
}

/// This node is not a member of the layout it runs with and serves no
/// client. Normal for a node started with `--join` (it waits to be
/// added); otherwise a removed node was started again, or `--self` names
/// no member: a warning.
pub fn not_member_loudness(joining: bool) -> Loudness {
    if joining {
        Loudness::Info
    } else {
        Loudness::Warn
    }
}

/// Loads the stored layout or bootstraps and stores version 1; logs when
/// the flags are stale (at [`stale_flags_loudness`]).
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
        let layout = &startup.layout;
        match stale_flags_loudness(layout.version) {
            Loudness::Info => tracing::info!(
                version = layout.version,
                nodes = ?layout.nodes,
                replication_factor = layout.replication_factor,
                flags = ?cluster,
                "the --cluster list is stale: the stored layout wins (it changed since the bootstrap)"
            ),
            Loudness::Warn => tracing::warn!(
                version = layout.version,
                nodes = ?layout.nodes,
                replication_factor = layout.replication_factor,
                flags = ?cluster,
                "the --cluster list is stale: the stored layout wins"
            ),
        }
    }
    Ok(startup.layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal operation logs at info: a grown cluster restarted with its
    /// bootstrap flags, a joining node not a member yet; an edit of the
    /// flags with no layout change, and a non-member not joining, warn.
    #[test]
    fn normal_operation_is_not_a_warning() {
        assert_eq!(stale_flags_loudness(2), Loudness::Info);
        assert_eq!(stale_flags_loudness(40), Loudness::Info);
        assert_eq!(stale_flags_loudness(1), Loudness::Warn);
        assert_eq!(not_member_loudness(true), Loudness::Info);
        assert_eq!(not_member_loudness(false), Loudness::Warn);
    }

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

    /// The acceptor's promise and accepted value survive a reopen; a state
    /// for a slot already committed starts fresh; damage is refused.
    #[test]
    fn acceptor_state_is_durable() {
        use crate::cluster::agreement::Ballot;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_acceptor(dir.path(), 4).unwrap(), Acceptor::new(5));
        let mut a = Acceptor::new(5);
        let ballot = Ballot { round: 2, node: 9 };
        a.on_prepare(5, ballot);
        a.on_accept(5, ballot, Layout::new(5, urls(&[1, 2]), 2).unwrap());
        store_acceptor(dir.path(), &a).unwrap();
        assert_eq!(load_acceptor(dir.path(), 4).unwrap(), a);
        assert_eq!(load_acceptor(dir.path(), 5).unwrap(), Acceptor::new(6));
        let path = dir.path().join(ACCEPTOR_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[6] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            load_acceptor(dir.path(), 4),
            Err(LayoutFileError::AcceptorCorrupt { .. })
        ));
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
