//! The bytes of the agreement's messages between nodes: a proposer's
//! request to an acceptor (`prepare`, `accept`, `commit`) and the
//! acceptor's reply (`super::agreement::AcceptorReply`, or the commit's
//! acknowledgement). They are the bodies of the internal layout endpoints.
//!
//! # Byte format
//! A request: `ATPQ`, format `1`, kind (`1` prepare, `2` accept, `3`
//! commit), then per kind: prepare `slot, round, node`; accept `slot,
//! round, node, layout`; commit `layout`. A reply: `ATPA`, format `1`,
//! kind (`1` promise, `2` accepted, `3` reject, `4` decided, `5` behind,
//! `6` committed, `7` chosen), then per kind: promise `round, node, flag [, round,
//! node, layout]`; accepted and reject `round, node`; decided, behind and
//! committed one `u64`; chosen a layout. Integers are little-endian `u64`; a layout is a
//! `u32` length and [`Layout::encode`]'s bytes. A crc32c of everything
//! before it ends each message. Nothing is left over; at most
//! [`MESSAGE_BYTES_MAX`] bytes.

use super::agreement::{AcceptorReply, Ballot};
use super::layout::{LAYOUT_BYTES_MAX, Layout, LayoutDecodeError};

/// The name a peer's proof of the cluster secret is bound to when it
/// opens the internal layout endpoints (`range::peer_auth::open`).
pub const LAYOUT_PROTOCOL: &str = "ataman-internal-layout/1";
/// The first four bytes of a request.
pub const REQUEST_MAGIC: [u8; 4] = *b"ATPQ";
/// The first four bytes of a reply.
pub const REPLY_MAGIC: [u8; 4] = *b"ATPA";
/// The format byte of both.
pub const MESSAGE_FORMAT: u8 = 1;
/// The most bytes a message takes: header, five integers, a layout, crc.
pub const MESSAGE_BYTES_MAX: usize = 4 + 1 + 1 + 5 * 8 + 1 + 4 + LAYOUT_BYTES_MAX + 4;

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
        ]
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
        ]
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
