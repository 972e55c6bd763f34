//! Who may use the node: client tokens with roles, the peers' proof of the
//! cluster secret, and the refusal to start exposed (docs/SECURITY.md).
//!
//! Pure rules, usable by any protocol:
//! - [`policy`]: the roles (the role each command needs: `net::authorize`).
//! - [`tokens`]: the token file's format, and constant-time lookup.
//! - [`private_file`]: the rule that a file of secrets is its owner's alone.
//! - [`secret`]: the cluster secret.
//! - [`peer_proof`]: the HMAC challenge and response of the peer upgrade
//!   (carried by `peer::auth_gate`, the accepting side, and
//!   `peer::auth_dialer`, the dialing side).
//! - [`protected`]: protected mode (no open node on a non-loopback address).
//! - [`peer_access`]: who may open a peer surface, from the live layout.
//!
//! And their use by the node:
//! - [`reload`]: the token set shared with the network threads, rotated on
//!   SIGHUP or when the file changes.
//! - `net::auth_gate`: what the HTTP connection asks before dispatch.
//! - [`metrics`]: refusals by reason, for `/metrics`.

pub mod metrics;
pub mod peer_access;
pub mod peer_proof;
pub mod policy;
pub mod private_file;
pub mod protected;
pub mod reload;
pub mod secret;
pub mod tokens;

pub use policy::{Denied, Role};

use crate::config::NodeConfig;

/// The node's authentication state, shared by its threads.
#[derive(Default)]
pub struct Auth {
    /// Client tokens (`--auth-token-file`); `None`: every client request is admitted.
    pub tokens: Option<reload::TokenStore>,
    /// The cluster secret (`--cluster-secret-file`); `None`: peers are not authenticated.
    pub secret: Option<secret::ClusterSecret>,
    /// Refusals by reason.
    pub metrics: metrics::AuthMetrics,
}

impl Auth {
    /// No authentication at all (tests; a node without the options).
    pub fn disabled() -> Auth {
        Auth::default()
    }

    /// Applies protected mode, then reads the token file and the secret
    /// (refusing files others may read). Before the node binds anything.
    pub fn load(config: &NodeConfig) -> Result<Auth, String> {
        let mut listeners = vec![protected::Listener {
            option: "--listen",
            addr: &config.listen,
            serves_peers: true,
        }];
        if let Some(addr) = config.resp_listen.as_deref() {
            listeners.push(protected::Listener {
                option: "--resp-listen",
                addr,
                serves_peers: false,
            });
        }
        let exposure = protected::Exposure {
            listeners: &listeners,
            cluster: &config.cluster,
            join: config.join.as_deref(),
            tokens: config.auth_token_file.is_some(),
            // A peer proves the secret, or presents a certificate of the CA.
            peers_verified: config.cluster_secret_file.is_some()
                || config.tls.as_ref().is_some_and(|t| t.ca.is_some()),
            allow_unauthenticated: config.allow_unauthenticated,
        };
        if protected::check(&exposure)? {
            for _ in 0..3 {
                tracing::warn!(
                    "--allow-unauthenticated: this node is reachable beyond loopback without \
                     authentication; anyone who can reach it can read, write and act as a peer"
                );
            }
            eprintln!(
                "ataman: WARNING: running without authentication on a non-loopback address \
                 (--allow-unauthenticated)"
            );
        }
        let tokens = match &config.auth_token_file {
            Some(path) => Some(reload::TokenStore::open(path)?),
            None => None,
        };
        let secret = match &config.cluster_secret_file {
            Some(path) => Some(secret::ClusterSecret::read(path).map_err(|e| e.to_string())?),
            None => None,
        };
        if secret.is_some() {
            reload::install_sighup();
            tracing::info!("auth: peers must prove the cluster secret");
        }
        if tokens.is_some() {
            reload::install_sighup();
        }
        Ok(Auth {
            tokens,
            secret,
            metrics: metrics::AuthMetrics::default(),
        })
    }

    /// The main thread's periodic chore: reload the tokens if asked or changed.
    pub fn tick(&self) {
        if let Some(tokens) = &self.tokens {
            tokens.tick(&self.metrics);
        }
    }
}
