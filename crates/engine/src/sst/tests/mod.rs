//! Tests of the SSTable module as a whole: blocks against a model,
//! model-based table round trips, corruption, and decoding of arbitrary
//! bytes (the in-crate twin of `fuzz/fuzz_targets/sst_block.rs`).

mod block;
mod corruption;
mod decode_arbitrary;
mod round_trip;

use super::test_file::{MemReadable, MemWritable};
use super::{BlockCache, Table, TableBuilder, TableOptions, TableProperties};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key;
use crate::options::Compression;
use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

/// Sorted (internal key, value) pairs: the model a table is checked against.
pub type Model = Vec<(Vec<u8>, Vec<u8>)>;

/// Table options with the given block size, restart interval and compression.
pub fn options(
    block_bytes: usize,
    restart_interval: usize,
    compression: Compression,
) -> TableOptions {
    TableOptions {
        block_bytes,
        restart_interval,
        bloom_bits_per_key: 10,
        compression,
    }
}

/// Builds a table of `model` in memory; returns its bytes and properties.
pub fn build(model: &Model, opts: TableOptions) -> (Vec<u8>, TableProperties) {
    let (file, written) = MemWritable::create();
    let mut b = TableBuilder::new(file, PathBuf::from("test.sst"), opts);
    for (k, v) in model {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.entries(), model.len() as u64);
    let props = b.finish().unwrap();
    assert!(written.synced(), "finish must fsync");
    let bytes = written.bytes();
    assert_eq!(props.file_bytes, bytes.len() as u64);
    (bytes, props)
}

/// Opens table bytes with a fresh cache of `cache_bytes`.
pub fn open(bytes: Vec<u8>, cache_bytes: usize) -> Result<Arc<Table>> {
    Table::open(
        Arc::new(MemReadable::new(bytes)),
        PathBuf::from("test.sst"),
        7,
        Arc::new(BlockCache::new(cache_bytes)),
    )
}

/// Every entry of an iterator from `seek_to_first`, bounded by `limit`.
pub fn collect_all(it: &mut dyn InternalIterator, limit: usize) -> Result<Model> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() && out.len() < limit {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

/// Index of the first model entry at or after `target`.
pub fn lower_bound(model: &Model, target: &[u8]) -> usize {
    model.partition_point(|(k, _)| key::compare_internal(k, target) == Ordering::Less)
}

/// The model's answer to `Table::get(user_key)`.
pub fn model_get(model: &Model, user_key: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let i = lower_bound(model, &key::seek_key(user_key));
    model
        .get(i)
        .filter(|(k, _)| key::user_key(k) == user_key)
        .cloned()
}

/// Sorts entries into internal order and drops duplicate internal keys.
pub fn sorted_model(mut entries: Model) -> Model {
    entries.sort_by(|a, b| key::compare_internal(&a.0, &b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    entries
}
