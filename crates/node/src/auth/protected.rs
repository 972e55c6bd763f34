//! Protected mode: a node reachable beyond the loopback interface refuses
//! to start without authentication, unless told `--allow-unauthenticated`.
//! Pure rules over the options.

/// What the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Exposure<'a> {
    /// `--listen`.
    pub listen: &'a str,
    /// `--resp-listen`.
    pub resp_listen: Option<&'a str>,
    /// The member URLs of `--cluster`.
    pub cluster: &'a [String],
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
fn url_host_port(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    rest.split('/').next().unwrap_or(rest)
}

/// `Err` names what is exposed and the options that fix it; `Ok(true)`
/// when the node starts exposed because of `--allow-unauthenticated`
/// (the caller prints the banner).
pub fn check(e: &Exposure<'_>) -> Result<bool, String> {
    let mut exposed_clients = vec![("--listen", e.listen)];
    if let Some(resp) = e.resp_listen {
        exposed_clients.push(("--resp-listen", resp));
    }
    exposed_clients.retain(|(_, addr)| !is_loopback(addr));
    let remote_member = e
        .cluster
        .iter()
        .find(|u| !is_loopback(url_host_port(u)))
        .filter(|_| e.cluster.len() > 1);
    let client_gap = !e.tokens && !exposed_clients.is_empty();
    let peer_gap = !e.peers_verified && remote_member.is_some();
    if e.allow_unauthenticated {
        return Ok(client_gap || peer_gap);
    }
    if let Some((option, addr)) = exposed_clients.first().filter(|_| client_gap) {
        return Err(format!(
            "{option} {addr} is not a loopback address and no --auth-token-file is given: \
             anyone who can reach it could read and write every key. Give --auth-token-file FILE \
             (docs/SECURITY.md), or --allow-unauthenticated to run open anyway"
        ));
    }
    if let Some(url) = remote_member.filter(|_| peer_gap) {
        return Err(format!(
            "the cluster has a member on a non-loopback address ({url}) and no \
             --cluster-secret-file or --tls-ca is given: anyone who can reach a node could act as \
             its peer. Give --cluster-secret-file FILE (the same on every node, docs/SECURITY.md) \
             or --tls-ca with node certificates, or \
             --allow-unauthenticated to run open anyway"
        ));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposure<'a>(listen: &'a str, cluster: &'a [String]) -> Exposure<'a> {
        Exposure {
            listen,
            resp_listen: None,
            cluster,
            tokens: false,
            peers_verified: false,
            allow_unauthenticated: false,
        }
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

    #[test]
    fn refusals_name_the_options() {
        let one = vec!["http://0.0.0.0:1".to_owned()];
        let e = check(&exposure("0.0.0.0:1", &one)).unwrap_err();
        assert!(e.contains("--listen 0.0.0.0:1"), "{e}");
        assert!(
            e.contains("--auth-token-file") && e.contains("--allow-unauthenticated"),
            "{e}"
        );
        let local = vec!["http://127.0.0.1:1".to_owned()];
        assert_eq!(check(&exposure("127.0.0.1:1", &local)), Ok(false));
        let mut resp = exposure("127.0.0.1:1", &local);
        resp.resp_listen = Some("0.0.0.0:6379");
        assert!(
            check(&resp)
                .unwrap_err()
                .contains("--resp-listen 0.0.0.0:6379")
        );
        let three: Vec<String> = (1..=3).map(|i| format!("http://10.0.0.{i}:1")).collect();
        let mut e3 = exposure("10.0.0.1:1", &three);
        e3.tokens = true;
        let e = check(&e3).unwrap_err();
        assert!(
            e.contains("--cluster-secret-file") && e.contains("http://10.0.0.1:1"),
            "{e}"
        );
        e3.peers_verified = true;
        assert_eq!(check(&e3), Ok(false));
        let mut open = exposure("0.0.0.0:1", &three);
        open.allow_unauthenticated = true;
        assert_eq!(check(&open), Ok(true));
        // A single node's own URL needs no secret.
        let mut single = exposure("10.0.0.1:1", &three[..1]);
        single.tokens = true;
        assert_eq!(check(&single), Ok(false));
    }
}
