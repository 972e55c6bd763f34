//! Authentication failures and token reloads, counted for `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a client request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRefusal {
    /// No `Authorization` header (401).
    Missing,
    /// A bearer token that is not in the token file (401).
    Unknown,
    /// An `Authorization` header that is not `Bearer TOKEN` (401).
    Malformed,
    /// A role too weak for the request (403).
    Forbidden,
}

impl ClientRefusal {
    /// Every reason, in the order of `/metrics`.
    pub const ALL: [ClientRefusal; 4] = [
        ClientRefusal::Missing,
        ClientRefusal::Unknown,
        ClientRefusal::Malformed,
        ClientRefusal::Forbidden,
    ];

    /// The label in `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            ClientRefusal::Missing => "missing",
            ClientRefusal::Unknown => "unknown_token",
            ClientRefusal::Malformed => "malformed",
            ClientRefusal::Forbidden => "forbidden",
        }
    }
}

/// Why a peer upgrade is refused (a label of `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRefusal {
    /// A second plain request where a proof was due.
    MissingProof,
    /// A proof on a connection that was never challenged (a replay).
    NoChallenge,
    /// A proof that does not prove the secret.
    BadProof,
    /// An unreadable `Authorization` header.
    Malformed,
    /// Client tokens are on and there is no cluster secret: a node alone in
    /// its cluster takes no peer session at all.
    NoSecret,
    /// `--tls-ca`: the connection presented no certificate the CA verified.
    NoCertificate,
}

impl PeerRefusal {
    /// Every reason, in the order of `/metrics`.
    pub const ALL: [PeerRefusal; 6] = [
        PeerRefusal::MissingProof,
        PeerRefusal::NoChallenge,
        PeerRefusal::BadProof,
        PeerRefusal::Malformed,
        PeerRefusal::NoSecret,
        PeerRefusal::NoCertificate,
    ];

    /// The label in `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            PeerRefusal::MissingProof => "missing_proof",
            PeerRefusal::NoChallenge => "no_challenge",
            PeerRefusal::BadProof => "bad_proof",
            PeerRefusal::Malformed => "malformed",
            PeerRefusal::NoSecret => "no_secret",
            PeerRefusal::NoCertificate => "no_certificate",
        }
    }
}

/// The counters.
#[derive(Debug, Default)]
pub struct AuthMetrics {
    client: [AtomicU64; ClientRefusal::ALL.len()],
    peer: [AtomicU64; PeerRefusal::ALL.len()],
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
}

impl AuthMetrics {
    /// Counts a refused client request.
    pub fn client_refused(&self, why: ClientRefusal) {
        self.client[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refused peer upgrade.
    pub fn peer_refused(&self, why: PeerRefusal) {
        self.peer[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a token file reload.
    pub fn reloaded(&self, ok: bool) {
        let counter = if ok {
            &self.reloads_ok
        } else {
            &self.reloads_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Client refusals so far for `why` (tests).
    pub fn client_refusals(&self, why: ClientRefusal) -> u64 {
        self.client[why as usize].load(Ordering::Relaxed)
    }

    /// Appends the counters in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP ataman_auth_failures_total Client requests refused by authentication, by reason.\n# TYPE ataman_auth_failures_total counter"
        );
        for why in ClientRefusal::ALL {
            let n = self.client[why as usize].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "ataman_auth_failures_total{{reason=\"{}\"}} {n}",
                why.label()
            );
        }
        let _ = writeln!(
            out,
            "# HELP ataman_peer_auth_failures_total Peer and sync upgrades refused for want of the cluster secret or a CA-verified certificate, by reason.\n# TYPE ataman_peer_auth_failures_total counter"
        );
        for why in PeerRefusal::ALL {
            let n = self.peer[why as usize].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "ataman_peer_auth_failures_total{{reason=\"{}\"}} {n}",
                why.label()
            );
        }
        let _ = writeln!(
            out,
            "# HELP ataman_auth_token_reloads_total Token file reloads, by result.\n# TYPE ataman_auth_token_reloads_total counter"
        );
        let ok = self.reloads_ok.load(Ordering::Relaxed);
        let failed = self.reloads_failed.load(Ordering::Relaxed);
        let _ = writeln!(out, "ataman_auth_token_reloads_total{{result=\"ok\"}} {ok}");
        let _ = writeln!(
            out,
            "ataman_auth_token_reloads_total{{result=\"failed\"}} {failed}"
        );
    }
}
