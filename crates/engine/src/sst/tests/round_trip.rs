//! Tables built from random entries read back exactly as a sorted-vector model.

use super::{Model, build, collect_all, lower_bound, model_get, open, options, sorted_model};
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, KEY_BYTES_MAX, Kind, VALUE_BYTES_MAX, internal_key};
use crate::options::Compression;
use crate::sst::test_file::{MemReadable, MemWritable};
use crate::sst::{BlockCache, Table, TableBuilder, TableOptions};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..24),
        1 => Just(Vec::new()),
        1 => (100usize..3000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        1 => prop::collection::vec(any::<u8>(), 100..1500),
    ]
}

fn entries() -> impl Strategy<Value = Model> {
    prop::collection::vec(
        (
            prop::collection::vec(b'a'..b'd', 0..6),
            0u64..6,
            0u64..1000,
            prop::bool::weighted(0.2),
            value(),
        ),
        1..150,
    )
    .prop_map(|raw| {
        sorted_model(
            raw.into_iter()
                .map(|(uk, ts, seq, delete, v)| {
                    let kind = if delete { Kind::Delete } else { Kind::Put };
                    let v = if delete { Vec::new() } else { v };
                    (internal_key(&uk, ts, seq, kind), v)
                })
                .collect(),
        )
    })
}

fn table_options() -> impl Strategy<Value = TableOptions> {
    (
        prop::sample::select(vec![64usize, 512, 4096]),
        prop::sample::select(vec![1usize, 16]),
        prop::sample::select(vec![Compression::None, Compression::Lz4]),
    )
        .prop_map(|(block_bytes, restart, compression)| options(block_bytes, restart, compression))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Iteration, seek and get of a built table agree with the model, with
    /// tiny and normal blocks, restart intervals 1 and 16, compression on
    /// and off, and with and without a block cache.
    #[test]
    fn table_matches_model(
        model in entries(),
        opts in table_options(),
        cache_bytes in prop::sample::select(vec![0usize, 1 << 20]),
        seeks in prop::collection::vec(
            (prop::collection::vec(b'a'..b'e', 0..7), 0u64..7, 0u64..1001), 1..30),
    ) {
        let (bytes, props) = build(&model, opts);
        prop_assert_eq!(props.entries, model.len() as u64);
        let tombstones = model.iter()
            .filter(|(k, _)| key::parse_internal_key(k).map(|p| p.kind) == Some(Kind::Delete))
            .count();
        prop_assert_eq!(props.tombstones, tombstones as u64);
        prop_assert_eq!(&props.smallest, &model[0].0);
        prop_assert_eq!(&props.largest, &model[model.len() - 1].0);
        let ts: Vec<u64> = model.iter()
            .filter_map(|(k, _)| key::parse_internal_key(k).map(|p| p.ts))
            .collect();
        prop_assert_eq!(props.ts_min, ts.iter().copied().min().unwrap());
        prop_assert_eq!(props.ts_max, ts.iter().copied().max().unwrap());

        let table = open(bytes, cache_bytes).unwrap();
        prop_assert_eq!(table.file_number(), 7);
        // Twice: the second pass is served by the cache when there is one.
        for _ in 0..2 {
            let mut it = table.iter();
            prop_assert_eq!(&collect_all(&mut it, usize::MAX).unwrap(), &model);
        }
        let mut it = table.iter();
        for (uk, ts, seq) in &seeks {
            let target = internal_key(uk, *ts, *seq, Kind::Put);
            it.seek(&target).unwrap();
            match model.get(lower_bound(&model, &target)) {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), &k[..]);
                    prop_assert_eq!(it.value(), &v[..]);
                }
                None => prop_assert!(!it.valid()),
            }
            // Absent or present, get must agree with the model.
            prop_assert_eq!(table.get(uk).unwrap(), model_get(&model, uk));
        }
        for (k, _) in &model {
            let uk = key::user_key(k);
            prop_assert!(table.may_contain(uk));
            prop_assert_eq!(table.get(uk).unwrap(), model_get(&model, uk));
        }
    }
}

/// A value of VALUE_BYTES_MAX with a key of KEY_BYTES_MAX fits in one block
/// and reads back; one byte more is refused.
#[test]
fn largest_entry_round_trips_and_larger_is_refused() {
    let big_key = internal_key(&vec![b'k'; KEY_BYTES_MAX], 1, 1, Kind::Put);
    let big_value: Vec<u8> = (0..VALUE_BYTES_MAX).map(|i| (i % 251) as u8).collect();
    let small = internal_key(b"a", 1, 1, Kind::Put);
    let model = vec![(small, b"x".to_vec()), (big_key.clone(), big_value)];
    for compression in [Compression::None, Compression::Lz4] {
        let (bytes, _) = build(&model, options(4096, 16, compression));
        let table = open(bytes, 0).unwrap();
        let got = table.get(key::user_key(&big_key)).unwrap().unwrap();
        assert!(got.0 == big_key && got.1 == model[1].1, "big entry differs");
    }

    let (file, _) = MemWritable::create();
    let mut b = TableBuilder::new(
        file,
        PathBuf::from("t.sst"),
        options(4096, 16, Compression::None),
    );
    let too_big = vec![0u8; VALUE_BYTES_MAX + 1];
    assert!(matches!(
        b.add(&model[0].0, &too_big),
        Err(Error::InvalidArgument(_))
    ));
    let too_long_key = internal_key(&vec![b'k'; KEY_BYTES_MAX + 1], 1, 1, Kind::Put);
    assert!(matches!(
        b.add(&too_long_key, b""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        b.add(b"not an internal key", b""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        matches!(b.finish(), Err(Error::InvalidArgument(_))),
        "empty table refused"
    );
}

/// Many versions of one user key spanning several blocks: get returns the newest.
#[test]
fn get_returns_newest_across_blocks() {
    let model: Model = (0..200u64)
        .rev()
        .map(|ts| {
            (
                internal_key(b"hot", ts, ts, Kind::Put),
                ts.to_le_bytes().to_vec(),
            )
        })
        .collect();
    let model = sorted_model(model);
    let (bytes, _) = build(&model, options(64, 1, Compression::None));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let file = Arc::new(MemReadable::new(bytes));
    let table = Table::open(file, PathBuf::from("t.sst"), 3, cache.clone()).unwrap();
    let (k, v) = table.get(b"hot").unwrap().unwrap();
    assert_eq!(key::parse_internal_key(&k).unwrap().ts, 199);
    assert_eq!(v, 199u64.to_le_bytes());
    assert_eq!(table.get(b"ho").unwrap(), None);
    assert_eq!(table.get(b"hotter").unwrap(), None);
    let before = cache.stats();
    assert!(
        before.misses > 0 && before.bytes > 0,
        "data blocks go through the cache"
    );
    table.get(b"hot").unwrap();
    assert_eq!(
        cache.stats().hits,
        before.hits + 1,
        "a repeated get hits the cache"
    );
}

/// A merge's iterator reads every entry without adding a block to the
/// cache, and uses the blocks a point read put there; the plain iterator
/// fills it (the control).
#[test]
fn a_merge_reads_without_filling_the_cache() {
    let model: Model = (0..400u64)
        .map(|i| {
            (
                internal_key(format!("key{i:05}").as_bytes(), 1, 1, Kind::Put),
                vec![b'v'; 100],
            )
        })
        .collect();
    let model = sorted_model(model);
    let (bytes, _) = build(&model, options(256, 4, Compression::None));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let file = Arc::new(MemReadable::new(bytes));
    let table = Arc::new(Table::open(file, PathBuf::from("t.sst"), 3, cache.clone()).unwrap());
    let read_all = |mut it: crate::sst::TableIter| {
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().unwrap();
        }
        n
    };
    assert_eq!(read_all(table.iter_filling(false)), model.len());
    let after_merge = cache.stats();
    assert_eq!(after_merge.bytes, 0, "a merge added blocks to the cache");
    assert!(after_merge.misses > 10, "it read many blocks");
    // A point read caches its block; the merge's next pass uses it.
    table.get(b"key00000").unwrap().unwrap();
    let hits = cache.stats().hits;
    assert_eq!(read_all(table.iter_filling(false)), model.len());
    assert!(cache.stats().hits > hits, "the merge used the cached block");
    // The control: the plain iterator fills the cache.
    assert_eq!(read_all(table.iter()), model.len());
    assert!(cache.stats().bytes > after_merge.bytes + 10 * 256);
}

/// Keys out of order are a bug in the caller: the builder asserts.
#[test]
#[should_panic(expected = "strictly increase")]
fn out_of_order_keys_panic() {
    let (file, _) = MemWritable::create();
    let mut b = TableBuilder::new(
        file,
        PathBuf::from("t.sst"),
        options(4096, 16, Compression::None),
    );
    b.add(&internal_key(b"b", 1, 1, Kind::Put), b"").unwrap();
    let _ = b.add(&internal_key(b"a", 1, 1, Kind::Put), b"");
}

/// Readers on several threads sharing one table and a cache too small for
/// it all get the model's answers, and the cache stays within budget.
#[test]
fn concurrent_readers_under_cache_pressure() {
    let model: Model = sorted_model(
        (0..2_000u64)
            .map(|i| {
                let uk = format!("key{:05}", i / 2).into_bytes();
                (
                    internal_key(&uk, i % 2, i, Kind::Put),
                    i.to_le_bytes().to_vec(),
                )
            })
            .collect(),
    );
    let (bytes, _) = build(&model, options(256, 16, Compression::Lz4));
    let cache = Arc::new(BlockCache::new(8 * 1024));
    let table = Table::open(
        Arc::new(MemReadable::new(bytes)),
        PathBuf::from("t.sst"),
        9,
        cache.clone(),
    )
    .unwrap();
    let model = Arc::new(model);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (table, model) = (table.clone(), model.clone());
            std::thread::spawn(move || {
                for i in (t..1_000).step_by(4) {
                    let uk = format!("key{i:05}").into_bytes();
                    assert_eq!(table.get(&uk).unwrap(), model_get(&model, &uk));
                }
                let mut it = table.iter();
                assert_eq!(collect_all(&mut it, usize::MAX).unwrap(), *model);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = cache.stats();
    assert!(stats.bytes <= stats.capacity_bytes);
    assert!(stats.hits > 0 && stats.misses > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Point reads agree with the model when every key shares a long
    /// prefix and many keys tie in the 8 bytes after it (the index search
    /// compares those as an integer first and must fall back to the keys on
    /// a tie), for targets inside, before, after and beside that prefix.
    #[test]
    fn get_matches_model_with_shared_prefixes_and_fingerprint_ties(
        prefix in prop::collection::vec(b'p'..b'r', 0..12),
        tails in prop::collection::vec(
            (prop::collection::vec(b'a'..b'c', 0..11), 0u64..3), 1..300),
        probes in prop::collection::vec(
            (prop::bool::ANY, prop::collection::vec(b'`'..b'd', 0..13)), 1..60),
    ) {
        let model = sorted_model(
            tails
                .iter()
                .map(|(tail, ts)| {
                    let uk = [prefix.as_slice(), tail].concat();
                    (internal_key(&uk, *ts, 1, Kind::Put), tail.clone())
                })
                .collect(),
        );
        let (bytes, _) = build(&model, options(64, 1, Compression::None));
        let table = open(bytes, 1 << 20).unwrap();
        let present = model.iter().map(|(k, _)| key::user_key(k).to_vec());
        let probed = probes.iter().map(|(with_prefix, tail)| {
            if *with_prefix {
                [prefix.as_slice(), tail].concat()
            } else {
                tail.clone()
            }
        });
        for uk in present.chain(probed) {
            prop_assert_eq!(table.get(&uk).unwrap(), model_get(&model, &uk), "key {:?}", uk);
        }
    }
}

/// A table of about 5 MiB starts the writeback of its pages once per MiB
/// written, each time past the next MiB boundary, and still reads back.
#[test]
fn a_table_starts_its_writeback_every_mib() {
    let value = vec![7u8; 4000];
    let model: Model = (0..1300u64)
        .map(|i| {
            (
                internal_key(format!("k{i:06}").as_bytes(), 1, i, Kind::Put),
                value.clone(),
            )
        })
        .collect();
    let (file, written) = MemWritable::create();
    let mut b = TableBuilder::new(
        file,
        PathBuf::from("w.sst"),
        options(4096, 8, Compression::None),
    );
    for (k, v) in &model {
        b.add(k, v).unwrap();
    }
    let props = b.finish().unwrap();
    let marks = written.writebacks();
    let mib = crate::sst::table_builder::WRITEBACK_STEP_BYTES;
    assert_eq!(marks.len() as u64, props.file_bytes / mib, "{marks:?}");
    for (n, mark) in marks.iter().enumerate() {
        assert_eq!(mark / mib, n as u64 + 1, "{marks:?}");
    }
    let table = open(written.bytes(), 1 << 20).unwrap();
    let mut it = table.iter();
    assert_eq!(collect_all(&mut it, usize::MAX).unwrap(), model);
}
