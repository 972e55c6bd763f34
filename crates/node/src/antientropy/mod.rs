//! Anti-entropy: replicas compare Merkle trees of the keys they share and
//! exchange the versions one of them misses.
//!
//! - [`merkle`]: the hash tree over key buckets.
//! - [`reconcile`]: the steps that make two digests of a key range equal.
//! - [`scope`]: which keys two nodes both keep.
//! - [`wire`]: the sync protocol's frames.

pub mod merkle;
pub mod reconcile;
pub mod scope;
pub mod wire;

#[cfg(test)]
mod tests;
