//! Every answer the node gives, whatever protocol carries it, and the pure
//! rules that map each outcome to one: a local read, a local write's
//! completion, a coordinator's verdict, a refusal at a limit.
//!
//! No socket and no protocol here: the HTTP renderer ([`super::render`])
//! turns an [`Answer`] into a status, headers and a body, in one place;
//! another protocol would add its own renderer of the same answers.

use crate::replication::coordinator::Decision;

/// What an answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A key's value and its version's timestamp (`X-Ataman-Version`).
    Value(Vec<u8>, u64),
    /// A key's value and its deadline in Unix milliseconds (`None`: it
    /// never expires): the answer to a read that asked for the version
    /// ([`Awaited::ReadVersion`]; RESP's `TTL`, `PTTL`).
    ValueUntil(Vec<u8>, Option<u64>),
    /// The key has no value (absent, or its newest version is a tombstone
    /// or expired): that version's timestamp, `None` when there is none.
    NotFound(Option<u64>),
    /// A request handed on is done (a write is durable).
    Done(Awaited),
    /// A document the node rendered.
    Document(Format, String),
    /// Work was started in the background (a repair round): its JSON.
    Started(String),
    /// Refused or failed: the reason, and one line for the client.
    Failed(Failure, String),
    /// A conditional read's `If-None-Match` named the version it found
    /// (`crate::http::conditional`): its timestamp, and no value.
    NotModified(u64),
    /// A request's precondition failed (`crate::http::conditional`),
    /// nothing written: the key's current version (`None`: no value).
    PreconditionFailed(Option<u64>),
}

/// What a request handed to the engine or a coordinator waits for: what
/// its answer says when it succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited {
    /// A replicated read's verdict.
    Read,
    /// A replicated read's verdict, the value's deadline included.
    ReadVersion,
    /// A put made durable, under this timestamp (a replicated write's
    /// verdict names the timestamp it was last stamped with).
    Put(u64),
    /// A delete made durable, under this timestamp (as for `Put`).
    Delete(u64),
}

impl Awaited {
    /// The same, a write's timestamp replaced by `ts` (a read unchanged).
    pub fn at(self, ts: u64) -> Awaited {
        match self {
            Awaited::Put(_) => Awaited::Put(ts),
            Awaited::Delete(_) => Awaited::Delete(ts),
            read => read,
        }
    }

    /// The version this answer names (`X-Ataman-Version`): a write's
    /// timestamp; none for a read (its answer carries its own).
    pub fn version(self) -> Option<u64> {
        match self {
            Awaited::Put(ts) | Awaited::Delete(ts) => Some(ts),
            Awaited::Read | Awaited::ReadVersion => None,
        }
    }
}

/// How a document is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One line of text (`/v0/status`).
    Line,
    /// JSON (`/v0/cluster`, `/v0/repair`).
    Json,
    /// The Prometheus text format (`/metrics`).
    Metrics,
    /// One of the dashboard's files (`/ui`), with its type and headers.
    Asset(crate::ui::Asset),
}

/// Why a request is refused or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The request is malformed or invalid (400).
    Invalid,
    /// No credential, or an unknown one (401, with `WWW-Authenticate: Bearer`).
    Unauthenticated,
    /// A credential whose role is too weak for the request (403).
    Forbidden,
    /// The method is not one the target allows (405); the allowed ones.
    NotAllowed(&'static str),
    /// The request did not arrive in time (408).
    TimedOut,
    /// The request conflicts with the node's state (409).
    Conflict,
    /// A feature of the request the node does not implement (501): a
    /// transfer coding other than `chunked`.
    NotImplemented,
    /// The value or body is over its limit (413).
    TooLarge,
    /// The key or target is over its limit (414).
    TooLong,
    /// An expectation the node does not meet (417).
    Unmet,
    /// The request head is over its limit (431).
    HeadTooLarge,
    /// The engine failed (500).
    Internal,
    /// The node cannot take it now; the client may retry in a second (503).
    Busy,
    /// Not enough replicas answered in time (504).
    NotEnoughReplicas,
    /// The disk or quota is full; writes are refused until a restart (507).
    DiskFull,
}

/// A local read's answer.
pub fn read(result: ataman_engine::Result<Option<ataman_engine::Entry>>) -> Answer {
    match result {
        Ok(Some(ataman_engine::Entry {
            value: Some(value),
            ts,
            ..
        })) => Answer::Value(value, ts),
        // Deleted (the newest version is a tombstone).
        Ok(Some(entry)) => Answer::NotFound(Some(entry.ts)),
        Ok(None) => Answer::NotFound(None),
        Err(e) => Answer::Failed(Failure::Internal, format!("read failed: {e}")),
    }
}

/// A local read of `key`'s answer, its value copied from the engine's
/// memory into `spare`'s buffer (no allocation once the thread has one:
/// [`crate::value_spare`]). The same answer as [`read`] of `Db::get`;
/// [`give_back`] returns the buffer once the answer is rendered.
pub fn read_lent(
    db: &ataman_engine::Db,
    key: &[u8],
    spare: &crate::value_spare::ValueSpare,
) -> Answer {
    let read = db.get_with(key, |found| match found {
        Some(ataman_engine::EntryRef {
            value: Some(value),
            ts,
            ..
        }) => Answer::Value(spare.copy_of(value), ts),
        Some(entry) => Answer::NotFound(Some(entry.ts)),
        None => Answer::NotFound(None),
    });
    read.unwrap_or_else(|e| Answer::Failed(Failure::Internal, format!("read failed: {e}")))
}

/// Gives a rendered answer's value buffer back to `spare` for the next
/// local GET (any other answer is dropped).
pub fn give_back(answer: Answer, spare: &crate::value_spare::ValueSpare) {
    if let Answer::Value(buffer, _) = answer {
        spare.keep(buffer);
    }
}

/// A local read's answer with the value's deadline ([`Answer::ValueUntil`]).
pub fn read_version(result: ataman_engine::Result<Option<ataman_engine::Entry>>) -> Answer {
    match result {
        Ok(Some(ataman_engine::Entry {
            value: Some(value),
            deadline_ms,
            ..
        })) => Answer::ValueUntil(value, deadline_ms),
        // Deleted (the newest version is a tombstone).
        Ok(Some(entry)) => Answer::NotFound(Some(entry.ts)),
        Ok(None) => Answer::NotFound(None),
        Err(e) => Answer::Failed(Failure::Internal, format!("read failed: {e}")),
    }
}

/// A range whose scan could not start.
pub fn scan_failed(e: &ataman_engine::Error) -> Answer {
    Answer::Failed(Failure::Internal, format!("scan failed: {e}"))
}

/// A refusal the client may retry in a second (anti-entropy busy, a
/// refilling node's read, a clock that cannot stamp).
pub fn busy(reason: impl Into<String>) -> Answer {
    Answer::Failed(Failure::Busy, reason.into())
}

/// A local write's completion: `invalid` when the engine refused the batch
/// as invalid, `out_of_space` when the engine refuses writes for a full
/// disk or quota (docs/API.md, "Errors").
pub fn written(
    awaited: Awaited,
    result: Result<(), String>,
    invalid: bool,
    out_of_space: bool,
) -> Answer {
    match result {
        Ok(()) => Answer::Done(awaited),
        Err(reason) if invalid => {
            Answer::Failed(Failure::Invalid, format!("write refused: {reason}"))
        }
        Err(reason) if out_of_space => Answer::Failed(
            Failure::DiskFull,
            format!("write failed: disk full: {reason}"),
        ),
        Err(reason) => busy(format!("write failed: {reason}")),
    }
}

/// A replicated request's verdict (`Err`: refused before it started).
pub fn decided(awaited: Awaited, verdict: Result<Decision, String>) -> Answer {
    match verdict {
        Ok(Decision::Written { ts }) => Answer::Done(awaited.at(ts)),
        // A value whose deadline has passed on this node's clock too is
        // gone, whatever a replica with a slower clock answered.
        Ok(Decision::Read(Some(crate::peer::frame::Stamped {
            value: Some(value),
            deadline_ms,
            ts,
        }))) if deadline_ms.is_none_or(|d| crate::hlc::wall_ms() < d) => match awaited {
            Awaited::ReadVersion => Answer::ValueUntil(value, deadline_ms),
            _ => Answer::Value(value, ts),
        },
        // A tombstone, or a value expired here: absent, at that version.
        Ok(Decision::Read(version)) => Answer::NotFound(version.map(|v| v.ts)),
        // The replicator re-stamps and never hands this on.
        Ok(Decision::Restamp { .. }) => Answer::Failed(
            Failure::NotEnoughReplicas,
            "internal error: a re-stamp reached the client".into(),
        ),
        Ok(Decision::Failed(reason)) => Answer::Failed(
            Failure::NotEnoughReplicas,
            format!("not enough replicas: {reason}"),
        ),
        Err(reason) => busy(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::frame::Stamped;

    #[test]
    fn a_local_read_is_its_value_or_not_found_or_internal() {
        let entry = |value: Option<&[u8]>| ataman_engine::Entry {
            ts: 1,
            value: value.map(<[u8]>::to_vec),
            deadline_ms: None,
        };
        assert_eq!(
            read(Ok(Some(entry(Some(b"v"))))),
            Answer::Value(b"v".to_vec(), 1)
        );
        assert_eq!(read(Ok(Some(entry(None)))), Answer::NotFound(Some(1)));
        assert_eq!(read(Ok(None)), Answer::NotFound(None));
        let failed = read(Err(ataman_engine::Error::Closed));
        assert!(
            matches!(failed, Answer::Failed(Failure::Internal, _)),
            "{failed:?}"
        );
    }

    #[test]
    fn a_write_completion_is_done_invalid_disk_full_or_busy() {
        let failed = || Err("no".to_string());
        assert_eq!(
            written(Awaited::Put(7), Ok(()), false, false),
            Answer::Done(Awaited::Put(7))
        );
        // Invalid wins over a full disk: the batch itself was refused.
        assert_eq!(
            written(Awaited::Put(7), failed(), true, true),
            Answer::Failed(Failure::Invalid, "write refused: no".into())
        );
        assert_eq!(
            written(Awaited::Delete(7), failed(), false, true),
            Answer::Failed(Failure::DiskFull, "write failed: disk full: no".into())
        );
        assert_eq!(
            written(Awaited::Put(7), failed(), false, false),
            Answer::Failed(Failure::Busy, "write failed: no".into())
        );
    }

    #[test]
    fn a_verdict_is_done_value_not_found_not_enough_replicas_or_busy() {
        assert_eq!(
            decided(Awaited::Delete(7), Ok(Decision::Written { ts: 8 })),
            Answer::Done(Awaited::Delete(8))
        );
        let newest = Stamped {
            ts: 3,
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        };
        assert_eq!(
            decided(Awaited::Read, Ok(Decision::Read(Some(newest)))),
            Answer::Value(b"v".to_vec(), 3)
        );
        let tombstone = Stamped::tombstone(4);
        assert_eq!(
            decided(Awaited::Read, Ok(Decision::Read(Some(tombstone)))),
            Answer::NotFound(Some(4))
        );
        let expired = Stamped {
            ts: 5,
            value: Some(b"v".to_vec()),
            deadline_ms: Some(1),
        };
        assert_eq!(
            decided(Awaited::Read, Ok(Decision::Read(Some(expired)))),
            Answer::NotFound(Some(5))
        );
        assert_eq!(
            decided(Awaited::Read, Ok(Decision::Read(None))),
            Answer::NotFound(None)
        );
        assert_eq!(
            decided(Awaited::Put(7), Ok(Decision::Failed("1 of 2".into()))),
            Answer::Failed(
                Failure::NotEnoughReplicas,
                "not enough replicas: 1 of 2".into()
            )
        );
        assert!(matches!(
            decided(Awaited::Put(7), Ok(Decision::Restamp { above: 9 })),
            Answer::Failed(Failure::NotEnoughReplicas, _)
        ));
        assert_eq!(
            decided(Awaited::Put(7), Err("full".into())),
            Answer::Failed(Failure::Busy, "full".into())
        );
    }
}
