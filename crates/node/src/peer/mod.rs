//! The peer protocol: how nodes talk to each other.
//!
//! A node dials a peer on the same port that serves HTTP and sends an
//! HTTP/1.1 upgrade request; the peer answers `101 Switching Protocols` and
//! from then on both sides exchange binary, length-prefixed frames,
//! pipelined, each carrying a request id. Byte layouts: `docs/FORMAT.md`,
//! section "Peer frame".
//!
//! - [`frame`]: the frames (replicated writes, reads and their answers).
//! - [`handshake`]: the upgrade request and response.

pub mod frame;
pub mod handshake;
