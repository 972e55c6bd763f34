//! TLS for the node's listener, its peer links and the sync sessions
//! (rustls with the `ring` provider, driven by the node's own threads).
//!
//! - [`load`]: PEM files to rustls server and client configurations.
//! - [`transport`]: a non-blocking stream, plain TCP or TLS, for the `mio`
//!   loops (accepted connections and peer links).
//! - [`blocking`]: a blocking stream, plain TCP or TLS, for the sync
//!   sessions and the command-line clients.
//! - [`reload`]: replacing the certificate without a restart (SIGHUP or a
//!   changed file).

pub mod blocking;
pub mod load;
pub mod reload;
pub mod transport;

pub use load::TlsError;
pub use reload::NodeTls;

/// The URL scheme of cluster members: `https` when the node speaks TLS.
pub fn scheme(tls: bool) -> &'static str {
    if tls { "https" } else { "http" }
}

/// `host:port[/...]` of an `http://` or `https://` URL, or `url` unchanged.
pub fn strip_scheme(url: &str) -> &str {
    url.strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url)
}

/// Validates `--tls-cert`, `--tls-key` and `--tls-ca` together: the
/// certificate and key go together, and a CA needs them (a node presents
/// its own certificate to its peers).
pub fn resolve_files(
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
    ca: Option<std::path::PathBuf>,
) -> Result<Option<reload::TlsFiles>, String> {
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(reload::TlsFiles { cert, key, ca })),
        (None, None) if ca.is_some() => {
            Err("--tls-ca needs --tls-cert and --tls-key (the node's own certificate)".into())
        }
        (None, None) => Ok(None),
        _ => Err("--tls-cert and --tls-key go together".into()),
    }
}

/// Checks the member URLs' scheme against TLS: `https://` with TLS,
/// `http://` without. A single node's URL made from `--listen`
/// (`defaulted`) gets the right scheme. A cluster with TLS needs
/// `--tls-ca`: peers dial the TLS listener and must verify it.
pub fn check_member_urls(
    urls: &mut [String],
    tls: Option<&reload::TlsFiles>,
    defaulted: bool,
) -> Result<(), String> {
    let want = scheme(tls.is_some());
    for url in urls.iter_mut() {
        if defaulted && let Some(rest) = url.strip_prefix("http://") {
            *url = format!("{want}://{rest}");
        }
        if !url.starts_with(&format!("{want}://")) {
            return Err(format!(
                "member URL {url:?} must start with {want}:// (TLS is {})",
                if tls.is_some() { "on" } else { "off" }
            ));
        }
    }
    if urls.len() > 1 && tls.is_some_and(|t| t.ca.is_none()) {
        return Err(
            "a cluster with --tls-cert needs --tls-ca: nodes dial each other over TLS and verify each other against it"
                .into(),
        );
    }
    Ok(())
}

/// Why a peer or sync upgrade on `stream` is refused, if it is: with
/// `--tls-ca`, only a connection whose certificate the CA verified may
/// become a peer session (a client of the TLS listener need not present one).
pub fn refuse_upgrade(
    tls: Option<&NodeTls>,
    stream: &transport::Transport,
) -> Option<&'static str> {
    match tls {
        Some(tls) if tls.verifies_peers() && !stream.peer_verified() => {
            Some("a peer upgrade needs a certificate verified by the cluster CA")
        }
        _ => None,
    }
}

#[cfg(test)]
mod transport_tests;
