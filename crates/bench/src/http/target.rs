//! The target of a run: `http://HOST[:PORT][/PREFIX]` resolved once into a
//! socket address, the `Host` header and the path prefix of every request.

use crate::error::{BenchError, Result};
use std::net::{SocketAddr, ToSocketAddrs};

/// Port used when the URL names none.
const HTTP_PORT_DEFAULT: u16 = 80;

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// Resolved address (the first one the name resolves to).
    pub addr: SocketAddr,
    /// Value of the `Host` header (as written in the URL).
    pub host: String,
    /// Path prefix without a trailing `/` (empty for `http://h:p/`).
    pub prefix: String,
}

impl Target {
    /// Parses and resolves `url`; only plain `http://` is supported.
    pub fn parse(url: &str) -> Result<Target> {
        let bad = |why: &str| BenchError::InvalidArgument(format!("--url {url:?}: {why}"));
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        if path.contains('?') || path.contains('#') {
            return Err(bad("no query or fragment: the workload writes the query"));
        }
        let with_port = if has_port(authority) {
            authority.to_string()
        } else {
            format!("{authority}:{HTTP_PORT_DEFAULT}")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve: {e}")))?
            .next()
            .ok_or_else(|| bad("the name resolves to no address"))?;
        Ok(Target {
            addr,
            host: authority.to_string(),
            prefix: path.trim_end_matches('/').to_string(),
        })
    }
}

/// Whether `host[:port]` or `[v6][:port]` carries a port.
fn has_port(authority: &str) -> bool {
    match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host, port and prefix come out of the URL; https and queries are refused.
    #[test]
    fn parses_urls() {
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(t.addr.port(), 8080);
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(t.prefix, "");
        let t = Target::parse("http://127.0.0.1:8080/api/").unwrap();
        assert_eq!(t.prefix, "/api");
        assert_eq!(Target::parse("http://[::1]").unwrap().addr.port(), 80);
        assert!(Target::parse("https://127.0.0.1").is_err());
        assert!(Target::parse("http://127.0.0.1/?x=1").is_err());
    }
}
