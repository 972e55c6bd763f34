//! `ataman cert`: a test CA and node certificates for a local TLS cluster
//! (CockroachDB style; documented in docs/SECURITY.md, "TLS").
//!
//! - `create-ca` writes `ca.crt` and the CA's key (`ca.key` unless
//!   `--ca-key` says where).
//! - `create-node NAME…` writes `node.crt` and `node.key`, signed by that
//!   CA, valid for 127.0.0.1, ::1, localhost and every NAME, for both
//!   server and client authentication (a node presents it to its peers).
//!
//! Keys are ECDSA P-256, written with mode 0600. An existing file is never
//! overwritten unless `--overwrite` says so.

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The CA's subject (the same on every run, so a node certificate made
/// later names the CA that `create-ca` made).
pub const CA_COMMON_NAME: &str = "ataman test CA";
/// The node certificates' subject.
pub const NODE_COMMON_NAME: &str = "ataman node";
/// Names every node certificate is valid for.
pub const LOCAL_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];
/// Mode of a written private key.
const KEY_FILE_MODE: u32 = 0o600;

/// `ataman cert` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct CertArgs {
    /// What to make.
    #[command(subcommand)]
    pub command: CertCommand,
}

/// Where the files go.
#[derive(Debug, Clone, clap::Args)]
pub struct CertFiles {
    /// Directory of `ca.crt`, `node.crt` and `node.key` (created if missing).
    #[arg(long)]
    pub certs_dir: PathBuf,
    /// The CA's private key [default: CERTS_DIR/ca.key]; keep it out of the nodes' directories.
    #[arg(long)]
    pub ca_key: Option<PathBuf>,
    /// Replace files that exist.
    #[arg(long)]
    pub overwrite: bool,
}

/// One `ataman cert` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CertCommand {
    /// Make a CA: `ca.crt` and its key.
    CreateCa(CertFiles),
    /// Make `node.crt` and `node.key` signed by the CA, for 127.0.0.1, ::1,
    /// localhost and each NAME (host names or IP addresses).
    CreateNode {
        /// Where the files are.
        #[command(flatten)]
        files: CertFiles,
        /// More names the certificate is valid for.
        names: Vec<String>,
    },
}

/// Why a certificate was not made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused (a name that is not a DNS name, a key it cannot read).
    #[error("{0}")]
    Rcgen(#[from] rcgen::Error),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file exists and `--overwrite` was not given.
    #[error("{0} exists; pass --overwrite to replace it")]
    Exists(PathBuf),
}

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
    move |source| CertError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `text` to `path` (mode `mode`), refusing to replace a file unless `overwrite`.
fn write_file(path: &Path, text: &str, mode: u32, overwrite: bool) -> Result<(), CertError> {
    if path.exists() && !overwrite {
        return Err(CertError::Exists(path.to_path_buf()));
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(file_error(path))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(file_error(path))
}

/// The CA's parameters (deterministic: the issuer of a node certificate
/// is rebuilt from them and the CA key).
fn ca_params() -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

fn ca_key_path(files: &CertFiles) -> PathBuf {
    files
        .ca_key
        .clone()
        .unwrap_or_else(|| files.certs_dir.join("ca.key"))
}

fn create_dir(dir: &Path) -> Result<(), CertError> {
    std::fs::create_dir_all(dir).map_err(file_error(dir))
}

/// `create-ca`: a new CA key and its self-signed certificate.
pub fn create_ca(files: &CertFiles) -> Result<Vec<PathBuf>, CertError> {
    create_dir(&files.certs_dir)?;
    let key = KeyPair::generate()?;
    let cert = ca_params()?.self_signed(&key)?;
    let cert_path = files.certs_dir.join("ca.crt");
    let key_path = ca_key_path(files);
    if let Some(parent) = key_path.parent() {
        create_dir(parent)?;
    }
    write_pair(
        files,
        cert_path,
        &cert.pem(),
        key_path,
        &key.serialize_pem(),
    )
}

/// The CA as an issuer: its key, read from `--ca-key`.
fn load_issuer(files: &CertFiles) -> Result<(Certificate, KeyPair), CertError> {
    let key_path = ca_key_path(files);
    let pem = std::fs::read_to_string(&key_path).map_err(file_error(&key_path))?;
    let key = KeyPair::from_pem(&pem)?;
    let cert = ca_params()?.self_signed(&key)?;
    Ok((cert, key))
}

/// `create-node`: a node key and its certificate, signed by the CA.
pub fn create_node(files: &CertFiles, names: &[String]) -> Result<Vec<PathBuf>, CertError> {
    create_dir(&files.certs_dir)?;
    let (issuer, issuer_key) = load_issuer(files)?;
    let mut sans: Vec<String> = LOCAL_NAMES.iter().map(|n| (*n).to_owned()).collect();
    for name in names {
        if !sans.contains(name) {
            sans.push(name.clone());
        }
    }
    let mut params = CertificateParams::new(sans)?;
    params
        .distinguished_name
        .push(DnType::CommonName, NODE_COMMON_NAME);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer, &issuer_key)?;
    let cert_path = files.certs_dir.join("node.crt");
    let key_path = files.certs_dir.join("node.key");
    write_pair(
        files,
        cert_path,
        &cert.pem(),
        key_path,
        &key.serialize_pem(),
    )
}

/// Runs one `ataman cert` command, printing the files it wrote.
pub fn run(args: &CertArgs) -> Result<(), CertError> {
    let written = match &args.command {
        CertCommand::CreateCa(files) => create_ca(files)?,
        CertCommand::CreateNode { files, names } => create_node(files, names)?,
    };
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Writes a certificate (readable by all) and its private key (its owner's
/// alone); answers their paths, certificate first.
fn write_pair(
    files: &CertFiles,
    cert_path: PathBuf,
    cert_pem: &str,
    key_path: PathBuf,
    key_pem: &str,
) -> Result<Vec<PathBuf>, CertError> {
    write_file(&key_path, key_pem, KEY_FILE_MODE, files.overwrite)?;
    write_file(&cert_path, cert_pem, 0o644, files.overwrite)?;
    Ok(vec![cert_path, key_path])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> CertFiles {
        CertFiles {
            certs_dir: dir.to_path_buf(),
            ca_key: None,
            overwrite: false,
        }
    }

    /// The node certificate verifies against the CA for its names (and not for others).
    #[test]
    fn node_certificate_chains_to_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        create_ca(&f).unwrap();
        create_node(&f, &["db1.example".to_owned()]).unwrap();
        let roots = ataman_node::tls::load::roots(&dir.path().join("ca.crt")).unwrap();
        let certs = ataman_node::tls::load::certificates(&dir.path().join("node.crt")).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            roots,
            ataman_node::tls::load::provider(),
        )
        .build()
        .unwrap();
        use rustls::client::danger::ServerCertVerifier;
        let now = rustls_pki_types::UnixTime::now();
        for name in ["127.0.0.1", "localhost", "db1.example"] {
            let name = rustls_pki_types::ServerName::try_from(name.to_owned()).unwrap();
            verifier
                .verify_server_cert(&certs[0], &[], &name, &[], now)
                .unwrap();
        }
        let other = rustls_pki_types::ServerName::try_from("other.example".to_owned()).unwrap();
        assert!(
            verifier
                .verify_server_cert(&certs[0], &[], &other, &[], now)
                .is_err()
        );
        // The key file is private; existing files are kept.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("node.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "key readable by others: {mode:o}");
        assert!(matches!(create_ca(&f), Err(CertError::Exists(_))));
    }
}
