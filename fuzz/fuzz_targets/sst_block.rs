//! Fuzzes the SSTable decoders: arbitrary bytes as one block (construction,
//! full scan, seeks by internal and by user key) and as a whole table file
//! (open, full scan, seeks, gets). Any panic is a bug; errors are the expected outcome.
//!
//! The first byte picks the target so one corpus covers both; the
//! in-crate twin is `crates/engine/src/sst/tests/decode_arbitrary.rs`.

#![no_main]

use ataman_engine::fs::ReadableFile;
use ataman_engine::iter::InternalIterator;
use ataman_engine::key::{self, Kind};
use ataman_engine::sst::block::{Block, BlockIter};
use ataman_engine::sst::{BlockCache, Table};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Entries visited per scan: far more than a fuzz input can hold, so a
/// scan that does not end is reported as a hang, not hidden.
const SCAN_ENTRIES_MAX: usize = 1 << 20;

/// A table file held in memory.
struct MemFile(Vec<u8>);

impl ReadableFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::Error::other("offset"))?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "short read"))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

fn scan(it: &mut dyn InternalIterator) {
    if it.seek_to_first().is_err() {
        return;
    }
    let mut seen = 0;
    while it.valid() && seen < SCAN_ENTRIES_MAX {
        let _ = (it.key().len(), it.value().len());
        if it.next().is_err() {
            return;
        }
        seen += 1;
    }
    assert!(seen < SCAN_ENTRIES_MAX, "scan did not end");
}

fn targets(data: &[u8]) -> Vec<Vec<u8>> {
    let tail = &data[data.len().saturating_sub(8)..];
    vec![
        key::internal_key(tail, 1, 1, Kind::Put),
        key::seek_key(b""),
        key::internal_key(b"\xff\xff", 0, 0, Kind::Delete),
        tail.to_vec(),
    ]
}

fn fuzz_block(data: &[u8]) {
    let Ok(block) = Block::new(data.to_vec(), Arc::from(Path::new("fuzz.sst")), 0) else {
        return;
    };
    let mut it = BlockIter::new(Arc::new(block));
    scan(&mut it);
    for target in targets(data) {
        if it.seek(&target).is_ok() && it.valid() {
            let _ = (it.key().len(), it.value().len());
            let _ = it.next();
        }
        if it.seek_user_key(key::user_key(&target)).is_ok() && it.valid() {
            let _ = (it.key().len(), it.value().len());
        }
    }
}

fn fuzz_table(data: &[u8]) {
    let file = Arc::new(MemFile(data.to_vec()));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let Ok(table) = Table::open(file, PathBuf::from("fuzz.sst"), 1, cache) else {
        return;
    };
    let mut it = table.iter();
    scan(&mut it);
    for target in targets(data) {
        let _ = it.seek(&target);
        let _ = table.get(key::user_key(&target));
        let _ = table.may_contain(&target);
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        fuzz_block(rest);
    } else {
        fuzz_table(rest);
    }
});
