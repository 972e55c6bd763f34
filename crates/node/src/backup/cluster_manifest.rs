//! `CLUSTER-MANIFEST`: the top of a cluster backup (docs/BACKUP.md, "A
//! cluster backup at T"): the point `T`, the layout it was taken under,
//! and which member's checkpoint is which directory.
//!
//! # Format
//! UTF-8 text, one item per line, `\n` ends every line:
//! ```text
//! ataman-cluster-backup 1
//! t_ts 117736453754961151
//! skew_ms 1000
//! layout_version 1
//! replication_factor 3
//! member 0 node-0 ckpt-1796620739751 5d2a77e0 http://127.0.0.1:39411
//! member 1 node-1 ckpt-1796620739760 0c5e2d11 http://127.0.0.1:39421
//! end 9a1f03bc
//! ```
//! `member INDEX DIR CHECKPOINT CRC URL`: the member's position in the
//! layout, the backup's directory holding its checkpoint, the checkpoint's
//! name, the CRC-32C of that directory's `BACKUP-MANIFEST` (so a member's
//! manifest swapped or rewritten is caught), the member's URL. `end CRC`:
//! the CRC-32C of every byte before the `end` line; without it, or with
//! another, the backup is torn.
//!
//! Pure: parsing and rendering; [`verify_cluster`] reads the files.

use super::verify::{self, Problem};
use std::path::Path;

/// The top manifest's file name inside a cluster backup.
pub const CLUSTER_MANIFEST_FILE_NAME: &str = "CLUSTER-MANIFEST";
/// Its first line.
pub const MAGIC_LINE: &str = "ataman-cluster-backup 1";
/// Members one backup lists at most (the node bits' bound).
pub const MEMBERS_MAX: usize = crate::hlc::NODES_MAX;

/// One member's checkpoint in a cluster backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its position in the layout.
    pub index: usize,
    /// The directory holding its checkpoint (`node-INDEX`).
    pub dir: String,
    /// The checkpoint's name on the member.
    pub checkpoint: String,
    /// CRC-32C of the checkpoint's `BACKUP-MANIFEST`.
    pub manifest_crc32c: u32,
    /// The member's URL.
    pub url: String,
}

/// A cluster backup's top manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterManifest {
    /// `T`: the backup holds the writes stamped at or before it.
    pub t_ts: u64,
    /// The clock skew assumed between members, milliseconds.
    pub skew_ms: u64,
    /// The layout's version when the backup was taken.
    pub layout_version: u64,
    /// The layout's replication factor.
    pub replication_factor: u64,
    /// Every member's checkpoint, by index.
    pub members: Vec<Member>,
}

impl ClusterManifest {
    /// The text (module header), `end` line included.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{MAGIC_LINE}\nt_ts {}\nskew_ms {}\nlayout_version {}\nreplication_factor {}\n",
            self.t_ts, self.skew_ms, self.layout_version, self.replication_factor
        );
        for m in &self.members {
            out.push_str(&format!(
                "member {} {} {} {:08x} {}\n",
                m.index, m.dir, m.checkpoint, m.manifest_crc32c, m.url
            ));
        }
        let crc = crc32c::crc32c(out.as_bytes());
        out.push_str(&format!("end {crc:08x}\n"));
        out
    }

    /// Parses a manifest; why not, naming the line.
    pub fn parse(text: &str) -> Result<ClusterManifest, String> {
        let body_len = text
            .rfind("end ")
            .filter(|&at| at == 0 || text.as_bytes()[at - 1] == b'\n')
            .ok_or("no end line: torn")?;
        let (body, end) = text.split_at(body_len);
        let end = end.strip_prefix("end ").and_then(|e| e.strip_suffix('\n'));
        let want = end
            .and_then(|e| u32::from_str_radix(e, 16).ok())
            .ok_or("malformed end line")?;
        let got = crc32c::crc32c(body.as_bytes());
        if got != want {
            return Err(format!(
                "end line says crc32c {want:08x}, the text has {got:08x}: torn"
            ));
        }
        let mut lines = body.lines();
        if lines.next() != Some(MAGIC_LINE) {
            return Err(format!("first line is not `{MAGIC_LINE}`"));
        }
        let mut m = ClusterManifest::default();
        for line in lines {
            parse_line(&mut m, line)?;
        }
        if m.members.is_empty() {
            return Err("no member listed".into());
        }
        Ok(m)
    }
}

fn parse_line(m: &mut ClusterManifest, line: &str) -> Result<(), String> {
    let bad = || format!("malformed line `{line}`");
    let (key, rest) = line.split_once(' ').ok_or_else(bad)?;
    let number = |s: &str| s.parse::<u64>().map_err(|_| bad());
    match key {
        "t_ts" => m.t_ts = number(rest)?,
        "skew_ms" => m.skew_ms = number(rest)?,
        "layout_version" => m.layout_version = number(rest)?,
        "replication_factor" => m.replication_factor = number(rest)?,
        "member" => {
            let parts: Vec<&str> = rest.split(' ').collect();
            let [index, dir, checkpoint, crc, url] = parts[..] else {
                return Err(bad());
            };
            let index = index.parse::<usize>().map_err(|_| bad())?;
            if index != m.members.len() || index >= MEMBERS_MAX {
                return Err(format!("member {index} out of order"));
            }
            super::manifest::checked_path(dir).map_err(|e| format!("member {index}: {e}"))?;
            if dir.contains('/') || dir == CLUSTER_MANIFEST_FILE_NAME {
                return Err(format!(
                    "member {index}: directory `{dir}` is not a plain name"
                ));
            }
            if m.members.iter().any(|other| other.dir == dir) {
                return Err(format!(
                    "member {index}: directory `{dir}` is listed for another member too"
                ));
            }
            super::manifest::checked_name(checkpoint)
                .map_err(|e| format!("member {index}: {e}"))?;
            m.members.push(Member {
                index,
                dir: dir.to_owned(),
                checkpoint: checkpoint.to_owned(),
                manifest_crc32c: u32::from_str_radix(crc, 16).map_err(|_| bad())?,
                url: url.to_owned(),
            });
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// Whether `dir` is a cluster backup (it has a top manifest).
pub fn is_cluster_backup(dir: &Path) -> bool {
    dir.join(CLUSTER_MANIFEST_FILE_NAME).exists()
}

/// Reads and parses `dir`'s top manifest.
pub fn read(dir: &Path) -> Result<ClusterManifest, Problem> {
    let path = dir.join(CLUSTER_MANIFEST_FILE_NAME);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Problem::Unreadable(format!("{CLUSTER_MANIFEST_FILE_NAME}: {e}")))?;
    ClusterManifest::parse(&text)
        .map_err(|e| Problem::Unreadable(format!("{CLUSTER_MANIFEST_FILE_NAME}: {e}")))
}

/// A problem of a cluster backup: the member directory it is in (none for
/// the top manifest and the backup's own entries) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterProblem {
    /// The member's directory, if the problem is in one.
    pub member_dir: Option<String>,
    /// The problem, naming the file.
    pub problem: Problem,
}

impl std::fmt::Display for ClusterProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.member_dir, &self.problem) {
            // It names no file of the member: "node-0: …", not "node-0/…".
            (Some(dir), Problem::Open(_)) => {
                write!(f, "{dir}: {}", self.problem)
            }
            (Some(dir), _) => write!(f, "{dir}/{}", self.problem),
            (None, _) => write!(f, "{}", self.problem),
        }
    }
}

/// Checks a cluster backup: the top manifest whole, every member's
/// checkpoint present, its manifest the one recorded, intact and opening
/// (`verify::verify`), and nothing else at the top. The manifest, or
/// every problem found.
pub fn verify_cluster(dir: &Path) -> Result<ClusterManifest, Vec<ClusterProblem>> {
    let top = |problem| ClusterProblem {
        member_dir: None,
        problem,
    };
    let manifest = read(dir).map_err(|p| vec![top(p)])?;
    let mut problems = Vec::new();
    for m in &manifest.members {
        let inside = |problem| ClusterProblem {
            member_dir: Some(m.dir.clone()),
            problem,
        };
        let member = dir.join(&m.dir);
        if !is_real_directory(&member) {
            problems.push(top(Problem::NotRegular(m.dir.clone())));
            continue;
        }
        let manifest_path = member.join(super::manifest::MANIFEST_FILE_NAME);
        match std::fs::read(&manifest_path) {
            Ok(bytes) if crc32c::crc32c(&bytes) != m.manifest_crc32c => {
                problems.push(inside(Problem::Checksum {
                    path: super::manifest::MANIFEST_FILE_NAME.into(),
                    expected: m.manifest_crc32c,
                    found: crc32c::crc32c(&bytes),
                }));
                continue;
            }
            Ok(_) => {}
            Err(_) => {
                problems.push(inside(Problem::Missing(
                    super::manifest::MANIFEST_FILE_NAME.into(),
                )));
                continue;
            }
        }
        if let Err(found) = verify::verify(&member) {
            problems.extend(found.into_iter().map(inside));
        }
    }
    problems.extend(unlisted_top(dir, &manifest).into_iter().map(top));
    if problems.is_empty() {
        Ok(manifest)
    } else {
        Err(problems)
    }
}

/// Whether `path` is a directory itself, not a symbolic link to one (which
/// may point anywhere: a member's checkpoint must be inside the backup).
fn is_real_directory(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_dir())
}

fn unlisted_top(dir: &Path, manifest: &ClusterManifest) -> Vec<Problem> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![Problem::Unreadable(format!(
            "{}: cannot list",
            dir.display()
        ))];
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name != CLUSTER_MANIFEST_FILE_NAME && !manifest.members.iter().any(|m| &m.dir == name)
        })
        .map(Problem::Unlisted)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member's problem reads as that member's file ("node-0/000010.sst:
    /// …"), and one naming no file as the member's ("node-0: …"): the
    /// black-box attack saw "node-0/does not open: …".
    #[test]
    fn a_member_problem_names_the_member() {
        let at = |problem| {
            ClusterProblem {
                member_dir: Some("node-0".into()),
                problem,
            }
            .to_string()
        };
        assert_eq!(
            at(Problem::Missing("000010.sst".into())),
            "node-0/000010.sst: missing"
        );
        assert_eq!(
            at(Problem::Open("corruption".into())),
            "node-0: does not open: corruption"
        );
    }

    fn sample() -> ClusterManifest {
        ClusterManifest {
            t_ts: 117_736_453_754_961_151,
            skew_ms: 1_000,
            layout_version: 1,
            replication_factor: 3,
            members: (0..2)
                .map(|i| Member {
                    index: i,
                    dir: format!("node-{i}"),
                    checkpoint: format!("ckpt-{i}"),
                    manifest_crc32c: 0x5d2a_77e0 + i as u32,
                    url: format!("http://127.0.0.1:{}", 39_411 + i),
                })
                .collect(),
        }
    }

    #[test]
    fn render_parse_round_trip() {
        let text = sample().render();
        assert!(text.starts_with(MAGIC_LINE));
        assert_eq!(ClusterManifest::parse(&text).unwrap(), sample());
    }

    /// A flipped character anywhere, or a cut anywhere, is refused.
    #[test]
    fn every_flip_and_cut_is_refused() {
        let text = sample().render();
        for at in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[at] ^= 0x01;
            if let Ok(flipped) = String::from_utf8(bytes) {
                assert!(ClusterManifest::parse(&flipped).is_err(), "flip at {at}");
            }
            assert!(ClusterManifest::parse(&text[..at]).is_err(), "cut at {at}");
        }
    }

    #[test]
    fn a_directory_listed_for_two_members_is_refused() {
        let mut m = sample();
        m.members[1].dir = m.members[0].dir.clone();
        let err = ClusterManifest::parse(&m.render()).unwrap_err();
        assert!(err.contains("listed for another member"), "{err}");
    }

    /// A member directory that is a symbolic link (here to a real, intact
    /// checkpoint elsewhere) or a plain file is named, not followed.
    #[test]
    fn a_member_directory_that_is_a_link_or_a_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let outside = root.join("outside");
        let backup = root.join("backup");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(&backup).unwrap();
        std::os::unix::fs::symlink(&outside, backup.join("node-0")).unwrap();
        std::fs::write(backup.join("node-1"), b"not a directory").unwrap();
        std::fs::write(backup.join(CLUSTER_MANIFEST_FILE_NAME), sample().render()).unwrap();
        let problems = verify_cluster(&backup).unwrap_err();
        for dir in ["node-0", "node-1"] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.problem == Problem::NotRegular(dir.into())),
                "{dir}: {problems:?}"
            );
        }
    }

    #[test]
    fn member_directories_stay_inside_the_backup() {
        for dir in ["../x", "a/b", CLUSTER_MANIFEST_FILE_NAME] {
            let mut m = sample();
            m.members[0].dir = dir.into();
            assert!(ClusterManifest::parse(&m.render()).is_err(), "{dir}");
        }
    }
}
