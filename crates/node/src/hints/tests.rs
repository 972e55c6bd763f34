//! The store against a `BTreeMap` model, across reopen and power loss, at
//! its byte bound, on corrupt records and on a failed fsync.

use super::record::{encode_record, hex, hint_key, peer_hash};
use super::*;
use ataman_engine::fs::sim::{CrashMode, Fault, FaultKind, FaultOp, SimFs};
use ataman_testkit::rng::Rng;
use std::collections::BTreeMap;
use std::time::Instant;

const PEERS: [&str; 3] = [
    "http://10.0.0.1:7700",
    "http://10.0.0.2:7700",
    "http://10.0.0.3:7700",
];
const DIR: &str = "/hints";

impl HintStore {
    /// Returns once every write queued before is applied (and, with
    /// `Complete`, durable): one tombstone at seq 0, never a hint's seq.
    fn settle(&self, durability: Durability) {
        self.db
            .delete(&hint_key(0, 0), HINT_DELETE_TS, durability)
            .unwrap();
    }

    /// Writes `record` as is under the key of (`peer`, `seq`).
    fn put_raw(&self, peer: &str, seq: u64, record: &[u8]) {
        self.db
            .put(
                &hint_key(peer_hash(peer), seq),
                record,
                HINT_PUT_TS,
                Durability::None,
            )
            .unwrap();
    }
}

/// Engine options on a simulated disk, small enough that hints reach
/// SSTables and compaction.
fn sim_options(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        wal_mode: WalMode::Fsync,
        tombstone_grace: Duration::ZERO,
        memtable_bytes_max: 16 * 1024,
        sst_target_bytes: 16 * 1024,
        l0_compaction_trigger: 2,
        l1_bytes_max: 64 * 1024,
        block_cache_bytes: 1024 * 1024,
        ..Options::default()
    }
}

fn open_sim(fs: &SimFs, bytes_max: u64) -> HintStore {
    HintStore::open_with_options(Path::new(DIR), bytes_max, sim_options(fs)).unwrap()
}

fn hint_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
    (HINT_KEY_BYTES + HINT_RECORD_HEADER_BYTES + key.len() + value.map_or(0, <[u8]>::len)) as u64
}

fn all_pending(store: &HintStore, peer: &str) -> Vec<Hint> {
    store.pending(peer, None, usize::MAX).unwrap()
}

/// The model: every pending hint by (peer index, seq).
type Model = BTreeMap<(usize, u64), Hint>;

fn check_against_model(store: &HintStore, model: &Model, rng: &mut Rng) {
    for (p, peer) in PEERS.iter().enumerate() {
        let want: Vec<&Hint> = model
            .range((p, 0)..=(p, u64::MAX))
            .map(|(_, h)| h)
            .collect();
        let limit = 1 + rng.below(7) as usize;
        let mut got = Vec::new();
        let mut after = None;
        loop {
            let page = store.pending(peer, after, limit).unwrap();
            assert!(page.len() <= limit);
            let Some(last) = page.last() else { break };
            after = Some(last.seq);
            got.extend(page);
        }
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "pending of {peer}");
        let bytes: u64 = want
            .iter()
            .map(|h| hint_bytes(&h.key, h.value.as_deref()))
            .sum();
        assert_eq!(
            store.count(peer),
            (want.len() as u64, bytes),
            "count of {peer}"
        );
    }
    let stats = store.stats();
    assert_eq!(stats.pending, model.len() as u64);
}

/// Adds, pages and removes against a `BTreeMap` model, three peers
/// interleaved, through memtable rotations and compactions.
#[test]
fn model_add_pending_remove_interleaved_peers() {
    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    let mut model = Model::new();
    // Seeded, so a failure replays.
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut next_seq = 1u64;
    let (mut added, mut delivered) = (0u64, 0u64);
    for _ in 0..3000 {
        match rng.below(10) {
            0..=5 => {
                let p = rng.below(PEERS.len() as u64) as usize;
                let key = format!("key-{}", rng.below(50)).into_bytes();
                let ts = rng.next_u64();
                let value = match rng.below(10) {
                    0 => None,
                    1 => Some(Vec::new()),
                    _ => Some(vec![rng.below(256) as u8; rng.below(40) as usize]),
                };
                store.add(PEERS[p], &key, ts, value.as_deref()).unwrap();
                let hint = Hint {
                    seq: next_seq,
                    key,
                    ts,
                    value,
                    deadline_ms: None,
                };
                model.insert((p, next_seq), hint);
                next_seq += 1;
                added += 1;
            }
            6..=7 => {
                store.settle(Durability::None);
                let p = rng.below(PEERS.len() as u64) as usize;
                let mut seqs: Vec<u64> = model
                    .range((p, 0)..=(p, u64::MAX))
                    .map(|(&(_, seq), _)| seq)
                    .filter(|_| rng.below(3) == 0)
                    .collect();
                // Duplicates and seqs that are not pending are ignored.
                seqs.extend(seqs.clone());
                seqs.push(next_seq + 100);
                seqs.push(0);
                store.remove(PEERS[p], &seqs);
                for seq in &seqs {
                    if model.remove(&(p, *seq)).is_some() {
                        delivered += 1;
                    }
                }
            }
            _ => {
                store.settle(Durability::None);
                check_against_model(&store, &model, &mut rng);
            }
        }
    }
    store.settle(Durability::Complete);
    check_against_model(&store, &model, &mut rng);
    let stats = store.stats();
    assert_eq!((stats.added, stats.delivered), (added, delivered));
    assert_eq!(
        (stats.dropped, stats.failed, stats.remove_failed),
        (0, 0, 0)
    );
    let flushes = store.db.metrics().flushes.get();
    assert!(
        flushes > 1,
        "the run should reach SSTables ({flushes} flushes)"
    );
    store.db.compact().unwrap();
    check_against_model(&store, &model, &mut rng);
    // The recount at open finds the same, through SSTables and the WAL.
    drop(store);
    let store = open_sim(&fs, u64::MAX);
    check_against_model(&store, &model, &mut rng);
}

/// `after` at the end of the seq space and a zero limit give nothing;
/// a peer with no hints has none.
#[test]
fn pending_edges() {
    let store = open_sim(&SimFs::new(), u64::MAX);
    store.add(PEERS[0], b"k", 5, Some(b"v")).unwrap();
    store.settle(Durability::None);
    assert_eq!(store.pending(PEERS[0], None, 0).unwrap(), vec![]);
    assert_eq!(store.pending(PEERS[0], Some(u64::MAX), 10).unwrap(), vec![]);
    assert_eq!(store.pending(PEERS[1], None, 10).unwrap(), vec![]);
    assert_eq!(store.count(PEERS[1]), (0, 0));
    let hints = store.pending(PEERS[0], None, 10).unwrap();
    assert_eq!(
        hints,
        vec![Hint {
            seq: 1,
            key: b"k".to_vec(),
            ts: 5,
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        }]
    );
    assert_eq!(store.pending(PEERS[0], Some(1), 10).unwrap(), vec![]);
    assert_eq!(store.pending(PEERS[0], Some(0), 10).unwrap(), hints);
}

/// Hints survive close and reopen on a real disk: same pending set and
/// counts, and seq keeps growing, also past a peer whose hints were all
/// removed.
#[test]
fn durable_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hints");
    let store = HintStore::open(&path, u64::MAX, WalMode::Fsync).unwrap();
    for i in 0..30u64 {
        let peer = PEERS[(i % 3) as usize];
        let value = format!("value-{i}");
        store
            .add(
                peer,
                format!("key-{i}").as_bytes(),
                1000 + i,
                Some(value.as_bytes()),
            )
            .unwrap();
    }
    store.settle(Durability::None);
    let removed: Vec<u64> = all_pending(&store, PEERS[0])
        .iter()
        .map(|h| h.seq)
        .collect();
    store.remove(PEERS[0], &removed);
    store.remove(PEERS[1], &[2, 5]);
    // Complete: the removals' callbacks (which count `delivered`) ran.
    store.settle(Durability::Complete);
    let before: Vec<Vec<Hint>> = PEERS.iter().map(|p| all_pending(&store, p)).collect();
    let counts: Vec<(u64, u64)> = PEERS.iter().map(|p| store.count(p)).collect();
    let stats = store.stats();
    assert_eq!(before[0], vec![]);
    assert_eq!((stats.pending, stats.delivered), (18, 12));
    store.close().unwrap();

    let store = HintStore::open(&path, u64::MAX, WalMode::Fsync).unwrap();
    let after: Vec<Vec<Hint>> = PEERS.iter().map(|p| all_pending(&store, p)).collect();
    assert_eq!(after, before);
    assert_eq!(PEERS.map(|p| store.count(p)).to_vec(), counts);
    assert_eq!(store.stats().pending, 18);
    // seq 30 was PEERS[2]'s last hint; 31 must not be reused by PEERS[0],
    // whose hints are all tombstones now.
    store.add(PEERS[0], b"late", 1, None).unwrap();
    store.settle(Durability::None);
    let late = all_pending(&store, PEERS[0]);
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].seq, 31);
    store.close().unwrap();
}

/// Hints whose writes the engine made durable survive a power cut
/// (the WAL is replayed at open; nothing was flushed by a close).
#[test]
fn durable_hints_survive_power_loss() {
    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    for i in 0..200u64 {
        let peer = PEERS[(i % 3) as usize];
        store
            .add(peer, &i.to_be_bytes(), i, Some(&[7u8; 100]))
            .unwrap();
    }
    // `remove` ignores hints not yet visible: let the adds apply first.
    store.settle(Durability::None);
    store.remove(PEERS[1], &[2, 5, 8]);
    store.settle(Durability::Complete);
    let before: Vec<Vec<Hint>> = PEERS.iter().map(|p| all_pending(&store, p)).collect();
    assert_eq!(before.iter().map(Vec::len).sum::<usize>(), 197);
    let image = fs.crash_image_with(CrashMode::durable_only());
    drop(store);
    let store = open_sim(&image, u64::MAX);
    let after: Vec<Vec<Hint>> = PEERS.iter().map(|p| all_pending(&store, p)).collect();
    assert_eq!(after, before);
    assert_eq!(store.stats().pending, 197);
    store.add(PEERS[0], b"next", 1, None).unwrap();
    store.settle(Durability::None);
    assert_eq!(
        all_pending(&store, PEERS[0]).last().map(|h| h.seq),
        Some(201)
    );
}

/// At `bytes_max` new hints are refused and counted; removing frees
/// room again; a hint larger than the whole bound never fits.
#[test]
fn bound_at_and_past_bytes_max() {
    let size = hint_bytes(b"k", Some(b"v"));
    let store = open_sim(&SimFs::new(), 10 * size);
    for _ in 0..10 {
        store.add(PEERS[0], b"k", 1, Some(b"v")).unwrap();
    }
    assert_eq!(store.count(PEERS[0]), (10, 10 * size));
    for _ in 0..2 {
        match store.add(PEERS[1], b"k", 1, Some(b"v")) {
            Err(HintError::Full { bytes, bytes_max }) => {
                assert_eq!((bytes, bytes_max), (10 * size, 10 * size));
            }
            other => panic!("expected Full, got {other:?}"),
        }
    }
    let stats = store.stats();
    assert_eq!((stats.added, stats.dropped, stats.pending), (10, 2, 10));
    assert_eq!(stats.pending_bytes, 10 * size);
    store.settle(Durability::None);
    store.remove(PEERS[0], &[1, 2, 3]);
    assert_eq!(store.count(PEERS[0]), (7, 7 * size));
    for _ in 0..3 {
        store.add(PEERS[1], b"k", 1, Some(b"v")).unwrap();
    }
    assert!(matches!(
        store.add(PEERS[1], b"k", 1, Some(b"v")),
        Err(HintError::Full { .. })
    ));
    store.settle(Durability::None);
    store.remove(PEERS[0], &[4, 5, 6, 7, 8, 9, 10]);
    store.remove(PEERS[1], &[11, 12, 13]);
    assert_eq!(store.stats().pending_bytes, 0);
    let huge = vec![0u8; 10 * size as usize];
    assert!(matches!(
        store.add(PEERS[2], b"k", 1, Some(&huge)),
        Err(HintError::Full { bytes: 0, .. })
    ));
    let stats = store.stats();
    assert_eq!((stats.added, stats.dropped), (13, 4));
    store.settle(Durability::Complete);
    assert_eq!(store.stats().delivered, 13);
}

/// A tombstone and an empty value are different hints, before and
/// after a reopen.
#[test]
fn tombstone_and_empty_value_round_trip_distinctly() {
    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    store.add(PEERS[0], b"k", 10, None).unwrap();
    store.add(PEERS[0], b"k", 11, Some(b"")).unwrap();
    store.add(PEERS[0], b"", 12, Some(b"")).unwrap();
    store.settle(Durability::None);
    let want = vec![
        Hint {
            seq: 1,
            key: b"k".to_vec(),
            ts: 10,
            value: None,
            deadline_ms: None,
        },
        Hint {
            seq: 2,
            key: b"k".to_vec(),
            ts: 11,
            value: Some(vec![]),
            deadline_ms: None,
        },
        Hint {
            seq: 3,
            key: vec![],
            ts: 12,
            value: Some(vec![]),
            deadline_ms: None,
        },
    ];
    assert_eq!(all_pending(&store, PEERS[0]), want);
    store.close().unwrap();
    let store = open_sim(&fs, u64::MAX);
    assert_eq!(all_pending(&store, PEERS[0]), want);
}

/// A record that does not decode is an error naming its key, on
/// `pending` and at open; the other peers still read.
#[test]
fn corrupt_record_is_an_error_naming_the_key() {
    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    store.add(PEERS[0], b"good", 1, Some(b"v")).unwrap();
    store.add(PEERS[1], b"other", 1, Some(b"v")).unwrap();
    let mut bad = encode_record(b"bad", 2, Some(b"v"), None);
    bad[8] = 7; // the kind byte
    store.put_raw(PEERS[0], 42, &bad);
    let key = hex(&hint_key(peer_hash(PEERS[0]), 42));
    let err = store.pending(PEERS[0], None, 10).unwrap_err();
    match &err {
        HintError::Corrupt { key: named, reason } => {
            assert_eq!(named, &key);
            assert!(reason.contains("unknown kind 7"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(err.to_string().contains(&key), "{err}");
    // Before the bad record, the good one still reads.
    assert_eq!(store.pending(PEERS[0], None, 1).unwrap().len(), 1);
    assert_eq!(all_pending(&store, PEERS[1]).len(), 1);
    store.close().unwrap();
    match HintStore::open_with_options(Path::new(DIR), u64::MAX, sim_options(&fs)) {
        Err(HintError::Corrupt { key: named, .. }) => assert_eq!(named, key),
        other => panic!("expected Corrupt at open, got {other:?}"),
    }
}

/// A key that is not 16 bytes, or a record under the wrong engine
/// timestamp, is corrupt too.
#[test]
fn foreign_engine_entries_are_corrupt() {
    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    store
        .db
        .put(b"short", b"x", HINT_PUT_TS, Durability::None)
        .unwrap();
    store.close().unwrap();
    match HintStore::open_with_options(Path::new(DIR), u64::MAX, sim_options(&fs)) {
        Err(HintError::Corrupt { key, reason }) => {
            assert_eq!(key, hex(b"short"));
            assert!(reason.contains("expected 16"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }

    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    let engine_key = hint_key(peer_hash(PEERS[0]), 3);
    let record = encode_record(b"k", 1, Some(b"v"), None);
    store
        .db
        .put(&engine_key, &record, 9, Durability::None)
        .unwrap();
    match store.pending(PEERS[0], None, 10) {
        Err(HintError::Corrupt { key, reason }) => {
            assert_eq!(key, hex(&engine_key));
            assert!(reason.contains("engine timestamp 9"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// A failed WAL fsync is reported through the callback: the hint is
/// counted in `failed` and no longer pending; later adds are refused.
#[test]
fn engine_failure_is_counted_and_uncounted() {
    let fs = SimFs::new();
    let store = open_sim(&fs, u64::MAX);
    fs.inject(Fault::new(FaultOp::Sync, 1, FaultKind::Io).on_paths_containing(".wal"));
    store.add(PEERS[0], b"k", 1, Some(b"v")).unwrap();
    let started = Instant::now();
    while store.stats().failed == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no failure seen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(store.count(PEERS[0]), (0, 0));
    let err = store.add(PEERS[0], b"k", 2, Some(b"v")).unwrap_err();
    assert!(matches!(err, HintError::Engine(_)), "{err:?}");
    let stats = store.stats();
    assert_eq!((stats.added, stats.failed, stats.pending), (1, 2, 0));
}

/// Removing one hint twice (before its tombstone is applied, and after)
/// un-counts it once.
#[test]
fn remove_twice_counts_once() {
    let store = open_sim(&SimFs::new(), u64::MAX);
    for _ in 0..3 {
        store.add(PEERS[0], b"k", 1, Some(b"v")).unwrap();
    }
    store.settle(Durability::None);
    store.remove(PEERS[0], &[1, 1, 2]);
    store.remove(PEERS[0], &[1, 2]);
    assert_eq!(store.count(PEERS[0]).0, 1);
    store.settle(Durability::None);
    store.remove(PEERS[0], &[1, 2, 99]);
    // Another peer's seqs are not this peer's hints.
    store.remove(PEERS[1], &[3]);
    store.settle(Durability::Complete);
    assert_eq!(store.count(PEERS[0]).0, 1);
    assert_eq!(store.stats().delivered, 2);
    assert_eq!(all_pending(&store, PEERS[0])[0].seq, 3);
}

/// Concurrent adds from several threads take distinct seqs and are all
/// counted.
#[test]
fn concurrent_adds() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HintStore>();
    let store = Arc::new(open_sim(&SimFs::new(), u64::MAX));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..500u64 {
                    let peer = PEERS[((t + i) % 3) as usize];
                    store.add(peer, &i.to_be_bytes(), i, Some(b"v")).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    store.settle(Durability::None);
    let mut seqs: Vec<u64> = PEERS
        .iter()
        .flat_map(|p| all_pending(&store, p))
        .map(|h| h.seq)
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=2000).collect::<Vec<_>>());
    let stats = store.stats();
    assert_eq!((stats.pending, stats.added), (2000, 2000));
    assert_eq!(stats.pending_bytes, 2000 * hint_bytes(&[0; 8], Some(b"v")));
}
