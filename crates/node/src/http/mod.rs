//! HTTP/1.1 framing: request heads, query strings, response heads.
//!
//! Hand-written on `httparse` (see `docs/ARCHITECTURE.md`, "HTTP framing"):
//! the network thread owns its connections' buffers and writes replies
//! itself, with no runtime between it and the socket.

pub mod chunked;
pub mod conditional;
pub mod json;
pub mod query;
pub mod request;
pub mod response;

pub use response::Status;
