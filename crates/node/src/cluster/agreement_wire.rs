//! The bytes of the agreement's messages between nodes: a proposer's
//! request to an acceptor (`prepare`, `accept`, `commit`) and the
//! acceptor's reply (`super::agreement::AcceptorReply`, or the commit's
//! acknowledgement), and the gossip of live layouts and trackers both ways
//! (the layout gossip thread). They are the bodies of the internal
//! layout endpoint.
//!
//! # Byte format
//! A request: `ATPQ`, format `2`, kind (`1` prepare, `2` accept, `3`
//! commit, `4` gossip, `5` read), then per kind: prepare `slot, round, node`; accept `slot,
//! round, node, layout`; commit `layout`; gossip a history; read nothing. A reply: `ATPA`, format `2`,
//! kind (`1` promise, `2` accepted, `3` reject, `4` decided, `5` behind,
//! `6` committed, `7` chosen, `8` gossip), then per kind: promise `round, node, flag [, round,
//! node, layout]`; accepted and reject `round, node`; decided, behind and
//! committed one `u64`; chosen a layout; gossip a history and the
//! sender's copy figures (`u16` URL length, URL, then `version,
//! keys_to_copy, bytes_to_copy, keys_copied, bytes_copied`). Integers are little-endian `u64`; a layout is a
//! `u32` length and [`Layout::encode`]'s bytes. A history is a count byte
//! (1 or 2) and that many layouts, oldest first, then the trackers `ack`,
//! `sync`, `sync_ack` and the dead declarations `dead`, each a `u32` count (at most [`TRACKED_NODES_MAX`])
//! of entries `u16` URL length, URL (UTF-8, at most `URL_BYTES_MAX`),
//! `u64` version. A crc32c of everything
//! before it ends each message. Nothing is left over; at most
//! [`MESSAGE_BYTES_MAX`] bytes.

use super::agreement::{AcceptorReply, Ballot};
use super::copy_figures::{CopyFigures, NodeCopy};
use super::history::Trackers;
use super::layout::{LAYOUT_BYTES_MAX, LAYOUT_NODES_MAX, Layout, LayoutDecodeError, URL_BYTES_MAX};

/// The name a peer's proof of the cluster secret is bound to when it
/// opens the internal layout endpoints (`range::peer_auth::open`).
pub const LAYOUT_PROTOCOL: &str = "ataman-internal-layout/1";
/// The first four bytes of a request.
pub const REQUEST_MAGIC: [u8; 4] = *b"ATPQ";
/// The first four bytes of a reply.
pub const REPLY_MAGIC: [u8; 4] = *b"ATPA";
/// The format byte of both: 2 since a history carries the `dead`
/// declarations (format 1 had three tracker lists); a node refuses the
/// other format as `WireError::Unknown`.
pub const MESSAGE_FORMAT: u8 = 2;
/// Layouts a gossiped history holds (a transition's two).
pub const GOSSIP_LAYOUTS_MAX: usize = 2;
/// Entries of one gossiped tracker: every node of two live layouts.
pub const TRACKED_NODES_MAX: usize = GOSSIP_LAYOUTS_MAX * LAYOUT_NODES_MAX;
/// The most bytes of an agreement message: header, five integers, a layout, crc.
const AGREEMENT_BYTES_MAX: usize = 4 + 1 + 1 + 5 * 8 + 1 + 4 + LAYOUT_BYTES_MAX + 4;
/// The most bytes of a gossip message: header, two layouts, three trackers
/// and the dead declarations, crc.
const GOSSIP_BYTES_MAX: usize = 4
    + 1
    + 1
    + 1
    + GOSSIP_LAYOUTS_MAX * (4 + LAYOUT_BYTES_MAX)
    + 4 * (4 + TRACKED_NODES_MAX * (2 + URL_BYTES_MAX + 8))
    + (2 + URL_BYTES_MAX + 5 * 8)
    + 4;
/// The most bytes a message takes (a gossip is the longest).
pub const MESSAGE_BYTES_MAX: usize = if GOSSIP_BYTES_MAX > AGREEMENT_BYTES_MAX {
    GOSSIP_BYTES_MAX
} else {
    AGREEMENT_BYTES_MAX
};

/// A proposer's message to an acceptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Phase 1 for `slot` under `ballot`.
    Prepare {
        /// The version being decided.
        slot: u64,
        /// The proposal number.
        ballot: Ballot,
    },
    /// Phase 2: accept `value` for `slot` under `ballot`.
    Accept {
        /// The version being decided.
        slot: u64,
        /// The proposal number.
        ballot: Ballot,
        /// The layout (its version is `slot`).
        value: Layout,
    },
    /// `value` was chosen for its version: learn it.
    Commit {
        /// The chosen layout.
        value: Layout,
    },
    /// The sender's live layouts and trackers: learn what is newer,
    /// merge the trackers, answer with yours.
    Gossip {
        /// The live layouts, oldest first.
        live: Vec<Layout>,
        /// The trackers.
        trackers: Trackers,
        /// The sender's copy figures.
        copy: NodeCopy,
    },
    /// Answer with your live layouts and trackers, learning nothing: a
    /// node that is not a member yet (`--join`) asking its seed.
    Read,
}

/// An acceptor's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An answer to a prepare or an accept.
    Acceptor(AcceptorReply),
    /// The slot asked about was decided and this is the layout chosen
    /// for it (an acceptor answers this instead of `Decided` when it
    /// holds that layout): a proposer learns whether its value won.
    Chosen {
        /// The chosen layout (its version is the slot).
        value: Layout,
    },
    /// The commit is durable: the node's committed version is this one.
    Committed {
        /// The version the node now holds as committed.
        version: u64,
    },
    /// The answering node's live layouts and trackers.
    Gossip {
        /// The live layouts, oldest first.
        live: Vec<Layout>,
        /// The trackers.
        trackers: Trackers,
        /// The answering node's copy figures.
        copy: NodeCopy,
    },
}

/// Why bytes are not a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// More than [`MESSAGE_BYTES_MAX`] bytes.
    #[error("agreement message of {0} bytes is too long")]
    TooLong(usize),
    /// Ends before a field, or bytes are left over.
    #[error("agreement message malformed at byte {0}")]
    Malformed(usize),
    /// Another magic, format or kind.
    #[error("not an agreement message of this format (byte {0})")]
    Unknown(usize),
    /// The checksum does not match.
    #[error("agreement message checksum mismatch: expected {expected:#010x}, got {got:#010x}")]
    Checksum {
        /// Stored.
        expected: u32,
        /// Computed.
        got: u32,
    },
    /// A layout in it is bad.
    #[error("agreement message's layout: {0}")]
    Layout(LayoutDecodeError),
    /// A gossiped history is out of bounds (counts, URL lengths, UTF-8).
    #[error("agreement message's gossip is malformed at byte {0}")]
    Gossip(usize),
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_ballot(out: &mut Vec<u8>, b: Ballot) {
    put_u64(out, b.round);
    put_u64(out, b.node);
}

fn put_layout(out: &mut Vec<u8>, layout: &Layout) {
    let bytes = layout.encode();
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&bytes);
}

fn put_copy(out: &mut Vec<u8>, copy: &NodeCopy) {
    out.extend_from_slice(&(copy.url.len() as u16).to_le_bytes());
    out.extend_from_slice(copy.url.as_bytes());
    let f = &copy.figures;
    for v in [
        f.version,
        f.keys_to_copy,
        f.bytes_to_copy,
        f.keys_copied,
        f.bytes_copied,
    ] {
        put_u64(out, v);
    }
}

fn put_history(out: &mut Vec<u8>, live: &[Layout], trackers: &Trackers) {
    out.push(live.len() as u8);
    for layout in live {
        put_layout(out, layout);
    }
    for map in [
        &trackers.ack,
        &trackers.sync,
        &trackers.sync_ack,
        &trackers.dead,
    ] {
        out.extend_from_slice(&(map.len() as u32).to_le_bytes());
        for (url, version) in map {
            out.extend_from_slice(&(url.len() as u16).to_le_bytes());
            out.extend_from_slice(url.as_bytes());
            put_u64(out, *version);
        }
    }
}

fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

impl Request {
    /// The bytes of the `# Byte format` paragraph.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&REQUEST_MAGIC);
        out.push(MESSAGE_FORMAT);
        match self {
            Request::Prepare { slot, ballot } => {
                out.push(1);
                put_u64(&mut out, *slot);
                put_ballot(&mut out, *ballot);
            }
            Request::Accept {
                slot,
                ballot,
                value,
            } => {
                out.push(2);
                put_u64(&mut out, *slot);
                put_ballot(&mut out, *ballot);
                put_layout(&mut out, value);
            }
            Request::Commit { value } => {
                out.push(3);
                put_layout(&mut out, value);
            }
            Request::Gossip {
                live,
                trackers,
                copy,
            } => {
                out.push(4);
                put_history(&mut out, live, trackers);
                put_copy(&mut out, copy);
            }
            Request::Read => out.push(5),
        }
        seal(out)
    }

    /// A request from [`Request::encode`]'s bytes, checked in full.
    pub fn decode(bytes: &[u8]) -> Result<Request, WireError> {
        let mut r = Reader::open(bytes, REQUEST_MAGIC)?;
        let request = match r.kind()? {
            1 => Request::Prepare {
                slot: r.u64()?,
                ballot: r.ballot()?,
            },
            2 => Request::Accept {
                slot: r.u64()?,
                ballot: r.ballot()?,
                value: r.layout()?,
            },
            3 => Request::Commit { value: r.layout()? },
            4 => {
                let (live, trackers) = r.history()?;
                Request::Gossip {
                    live,
                    trackers,
                    copy: r.copy()?,
                }
            }
            5 => Request::Read,
            _ => return Err(WireError::Unknown(5)),
        };
        r.finish()?;
        Ok(request)
    }
}

impl Reply {
    /// The bytes of the `# Byte format` paragraph.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&REPLY_MAGIC);
        out.push(MESSAGE_FORMAT);
        match self {
            Reply::Acceptor(AcceptorReply::Promise { ballot, accepted }) => {
                out.push(1);
                put_ballot(&mut out, *ballot);
                match accepted {
                    None => out.push(0),
                    Some((b, layout)) => {
                        out.push(1);
                        put_ballot(&mut out, *b);
                        put_layout(&mut out, layout);
                    }
                }
            }
            Reply::Acceptor(AcceptorReply::Accepted { ballot }) => {
                out.push(2);
                put_ballot(&mut out, *ballot);
            }
            Reply::Acceptor(AcceptorReply::Reject { promised }) => {
                out.push(3);
                put_ballot(&mut out, *promised);
            }
            Reply::Acceptor(AcceptorReply::Decided { version }) => {
                out.push(4);
                put_u64(&mut out, *version);
            }
            Reply::Acceptor(AcceptorReply::Behind { slot }) => {
                out.push(5);
                put_u64(&mut out, *slot);
            }
            Reply::Committed { version } => {
                out.push(6);
                put_u64(&mut out, *version);
            }
            Reply::Chosen { value } => {
                out.push(7);
                put_layout(&mut out, value);
            }
            Reply::Gossip {
                live,
                trackers,
                copy,
            } => {
                out.push(8);
                put_history(&mut out, live, trackers);
                put_copy(&mut out, copy);
            }
        }
        seal(out)
    }

    /// A reply from [`Reply::encode`]'s bytes, checked in full.
    pub fn decode(bytes: &[u8]) -> Result<Reply, WireError> {
        let mut r = Reader::open(bytes, REPLY_MAGIC)?;
        let reply = match r.kind()? {
            1 => {
                let ballot = r.ballot()?;
                let accepted = match r.kind()? {
                    0 => None,
                    1 => Some((r.ballot()?, r.layout()?)),
                    _ => return Err(WireError::Malformed(r.at)),
                };
                Reply::Acceptor(AcceptorReply::Promise { ballot, accepted })
            }
            2 => Reply::Acceptor(AcceptorReply::Accepted {
                ballot: r.ballot()?,
            }),
            3 => Reply::Acceptor(AcceptorReply::Reject {
                promised: r.ballot()?,
            }),
            4 => Reply::Acceptor(AcceptorReply::Decided { version: r.u64()? }),
            5 => Reply::Acceptor(AcceptorReply::Behind { slot: r.u64()? }),
            6 => Reply::Committed { version: r.u64()? },
            7 => Reply::Chosen { value: r.layout()? },
            8 => {
                let (live, trackers) = r.history()?;
                Reply::Gossip {
                    live,
                    trackers,
                    copy: r.copy()?,
                }
            }
            _ => return Err(WireError::Unknown(5)),
        };
        r.finish()?;
        Ok(reply)
    }
}

/// Reads the body of a checked message.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Checks length, checksum, magic and format; positioned at the kind.
    fn open(bytes: &'a [u8], magic: [u8; 4]) -> Result<Reader<'a>, WireError> {
        if bytes.len() > MESSAGE_BYTES_MAX {
            return Err(WireError::TooLong(bytes.len()));
        }
        let Some(body_len) = bytes.len().checked_sub(4) else {
            return Err(WireError::Malformed(bytes.len()));
        };
        let mut stored = [0u8; 4];
        stored.copy_from_slice(&bytes[body_len..]);
        let expected = u32::from_le_bytes(stored);
        let got = crc32c::crc32c(&bytes[..body_len]);
        if expected != got {
            return Err(WireError::Checksum { expected, got });
        }
        let mut r = Reader {
            body: &bytes[..body_len],
            at: 0,
        };
        if r.take(4)? != magic {
            return Err(WireError::Unknown(0));
        }
        if r.take(1)? != [MESSAGE_FORMAT] {
            return Err(WireError::Unknown(4));
        }
        Ok(r)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.body.len())
            .ok_or(WireError::Malformed(self.at))?;
        let out = &self.body[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn kind(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    fn ballot(&mut self) -> Result<Ballot, WireError> {
        Ok(Ballot {
            round: self.u64()?,
            node: self.u64()?,
        })
    }

    fn layout(&mut self) -> Result<Layout, WireError> {
        let mut len = [0u8; 4];
        len.copy_from_slice(self.take(4)?);
        let bytes = self.take(u32::from_le_bytes(len) as usize)?;
        Layout::decode(bytes).map_err(WireError::Layout)
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }

    /// A history's layouts and trackers (the bounds of `# Byte format`).
    fn history(&mut self) -> Result<(Vec<Layout>, Trackers), WireError> {
        let count = self.kind()? as usize;
        if !(1..=GOSSIP_LAYOUTS_MAX).contains(&count) {
            return Err(WireError::Gossip(self.at));
        }
        let mut live = Vec::with_capacity(count);
        for _ in 0..count {
            live.push(self.layout()?);
        }
        let mut trackers = Trackers::default();
        for map in [
            &mut trackers.ack,
            &mut trackers.sync,
            &mut trackers.sync_ack,
            &mut trackers.dead,
        ] {
            let entries = self.u32()? as usize;
            if entries > TRACKED_NODES_MAX {
                return Err(WireError::Gossip(self.at));
            }
            for _ in 0..entries {
                let at = self.at + 2;
                let url = self.url()?;
                let version = self.u64()?;
                if map.insert(url, version).is_some() {
                    return Err(WireError::Gossip(at));
                }
            }
        }
        Ok((live, trackers))
    }

    /// A URL: `u16` length (at most `URL_BYTES_MAX`), UTF-8 bytes.
    fn url(&mut self) -> Result<String, WireError> {
        let mut len = [0u8; 2];
        len.copy_from_slice(self.take(2)?);
        let len = u16::from_le_bytes(len) as usize;
        if len > URL_BYTES_MAX {
            return Err(WireError::Gossip(self.at));
        }
        let at = self.at;
        Ok(std::str::from_utf8(self.take(len)?)
            .map_err(|_| WireError::Gossip(at))?
            .to_owned())
    }

    /// A node's copy figures: its URL, five integers.
    fn copy(&mut self) -> Result<NodeCopy, WireError> {
        Ok(NodeCopy {
            url: self.url()?,
            figures: CopyFigures {
                version: self.u64()?,
                keys_to_copy: self.u64()?,
                bytes_to_copy: self.u64()?,
                keys_copied: self.u64()?,
                bytes_copied: self.u64()?,
            },
        })
    }

    fn finish(self) -> Result<(), WireError> {
        if self.at != self.body.len() {
            return Err(WireError::Malformed(self.at));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(version: u64, ports: &[u16]) -> Layout {
        let nodes = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        Layout::new(version, nodes, 2).unwrap()
    }

    fn ballot(round: u64, node: u64) -> Ballot {
        Ballot { round, node }
    }

    fn requests() -> Vec<Request> {
        vec![
            Request::Prepare {
                slot: 2,
                ballot: ballot(3, u64::MAX),
            },
            Request::Accept {
                slot: 2,
                ballot: ballot(1, 7),
                value: layout(2, &[1, 2, 3, 4]),
            },
            Request::Commit {
                value: layout(9, &[1, 2]),
            },
            Request::Gossip {
                live: vec![layout(2, &[1, 2]), layout(3, &[1, 2, 3])],
                trackers: trackers(&[(1, 3), (2, 2)]),
                copy: copy(3, 1),
            },
            Request::Read,
        ]
    }

    /// A layout of the distinct `ports`, R = 1, with node ids and retired
    /// ids that depend on the version (distinct: 7 is prime to 256).
    fn small(version: u64, ports: &[u16]) -> Layout {
        let mut nodes: Vec<String> = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        nodes.sort();
        nodes.dedup();
        let id = |i: usize| ((i as u64 * 7 + version) % 256) as u16;
        let n = nodes.len();
        let members = nodes
            .into_iter()
            .enumerate()
            .map(|(i, u)| (u, id(i)))
            .collect();
        let retired = (n..n + (version as usize % 4)).map(id).collect();
        Layout::with_ids(version, members, retired, 1).unwrap()
    }

    fn trackers(entries: &[(u16, u64)]) -> Trackers {
        let mut t = Trackers::default();
        for (i, &(p, v)) in entries.iter().enumerate() {
            let url = format!("http://127.0.0.1:{p}");
            t.ack.insert(url.clone(), v);
            if i % 2 == 0 {
                t.sync.insert(url.clone(), v.saturating_sub(1));
            }
            if i % 3 == 2 {
                t.dead.insert(url.clone(), v);
            }
            t.sync_ack.insert(url, v / 2);
        }
        t
    }

    fn replies() -> Vec<Reply> {
        vec![
            Reply::Acceptor(AcceptorReply::Promise {
                ballot: ballot(1, 2),
                accepted: None,
            }),
            Reply::Acceptor(AcceptorReply::Promise {
                ballot: ballot(4, 2),
                accepted: Some((ballot(3, 1), layout(2, &[1, 2, 3]))),
            }),
            Reply::Acceptor(AcceptorReply::Accepted {
                ballot: ballot(5, 5),
            }),
            Reply::Acceptor(AcceptorReply::Reject {
                promised: ballot(6, 0),
            }),
            Reply::Acceptor(AcceptorReply::Decided { version: 3 }),
            Reply::Acceptor(AcceptorReply::Behind { slot: 1 }),
            Reply::Committed { version: 12 },
            Reply::Chosen {
                value: layout(4, &[1, 2, 3]),
            },
            Reply::Gossip {
                live: vec![layout(1, &[1, 2, 3])],
                trackers: Trackers::default(),
                copy: NodeCopy::default(),
            },
        ]
    }

    /// Figures of node `port` copying into `version`, all distinct.
    fn copy(port: u16, version: u64) -> NodeCopy {
        NodeCopy {
            url: format!("http://127.0.0.1:{port}"),
            figures: CopyFigures {
                version,
                keys_to_copy: u64::MAX,
                bytes_to_copy: 3 << 40,
                keys_copied: 7,
                bytes_copied: 1 << 33,
            },
        }
    }

    proptest::proptest! {
        /// Any history within the bounds round-trips, as a request and as
        /// a reply.
        #[test]
        fn gossip_round_trips(
            versions in 1u64..1000,
            two in proptest::bool::ANY,
            ports in proptest::collection::vec(1u16..u16::MAX, 1..20),
            tracked in proptest::collection::vec((1u16..u16::MAX, proptest::num::u64::ANY), 0..40),
            figures in proptest::collection::vec(proptest::num::u64::ANY, 5),
        ) {
            let mut live = vec![small(versions, &ports[..1])];
            if two {
                live.push(small(versions + 1, &ports));
            }
            let trackers = trackers(&tracked);
            let copy = NodeCopy {
                url: format!("http://127.0.0.1:{}", ports[0]),
                figures: CopyFigures {
                    version: figures[0],
                    keys_to_copy: figures[1],
                    bytes_to_copy: figures[2],
                    keys_copied: figures[3],
                    bytes_copied: figures[4],
                },
            };
            let q = Request::Gossip { live: live.clone(), trackers: trackers.clone(), copy: copy.clone() };
            proptest::prop_assert_eq!(Request::decode(&q.encode()), Ok(q));
            let a = Reply::Gossip { live, trackers, copy };
            proptest::prop_assert_eq!(Reply::decode(&a.encode()), Ok(a));
        }
    }

    /// A gossip past its bounds is refused: three layouts, none, a URL
    /// longer than a URL may be, a URL that is not UTF-8, in a tracker
    /// or in the copy figures (each sealed with a good checksum, so only
    /// the bound refuses it).
    #[test]
    fn gossip_bounds() {
        let head = |out: &mut Vec<u8>| {
            out.extend_from_slice(&REQUEST_MAGIC);
            out.push(MESSAGE_FORMAT);
            out.push(4);
        };
        let empty_trackers = |out: &mut Vec<u8>| {
            for _ in 0..4 {
                out.extend_from_slice(&0u32.to_le_bytes());
            }
        };
        for count in [0u8, 3] {
            let mut out = Vec::new();
            head(&mut out);
            out.push(count);
            for _ in 0..count {
                put_layout(&mut out, &small(1, &[1]));
            }
            empty_trackers(&mut out);
            assert!(
                matches!(Request::decode(&seal(out)), Err(WireError::Gossip(_))),
                "{count} layouts"
            );
        }
        for url in [vec![b'h'; URL_BYTES_MAX + 1], vec![0xff, 0xfe]] {
            let mut out = Vec::new();
            head(&mut out);
            out.push(1);
            put_layout(&mut out, &small(1, &[1]));
            out.extend_from_slice(&1u32.to_le_bytes());
            out.extend_from_slice(&(url.len() as u16).to_le_bytes());
            out.extend_from_slice(&url);
            put_u64(&mut out, 1);
            for _ in 0..3 {
                out.extend_from_slice(&0u32.to_le_bytes());
            }
            assert!(matches!(
                Request::decode(&seal(out)),
                Err(WireError::Gossip(_))
            ));
        }
        for url in ["h".repeat(URL_BYTES_MAX + 1).into_bytes(), vec![0xff, 0xfe]] {
            let mut out = Vec::new();
            head(&mut out);
            out.push(1);
            put_layout(&mut out, &small(1, &[1]));
            empty_trackers(&mut out);
            out.extend_from_slice(&(url.len() as u16).to_le_bytes());
            out.extend_from_slice(&url);
            (0..5).for_each(|_| put_u64(&mut out, 1));
            assert!(matches!(
                Request::decode(&seal(out)),
                Err(WireError::Gossip(_))
            ));
        }
        let mut fine = Vec::new();
        head(&mut fine);
        fine.push(1);
        put_layout(&mut fine, &small(1, &[1]));
        empty_trackers(&mut fine);
        put_copy(&mut fine, &copy(1, 1));
        assert!(
            Request::decode(&seal(fine)).is_ok(),
            "the control is well formed"
        );
    }

    /// Every request and reply decodes to itself.
    #[test]
    fn round_trip() {
        for q in requests() {
            assert_eq!(Request::decode(&q.encode()), Ok(q.clone()), "{q:?}");
        }
        for a in replies() {
            assert_eq!(Reply::decode(&a.encode()), Ok(a.clone()), "{a:?}");
        }
    }

    /// Every truncation, every flipped byte and every extra byte is refused,
    /// and a request is not a reply nor the other way round.
    #[test]
    fn damage_is_refused() {
        let all: Vec<(Vec<u8>, bool)> = requests()
            .iter()
            .map(|q| (q.encode(), true))
            .chain(replies().iter().map(|a| (a.encode(), false)))
            .collect();
        for (bytes, is_request) in all {
            let decodes = |b: &[u8]| {
                if is_request {
                    Request::decode(b).is_ok()
                } else {
                    Reply::decode(b).is_ok()
                }
            };
            assert!(decodes(&bytes));
            for len in 0..bytes.len() {
                assert!(!decodes(&bytes[..len]), "truncated to {len}");
            }
            for i in 0..bytes.len() {
                let mut b = bytes.clone();
                b[i] ^= 0x40;
                assert!(!decodes(&b), "byte {i} flipped");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(!decodes(&longer));
            if is_request {
                assert!(Reply::decode(&bytes).is_err());
            } else {
                assert!(Request::decode(&bytes).is_err());
            }
        }
        assert_eq!(
            Request::decode(&vec![0u8; MESSAGE_BYTES_MAX + 1]),
            Err(WireError::TooLong(MESSAGE_BYTES_MAX + 1))
        );
    }
}
