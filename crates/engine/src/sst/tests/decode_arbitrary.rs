//! Arbitrary bytes fed to the block and table decoders never panic (the
//! in-crate twin of `fuzz/fuzz_targets/sst_block.rs`).

use super::{Model, build, collect_all, open, options, sorted_model};
use crate::iter::InternalIterator;
use crate::key::{Kind, internal_key};
use crate::options::Compression;
use crate::sst::block::{Block, BlockIter};
use crate::sst::block_builder::BlockBuilder;
use crate::sst::block_io::BLOCK_TRAILER_BYTES;
use crate::sst::footer::{FOOTER_BYTES, Footer};
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;

/// Builds a block from `data` and walks it: full scan and a few seeks. Errors are fine.
fn walk_block(data: Vec<u8>, seeks: &[Vec<u8>]) {
    let Ok(block) = Block::new(data, Arc::from(Path::new("fuzz")), 0) else {
        return;
    };
    let mut it = BlockIter::new(Arc::new(block));
    let _ = collect_all(&mut it, 100_000);
    for target in seeks {
        if it.seek(target).is_ok() && it.valid() {
            let _ = (it.key().len(), it.value().len());
            let _ = it.next();
        }
        if it.seek_user_key(crate::key::user_key(target)).is_ok() && it.valid() {
            let _ = (it.key().len(), it.value().len());
        }
    }
}

/// Opens `data` as a table and reads it: full scan, seeks, gets. Errors are fine.
fn walk_table(data: Vec<u8>, seeks: &[Vec<u8>]) {
    let Ok(table) = open(data, 1 << 16) else {
        return;
    };
    let mut it = table.iter();
    let _ = collect_all(&mut it, 100_000);
    for target in seeks {
        let _ = it.seek(target);
        let _ = table.get(crate::key::user_key(target));
    }
}

fn sample_model() -> Model {
    sorted_model(
        (0..30u64)
            .map(|i| {
                (
                    internal_key(format!("k{}", i % 9).as_bytes(), i, i, Kind::Put),
                    vec![i as u8; (i % 4) as usize],
                )
            })
            .collect(),
    )
}

fn targets() -> Vec<Vec<u8>> {
    vec![
        internal_key(b"k3", 5, 5, Kind::Put),
        internal_key(b"", 0, 0, Kind::Put),
        internal_key(b"zz", 0, 0, Kind::Delete),
        b"short".to_vec(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random bytes as a block or as a table never panic.
    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        walk_block(data.clone(), &targets());
        walk_table(data, &targets());
    }

    /// A valid block with random bytes overwritten (no checksum to stop
    /// them) decodes to an error or to entries, never a panic.
    #[test]
    fn mutated_blocks_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        restart in 1usize..5,
    ) {
        let mut b = BlockBuilder::new(restart);
        for (k, v) in sample_model() {
            b.add(&k, &v);
        }
        let mut data = b.finish();
        for (at, byte) in edits {
            let i = at.index(data.len());
            data[i] = byte;
        }
        walk_block(data, &targets());
    }

    /// A valid table whose index block is replaced by a mutated copy with a
    /// recomputed checksum (so decoding, not the checksum, must cope) never
    /// panics and never loops.
    #[test]
    fn mutated_index_behind_valid_checksum_never_panics(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (mut bytes, _) = build(&sample_model(), options(64, 2, Compression::None));
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..]).unwrap();
        let start = footer.index.offset as usize;
        let end = start + footer.index.size as usize;
        for (at, byte) in edits {
            let i = start + at.index(end - start);
            bytes[i] = byte;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[start..end]), &[bytes[end]]);
        bytes[end + 1..end + BLOCK_TRAILER_BYTES].copy_from_slice(&crc.to_le_bytes());
        walk_table(bytes, &targets());
    }
}
