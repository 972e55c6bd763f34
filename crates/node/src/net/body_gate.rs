//! How much body an HTTP request may send: on its route
//! ([`body_bytes_max`]), and before its token is checked ([`refuse_body`]).
//!
//! # Route bounds
//! Every request's body is at most `--value-bytes-max` (one value),
//! except a restore's batch (`POST /v0/backup?ingest=1`): at most one
//! whole record of the longest key and value
//! (`backup::ingest_wire::record_bytes_max`), so a version at the value
//! bound is restorable (a batch of one). The head's parser is given the
//! largest of the bounds ([`largest_body_bytes_max`]); the connection
//! checks the route's once the head is routed: over it, 413 and the
//! connection closes ([`too_large`]); a chunked body is decoded under it.
//!
//! With client tokens on, a request's `Authorization` header is read when
//! its head is parsed ([`super::auth_gate::credential`]), before its body
//! arrives. A request that proves nothing (no header, an unknown token, a
//! malformed one) may still send a small body, answered in turn (401, or
//! what an open endpoint answers); one that declares more than
//! [`UNAUTHENTICATED_BODY_BYTES_MAX`] is refused on its head with 401 and
//! the connection closes, so the node never buffers a stranger's value
//! (docs/SECURITY.md, "Before a client proves anything").
//!
//! A peer's proof (`Authorization: Ataman-Peer …`) is checked where it is
//! used, after the body; the only peer request with a body is a layout
//! agreement message, so a peer credential may send at most
//! [`crate::cluster::agreement_wire::MESSAGE_BYTES_MAX`] to that endpoint
//! and the small bound to any other.
//!
//! Pure: facts in, a refusal or none out.

use super::auth_gate::{Credential, UNAUTHENTICATED_TEXT};
use crate::api::{Action, BackupAsk, Route};
use crate::auth::metrics::ClientRefusal;
use crate::backup::ingest_wire;
use crate::cluster::agreement_wire;
use crate::http::Status;
use crate::http::request::HttpError;

/// The node's key and value bounds, which the route bounds follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `--key-bytes-max`.
    pub key_bytes_max: usize,
    /// `--value-bytes-max`.
    pub value_bytes_max: usize,
}

impl Bounds {
    /// The node's bounds (its configuration).
    pub fn of(config: &crate::config::NodeConfig) -> Bounds {
        Bounds {
            key_bytes_max: config.key_bytes_max,
            value_bytes_max: config.value_bytes_max,
        }
    }
}

/// The body bytes a request routed to `action` may carry (module header,
/// "Route bounds").
pub fn body_bytes_max(action: &Action, bounds: Bounds) -> u64 {
    match action {
        Action::Backup(BackupAsk::Ingest { probe: false, .. }) => {
            ingest_wire::record_bytes_max(bounds.key_bytes_max, bounds.value_bytes_max) as u64
        }
        _ => bounds.value_bytes_max as u64,
    }
}

/// The largest body any route admits: the bound the head's parser and
/// the read buffer are sized for.
pub fn largest_body_bytes_max(bounds: Bounds) -> u64 {
    let ingest = Action::Backup(BackupAsk::Ingest {
        probe: false,
        t: None,
        restore: String::new(),
    });
    body_bytes_max(&ingest, bounds).max(bounds.value_bytes_max as u64)
}

/// The 413 for a request routed to `action` that declares
/// `content_length` body bytes, or `None` when its route admits them.
pub fn too_large(action: &Action, bounds: Bounds, content_length: u64) -> Option<HttpError> {
    let max = body_bytes_max(action, bounds);
    (content_length > max).then(|| {
        HttpError::close(
            Status::PayloadTooLarge,
            format!("body of {content_length} bytes over the limit of {max}"),
        )
    })
}

/// Body bytes a request that proves no token may declare (16 KiB).
pub const UNAUTHENTICATED_BODY_BYTES_MAX: u64 = 16 * 1024;

/// Why a request's head is refused before its body: what to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The refusal's reason, for `ataman_auth_refusals_total`.
    pub why: ClientRefusal,
}

/// The refusal of a request on `route` with `credential` declaring
/// `content_length` body bytes, or `None` to read its body. `tokens_on`:
/// client tokens are configured.
pub fn refuse_body(
    tokens_on: bool,
    credential: &Credential,
    route: Route,
    content_length: u64,
) -> Option<Refusal> {
    if !tokens_on {
        return None;
    }
    let (max, why) = match credential {
        Credential::Role(_) => return None,
        Credential::Peer(_) if route == Route::InternalLayout => (
            agreement_wire::MESSAGE_BYTES_MAX as u64,
            ClientRefusal::Malformed,
        ),
        Credential::Peer(_) | Credential::Malformed => {
            (UNAUTHENTICATED_BODY_BYTES_MAX, ClientRefusal::Malformed)
        }
        Credential::Absent => (UNAUTHENTICATED_BODY_BYTES_MAX, ClientRefusal::Missing),
        Credential::Unknown => (UNAUTHENTICATED_BODY_BYTES_MAX, ClientRefusal::Unknown),
    };
    (content_length > max).then_some(Refusal { why })
}

/// The 401's text for a refused body.
pub fn refusal_text() -> String {
    format!(
        "{UNAUTHENTICATED_TEXT} (a body over {UNAUTHENTICATED_BODY_BYTES_MAX} bytes is refused \
         before a token is proved)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    const MAX: u64 = UNAUTHENTICATED_BODY_BYTES_MAX;

    // Without a valid token a body is read up to the bound and refused
    // past it, with the reason counted; a valid token (any role) or tokens
    // off read any body the value limit allows.
    #[test]
    fn an_unproved_body_is_refused_past_the_bound_only() {
        let put = Route::EntityPut;
        for (credential, why) in [
            (Credential::Absent, ClientRefusal::Missing),
            (Credential::Unknown, ClientRefusal::Unknown),
            (Credential::Malformed, ClientRefusal::Malformed),
            (Credential::Peer(Box::new(*b"x")), ClientRefusal::Malformed),
        ] {
            assert_eq!(refuse_body(true, &credential, put, MAX), None);
            assert_eq!(
                refuse_body(true, &credential, put, MAX + 1),
                Some(Refusal { why })
            );
            assert_eq!(refuse_body(false, &credential, put, u64::MAX), None);
        }
        let reader = Credential::Role(Role::Read);
        assert_eq!(refuse_body(true, &reader, put, u64::MAX), None);
    }

    fn ingest() -> Action {
        Action::Backup(BackupAsk::Ingest {
            probe: false,
            t: Some(5),
            restore: "r1".into(),
        })
    }

    /// The ingest route admits one whole record of the longest key and
    /// value, not a byte more; every other route (a PUT, the ingest's
    /// probe, an error) one value. The largest bound covers each.
    #[test]
    fn each_route_admits_its_bound() {
        let bounds = Bounds {
            key_bytes_max: 100,
            value_bytes_max: 1_000,
        };
        let record = ingest_wire::record_bytes_max(100, 1_000) as u64;
        assert_eq!(body_bytes_max(&ingest(), bounds), record);
        assert!(record > 1_000);
        assert!(too_large(&ingest(), bounds, record).is_none());
        let refused = too_large(&ingest(), bounds, record + 1).unwrap();
        assert_eq!(refused.status, Status::PayloadTooLarge);
        assert!(refused.close);
        let put = Action::Put {
            key: b"k".to_vec(),
            ack: 1,
            from: 1,
            ttl_ms: None,
            preconditions: None,
        };
        let probe = Action::Backup(BackupAsk::Ingest {
            probe: true,
            t: None,
            restore: String::new(),
        });
        let error = Action::Error(HttpError::close(Status::BadRequest, "x"));
        for other in [&put, &probe, &error] {
            assert_eq!(body_bytes_max(other, bounds), 1_000, "{other:?}");
            assert!(too_large(other, bounds, 1_000).is_none());
            assert!(too_large(other, bounds, 1_001).is_some());
        }
        assert_eq!(largest_body_bytes_max(bounds), record);
        // With the old rule (every route the value bound) a value at the
        // bound in a batch of one is refused: the check sees it.
        let mut one = Vec::new();
        let version = crate::peer::frame::Stamped::value(1, vec![0; 1_000]);
        ingest_wire::encode(&mut one, b"k", &version);
        assert!(one.len() as u64 > bounds.value_bytes_max as u64);
        assert!(too_large(&ingest(), bounds, one.len() as u64).is_none());
    }

    // A peer's agreement message may be as long as the longest message,
    // and no longer; the same credential elsewhere gets the small bound.
    #[test]
    fn a_peer_credential_may_send_one_agreement_message() {
        let peer = Credential::Peer(Box::new(*b"x"));
        let longest = agreement_wire::MESSAGE_BYTES_MAX as u64;
        assert!(longest > MAX);
        assert_eq!(
            refuse_body(true, &peer, Route::InternalLayout, longest),
            None
        );
        assert!(refuse_body(true, &peer, Route::InternalLayout, longest + 1).is_some());
        assert!(refuse_body(true, &peer, Route::EntityPut, longest).is_some());
    }
}
