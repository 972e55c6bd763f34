//! Who may open a peer surface (the `/v0/peer` upgrades, `/v0/internal/*`)
//! on a running node: decided for each request from what is true now —
//! the live layout's members and the addresses the node listens on — not
//! from the start-up options (`super::protected` refuses to start what
//! could never be safe; this rule follows the layout as it changes).
//!
//! # Rules
//! 1. With `--cluster-secret-file` or a CA that verifies peers
//!    (`--tls-ca`), a peer proves itself ([`PeerAccess::Proof`]): the
//!    secret's challenge and response, a certificate the CA verified, or
//!    both. Being alone does not close the door then: a node just added
//!    with `--join` knows no other member until it learns the layout, and
//!    its peers can prove themselves.
//! 2. Without either, a node with client tokens that is alone in its live
//!    layouts is closed ([`Closed::Alone`]): nobody has business as its
//!    peer, and an open `/v0/peer` would bypass the tokens.
//! 3. Without either, a node that listens beyond loopback, or has a live
//!    member beyond loopback, is closed ([`Closed::Exposed`]) unless
//!    `--allow-unauthenticated`: anyone who reaches it could act as a
//!    peer and read every version it holds. A layout that grows onto a
//!    non-loopback member closes it there and then.
//! 4. Otherwise (loopback everywhere, or `--allow-unauthenticated`), the
//!    plain upgrade ([`PeerAccess::Open`]).

/// The facts the rules look at, gathered for each peer request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerFacts {
    /// `--cluster-secret-file` is loaded.
    pub secret: bool,
    /// `--tls-ca`: peers must present a certificate the CA verified.
    pub certificates: bool,
    /// `--auth-token-file` is loaded.
    pub tokens: bool,
    /// `--allow-unauthenticated`.
    pub allow_unauthenticated: bool,
    /// The listener that serves the peer surfaces is not loopback.
    pub listener_exposed: bool,
    /// No member of a live layout other than this node.
    pub alone: bool,
    /// A member of a live layout other than this node is not on loopback.
    pub member_exposed: bool,
}

/// Why a peer surface is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Rule 2: tokens on, no proof possible, alone in the live layouts.
    Alone,
    /// Rule 3: reachable beyond loopback with no proof possible.
    Exposed,
}

impl Closed {
    /// The refusal's text: what is missing, naming the options.
    pub fn text(self) -> &'static str {
        match self {
            Closed::Alone => {
                "this node is alone in its layout and takes no peer session without \
                 --cluster-secret-file or --tls-ca"
            }
            Closed::Exposed => {
                "peer sessions beyond loopback need --cluster-secret-file or --tls-ca on this node"
            }
        }
    }
}

/// What a peer request must do to be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAccess {
    /// Rule 1: prove the secret and/or present a verified certificate.
    Proof,
    /// Rule 4: the plain upgrade.
    Open,
    /// Rules 2 and 3: refused (403).
    Closed(Closed),
}

/// The rules above.
pub fn decide(f: PeerFacts) -> PeerAccess {
    if f.secret || f.certificates {
        return PeerAccess::Proof;
    }
    if f.tokens && f.alone {
        return PeerAccess::Closed(Closed::Alone);
    }
    if (f.listener_exposed || f.member_exposed) && !f.allow_unauthenticated {
        return PeerAccess::Closed(Closed::Exposed);
    }
    PeerAccess::Open
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTHING: PeerFacts = PeerFacts {
        secret: false,
        certificates: false,
        tokens: false,
        allow_unauthenticated: false,
        listener_exposed: false,
        alone: false,
        member_exposed: false,
    };

    /// A node added with `--join` (tokens and `--tls-ca`, no secret) was
    /// alone at its start and refused every peer upgrade forever: with a
    /// CA, a peer's certificate decides, alone or not.
    #[test]
    fn joined_node_with_tokens_and_a_ca_takes_peers() {
        let joined = PeerFacts {
            tokens: true,
            certificates: true,
            alone: true,
            listener_exposed: true,
            ..NOTHING
        };
        assert_eq!(decide(joined), PeerAccess::Proof);
        assert_eq!(
            decide(PeerFacts {
                certificates: false,
                ..joined
            }),
            PeerAccess::Closed(Closed::Alone)
        );
    }

    /// The reported case: tokens, loopback members, a listener beyond
    /// loopback, no proof: closed, not open to anyone.
    #[test]
    fn an_exposed_listener_closes_proofless_peers() {
        let f = PeerFacts {
            tokens: true,
            listener_exposed: true,
            ..NOTHING
        };
        assert_eq!(decide(f), PeerAccess::Closed(Closed::Exposed));
        assert_eq!(
            decide(PeerFacts {
                allow_unauthenticated: true,
                ..f
            }),
            PeerAccess::Open
        );
        assert_eq!(decide(PeerFacts { secret: true, ..f }), PeerAccess::Proof);
    }

    /// Every combination of the facts against the rules, each written out.
    #[test]
    fn every_combination() {
        for bits in 0u32..(1 << 7) {
            let bit = |i: u32| bits & (1 << i) != 0;
            let f = PeerFacts {
                secret: bit(0),
                certificates: bit(1),
                tokens: bit(2),
                allow_unauthenticated: bit(3),
                listener_exposed: bit(4),
                alone: bit(5),
                member_exposed: bit(6),
            };
            let got = decide(f);
            if f.secret || f.certificates {
                assert_eq!(got, PeerAccess::Proof, "{f:?}");
            } else if f.tokens && f.alone {
                assert_eq!(got, PeerAccess::Closed(Closed::Alone), "{f:?}");
            } else if f.allow_unauthenticated || !(f.listener_exposed || f.member_exposed) {
                assert_eq!(got, PeerAccess::Open, "{f:?}");
            } else {
                assert_eq!(got, PeerAccess::Closed(Closed::Exposed), "{f:?}");
            }
            // Whatever else holds, an exposed node with no proof is never open
            // unless told so.
            if !f.secret && !f.certificates && !f.allow_unauthenticated && f.listener_exposed {
                assert!(matches!(got, PeerAccess::Closed(_)), "{f:?}");
            }
        }
    }
}
