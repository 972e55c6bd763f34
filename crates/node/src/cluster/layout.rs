//! The layout: which nodes are members of the cluster, under which version
//! number, and how many replicas each key has.
//!
//! Pure values: validation, a change applied to a layout, and the byte
//! codec the layout file and the peers use. Agreement on a version is in
//! [`super::agreement`]; what happens while data moves, in
//! [`super::history`].
//!
//! # Rules
//! - A layout holds at least one node and at most [`LAYOUT_NODES_MAX`];
//!   its URLs are distinct, `http://` (or, with TLS, `https://`) URLs of at most [`URL_BYTES_MAX`]
//!   bytes; `1 <= replication_factor <= nodes`.
//! - Members are kept sorted, so two layouts with the same members are
//!   equal whatever order they were named in (placement does not depend on
//!   the order either: [`super::placement`]).
//! - A change names nodes to add and nodes to remove and may set a new
//!   replication factor; it yields version `current + 1`. Adding a member,
//!   removing a URL that is not one, naming a URL twice, or a change that
//!   changes nothing is an error naming the URL.
//! - Every member has a node id below [`NODE_IDS`], distinct among the
//!   members: the low bits of every timestamp it issues (`hlc`), so
//!   two coordinators never issue one timestamp. The ids are part of the
//!   layout, agreed with it, and kept by a member across versions and
//!   restarts (see [`super::node_ids`] for how a change assigns them).
//! - `retired` lists the ids of removed members, the one removed longest
//!   ago first; no member holds a retired id.
//!
//! # Byte format (docs/FORMAT.md, "Layout")
//! ```text
//! magic      4 bytes  "ATLY"
//! format     u8       2
//! version    u64 LE
//! replicas   u32 LE   replication factor
//! count      u32 LE   members
//! count x  { len u16 LE, len bytes of UTF-8 URL, id u16 LE }
//! retired    u16 LE   retired ids
//! retired x  id u16 LE   (oldest first)
//! crc        u32 LE   crc32c of every byte before it
//! ```
//! Format 1 (written before node ids existed) has no `id` after a URL and
//! no retired list; it decodes with each member's id its position in the
//! sorted member list (what every node of such a cluster computes alike)
//! and nothing retired. Only format 2 is written.

use super::node_ids;
use super::placement;

/// Members a layout may hold.
pub const LAYOUT_NODES_MAX: usize = 256;
/// Longest member URL, bytes.
pub const URL_BYTES_MAX: usize = 256;
/// The first four bytes of an encoded layout.
pub const LAYOUT_MAGIC: [u8; 4] = *b"ATLY";
/// The format byte this code writes (and the newest it reads).
pub const LAYOUT_FORMAT: u8 = 2;
/// The format written before members had node ids (still read).
pub const LAYOUT_FORMAT_NO_IDS: u8 = 1;
/// Node ids there are: one per value of the clock's node bits
/// (`hlc::NODES_MAX`); ids are `0..NODE_IDS`.
pub const NODE_IDS: usize = 256;
/// Longest encoded layout, bytes.
pub const LAYOUT_BYTES_MAX: usize =
    4 + 1 + 8 + 4 + 4 + LAYOUT_NODES_MAX * (2 + URL_BYTES_MAX + 2) + 2 + NODE_IDS * 2 + 4;

/// A member's node id: the low bits of every timestamp it issues.
pub type NodeId = u16;

/// Why a layout or a change is refused (400 on `POST /v0/layout`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// No member at all.
    #[error("a layout needs at least one node")]
    Empty,
    /// More members than [`LAYOUT_NODES_MAX`].
    #[error("{count} nodes, more than the {LAYOUT_NODES_MAX} a layout may hold")]
    TooManyNodes {
        /// How many.
        count: usize,
    },
    /// A URL named twice.
    #[error("node {0} is named twice")]
    Duplicate(String),
    /// A URL that is not `http(s)://host:port[...]` or is too long.
    #[error("node {0:?} is not an http:// or https:// URL of at most {URL_BYTES_MAX} bytes")]
    BadUrl(String),
    /// The replication factor cannot be held.
    #[error(
        "replication_factor {replication_factor} cannot be held by {nodes} nodes (1..={nodes})"
    )]
    ReplicationFactor {
        /// Asked.
        replication_factor: usize,
        /// Members.
        nodes: usize,
    },
    /// An added node is a member already.
    #[error("node {0} is already a member")]
    AlreadyMember(String),
    /// A removed node is not a member.
    #[error("node {0} is not a member and cannot be removed")]
    UnknownMember(String),
    /// The change leaves the layout as it is.
    #[error("the change leaves the layout as it is")]
    NoChange,
    /// Node ids not one distinct id below [`NODE_IDS`] per member, or a
    /// retired id that is held or listed twice.
    #[error("node ids: {0}")]
    NodeIds(String),
}

/// Why bytes are not a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutDecodeError {
    /// Fewer bytes than the fields need.
    #[error("layout truncated at byte {at}")]
    Truncated {
        /// Where the bytes ran out.
        at: usize,
    },
    /// Longer than [`LAYOUT_BYTES_MAX`] or bytes after the checksum.
    #[error("layout is {len} bytes, expected {expected}")]
    Length {
        /// Found.
        len: usize,
        /// Expected.
        expected: usize,
    },
    /// Not a layout.
    #[error("bad layout magic {0:?}")]
    Magic([u8; 4]),
    /// A format this code does not know.
    #[error("unknown layout format {0}")]
    Format(u8),
    /// The checksum does not match.
    #[error("layout checksum mismatch: expected {expected:#010x}, got {got:#010x}")]
    Checksum {
        /// Stored.
        expected: u32,
        /// Computed.
        got: u32,
    },
    /// A URL that is not UTF-8.
    #[error("layout member {0} is not UTF-8")]
    Utf8(usize),
    /// Decoded, but not a valid layout.
    #[error("invalid layout: {0}")]
    Invalid(LayoutError),
}

/// One version of the cluster's membership.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Its version: 1 for a bootstrapped cluster, one more per change.
    pub version: u64,
    /// The member URLs, sorted.
    pub nodes: Vec<String>,
    /// `ids[i]` is the node id of `nodes[i]`.
    pub ids: Vec<NodeId>,
    /// Ids of removed members, not to be given again while another is
    /// free; the one retired longest ago first.
    pub retired: Vec<NodeId>,
    /// Replicas of each key (`R`).
    pub replication_factor: usize,
}

/// A change to a layout, as `POST /v0/layout` names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// URLs to add.
    pub add: Vec<String>,
    /// URLs to remove.
    pub remove: Vec<String>,
    /// A new replication factor (`None`: keep it).
    pub replication_factor: Option<usize>,
    /// URLs the operator declares dead (`dead=URL`): nodes this change
    /// removes, or the transition under way removes, whose data is lost,
    /// so copies skip them (`super::copy_completion`). Not part of the
    /// layout: [`Layout::apply`] ignores it.
    pub dead: Vec<String>,
}

fn check_url(url: &str) -> Result<(), LayoutError> {
    // `https://` with TLS (`--tls-ca`): both schemes name a node.
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or("");
    if url.len() > URL_BYTES_MAX || host.is_empty() || host.starts_with('/') {
        return Err(LayoutError::BadUrl(url.to_owned()));
    }
    Ok(())
}

/// An added node's URL names only a scheme, host and port: a path,
/// query or fragment after them (`http://h:1/`) would be a second name
/// for a member at `http://h:1`, one node holding two replica slots.
/// Checked on `add` only, so layouts already stored still decode.
fn check_added_url(url: &str) -> Result<(), LayoutError> {
    let authority = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or("");
    if authority.contains(['/', '?', '#']) {
        return Err(LayoutError::BadUrl(url.to_owned()));
    }
    Ok(())
}

impl Layout {
    /// A valid layout of `nodes` (any order) under `version`, their node
    /// ids `0..n` in the order given, none retired.
    pub fn new(
        version: u64,
        nodes: Vec<String>,
        replication_factor: usize,
    ) -> Result<Layout, LayoutError> {
        let members = nodes
            .into_iter()
            .enumerate()
            .map(|(i, url)| (url, i as NodeId))
            .collect();
        Layout::with_ids(version, members, Vec::new(), replication_factor)
    }

    /// A valid layout of `members` (URL and node id, any order) and the
    /// `retired` ids (oldest first) under `version`.
    pub fn with_ids(
        version: u64,
        mut members: Vec<(String, NodeId)>,
        retired: Vec<NodeId>,
        replication_factor: usize,
    ) -> Result<Layout, LayoutError> {
        members.sort();
        let (nodes, ids) = members.into_iter().unzip();
        let layout = Layout {
            version,
            nodes,
            ids,
            retired,
            replication_factor,
        };
        layout.validate()?;
        Ok(layout)
    }

    /// The node id of member `url`, `None` when it is not a member.
    pub fn id_of(&self, url: &str) -> Option<NodeId> {
        let at = self.nodes.iter().position(|n| n == url)?;
        self.ids.get(at).copied()
    }

    /// Version 1 from a `--cluster` list (node ids `0..n` in list order);
    /// `R` defaults to the list's size.
    pub fn bootstrap(
        nodes: &[String],
        replication_factor: Option<usize>,
    ) -> Result<Layout, LayoutError> {
        Layout::new(1, nodes.to_vec(), replication_factor.unwrap_or(nodes.len()))
    }

    /// Checks every rule of the `# Rules` paragraph.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.nodes.is_empty() {
            return Err(LayoutError::Empty);
        }
        if self.nodes.len() > LAYOUT_NODES_MAX {
            return Err(LayoutError::TooManyNodes {
                count: self.nodes.len(),
            });
        }
        for (i, url) in self.nodes.iter().enumerate() {
            check_url(url)?;
            if self.nodes[..i].contains(url) {
                return Err(LayoutError::Duplicate(url.clone()));
            }
        }
        if self.replication_factor == 0 || self.replication_factor > self.nodes.len() {
            return Err(LayoutError::ReplicationFactor {
                replication_factor: self.replication_factor,
                nodes: self.nodes.len(),
            });
        }
        node_ids::check(self.nodes.len(), &self.ids, &self.retired).map_err(LayoutError::NodeIds)
    }

    /// True if `url` is a member.
    pub fn is_member(&self, url: &str) -> bool {
        self.nodes.iter().any(|n| n == url)
    }

    /// The next version: this layout with `change` applied.
    pub fn apply(&self, change: &Change) -> Result<Layout, LayoutError> {
        let mut named: Vec<&String> = Vec::new();
        for url in change.add.iter().chain(&change.remove) {
            if named.contains(&url) {
                return Err(LayoutError::Duplicate(url.clone()));
            }
            named.push(url);
        }
        for url in &change.remove {
            if !self.is_member(url) {
                return Err(LayoutError::UnknownMember(url.clone()));
            }
        }
        for url in &change.add {
            check_url(url)?;
            check_added_url(url)?;
            if self.is_member(url) {
                return Err(LayoutError::AlreadyMember(url.clone()));
            }
        }
        if self.nodes.len() - change.remove.len() + change.add.len() > LAYOUT_NODES_MAX {
            return Err(LayoutError::TooManyNodes {
                count: self.nodes.len() - change.remove.len() + change.add.len(),
            });
        }
        let current: Vec<(String, NodeId)> = self
            .nodes
            .iter()
            .cloned()
            .zip(self.ids.iter().copied())
            .collect();
        let (members, retired) =
            node_ids::assign(&current, &self.retired, &change.remove, &change.add)
                .map_err(LayoutError::NodeIds)?;
        let next = Layout::with_ids(
            self.version + 1,
            members,
            retired,
            change.replication_factor.unwrap_or(self.replication_factor),
        )?;
        if next.nodes == self.nodes && next.replication_factor == self.replication_factor {
            return Err(LayoutError::NoChange);
        }
        Ok(next)
    }

    /// The `R` replica URLs of `key`, most preferred first.
    pub fn replicas(&self, key: &[u8]) -> Vec<&str> {
        placement::replicas(&self.nodes, key, self.replication_factor)
            .into_iter()
            .map(|i| self.nodes[i].as_str())
            .collect()
    }

    /// The bytes of the `# Byte format` paragraph.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&LAYOUT_MAGIC);
        out.push(LAYOUT_FORMAT);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.replication_factor as u32).to_le_bytes());
        out.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        for (url, id) in self.nodes.iter().zip(&self.ids) {
            debug_assert!(url.len() <= URL_BYTES_MAX);
            out.extend_from_slice(&(url.len() as u16).to_le_bytes());
            out.extend_from_slice(url.as_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
        debug_assert!(self.retired.len() <= NODE_IDS);
        out.extend_from_slice(&(self.retired.len() as u16).to_le_bytes());
        for id in &self.retired {
            out.extend_from_slice(&id.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert!(out.len() <= LAYOUT_BYTES_MAX);
        out
    }

    /// A layout from [`Layout::encode`]'s bytes, checked in full.
    pub fn decode(bytes: &[u8]) -> Result<Layout, LayoutDecodeError> {
        if bytes.len() > LAYOUT_BYTES_MAX {
            return Err(LayoutDecodeError::Length {
                len: bytes.len(),
                expected: LAYOUT_BYTES_MAX,
            });
        }
        if bytes.len() < 4 {
            return Err(LayoutDecodeError::Truncated { at: bytes.len() });
        }
        let body_len = bytes.len() - 4;
        let mut stored = [0u8; 4];
        stored.copy_from_slice(&bytes[body_len..]);
        let expected = u32::from_le_bytes(stored);
        let got = crc32c::crc32c(&bytes[..body_len]);
        if expected != got {
            return Err(LayoutDecodeError::Checksum { expected, got });
        }
        let mut r = Reader {
            bytes: &bytes[..body_len],
            at: 0,
        };
        let magic: [u8; 4] = r.array()?;
        if magic != LAYOUT_MAGIC {
            return Err(LayoutDecodeError::Magic(magic));
        }
        let [format] = r.array()?;
        if format != LAYOUT_FORMAT && format != LAYOUT_FORMAT_NO_IDS {
            return Err(LayoutDecodeError::Format(format));
        }
        let with_ids = format == LAYOUT_FORMAT;
        let version = u64::from_le_bytes(r.array()?);
        let replication_factor = u32::from_le_bytes(r.array()?) as usize;
        let count = u32::from_le_bytes(r.array()?) as usize;
        if count > LAYOUT_NODES_MAX {
            return Err(LayoutDecodeError::Invalid(LayoutError::TooManyNodes {
                count,
            }));
        }
        let mut nodes = Vec::with_capacity(count);
        let mut ids = Vec::with_capacity(count);
        for i in 0..count {
            let len = u16::from_le_bytes(r.array()?) as usize;
            let url = r.take(len)?;
            let url = std::str::from_utf8(url).map_err(|_| LayoutDecodeError::Utf8(i))?;
            nodes.push(url.to_owned());
            // Format 1: the id is the member's place in the sorted list.
            ids.push(match with_ids {
                true => u16::from_le_bytes(r.array()?),
                false => i as NodeId,
            });
        }
        let mut retired = Vec::new();
        if with_ids {
            let retired_count = u16::from_le_bytes(r.array()?) as usize;
            if retired_count > NODE_IDS {
                return Err(LayoutDecodeError::Invalid(LayoutError::NodeIds(format!(
                    "{retired_count} retired ids, more than the {NODE_IDS} there are"
                ))));
            }
            for _ in 0..retired_count {
                retired.push(u16::from_le_bytes(r.array()?));
            }
        }
        if r.at != body_len {
            return Err(LayoutDecodeError::Length {
                len: bytes.len(),
                expected: r.at + 4,
            });
        }
        let layout = Layout {
            version,
            nodes,
            ids,
            retired,
            replication_factor,
        };
        layout.validate().map_err(LayoutDecodeError::Invalid)?;
        if !layout.nodes.is_sorted() {
            return Err(LayoutDecodeError::Invalid(LayoutError::BadUrl(
                "members not sorted".to_owned(),
            )));
        }
        Ok(layout)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], LayoutDecodeError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(LayoutDecodeError::Truncated { at: self.at })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], LayoutDecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn urls(ports: &[u16]) -> Vec<String> {
        ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    }

    fn three() -> Layout {
        Layout::bootstrap(&urls(&[3, 1, 2]), None).unwrap()
    }

    /// Bootstrap is version 1, R defaults to the list size, members sorted.
    #[test]
    fn bootstrap_defaults() {
        let l = three();
        assert_eq!(l.version, 1);
        assert_eq!(l.replication_factor, 3);
        assert_eq!(l.nodes, urls(&[1, 2, 3]));
        assert_eq!(
            Layout::bootstrap(&urls(&[1, 2, 3]), Some(2))
                .unwrap()
                .replication_factor,
            2
        );
    }

    /// An added URL that is a member's URL with a path, query or fragment
    /// after its host and port (`http://h:1/`, a second name for one node
    /// that then held two replica slots and wedged the transition) is
    /// refused as a bad URL.
    #[test]
    fn add_member_url_with_a_path_refused() {
        let l = three();
        for tail in ["/", "/x", "?x", "#x"] {
            let bad = format!("{}{tail}", urls(&[1])[0]);
            let change = Change {
                add: vec![bad.clone()],
                ..Change::default()
            };
            assert_eq!(l.apply(&change), Err(LayoutError::BadUrl(bad)));
        }
        // Negative control: the same host and port without a tail is a
        // new node when it is not a member.
        let change = Change {
            add: urls(&[4]),
            ..Change::default()
        };
        assert!(l.apply(&change).is_ok());
    }

    /// Every invalid layout is refused, naming what is wrong.
    #[test]
    fn validation_refuses() {
        assert_eq!(Layout::new(1, vec![], 1), Err(LayoutError::Empty));
        let dup = urls(&[1, 1]);
        assert_eq!(
            Layout::new(1, dup, 1),
            Err(LayoutError::Duplicate("http://127.0.0.1:1".into()))
        );
        for r in [0, 4] {
            assert_eq!(
                Layout::new(1, urls(&[1, 2, 3]), r),
                Err(LayoutError::ReplicationFactor {
                    replication_factor: r,
                    nodes: 3
                })
            );
        }
        for bad in [
            "127.0.0.1:1",
            "http://",
            "http:///x",
            &format!("http://{}", "a".repeat(300)),
        ] {
            assert_eq!(
                Layout::new(1, vec![bad.to_owned()], 1),
                Err(LayoutError::BadUrl(bad.to_owned()))
            );
        }
        let many: Vec<String> = (0..=LAYOUT_NODES_MAX as u16)
            .map(|p| format!("http://h:{p}"))
            .collect();
        assert_eq!(
            Layout::new(1, many.clone(), 1),
            Err(LayoutError::TooManyNodes {
                count: LAYOUT_NODES_MAX + 1
            })
        );
        // At the bound it is fine (negative control).
        assert!(Layout::new(1, many[..LAYOUT_NODES_MAX].to_vec(), 3).is_ok());
    }

    /// A change yields version+1; bad changes name the URL.
    #[test]
    fn changes() {
        let l = three();
        let grown = l
            .apply(&Change {
                add: urls(&[4]),
                ..Change::default()
            })
            .unwrap();
        assert_eq!(grown.version, 2);
        assert_eq!(grown.nodes, urls(&[1, 2, 3, 4]));
        assert_eq!(grown.replication_factor, 3);
        let replaced = l
            .apply(&Change {
                add: urls(&[9]),
                remove: urls(&[2]),
                replication_factor: None,
                dead: urls(&[2]),
            })
            .unwrap();
        assert_eq!(replaced.nodes, urls(&[1, 3, 9]));
        let err = |c: Change| l.apply(&c).unwrap_err();
        assert_eq!(
            err(Change {
                add: urls(&[2]),
                ..Change::default()
            }),
            LayoutError::AlreadyMember("http://127.0.0.1:2".into())
        );
        assert_eq!(
            err(Change {
                remove: urls(&[7]),
                ..Change::default()
            }),
            LayoutError::UnknownMember("http://127.0.0.1:7".into())
        );
        assert_eq!(
            err(Change {
                remove: urls(&[3]),
                ..Change::default()
            }),
            LayoutError::ReplicationFactor {
                replication_factor: 3,
                nodes: 2
            }
        );
        assert_eq!(
            err(Change {
                add: urls(&[4]),
                remove: urls(&[4]),
                ..Change::default()
            }),
            LayoutError::Duplicate("http://127.0.0.1:4".into())
        );
        assert_eq!(err(Change::default()), LayoutError::NoChange);
        assert_eq!(
            err(Change {
                replication_factor: Some(3),
                ..Change::default()
            }),
            LayoutError::NoChange
        );
        // Shrinking with a lower R is fine.
        let shrunk = l
            .apply(&Change {
                remove: urls(&[3]),
                replication_factor: Some(2),
                ..Change::default()
            })
            .unwrap();
        assert_eq!((shrunk.nodes.len(), shrunk.replication_factor), (2, 2));
    }

    /// encode/decode round-trips, and every corruption is caught.
    #[test]
    fn codec() {
        let l = three();
        let bytes = l.encode();
        assert_eq!(&bytes[..4], b"ATLY");
        assert_eq!(Layout::decode(&bytes), Ok(l.clone()));
        for cut in 0..bytes.len() {
            assert!(Layout::decode(&bytes[..cut]).is_err(), "cut {cut}");
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(Layout::decode(&bad).is_err(), "flip {i}");
        }
        // A well-checksummed but invalid body (R = 0) is refused as invalid.
        let mut body = bytes[..bytes.len() - 4].to_vec();
        body[13..17].copy_from_slice(&0u32.to_le_bytes());
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Layout::decode(&body),
            Err(LayoutDecodeError::Invalid(
                LayoutError::ReplicationFactor { .. }
            ))
        ));
    }

    /// Node ids: bootstrap gives list order; a change keeps members' ids,
    /// retires removed ones and gives an added node the smallest free one;
    /// `id_of` names them.
    #[test]
    fn node_ids_follow_the_layout() {
        let l = three(); // listed 3, 1, 2
        assert_eq!(l.ids, vec![1, 2, 0]);
        assert_eq!(l.id_of("http://127.0.0.1:3"), Some(0));
        assert_eq!(l.id_of("http://127.0.0.1:9"), None);
        let next = l
            .apply(&Change {
                add: urls(&[4]),
                remove: urls(&[3]),
                replication_factor: Some(2),
                dead: Vec::new(),
            })
            .unwrap();
        assert_eq!(next.nodes, urls(&[1, 2, 4]));
        assert_eq!(next.ids, vec![1, 2, 3]);
        assert_eq!(next.retired, vec![0]);
        assert_eq!(Layout::decode(&next.encode()), Ok(next.clone()));
        // Ids that clash are refused.
        let clash = Layout::with_ids(
            2,
            vec![(urls(&[1])[0].clone(), 4), (urls(&[2])[0].clone(), 4)],
            vec![],
            1,
        );
        assert!(matches!(clash, Err(LayoutError::NodeIds(_))), "{clash:?}");
        let held = Layout::with_ids(2, vec![(urls(&[1])[0].clone(), 4)], vec![4], 1);
        assert!(matches!(held, Err(LayoutError::NodeIds(_))), "{held:?}");
    }

    /// A format-1 layout (no ids, stored before ids existed) decodes with
    /// ids by sorted position and nothing retired; format 2 is written.
    #[test]
    fn format_one_decodes_with_positional_ids() {
        let mut old = Vec::new();
        old.extend_from_slice(b"ATLY");
        old.push(LAYOUT_FORMAT_NO_IDS);
        old.extend_from_slice(&5u64.to_le_bytes());
        old.extend_from_slice(&2u32.to_le_bytes());
        let nodes = urls(&[1, 2, 3]);
        old.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
        for url in &nodes {
            old.extend_from_slice(&(url.len() as u16).to_le_bytes());
            old.extend_from_slice(url.as_bytes());
        }
        let crc = crc32c::crc32c(&old);
        old.extend_from_slice(&crc.to_le_bytes());
        let l = Layout::decode(&old).unwrap();
        assert_eq!((l.version, l.replication_factor), (5, 2));
        assert_eq!((l.nodes.clone(), l.ids.clone()), (nodes, vec![0, 1, 2]));
        assert!(l.retired.is_empty());
        assert_eq!(l.encode()[4], LAYOUT_FORMAT);
        // An unknown format is refused by number.
        let mut future = old.clone();
        future[4] = 3;
        let body = future.len() - 4;
        let crc = crc32c::crc32c(&future[..body]);
        future[body..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Layout::decode(&future), Err(LayoutDecodeError::Format(3)));
    }

    /// Replicas follow placement over the members, R of them.
    #[test]
    fn replicas_follow_placement() {
        let l = three();
        for k in 0..100u32 {
            let key = k.to_string();
            let r = l.replicas(key.as_bytes());
            assert_eq!(r.len(), 3);
            let idx = placement::replicas(&l.nodes, key.as_bytes(), 3);
            assert_eq!(
                r,
                idx.iter().map(|&i| l.nodes[i].as_str()).collect::<Vec<_>>()
            );
        }
    }
}
