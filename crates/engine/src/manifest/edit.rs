//! A version edit: one change to the set of live SSTables, and its encoding.
//!
//! `docs/FORMAT.md`, "Version edit": an edit is a sequence of
//! fields, each a tag varint followed by that tag's body. Fields may come in
//! any order; the encoder writes them in tag order.
//!
//! ```text
//! edit  := field*
//! field := TAG_ADDED_FILE       varint  file
//!        | TAG_REMOVED_FILE     varint  level: varint, number: varint
//!        | TAG_WAL_SEGMENT_MIN  varint  varint
//!        | TAG_NEXT_FILE_NUMBER varint  varint
//!        | TAG_LAST_SEQ         varint  varint
//! file  := number, level, file_bytes: varint,
//!          smallest_len: varint, smallest bytes,
//!          largest_len: varint, largest bytes,
//!          entries, tombstones, ts_min, ts_max: varint
//! ```
//!
//! Decoding validates every field (see [`VersionEdit::validate`]) and
//! returns a description of the first problem; it never panics and never
//! allocates more than the input's own size, because every length is
//! bounded and checked against the bytes left before anything is copied.

use crate::coding::{get_bytes, get_len, get_varint, put_varint};
use crate::key::{INTERNAL_KEY_TRAILER_BYTES, KEY_BYTES_MAX, compare_internal, parse_internal_key};
use std::cmp::Ordering;

/// Number of levels the manifest can describe: levels are `0..LEVELS_MAX`.
/// `Options::levels` must not exceed it.
pub const LEVELS_MAX: u32 = 16;

/// Longest encoded internal key an edit may carry (`smallest`, `largest`).
pub const EDIT_KEY_BYTES_MAX: usize = KEY_BYTES_MAX + INTERNAL_KEY_TRAILER_BYTES;

/// Tag of an added file (`docs/FORMAT.md`, "Version edit").
pub const TAG_ADDED_FILE: u64 = 1;
/// Tag of a removed file.
pub const TAG_REMOVED_FILE: u64 = 2;
/// Tag of `wal_segment_min`.
pub const TAG_WAL_SEGMENT_MIN: u64 = 3;
/// Tag of `next_file_number`.
pub const TAG_NEXT_FILE_NUMBER: u64 = 4;
/// Tag of `last_seq`.
pub const TAG_LAST_SEQ: u64 = 5;

/// An SSTable as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (name `NNNNNN.sst`).
    pub number: u64,
    /// Level, `0..LEVELS_MAX`.
    pub level: u32,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Smallest encoded internal key.
    pub smallest: Vec<u8>,
    /// Largest encoded internal key (not below `smallest` in internal order).
    pub largest: Vec<u8>,
    /// Entries.
    pub entries: u64,
    /// Tombstones (at most `entries`).
    pub tombstones: u64,
    /// Smallest timestamp.
    pub ts_min: u64,
    /// Largest timestamp (at least `ts_min`).
    pub ts_max: u64,
}

impl FileMeta {
    /// Checks the invariants decoding enforces; a description of the first broken one.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.number;
        check_level(self.level)?;
        check_key(&self.smallest, "smallest", n)?;
        check_key(&self.largest, "largest", n)?;
        if compare_internal(&self.smallest, &self.largest) == Ordering::Greater {
            return Err(format!("file {n}: smallest key sorts after largest key"));
        }
        if self.tombstones > self.entries {
            return Err(format!(
                "file {n}: {} tombstones but only {} entries",
                self.tombstones, self.entries
            ));
        }
        if self.ts_min > self.ts_max {
            return Err(format!(
                "file {n}: ts_min {} above ts_max {}",
                self.ts_min, self.ts_max
            ));
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.number);
        put_varint(out, u64::from(self.level));
        put_varint(out, self.file_bytes);
        put_varint(out, self.smallest.len() as u64);
        out.extend_from_slice(&self.smallest);
        put_varint(out, self.largest.len() as u64);
        out.extend_from_slice(&self.largest);
        put_varint(out, self.entries);
        put_varint(out, self.tombstones);
        put_varint(out, self.ts_min);
        put_varint(out, self.ts_max);
    }

    fn decode(input: &mut &[u8]) -> Result<FileMeta, String> {
        let number = varint(input, "added file number")?;
        let level = level(input)?;
        let file_bytes = varint(input, "added file size")?;
        let smallest = key_bytes(input, "smallest")?;
        let largest = key_bytes(input, "largest")?;
        let meta = FileMeta {
            number,
            level,
            file_bytes,
            smallest,
            largest,
            entries: varint(input, "added file entries")?,
            tombstones: varint(input, "added file tombstones")?,
            ts_min: varint(input, "added file ts_min")?,
            ts_max: varint(input, "added file ts_max")?,
        };
        meta.validate()?;
        Ok(meta)
    }
}

/// A change to the set of live files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Files added.
    pub added: Vec<FileMeta>,
    /// Files removed: (level, number).
    pub removed: Vec<(u32, u64)>,
    /// WAL segments numbered below this are flushed and obsolete.
    pub wal_segment_min: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// Highest sequence number contained in the SSTables.
    pub last_seq: Option<u64>,
}

impl VersionEdit {
    /// True when the edit changes nothing (it encodes to zero bytes).
    pub fn is_empty(&self) -> bool {
        self == &VersionEdit::default()
    }

    /// Checks every field the way [`decode`](Self::decode) does, so that an
    /// edit is checked right before it is written as well as after it is read.
    pub fn validate(&self) -> Result<(), String> {
        for file in &self.added {
            file.validate()?;
        }
        for &(level, _) in &self.removed {
            check_level(level)?;
        }
        Ok(())
    }

    /// Appends the encoding of the edit.
    pub fn encode(&self, out: &mut Vec<u8>) {
        debug_assert_eq!(self.validate(), Ok(()));
        for file in &self.added {
            put_varint(out, TAG_ADDED_FILE);
            file.encode(out);
        }
        for &(level, number) in &self.removed {
            put_varint(out, TAG_REMOVED_FILE);
            put_varint(out, u64::from(level));
            put_varint(out, number);
        }
        let scalars = [
            (TAG_WAL_SEGMENT_MIN, self.wal_segment_min),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQ, self.last_seq),
        ];
        for (tag, value) in scalars {
            if let Some(v) = value {
                put_varint(out, tag);
                put_varint(out, v);
            }
        }
    }

    /// Decodes an edit; every field is validated.
    pub fn decode(bytes: &[u8]) -> Result<VersionEdit, String> {
        let mut edit = VersionEdit::default();
        let mut input = bytes;
        while !input.is_empty() {
            let at = bytes.len() - input.len();
            let tag = varint(&mut input, "tag")?;
            match tag {
                TAG_ADDED_FILE => edit.added.push(FileMeta::decode(&mut input)?),
                TAG_REMOVED_FILE => {
                    let level = level(&mut input)?;
                    let number = varint(&mut input, "removed file number")?;
                    edit.removed.push((level, number));
                }
                TAG_WAL_SEGMENT_MIN => set_once(&mut edit.wal_segment_min, &mut input, tag)?,
                TAG_NEXT_FILE_NUMBER => set_once(&mut edit.next_file_number, &mut input, tag)?,
                TAG_LAST_SEQ => set_once(&mut edit.last_seq, &mut input, tag)?,
                other => return Err(format!("unknown tag {other} at byte {at}")),
            }
        }
        Ok(edit)
    }
}

fn check_level(level: u32) -> Result<(), String> {
    if level >= LEVELS_MAX {
        return Err(format!("level {level} not below LEVELS_MAX {LEVELS_MAX}"));
    }
    Ok(())
}

fn check_key(key: &[u8], which: &str, number: u64) -> Result<(), String> {
    if key.len() > EDIT_KEY_BYTES_MAX {
        return Err(format!(
            "file {number}: {which} key of {} bytes exceeds {EDIT_KEY_BYTES_MAX}",
            key.len()
        ));
    }
    if parse_internal_key(key).is_none() {
        return Err(format!("file {number}: {which} key is not an internal key"));
    }
    Ok(())
}

fn varint(input: &mut &[u8], what: &str) -> Result<u64, String> {
    get_varint(input).ok_or_else(|| format!("{what}: truncated or overlong varint"))
}

fn level(input: &mut &[u8]) -> Result<u32, String> {
    let level = varint(input, "level")?;
    match u32::try_from(level) {
        Ok(level) if level < LEVELS_MAX => Ok(level),
        _ => Err(format!("level {level} not below LEVELS_MAX {LEVELS_MAX}")),
    }
}

fn key_bytes(input: &mut &[u8], which: &str) -> Result<Vec<u8>, String> {
    let len = get_len(input, EDIT_KEY_BYTES_MAX)
        .ok_or_else(|| format!("{which} key length missing or above {EDIT_KEY_BYTES_MAX}"))?;
    let bytes = get_bytes(input, len).ok_or_else(|| {
        format!(
            "{which} key truncated: need {len} bytes, have {}",
            input.len()
        )
    })?;
    Ok(bytes.to_vec())
}

fn set_once(slot: &mut Option<u64>, input: &mut &[u8], tag: u64) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("tag {tag} appears twice"));
    }
    *slot = Some(varint(input, "scalar field")?);
    Ok(())
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
