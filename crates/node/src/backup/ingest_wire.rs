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
//!
//! # Bounds
//! - One record is at most [`record_bytes_max`] of the node's key and
//!   value bounds: [`RECORD_FRAMING_BYTES_MAX`] more than its key and
//!   value. The node's ingest route admits a body of that size
//!   (`net::body_gate::body_bytes_max`), so a value at the value bound
//!   travels whole in a batch of its own.
//! - A restore fills batches up to a target size and never past the
//!   node's bound ([`batch_step`]); a record alone over the bound is a
//!   version the node cannot take, named by its key, never sent.

use crate::peer::frame::Stamped;

/// The longest key a record may carry (the engine's own bound is checked
/// again where the version is applied).
pub const KEY_BYTES_MAX: usize = 64 * 1024;

const KIND_TOMBSTONE: u8 = 0;
const KIND_VALUE: u8 = 1;
const KIND_VALUE_DEADLINE: u8 = 2;

/// The bytes a record carries besides its key and value: the key's
/// length, the timestamp, the kind, a deadline, the value's length.
pub const RECORD_FRAMING_BYTES_MAX: usize = 4 + 8 + 1 + 8 + 4;

/// The longest record of a key of at most `key_bytes_max` bytes and a
/// value of at most `value_bytes_max` (with a deadline: the longest kind).
pub fn record_bytes_max(key_bytes_max: usize, value_bytes_max: usize) -> usize {
    RECORD_FRAMING_BYTES_MAX
        .saturating_add(key_bytes_max)
        .saturating_add(value_bytes_max)
}

/// What a restore does with its next record (module header, "Bounds").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchStep {
    /// Append it to the batch being filled.
    Append,
    /// Send the batch being filled first, then append it to a new one.
    SendFirst,
    /// It alone is over what the node admits: refuse it (naming its key).
    TooLarge,
}

/// The step for a record of `record_len` bytes when the batch being
/// filled holds `batch_len`, batches aim at `target` bytes, and no body
/// may exceed `bound` (the node's ingest body bound). A record over
/// `target` (a large value) goes in a batch of its own; every batch sent
/// is at most `bound`, and at most `target` unless it holds one record.
pub fn batch_step(batch_len: usize, record_len: usize, target: usize, bound: usize) -> BatchStep {
    if record_len > bound {
        return BatchStep::TooLarge;
    }
    let joined = batch_len.saturating_add(record_len);
    if batch_len > 0 && (joined > target.min(bound)) {
        BatchStep::SendFirst
    } else {
        BatchStep::Append
    }
}

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

    /// The longest record of the bounds is exactly `record_bytes_max`:
    /// more than the value bound, so a body bound equal to the value
    /// bound (the attacker's finding) refuses a value at its bound.
    #[test]
    fn the_longest_record_is_record_bytes_max() {
        let (key_max, value_max) = (40, 1_000);
        let version = Stamped {
            ts: 1,
            value: Some(vec![7; value_max]),
            deadline_ms: Some(9),
        };
        let key = vec![b'k'; key_max];
        assert_eq!(
            encoded_len(&key, &version),
            record_bytes_max(key_max, value_max)
        );
        let mut body = Vec::new();
        encode(&mut body, &key, &version);
        assert_eq!(body.len(), record_bytes_max(key_max, value_max));
        assert!(body.len() > value_max, "the old bound refuses it");
        assert_eq!(record_bytes_max(usize::MAX, 1), usize::MAX);
    }

    /// Batches: filled to the target, a large record alone, nothing over
    /// the bound ever sent; checked over a sweep of record sizes against
    /// a model of the batches sent.
    #[test]
    fn batches_stay_within_the_bound_and_a_record_over_it_is_refused() {
        use BatchStep::*;
        assert_eq!(batch_step(0, 10, 100, 200), Append);
        assert_eq!(batch_step(90, 10, 100, 200), Append);
        assert_eq!(batch_step(90, 11, 100, 200), SendFirst);
        assert_eq!(
            batch_step(0, 150, 100, 200),
            Append,
            "alone, over the target"
        );
        assert_eq!(batch_step(0, 200, 100, 200), Append, "exactly the bound");
        assert_eq!(batch_step(0, 201, 100, 200), TooLarge);
        assert_eq!(batch_step(50, 201, 100, 200), TooLarge);
        assert_eq!(
            batch_step(5, 10, 100, 12),
            SendFirst,
            "a bound below the target"
        );
        for (target, bound) in [(100, 200), (100, 100), (300, 120)] {
            let mut sent = Vec::new();
            let mut batch = (0, 0); // bytes, records
            for len in (1..=260).chain((1..=260).rev()) {
                match batch_step(batch.0, len, target, bound) {
                    TooLarge => assert!(len > bound),
                    SendFirst => {
                        sent.push(batch);
                        batch = (len, 1);
                    }
                    Append => batch = (batch.0 + len, batch.1 + 1),
                }
            }
            sent.push(batch);
            for (bytes, records) in sent {
                assert!(bytes <= bound, "{bytes} over {bound}");
                assert!(bytes <= target || records == 1, "{bytes} over {target}");
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
