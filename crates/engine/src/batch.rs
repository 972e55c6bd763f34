//! Atomic write batches and their encoding.
//!
//! A batch is encoded once, by the thread that builds it, into the exact
//! bytes the WAL stores (`docs/FORMAT.md`, "Write batch"); the writer thread
//! only prefixes the sequence number. So the single writer spends no time
//! encoding, and recovery decodes with the same function the fuzzer checks.
//!
//! ```text
//! batch   := count: u32 LE, entry * count
//! entry   := kind: u8, ts: u64 LE, key_len: varint, key, [value_len: varint, value]  (value only for Put and PutExpiring)
//!            (for PutExpiring the value is deadline_ms: u64 BE, then the user's value; see `crate::expiry`)
//! payload := first_seq: u64 LE, batch          (one WAL record)
//! ```

use crate::coding::{get_bytes, get_len, get_u8, get_u32_le, get_u64_le, put_varint};
use crate::expiry::{DEADLINE_BYTES, DEADLINE_MS_MAX, encode_expiring_value, split_expiring_value};
use crate::key::{KEY_BYTES_MAX, Kind, Timestamp, VALUE_BYTES_MAX};

/// Largest encoded batch (and so WAL record payload) the engine accepts.
pub const BATCH_BYTES_MAX: usize = 128 * 1024 * 1024;

/// Bytes of the count header.
const BATCH_HEADER_BYTES: usize = 4;
/// Most bytes an entry takes besides its key and value: kind (1),
/// timestamp (8), two varint lengths (10 each at most), a deadline (8).
const ENTRY_OVERHEAD_BYTES_MAX: usize = 1 + 8 + 2 * 10 + DEADLINE_BYTES;

/// Largest stored value in an entry: a user value and a deadline.
const STORED_VALUE_BYTES_MAX: usize = VALUE_BYTES_MAX + DEADLINE_BYTES;

/// Puts and deletes applied all together or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// One decoded entry of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// Put or delete.
    pub kind: Kind,
    /// The version timestamp.
    pub ts: Timestamp,
    /// The user key.
    pub key: &'a [u8],
    /// The stored value: empty for a delete; for an expiring put the
    /// deadline then the user's value (`crate::expiry`).
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        let mut rep = Vec::with_capacity(64);
        rep.extend_from_slice(&0u32.to_le_bytes());
        WriteBatch { rep, count: 0 }
    }

    /// An empty batch with room for one entry of `key_bytes` and
    /// `value_bytes` without growing (the network thread builds one such
    /// batch per request; growing it cost a reallocation each).
    pub fn with_capacity_for_one(key_bytes: usize, value_bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(
            BATCH_HEADER_BYTES + ENTRY_OVERHEAD_BYTES_MAX + key_bytes + value_bytes,
        );
        rep.extend_from_slice(&0u32.to_le_bytes());
        WriteBatch { rep, count: 0 }
    }

    /// Adds a put. Limits are checked by [`WriteBatch::validate`] at submit.
    pub fn put(&mut self, key: &[u8], value: &[u8], ts: Timestamp) -> &mut Self {
        self.push(Kind::Put, key, value, ts)
    }

    /// Adds a put that expires at `deadline_ms` (Unix milliseconds, at most
    /// [`DEADLINE_MS_MAX`], checked by [`WriteBatch::validate`]).
    pub fn put_expiring(
        &mut self,
        key: &[u8],
        value: &[u8],
        ts: Timestamp,
        deadline_ms: u64,
    ) -> &mut Self {
        self.rep.push(Kind::PutExpiring as u8);
        self.rep.extend_from_slice(&ts.to_le_bytes());
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        put_varint(&mut self.rep, (DEADLINE_BYTES + value.len()) as u64);
        encode_expiring_value(&mut self.rep, deadline_ms, value);
        self.bump_count();
        self
    }

    /// Adds a version as stored: `value` is the stored value of `kind`
    /// (for [`Kind::PutExpiring`], the deadline then the user's value), as
    /// [`BatchEntry::value`] gives it.
    pub fn push_stored(
        &mut self,
        kind: Kind,
        key: &[u8],
        stored_value: &[u8],
        ts: Timestamp,
    ) -> &mut Self {
        self.push(kind, key, stored_value, ts)
    }

    /// Adds a delete (a tombstone at `ts`).
    pub fn delete(&mut self, key: &[u8], ts: Timestamp) -> &mut Self {
        self.push(Kind::Delete, key, &[], ts)
    }

    fn push(&mut self, kind: Kind, key: &[u8], value: &[u8], ts: Timestamp) -> &mut Self {
        self.rep.push(kind as u8);
        self.rep.extend_from_slice(&ts.to_le_bytes());
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        if kind.has_value() {
            put_varint(&mut self.rep, value.len() as u64);
            self.rep.extend_from_slice(value);
        }
        self.bump_count();
        self
    }

    fn bump_count(&mut self) {
        self.count = self.count.saturating_add(1);
        self.rep[..BATCH_HEADER_BYTES].copy_from_slice(&self.count.to_le_bytes());
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn encoded_bytes(&self) -> usize {
        self.rep.len()
    }

    /// The encoded batch (without the sequence number).
    pub fn as_bytes(&self) -> &[u8] {
        &self.rep
    }

    /// Checks the engine's limits: non-empty, keys and values within bounds,
    /// total size within [`BATCH_BYTES_MAX`].
    pub fn validate(&self) -> Result<(), String> {
        if self.count == 0 {
            return Err("empty write batch".into());
        }
        if self.rep.len() > BATCH_BYTES_MAX {
            return Err(format!(
                "write batch of {} bytes exceeds the limit of {BATCH_BYTES_MAX}",
                self.rep.len()
            ));
        }
        for entry in self.iter() {
            let entry = entry.map_err(|e| format!("write batch does not decode: {e}"))?;
            if entry.key.len() > KEY_BYTES_MAX {
                return Err(format!(
                    "key of {} bytes exceeds the limit of {KEY_BYTES_MAX}",
                    entry.key.len()
                ));
            }
            let value = if entry.kind == Kind::PutExpiring {
                let (deadline_ms, value) = split_expiring_value(entry.value)
                    .ok_or("expiring value shorter than its deadline")?;
                if deadline_ms > DEADLINE_MS_MAX {
                    return Err(format!(
                        "deadline {deadline_ms} ms exceeds the limit of {DEADLINE_MS_MAX} ms"
                    ));
                }
                value
            } else {
                entry.value
            };
            if value.len() > VALUE_BYTES_MAX {
                return Err(format!(
                    "value of {} bytes exceeds the limit of {VALUE_BYTES_MAX}",
                    value.len()
                ));
            }
        }
        Ok(())
    }

    /// Iterates the entries in the order they were added.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter::new(&self.rep).unwrap_or(BatchIter {
            rest: &[],
            remaining: 0,
        })
    }
}

/// Iterator over the entries of an encoded batch; yields an error (once) on malformed input.
pub struct BatchIter<'a> {
    rest: &'a [u8],
    remaining: u32,
}

impl<'a> BatchIter<'a> {
    /// Starts decoding an encoded batch; an error if the header is missing.
    pub fn new(rep: &'a [u8]) -> Result<Self, String> {
        let mut cur = rep;
        let count = get_u32_le(&mut cur).ok_or("batch header truncated")?;
        Ok(BatchIter {
            rest: cur,
            remaining: count,
        })
    }

    fn decode_one(&mut self) -> Result<BatchEntry<'a>, String> {
        let cur = &mut self.rest;
        let kind_byte = get_u8(cur).ok_or("entry kind truncated")?;
        let kind = Kind::from_u8(kind_byte).ok_or_else(|| format!("unknown kind {kind_byte}"))?;
        let ts = get_u64_le(cur).ok_or("timestamp truncated")?;
        let key_len = get_len(cur, KEY_BYTES_MAX).ok_or("bad key length")?;
        let key = get_bytes(cur, key_len).ok_or("key truncated")?;
        let value = if kind.has_value() {
            let value_len = get_len(cur, STORED_VALUE_BYTES_MAX).ok_or("bad value length")?;
            if kind == Kind::PutExpiring && value_len < DEADLINE_BYTES {
                return Err("expiring value shorter than its deadline".into());
            }
            get_bytes(cur, value_len).ok_or("value truncated")?
        } else {
            &[]
        };
        Ok(BatchEntry {
            kind,
            ts,
            key,
            value,
        })
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchEntry<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.rest.is_empty() {
                return None;
            }
            let extra = self.rest.len();
            self.rest = &[];
            return Some(Err(format!("{extra} trailing bytes after the last entry")));
        }
        self.remaining -= 1;
        match self.decode_one() {
            Ok(e) => Some(Ok(e)),
            Err(e) => {
                self.remaining = 0;
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// Appends a WAL payload (`first_seq` then the batch) to `out`.
pub fn encode_payload(out: &mut Vec<u8>, first_seq: u64, batch: &WriteBatch) {
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&batch.rep);
}

/// A WAL payload split into its sequence number and the encoded batch.
#[derive(Debug, Clone, Copy)]
pub struct Payload<'a> {
    /// Sequence number of the first entry; entry `i` has `first_seq + i`.
    pub first_seq: u64,
    /// Number of entries.
    pub count: u32,
    /// The encoded batch, header included.
    pub batch: &'a [u8],
}

/// Decodes and fully validates a WAL payload (every entry is checked).
pub fn decode_payload(payload: &[u8]) -> Result<Payload<'_>, String> {
    let mut cur = payload;
    let first_seq = get_u64_le(&mut cur).ok_or("payload sequence number truncated")?;
    let batch = cur;
    let iter = BatchIter::new(batch)?;
    let count = iter.remaining;
    if count == 0 {
        return Err("payload holds an empty batch".into());
    }
    for entry in iter {
        entry?;
    }
    if first_seq
        .checked_add(u64::from(count))
        .is_none_or(|end| end > crate::key::SEQ_MAX)
    {
        return Err(format!("sequence number {first_seq} out of range"));
    }
    Ok(Payload {
        first_seq,
        count,
        batch,
    })
}

impl<'a> Payload<'a> {
    /// Iterates the entries (already validated by [`decode_payload`]).
    pub fn entries(&self) -> BatchIter<'a> {
        BatchIter::new(self.batch).unwrap_or(BatchIter {
            rest: &[],
            remaining: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch round-trips through the WAL payload encoding, empty values included.
    #[test]
    fn payload_round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1", 10)
            .delete(b"k2", 11)
            .put(b"k3", b"", 12);
        let mut out = Vec::new();
        encode_payload(&mut out, 100, &b);
        let p = decode_payload(&out).unwrap();
        assert_eq!((p.first_seq, p.count), (100, 3));
        let entries: Vec<_> = p.entries().map(|e| e.unwrap()).collect();
        assert_eq!(entries[0].key, b"k1");
        assert_eq!(entries[1].kind, Kind::Delete);
        assert_eq!(entries[2].value, b"");
        assert_eq!(entries[2].kind, Kind::Put);
    }

    /// Every truncation of a payload is rejected, never misread.
    #[test]
    fn truncated_payloads_are_rejected() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value", 1).delete(b"other", 2);
        let mut out = Vec::new();
        encode_payload(&mut out, 5, &b);
        for cut in 0..out.len() {
            assert!(decode_payload(&out[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = out.clone();
        extra.push(0);
        assert!(decode_payload(&extra).is_err());
    }

    /// A batch sized for one entry holds it without growing, and encodes
    /// it exactly as a batch from `new`.
    #[test]
    fn with_capacity_for_one_never_grows() {
        for (key, value) in [(1, 0), (7, 100), (300, 20_000), (4096, 1 << 20)] {
            let mut put = WriteBatch::with_capacity_for_one(key, value);
            let capacity = put.rep.capacity();
            put.put(&vec![b'k'; key], &vec![b'v'; value], u64::MAX);
            assert_eq!(put.rep.capacity(), capacity, "put {key}/{value} grew");
            assert_eq!(
                put.as_bytes(),
                WriteBatch::new()
                    .put(&vec![b'k'; key], &vec![b'v'; value], u64::MAX)
                    .as_bytes()
            );
            let mut delete = WriteBatch::with_capacity_for_one(key, 0);
            let capacity = delete.rep.capacity();
            delete.delete(&vec![b'k'; key], u64::MAX);
            assert_eq!(delete.rep.capacity(), capacity, "delete {key} grew");
        }
    }

    /// An expiring put round-trips with its deadline; a deadline past the
    /// maximum is refused by validation, the maximum itself accepted; a
    /// stored value shorter than a deadline does not decode.
    #[test]
    fn expiring_put_round_trip_and_limits() {
        let mut b = WriteBatch::new();
        b.put_expiring(b"k", b"v", 10, 1_234);
        assert!(b.validate().is_ok());
        let mut out = Vec::new();
        encode_payload(&mut out, 1, &b);
        let p = decode_payload(&out).unwrap();
        let e = p.entries().next().unwrap().unwrap();
        assert_eq!(e.kind, Kind::PutExpiring);
        assert_eq!(split_expiring_value(e.value), Some((1_234, &b"v"[..])));
        let mut max = WriteBatch::new();
        max.put_expiring(b"k", b"v", 10, DEADLINE_MS_MAX);
        assert!(max.validate().is_ok());
        let mut past = WriteBatch::new();
        past.put_expiring(b"k", b"v", 10, DEADLINE_MS_MAX + 1);
        assert!(past.validate().unwrap_err().contains("deadline"));
        let mut short = WriteBatch::new();
        short.push_stored(Kind::PutExpiring, b"k", b"1234567", 10);
        assert!(short.validate().is_err());
        let mut big = WriteBatch::new();
        big.put_expiring(b"k", &vec![0u8; VALUE_BYTES_MAX], 10, 5);
        assert!(big.validate().is_ok());
    }

    /// Validation rejects empty batches and oversized keys.
    #[test]
    fn validate_limits() {
        assert!(WriteBatch::new().validate().is_err());
        let mut b = WriteBatch::new();
        b.put(&vec![b'k'; KEY_BYTES_MAX + 1], b"v", 1);
        assert!(b.validate().is_err());
        let mut ok = WriteBatch::new();
        ok.put(&vec![b'k'; KEY_BYTES_MAX], b"v", 1);
        assert!(ok.validate().is_ok());
    }
}
