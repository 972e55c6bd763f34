//! A pending HTTP request's chunked body (`Transfer-Encoding: chunked`,
//! `crate::http::chunked`), fed from the read buffer as it arrives.
//!
//! Unlike a `Content-Length` body, which stays in the read buffer until it
//! is whole and is lent to the request, a chunked body is decoded into its
//! own buffer and its bytes are consumed at once: the read buffer stays
//! small whatever the chunking's overhead, and the body is bounded by the
//! value limit like any other (413 past it, 400 when malformed; both
//! close the connection).

use super::Conn;
use crate::http::response::Persist;
use crate::state::NetContext;

/// Where a pending request's body stands after a read.
pub(super) enum BodyStep {
    /// Not chunked: the `Content-Length` path decides.
    NotChunked,
    /// Chunked and not complete: wait for more bytes.
    Wait,
    /// Chunked and complete: the body.
    Ready(Vec<u8>),
    /// Refused and answered; the connection closes.
    Refused,
}

impl Conn {
    /// Feeds the pending request's chunked body the bytes of `buf` after
    /// its head (if still in `buf`), adding what it consumed to `consumed`.
    pub(super) fn chunked_step(
        &mut self,
        ctx: &NetContext,
        buf: &[u8],
        consumed: &mut usize,
    ) -> BodyStep {
        let Some(pending) = self.pending.as_mut() else {
            return BodyStep::NotChunked;
        };
        let Some(body) = pending.chunked.as_mut() else {
            return BodyStep::NotChunked;
        };
        let start = pending.head.head_bytes.min(buf.len());
        match body.feed(&buf[start..]) {
            Ok((used, done)) => {
                *consumed += start + used;
                pending.head.head_bytes = 0;
                match done {
                    Some(body) => BodyStep::Ready(body),
                    None => BodyStep::Wait,
                }
            }
            Err(e) => {
                let (route, allow, started) = (pending.route, pending.head.allow, pending.started);
                self.pending = None;
                self.push_error(ctx, route, &e.to_http(), Persist::Close, allow, started);
                self.close_after = true;
                BodyStep::Refused
            }
        }
    }
}
