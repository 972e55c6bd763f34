//! A block's restart array, decoded once when the block is loaded, with a
//! fingerprint of every restart key.
//!
//! A point read's binary search over the restarts used to load each probed
//! restart key from the block's entries: one cache miss per probe, on top
//! of the miss on the restart array itself
//! (docs/bench-log/2026-11-22-engine-15-restart-key-fingerprints.md). Here the offsets and the fingerprints sit inside the
//! [`Block`](super::block::Block) struct (for up to [`INLINE_RESTARTS`]
//! restarts, what a 4 KiB data block with interval 8 has), next to the
//! reference count a cache hit has just touched; the search compares
//! fingerprints and reads a restart key only on a tie.
//!
//! A fingerprint is [`key::fingerprint`] of the restart's user key after
//! the prefix all the block's restart keys share (the keys of one block
//! are close, so the prefix is long and the next 8 bytes tell them apart).
//! Nothing here is stored in the file: the format is unchanged, and a
//! block whose restart entries do not decode, are not internal keys or are
//! out of order simply gets no fingerprints; its reads take the plain
//! search, which reports the damage as before.

use crate::key;

/// Restarts held inside the block struct; more go to the heap.
pub const INLINE_RESTARTS: usize = 8;

/// Bytes of the shared prefix kept (inside the struct, so a probe does not
/// touch the block's entries). A longer shared prefix is cut to this; the
/// fingerprints then start inside it and tie more often, which costs key
/// reads, never a wrong answer.
pub const PREFIX_BYTES_MAX: usize = 24;

/// Where a target's user key falls against a fingerprinted block's restart keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// No fingerprints: compare the keys.
    Keys,
    /// Below every restart's user key (it does not start with the prefix).
    BelowAll,
    /// Above every restart's user key (it does not start with the prefix).
    AboveAll,
    /// It starts with the prefix; this is the fingerprint of the rest.
    Fingerprint(u64),
}

/// Offsets and fingerprints spilled to the heap.
#[derive(Debug)]
struct Spilled {
    offsets: Box<[u32]>,
    fingerprints: Box<[u64]>,
}

/// The decoded restart array of one block.
///
/// # Invariants
/// `offsets()` is what the block's restart array holds (non-empty, from 0,
/// strictly increasing: [`super::block::Block::new`] checks it). When
/// `fingerprinted`, every restart entry is stored whole and is an internal
/// key, every restart user key starts with `prefix()`, and
/// `fingerprints()[i]` is the fingerprint of restart `i`'s user key after
/// that prefix, non-decreasing in `i`.
///
/// `repr(C)`: what a probe reads first (length, prefix, fingerprints) comes
/// first.
#[derive(Debug)]
#[repr(C)]
pub struct Restarts {
    len: u32,
    prefix_len: u8,
    fingerprinted: bool,
    prefix: [u8; PREFIX_BYTES_MAX],
    inline_fingerprints: [u64; INLINE_RESTARTS],
    inline_offsets: [u32; INLINE_RESTARTS],
    spilled: Option<Box<Spilled>>,
}

impl Restarts {
    /// The restart table of `offsets`; `restart_user_key(offset)` is the
    /// user key stored whole at that restart, or `None` if the entry there
    /// is not a whole internal key.
    pub fn new<'a>(
        offsets: Vec<u32>,
        restart_user_key: impl Fn(usize) -> Option<&'a [u8]>,
    ) -> Restarts {
        let keys: Option<Vec<&[u8]>> = offsets
            .iter()
            .map(|&at| restart_user_key(at as usize))
            .collect();
        let fingerprinted = keys.as_deref().and_then(fingerprint_all);
        let mut table = Restarts {
            // A block of at most BLOCK_BYTES_MAX bytes has fewer restarts.
            len: u32::try_from(offsets.len()).unwrap_or(u32::MAX),
            prefix_len: 0,
            fingerprinted: fingerprinted.is_some(),
            prefix: [0; PREFIX_BYTES_MAX],
            inline_fingerprints: [0; INLINE_RESTARTS],
            inline_offsets: [0; INLINE_RESTARTS],
            spilled: None,
        };
        let fingerprints = match fingerprinted {
            Some((prefix, fingerprints)) => {
                table.prefix[..prefix.len()].copy_from_slice(prefix);
                // At most PREFIX_BYTES_MAX.
                table.prefix_len = u8::try_from(prefix.len()).unwrap_or(0);
                fingerprints
            }
            None => vec![0; offsets.len()],
        };
        if offsets.len() <= INLINE_RESTARTS {
            table.inline_offsets[..offsets.len()].copy_from_slice(&offsets);
            table.inline_fingerprints[..offsets.len()].copy_from_slice(&fingerprints);
        } else {
            table.spilled = Some(Box::new(Spilled {
                offsets: offsets.into_boxed_slice(),
                fingerprints: fingerprints.into_boxed_slice(),
            }));
        }
        table
    }

    /// Restart points (at least one in a valid block).
    #[inline]
    pub fn count(&self) -> usize {
        self.len as usize
    }

    /// Byte offsets of the restart entries.
    #[inline]
    pub fn offsets(&self) -> &[u32] {
        match &self.spilled {
            Some(s) => &s.offsets,
            None => &self.inline_offsets[..self.count()],
        }
    }

    /// Fingerprints of the restart keys (meaningful when fingerprinted).
    #[inline]
    pub fn fingerprints(&self) -> &[u64] {
        match &self.spilled {
            Some(s) => &s.fingerprints,
            None => &self.inline_fingerprints[..self.count()],
        }
    }

    /// Heap bytes held beyond the struct itself.
    pub fn heap_bytes(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| {
            std::mem::size_of::<Spilled>()
                + s.offsets.len() * std::mem::size_of::<u32>()
                + s.fingerprints.len() * std::mem::size_of::<u64>()
        })
    }

    /// The prefix every restart user key starts with (when fingerprinted).
    fn prefix(&self) -> &[u8] {
        self.prefix
            .get(..usize::from(self.prefix_len))
            .unwrap_or(&[])
    }

    /// Where `user_key` falls against the restart keys.
    #[inline]
    pub fn probe(&self, user_key: &[u8]) -> Probe {
        if !self.fingerprinted {
            return Probe::Keys;
        }
        let prefix = self.prefix();
        match user_key.strip_prefix(prefix) {
            Some(rest) => Probe::Fingerprint(key::fingerprint(rest)),
            // Every restart key starts with `prefix`, so a key that does
            // not is below all of them or above all of them.
            None if user_key < prefix => Probe::BelowAll,
            None => Probe::AboveAll,
        }
    }
}

/// The prefix (at most [`PREFIX_BYTES_MAX`] bytes) `keys` share and each
/// key's fingerprint after it; `None` if `keys` is empty or the
/// fingerprints are not in order (keys out of order: a damaged block).
fn fingerprint_all<'k>(keys: &[&'k [u8]]) -> Option<(&'k [u8], Vec<u64>)> {
    let (first, last) = (keys.first()?, keys.last()?);
    let prefix = &first[..key::common_prefix_len(first, last).min(PREFIX_BYTES_MAX)];
    let mut fingerprints = Vec::with_capacity(keys.len());
    for k in keys {
        let f = key::fingerprint(k.strip_prefix(prefix)?);
        if fingerprints.last().is_some_and(|&previous| f < previous) {
            return None;
        }
        fingerprints.push(f);
    }
    Some((prefix, fingerprints))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A restart table over `keys` laid end to end in one buffer, as if
    /// each were a restart entry's user key.
    fn table_of(keys: &[&[u8]]) -> (Vec<u8>, Restarts) {
        let mut data = Vec::new();
        let mut ranges = Vec::new();
        for k in keys {
            ranges.push(data.len()..data.len() + k.len());
            data.extend_from_slice(k);
        }
        let offsets: Vec<u32> = ranges.iter().map(|r| r.start as u32).collect();
        let restarts = Restarts::new(offsets, |at| {
            let range = ranges.iter().find(|r| r.start == at)?;
            data.get(range.clone())
        });
        (data, restarts)
    }

    #[test]
    fn sorted_keys_get_a_prefix_and_ordered_fingerprints() {
        let (_, r) = table_of(&[b"user:00012", b"user:00345", b"user:00999"]);
        assert!(r.fingerprinted);
        assert_eq!(r.prefix(), b"user:00");
        assert_eq!(r.offsets(), &[0, 10, 20]);
        assert!(r.fingerprints().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            r.probe(b"user:00345"),
            Probe::Fingerprint(key::fingerprint(b"345"))
        );
        assert_eq!(r.probe(b"user:0"), Probe::BelowAll);
        assert_eq!(r.probe(b"a"), Probe::BelowAll);
        assert_eq!(r.probe(b"user:01"), Probe::AboveAll);
        assert_eq!(r.probe(b"zz"), Probe::AboveAll);
    }

    #[test]
    fn a_prefix_longer_than_the_limit_is_cut() {
        let long = [b'p'; 40];
        let a = [&long[..], b"a"].concat();
        let b = [&long[..], b"b"].concat();
        let (_, r) = table_of(&[&a, &b]);
        assert!(r.fingerprinted);
        assert_eq!(r.prefix().len(), PREFIX_BYTES_MAX);
        // The fingerprints start inside the shared bytes and tie.
        assert_eq!(r.fingerprints()[0], r.fingerprints()[1]);
    }

    #[test]
    fn unordered_or_undecodable_restart_keys_get_no_fingerprints() {
        let (_, r) = table_of(&[b"b", b"a"]);
        assert_eq!(r.probe(b"a"), Probe::Keys);
        let data = b"ab".to_vec();
        let r = Restarts::new(vec![0, 1], |at| (at == 0).then(|| &data[..1]));
        assert_eq!(r.probe(b"a"), Probe::Keys);
        assert_eq!(r.offsets(), &[0, 1]);
    }

    #[test]
    fn more_restarts_than_fit_inline_spill_to_the_heap() {
        let keys: Vec<Vec<u8>> = (0..INLINE_RESTARTS as u8 + 3)
            .map(|i| vec![b'k', b'a' + i])
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let (_, r) = table_of(&refs);
        assert_eq!(r.count(), keys.len());
        assert_eq!(r.offsets().len(), keys.len());
        assert!(r.heap_bytes() > 0);
        assert_eq!(r.probe(b"kc"), Probe::Fingerprint(key::fingerprint(b"c")));
        let (_, small) = table_of(&refs[..2]);
        assert_eq!(small.heap_bytes(), 0);
    }
}
