//! How much body an HTTP request may send before its token is checked.
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
use crate::api::Route;
use crate::auth::metrics::ClientRefusal;
use crate::cluster::agreement_wire;

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
