//! What an HTTP connection asks before it dispatches a request: who sent
//! it (the `Authorization` header, read once when the head is parsed), and
//! whether that is enough for the command, or for a peer upgrade.
//!
//! A refusal's body names the missing role at most: never a key, a value
//! or a token.

use super::answer::{Answer, Failure};
use super::authorize::{authorize, needed};
use super::dispatch::Command;
use crate::auth::metrics::{ClientRefusal, PeerRefusal};
use crate::auth::peer_access::{self, PeerAccess, PeerFacts};
use crate::auth::peer_proof::{Nonce, SCHEME};
use crate::auth::{Auth, Role};
use crate::http::Status;
use crate::peer::auth_gate::{self, Gate};

/// The body of a 401.
pub const UNAUTHENTICATED_TEXT: &str = "authentication required: send Authorization: Bearer TOKEN";

/// Who sent a request, as far as its `Authorization` header says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Credential {
    /// No header (or client tokens are off).
    #[default]
    Absent,
    /// A known bearer token's role.
    Role(Role),
    /// A bearer token that is not in the file.
    Unknown,
    /// Another scheme, or a bearer header without a token.
    Malformed,
    /// A peer's proof (`Ataman-Peer ...`), checked by the upgrade.
    Peer(Box<[u8]>),
}

fn strip_scheme<'a>(value: &'a [u8], scheme: &str) -> Option<&'a [u8]> {
    let n = scheme.len();
    (value.len() > n && value[..n].eq_ignore_ascii_case(scheme.as_bytes()) && value[n] == b' ')
        .then(|| value[n + 1..].trim_ascii())
}

/// Reads the `Authorization` header's value (the token is looked up here,
/// so nothing of it is kept).
pub fn credential(auth: &Auth, header: Option<&[u8]>) -> Credential {
    let Some(value) = header.map(<[u8]>::trim_ascii) else {
        return Credential::Absent;
    };
    if strip_scheme(value, SCHEME).is_some() {
        return Credential::Peer(value.into());
    }
    let Some(tokens) = &auth.tokens else {
        return Credential::Absent;
    };
    match strip_scheme(value, "Bearer") {
        Some(token) if !token.is_empty() => match tokens.role_of(token) {
            Some(role) => Credential::Role(role),
            None => Credential::Unknown,
        },
        _ => Credential::Malformed,
    }
}

/// Admits `command` sent with `credential`, or gives the refusal to answer
/// (401 or 403), counted.
pub fn admit(auth: &Auth, credential: &Credential, command: &Command<'_>) -> Result<(), Answer> {
    if auth.tokens.is_none() || needed(command).is_none() {
        return Ok(());
    }
    let why = match credential {
        Credential::Role(role) => match authorize(*role, command) {
            Ok(()) => return Ok(()),
            Err(denied) => {
                auth.metrics.client_refused(ClientRefusal::Forbidden);
                return Err(Answer::Failed(
                    Failure::Forbidden,
                    format!("forbidden: {denied}"),
                ));
            }
        },
        Credential::Absent => ClientRefusal::Missing,
        Credential::Unknown => ClientRefusal::Unknown,
        Credential::Malformed | Credential::Peer(_) => ClientRefusal::Malformed,
    };
    auth.metrics.client_refused(why);
    Err(Answer::Failed(
        Failure::Unauthenticated,
        UNAUTHENTICATED_TEXT.into(),
    ))
}

/// What a connection does with a peer or sync upgrade request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send this 101 and switch protocols.
    Switch(Vec<u8>),
    /// Send these bytes (a challenge or a refusal) with this status (for
    /// the metrics); close after them when `true`.
    Answer(Vec<u8>, Status, bool),
}

/// What a peer request on this network thread must do, from what is true
/// now: the options, the listening address and this thread's live
/// placement (refreshed every loop iteration, so a layout change applies
/// to the next request) ([`peer_access`]).
pub fn access(ctx: &crate::state::NetContext) -> PeerAccess {
    use crate::auth::protected::{is_loopback, url_host_port};
    let placement = ctx.placement();
    let me = placement.self_index();
    let others = (0..placement.len()).filter(|&i| i != me && placement.is_live_member(i));
    let (mut alone, mut member_exposed) = (true, false);
    for i in others {
        alone = false;
        member_exposed |= !is_loopback(url_host_port(placement.url(i)));
    }
    let auth = &ctx.shared.auth;
    peer_access::decide(PeerFacts {
        secret: auth.secret.is_some(),
        certificates: ctx.shared.tls.as_ref().is_some_and(|t| t.verifies_peers()),
        tokens: auth.tokens.is_some(),
        allow_unauthenticated: ctx.config.allow_unauthenticated,
        listener_exposed: !is_loopback(&ctx.config.listen),
        alone,
        member_exposed,
    })
}

/// [`peer`]'s gate as what the connection does.
pub fn upgrade(
    auth: &Auth,
    access: PeerAccess,
    protocol: &str,
    issued: &mut Option<Nonce>,
    credential: &Credential,
    remote: &dyn Fn() -> String,
) -> Verdict {
    match peer(auth, access, protocol, issued, credential, remote) {
        Gate::Open => Verdict::Switch(crate::peer::handshake::upgrade_response_for(protocol)),
        Gate::Accepted(response) => Verdict::Switch(response),
        Gate::Challenge(bytes) => Verdict::Answer(bytes, Status::Unauthorized, false),
        Gate::Refused(bytes, PeerRefusal::NoSecret) => {
            Verdict::Answer(bytes, Status::Forbidden, true)
        }
        Gate::Refused(bytes, _) => Verdict::Answer(bytes, Status::Unauthorized, true),
    }
}

/// Decides a peer or sync upgrade to `protocol` on a connection from
/// `remote` that issued `issued`, given what `access` asks; refusals are
/// counted and logged.
pub fn peer(
    auth: &Auth,
    access: PeerAccess,
    protocol: &str,
    issued: &mut Option<Nonce>,
    credential: &Credential,
    remote: &dyn Fn() -> String,
) -> Gate {
    let gate = if let PeerAccess::Closed(why) = access {
        auth_gate::closed(why)
    } else {
        let authorization: Option<&[u8]> = match credential {
            Credential::Absent => None,
            Credential::Peer(value) => Some(value),
            // A client's bearer token never opens a peer session.
            _ => Some(b"Bearer"),
        };
        match crate::peer::auth_dialer::fresh_nonce() {
            Some(fresh) => {
                auth_gate::decide(auth.secret.as_ref(), protocol, issued, authorization, fresh)
            }
            None => {
                tracing::error!("auth: no randomness for a peer challenge");
                auth_gate::no_challenge_possible()
            }
        }
    };
    if let Gate::Refused(_, why) = &gate {
        auth.metrics.peer_refused(*why);
        tracing::warn!(
            remote = %remote(),
            reason = why.label(),
            "peer upgrade refused: the cluster secret was not proved, or peers are closed here"
        );
    }
    gate
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn auth_with(text: &str) -> (Auth, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let auth = Auth {
            tokens: Some(crate::auth::reload::TokenStore::open(&path).unwrap()),
            ..Auth::default()
        };
        (auth, dir)
    }

    #[test]
    fn headers_to_credentials_to_answers() {
        let (auth, _dir) = auth_with("reader-token-0123456 read\n");
        let c = |h: &[u8]| credential(&auth, Some(h));
        assert_eq!(
            c(b"Bearer reader-token-0123456"),
            Credential::Role(Role::Read)
        );
        assert_eq!(
            c(b"bearer   reader-token-0123456 "),
            Credential::Role(Role::Read)
        );
        assert_eq!(c(b"Bearer reader-token-0123457"), Credential::Unknown);
        assert_eq!(c(b"Bearer "), Credential::Malformed);
        assert_eq!(c(b"Basic dXNlcjpwYXNz"), Credential::Malformed);
        assert_eq!(credential(&auth, None), Credential::Absent);
        let put = Command::Write {
            key: b"secret-key".to_vec().into(),
            value: Some(b"secret-value"),
            expiry: crate::ttl::Expiry::Never,
            ack: 1,
            from: 1,
        };
        let Err(Answer::Failed(Failure::Forbidden, text)) =
            admit(&auth, &Credential::Role(Role::Read), &put)
        else {
            panic!("not forbidden");
        };
        assert_eq!(text, "forbidden: this request needs the write role");
        let Err(Answer::Failed(Failure::Unauthenticated, text)) =
            admit(&auth, &Credential::Unknown, &put)
        else {
            panic!("not 401");
        };
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(admit(&auth, &Credential::Absent, &Command::Status), Ok(()));
        assert_eq!(auth.metrics.client_refusals(ClientRefusal::Unknown), 1);
        assert_eq!(auth.metrics.client_refusals(ClientRefusal::Forbidden), 1);
        // Without tokens, everything is admitted.
        let open = Auth::disabled();
        assert_eq!(credential(&open, Some(b"Bearer x")), Credential::Absent);
        assert_eq!(admit(&open, &Credential::Absent, &put), Ok(()));
    }
}
