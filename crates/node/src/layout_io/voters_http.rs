//! The proposer's blocking calls over HTTP (`crate::cluster::propose::Voters`) and
//! whether an added node answers (`crate::cluster::change_request::Reach`).
//!
//! # Rules
//! - A voter is asked with `POST /v0/internal/layout`, the request's
//!   `crate::cluster::agreement_wire` bytes as the body, dialled like a cluster
//!   range's peer (`crate::range::peer_auth`: over TLS with `--tls-ca`,
//!   the cluster secret's proof bound to [`LAYOUT_PROTOCOL`]). Only a 200
//!   whose body decodes as a reply counts as an answer.
//! - This node, when it is a voter, is asked directly (`crate::cluster::learn`),
//!   not over HTTP.
//! - An added node is asked `GET /v0/status`; what it answers (or that it
//!   did not) is decided on by `crate::cluster::added_identity`.
//! - Every call is bounded by [`LAYOUT_CALL_TIMEOUT`] per socket operation
//!   (connect, each read, each write).

use crate::auth::secret::ClusterSecret;
use crate::cluster::added_identity::{Heard, Mode as IdentityMode};
use crate::cluster::agreement_wire::{LAYOUT_PROTOCOL, MESSAGE_BYTES_MAX, Reply, Request};
use crate::cluster::change_request::Reach;
use crate::cluster::learn;
use crate::cluster::membership::Membership;
use crate::cluster::propose::Voters;
use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// The bound on each socket operation of one call to a node.
pub const LAYOUT_CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// The internal layout endpoint.
pub const INTERNAL_LAYOUT_PATH: &str = "/v0/internal/layout";

/// The calls of a proposer (or the gossip) on node `membership`.
pub struct HttpVoters<'a> {
    /// This node's membership (its own voter).
    pub membership: &'a Membership,
    /// The TLS client configuration, with `--tls-ca`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The cluster secret, when the cluster has one.
    pub secret: Option<&'a ClusterSecret>,
    /// The rule deciding on an added node's answer (planted only in the
    /// tests' negative controls).
    pub identity_mode: IdentityMode,
}

/// A response's status and body.
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body, whole.
    pub body: Vec<u8>,
}

impl HttpVoters<'_> {
    /// One exchange with the node at `url`: `method path` with `body`.
    fn exchange(
        &self,
        url: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<Response, String> {
        exchange(url, method, path, body, self.tls.clone(), self.secret)
    }
}

/// One exchange with the node at `url` as a peer: `method path` with
/// `body`, over TLS with `tls` for an `https` URL, proving `secret` (bound
/// to [`LAYOUT_PROTOCOL`]) when the node asks for it.
pub fn exchange(
    url: &str,
    method: &str,
    path: &str,
    body: &[u8],
    tls: Option<Arc<rustls::ClientConfig>>,
    secret: Option<&ClusterSecret>,
) -> Result<Response, String> {
    {
        let host = crate::cluster::dial_address(url);
        let addr = host
            .to_socket_addrs()
            .map_err(|e| format!("resolve {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("no address for {host}"))?;
        let sock = TcpStream::connect_timeout(&addr, LAYOUT_CALL_TIMEOUT)
            .map_err(|e| format!("connect {host}: {e}"))?;
        sock.set_read_timeout(Some(LAYOUT_CALL_TIMEOUT))
            .and_then(|()| sock.set_write_timeout(Some(LAYOUT_CALL_TIMEOUT)))
            .and_then(|()| sock.set_nodelay(true))
            .map_err(|e| format!("socket: {e}"))?;
        let tls = if url.starts_with("https://") {
            tls
        } else {
            None
        };
        let request = |authorization: Option<&str>| {
            let mut head = format!(
                "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n",
                body.len()
            );
            if let Some(value) = authorization {
                head.push_str(&format!("Authorization: {value}\r\n"));
            }
            head.push_str("\r\n");
            let mut bytes = head.into_bytes();
            bytes.extend_from_slice(body);
            bytes
        };
        let (mut reader, head) = crate::range::peer_auth::open_bytes(
            sock,
            &host,
            LAYOUT_CALL_TIMEOUT,
            tls,
            secret,
            LAYOUT_PROTOCOL,
            &request,
        )?;
        let (status, length) = status_and_length(&head);
        if length > MESSAGE_BYTES_MAX {
            return Err(format!("{url} answered {length} bytes"));
        }
        let mut body = vec![0u8; length];
        reader
            .read_exact(&mut body)
            .map_err(|e| format!("{url}: body: {e}"))?;
        Ok(Response { status, body })
    }
}

/// The status code and `Content-Length` of a response head (0 when absent).
fn status_and_length(head: &[u8]) -> (u16, usize) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    (status, length)
}

impl Voters for HttpVoters<'_> {
    fn call(&self, url: &str, request: &Request) -> Option<Reply> {
        if url == self.membership.self_url() {
            return match learn::serve(self.membership, request.clone()) {
                Ok(reply) => Some(reply),
                Err(e) => {
                    tracing::warn!(error = %e, "layout agreement: this node's acceptor failed");
                    None
                }
            };
        }
        let response = self
            .exchange(url, "POST", INTERNAL_LAYOUT_PATH, &request.encode())
            .map_err(|e| tracing::debug!(voter = url, error = %e, "layout call failed"))
            .ok()?;
        if response.status != 200 {
            tracing::debug!(voter = url, status = response.status, "layout call refused");
            return None;
        }
        Reply::decode(&response.body).ok()
    }
}

impl Reach for HttpVoters<'_> {
    fn introduce(&self, url: &str) -> Heard {
        match self.exchange(url, "GET", "/v0/status", b"") {
            Ok(r) => Heard::Status {
                code: r.status,
                body: r.body,
            },
            Err(why) => Heard::Nothing(why),
        }
    }

    fn identity_mode(&self) -> IdentityMode {
        self.identity_mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head's status and length, in any case and spacing; absent ones
    /// read as 0.
    #[test]
    fn head_fields() {
        let head = b"HTTP/1.1 409 Conflict\r\ncontent-LENGTH:  17\r\n\r\n";
        assert_eq!(status_and_length(head), (409, 17));
        assert_eq!(status_and_length(b"HTTP/1.1 200 OK\r\n\r\n"), (200, 0));
        assert_eq!(status_and_length(b"garbage"), (0, 0));
    }
}
