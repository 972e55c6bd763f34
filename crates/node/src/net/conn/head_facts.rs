//! What a connection keeps of a parsed request head until its body is
//! in: the few facts it needs past parsing (the head itself borrows the
//! read buffer).

use crate::api::allow_for;
use crate::http::request::RequestHead;
use crate::http::response::Persist;

/// What a connection keeps of a parsed request head until its body is in
/// (the head itself borrows the read buffer).
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadFacts {
    /// Bytes of the head, including the blank line.
    pub(super) head_bytes: usize,
    /// Body bytes that follow the head.
    pub(super) content_length: u64,
    /// The client waits for `100 Continue` before sending the body.
    pub(super) expect_continue: bool,
    /// How the connection continues after the answer.
    pub(super) persist: Persist,
    /// The `Allow` header of a 405 for the request's path.
    pub(super) allow: &'static str,
    /// A connecting peer's layout version (`X-Ataman-Layout`).
    pub(super) layout_version: Option<u64>,
}

impl HeadFacts {
    pub(super) fn of(head: &RequestHead<'_>) -> Self {
        HeadFacts {
            head_bytes: head.head_bytes,
            content_length: head.content_length,
            expect_continue: head.expect_continue,
            persist: persist_for(head),
            allow: allow_for(head.path),
            layout_version: head.layout_version,
        }
    }
}

/// How the connection continues after the answer to `head`.
fn persist_for(head: &RequestHead<'_>) -> Persist {
    match (head.keep_alive, head.minor_version) {
        (false, _) => Persist::Close,
        (true, 0) => Persist::KeepAlive10,
        (true, _) => Persist::Default,
    }
}
