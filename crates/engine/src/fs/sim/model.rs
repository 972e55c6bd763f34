//! The simulated disk: files with live and durable bytes, directories with
//! live and durable namespaces.
//!
//! # Invariants
//! - For every file, `durable_len <= data.len()`, and `write_ends` holds the
//!   end offsets of the appends made since the last sync, ascending, all
//!   above `durable_len` and the last equal to `data.len()`.
//! - For every directory, applying `pending` in order to `durable` yields
//!   `live` ([`Model::check_invariants`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

/// Identifies a file independently of its names (an inode).
pub type Ino = u64;

/// One file's bytes.
#[derive(Debug, Clone, Default)]
pub struct Inode {
    /// Live content: what reads see.
    pub data: Vec<u8>,
    /// Bytes of `data` that survive any power cut.
    pub durable_len: usize,
    /// End offsets of the unsynced appends, oldest first.
    pub write_ends: Vec<usize>,
}

/// A change to a directory's names that is not yet durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsOp {
    /// `name` now refers to `ino` (a creation), replacing any old entry.
    Link { name: String, ino: Ino },
    /// `name` is removed.
    Unlink { name: String },
    /// `from` is renamed to `to`, replacing any old `to`; atomic.
    Rename { from: String, to: String },
}

impl NsOp {
    /// Applies the change to a name table.
    pub fn apply(&self, names: &mut BTreeMap<String, Ino>) {
        match self {
            NsOp::Link { name, ino } => {
                names.insert(name.clone(), *ino);
            }
            NsOp::Unlink { name } => {
                names.remove(name);
            }
            NsOp::Rename { from, to } => {
                if let Some(ino) = names.remove(from) {
                    names.insert(to.clone(), ino);
                }
            }
        }
    }
}

/// One directory's file entries. Directories themselves are durable from
/// the moment they are created (a simplification; see the module doc of `sim`).
#[derive(Debug, Clone, Default)]
pub struct Dir {
    /// Names as the running system sees them.
    pub live: BTreeMap<String, Ino>,
    /// Names as they were at the last `sync_dir`.
    pub durable: BTreeMap<String, Ino>,
    /// Changes since the last `sync_dir`, oldest first.
    pub pending: Vec<NsOp>,
}

impl Dir {
    /// Records a namespace change: live at once, durable at the next `sync_dir`.
    fn change(&mut self, op: NsOp) {
        op.apply(&mut self.live);
        self.pending.push(op);
    }

    /// The names after the first `applied` pending changes reached the disk.
    pub fn names_after(&self, applied: usize) -> BTreeMap<String, Ino> {
        let mut names = self.durable.clone();
        for op in self.pending.iter().take(applied) {
            op.apply(&mut names);
        }
        names
    }
}

/// The whole simulated disk.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Every file still referenced by a name (live, durable or pending) or a handle.
    pub inodes: BTreeMap<Ino, Inode>,
    /// Every directory, by path.
    pub dirs: BTreeMap<PathBuf, Dir>,
    /// The next inode number to hand out.
    pub next_ino: Ino,
    /// Open handles per inode, so unlinked-but-open files keep their bytes.
    pub open_handles: BTreeMap<Ino, usize>,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

/// Splits `path` into its directory and its final name.
fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: no file name", path.display()),
        )
    })?;
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    Ok((dir, name.to_owned()))
}

impl Model {
    fn dir_mut(&mut self, dir: &Path) -> io::Result<&mut Dir> {
        self.dirs.get_mut(dir).ok_or_else(|| not_found(dir))
    }

    /// The inode `path` names now.
    pub fn lookup(&self, path: &Path) -> io::Result<Ino> {
        let (dir, name) = split(path)?;
        self.dirs
            .get(&dir)
            .and_then(|d| d.live.get(&name))
            .copied()
            .ok_or_else(|| not_found(path))
    }

    /// The file `path` names now.
    pub fn inode(&self, path: &Path) -> io::Result<&Inode> {
        let ino = self.lookup(path)?;
        self.inodes.get(&ino).ok_or_else(|| not_found(path))
    }

    /// Creates `path` and its missing ancestors (durable at once).
    pub fn create_dir_all(&mut self, path: &Path) -> io::Result<()> {
        if let Some(file) = path.ancestors().find(|dir| self.lookup(dir).is_ok()) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: is a file", file.display()),
            ));
        }
        for dir in path.ancestors() {
            self.dirs.entry(dir.to_path_buf()).or_default();
        }
        Ok(())
    }

    /// Binds `path` to a new empty file, replacing any old entry.
    pub fn create(&mut self, path: &Path) -> io::Result<Ino> {
        let (dir, name) = split(path)?;
        if self.dirs.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                path.display().to_string(),
            ));
        }
        let ino = self.next_ino;
        self.dir_mut(&dir)?.change(NsOp::Link { name, ino });
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::default());
        Ok(ino)
    }

    /// Renames within one directory; across directories is unsupported
    /// (the two halves could not be made atomic in a crash image).
    pub fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        self.lookup(from)?;
        if from_dir != to_dir {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "SimFs renames only within one directory",
            ));
        }
        if from_name != to_name {
            let op = NsOp::Rename {
                from: from_name,
                to: to_name,
            };
            self.dir_mut(&from_dir)?.change(op);
        }
        Ok(())
    }

    /// Removes the name `path`.
    pub fn remove(&mut self, path: &Path) -> io::Result<()> {
        self.lookup(path)?;
        let (dir, name) = split(path)?;
        self.dir_mut(&dir)?.change(NsOp::Unlink { name });
        Ok(())
    }

    /// Makes a directory's names durable and forgets unreachable files.
    pub fn sync_dir(&mut self, path: &Path) -> io::Result<()> {
        let dir = self.dir_mut(path)?;
        dir.durable = dir.live.clone();
        dir.pending.clear();
        self.collect_garbage();
        Ok(())
    }

    /// Names of a directory's files and subdirectories, sorted.
    pub fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let dir = self.dirs.get(path).ok_or_else(|| not_found(path))?;
        let mut names: BTreeSet<String> = dir.live.keys().cloned().collect();
        for sub in self.dirs.keys() {
            if sub.parent() == Some(path)
                && let Some(name) = sub.file_name().and_then(|n| n.to_str())
            {
                names.insert(name.to_owned());
            }
        }
        Ok(names.into_iter().collect())
    }

    /// Drops files no name, pending change or open handle refers to.
    pub fn collect_garbage(&mut self) {
        let mut used: BTreeSet<Ino> = self.open_handles.keys().copied().collect();
        for dir in self.dirs.values() {
            used.extend(dir.live.values().chain(dir.durable.values()));
            for op in &dir.pending {
                if let NsOp::Link { ino, .. } = op {
                    used.insert(*ino);
                }
            }
        }
        self.inodes.retain(|ino, _| used.contains(ino));
    }

    /// Panics if an invariant in the module doc does not hold (tests only).
    #[cfg(test)]
    pub fn check_invariants(&self) {
        for (path, dir) in &self.dirs {
            assert_eq!(
                dir.names_after(dir.pending.len()),
                dir.live,
                "{}",
                path.display()
            );
        }
        for (ino, inode) in &self.inodes {
            assert!(inode.durable_len <= inode.data.len(), "inode {ino}");
            let mut prev = inode.durable_len;
            for &end in &inode.write_ends {
                assert!(end > prev, "inode {ino}");
                prev = end;
            }
            assert_eq!(prev, inode.data.len(), "inode {ino}");
        }
    }
}
