//! How a node started with `--join` asks its seed
//! (`crate::cluster::join::AskSeed`): a read (`Request::Read`) over the
//! seed's internal layout endpoint, dialled as every layout call is
//! ([`super::voters_http::exchange`]: TLS with `--tls-ca` for an `https`
//! seed, the cluster secret's proof when the seed asks for it).

use super::voters_http::{INTERNAL_LAYOUT_PATH, exchange};
use crate::auth::secret::ClusterSecret;
use crate::cluster::agreement_wire::{Reply, Request};
use crate::cluster::join::{AskSeed, SeedError};
use crate::cluster::layout::Layout;
use std::sync::Arc;

/// A joining node's credentials as a peer.
pub struct SeedDial {
    /// The TLS client configuration, with `--tls-ca`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The cluster secret, when the cluster has one.
    pub secret: Option<ClusterSecret>,
}

impl AskSeed for SeedDial {
    fn live(&self, seed: &str) -> Result<Vec<Layout>, SeedError> {
        if seed.starts_with("https://") && self.tls.is_none() {
            return Err(SeedError::Refused(format!(
                "{seed}: an https seed needs --tls-ca"
            )));
        }
        let request = Request::Read.encode();
        let response = exchange(
            seed,
            "POST",
            INTERNAL_LAYOUT_PATH,
            &request,
            self.tls.clone(),
            self.secret.as_ref(),
        )
        .map_err(|e| SeedError::Unreachable(format!("{seed}: {e}")))?;
        if response.status != 200 {
            let why = String::from_utf8_lossy(&response.body);
            let why = format!(
                "{seed}: {INTERNAL_LAYOUT_PATH} answered {} {}",
                response.status,
                why.trim()
            );
            return Err(match response.status {
                401 | 403 => SeedError::Refused(why),
                _ => SeedError::Unreachable(why),
            });
        }
        match Reply::decode(&response.body) {
            Ok(Reply::Gossip { live, .. }) => Ok(live),
            Ok(other) => Err(SeedError::Unreachable(format!(
                "{seed}: not a layout read's answer: {other:?}"
            ))),
            Err(e) => Err(SeedError::Unreachable(format!(
                "{seed}: undecodable answer: {e}"
            ))),
        }
    }
}
