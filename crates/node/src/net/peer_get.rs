//! One internal GET to a member, for a report the node merges (the
//! cluster's hot keys, its recent figures): dialled like a cluster range's
//! peer (over TLS with `--tls-ca`, the cluster secret's proof bound to the
//! endpoint's protocol when the peer challenges), within the replication
//! timeout, the body read whole up to a bound.

use crate::state::NodeShared;
use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};

/// `path`'s body at the member `host` (`host:port`), at most `bytes_max`
/// bytes; a status other than 200, a missing length or a longer body is
/// an error naming it.
pub fn get(
    shared: &NodeShared,
    host: &str,
    path: &str,
    protocol: &str,
    bytes_max: usize,
) -> Result<Vec<u8>, String> {
    let timeout = shared.config.replication_timeout;
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("resolve: {e}"))?
        .next()
        .ok_or("no address")?;
    let sock = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    sock.set_read_timeout(Some(timeout))
        .and_then(|()| sock.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("socket: {e}"))?;
    // With the secret the peer challenges a request without proof, and the
    // proof goes on the same connection: that request keeps it open.
    let challenged = shared.auth.secret.is_some();
    let request = |authorization: Option<&str>| {
        crate::range::peer_auth::internal_get(host, path, authorization, challenged)
    };
    let (mut reader, head) = crate::range::peer_auth::open(
        sock,
        host,
        timeout,
        shared.tls.as_ref().and_then(|t| t.client()),
        shared.auth.secret.as_ref(),
        protocol,
        &request,
    )?;
    let head = String::from_utf8_lossy(&head);
    let status = head.lines().next().unwrap_or_default().trim().to_owned();
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("answered {status}"));
    }
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or("answer without a Content-Length")?;
    if length > bytes_max {
        return Err(format!("report of {length} bytes, over {bytes_max}"));
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .map_err(|e| format!("report: {}", crate::range::peer_auth::io_why(&e)))?;
    Ok(body)
}

/// Every live member's part of a cluster report, in member order: this
/// node's `own` (or why it has none), each other's `path` asked with [`get`] (one after the
/// other, within the replication timeout each) and read by `check`;
/// a member that does not answer, or whose answer `check` refuses, is
/// `Err` with why, named by its URL.
pub fn each_member<T>(
    shared: &NodeShared,
    own: Result<T, String>,
    (path, protocol, bytes_max): (&str, &str, usize),
    check: impl Fn(&[u8]) -> Result<T, String>,
) -> Vec<(String, Result<T, String>)> {
    let placement = shared.placement();
    let me = placement.self_index();
    let mut own = Some(own);
    (0..placement.len())
        .filter(|&i| i == me || placement.is_live_member(i))
        .filter_map(|i| {
            let url = placement.url(i).to_owned();
            if i == me {
                return own.take().map(|own| (url, own));
            }
            let asked = get(shared, &placement.dial(i), path, protocol, bytes_max);
            Some((url, asked.and_then(|body| check(&body))))
        })
        .collect()
}
