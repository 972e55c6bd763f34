//! One network thread's spare value buffer: a local GET copies the value
//! it reads (lent by the engine, [`ataman_engine::Db::get_with`]) into it,
//! and the connection gives it back once the answer is rendered into the
//! reply (`net::answer::give_back`), so a GET answered from a memtable
//! allocates nothing.
//!
//! # Thread safety
//! Not `Sync`: one per network thread, in its `NetContext`.
//!
//! # Invariants
//! - A buffer kept has a capacity of at most [`VALUE_SPARE_BYTES_MAX`]: a
//!   large value's buffer is freed, not kept for the thread's lifetime.

use std::cell::Cell;

/// Largest buffer the thread keeps for the next GET (bytes of capacity).
pub const VALUE_SPARE_BYTES_MAX: usize = 64 * 1024;

/// The spare buffer (empty `Vec`, no allocation, when none is kept).
#[derive(Default)]
pub struct ValueSpare(Cell<Vec<u8>>);

impl ValueSpare {
    /// A buffer holding a copy of `value`: the spare one when there is one.
    pub fn copy_of(&self, value: &[u8]) -> Vec<u8> {
        let mut buffer = self.0.take();
        buffer.clear();
        buffer.extend_from_slice(value);
        buffer
    }

    /// Keeps `buffer` (a rendered answer's value) for the next GET if it
    /// is not too large ([`keeps`]) and holds more than the one kept.
    pub fn keep(&self, buffer: Vec<u8>) {
        let kept = self.0.take();
        if keeps(buffer.capacity(), kept.capacity()) {
            self.0.set(buffer);
        } else {
            self.0.set(kept);
        }
    }

    /// Capacity of the buffer kept (tests, metrics).
    pub fn capacity(&self) -> usize {
        let kept = self.0.take();
        let capacity = kept.capacity();
        self.0.set(kept);
        capacity
    }
}

/// Whether a buffer of `offered` bytes of capacity replaces one of `kept`:
/// at most [`VALUE_SPARE_BYTES_MAX`], and larger (a larger buffer serves
/// more values without growing).
pub fn keeps(offered: usize, kept: usize) -> bool {
    offered <= VALUE_SPARE_BYTES_MAX && offered > kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rendered value's buffer is reused by the next copy: same memory,
    /// no allocation.
    #[test]
    fn a_given_back_buffer_serves_the_next_copy() {
        let spare = ValueSpare::default();
        let first = spare.copy_of(b"hello");
        let pointer = first.as_ptr();
        spare.keep(first);
        let second = spare.copy_of(b"world");
        assert_eq!(second, b"world");
        assert_eq!(second.as_ptr(), pointer);
    }

    /// Buffers past the bound are freed, and a smaller one does not
    /// replace a larger one.
    #[test]
    fn keeps_only_bounded_larger_buffers() {
        assert!(keeps(VALUE_SPARE_BYTES_MAX, 0));
        assert!(!keeps(VALUE_SPARE_BYTES_MAX + 1, 0));
        assert!(!keeps(10, 100));
        assert!(!keeps(0, 0));
        let spare = ValueSpare::default();
        spare.keep(vec![0; VALUE_SPARE_BYTES_MAX + 1]);
        assert_eq!(spare.capacity(), 0);
        spare.keep(Vec::with_capacity(100));
        assert_eq!(spare.capacity(), 100);
        spare.keep(Vec::with_capacity(10));
        assert_eq!(spare.capacity(), 100);
    }
}
