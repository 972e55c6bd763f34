//! The accepting side of the peer handshake ([`crate::auth::peer_proof`]): what
//! a connection answers to an upgrade request, decided before any frame
//! is read. Pure: the connection keeps the nonce it issued and sends the
//! bytes.

pub use crate::auth::metrics::PeerRefusal;
use crate::auth::peer_access::Closed;
use crate::auth::peer_proof::{self, HandshakeError, Nonce};
use crate::auth::secret::ClusterSecret;

/// What a connection answers to a peer upgrade request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No secret is configured: the plain upgrade, as without authentication.
    Open,
    /// Send this `401` challenge and keep the connection (the nonce is kept).
    Challenge(Vec<u8>),
    /// Proven: send this `101` (with the node's own proof) and switch.
    Accepted(Vec<u8>),
    /// Send this refusal and close.
    Refused(Vec<u8>, PeerRefusal),
}

fn refusal(reason: PeerRefusal) -> Gate {
    refusal_with(reason, None)
}

fn refusal_with(reason: PeerRefusal, closed: Option<Closed>) -> Gate {
    let (line, text) = match (reason, closed) {
        (PeerRefusal::NoSecret, Some(why)) => ("403 Forbidden", why.text()),
        (PeerRefusal::NoSecret, None) => (
            "403 Forbidden",
            "peer sessions need --cluster-secret-file or --tls-ca on this node",
        ),
        _ => ("401 Unauthorized", "peer did not prove the cluster secret"),
    };
    let bytes = format!(
        "HTTP/1.1 {line}\r\nWWW-Authenticate: {} v={}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}\n",
        peer_proof::SCHEME,
        peer_proof::VERSION,
        text.len() + 1
    );
    Gate::Refused(bytes.into_bytes(), reason)
}

/// Decides the answer to an upgrade to `protocol` carrying `authorization`
/// (the header's value), on a connection that issued `issued` (taken: a
/// nonce serves once); `fresh` is the nonce of a new challenge. Without a
/// `secret`, [`Gate::Open`].
pub fn decide(
    secret: Option<&ClusterSecret>,
    protocol: &str,
    issued: &mut Option<Nonce>,
    authorization: Option<&[u8]>,
    fresh: Nonce,
) -> Gate {
    let Some(secret) = secret else {
        return Gate::Open;
    };
    let Some(authorization) = authorization else {
        if issued.is_some() {
            *issued = None;
            return refusal(PeerRefusal::MissingProof);
        }
        *issued = Some(fresh);
        let bytes = format!(
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {}\r\nContent-Length: 0\r\n\r\n",
            peer_proof::challenge(&fresh)
        );
        return Gate::Challenge(bytes.into_bytes());
    };
    let Some(server) = issued.take() else {
        return refusal(PeerRefusal::NoChallenge);
    };
    match peer_proof::verify_client(secret, protocol, &server, authorization) {
        Ok(client) => {
            let info = peer_proof::server_info(secret, protocol, &server, &client);
            let mut bytes = crate::peer::handshake::upgrade_response_for(protocol);
            bytes.truncate(bytes.len().saturating_sub(2));
            bytes.extend_from_slice(format!("Authentication-Info: {info}\r\n\r\n").as_bytes());
            Gate::Accepted(bytes)
        }
        Err(HandshakeError::BadProof) => refusal(PeerRefusal::BadProof),
        Err(HandshakeError::Missing(_)) => refusal(PeerRefusal::MissingProof),
        Err(_) => refusal(PeerRefusal::Malformed),
    }
}

/// The refusal of a peer upgrade on a node that takes no peer session
/// now (`crate::auth::peer_access`), saying why.
pub fn closed(why: Closed) -> Gate {
    refusal_with(PeerRefusal::NoSecret, Some(why))
}

/// The refusal of a peer upgrade when no challenge can be made (the
/// system gave no randomness).
pub fn no_challenge_possible() -> Gate {
    refusal(PeerRefusal::NoSecret)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proof-less request twice is refused (not challenged forever), and
    /// the refusal says nothing of the secret.
    #[test]
    fn missing_proof_after_a_challenge() {
        let s = ClusterSecret::from_bytes(b"0123456789abcdef-secret").unwrap();
        let mut issued = None;
        let g = decide(Some(&s), "p", &mut issued, None, [1; 32]);
        assert!(matches!(g, Gate::Challenge(_)));
        assert_eq!(issued, Some([1; 32]));
        let Gate::Refused(bytes, why) = decide(Some(&s), "p", &mut issued, None, [2; 32]) else {
            panic!("not refused");
        };
        assert_eq!(why, PeerRefusal::MissingProof);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("HTTP/1.1 401 "), "{text}");
        assert!(!text.contains("0123456789abcdef"), "{text}");
        assert_eq!(decide(None, "p", &mut None, None, [0; 32]), Gate::Open);
        let Gate::Refused(_, why) = decide(Some(&s), "p", &mut Some([1; 32]), Some(b"x"), [0; 32])
        else {
            panic!()
        };
        assert_eq!(why, PeerRefusal::Malformed);
    }
}
