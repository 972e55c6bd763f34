//! The peers' proof of the cluster secret, in the `/v0/peer` upgrade
//! (docs/SECURITY.md, "Peer handshake"). Pure rules: values in, decisions
//! out; the connection (`peer::auth_gate`) and the dialing sides
//! (`peer::auth_dialer`) carry the bytes.
//!
//! 1. The dialer sends the plain upgrade request.
//! 2. A node with a secret answers `401` with
//!    `WWW-Authenticate: Ataman-Peer v=1, nonce=<Ns>` (a fresh server nonce,
//!    remembered by that connection for one use).
//! 3. The dialer repeats the request with
//!    `Authorization: Ataman-Peer v=1, nonce=<Nc>, proof=<HMAC>` (a fresh
//!    client nonce, and its proof over `Ns`, `Nc` and every other parameter).
//! 4. The node checks the proof before answering anything else; it answers
//!    `101` with `Authentication-Info: v=1, proof=<HMAC>` (its own proof
//!    over `Ns`, `Nc` and every other parameter), or refuses and closes.
//!    The dialer checks that proof before it reads any frame.
//!
//! The secret never crosses the wire: only HMAC-SHA256 values keyed by it.
//! The two proofs carry different labels, so one side's proof is never
//! the other's; each covers a nonce fresh from the side that checks it, so
//! a recorded proof is worth nothing on another connection.
//!
//! Extensible: a header is a versioned list of `name=value` parameters, and
//! a proof covers every parameter of its header but itself, in order. A
//! later parameter (a layout version) is authenticated without a change here.

use super::secret::ClusterSecret;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The authentication scheme of both headers of the request side.
pub const SCHEME: &str = "Ataman-Peer";
/// The handshake's version (parameter `v`).
pub const VERSION: &str = "1";
/// Bytes of a nonce.
pub const NONCE_BYTES: usize = 32;
/// Bytes of a proof (HMAC-SHA256).
pub const PROOF_BYTES: usize = 32;
/// Most parameters in one header.
pub const PARAMS_MAX: usize = 16;
/// Longest parameter name or value, bytes.
pub const PARAM_BYTES_MAX: usize = 256;
/// The label of the transcript, before the side.
const LABEL: &[u8] = b"ataman-peer-auth/1\0";

/// A nonce.
pub type Nonce = [u8; NONCE_BYTES];
/// A proof.
pub type Proof = [u8; PROOF_BYTES];

/// Why a handshake fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The header is not `[scheme] name=value, ...` within the limits.
    #[error("malformed peer authentication header: {0}")]
    Malformed(&'static str),
    /// Another version of the handshake.
    #[error("peer authentication version is not {VERSION}")]
    Version,
    /// A parameter the step needs is absent.
    #[error("peer authentication without {0}")]
    Missing(&'static str),
    /// The proof does not prove the secret (wrong secret, or replayed).
    #[error("peer did not prove the cluster secret")]
    BadProof,
}

/// Which side a proof speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The dialing node.
    Client,
    /// The node dialed.
    Server,
}

/// A header's parameters, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// `(name, value)` pairs.
    pub pairs: Vec<(String, String)>,
}

impl Params {
    /// The value of `name`, the first if repeated.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every pair but `proof`: what a proof covers.
    fn signed(&self) -> impl Iterator<Item = &(String, String)> {
        self.pairs
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("proof"))
    }

    /// `[scheme ]name=value, name=value`.
    pub fn encode(&self, scheme: Option<&str>) -> String {
        let list: Vec<String> = self.pairs.iter().map(|(n, v)| format!("{n}={v}")).collect();
        match scheme {
            Some(s) => format!("{s} {}", list.join(", ")),
            None => list.join(", "),
        }
    }

    /// Decodes a header value: `scheme` first when given, then the list.
    pub fn decode(value: &[u8], scheme: Option<&str>) -> Result<Params, HandshakeError> {
        let text =
            std::str::from_utf8(value).map_err(|_| HandshakeError::Malformed("not UTF-8"))?;
        let mut rest = text.trim();
        if let Some(scheme) = scheme {
            let (first, after) = rest.split_once(' ').unwrap_or((rest, ""));
            if !first.eq_ignore_ascii_case(scheme) {
                return Err(HandshakeError::Malformed("another scheme"));
            }
            rest = after.trim();
        }
        let mut pairs = Vec::new();
        for item in rest.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let Some((name, value)) = item.split_once('=') else {
                return Err(HandshakeError::Malformed("a parameter without `=`"));
            };
            let (name, value) = (name.trim(), value.trim());
            let token = |s: &str| {
                !s.is_empty()
                    && s.len() <= PARAM_BYTES_MAX
                    && s.bytes()
                        .all(|b| b.is_ascii_graphic() && b != b',' && b != b'"')
            };
            if !token(name) || !token(value) || name.contains('=') {
                return Err(HandshakeError::Malformed("a parameter out of bounds"));
            }
            if pairs.len() == PARAMS_MAX {
                return Err(HandshakeError::Malformed("too many parameters"));
            }
            pairs.push((name.to_owned(), value.to_owned()));
        }
        match pairs.iter().find(|(n, _)| n.eq_ignore_ascii_case("v")) {
            Some((_, v)) if v == VERSION => Ok(Params { pairs }),
            Some(_) => Err(HandshakeError::Version),
            None => Err(HandshakeError::Missing("a version")),
        }
    }
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Exactly `N` bytes from hexadecimal.
pub fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = text.as_bytes();
    if bytes.len() != N * 2 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// The proof `side` gives over the handshake of `protocol` with nonces
/// `server` and `client` and the parameters `params` (its `proof`, if any, left out).
pub fn prove(
    secret: &ClusterSecret,
    side: Side,
    protocol: &str,
    server: &Nonce,
    client: &Nonce,
    params: &Params,
) -> Proof {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.key()) else {
        // HMAC takes a key of any length: this arm is never taken.
        return [0; PROOF_BYTES];
    };
    let field = |mac: &mut Hmac<Sha256>, bytes: &[u8]| {
        mac.update(&(bytes.len() as u64).to_be_bytes());
        mac.update(bytes);
    };
    mac.update(LABEL);
    mac.update(match side {
        Side::Client => b"client",
        Side::Server => b"server",
    });
    field(&mut mac, protocol.as_bytes());
    mac.update(server);
    mac.update(client);
    for (name, value) in params.signed() {
        field(&mut mac, name.to_ascii_lowercase().as_bytes());
        field(&mut mac, value.as_bytes());
    }
    mac.finalize().into_bytes().into()
}

/// Checks `params`' `proof` as `side`'s proof, in constant time.
pub fn check(
    secret: &ClusterSecret,
    side: Side,
    protocol: &str,
    server: &Nonce,
    client: &Nonce,
    params: &Params,
) -> Result<(), HandshakeError> {
    let given = params
        .get("proof")
        .ok_or(HandshakeError::Missing("a proof"))?;
    let given = unhex::<PROOF_BYTES>(given).ok_or(HandshakeError::Malformed("proof"))?;
    let expected = prove(secret, side, protocol, server, client, params);
    if bool::from(expected.ct_eq(&given)) {
        Ok(())
    } else {
        Err(HandshakeError::BadProof)
    }
}

/// The nonce parameter of `params`.
pub fn nonce_of(params: &Params) -> Result<Nonce, HandshakeError> {
    let text = params
        .get("nonce")
        .ok_or(HandshakeError::Missing("a nonce"))?;
    unhex::<NONCE_BYTES>(text).ok_or(HandshakeError::Malformed("nonce"))
}

/// The server's challenge header value: `Ataman-Peer v=1, nonce=<server>`.
pub fn challenge(server: &Nonce) -> String {
    Params {
        pairs: vec![("v".into(), VERSION.into()), ("nonce".into(), hex(server))],
    }
    .encode(Some(SCHEME))
}

/// The client's `Authorization` value answering `server`'s challenge with
/// its own nonce `client`; `extra` parameters are covered by the proof.
pub fn client_authorization(
    secret: &ClusterSecret,
    protocol: &str,
    server: &Nonce,
    client: &Nonce,
    extra: &[(String, String)],
) -> String {
    let mut params = Params {
        pairs: vec![("v".into(), VERSION.into()), ("nonce".into(), hex(client))],
    };
    params.pairs.extend(extra.iter().cloned());
    let proof = prove(secret, Side::Client, protocol, server, client, &params);
    params.pairs.push(("proof".into(), hex(&proof)));
    params.encode(Some(SCHEME))
}

/// The server's `Authentication-Info` value once the client proved the
/// secret: `v=1, proof=<server's proof>`.
pub fn server_info(
    secret: &ClusterSecret,
    protocol: &str,
    server: &Nonce,
    client: &Nonce,
) -> String {
    let mut params = Params {
        pairs: vec![("v".into(), VERSION.into())],
    };
    let proof = prove(secret, Side::Server, protocol, server, client, &params);
    params.pairs.push(("proof".into(), hex(&proof)));
    params.encode(None)
}

/// The server's check of a client's `Authorization` value against the
/// nonce it issued on this connection; `Ok` gives the client's nonce.
pub fn verify_client(
    secret: &ClusterSecret,
    protocol: &str,
    server: &Nonce,
    authorization: &[u8],
) -> Result<Nonce, HandshakeError> {
    let params = Params::decode(authorization, Some(SCHEME))?;
    let client = nonce_of(&params)?;
    check(secret, Side::Client, protocol, server, &client, &params)?;
    Ok(client)
}

/// The client's check of the server's `Authentication-Info` value.
pub fn verify_server(
    secret: &ClusterSecret,
    protocol: &str,
    server: &Nonce,
    client: &Nonce,
    info: &[u8],
) -> Result<(), HandshakeError> {
    let params = Params::decode(info, None)?;
    check(secret, Side::Server, protocol, server, client, &params)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "ataman-peer/1";

    fn secret(s: &str) -> ClusterSecret {
        ClusterSecret::from_bytes(s.as_bytes()).unwrap()
    }

    fn challenge_nonce(header: &str) -> Nonce {
        nonce_of(&Params::decode(header.as_bytes(), Some(SCHEME)).unwrap()).unwrap()
    }

    /// Both sides with the same secret prove it to each other, and the
    /// secret appears in no header.
    #[test]
    fn same_secret_both_ways() {
        let s = secret("the-cluster-secret-0001");
        let (ns, nc) = ([1u8; NONCE_BYTES], [2u8; NONCE_BYTES]);
        let ch = challenge(&ns);
        assert_eq!(challenge_nonce(&ch), ns);
        let auth = client_authorization(&s, P, &challenge_nonce(&ch), &nc, &[]);
        assert_eq!(verify_client(&s, P, &ns, auth.as_bytes()), Ok(nc));
        let info = server_info(&s, P, &ns, &nc);
        assert_eq!(verify_server(&s, P, &ns, &nc, info.as_bytes()), Ok(()));
        for text in [&ch, &auth, &info] {
            assert!(!text.contains("the-cluster-secret"), "{text}");
            assert!(!text.contains(&hex(b"the-cluster-secret-0001")), "{text}");
        }
    }

    /// Negative controls: a wrong secret, a replayed proof (another
    /// connection's nonce), the other side's proof reflected, a missing or
    /// mangled proof, another protocol, and a parameter changed after the
    /// proof are all refused.
    #[test]
    fn negative_controls() {
        let s = secret("the-cluster-secret-0001");
        let wrong = secret("the-cluster-secret-0002");
        let (ns, nc) = ([1u8; NONCE_BYTES], [2u8; NONCE_BYTES]);
        let auth = client_authorization(&s, P, &ns, &nc, &[]);
        let bad = Err(HandshakeError::BadProof);
        let bad_server: Result<(), _> = Err(HandshakeError::BadProof);
        assert_eq!(verify_client(&wrong, P, &ns, auth.as_bytes()), bad);
        let forged = client_authorization(&wrong, P, &ns, &nc, &[]);
        assert_eq!(verify_client(&s, P, &ns, forged.as_bytes()), bad);
        // Replay on a connection that issued another nonce.
        assert_eq!(
            verify_client(&s, P, &[3u8; NONCE_BYTES], auth.as_bytes()),
            bad
        );
        // The server's 101 replayed to a client that sent another nonce.
        let info = server_info(&s, P, &ns, &nc);
        assert_eq!(
            verify_server(&s, P, &ns, &[4u8; NONCE_BYTES], info.as_bytes()),
            bad_server
        );
        assert_eq!(
            verify_server(&wrong, P, &ns, &nc, info.as_bytes()),
            bad_server
        );
        // The client's proof reflected as the server's.
        let client_params = Params::decode(auth.as_bytes(), Some(SCHEME)).unwrap();
        let reflected = format!("v=1, proof={}", client_params.get("proof").unwrap());
        assert_eq!(
            verify_server(&s, P, &ns, &nc, reflected.as_bytes()),
            bad_server
        );
        // Another protocol (a peer proof used for a sync session).
        assert_eq!(
            verify_client(&s, "ataman-sync/1", &ns, auth.as_bytes()),
            bad
        );
        // Missing proof, missing nonce, missing version, another version.
        let no_proof = format!("{SCHEME} v=1, nonce={}", hex(&nc));
        assert_eq!(
            verify_client(&s, P, &ns, no_proof.as_bytes()),
            Err(HandshakeError::Missing("a proof"))
        );
        assert_eq!(
            verify_client(&s, P, &ns, b"Ataman-Peer v=1"),
            Err(HandshakeError::Missing("a nonce"))
        );
        assert_eq!(
            verify_client(&s, P, &ns, b"Ataman-Peer nonce=00"),
            Err(HandshakeError::Missing("a version"))
        );
        assert_eq!(
            verify_client(&s, P, &ns, b"Ataman-Peer v=2"),
            Err(HandshakeError::Version)
        );
        assert!(matches!(
            verify_client(&s, P, &ns, b"Bearer abcdefabcdefabcdef"),
            Err(HandshakeError::Malformed(_))
        ));
        // A parameter added or changed after the proof.
        let extra = vec![("layout".to_owned(), "7".to_owned())];
        let with_layout = client_authorization(&s, P, &ns, &nc, &extra);
        assert_eq!(verify_client(&s, P, &ns, with_layout.as_bytes()), Ok(nc));
        let tampered = with_layout.replace("layout=7", "layout=8");
        assert_eq!(verify_client(&s, P, &ns, tampered.as_bytes()), bad);
        let mut mangled = auth.clone();
        mangled.pop();
        mangled.push('z');
        assert!(verify_client(&s, P, &ns, mangled.as_bytes()).is_err());
    }

    #[test]
    fn hex_round_trip_and_limits() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(hex(&bytes), "0001abff");
        assert_eq!(unhex::<4>("0001ABff"), Some(bytes));
        assert_eq!(unhex::<4>("0001abf"), None);
        assert_eq!(unhex::<4>("0001abfg"), None);
        let many = (0..=PARAMS_MAX)
            .map(|i| format!("p{i}=1"))
            .collect::<Vec<_>>();
        let text = format!("v=1, {}", many.join(", "));
        assert_eq!(
            Params::decode(text.as_bytes(), None),
            Err(HandshakeError::Malformed("too many parameters"))
        );
        let long = format!("v=1, x={}", "a".repeat(PARAM_BYTES_MAX + 1));
        assert!(Params::decode(long.as_bytes(), None).is_err());
    }
}
