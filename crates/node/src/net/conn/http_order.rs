//! HTTP read-your-writes on one connection (docs/API.md "HTTP
//! behaviour"): a pipelined request is not served while an earlier write
//! of the same connection has no reply, so a `GET` right behind a `PUT`
//! of its key reads that `PUT`. RESP's rule is the same
//! (`conn/resp_side.rs`, `net/resp/write_kind.rs`).
//!
//! Why it is needed: the writes a network thread parses in one loop
//! iteration are handed to the engine (or the coordinator) together at
//! its end, while a local read is answered at once, from before them.
//!
//! # Rules (pure: what is owed before, and the next request, in; a verdict out)
//! 1. With no earlier write owed, the next request is served.
//! 2. A plain write (`PUT` or `DELETE` of `/v0/entity` without
//!    `If-Match` / `If-None-Match`) is served behind earlier plain writes:
//!    it reads nothing, and the clock stamps it after them, so writes in a
//!    row still reach the engine in one hand-off.
//! 3. Anything else (a read, a conditional request, any other endpoint)
//!    waits while an earlier write is owed; and every request waits while
//!    an earlier conditional write is owed (it reads the key, and stamps
//!    its write only once its read is back: a later plain write must not
//!    be stamped before it).
//!
//! The connection stops parsing at the first request that waits (answers
//! stay in request order anyway) and resumes when a write's reply comes
//! in (`Conn::parse_resumable`).

use super::{Conn, Slot};
use crate::api::Action;
use crate::net::answer::Awaited;
use crate::state::NetContext;

/// An earlier request of the connection whose reply is not in yet, as
/// the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owed {
    /// Not a write (a read, a range, a status …).
    Other,
    /// A plain `PUT` or `DELETE`.
    PlainWrite,
    /// A conditional `PUT` or `DELETE` (a read, then its write).
    ConditionalWrite,
}

/// The request about to be served, as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A plain `PUT` or `DELETE`.
    PlainWrite,
    /// Anything else.
    Other,
}

impl Next {
    /// What `action` is, for the rules.
    pub fn of(action: &Action) -> Next {
        match action {
            Action::Put {
                preconditions: None,
                ..
            }
            | Action::Delete {
                preconditions: None,
                ..
            } => Next::PlainWrite,
            _ => Next::Other,
        }
    }
}

/// True when `next` may be served now, behind the replies `owed` (the
/// "Rules").
pub fn may_serve(next: Next, owed: impl IntoIterator<Item = Owed>) -> bool {
    owed.into_iter().all(|o| match o {
        Owed::Other => true,
        Owed::PlainWrite => next == Next::PlainWrite,
        Owed::ConditionalWrite => false,
    })
}

impl Conn {
    /// What the slots still owe, for the rules (HTTP connections).
    fn http_owed(&self) -> impl Iterator<Item = Owed> + '_ {
        self.slots.iter().map(|slot| match slot {
            Slot::Waiting {
                awaited: Awaited::Put(_) | Awaited::Delete(_),
                ..
            } => Owed::PlainWrite,
            Slot::Conditional(waiting) if waiting.is_write() => Owed::ConditionalWrite,
            _ => Owed::Other,
        })
    }

    /// True when the HTTP request of `action` may be served now.
    pub(super) fn http_may_serve(&self, ctx: &NetContext, action: &Action) -> bool {
        let planted = crate::config::PlantedBug::HttpReadsSkipPendingWrites;
        if ctx.shared.config.planted_bug == Some(planted) {
            return true;
        }
        self.slots.is_empty() || may_serve(Next::of(action), self.http_owed())
    }

    /// True while an HTTP connection owes a write's reply (a request
    /// stopped by the rules may be served after it).
    pub(super) fn http_waits_for_writes(&self) -> bool {
        self.resp.is_none() && self.http_owed().any(|o| o != Owed::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Owed::{ConditionalWrite, Other, PlainWrite};

    /// Each rule, and the order of what is owed not mattering.
    #[test]
    fn a_request_waits_only_for_the_writes_it_could_miss() {
        for next in [Next::PlainWrite, Next::Other] {
            assert!(may_serve(next, []), "rule 1: {next:?}");
            assert!(may_serve(next, [Other, Other]), "rule 1: {next:?}");
            assert!(!may_serve(next, [Other, ConditionalWrite]), "rule 3");
            assert!(!may_serve(next, [ConditionalWrite, PlainWrite]), "rule 3");
        }
        assert!(may_serve(Next::PlainWrite, [PlainWrite, Other]), "rule 2");
        assert!(!may_serve(Next::Other, [Other, PlainWrite]), "rule 3");
        assert!(!may_serve(Next::Other, [PlainWrite]), "rule 3");
    }

    /// Which actions are plain writes.
    #[test]
    fn only_unconditional_puts_and_deletes_are_plain_writes() {
        let put = |preconditions| Action::Put {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            ttl_ms: None,
            preconditions,
        };
        assert_eq!(Next::of(&put(None)), Next::PlainWrite);
        let conditional = Some(Box::default());
        assert_eq!(Next::of(&put(conditional)), Next::Other);
        let delete = Action::Delete {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            preconditions: None,
        };
        assert_eq!(Next::of(&delete), Next::PlainWrite);
        let get = Action::Get {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            preconditions: None,
        };
        assert_eq!(Next::of(&get), Next::Other);
    }
}
