//! The dialing side of the peer handshake ([`crate::auth::peer_proof`]), as a
//! state machine over the bytes received: used by the peer links, the
//! anti-entropy client and the harness alike.

use super::handshake::{
    UPGRADE_RESPONSE_BYTES_MAX, UPGRADE_RESPONSE_HEADERS_MAX, parse_upgrade_response_for,
    upgrade_request_for,
};
use crate::auth::peer_proof::{self, Nonce};
use crate::auth::secret::ClusterSecret;

/// Largest body of the challenge (a `401`) a dialer reads past, bytes.
pub const CHALLENGE_BODY_BYTES_MAX: usize = 4096;

/// What the dialer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The answer is not complete yet.
    NeedMore,
    /// Drop the first `consumed` bytes received and send `request`.
    Send {
        /// Bytes of the answer read.
        consumed: usize,
        /// The next request.
        request: Vec<u8>,
    },
    /// Upgraded: the bytes after the first `consumed` are the protocol's.
    Up {
        /// Bytes of the answer read.
        consumed: usize,
    },
}

#[derive(Debug, Clone)]
enum State {
    Challenge,
    Accept { server: Nonce, client: Nonce },
}

/// One dial's handshake.
#[derive(Debug, Clone)]
pub struct Dialer {
    protocol: &'static str,
    host: String,
    self_url: String,
    secret: Option<ClusterSecret>,
    state: State,
    /// The layout version named in the upgrade (`handshake::LAYOUT_HEADER`).
    layout: Option<u64>,
}

/// The parts of a response head the handshake reads.
struct Head {
    code: u16,
    reason: String,
    /// Head plus body bytes.
    total: usize,
    www_authenticate: Option<Vec<u8>>,
    authentication_info: Option<Vec<u8>>,
}

/// The status code of the upgrade answer at the start of `buf`, once
/// its head is complete and well-formed.
pub fn answer_status(buf: &[u8]) -> Option<u16> {
    parse_head(buf).ok().flatten().map(|head| head.code)
}

fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; UPGRADE_RESPONSE_HEADERS_MAX];
    let mut response = httparse::Response::new(&mut headers);
    let head_bytes = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= UPGRADE_RESPONSE_BYTES_MAX => n,
        Ok(httparse::Status::Partial) if buf.len() <= UPGRADE_RESPONSE_BYTES_MAX => {
            return Ok(None);
        }
        Ok(_) => {
            return Err(format!(
                "peer's answer head is over {UPGRADE_RESPONSE_BYTES_MAX} bytes"
            ));
        }
        Err(e) => return Err(format!("peer's answer is not HTTP: {e}")),
    };
    let find = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.to_vec())
    };
    let body = match find("content-length") {
        None => 0,
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n <= CHALLENGE_BODY_BYTES_MAX)
            .ok_or("peer's answer has a bad or large Content-Length")?,
    };
    Ok(Some(Head {
        code: response.code.unwrap_or(0),
        reason: response.reason.unwrap_or("").to_owned(),
        total: head_bytes + body,
        www_authenticate: find("www-authenticate"),
        authentication_info: find("authentication-info"),
    }))
}

/// `request` with the header line `name: value` added.
fn with_header(mut request: Vec<u8>, name: &str, value: &str) -> Vec<u8> {
    request.truncate(request.len().saturating_sub(2));
    request.extend_from_slice(format!("{name}: {value}\r\n\r\n").as_bytes());
    request
}

impl Dialer {
    /// A handshake for `protocol` with the node at `host`, naming this
    /// node `self_url`; with `secret`, the secret is proved and demanded.
    pub fn new(
        protocol: &'static str,
        host: &str,
        self_url: &str,
        secret: Option<ClusterSecret>,
    ) -> Self {
        Dialer {
            protocol,
            host: host.to_owned(),
            self_url: self_url.to_owned(),
            secret,
            state: State::Challenge,
            layout: None,
        }
    }

    /// The same handshake naming layout version `version` (the fence).
    pub fn with_layout(mut self, version: u64) -> Self {
        self.layout = Some(version);
        self
    }

    /// The first request: the plain upgrade request.
    pub fn first_request(&self) -> Vec<u8> {
        let request = upgrade_request_for(self.protocol, &self.host, &self.self_url);
        match self.layout {
            Some(version) => super::handshake::with_layout(request, version),
            None => request,
        }
    }

    /// Reads the answer at the start of `buf`; `fresh` gives a new nonce
    /// (`None`: no randomness available, the dial fails).
    pub fn on_answer(
        &mut self,
        buf: &[u8],
        fresh: &mut dyn FnMut() -> Option<Nonce>,
    ) -> Result<Step, String> {
        let Some(secret) = self.secret.clone() else {
            return Ok(match parse_upgrade_response_for(buf, self.protocol)? {
                Some(consumed) => Step::Up { consumed },
                None => Step::NeedMore,
            });
        };
        match self.state.clone() {
            State::Challenge => {
                let Some(head) = parse_head(buf)? else {
                    return Ok(Step::NeedMore);
                };
                if head.code == 101 {
                    return Err(
                        "peer switched protocols without asking for the cluster secret \
                                (is --cluster-secret-file set on every node?)"
                            .into(),
                    );
                }
                let challenge = head.www_authenticate.filter(|_| head.code == 401);
                let Some(challenge) = challenge else {
                    return Err(format!("peer answered {}: {}", head.code, head.reason));
                };
                if buf.len() < head.total {
                    return Ok(Step::NeedMore);
                }
                let params = peer_proof::Params::decode(&challenge, Some(peer_proof::SCHEME))
                    .map_err(|e| format!("peer's challenge: {e}"))?;
                let server =
                    peer_proof::nonce_of(&params).map_err(|e| format!("peer's challenge: {e}"))?;
                let client = fresh().ok_or("no randomness for a nonce")?;
                let value =
                    peer_proof::client_authorization(&secret, self.protocol, &server, &client, &[]);
                self.state = State::Accept { server, client };
                let request = with_header(self.first_request(), "Authorization", &value);
                Ok(Step::Send {
                    consumed: head.total,
                    request,
                })
            }
            State::Accept { server, client } => {
                let Some(consumed) = parse_upgrade_response_for(buf, self.protocol)? else {
                    return Ok(Step::NeedMore);
                };
                let info = parse_head(buf)?
                    .and_then(|h| h.authentication_info)
                    .ok_or("peer switched protocols without proving the cluster secret")?;
                peer_proof::verify_server(&secret, self.protocol, &server, &client, &info)
                    .map_err(|e| e.to_string())?;
                Ok(Step::Up { consumed })
            }
        }
    }
}

/// A fresh nonce from the operating system's generator.
pub fn fresh_nonce() -> Option<Nonce> {
    let mut nonce = [0u8; peer_proof::NONCE_BYTES];
    getrandom::fill(&mut nonce).ok()?;
    Some(nonce)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{Limits, Parsed, parse_head as parse_request};
    use crate::peer::auth_gate::{Gate, decide};
    use crate::peer::handshake::PEER_PROTOCOL;

    fn secret(s: &str) -> Option<ClusterSecret> {
        ClusterSecret::from_bytes(s.as_bytes())
    }

    /// The server's verdict on `request` (its Authorization header), as its connection decides it.
    fn serve(
        secret: &Option<ClusterSecret>,
        issued: &mut Option<Nonce>,
        request: &[u8],
        nonce: Nonce,
    ) -> Gate {
        let limits = Limits {
            header_bytes_max: 8192,
            body_bytes_max: 0,
        };
        let Parsed::Head(head) = parse_request(request, limits) else {
            panic!("not a request");
        };
        decide(
            secret.as_ref(),
            PEER_PROTOCOL,
            issued,
            head.authorization,
            nonce,
        )
    }

    /// The whole exchange, dialer against the connection's rules, with the
    /// same secret, then the negative controls: a wrong secret on either
    /// side, a node without a secret, a replayed request.
    #[test]
    fn dialer_against_server() {
        let good = secret("a-cluster-secret-of-32-bytes....");
        let run = |client: Option<ClusterSecret>, server: Option<ClusterSecret>| {
            let mut dialer =
                Dialer::new(PEER_PROTOCOL, "127.0.0.1:1", "http://127.0.0.1:2", client);
            let mut issued = None;
            let mut next = [10u8; 32];
            let mut fresh = || {
                next[0] += 1;
                Some(next)
            };
            let mut request = dialer.first_request();
            for _ in 0..3 {
                let answer = match serve(&server, &mut issued, &request, [7u8; 32]) {
                    Gate::Open => crate::peer::handshake::upgrade_response(),
                    Gate::Challenge(bytes) | Gate::Refused(bytes, _) | Gate::Accepted(bytes) => {
                        bytes
                    }
                };
                let mut buf = answer.clone();
                buf.extend_from_slice(b"frames");
                match dialer.on_answer(&buf, &mut fresh) {
                    Ok(Step::Up { consumed }) => {
                        assert_eq!(&buf[consumed..], b"frames");
                        return Ok(request);
                    }
                    Ok(Step::Send {
                        consumed,
                        request: r,
                    }) => {
                        assert_eq!(consumed, answer.len());
                        request = r;
                    }
                    Ok(Step::NeedMore) => panic!("complete answer"),
                    Err(e) => return Err(e),
                }
            }
            Err("no end".into())
        };
        let last = run(good.clone(), good.clone()).unwrap();
        assert!(String::from_utf8_lossy(&last).contains("Authorization: Ataman-Peer v=1"));
        assert!(run(None, None).is_ok(), "no secret anywhere: as before");
        let wrong = secret("another-secret-of-32-bytes......");
        let e = run(wrong.clone(), good.clone()).unwrap_err();
        assert!(e.contains("401"), "{e}");
        let e = run(good.clone(), wrong).unwrap_err();
        assert!(e.contains("401"), "the server refuses first: {e}");
        let e = run(None, good.clone()).unwrap_err();
        assert!(e.contains("401"), "{e}");
        let e = run(good.clone(), None).unwrap_err();
        assert!(e.contains("without asking"), "{e}");
        // The proven request replayed on a new connection (no nonce issued
        // there, then another nonce) is refused.
        let mut issued = None;
        assert!(matches!(
            serve(&good, &mut issued, &last, [7u8; 32]),
            Gate::Refused(..)
        ));
        let mut issued = Some([8u8; 32]);
        assert!(matches!(
            serve(&good, &mut issued, &last, [9u8; 32]),
            Gate::Refused(..)
        ));
    }

    /// A 101 that does not prove the secret, or proves it for other nonces, is refused.
    #[test]
    fn a_server_must_prove_the_secret() {
        let s = secret("a-cluster-secret-of-32-bytes....");
        let mut dialer = Dialer::new(PEER_PROTOCOL, "h", "u", s.clone());
        let challenge = format!(
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {}\r\nContent-Length: 0\r\n\r\n",
            peer_proof::challenge(&[1; 32])
        );
        let step = dialer
            .on_answer(challenge.as_bytes(), &mut || Some([2; 32]))
            .unwrap();
        assert!(matches!(step, Step::Send { .. }));
        let plain = crate::peer::handshake::upgrade_response();
        let e = dialer.on_answer(&plain, &mut || None).unwrap_err();
        assert!(e.contains("without proving"), "{e}");
        let Some(key) = s else { panic!() };
        let other = peer_proof::server_info(&key, PEER_PROTOCOL, &[1; 32], &[3; 32]);
        let mut replayed = plain[..plain.len() - 2].to_vec();
        replayed.extend_from_slice(format!("Authentication-Info: {other}\r\n\r\n").as_bytes());
        let e = dialer.on_answer(&replayed, &mut || None).unwrap_err();
        assert!(e.contains("did not prove"), "{e}");
    }

    proptest::proptest! {
        /// Arbitrary answers never panic a dialer in either state, and never
        /// upgrade one that demands the secret; an arbitrary Authorization
        /// is never accepted by the server.
        #[test]
        fn arbitrary_bytes_prove_nothing(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let s = secret("a-cluster-secret-of-32-bytes....");
            let mut dialer = Dialer::new(PEER_PROTOCOL, "h", "u", s.clone());
            let first = dialer.on_answer(&bytes, &mut || Some([2; 32]));
            let up = matches!(first, Ok(Step::Up { .. }));
            proptest::prop_assert!(!up, "upgraded without a challenge");
            let challenge = format!(
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {}\r\n\r\n",
                peer_proof::challenge(&[1; 32])
            );
            let mut dialer = Dialer::new(PEER_PROTOCOL, "h", "u", s.clone());
            let step = dialer.on_answer(challenge.as_bytes(), &mut || Some([2; 32]));
            let sent = matches!(step, Ok(Step::Send { .. }));
            proptest::prop_assert!(sent, "no proof sent");
            let second = dialer.on_answer(&bytes, &mut || None);
            let up = matches!(second, Ok(Step::Up { .. }));
            proptest::prop_assert!(!up, "upgraded without the server's proof");
            let gate = decide(s.as_ref(), PEER_PROTOCOL, &mut Some([1; 32]), Some(&bytes), [3; 32]);
            let refused = matches!(gate, Gate::Refused(..));
            proptest::prop_assert!(refused, "arbitrary bytes accepted");
        }
    }
}
