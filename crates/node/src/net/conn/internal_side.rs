//! The internal endpoints' side of a connection: the peer gate of an
//! upgrade and of an internal endpoint, the 101 that switches, a cluster range fed by its range thread
//! (`crate::range::feed`) moved to the output in slot order, and a layout
//! request's whole answer from its layout worker.

use super::{Conn, STREAM_BUFFER_BYTES, Slot, Upgrade};
use crate::api::{Action, Route};
use crate::http::Status;
use crate::http::request::HttpError;
use crate::http::response::{Persist, strip_body, write_chunked_head, write_last_chunk};
use crate::net::answer::{self, Answer};
use crate::net::auth_gate::{Credential, Verdict, upgrade};
use crate::net::render::render;
use crate::state::NetContext;
use std::time::Instant;

/// The protocol a peer's proof for an internal endpoint is bound to, one
/// per endpoint (a proof for one cannot open another); `""` for any other
/// action (never asked: only internal actions pass the peer gate).
pub(super) fn peer_protocol(action: &Action) -> &'static str {
    match action {
        Action::InternalRange { .. } => crate::range::peer_auth::RANGE_PROTOCOL,
        Action::InternalLayout => crate::cluster::agreement_wire::LAYOUT_PROTOCOL,
        Action::InternalHotKeys => crate::net::hotkeys::HOTKEYS_PROTOCOL,
        Action::InternalRecent => crate::net::recent::RECENT_PROTOCOL,
        Action::InternalSlowlog { .. } => crate::net::slowlog_cluster::SLOWLOG_PROTOCOL,
        _ => "",
    }
}

impl Conn {
    /// The peer handshake's verdict on an upgrade to `protocol`
    /// (`net::auth_gate::upgrade`): the 101 to send, or `None` when a
    /// challenge or a refusal was queued instead.
    pub(super) fn peer_gate(
        &mut self,
        ctx: &NetContext,
        route: Route,
        started: Instant,
        protocol: &str,
        credential: &Credential,
    ) -> Option<Vec<u8>> {
        let stream = &self.stream;
        let remote = || {
            stream
                .peer_addr()
                .map_or_else(|_| "?".into(), |a| a.to_string())
        };
        let auth = &ctx.shared.auth;
        let access = crate::net::auth_gate::access(ctx);
        match upgrade(
            auth,
            access,
            protocol,
            &mut self.peer_nonce,
            credential,
            &remote,
        ) {
            Verdict::Switch(response) => Some(response),
            Verdict::Answer(bytes, status, close) => {
                self.close_after |= close;
                ctx.shared.metrics.record(route, status, started);
                self.answer(|out| out.extend_from_slice(&bytes));
                None
            }
        }
    }

    /// Queues the 101 of an upgrade; once it is out the connection switches.
    pub(super) fn push_upgrade(
        &mut self,
        ctx: &NetContext,
        route: Route,
        started: Instant,
        response: Vec<u8>,
        upgrade: Upgrade,
    ) {
        ctx.shared
            .metrics
            .record(route, Status::SwitchingProtocols, started);
        self.push_slot(Slot::Ready(response));
        self.upgrading = Some(upgrade);
    }

    /// An internal endpoint is a peer's: a CA-verified certificate
    /// (`--tls-ca`) or the secret's proof bound to `protocol` (the
    /// range's: [`RANGE_PROTOCOL`]) opens it, a client token never does.
    /// False when a challenge or refusal was queued.
    ///
    /// [`RANGE_PROTOCOL`]: crate::range::peer_auth::RANGE_PROTOCOL
    pub(super) fn range_gate(
        &mut self,
        ctx: &NetContext,
        route: Route,
        started: Instant,
        credential: &Credential,
        protocol: &str,
    ) -> bool {
        let tls = ctx.shared.tls.as_ref();
        if tls.is_some_and(|t| t.verifies_peers()) && self.stream.peer_verified() {
            return true;
        }
        if ctx.shared.auth.secret.is_none()
            && let Some(why) = crate::tls::refuse_upgrade(tls, &self.stream)
        {
            ctx.shared
                .auth
                .metrics
                .peer_refused(crate::auth::metrics::PeerRefusal::NoCertificate);
            self.close_after = true;
            let e = HttpError::close(Status::Forbidden, why);
            self.push_error(ctx, route, &e, Persist::Close, "", started);
            return false;
        }
        // The upgrade's gate, its 101 unused: the range answers instead.
        self.peer_gate(ctx, route, started, protocol, credential)
            .is_some()
    }

    /// Moves what the front slot's range thread queued to the output
    /// buffer; `true` when the answer is complete (the slot is gone).
    pub(super) fn fill_from_feed(&mut self, ctx: &NetContext) -> bool {
        let head_only = self.heads.is_head(self.base_slot);
        let Some(Slot::Feed {
            feed,
            head_written,
            starved,
            persist,
            started,
        }) = self.slots.front_mut()
        else {
            return false;
        };
        let (persist, started) = (*persist, *started);
        while self.out.len() - self.out_pos < STREAM_BUFFER_BYTES {
            let Some(item) = feed.poll() else {
                *starved = true;
                return false;
            };
            *starved = false;
            if !matches!(item, crate::range::Feed::Refused(_)) && !*head_written {
                write_chunked_head(
                    &mut self.out,
                    Status::Ok,
                    "application/octet-stream",
                    persist,
                );
                *head_written = true;
            }
            match item {
                crate::range::Feed::Refused(reason) => {
                    self.pop_slot();
                    let answer = Answer::Failed(answer::Failure::NotEnoughReplicas, reason);
                    let start = self.out.len();
                    let status = render(&mut self.out, &answer, persist);
                    if head_only {
                        strip_body(&mut self.out, start);
                    }
                    ctx.shared.metrics.record(Route::Entities, status, started);
                    return true;
                }
                // A HEAD's answer is the head: the entries are read and dropped.
                crate::range::Feed::Bytes(_) if head_only => {}
                crate::range::Feed::Bytes(bytes) => self.out.extend_from_slice(&bytes),
                crate::range::Feed::Done => {
                    if !head_only {
                        write_last_chunk(&mut self.out);
                    }
                    ctx.shared
                        .metrics
                        .record(Route::Entities, Status::Ok, started);
                    self.pop_slot();
                    return true;
                }
                crate::range::Feed::Failed => {
                    // As for a local scan's failure: cut without the last chunk.
                    self.close_after = true;
                    self.slots.clear();
                    return false;
                }
            }
        }
        false
    }

    /// Replaces the front layout job's slot with its answer once the job
    /// is done; `true` when it was.
    pub(super) fn fill_from_job(&mut self, ctx: &NetContext) -> bool {
        let head_only = self.heads.is_head(self.base_slot);
        let Some(Slot::Job {
            job,
            route,
            persist,
            started,
        }) = self.slots.front()
        else {
            return false;
        };
        let Some(result) = job.poll() else {
            return false;
        };
        let (route, persist, started) = (*route, *persist, *started);
        let answer = result.unwrap_or_else(|| crate::layout_io::endpoints::JobAnswer {
            status: Status::InternalError,
            content_type: crate::layout_io::endpoints::TEXT_CONTENT_TYPE,
            body: b"the layout request's worker ended without an answer\n".to_vec(),
        });
        let mut bytes = Vec::new();
        let extra = crate::http::response::Extra {
            content_type: Some(answer.content_type),
            retry_after_sec: (answer.status == Status::Unavailable)
                .then_some(crate::net::render::RETRY_AFTER_SEC),
            ..Default::default()
        };
        crate::http::response::write_full(&mut bytes, answer.status, extra, persist, &answer.body);
        if head_only {
            strip_body(&mut bytes, 0);
        }
        ctx.shared.metrics.record(route, answer.status, started);
        if let Some(front) = self.slots.front_mut() {
            *front = Slot::Ready(bytes);
        }
        true
    }
}
