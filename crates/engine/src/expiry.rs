//! Expiring values: a version with an absolute deadline.
//!
//! An expiring put ([`Kind::PutExpiring`]) stores, as its value, the
//! deadline (Unix milliseconds, u64 big-endian) followed by the user's value
//! (`docs/FORMAT.md`, "Expiring value"). The deadline is absolute: it is
//! stamped once by whoever builds the batch and carried unchanged; the
//! engine never computes one from a relative TTL.
//!
//! From its deadline on (`now_ms >= deadline_ms`), an expiring version reads
//! exactly like a tombstone at its timestamp: it still shadows every older
//! version, and compaction keeps it (its value cut off) until it is past
//! the tombstone grace with no older version of its key left elsewhere
//! (compaction's collection rule, `compaction/collect.rs`).

use crate::key::Kind;

/// Bytes of the deadline in front of an expiring value.
pub const DEADLINE_BYTES: usize = 8;

/// Largest deadline the engine accepts, in Unix milliseconds: the largest
/// millisecond count a hybrid-logical-clock timestamp holds (48 bits, about
/// the year 10889). Larger deadlines are refused, never wrapped.
pub const DEADLINE_MS_MAX: u64 = (1 << 48) - 1;

/// Encodes the stored value of an expiring put into `out`.
pub fn encode_expiring_value(out: &mut Vec<u8>, deadline_ms: u64, value: &[u8]) {
    out.reserve(DEADLINE_BYTES + value.len());
    out.extend_from_slice(&deadline_ms.to_be_bytes());
    out.extend_from_slice(value);
}

/// Splits the stored value of an expiring put into its deadline and the
/// user's value; `None` if it is shorter than a deadline.
pub fn split_expiring_value(stored: &[u8]) -> Option<(u64, &[u8])> {
    let (head, value) = stored.split_at_checked(DEADLINE_BYTES)?;
    Some((u64::from_be_bytes(head.try_into().ok()?), value))
}

/// True when a version with `deadline_ms` has expired at `now_ms`.
#[inline]
pub fn is_expired(deadline_ms: u64, now_ms: u64) -> bool {
    now_ms >= deadline_ms
}

/// What a stored version reads as at `now_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visible<'a> {
    /// A live value, with its deadline if it has one.
    Value {
        /// The user's value.
        value: &'a [u8],
        /// The deadline, for an expiring value.
        deadline_ms: Option<u64>,
    },
    /// A tombstone, or an expired value (which reads as one).
    Tombstone,
}

/// Interprets the stored `(kind, value)` of a version at `now_ms`. An
/// expiring value too short to hold a deadline (which [`crate::WriteBatch`]
/// never writes) reads as a tombstone.
pub fn visible(kind: Kind, stored: &[u8], now_ms: u64) -> Visible<'_> {
    match kind {
        Kind::Delete => Visible::Tombstone,
        Kind::Put => Visible::Value {
            value: stored,
            deadline_ms: None,
        },
        Kind::PutExpiring => match split_expiring_value(stored) {
            Some((deadline_ms, value)) if !is_expired(deadline_ms, now_ms) => Visible::Value {
                value,
                deadline_ms: Some(deadline_ms),
            },
            _ => Visible::Tombstone,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored value round-trips; it reads live before the deadline and
    /// as a tombstone from the deadline on.
    #[test]
    fn expiring_value_round_trip_and_visibility() {
        let mut stored = Vec::new();
        encode_expiring_value(&mut stored, 1_000, b"v");
        assert_eq!(split_expiring_value(&stored), Some((1_000, &b"v"[..])));
        assert_eq!(
            visible(Kind::PutExpiring, &stored, 999),
            Visible::Value {
                value: b"v",
                deadline_ms: Some(1_000)
            }
        );
        assert_eq!(
            visible(Kind::PutExpiring, &stored, 1_000),
            Visible::Tombstone
        );
        assert_eq!(
            visible(Kind::PutExpiring, &stored[..7], 0),
            Visible::Tombstone
        );
        assert_eq!(visible(Kind::Delete, b"", 0), Visible::Tombstone);
    }
}
