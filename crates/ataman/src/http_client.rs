//! The blocking HTTP/1.1 client of the `/v0` API, shared by `ataman ctl`,
//! the cluster command, the fault harness, the node launcher and the
//! black-box tests.
//!
//! - [`url`]: the node's base URL and the request targets (keys
//!   percent-encoded).
//! - [`exchange`]: one blocking exchange over a `TcpStream` (one request,
//!   one final answer, `Connection: close`).
//! - [`token`]: the bearer token sent to a node started with `--auth-token-file`.
//! - [`tls`]: the CA `https://` URLs are verified against (`--tls-ca`).
//! - [`response`]: reading one response from a byte stream
//!   (Content-Length, chunked or until-close bodies; bounded, never a panic).

pub mod exchange;
pub mod response;
pub mod tls;
pub mod token;
pub mod url;
