//! The upgrade handshake that turns an HTTP connection into a peer-protocol
//! connection (`docs/FORMAT.md`, "Peer frame", "Handshake").
//!
//! Peers share the port that serves the HTTP API, so a connecting node
//! speaks HTTP/1.1 first: `GET /v0/peer` with `Connection: Upgrade` and
//! `Upgrade: ataman-peer/1`. The server answers `101 Switching Protocols`;
//! every byte after the two heads is [`super::frame`]s. The server side
//! reads the request with the ordinary request parser, which reports the
//! `Upgrade` header in `RequestHead::upgrade`.

/// The peer protocol, as the `Upgrade` headers name it ("Peer frame", "Handshake").
pub const PEER_PROTOCOL: &str = "ataman-peer/1";

/// The sync protocol of anti-entropy, as the `Upgrade` headers name it
/// ("Sync frame"); it shares the peer protocol's handshake.
pub const SYNC_PROTOCOL: &str = "ataman-sync/1";

/// The request target of the upgrade request ("Handshake").
pub const PEER_PATH: &str = "/v0/peer";

/// The header in which a connecting peer names itself (its URL in
/// `--cluster`; "Handshake").
pub const PEER_HEADER: &str = "X-Ataman-Peer";

/// The header in which a connecting peer names the layout version it
/// coordinates with (the newest it knows). A node that knows a newer one
/// refuses the upgrade (409) and every request on a connection that
/// named an older one (the fence, docs/ARCHITECTURE.md "Membership").
pub const LAYOUT_HEADER: &str = "X-Ataman-Layout";

/// `request` (an upgrade request) naming layout version `version`.
pub fn with_layout(request: Vec<u8>, version: u64) -> Vec<u8> {
    let mut out = request;
    // Before the blank line that ends the head.
    let at = out.len().saturating_sub(2);
    let header = format!("{LAYOUT_HEADER}: {version}\r\n");
    out.splice(at..at, header.bytes());
    out
}

/// Largest response head a connecting peer waits for, bytes; a longer one
/// is an error rather than a buffer that grows without bound ("Handshake").
pub const UPGRADE_RESPONSE_BYTES_MAX: usize = 8 * 1024;

/// Most headers in the response head ("Handshake").
pub const UPGRADE_RESPONSE_HEADERS_MAX: usize = 32;

/// The upgrade request a connecting peer sends: `GET /v0/peer HTTP/1.1`,
/// Host, `Connection: Upgrade`, `Upgrade: ataman-peer/1`, and
/// `X-Ataman-Peer: <self_url>`.
///
/// `host` and `self_url` come from the configuration and must not contain
/// CR or LF (debug-asserted).
pub fn upgrade_request(host: &str, self_url: &str) -> Vec<u8> {
    upgrade_request_for(PEER_PROTOCOL, host, self_url)
}

/// The upgrade request for `protocol` (the peer protocol, or the sync
/// protocol of anti-entropy, "Sync frame"), otherwise as [`upgrade_request`].
pub fn upgrade_request_for(protocol: &str, host: &str, self_url: &str) -> Vec<u8> {
    debug_assert!(!host.contains(['\r', '\n']), "CR or LF in host");
    debug_assert!(!self_url.contains(['\r', '\n']), "CR or LF in self_url");
    format!(
        "GET {PEER_PATH} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: {protocol}\r\n{PEER_HEADER}: {self_url}\r\n\r\n"
    )
    .into_bytes()
}

/// The server's answer: `HTTP/1.1 101 Switching Protocols` with
/// `Connection: Upgrade` and `Upgrade: ataman-peer/1`.
pub fn upgrade_response() -> Vec<u8> {
    upgrade_response_for(PEER_PROTOCOL)
}

/// The server's 101 switching to `protocol`.
pub fn upgrade_response_for(protocol: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {protocol}\r\n\r\n"
    )
    .into_bytes()
}

/// Parses the answer to an upgrade request.
///
/// `Ok(None)`: the head is not complete yet. `Ok(Some(consumed))`: a 101
/// whose `Upgrade` header names [`PEER_PROTOCOL`]; the bytes after the first
/// `consumed` belong to the peer protocol. `Err` names what the peer
/// answered instead (`"peer answered 400: Bad Request"`) or why the answer
/// is not HTTP.
pub fn parse_upgrade_response(buf: &[u8]) -> Result<Option<usize>, String> {
    parse_upgrade_response_for(buf, PEER_PROTOCOL)
}

/// Parses the answer to an upgrade request for `protocol`, as
/// [`parse_upgrade_response`] does for the peer protocol.
pub fn parse_upgrade_response_for(buf: &[u8], protocol: &str) -> Result<Option<usize>, String> {
    let mut headers = [httparse::EMPTY_HEADER; UPGRADE_RESPONSE_HEADERS_MAX];
    let mut response = httparse::Response::new(&mut headers);
    let consumed = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > UPGRADE_RESPONSE_BYTES_MAX {
                return Err(format!(
                    "peer's answer head is over {UPGRADE_RESPONSE_BYTES_MAX} bytes"
                ));
            }
            return Ok(None);
        }
        Err(e) => return Err(format!("peer's answer is not HTTP: {e}")),
    };
    if consumed > UPGRADE_RESPONSE_BYTES_MAX {
        return Err(format!(
            "peer's answer head is over {UPGRADE_RESPONSE_BYTES_MAX} bytes"
        ));
    }
    let code = response.code.unwrap_or(0);
    let reason = response.reason.unwrap_or("");
    if code != 101 {
        return Err(format!("peer answered {code}: {reason}"));
    }
    let upgrade = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("upgrade"))
        .map(|h| h.value.trim_ascii());
    match upgrade {
        Some(value) if value.eq_ignore_ascii_case(protocol.as_bytes()) => Ok(Some(consumed)),
        Some(value) => Err(format!(
            "peer answered 101 but switched to {:?}, not {protocol}",
            String::from_utf8_lossy(value)
        )),
        None => Err(format!(
            "peer answered 101 without an Upgrade header naming {protocol}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{Limits, Parsed, parse_head};

    /// The request is one the node's own parser reads as an upgrade to the
    /// peer protocol on the peer path.
    #[test]
    fn request_parses_as_an_upgrade() {
        let bytes = upgrade_request("10.0.0.2:19234", "http://10.0.0.1:19234");
        let limits = Limits {
            header_bytes_max: 4096,
            body_bytes_max: 0,
        };
        let Parsed::Head(head) = parse_head(&bytes, limits) else {
            panic!("not a head: {}", String::from_utf8_lossy(&bytes));
        };
        assert_eq!(head.path, PEER_PATH.as_bytes());
        assert_eq!(head.upgrade, Some(PEER_PROTOCOL.as_bytes()));
        assert_eq!(head.head_bytes, bytes.len());
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("\r\nHost: 10.0.0.2:19234\r\n"), "{text}");
        assert!(
            text.contains("\r\nX-Ataman-Peer: http://10.0.0.1:19234\r\n"),
            "{text}"
        );
    }

    /// Our own response is accepted, and what follows it is left to the frames.
    /// The layout header goes inside the head, which still parses.
    #[test]
    fn layout_header_in_the_head() {
        let bytes = with_layout(upgrade_request("h:1", "http://a:1"), 7);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.ends_with("\r\nX-Ataman-Layout: 7\r\n\r\n"), "{text}");
        let limits = crate::http::request::Limits {
            header_bytes_max: 4096,
            body_bytes_max: 0,
        };
        match crate::http::request::parse_head(&bytes, limits) {
            crate::http::request::Parsed::Head(h) => assert_eq!(h.layout_version, Some(7)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn response_round_trip() {
        let mut bytes = upgrade_response();
        let head = bytes.len();
        bytes.extend_from_slice(b"\x01\x02frames");
        assert_eq!(parse_upgrade_response(&bytes), Ok(Some(head)));
        for cut in 0..head {
            assert_eq!(parse_upgrade_response(&bytes[..cut]), Ok(None), "cut {cut}");
        }
    }

    /// A refusal names the status and reason; a 101 to something else, a
    /// 101 without Upgrade, garbage and an endless head are errors.
    #[test]
    fn refusals_are_named() {
        let e = parse_upgrade_response(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .unwrap_err();
        assert_eq!(e, "peer answered 400: Bad Request");
        let e = parse_upgrade_response(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        )
        .unwrap_err();
        assert!(e.contains("websocket"), "{e}");
        let e = parse_upgrade_response(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").unwrap_err();
        assert!(e.contains("without an Upgrade"), "{e}");
        let e = parse_upgrade_response(b"\x00\x01\x02\r\n\r\n").unwrap_err();
        assert!(e.contains("not HTTP"), "{e}");
        let mut endless = b"HTTP/1.1 101 Switching Protocols\r\nX: ".to_vec();
        endless.extend(vec![b'a'; UPGRADE_RESPONSE_BYTES_MAX]);
        let e = parse_upgrade_response(&endless).unwrap_err();
        assert!(e.contains("over"), "{e}");
        // Header names and the protocol token are case-insensitive.
        assert_eq!(
            parse_upgrade_response(b"HTTP/1.1 101 OK\r\nupgrade:  ATAMAN-PEER/1 \r\n\r\n"),
            Ok(Some(45))
        );
    }
}
