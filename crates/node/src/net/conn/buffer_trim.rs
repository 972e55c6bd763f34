//! A connection's read and write buffers given back after a large command
//! (pure rule, docs/API.md "Limits").
//!
//! A buffer grows to hold the largest command read (a 16 MiB `SET` or
//! `PUT`) or answer written (a 16 MiB `GET`), and a `Vec` keeps its
//! capacity when it is drained: forty idle connections that had each sent
//! one 8 MiB `SET` held 337 MiB between them until they closed. So, once a
//! buffer is drained (it holds at most [`BUFFER_BYTES_KEPT`], the rest of
//! a partial command) and its capacity is over [`BUFFER_BYTES_IDLE_MAX`],
//! it is shrunk back to [`BUFFER_BYTES_KEPT`]: what one read call fills.
//!
//! # Rules
//! 1. A buffer whose capacity is at most [`BUFFER_BYTES_IDLE_MAX`] keeps
//!    it: ordinary traffic (commands and answers of a few KiB, pipelines
//!    of them) never reallocates for this rule.
//! 2. A buffer over that bound that holds more than [`BUFFER_BYTES_KEPT`]
//!    keeps it: a large command or answer is still being read or written.
//! 3. Otherwise the buffer is shrunk to [`BUFFER_BYTES_KEPT`] (its bytes
//!    kept): after it, an idle connection holds at most
//!    [`BUFFER_BYTES_IDLE_MAX`] in each of its two buffers.

use super::READ_CHUNK_BYTES;

/// The capacity a drained buffer is shrunk to: one read call's chunk.
pub const BUFFER_BYTES_KEPT: usize = READ_CHUNK_BYTES;
/// The capacity a drained buffer may keep; over it, it is shrunk back to
/// [`BUFFER_BYTES_KEPT`].
pub const BUFFER_BYTES_IDLE_MAX: usize = 4 * READ_CHUNK_BYTES;
const _: () = assert!(BUFFER_BYTES_KEPT < BUFFER_BYTES_IDLE_MAX);

/// The capacity a buffer holding `len` bytes in `capacity` is shrunk to
/// (the "Rules"), `None` when it keeps its own.
pub fn trimmed_capacity(len: usize, capacity: usize) -> Option<usize> {
    (capacity > BUFFER_BYTES_IDLE_MAX && len <= BUFFER_BYTES_KEPT).then_some(BUFFER_BYTES_KEPT)
}

/// Applies [`trimmed_capacity`] to `buf`; its bytes are kept.
pub fn trim(buf: &mut Vec<u8>) {
    if let Some(capacity) = trimmed_capacity(buf.len(), buf.capacity()) {
        buf.shrink_to(capacity);
        debug_assert!(buf.capacity() <= BUFFER_BYTES_IDLE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule at and past its two bounds.
    #[test]
    fn only_a_drained_buffer_over_the_bound_is_shrunk() {
        let (kept, max) = (BUFFER_BYTES_KEPT, BUFFER_BYTES_IDLE_MAX);
        assert_eq!(trimmed_capacity(0, max), None, "at the bound: kept");
        assert_eq!(trimmed_capacity(0, max + 1), Some(kept));
        assert_eq!(trimmed_capacity(kept, 8 << 20), Some(kept));
        assert_eq!(trimmed_capacity(kept + 1, 8 << 20), None, "still in use");
        assert_eq!(trimmed_capacity(0, 0), None);
    }

    /// A buffer that held one 8 MiB command, drained but for a partial
    /// next one, is shrunk with its bytes kept; drained alone (the
    /// control: what the connection did before) it keeps all 8 MiB.
    #[test]
    fn a_drained_large_buffer_gives_its_memory_back() {
        let mut buf = vec![7u8; 8 << 20];
        buf.drain(..buf.len() - 10);
        assert!(buf.capacity() >= 8 << 20, "draining keeps the memory");
        trim(&mut buf);
        assert_eq!(buf, vec![7u8; 10]);
        assert!(
            buf.capacity() <= BUFFER_BYTES_IDLE_MAX,
            "{}",
            buf.capacity()
        );
        // A buffer in use is left alone.
        let mut busy = vec![1u8; BUFFER_BYTES_KEPT + 1];
        busy.reserve(8 << 20);
        let capacity = busy.capacity();
        trim(&mut busy);
        assert_eq!(busy.capacity(), capacity);
    }
}
