//! A blocking HTTP/1.1 exchange over TCP, or TLS for an `https://` URL: one
//! request, one final response, one connection (`Connection: close`).

use super::response::{Response, ResponseError, read_response, read_response_prefix};
use super::url::BaseUrl;
use ataman_node::tls::blocking::BlockingStream;
use std::io::{BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Informational (1xx) answers skipped before the final one, at most.
pub const INFORMATIONAL_RESPONSES_MAX: usize = 8;

/// Why an exchange with the node failed (no valid answer was received).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The host name did not resolve.
    #[error("cannot resolve {authority}: {source}")]
    Resolve {
        /// `HOST:PORT` as given.
        authority: String,
        /// What the resolver said.
        source: std::io::Error,
    },
    /// No address of the node accepted the connection.
    #[error("cannot connect to {authority}: {source}")]
    Connect {
        /// `HOST:PORT` as given.
        authority: String,
        /// The error of the last address tried.
        source: std::io::Error,
    },
    /// Sending the request failed.
    #[error("sending the request to {authority} failed: {source}")]
    Write {
        /// `HOST:PORT` as given.
        authority: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No valid response came back.
    #[error("no valid answer from {authority}: {source}")]
    Read {
        /// `HOST:PORT` as given.
        authority: String,
        /// What went wrong while reading.
        source: ResponseError,
    },
    /// TLS could not be set up (no `--tls-ca`, a failed handshake, a
    /// certificate the CA does not vouch for).
    #[error("TLS with {authority}: {why}")]
    Tls {
        /// `HOST:PORT` as given.
        authority: String,
        /// What went wrong.
        why: String,
    },
    /// The node kept sending 1xx answers.
    #[error("more than {INFORMATIONAL_RESPONSES_MAX} informational answers from {0}")]
    TooManyInformational(String),
}

/// Formats the request head: request line, `Host`, `Connection: close`,
/// and `Content-Length` when a body is sent (always for PUT).
pub fn request_head(
    method: &str,
    target: &str,
    authority: &str,
    body_bytes: Option<usize>,
) -> Vec<u8> {
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: ataman-ctl\r\nConnection: close\r\n{}",
        super::token::header_line()
    );
    if let Some(length) = body_bytes {
        head.push_str(&format!("Content-Length: {length}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

fn connect(url: &BaseUrl, timeout: Duration) -> Result<TcpStream, ClientError> {
    let authority = url.authority();
    let addrs = authority
        .to_socket_addrs()
        .map_err(|source| ClientError::Resolve {
            authority: authority.clone(),
            source,
        })?;
    let mut last_error =
        std::io::Error::new(std::io::ErrorKind::NotFound, "the name has no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => last_error = e,
        }
    }
    Err(ClientError::Connect {
        authority,
        source: last_error,
    })
}

/// TLS over `sock` for an `https://` URL (verified against `--tls-ca`), or
/// the plain socket.
pub fn secure(
    url: &BaseUrl,
    sock: TcpStream,
    timeout: Duration,
) -> Result<BlockingStream, ClientError> {
    if !url.https {
        return Ok(BlockingStream::Plain(sock));
    }
    let tls_error = |why: String| ClientError::Tls {
        authority: url.authority(),
        why,
    };
    let config = super::tls::client_config()
        .ok_or_else(|| tls_error("an https:// URL needs --tls-ca FILE".into()))?;
    let name =
        ataman_node::tls::load::server_name(&url.host).map_err(|e| tls_error(e.to_string()))?;
    BlockingStream::connect_tls(sock, config, name, timeout).map_err(|e| tls_error(e.to_string()))
}

/// Sends one request and returns the final answer. `body` is `Some` for a
/// request with a body (PUT), even an empty one. Every socket operation is
/// bounded by `timeout`.
pub fn exchange(
    url: &BaseUrl,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    exchange_reading(url, method, target, body, timeout, None)
}

/// [`exchange`] reading at most `body_bytes_max` bytes of the answer's
/// body (the rest is left unread; the connection is closed).
pub fn exchange_prefix(
    url: &BaseUrl,
    method: &str,
    target: &str,
    timeout: Duration,
    body_bytes_max: usize,
) -> Result<Response, ClientError> {
    exchange_reading(url, method, target, None, timeout, Some(body_bytes_max))
}

fn exchange_reading(
    url: &BaseUrl,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
    timeout: Duration,
    body_bytes_max: Option<usize>,
) -> Result<Response, ClientError> {
    let authority = url.authority();
    let sock = connect(url, timeout)?;
    let write_error = |source| ClientError::Write {
        authority: authority.clone(),
        source,
    };
    sock.set_read_timeout(Some(timeout)).map_err(write_error)?;
    sock.set_write_timeout(Some(timeout)).map_err(write_error)?;
    let mut stream = secure(url, sock, timeout)?;
    let writer = &mut stream;
    let head = request_head(method, target, &authority, body.map(<[u8]>::len));
    writer.write_all(&head).map_err(write_error)?;
    if let Some(body) = body {
        writer.write_all(body).map_err(write_error)?;
    }
    writer.flush().map_err(write_error)?;
    let mut reader = BufReader::new(&mut stream);
    for _ in 0..=INFORMATIONAL_RESPONSES_MAX {
        let read = match body_bytes_max {
            None => read_response(&mut reader),
            Some(cap) => read_response_prefix(&mut reader, cap),
        };
        let response = read.map_err(|source| ClientError::Read {
            authority: authority.clone(),
            source,
        })?;
        if !(100..200).contains(&response.status) {
            return Ok(response);
        }
    }
    Err(ClientError::TooManyInformational(authority))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// The head carries Host, Connection: close and Content-Length only with a body.
    #[test]
    fn request_head_format() {
        let head = request_head("PUT", "/v0/entity?id=a", "h:1", Some(3));
        assert_eq!(
            head,
            b"PUT /v0/entity?id=a HTTP/1.1\r\nHost: h:1\r\nUser-Agent: ataman-ctl\r\nConnection: close\r\nContent-Length: 3\r\n\r\n"
        );
        let head = String::from_utf8(request_head("GET", "/v0/status", "h:1", None)).unwrap();
        assert!(!head.contains("Content-Length"));
    }

    /// Against a scripted peer: the request arrives whole, 100 is skipped, 201 returned.
    #[test]
    fn exchange_with_scripted_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let peer = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.ends_with(b"\r\n\r\nvalue") {
                let n = stream.read(&mut buf).unwrap();
                assert!(n > 0, "client closed early");
                got.extend_from_slice(&buf[..n]);
            }
            stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
            got
        });
        let url = BaseUrl::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let response = exchange(
            &url,
            "PUT",
            "/v0/entity?id=k",
            Some(b"value"),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(response.status, 201);
        let got = peer.join().unwrap();
        assert!(got.starts_with(b"PUT /v0/entity?id=k HTTP/1.1\r\n"));
    }

    /// A refused connection is a Connect error, not a panic.
    #[test]
    fn refused_connection_is_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let url = BaseUrl::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let result = exchange(&url, "GET", "/v0/status", None, Duration::from_secs(2));
        assert!(
            matches!(result, Err(ClientError::Connect { .. })),
            "{result:?}"
        );
    }
}
