//! The consensus register's messages on the wire: a proposer's request to
//! an acceptor ([`Request`]: Prepare, Accept, Commit, Release) and the
//! acceptor's answer ([`Answer`]), framed like every peer frame
//! (`peer::framing`: length, CRC32C, body) with kind bytes of their own.
//!
//! Byte layout: `docs/FORMAT.md`, section "Register frame". The codec is
//! pure over bytes, so the fuzz target (`fuzz/fuzz_targets/register_frame.rs`)
//! and the tests call exactly what a connection will call. The decoder
//! checks every length against what is left of the body before slicing,
//! and every field against its bound: no input makes it panic or allocate
//! more than the frame it was given.
//!
//! It lives beside the register's rules rather than in `peer/` because its
//! fields are the rules' types (`peer` sits below `replication` in the
//! node's layering); it uses `peer`'s framing and error types.
//!
//! # Rules (what the decoder refuses, each as `Malformed` naming the field)
//! - a request whose ballot is [`Ballot::ZERO`]: no proposer uses it;
//! - a ballot whose node id is `hlc::NODES_MAX` or more;
//! - a key over `KEY_BYTES_MAX`, a value over `VALUE_BYTES_MAX`, an error
//!   message over `ERROR_MESSAGE_BYTES_MAX`;
//! - an unknown operation, answer or presence byte; bytes after the last field.

use super::acceptor::{Answer, Proposal, Request};
use super::ballot::Ballot;
use crate::cluster::layout::NodeId;
use crate::peer::frame::{ERROR_MESSAGE_BYTES_MAX, FrameError, ReplicaError, ReplicaErrorKind};
use crate::peer::framing::{self, Cursor, FramingError, put_bytes};
use ataman_engine::key::{KEY_BYTES_MAX, VALUE_BYTES_MAX};

/// Kind bytes of [`RegisterMessage::Ask`] and [`RegisterMessage::Reply`],
/// and the body bound ("Register frame"): defined with the peer frame's, so
/// the links and connections that carry both can tell them apart.
pub use crate::peer::frame::{KIND_REGISTER_ASK, KIND_REGISTER_REPLY, REGISTER_BODY_BYTES_MAX};

/// Operation byte of [`Request::Prepare`].
const OP_PREPARE: u8 = 1;
/// Operation byte of [`Request::Accept`].
const OP_ACCEPT: u8 = 2;
/// Operation byte of [`Request::Commit`].
const OP_COMMIT: u8 = 3;
/// Operation byte of [`Request::Release`].
const OP_RELEASE: u8 = 4;

/// Answer byte of "no answer" (a `Release` is acknowledged so).
const ANSWER_NONE: u8 = 0;
/// Answer byte of [`Answer::Promise`].
const ANSWER_PROMISE: u8 = 1;
/// Answer byte of [`Answer::Accepted`].
const ANSWER_ACCEPTED: u8 = 2;
/// Answer byte of [`Answer::Committed`].
const ANSWER_COMMITTED: u8 = 3;
/// Answer byte of [`Answer::Refused`].
const ANSWER_REFUSED: u8 = 4;

/// Status byte of an answer the acceptor gave (then an answer byte follows).
const STATUS_OK: u8 = 0;
/// Status bytes of the errors, as in the peer frame ("Body").
const STATUS_UNAVAILABLE: u8 = 1;
const STATUS_FAILED: u8 = 2;
const STATUS_INVALID: u8 = 3;
const STATUS_STALE_LAYOUT: u8 = 5;

/// One register message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterMessage {
    /// A proposer's request about `key`.
    Ask {
        /// Request id, echoed by the reply.
        id: u64,
        /// The key, at most `KEY_BYTES_MAX` bytes.
        key: Vec<u8>,
        /// Prepare, Accept, Commit or Release.
        request: Request,
    },
    /// The acceptor's reply to Ask `id`, sent once its state is durable.
    Reply {
        /// The id of the Ask answered.
        id: u64,
        /// The acceptor's answer (none: a Release's acknowledgement), or
        /// why it did not take the request.
        result: Result<Option<Answer>, ReplicaError>,
    },
}

/// Appends one frame holding `msg` to `out`. Never fails: the caller keeps
/// the bounds (debug-asserted here, checked by [`decode`]).
pub fn encode(msg: &RegisterMessage, out: &mut Vec<u8>) {
    let start = framing::begin(out);
    match msg {
        RegisterMessage::Ask { id, key, request } => {
            out.push(KIND_REGISTER_ASK);
            out.extend_from_slice(&id.to_le_bytes());
            debug_assert!(key.len() <= KEY_BYTES_MAX, "key over KEY_BYTES_MAX");
            put_bytes(out, key);
            put_request(out, request);
        }
        RegisterMessage::Reply { id, result } => {
            out.push(KIND_REGISTER_REPLY);
            out.extend_from_slice(&id.to_le_bytes());
            match result {
                Ok(answer) => {
                    out.push(STATUS_OK);
                    put_answer(out, answer.as_ref());
                }
                Err(e) => put_error(out, e),
            }
        }
    }
    framing::seal(out, start, REGISTER_BODY_BYTES_MAX);
}

fn put_request(out: &mut Vec<u8>, request: &Request) {
    match request {
        Request::Prepare(b) => {
            out.push(OP_PREPARE);
            put_ballot(out, *b);
        }
        Request::Accept(p) => {
            out.push(OP_ACCEPT);
            put_proposal(out, p);
        }
        Request::Commit(p) => {
            out.push(OP_COMMIT);
            put_proposal(out, p);
        }
        Request::Release(b) => {
            out.push(OP_RELEASE);
            put_ballot(out, *b);
        }
    }
}

fn put_answer(out: &mut Vec<u8>, answer: Option<&Answer>) {
    match answer {
        None => out.push(ANSWER_NONE),
        Some(Answer::Promise {
            ballot,
            accepted,
            committed,
        }) => {
            out.push(ANSWER_PROMISE);
            put_ballot(out, *ballot);
            put_optional(out, accepted.as_ref());
            put_optional(out, committed.as_ref());
        }
        Some(Answer::Accepted(b)) => {
            out.push(ANSWER_ACCEPTED);
            put_ballot(out, *b);
        }
        Some(Answer::Committed(b)) => {
            out.push(ANSWER_COMMITTED);
            put_ballot(out, *b);
        }
        Some(Answer::Refused { ballot, floor }) => {
            out.push(ANSWER_REFUSED);
            put_ballot(out, *ballot);
            put_ballot(out, *floor);
        }
    }
}

/// `time: u64 LE | node: u16 LE`.
fn put_ballot(out: &mut Vec<u8>, b: Ballot) {
    out.extend_from_slice(&b.time.to_le_bytes());
    out.extend_from_slice(&b.node.to_le_bytes());
}

/// `ballot | has_value: u8 | value (u32 len + bytes) when 1 or 2 |
/// deadline_ms: u64 LE when 2` (`record::put_value`).
fn put_proposal(out: &mut Vec<u8>, p: &Proposal) {
    put_ballot(out, p.ballot);
    debug_assert!(
        p.value.as_ref().is_none_or(|v| v.len() <= VALUE_BYTES_MAX),
        "value over VALUE_BYTES_MAX"
    );
    super::record::put_value(out, p);
}

/// `present: u8 | proposal when present = 1`.
fn put_optional(out: &mut Vec<u8>, p: Option<&Proposal>) {
    match p {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            put_proposal(out, p);
        }
    }
}

fn put_error(out: &mut Vec<u8>, e: &ReplicaError) {
    debug_assert!(e.message.len() <= ERROR_MESSAGE_BYTES_MAX);
    out.push(match e.kind {
        ReplicaErrorKind::Unavailable => STATUS_UNAVAILABLE,
        ReplicaErrorKind::Failed => STATUS_FAILED,
        ReplicaErrorKind::Invalid => STATUS_INVALID,
        ReplicaErrorKind::StaleLayout => STATUS_STALE_LAYOUT,
    });
    put_bytes(out, e.message.as_bytes());
}

/// Decodes the first frame in `buf`: `Ok(None)` while incomplete,
/// `Ok(Some((msg, consumed)))` once the first `consumed` bytes were one
/// frame. An error is fatal for the connection; a header announcing a body
/// over [`REGISTER_BODY_BYTES_MAX`] is refused as soon as it is in.
pub fn decode(buf: &[u8]) -> Result<Option<(RegisterMessage, usize)>, FrameError> {
    let (body, frame_bytes) = match framing::split(buf, REGISTER_BODY_BYTES_MAX) {
        Ok(Some(frame)) => frame,
        Ok(None) => return Ok(None),
        Err(FramingError::TooLarge { len, max }) => return Err(FrameError::TooLarge { len, max }),
        Err(FramingError::ChecksumMismatch { expected, found }) => {
            return Err(FrameError::ChecksumMismatch { expected, found });
        }
    };
    let mut c = Cursor::new(body);
    let kind = c.u8("kind").map_err(FrameError::Malformed)?;
    if kind != KIND_REGISTER_ASK && kind != KIND_REGISTER_REPLY {
        return Err(FrameError::UnknownKind(kind));
    }
    let msg = decode_fields(kind, &mut c).map_err(FrameError::Malformed)?;
    Ok(Some((msg, frame_bytes)))
}

fn decode_fields(kind: u8, c: &mut Cursor<'_>) -> Result<RegisterMessage, String> {
    let id = c.u64("id")?;
    let msg = if kind == KIND_REGISTER_ASK {
        RegisterMessage::Ask {
            id,
            key: c.bytes("key", KEY_BYTES_MAX)?,
            request: request(c)?,
        }
    } else {
        let result = match c.u8("status")? {
            STATUS_OK => Ok(answer(c)?),
            other => Err(error(c, other)?),
        };
        RegisterMessage::Reply { id, result }
    };
    c.finish()?;
    Ok(msg)
}

fn request(c: &mut Cursor<'_>) -> Result<Request, String> {
    let op = c.u8("op")?;
    let request = match op {
        OP_PREPARE => Request::Prepare(ballot(c)?),
        OP_ACCEPT => Request::Accept(proposal(c)?),
        OP_COMMIT => Request::Commit(proposal(c)?),
        OP_RELEASE => Request::Release(ballot(c)?),
        other => return Err(format!("op: {other} is not 1 to 4")),
    };
    let b = match &request {
        Request::Prepare(b) | Request::Release(b) => *b,
        Request::Accept(p) | Request::Commit(p) => p.ballot,
    };
    if b == Ballot::ZERO {
        return Err("ballot: zero is no proposer's ballot".to_owned());
    }
    Ok(request)
}

fn answer(c: &mut Cursor<'_>) -> Result<Option<Answer>, String> {
    Ok(Some(match c.u8("answer")? {
        ANSWER_NONE => return Ok(None),
        ANSWER_PROMISE => Answer::Promise {
            ballot: ballot(c)?,
            accepted: optional(c, "accepted")?,
            committed: optional(c, "committed")?,
        },
        ANSWER_ACCEPTED => Answer::Accepted(ballot(c)?),
        ANSWER_COMMITTED => Answer::Committed(ballot(c)?),
        ANSWER_REFUSED => Answer::Refused {
            ballot: ballot(c)?,
            floor: ballot(c)?,
        },
        other => return Err(format!("answer: {other} is not 0 to 4")),
    }))
}

fn ballot(c: &mut Cursor<'_>) -> Result<Ballot, String> {
    let time = c.u64("ballot time")?;
    let raw = c.take(2, "ballot node")?;
    let node = NodeId::from_le_bytes([raw[0], raw[1]]);
    if usize::from(node) >= crate::hlc::NODES_MAX {
        return Err(format!(
            "ballot node: {node} is not below {}",
            crate::hlc::NODES_MAX
        ));
    }
    Ok(Ballot { time, node })
}

fn proposal(c: &mut Cursor<'_>) -> Result<Proposal, String> {
    let ballot = ballot(c)?;
    let (value, deadline_ms) = super::record::value(c)?;
    Ok(Proposal {
        ballot,
        value,
        deadline_ms,
    })
}

fn optional(c: &mut Cursor<'_>, field: &str) -> Result<Option<Proposal>, String> {
    match c.u8(field)? {
        0 => Ok(None),
        1 => Ok(Some(proposal(c)?)),
        other => Err(format!("{field}: {other} is not 0 or 1")),
    }
}

fn error(c: &mut Cursor<'_>, status: u8) -> Result<ReplicaError, String> {
    let kind = match status {
        STATUS_UNAVAILABLE => ReplicaErrorKind::Unavailable,
        STATUS_FAILED => ReplicaErrorKind::Failed,
        STATUS_INVALID => ReplicaErrorKind::Invalid,
        STATUS_STALE_LAYOUT => ReplicaErrorKind::StaleLayout,
        other => return Err(format!("status: {other} is no known status")),
    };
    let message = c.string("message", ERROR_MESSAGE_BYTES_MAX)?;
    Ok(ReplicaError { kind, message })
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
