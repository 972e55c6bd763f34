//! The peer protocol: how nodes talk to each other.
//!
//! A peer opens an HTTP/1.1 connection to the node's one port and upgrades
//! it ([`handshake`]); from then on both sides exchange length-prefixed,
//! checksummed, pipelined frames with request ids ([`frame`], specified in
//! docs/FORMAT.md "Peer frame").
//!
//! - [`framing`]: length, checksum and field reading shared with the sync protocol.
//! - [`link`]: the client side, one per network thread per peer.
//! - [`server`]: the server side of an upgraded connection.

pub mod frame;
pub mod framing;
pub mod handshake;
pub mod link;
pub mod server;
