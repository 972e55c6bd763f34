//! The peer protocol: how nodes talk to each other.
//!
//! A peer opens an HTTP/1.1 connection to the node's one port and upgrades
//! it ([`handshake`]); from then on both sides exchange length-prefixed,
//! checksummed, pipelined frames with request ids ([`frame`], specified in
//! docs/FORMAT.md "Peer frame").
//!
//! - [`framing`]: length, checksum and field reading shared with the sync protocol.
//! - [`link`]: the client side, one per network thread per peer.
//! - [`address`]: where a peer's name points, resolved again after a link failed.
//! - [`refusal`]: which versions from a peer a node refuses (writes, anti-entropy).
//! - [`handshake`]: the upgrade, and the names of both protocols it switches to.
//! - [`auth_dialer`], [`auth_gate`]: the proof of the cluster secret in the
//!   upgrade (`crate::auth::peer_proof`), dialing and accepting.
//!
//! The server side of an upgraded connection is a connection of the network
//! threads: `net::peer_conn`.
//! - [`keepalive`]: TCP keepalive, so a vanished peer's connection fails.

pub mod address;
pub mod auth_dialer;
pub mod auth_gate;
pub mod frame;
pub mod framing;
pub mod handshake;
pub mod keepalive;
pub mod link;
pub mod refusal;
