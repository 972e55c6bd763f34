//! One block against a sorted model, and hand-made malformed blocks.

use super::{Model, collect_all, lower_bound, sorted_model};
use crate::coding::put_varint;
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, internal_key};
use crate::sst::block::{Block, BlockIter};
use crate::sst::block_builder::BlockBuilder;
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;

fn block_of(model: &Model, restart_interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in model {
        b.add(k, v);
    }
    Arc::new(Block::new(b.finish(), Arc::from(Path::new("b.sst")), 4096).unwrap())
}

fn entries() -> impl Strategy<Value = Model> {
    prop::collection::vec(
        (
            prop::collection::vec(b'a'..b'e', 0..6),
            0u64..4,
            0u64..4,
            // Values past 127 bytes take the multi-byte varint header path.
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..20),
                prop::collection::vec(any::<u8>(), 120..300),
            ],
        ),
        1..80,
    )
    .prop_map(|raw| {
        sorted_model(
            raw.into_iter()
                .map(|(uk, ts, seq, v)| (internal_key(&uk, ts, seq, Kind::Put), v))
                .collect(),
        )
    })
}

proptest! {
    /// A block iterates exactly its entries, and seek lands on the first key
    /// at or after any target, for restart intervals 1, 2, 4 and 16;
    /// seek_user_key lands where a seek to the user key's seek key does.
    #[test]
    fn block_matches_model(
        model in entries(),
        restart_interval in prop::sample::select(vec![1usize, 2, 4, 16]),
        targets in prop::collection::vec(
            (prop::collection::vec(b'a'..b'f', 0..7), 0u64..5, 0u64..5), 1..20),
    ) {
        let block = block_of(&model, restart_interval);
        let mut it = BlockIter::new(block);
        prop_assert_eq!(&collect_all(&mut it, usize::MAX).unwrap(), &model);
        for (uk, ts, seq) in targets {
            let target = internal_key(&uk, ts, seq, Kind::Put);
            it.seek(&target).unwrap();
            match model.get(lower_bound(&model, &target)) {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), &k[..]);
                    prop_assert_eq!(it.value(), &v[..]);
                }
                None => prop_assert!(!it.valid()),
            }
            let seek_target = key::seek_key(&uk);
            let expected = model.get(lower_bound(&model, &seek_target));
            it.seek_user_key(&uk).unwrap();
            match expected {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), &k[..]);
                    prop_assert_eq!(it.value(), &v[..]);
                }
                None => prop_assert!(!it.valid()),
            }
        }
    }
}

/// Keys that share a long prefix (past the restart table's prefix limit)
/// and differ in a short tail, so fingerprints tie, differ, and start
/// inside the shared bytes.
fn prefixed_entries() -> impl Strategy<Value = (Vec<u8>, Model)> {
    (
        prop::collection::vec(b'a'..b'c', 0..40),
        prop::collection::vec(
            (prop::collection::vec(b'a'..b'd', 0..12), 0u64..3, 0u64..3),
            1..60,
        ),
    )
        .prop_map(|(prefix, raw)| {
            let model = sorted_model(
                raw.into_iter()
                    .map(|(tail, ts, seq)| {
                        let uk = [&prefix[..], &tail[..]].concat();
                        (internal_key(&uk, ts, seq, Kind::Put), tail)
                    })
                    .collect(),
            );
            (prefix, model)
        })
}

proptest! {
    /// Seeks land where the model says when keys share long prefixes, for
    /// targets inside the prefix, cut short of it, and beside it.
    #[test]
    fn block_with_shared_prefixes_matches_model(
        (prefix, model) in prefixed_entries(),
        restart_interval in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        targets in prop::collection::vec(
            (0usize..45, prop::collection::vec(b'a'..b'e', 0..13), 0u64..4), 1..20),
    ) {
        let block = block_of(&model, restart_interval);
        let mut it = BlockIter::new(block);
        for (cut, tail, ts) in targets {
            let uk = [&prefix[..cut.min(prefix.len())], &tail[..]].concat();
            let seek_target = key::seek_key(&uk);
            let expected = model.get(lower_bound(&model, &seek_target));
            it.seek_user_key(&uk).unwrap();
            prop_assert_eq!(it.valid().then(|| (it.key().to_vec(), it.value().to_vec())), expected.cloned());
            let target = internal_key(&uk, ts, 1, Kind::Put);
            let expected = model.get(lower_bound(&model, &target));
            it.seek(&target).unwrap();
            prop_assert_eq!(it.valid().then(|| (it.key().to_vec(), it.value().to_vec())), expected.cloned());
        }
    }
}

fn malformed(data: Vec<u8>) -> bool {
    let Ok(block) = Block::new(data, Arc::from(Path::new("b.sst")), 99) else {
        return true;
    };
    let mut it = BlockIter::new(Arc::new(block));
    let result = collect_all(&mut it, 1000);
    matches!(result, Err(Error::Corruption { offset: 99, .. }))
}

fn with_restarts(mut entries: Vec<u8>, restarts: &[u32]) -> Vec<u8> {
    for r in restarts {
        entries.extend_from_slice(&r.to_le_bytes());
    }
    entries.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    entries
}

fn entry(out: &mut Vec<u8>, shared: u64, key: &[u8], value: &[u8]) {
    put_varint(out, shared);
    put_varint(out, key.len() as u64);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Bad restart arrays, bad entry headers and bad keys are corruption naming the block's offset.
#[test]
fn malformed_blocks_are_corruption() {
    let k1 = internal_key(b"k1", 1, 1, Kind::Put);
    let mut good = Vec::new();
    entry(&mut good, 0, &k1, b"v");
    // Sanity: the hand-made block is fine.
    assert!(!malformed(with_restarts(good.clone(), &[0])));

    assert!(malformed(vec![]), "no restart count");
    assert!(malformed(vec![0, 0, 0, 0]), "zero restarts");
    assert!(
        malformed(with_restarts(good.clone(), &[0, 0])),
        "unsorted restarts"
    );
    assert!(
        malformed(with_restarts(good.clone(), &[5])),
        "first restart not 0"
    );
    assert!(
        malformed(with_restarts(good.clone(), &[0, 200])),
        "restart past entries"
    );
    let mut huge_count = good.clone();
    huge_count.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(malformed(huge_count), "restart count past the block");

    let mut shared_too_long = good.clone();
    entry(&mut shared_too_long, 40, b"x", b"v");
    assert!(
        malformed(with_restarts(shared_too_long, &[0])),
        "shared > previous key"
    );

    // The second entry is a restart point but claims to share a byte; a
    // scan from the first entry would otherwise accept it.
    let mut restart_shares = good.clone();
    let second = restart_shares.len() as u32;
    entry(&mut restart_shares, 1, &k1[1..], b"w");
    assert!(
        malformed(with_restarts(restart_shares, &[0, second])),
        "restart entry with shared"
    );

    let mut value_past_end = Vec::new();
    put_varint(&mut value_past_end, 0);
    put_varint(&mut value_past_end, k1.len() as u64);
    put_varint(&mut value_past_end, 1 << 20);
    value_past_end.extend_from_slice(&k1);
    assert!(
        malformed(with_restarts(value_past_end, &[0])),
        "value past end"
    );

    let mut bad_varint = vec![0xff; 11];
    bad_varint.push(0);
    assert!(
        malformed(with_restarts(bad_varint, &[0])),
        "overlong varint"
    );

    let mut short_key = Vec::new();
    entry(&mut short_key, 0, b"short", b"v");
    assert!(
        malformed(with_restarts(short_key, &[0])),
        "key without trailer"
    );

    let mut bad_kind = k1.clone();
    *bad_kind.last_mut().unwrap() = 9;
    let mut bad_kind_block = Vec::new();
    entry(&mut bad_kind_block, 0, &bad_kind, b"v");
    assert!(
        malformed(with_restarts(bad_kind_block, &[0])),
        "unknown kind"
    );
}

/// A seek that meets a malformed restart entry fails instead of guessing.
#[test]
fn seek_through_bad_restart_fails() {
    let k1 = internal_key(b"a", 1, 1, Kind::Put);
    let mut data = Vec::new();
    entry(&mut data, 0, &k1, b"v");
    let second = data.len() as u32;
    data.extend_from_slice(&[0xff, 0xff, 0xff]);
    let block = Block::new(
        with_restarts(data, &[0, second]),
        Arc::from(Path::new("b")),
        5,
    )
    .unwrap();
    let mut it = BlockIter::new(Arc::new(block));
    let target = internal_key(b"z", 1, 1, Kind::Put);
    assert!(it.seek(&target).is_err());
    assert!(!it.valid());
}
