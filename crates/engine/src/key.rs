//! Internal keys: a user key plus the version that orders it.
//!
//! Format (`docs/FORMAT.md`, "Internal key"):
//!
//! ```text
//! user_key bytes | timestamp: u64 BE | (seq << 8 | kind): u64 BE
//! ```
//!
//! Order: user key ascending (bytewise), then timestamp **descending**, then
//! the kind's tie rank (tombstone, then expiring value, then plain value;
//! see [`tie_rank`]), then sequence number descending. So, for one user key,
//! the first entry met in order is the newest version, and a merge of sorted
//! sources in this order yields each key's winner first. The timestamp is
//! the version (newest wins, whatever order writes arrive in); the kind
//! breaks ties between versions of one key with an equal timestamp the
//! same way on every replica, whatever order they were applied in; the
//! sequence number breaks the remaining ties (same timestamp and kind: the
//! one applied later wins) and orders records for recovery.

use std::cmp::Ordering;

/// Bytes after the user key in an encoded internal key.
pub const INTERNAL_KEY_TRAILER_BYTES: usize = 16;

/// Largest user key the engine stores.
pub const KEY_BYTES_MAX: usize = 64 * 1024;

/// Largest value the engine stores.
pub const VALUE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Sequence numbers fit in 56 bits (the low byte of the trailer word is the kind).
pub const SEQ_MAX: u64 = (1 << 56) - 1;

/// A version timestamp. For the cluster this is a hybrid logical clock
/// value: the upper 48 bits are Unix milliseconds, the lower 16 a logical
/// counter (see [`timestamp_millis`]). The engine only compares timestamps,
/// except that tombstone expiry reads their millisecond part.
pub type Timestamp = u64;

/// Bits of a timestamp below the millisecond part.
pub const TIMESTAMP_LOGICAL_BITS: u32 = 16;

/// The Unix-milliseconds part of a hybrid logical clock timestamp.
pub fn timestamp_millis(ts: Timestamp) -> u64 {
    ts >> TIMESTAMP_LOGICAL_BITS
}

/// Builds a timestamp from milliseconds and a logical counter.
pub fn timestamp_from_millis(millis: u64, logical: u16) -> Timestamp {
    (millis << TIMESTAMP_LOGICAL_BITS) | u64::from(logical)
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A tombstone: the key is deleted as of this version.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A value with a deadline: its stored value is the deadline (Unix
    /// milliseconds, u64 big-endian) followed by the user's value (see
    /// the `expiry` module). From its deadline on it reads as a tombstone at
    /// its timestamp.
    PutExpiring = 2,
}

impl Kind {
    /// Decodes the kind byte; `None` for an unknown value.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            2 => Some(Kind::PutExpiring),
            _ => None,
        }
    }

    /// True for the kinds that carry a value (a put, expiring or not).
    pub fn has_value(self) -> bool {
        self != Kind::Delete
    }
}

/// Rank of a kind byte among versions with an equal timestamp: the higher
/// wins. Tombstone (2) beats expiring value (1) beats plain value (0), on
/// every replica alike. Unknown bytes (the `0xff` of [`seek_key`]) rank
/// above all, so a seek key comes before every version it could tie with.
#[inline]
pub fn tie_rank(kind_byte: u8) -> u8 {
    match kind_byte {
        0 => 2,
        2 => 1,
        1 => 0,
        _ => 3,
    }
}

/// Compares two versions of one user key by `(timestamp, tie rank of the
/// kind, sequence number)`: `Greater` when `a` is the newer (it wins).
#[inline]
pub fn compare_versions(a: (Timestamp, Kind, u64), b: (Timestamp, Kind, u64)) -> Ordering {
    (a.0, tie_rank(a.1 as u8), a.2).cmp(&(b.0, tie_rank(b.1 as u8), b.2))
}

/// A decoded internal key that borrows its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The key as the user gave it.
    pub user_key: &'a [u8],
    /// The version.
    pub ts: Timestamp,
    /// The write's sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: Kind,
}

/// Appends the encoding of an internal key to `out`.
pub fn encode_internal_key(
    out: &mut Vec<u8>,
    user_key: &[u8],
    ts: Timestamp,
    seq: u64,
    kind: Kind,
) {
    debug_assert!(seq <= SEQ_MAX);
    out.reserve(user_key.len() + INTERNAL_KEY_TRAILER_BYTES);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&ts.to_be_bytes());
    out.extend_from_slice(&((seq << 8) | kind as u64).to_be_bytes());
}

/// Encodes an internal key into a new vector.
pub fn internal_key(user_key: &[u8], ts: Timestamp, seq: u64, kind: Kind) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + INTERNAL_KEY_TRAILER_BYTES);
    encode_internal_key(&mut out, user_key, ts, seq, kind);
    out
}

/// The smallest internal key of `user_key` in internal order: seeking to it
/// lands on the newest version of `user_key` (or the next user key).
pub fn seek_key(user_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + INTERNAL_KEY_TRAILER_BYTES);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&u64::MAX.to_be_bytes());
    out.extend_from_slice(&u64::MAX.to_be_bytes());
    out
}

/// Decodes an internal key; `None` if it is too short or the kind is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(INTERNAL_KEY_TRAILER_BYTES)?;
    let (user_key, trailer) = ikey.split_at(split);
    let ts = u64::from_be_bytes(trailer[..8].try_into().ok()?);
    let word = u64::from_be_bytes(trailer[8..].try_into().ok()?);
    let kind = Kind::from_u8((word & 0xff) as u8)?;
    Some(ParsedKey {
        user_key,
        ts,
        seq: word >> 8,
        kind,
    })
}

/// True when `ikey` decodes as an internal key: what
/// `parse_internal_key(ikey).is_some()` says, without decoding the fields.
pub fn is_internal_key(ikey: &[u8]) -> bool {
    ikey.len() >= INTERNAL_KEY_TRAILER_BYTES
        && ikey
            .last()
            .is_some_and(|&kind| Kind::from_u8(kind).is_some())
}

/// The user-key part of an encoded internal key (the whole slice if shorter than a trailer).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(INTERNAL_KEY_TRAILER_BYTES)]
}

/// Compares two encoded internal keys in internal order (see the module doc).
///
/// Slices shorter than a trailer compare as bare user keys that sort before
/// any trailer; decoders reject such keys before they reach a comparison.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    let (ua, ub) = (user_key(a), user_key(b));
    match ua.cmp(ub) {
        Ordering::Equal => compare_trailers(&a[ua.len()..], &b[ub.len()..]),
        other => other,
    }
}

/// Compares two internal-key trailers of one user key in internal order:
/// newer versions first, that is `(timestamp, tie rank, sequence number)`
/// descending. Trailers shorter than [`INTERNAL_KEY_TRAILER_BYTES`] (which
/// decoders reject before any comparison) compare bytewise.
#[inline]
pub fn compare_trailers(ta: &[u8], tb: &[u8]) -> Ordering {
    if ta.len() != INTERNAL_KEY_TRAILER_BYTES || tb.len() != INTERNAL_KEY_TRAILER_BYTES {
        return tb.cmp(ta);
    }
    // Big-endian, so bytewise order is numeric order; reversed because
    // newer (larger) versions come first.
    tb[..8].cmp(&ta[..8]).then_with(|| {
        let (ka, kb) = (ta[15], tb[15]);
        tie_rank(kb)
            .cmp(&tie_rank(ka))
            .then_with(|| tb[8..15].cmp(&ta[8..15]))
    })
}

/// The first 8 bytes of `bytes` as a big-endian integer, zero-padded.
///
/// Monotone in byte order: `a < b` implies `fingerprint(a) <=
/// fingerprint(b)`, so unequal fingerprints order their keys and equal ones
/// (a tie in the first 8 bytes, or a shorter key padded with zeros) leave
/// the order to the keys themselves. Binary searches over sorted keys
/// compare fingerprints first and touch the keys only on a tie.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(word)
}

/// Bytes at the start of both `a` and `b`.
pub fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Internal order is user key ascending, then timestamp and sequence descending.
    #[test]
    fn order_is_key_then_newest_first() {
        let a1 = internal_key(b"a", 1, 9, Kind::Put);
        let a5 = internal_key(b"a", 5, 1, Kind::Delete);
        let a5s2 = internal_key(b"a", 5, 2, Kind::Put);
        let ab = internal_key(b"ab", 100, 1, Kind::Put);
        let b0 = internal_key(b"b", 0, 0, Kind::Put);
        let mut keys = vec![b0.clone(), a1.clone(), ab.clone(), a5.clone(), a5s2.clone()];
        keys.sort_by(|x, y| compare_internal(x, y));
        // At an equal timestamp the tombstone comes first, whatever the sequence numbers.
        assert_eq!(keys, vec![a5, a5s2, a1, ab, b0]);
        assert_eq!(
            compare_internal(
                &seek_key(b"a"),
                &internal_key(b"a", u64::MAX, SEQ_MAX, Kind::Put)
            ),
            Ordering::Less
        );
    }

    /// The tie rule: at an equal timestamp, tombstone, then expiring value,
    /// then plain value, whatever the sequence numbers; the sequence number
    /// decides only between equal kinds; a seek key comes before all.
    #[test]
    fn equal_timestamps_order_by_kind_then_sequence() {
        let put_hi = internal_key(b"k", 7, 30, Kind::Put);
        let put_lo = internal_key(b"k", 7, 3, Kind::Put);
        let exp = internal_key(b"k", 7, 20, Kind::PutExpiring);
        let del = internal_key(b"k", 7, 1, Kind::Delete);
        let newer = internal_key(b"k", 8, 0, Kind::Put);
        let mut keys = vec![
            put_lo.clone(),
            del.clone(),
            put_hi.clone(),
            exp.clone(),
            newer.clone(),
        ];
        keys.sort_by(|x, y| compare_internal(x, y));
        assert_eq!(keys, vec![newer, del, exp, put_hi, put_lo]);
        assert_eq!(
            compare_internal(
                &seek_key(b"k"),
                &internal_key(b"k", u64::MAX, SEQ_MAX, Kind::Delete)
            ),
            Ordering::Less
        );
        assert_eq!(
            compare_versions((7, Kind::Delete, 1), (7, Kind::PutExpiring, 9)),
            Ordering::Greater
        );
        assert_eq!(
            compare_versions((7, Kind::PutExpiring, 1), (7, Kind::Put, 9)),
            Ordering::Greater
        );
        assert_eq!(
            compare_versions((8, Kind::Put, 1), (7, Kind::Delete, 9)),
            Ordering::Greater
        );
    }

    /// Encoding round-trips and rejects unknown kinds.
    #[test]
    fn parse_round_trip() {
        let k = internal_key(b"key", 42, 7, Kind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(p.user_key, b"key");
        assert_eq!((p.ts, p.seq, p.kind), (42, 7, Kind::Delete));
        let mut bad = k.clone();
        *bad.last_mut().unwrap() = 9;
        assert_eq!(
            parse_internal_key(&internal_key(b"k", 1, 2, Kind::PutExpiring))
                .unwrap()
                .kind,
            Kind::PutExpiring
        );
        assert!(parse_internal_key(&bad).is_none());
        assert!(parse_internal_key(&k[..15]).is_none());
    }

    /// is_internal_key agrees with parse_internal_key on every length and kind byte.
    #[test]
    fn is_internal_key_matches_parse() {
        let k = internal_key(b"key", 42, 7, Kind::Put);
        for len in 0..=k.len() {
            for kind in 0..=255u8 {
                let mut candidate = k[..len].to_vec();
                if let Some(last) = candidate.last_mut() {
                    *last = kind;
                }
                assert_eq!(
                    is_internal_key(&candidate),
                    parse_internal_key(&candidate).is_some(),
                    "{candidate:?}"
                );
            }
        }
    }
}
