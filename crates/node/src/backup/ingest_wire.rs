//! The body of a restore's `POST /v0/backup?ingest=1` (docs/BACKUP.md,
//! "Restore"): versions with their own timestamps, deadlines and
//! tombstones. Pure: bytes in, versions out.
//!
//! # Format
//! A body is zero or more records, back to back:
//!
//! ```text
//! key_len   u32 little-endian (1 ..= KEY_BYTES_MAX)
//! key       key_len bytes
//! ts        u64 little-endian (the version's hybrid-logical-clock timestamp)
//! kind      u8: 0 tombstone, 1 value, 2 value with a deadline
//! deadline  u64 little-endian, Unix ms (kind 2 only)
//! value_len u32 little-endian (kinds 1 and 2)
//! value     value_len bytes (kinds 1 and 2)
//! ```
//!
//! A body cut inside a record, an unknown kind, an empty or oversized key
//! is refused whole ([`DecodeError`], naming the record's offset).

use crate::peer::frame::Stamped;

/// The longest key a record may carry (the engine's own bound is checked
/// again where the version is applied).
pub const KEY_BYTES_MAX: usize = 64 * 1024;

const KIND_TOMBSTONE: u8 = 0;
const KIND_VALUE: u8 = 1;
const KIND_VALUE_DEADLINE: u8 = 2;

/// A body that is not a list of records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ingest body: record at byte {offset}: {what}")]
pub struct DecodeError {
    /// Where the bad record starts.
    pub offset: usize,
    /// What is wrong with it.
    pub what: &'static str,
}

/// The bytes `key`'s `version` takes in a body.
pub fn encoded_len(key: &[u8], version: &Stamped) -> usize {
    let value = version.value.as_ref().map_or(0, |v| 4 + v.len());
    let deadline = if version.deadline_ms.is_some() { 8 } else { 0 };
    4 + key.len() + 8 + 1 + deadline + value
}

/// Appends one record.
pub fn encode(out: &mut Vec<u8>, key: &[u8], version: &Stamped) {
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.ts.to_le_bytes());
    match (&version.value, version.deadline_ms) {
        (None, _) => out.push(KIND_TOMBSTONE),
        (Some(value), deadline) => {
            if let Some(d) = deadline {
                out.push(KIND_VALUE_DEADLINE);
                out.extend_from_slice(&d.to_le_bytes());
            } else {
                out.push(KIND_VALUE);
            }
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
    }
}

/// Every record of `body`.
pub fn decode(body: &[u8]) -> Result<Vec<(Vec<u8>, Stamped)>, DecodeError> {
    let mut items = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let start = at;
        let err = |what| DecodeError {
            offset: start,
            what,
        };
        let key_len = u32_at(body, &mut at).ok_or(err("cut in the key's length"))? as usize;
        if key_len == 0 || key_len > KEY_BYTES_MAX {
            return Err(err("key length out of bounds"));
        }
        let key = take(body, &mut at, key_len).ok_or(err("cut in the key"))?;
        let ts = u64_at(body, &mut at).ok_or(err("cut in the timestamp"))?;
        let kind = *take(body, &mut at, 1)
            .and_then(|b| b.first())
            .ok_or(err("cut in the kind"))?;
        let deadline_ms = match kind {
            KIND_TOMBSTONE | KIND_VALUE => None,
            KIND_VALUE_DEADLINE => Some(u64_at(body, &mut at).ok_or(err("cut in the deadline"))?),
            _ => return Err(err("unknown kind")),
        };
        let value = if kind == KIND_TOMBSTONE {
            None
        } else {
            let len = u32_at(body, &mut at).ok_or(err("cut in the value's length"))? as usize;
            Some(
                take(body, &mut at, len)
                    .ok_or(err("cut in the value"))?
                    .to_vec(),
            )
        };
        let version = Stamped {
            ts,
            value,
            deadline_ms,
        };
        items.push((key.to_vec(), version));
    }
    Ok(items)
}

fn take<'b>(body: &'b [u8], at: &mut usize, len: usize) -> Option<&'b [u8]> {
    let end = at.checked_add(len)?;
    let bytes = body.get(*at..end)?;
    *at = end;
    Some(bytes)
}

fn u32_at(body: &[u8], at: &mut usize) -> Option<u32> {
    let bytes = take(body, at, 4)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

fn u64_at(body: &[u8], at: &mut usize) -> Option<u64> {
    let bytes = take(body, at, 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<(Vec<u8>, Stamped)> {
        vec![
            (b"a".to_vec(), Stamped::value(7, b"one".to_vec())),
            (
                b"b".to_vec(),
                Stamped {
                    ts: 9,
                    value: Some(Vec::new()),
                    deadline_ms: Some(1_234),
                },
            ),
            (
                b"c".to_vec(),
                Stamped {
                    ts: u64::MAX,
                    value: None,
                    deadline_ms: None,
                },
            ),
        ]
    }

    #[test]
    fn records_round_trip_with_their_lengths() {
        let mut body = Vec::new();
        for (k, v) in &samples() {
            let before = body.len();
            encode(&mut body, k, v);
            assert_eq!(body.len() - before, encoded_len(k, v));
        }
        assert_eq!(decode(&body).unwrap(), samples());
        assert_eq!(decode(&[]).unwrap(), Vec::new());
    }

    /// Every cut of a valid body is refused (never a panic, never a
    /// shorter list taken for whole), except at a record's boundary.
    #[test]
    fn every_cut_body_is_refused_or_a_whole_prefix() {
        let mut body = Vec::new();
        let mut ends = vec![0];
        for (k, v) in &samples() {
            encode(&mut body, k, v);
            ends.push(body.len());
        }
        for cut in 0..body.len() {
            let decoded = decode(&body[..cut]);
            if ends.contains(&cut) {
                assert_eq!(
                    decoded.unwrap().len(),
                    ends.iter().position(|&e| e == cut).unwrap()
                );
            } else {
                assert!(decoded.is_err(), "cut at {cut} accepted");
            }
        }
    }

    #[test]
    fn bad_kind_and_key_lengths_are_named() {
        let mut body = Vec::new();
        encode(&mut body, b"k", &Stamped::value(1, b"v".to_vec()));
        body[4 + 1 + 8] = 9;
        assert_eq!(decode(&body).unwrap_err().what, "unknown kind");
        assert_eq!(
            decode(&[0, 0, 0, 0]).unwrap_err().what,
            "key length out of bounds"
        );
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff]).unwrap_err().what,
            "key length out of bounds"
        );
    }
}
