//! The node's base URL and the `/v0` request targets the clients send.
//!
//! Keys are bytes; in a query they are percent-encoded (docs/API.md,
//! "Requests": query values are percent-decoded, `+` stays `+`). Every byte
//! outside the RFC 3986 "unreserved" set is escaped, so `+`, `&`, `=`, `%`,
//! `/`, spaces and non-UTF-8 bytes all survive the trip.

use std::fmt;

/// The port used when the URL names none (plain HTTP).
pub const HTTP_PORT_DEFAULT: u16 = 80;
/// The port used when an `https://` URL names none.
pub const HTTPS_PORT_DEFAULT: u16 = 443;

/// Why a `--url` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Only `http://` and `https://` are spoken.
    #[error("only http:// and https:// URLs are supported, got {0:?}")]
    Scheme(String),
    /// No host between `http://` and the port or path.
    #[error("no host in URL {0:?}")]
    Host(String),
    /// The port is not a number in 1..=65535.
    #[error("bad port in URL {0:?}")]
    Port(String),
    /// The node serves `/v0` at the root; a path prefix is not supported.
    #[error("URL {0:?} has a path; give only http://HOST[:PORT]")]
    Path(String),
}

/// `http://HOST[:PORT]`, the address of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// Host name or address as written (IPv6 keeps its brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `https://`: TLS, verified against `--tls-ca` ([`super::tls`]).
    pub https: bool,
}

impl BaseUrl {
    /// Parses `http://HOST[:PORT][/]`.
    pub fn parse(url: &str) -> Result<BaseUrl, UrlError> {
        let (rest, https) = match url.strip_prefix("https://") {
            Some(rest) => (rest, true),
            None => (
                url.strip_prefix("http://")
                    .ok_or_else(|| UrlError::Scheme(url.to_string()))?,
                false,
            ),
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, ""),
        };
        if !path.is_empty() && path != "/" {
            return Err(UrlError::Path(url.to_string()));
        }
        // A bracketed IPv6 literal may contain ':'; the port follows the ']'.
        let port_colon = match authority.rfind(']') {
            Some(bracket) => authority[bracket..].find(':').map(|i| bracket + i),
            None => authority.rfind(':'),
        };
        let (host, port) = match port_colon {
            Some(colon) => {
                let port = authority[colon + 1..]
                    .parse::<u16>()
                    .ok()
                    .filter(|&p| p != 0)
                    .ok_or_else(|| UrlError::Port(url.to_string()))?;
                (&authority[..colon], port)
            }
            None if https => (authority, HTTPS_PORT_DEFAULT),
            None => (authority, HTTP_PORT_DEFAULT),
        };
        if host.is_empty() || host == "[]" {
            return Err(UrlError::Host(url.to_string()));
        }
        Ok(BaseUrl {
            host: host.to_string(),
            port,
            https,
        })
    }

    /// `HOST:PORT`, for `TcpStream::connect` and the `Host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// True for the RFC 3986 unreserved characters, the only ones sent as is.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

/// Percent-encodes `bytes` for a query value (upper-case hex escapes).
pub fn percent_encode(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() * 3);
    for &byte in bytes {
        if is_unreserved(byte) {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

/// Builds `path?name=value&…`, percent-encoding every value; names are
/// written as given (they are fixed ASCII words such as `id`).
pub fn target(path: &str, query: &[(&str, &[u8])]) -> String {
    let mut out = String::from(path);
    for (i, (name, value)) in query.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(name);
        out.push('=');
        out.push_str(&percent_encode(value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unreserved characters pass, everything else is escaped, including `+`.
    #[test]
    fn percent_encode_escapes_all_but_unreserved() {
        assert_eq!(percent_encode(b"aZ09-._~"), "aZ09-._~");
        assert_eq!(percent_encode(b"a b+c/d&e=f%"), "a%20b%2Bc%2Fd%26e%3Df%25");
        assert_eq!(percent_encode(&[0x00, 0x0a, 0xff]), "%00%0A%FF");
        assert_eq!(percent_encode(b""), "");
    }

    /// Every byte value encodes to something a strict decoder maps back.
    #[test]
    fn percent_encode_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        let encoded = percent_encode(&all);
        let mut decoded = Vec::new();
        let bytes = encoded.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                decoded.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                assert!(is_unreserved(bytes[i]));
                decoded.push(bytes[i]);
                i += 1;
            }
        }
        assert_eq!(decoded, all);
    }

    /// Query values are encoded and joined with `?` then `&`.
    #[test]
    fn target_builds_query() {
        assert_eq!(target("/v0/status", &[]), "/v0/status");
        assert_eq!(
            target("/v0/entity", &[("id", b"a/b"), ("ack", b"1")]),
            "/v0/entity?id=a%2Fb&ack=1"
        );
    }

    /// Host, port, default port, IPv6 and trailing slash are understood.
    #[test]
    fn base_url_parses() {
        let url = BaseUrl::parse("http://127.0.0.1:19234").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("127.0.0.1", 19234));
        assert_eq!(url.authority(), "127.0.0.1:19234");
        let url = BaseUrl::parse("http://localhost/").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("localhost", 80));
        let url = BaseUrl::parse("http://[::1]:8080").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("[::1]", 8080));
        let url = BaseUrl::parse("http://[::1]").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("[::1]", 80));
    }

    /// Bad schemes, hosts, ports and paths are errors, never panics.
    #[test]
    fn base_url_rejects_bad_input() {
        for (url, want) in [
            ("ftp://h:1", UrlError::Scheme("ftp://h:1".into())),
            ("h:1", UrlError::Scheme("h:1".into())),
            ("http://", UrlError::Host("http://".into())),
            ("http://:80", UrlError::Host("http://:80".into())),
            ("http://h:", UrlError::Port("http://h:".into())),
            ("http://h:0", UrlError::Port("http://h:0".into())),
            ("http://h:65536", UrlError::Port("http://h:65536".into())),
            ("http://h:x", UrlError::Port("http://h:x".into())),
            ("http://h:1/v0", UrlError::Path("http://h:1/v0".into())),
        ] {
            assert_eq!(BaseUrl::parse(url), Err(want), "{url}");
        }
    }
}
