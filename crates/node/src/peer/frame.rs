//! The peer protocol's binary frames: what nodes send each other after the
//! upgrade handshake (see [`super::handshake`]).
//!
//! Byte layout: `docs/FORMAT.md`, section "Peer frame". A frame is a
//! length, a CRC32C of the body and the body; the body is a kind, a
//! request id and the kind's fields. Requests and answers are pipelined on
//! one connection and matched by id.
//!
//! Both functions are pure over bytes, so the fuzz target
//! (`fuzz/fuzz_targets/peer_frame.rs`) and the tests call exactly what the
//! connection calls. The decoder checks every length against what is left
//! of the body before slicing: no input makes it panic or allocate more
//! than the frame it was given.

use super::framing::{self, Cursor, FramingError, put_bytes};
use crate::version_order::{self, VersionRef};
use ataman_engine::expiry::DEADLINE_MS_MAX;
use ataman_engine::key::{KEY_BYTES_MAX, VALUE_BYTES_MAX};

/// Bytes before the body: `u32 body_len`, `u32 crc32c(body)` ("Peer frame").
pub use super::framing::FRAME_HEADER_BYTES;

/// Largest error message in a `WriteAck` or `ReadReply`, bytes ("Peer frame").
pub const ERROR_MESSAGE_BYTES_MAX: usize = 1024;

/// Largest frame body: a key and value at their engine bounds plus fields
/// ("Peer frame"). The largest body the encoder writes is a `Write` of such
/// a key and value with a deadline, whose other fields take 34 bytes.
pub const FRAME_BODY_BYTES_MAX: usize = KEY_BYTES_MAX + VALUE_BYTES_MAX + 64;

/// Kind byte of a consensus register Ask (docs/FORMAT.md "Register
/// frame"; its codec is `replication::register::wire`, above this layer).
pub const KIND_REGISTER_ASK: u8 = 5;
/// Kind byte of a consensus register Reply ("Register frame").
pub const KIND_REGISTER_REPLY: u8 = 6;
/// Largest register frame body ("Register frame"): a `Promise` carries an
/// accepted and a committed value, each at most `VALUE_BYTES_MAX`, and the
/// other fields (two deadlines among them) take at most 76 bytes; an `Ask`
/// carries a key and one value.
pub const REGISTER_BODY_BYTES_MAX: usize = KEY_BYTES_MAX + 2 * VALUE_BYTES_MAX + 128;

/// Kind byte of [`Message::Write`].
const KIND_WRITE: u8 = 1;
/// Kind byte of [`Message::WriteAck`].
const KIND_WRITE_ACK: u8 = 2;
/// Kind byte of [`Message::Read`].
const KIND_READ: u8 = 3;
/// Kind byte of [`Message::ReadReply`].
const KIND_READ_REPLY: u8 = 4;

/// Status byte of a successful answer.
const STATUS_OK: u8 = 0;
/// Status byte of [`ReplicaErrorKind::Unavailable`].
const STATUS_UNAVAILABLE: u8 = 1;
/// Status byte of [`ReplicaErrorKind::Failed`].
const STATUS_FAILED: u8 = 2;
/// Status byte of [`ReplicaErrorKind::Invalid`].
const STATUS_INVALID: u8 = 3;
/// Status byte of [`Applied::HoldsNewer`] (a `WriteAck` only): a `ts` follows.
const STATUS_HOLDS_NEWER: u8 = 4;
/// Status byte of [`ReplicaErrorKind::StaleLayout`].
const STATUS_STALE_LAYOUT: u8 = 5;

/// A stamped value: one version of a key as replicas exchange it (not to
/// be confused with the engine's `Version`, its set of live files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// The version's hybrid-logical-clock timestamp.
    pub ts: u64,
    /// The value; `None` is a tombstone (the key was deleted at `ts`).
    pub value: Option<Vec<u8>>,
    /// The value's absolute deadline, Unix milliseconds, stamped once by
    /// the coordinator and carried unchanged (`None`: it never expires;
    /// always `None` for a tombstone).
    pub deadline_ms: Option<u64>,
}

impl Stamped {
    /// A plain value at `ts`.
    pub fn value(ts: u64, value: Vec<u8>) -> Stamped {
        Stamped {
            ts,
            value: Some(value),
            deadline_ms: None,
        }
    }

    /// A tombstone at `ts`.
    pub fn tombstone(ts: u64) -> Stamped {
        Stamped {
            ts,
            value: None,
            deadline_ms: None,
        }
    }

    /// The engine's newest version of a key as replicas exchange it (an
    /// expired value comes out of the engine as a tombstone already).
    pub fn from_entry(e: ataman_engine::Entry) -> Stamped {
        Stamped {
            ts: e.ts,
            deadline_ms: e.deadline_ms.filter(|_| e.value.is_some()),
            value: e.value,
        }
    }

    /// Adds this version of `key` to `batch`: a put (expiring when it has
    /// a deadline) or a tombstone.
    pub fn add_to(&self, batch: &mut ataman_engine::WriteBatch, key: &[u8]) {
        match (&self.value, self.deadline_ms) {
            (Some(value), Some(deadline_ms)) => {
                batch.put_expiring(key, value, self.ts, deadline_ms)
            }
            (Some(value), None) => batch.put(key, value, self.ts),
            (None, _) => batch.delete(key, self.ts),
        };
    }

    /// This version as the tie rule sees it ([`crate::version_order`]).
    pub fn as_version(&self) -> VersionRef<'_> {
        VersionRef {
            ts: self.ts,
            value: self.value.as_deref(),
            expiring: self.deadline_ms.is_some(),
        }
    }

    /// True when this version wins over `other` by the one tie rule
    /// ([`crate::version_order`]): a newer `ts`; at an equal one,
    /// tombstone > expiring value > value, then the value digest.
    pub fn newer_than(&self, other: &Stamped) -> bool {
        version_order::wins(self.as_version(), other.as_version())
    }
}

/// What a replica did with a `Write` it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The version is durable on the replica.
    Stored,
    /// The replica already holds a newer version of the key, stamped `ts`,
    /// and did not store this one: a coordinator whose write has not been
    /// answered yet re-stamps it above `ts` (docs/ARCHITECTURE.md,
    /// "Re-stamping"); a hint or read repair is done with.
    HoldsNewer {
        /// The timestamp of the replica's newest version.
        ts: u64,
    },
}

/// Why a replica did not do what it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaErrorKind {
    /// The engine is overloaded (what a client would see as 503); try later.
    Unavailable,
    /// The engine failed or is poisoned after a failed write.
    Failed,
    /// The replica refused the request as invalid (a key or value out of bounds).
    Invalid,
    /// The replica knows a newer layout version than the connection named
    /// (the fence, `net::fence`): not served, and the connection closes;
    /// the coordinator may ask again once it places with the newer version.
    StaleLayout,
}

/// A replica's refusal, with its reason in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaError {
    /// What kind of failure.
    pub kind: ReplicaErrorKind,
    /// Why, for logs and for the client's error body; at most
    /// [`ERROR_MESSAGE_BYTES_MAX`] bytes of UTF-8 on the wire.
    pub message: String,
}

impl ReplicaError {
    /// An error whose message is cut (at a character boundary) to
    /// [`ERROR_MESSAGE_BYTES_MAX`] bytes, so it always fits a frame.
    pub fn new(kind: ReplicaErrorKind, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > ERROR_MESSAGE_BYTES_MAX {
            let mut end = ERROR_MESSAGE_BYTES_MAX;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        ReplicaError { kind, message }
    }
}

/// One message of the peer protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Apply this version of `key` durably (a replicated write, a read repair or a hint).
    Write {
        /// Request id, echoed by the answer.
        id: u64,
        /// The key, at most `KEY_BYTES_MAX` bytes.
        key: Vec<u8>,
        /// The version to apply; its value at most `VALUE_BYTES_MAX` bytes.
        version: Stamped,
    },
    /// The answer to Write `id`.
    WriteAck {
        /// The id of the Write answered.
        id: u64,
        /// Stored durably, superseded by a newer version, or why not.
        result: Result<Applied, ReplicaError>,
    },
    /// Read the newest version of `key` (tombstones included).
    Read {
        /// Request id, echoed by the answer.
        id: u64,
        /// The key, at most `KEY_BYTES_MAX` bytes.
        key: Vec<u8>,
    },
    /// The answer to Read `id`: None when the replica has no version at all.
    ReadReply {
        /// The id of the Read answered.
        id: u64,
        /// The newest version (a tombstone included), none, or why not.
        result: Result<Option<Stamped>, ReplicaError>,
    },
}

impl Message {
    /// The request id (of a request, or of the request an answer answers).
    pub fn id(&self) -> u64 {
        match self {
            Message::Write { id, .. }
            | Message::WriteAck { id, .. }
            | Message::Read { id, .. }
            | Message::ReadReply { id, .. } => *id,
        }
    }
}

/// Why bytes received from a peer are not a frame. Every error is fatal for
/// the connection: after it the stream can no longer be framed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The header announces a body over [`FRAME_BODY_BYTES_MAX`].
    #[error("peer frame body of {len} bytes over the limit of {max}")]
    TooLarge {
        /// The announced body length, bytes.
        len: usize,
        /// The limit, bytes.
        max: usize,
    },
    /// The body's CRC32C is not the one in the header.
    #[error("peer frame checksum mismatch: header says {expected:#010x}, body has {found:#010x}")]
    ChecksumMismatch {
        /// The checksum in the header.
        expected: u32,
        /// The checksum of the body received.
        found: u32,
    },
    /// The body does not decode; the text names the field and what is wrong.
    #[error("malformed peer frame: {0}")]
    Malformed(String),
    /// The body's kind byte is none of the known kinds.
    #[error("unknown peer frame kind {0}")]
    UnknownKind(u8),
}

/// Appends one frame holding `msg` to `out`.
///
/// Never fails: the caller guarantees the bounds (key at most
/// `KEY_BYTES_MAX`, value at most `VALUE_BYTES_MAX`, error messages at most
/// [`ERROR_MESSAGE_BYTES_MAX`] bytes; [`ReplicaError::new`] cuts messages),
/// which are debug-asserted here and checked by [`decode`].
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    let start = framing::begin(out);
    match msg {
        Message::Write { id, key, version } => {
            put_head(out, KIND_WRITE, *id);
            put_key(out, key);
            put_stamped(out, version);
        }
        Message::WriteAck { id, result } => {
            put_head(out, KIND_WRITE_ACK, *id);
            match result {
                Ok(Applied::Stored) => out.push(STATUS_OK),
                Ok(Applied::HoldsNewer { ts }) => {
                    out.push(STATUS_HOLDS_NEWER);
                    out.extend_from_slice(&ts.to_le_bytes());
                }
                Err(e) => put_error(out, e),
            }
        }
        Message::Read { id, key } => {
            put_head(out, KIND_READ, *id);
            put_key(out, key);
        }
        Message::ReadReply { id, result } => {
            put_head(out, KIND_READ_REPLY, *id);
            match result {
                Ok(None) => out.extend_from_slice(&[STATUS_OK, 0]),
                Ok(Some(version)) => {
                    out.extend_from_slice(&[STATUS_OK, 1]);
                    put_stamped(out, version);
                }
                Err(e) => put_error(out, e),
            }
        }
    }
    framing::seal(out, start, FRAME_BODY_BYTES_MAX);
}

fn put_head(out: &mut Vec<u8>, kind: u8, id: u64) {
    out.push(kind);
    out.extend_from_slice(&id.to_le_bytes());
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    debug_assert!(key.len() <= KEY_BYTES_MAX, "key over KEY_BYTES_MAX");
    put_bytes(out, key);
}

/// `has_value` byte of a tombstone ("Body").
const VERSION_TOMBSTONE: u8 = 0;
/// `has_value` byte of a plain value.
const VERSION_VALUE: u8 = 1;
/// `has_value` byte of a value with a deadline (`deadline_ms` u64 LE follows).
const VERSION_EXPIRING: u8 = 2;

/// Appends a stamped value (FORMAT.md's `version`, "Body").
pub(crate) fn put_stamped(out: &mut Vec<u8>, version: &Stamped) {
    out.extend_from_slice(&version.ts.to_le_bytes());
    match (&version.value, version.deadline_ms) {
        (None, _) => out.push(VERSION_TOMBSTONE),
        (Some(value), deadline_ms) => {
            debug_assert!(value.len() <= VALUE_BYTES_MAX, "value over VALUE_BYTES_MAX");
            match deadline_ms {
                None => out.push(VERSION_VALUE),
                Some(deadline_ms) => {
                    out.push(VERSION_EXPIRING);
                    out.extend_from_slice(&deadline_ms.to_le_bytes());
                }
            }
            put_bytes(out, value);
        }
    }
}

fn put_error(out: &mut Vec<u8>, error: &ReplicaError) {
    debug_assert!(
        error.message.len() <= ERROR_MESSAGE_BYTES_MAX,
        "error message over ERROR_MESSAGE_BYTES_MAX"
    );
    out.push(match error.kind {
        ReplicaErrorKind::Unavailable => STATUS_UNAVAILABLE,
        ReplicaErrorKind::Failed => STATUS_FAILED,
        ReplicaErrorKind::Invalid => STATUS_INVALID,
        ReplicaErrorKind::StaleLayout => STATUS_STALE_LAYOUT,
    });
    put_bytes(out, error.message.as_bytes());
}

/// Decodes the first frame in `buf`.
///
/// `Ok(None)`: `buf` holds only part of a frame; read more and call again
/// with the bytes appended. `Ok(Some((msg, consumed)))`: the first
/// `consumed` bytes were one frame. An error is fatal for the connection.
/// A header announcing a body over [`FRAME_BODY_BYTES_MAX`] is refused as
/// soon as the header is in, without waiting for the body.
pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>, FrameError> {
    let (body, frame_bytes) = match framing::split(buf, FRAME_BODY_BYTES_MAX) {
        Ok(Some(frame)) => frame,
        Ok(None) => return Ok(None),
        Err(FramingError::TooLarge { len, max }) => return Err(FrameError::TooLarge { len, max }),
        Err(FramingError::ChecksumMismatch { expected, found }) => {
            return Err(FrameError::ChecksumMismatch { expected, found });
        }
    };
    let msg = decode_body(body)?;
    Ok(Some((msg, frame_bytes)))
}

/// Decodes a body whose checksum matched.
fn decode_body(body: &[u8]) -> Result<Message, FrameError> {
    let mut c = Cursor::new(body);
    let kind = c.u8("kind").map_err(FrameError::Malformed)?;
    if !(KIND_WRITE..=KIND_READ_REPLY).contains(&kind) {
        return Err(FrameError::UnknownKind(kind));
    }
    decode_fields(kind, &mut c).map_err(FrameError::Malformed)
}

/// The fields after the kind byte; errors are the `Malformed` text.
fn decode_fields(kind: u8, c: &mut Cursor<'_>) -> Result<Message, String> {
    let id = c.u64("id")?;
    let msg = match kind {
        KIND_WRITE => Message::Write {
            id,
            key: c.bytes("key", KEY_BYTES_MAX)?,
            version: stamped(c)?,
        },
        KIND_WRITE_ACK => Message::WriteAck {
            id,
            result: match c.u8("status")? {
                STATUS_OK => Ok(Applied::Stored),
                STATUS_HOLDS_NEWER => Ok(Applied::HoldsNewer { ts: c.u64("ts")? }),
                other => Err(error(c, error_kind(other)?)?),
            },
        },
        KIND_READ => Message::Read {
            id,
            key: c.bytes("key", KEY_BYTES_MAX)?,
        },
        _ => Message::ReadReply {
            id,
            result: match status(c)? {
                None => match c.flag("found")? {
                    false => Ok(None),
                    true => Ok(Some(stamped(c)?)),
                },
                Some(kind) => Err(error(c, kind)?),
            },
        },
    };
    c.finish()?;
    Ok(msg)
}

/// A stamped value (FORMAT.md's `version`, "Body"): `ts`, `has_value`,
/// the deadline when it has one, and the value when it has one.
pub(crate) fn stamped(c: &mut Cursor<'_>) -> Result<Stamped, String> {
    let ts = c.u64("ts")?;
    let (deadline_ms, has_value) = match c.u8("has_value")? {
        VERSION_TOMBSTONE => (None, false),
        VERSION_VALUE => (None, true),
        VERSION_EXPIRING => {
            let deadline_ms = c.u64("deadline_ms")?;
            if deadline_ms > DEADLINE_MS_MAX {
                return Err(format!(
                    "deadline_ms: {deadline_ms} over the limit of {DEADLINE_MS_MAX}"
                ));
            }
            (Some(deadline_ms), true)
        }
        other => return Err(format!("has_value: {other} is not 0, 1 or 2")),
    };
    let value = match has_value {
        false => None,
        true => Some(c.bytes("value", VALUE_BYTES_MAX)?),
    };
    Ok(Stamped {
        ts,
        value,
        deadline_ms,
    })
}

/// The status byte of a `ReadReply`: `None` for ok, else the error's kind.
fn status(c: &mut Cursor<'_>) -> Result<Option<ReplicaErrorKind>, String> {
    match c.u8("status")? {
        STATUS_OK => Ok(None),
        other => error_kind(other).map(Some),
    }
}

/// The error kind of an error status byte.
fn error_kind(status: u8) -> Result<ReplicaErrorKind, String> {
    match status {
        STATUS_UNAVAILABLE => Ok(ReplicaErrorKind::Unavailable),
        STATUS_FAILED => Ok(ReplicaErrorKind::Failed),
        STATUS_INVALID => Ok(ReplicaErrorKind::Invalid),
        STATUS_STALE_LAYOUT => Ok(ReplicaErrorKind::StaleLayout),
        other => Err(format!("status: {other} is no known status")),
    }
}

fn error(c: &mut Cursor<'_>, kind: ReplicaErrorKind) -> Result<ReplicaError, String> {
    let message = c.string("message", ERROR_MESSAGE_BYTES_MAX)?;
    Ok(ReplicaError { kind, message })
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
