//! The targets of a run: `--url` is one `http://HOST[:PORT][/PREFIX]` or a
//! comma-separated list of them (several nodes of a cluster), each resolved
//! once into a socket address, the `Host` header and the path prefix of
//! every request sent to it. Connection `i` of a phase goes to target
//! `i % targets`.

use crate::error::{BenchError, Result};
use std::net::{SocketAddr, ToSocketAddrs};

/// Port used when the URL names none.
const HTTP_PORT_DEFAULT: u16 = 80;
/// Port used when an `https://` URL names none.
const HTTPS_PORT_DEFAULT: u16 = 443;

/// Most targets one `--url` may list.
pub const TARGETS_MAX: usize = 1024;

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given (trimmed), for the report.
    pub url: String,
    /// Resolved address (the first one the name resolves to).
    pub addr: SocketAddr,
    /// Value of the `Host` header (as written in the URL).
    pub host: String,
    /// Path prefix without a trailing `/` (empty for `http://h:p/`).
    pub prefix: String,
    /// `https://`: TLS, the certificate verified against `--tls-ca` for [`Target::name`].
    pub tls: bool,
    /// The host without its port (the name the certificate must carry).
    pub name: String,
}

impl Target {
    /// Parses and resolves `url` (`http://` or `https://`).
    pub fn parse(url: &str) -> Result<Target> {
        let bad = |why: &str| BenchError::InvalidArgument(format!("--url {url:?}: {why}"));
        let (rest, tls) = match url.strip_prefix("https://") {
            Some(rest) => (rest, true),
            None => (
                url.strip_prefix("http://")
                    .ok_or_else(|| bad("only http:// and https:// URLs are supported"))?,
                false,
            ),
        };
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
        let port_default = if tls {
            HTTPS_PORT_DEFAULT
        } else {
            HTTP_PORT_DEFAULT
        };
        let (with_port, name) = if has_port(authority) {
            let name = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
            (authority.to_string(), name.to_string())
        } else {
            (format!("{authority}:{port_default}"), authority.to_string())
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve: {e}")))?
            .next()
            .ok_or_else(|| bad("the name resolves to no address"))?;
        Ok(Target {
            url: url.to_string(),
            addr,
            host: authority.to_string(),
            prefix: path.trim_end_matches('/').to_string(),
            tls,
            name,
        })
    }
}

/// Parses and resolves a comma-separated list of URLs (at least one, at
/// most [`TARGETS_MAX`]; whitespace around each is ignored).
pub fn parse_targets(urls: &str) -> Result<Vec<Target>> {
    let targets = urls
        .split(',')
        .map(|url| {
            let url = url.trim();
            if url.is_empty() {
                return Err(BenchError::InvalidArgument(format!(
                    "--url {urls:?}: an empty entry in the list"
                )));
            }
            Target::parse(url)
        })
        .collect::<Result<Vec<Target>>>()?;
    if targets.len() > TARGETS_MAX {
        return Err(BenchError::InvalidArgument(format!(
            "--url lists {} targets, at most {TARGETS_MAX}",
            targets.len()
        )));
    }
    Ok(targets)
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

    /// Host, port, prefix and TLS come out of the URL; queries and other schemes are refused.
    #[test]
    fn parses_urls() {
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(t.addr.port(), 8080);
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(t.prefix, "");
        let t = Target::parse("http://127.0.0.1:8080/api/").unwrap();
        assert_eq!(t.prefix, "/api");
        assert_eq!(Target::parse("http://[::1]").unwrap().addr.port(), 80);
        let t = Target::parse("https://127.0.0.1").unwrap();
        assert_eq!(
            (t.addr.port(), t.tls, t.name.as_str()),
            (443, true, "127.0.0.1")
        );
        let t = Target::parse("https://[::1]:9").unwrap();
        assert_eq!((t.addr.port(), t.tls, t.name.as_str()), (9, true, "[::1]"));
        assert!(!Target::parse("http://127.0.0.1").unwrap().tls);
        assert!(Target::parse("ftp://127.0.0.1").is_err());
        assert!(Target::parse("http://127.0.0.1/?x=1").is_err());
    }

    /// A comma-separated list gives one target per entry, in order; empty entries are refused.
    #[test]
    fn parses_lists() {
        let t = parse_targets("http://127.0.0.1:1, http://127.0.0.1:2/p").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].addr.port(), t[1].addr.port()), (1, 2));
        assert_eq!(t[1].url, "http://127.0.0.1:2/p");
        assert_eq!(t[1].prefix, "/p");
        assert_eq!(parse_targets("http://127.0.0.1:1").unwrap().len(), 1);
        assert!(parse_targets("http://127.0.0.1:1,").is_err());
        assert!(parse_targets("http://127.0.0.1:1,ftp://127.0.0.1:2").is_err());
        assert!(parse_targets("").is_err());
    }
}
