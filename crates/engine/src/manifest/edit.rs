//! A version edit. (stub: being written)

/// An SSTable as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (name `NNNNNN.sst`).
    pub number: u64,
    /// Level 0..levels.
    pub level: u32,
    /// File size.
    pub file_bytes: u64,
    /// Smallest encoded internal key.
    pub smallest: Vec<u8>,
    /// Largest encoded internal key.
    pub largest: Vec<u8>,
    /// Entries.
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Smallest timestamp.
    pub ts_min: u64,
    /// Largest timestamp.
    pub ts_max: u64,
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
    /// Appends the encoding of the edit.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let _ = out;
        todo!()
    }
    /// Decodes an edit; every field is validated.
    pub fn decode(bytes: &[u8]) -> Result<VersionEdit, String> {
        let _ = bytes;
        todo!()
    }
}
