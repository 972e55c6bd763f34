//! The CA that `https://` node URLs are verified against: set once per
//! process from `--tls-ca` (ctl, cluster, the harness), read by every
//! exchange. Without it an `https://` URL is refused.

use ataman_node::tls::load;
use rustls::ClientConfig;
use std::path::Path;
use std::sync::{Arc, OnceLock};

static CA: OnceLock<Arc<ClientConfig>> = OnceLock::new();

/// Trusts the CA in `ca_file` for this process's `https://` exchanges
/// (a second call keeps the first CA).
pub fn set_ca(ca_file: &Path) -> Result<(), String> {
    let config = load::client_config_for_ca(ca_file).map_err(|e| format!("--tls-ca: {e}"))?;
    let _ = CA.set(config);
    Ok(())
}

/// Trusts `DIR/ca.crt` and presents `DIR/node.crt` (key `DIR/node.key`):
/// a process that talks to `--tls-ca` nodes as a peer (the fault
/// harness's replica reads). A second call keeps the first configuration.
pub fn set_certs_dir(dir: &Path) -> Result<(), String> {
    let roots = load::roots(&dir.join("ca.crt")).map_err(|e| format!("--certs-dir: {e}"))?;
    let identity = load::Identity::load(&dir.join("node.crt"), &dir.join("node.key"))
        .map_err(|e| format!("--certs-dir: {e}"))?;
    let config =
        load::client_config(&roots, Some(identity)).map_err(|e| format!("--certs-dir: {e}"))?;
    let _ = CA.set(config);
    Ok(())
}

/// The serve arguments of a node using the files of `dir` (`ca.crt`,
/// `node.crt`, `node.key`).
pub fn serve_args(dir: &Path) -> Vec<String> {
    let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
    vec![
        "--tls-cert".to_owned(),
        file("node.crt"),
        "--tls-key".to_owned(),
        file("node.key"),
        "--tls-ca".to_owned(),
        file("ca.crt"),
    ]
}

/// Applies an optional `--tls-ca`.
pub fn set_ca_if(ca_file: Option<&Path>) -> Result<(), String> {
    match ca_file {
        Some(path) => set_ca(path),
        None => Ok(()),
    }
}

/// The client configuration, once a CA was set.
pub fn client_config() -> Option<Arc<ClientConfig>> {
    CA.get().cloned()
}

/// True once a CA was set: the nodes this process starts or probes by
/// address speak TLS.
pub fn enabled() -> bool {
    CA.get().is_some()
}
