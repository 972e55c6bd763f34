//! Protected mode: a node reachable beyond the loopback interface refuses
//! to start without authentication, unless told `--allow-unauthenticated`.
//! Pure rules over the options.
//!
//! # Rules
//! 1. Every listener counts (`--listen`, `--resp-listen`): one on an
//!    address that is not loopback, without `--auth-token-file`, refuses
//!    the start, naming the listener's option.
//! 2. A node with peers (`--cluster` of more than one member, or
//!    `--join`) that may reach them or be reached by them beyond
//!    loopback (a listener that serves the peer surfaces — `--listen` —
//!    on such an address, a member URL or the `--join` seed on one),
//!    without `--cluster-secret-file` or `--tls-ca`, refuses the start,
//!    naming what is exposed and both options. The RESP listener serves
//!    no peer surface, so it counts for rule 1 only.
//! 3. `--allow-unauthenticated` starts anyway; the caller warns.
//!
//! What a running node does with a peer upgrade is decided again from its
//! live layout (`super::peer_access`): these rules only refuse to start
//! what could never be safe.

/// One address the node listens on.
#[derive(Debug, Clone, Copy)]
pub struct Listener<'a> {
    /// The option that names it (`--listen`, `--resp-listen`).
    pub option: &'static str,
    /// `HOST:PORT`.
    pub addr: &'a str,
    /// It serves the peer surfaces (`/v0/peer`, `/v0/internal/*`).
    pub serves_peers: bool,
}

/// What the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Exposure<'a> {
    /// Every address the node listens on.
    pub listeners: &'a [Listener<'a>],
    /// The member URLs of `--cluster`.
    pub cluster: &'a [String],
    /// `--join`'s seed URL.
    pub join: Option<&'a str>,
    /// `--auth-token-file` is given.
    pub tokens: bool,
    /// `--cluster-secret-file` or `--tls-ca` is given (peers prove the
    /// secret, or present a certificate the cluster CA verifies).
    pub peers_verified: bool,
    /// `--allow-unauthenticated`.
    pub allow_unauthenticated: bool,
}

/// True when `host_port` (`HOST:PORT`, `[V6]:PORT` or a bare host) names
/// only the loopback interface. A name other than `localhost` is taken as
/// reachable from elsewhere.
pub fn is_loopback(host_port: &str) -> bool {
    if let Ok(addr) = host_port.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    if let Ok(ip) = host_port.parse::<std::net::IpAddr>() {
        return ip.is_loopback();
    }
    let host = match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host and port of a member URL (`http://HOST:PORT[/...]`).
pub fn url_host_port(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    rest.split('/').next().unwrap_or(rest)
}

/// Why peers could reach this node, or it them, beyond loopback (rule 2):
/// the first listener serving peers, member or seed on such an address.
fn peer_exposure(e: &Exposure<'_>) -> Option<String> {
    if e.cluster.len() <= 1 && e.join.is_none() {
        return None; // no peer to reach or be reached by
    }
    if let Some(l) = e
        .listeners
        .iter()
        .find(|l| l.serves_peers && !is_loopback(l.addr))
    {
        return Some(format!(
            "{} {} is not a loopback address and the node has peers",
            l.option, l.addr
        ));
    }
    if let Some(url) = e.cluster.iter().find(|u| !is_loopback(url_host_port(u))) {
        return Some(format!(
            "the cluster has a member on a non-loopback address ({url})"
        ));
    }
    e.join
        .filter(|seed| !is_loopback(url_host_port(seed)))
        .map(|seed| format!("the --join seed {seed} is not on a loopback address"))
}

/// `Err` names what is exposed and the options that fix it; `Ok(true)`
/// when the node starts exposed because of `--allow-unauthenticated`
/// (the caller prints the banner).
pub fn check(e: &Exposure<'_>) -> Result<bool, String> {
    let exposed_client = e
        .listeners
        .iter()
        .find(|l| !is_loopback(l.addr))
        .filter(|_| !e.tokens);
    let exposed_peers = peer_exposure(e).filter(|_| !e.peers_verified);
    if e.allow_unauthenticated {
        return Ok(exposed_client.is_some() || exposed_peers.is_some());
    }
    if let Some(l) = exposed_client {
        return Err(format!(
            "{} {} is not a loopback address and no --auth-token-file is given: \
             anyone who can reach it could read and write every key. Give --auth-token-file FILE \
             (docs/SECURITY.md), or --allow-unauthenticated to run open anyway",
            l.option, l.addr
        ));
    }
    if let Some(what) = exposed_peers {
        return Err(format!(
            "{what}, and no --cluster-secret-file or --tls-ca is given: anyone who can reach \
             a node could act as its peer (/v0/peer, /v0/internal/*) and read every version it \
             holds. Give --cluster-secret-file FILE (the same on every node, docs/SECURITY.md) \
             or --tls-ca with node certificates, or --allow-unauthenticated to run open anyway"
        ));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTTP_LOCAL: Listener<'static> = Listener {
        option: "--listen",
        addr: "127.0.0.1:1",
        serves_peers: true,
    };
    const HTTP_ANY: Listener<'static> = Listener {
        option: "--listen",
        addr: "0.0.0.0:1",
        serves_peers: true,
    };
    const RESP_ANY: Listener<'static> = Listener {
        option: "--resp-listen",
        addr: "0.0.0.0:6379",
        serves_peers: false,
    };

    fn exposure<'a>(listeners: &'a [Listener<'a>], cluster: &'a [String]) -> Exposure<'a> {
        Exposure {
            listeners,
            cluster,
            join: None,
            tokens: false,
            peers_verified: false,
            allow_unauthenticated: false,
        }
    }

    fn urls(hosts: &[&str]) -> Vec<String> {
        hosts.iter().map(|h| format!("http://{h}:1")).collect()
    }

    #[test]
    fn loopback_addresses() {
        for a in [
            "127.0.0.1:1",
            "127.1.2.3:80",
            "[::1]:5",
            "localhost:9",
            "LOCALHOST",
            "::1",
        ] {
            assert!(is_loopback(a), "{a}");
        }
        for a in [
            "0.0.0.0:1",
            "10.0.0.1:2",
            "[::]:3",
            "example.com:4",
            "node1",
            ":80",
        ] {
            assert!(!is_loopback(a), "{a}");
        }
    }

    /// The reported case: `--listen 0.0.0.0:P` with tokens and loopback
    /// member URLs started, and anyone could act as its peer. The
    /// listening address counts, not only the member URLs.
    #[test]
    fn exposed_listener_with_loopback_members_needs_a_peer_proof() {
        let members = urls(&["127.0.0.1", "127.0.0.2"]);
        let mut e = exposure(&[HTTP_ANY], &members);
        e.tokens = true;
        let why = check(&e).unwrap_err();
        for part in [
            "--listen 0.0.0.0:1",
            "--cluster-secret-file",
            "--tls-ca",
            "--allow-unauthenticated",
        ] {
            assert!(why.contains(part), "{part}: {why}");
        }
        e.peers_verified = true;
        assert_eq!(check(&e), Ok(false));
    }

    /// Every combination of where the node listens, where its peers are,
    /// and what it was given: the outcome of each, from the rules.
    #[test]
    fn the_exposure_matrix() {
        let alone = urls(&["127.0.0.1"]);
        let local = urls(&["127.0.0.1", "127.0.0.2"]);
        let remote = urls(&["127.0.0.1", "10.0.0.2"]);
        // (listeners, members, join, tokens, peers verified, outcome):
        // Ok(exposed?) or Err(a part of the message).
        type Case<'a> = (
            &'a [Listener<'a>],
            &'a [String],
            Option<&'a str>,
            bool,
            bool,
            Result<bool, &'a str>,
        );
        let cases: [Case<'_>; 16] = [
            // Loopback everywhere: nothing to prove.
            (&[HTTP_LOCAL], &local, None, false, false, Ok(false)),
            (&[HTTP_LOCAL], &alone, None, false, false, Ok(false)),
            // Rule 1: any listener beyond loopback needs tokens.
            (
                &[HTTP_ANY],
                &alone,
                None,
                false,
                false,
                Err("--listen 0.0.0.0:1"),
            ),
            (
                &[HTTP_LOCAL, RESP_ANY],
                &local,
                None,
                false,
                true,
                Err("--resp-listen 0.0.0.0:6379"),
            ),
            // A RESP listener serves no peer: tokens are enough for it.
            (
                &[HTTP_LOCAL, RESP_ANY],
                &local,
                None,
                true,
                false,
                Ok(false),
            ),
            // Rule 2: peers beyond loopback, by listener, member or seed.
            (
                &[HTTP_ANY],
                &local,
                None,
                true,
                false,
                Err("--listen 0.0.0.0:1"),
            ),
            (
                &[HTTP_LOCAL],
                &remote,
                None,
                true,
                false,
                Err("http://10.0.0.2:1"),
            ),
            (
                &[HTTP_LOCAL],
                &alone,
                Some("http://10.0.0.9:1"),
                true,
                false,
                Err("--join seed http://10.0.0.9:1"),
            ),
            (
                &[HTTP_ANY],
                &alone,
                Some("http://127.0.0.1:2"),
                true,
                false,
                Err("--listen 0.0.0.0:1"),
            ),
            (
                &[HTTP_LOCAL],
                &alone,
                Some("http://127.0.0.1:2"),
                true,
                false,
                Ok(false),
            ),
            // A proof of the peers closes rule 2.
            (&[HTTP_ANY], &local, None, true, true, Ok(false)),
            (&[HTTP_LOCAL], &remote, None, true, true, Ok(false)),
            (
                &[HTTP_ANY],
                &alone,
                Some("http://10.0.0.9:1"),
                true,
                true,
                Ok(false),
            ),
            // Alone, without a seed: no peer to reach or be reached by.
            (&[HTTP_ANY], &alone, None, true, false, Ok(false)),
            // Rule 1 comes first.
            (
                &[HTTP_ANY],
                &remote,
                None,
                false,
                false,
                Err("--auth-token-file"),
            ),
            (
                &[HTTP_ANY],
                &remote,
                None,
                false,
                true,
                Err("--auth-token-file"),
            ),
        ];
        for (i, (listeners, members, join, tokens, verified, outcome)) in cases.iter().enumerate() {
            let mut e = exposure(listeners, members);
            e.join = *join;
            e.tokens = *tokens;
            e.peers_verified = *verified;
            let got = check(&e);
            match outcome {
                Ok(exposed) => assert_eq!(got, Ok(*exposed), "case {i}"),
                Err(part) => {
                    let why = got.expect_err(&format!("case {i} started"));
                    assert!(why.contains(part), "case {i}: {part} not in {why}");
                    assert!(why.contains("--allow-unauthenticated"), "case {i}: {why}");
                }
            }
            // Rule 3: --allow-unauthenticated starts every case, exposed
            // exactly when it would have been refused.
            e.allow_unauthenticated = true;
            assert_eq!(check(&e), Ok(outcome.is_err()), "case {i} allowed");
        }
    }
}
