//! Building rustls configurations from PEM files: the node's certificate
//! and key, and the cluster CA its peers are verified against.
//!
//! Every configuration uses the `ring` crypto provider.

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a certificate, key or CA could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read or holds no PEM section of the kind wanted.
    #[error("{path}: {why}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// rustls refused the material (a key that does not match, a bad CA).
    #[error("{0}")]
    Config(String),
}

fn file_error(path: &Path, why: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// The `ring` provider every configuration uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate of a PEM file (the leaf first), at least one.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no CERTIFICATE section"));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error(path, e))
}

/// The roots of a CA file.
pub fn roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certificates(path)? {
        store
            .add(cert)
            .map_err(|e| file_error(path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(Arc::new(store))
}

/// The node's certificate chain and key, read together.
pub struct Identity {
    /// Leaf first.
    pub certs: Vec<CertificateDer<'static>>,
    /// The leaf's key.
    pub key: PrivateKeyDer<'static>,
}

impl Identity {
    /// Reads `cert` and `key`.
    pub fn load(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
        Ok(Identity {
            certs: certificates(cert)?,
            key: private_key(key)?,
        })
    }
}

/// The listener's configuration: `identity` as the server certificate;
/// with `ca`, clients may present a certificate, verified against it
/// (peers must; browsers and curl need not).
pub fn server_config(
    identity: Identity,
    ca: Option<&Arc<RootCertStore>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match ca {
        Some(roots) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Config(format!("client verifier: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(identity.certs, identity.key)
        .map_err(|e| TlsError::Config(format!("certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client configuration trusting `roots`, presenting `identity` when given
/// (a node dialling its peers).
pub fn client_config(
    roots: &Arc<RootCertStore>,
    identity: Option<Identity>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(Arc::clone(roots));
    let config = match identity {
        Some(id) => builder
            .with_client_auth_cert(id.certs, id.key)
            .map_err(|e| TlsError::Config(format!("client certificate and key: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// A client configuration trusting the CA in `ca_file` (the command-line
/// clients' `--tls-ca`).
pub fn client_config_for_ca(ca_file: &Path) -> Result<Arc<ClientConfig>, TlsError> {
    client_config(&roots(ca_file)?, None)
}

/// The name a client checks the server's certificate against: the URL's
/// host (an IP address or a DNS name; IPv6 brackets removed).
pub fn server_name(host: &str) -> Result<rustls_pki_types::ServerName<'static>, TlsError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    rustls_pki_types::ServerName::try_from(bare.to_owned())
        .map_err(|e| TlsError::Config(format!("{host:?} is not a server name: {e}")))
}
