//! Model tests of the memtable's point index (`skiplist`, "The point
//! index"): point reads through it agree with a seek from the skip list's
//! head and with a model, after random puts and deletes, out-of-order
//! timestamps and freezes, at every read view; also while the writer
//! inserts; and the check catches a planted stale index.

use super::immutable::ImmutableMemtable;
use super::skiplist::{self, SkipList};
use super::{Found, Memtable};
use crate::key::{self, Kind};
use proptest::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One operation of a model run.
#[derive(Debug, Clone)]
enum Op {
    /// A version of key `key` (an index into [`users`]) at `ts`.
    Write { key: usize, ts: u64, kind: Kind },
    /// The memtable is made immutable; a new one takes the writes.
    Freeze,
}

/// The user keys of a run: short ones, keys sharing the inline 16-byte
/// prefix, a key that is a prefix of another, the empty key, a long key.
fn users() -> Vec<Vec<u8>> {
    vec![
        b"a".to_vec(),
        b"ab".to_vec(),
        vec![],
        b"0123456789abcdef".to_vec(),
        b"0123456789abcdefX".to_vec(),
        b"0123456789abcdefY".to_vec(),
        vec![0xff; 40],
        b"key:1".to_vec(),
    ]
}

/// Keys never written: absent from every memtable.
fn absent() -> Vec<Vec<u8>> {
    vec![b"abc".to_vec(), b"0123456789abcde".to_vec(), vec![0]]
}

/// A memtable and every entry written to it, as the model sees them.
struct Table {
    mem: Arc<Memtable>,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// What a point read must find: among `entries` of `user` with
/// `seq <= visible`, the first in internal order.
fn model_get<'a>(
    entries: &'a [(Vec<u8>, Vec<u8>)],
    user: &[u8],
    visible: u64,
) -> Option<Found<'a>> {
    entries
        .iter()
        .filter_map(|(ikey, value)| {
            let p = key::parse_internal_key(ikey)?;
            (p.user_key == user && p.seq <= visible).then_some((ikey, value, p))
        })
        .min_by(|a, b| key::compare_internal(a.0, b.0))
        .map(|(_, value, p)| Found {
            ts: p.ts,
            seq: p.seq,
            kind: p.kind,
            value: value.as_slice(),
        })
}

/// The first disagreement between the point index, a seek from the head
/// and the model, for every key and read view `visibles`; `None` if all
/// agree.
fn disagreement(table: &Table, keys: &[Vec<u8>], visibles: &[u64]) -> Option<String> {
    let frozen = ImmutableMemtable::Rotated(Arc::clone(&table.mem));
    for user in keys {
        for &visible in visibles {
            let want = model_get(&table.entries, user, visible);
            let by_index = table.mem.get(user, visible);
            let by_seek = table.mem.get_by_seek(user, visible);
            let through_imm = frozen.get(user, visible);
            if by_index != want || by_seek != want || through_imm != want {
                return Some(format!(
                    "key {user:?} at {visible}: index {by_index:?}, seek {by_seek:?}, \
                     immutable {through_imm:?}, model {want:?}"
                ));
            }
        }
    }
    None
}

/// Runs `ops` on memtables with `buckets` index buckets; checks every
/// table (frozen ones too) at every read view up to the last sequence
/// number, at each freeze and at the end.
fn run(ops: &[Op], buckets: usize) -> Result<(), String> {
    let mut keys = users();
    keys.extend(absent());
    let new_table = || Table {
        mem: Arc::new(Memtable::with_list(
            0,
            SkipList::with_index_buckets(buckets),
        )),
        entries: Vec::new(),
    };
    let mut tables = vec![new_table()];
    let mut seq = 0u64;
    let check = |tables: &[Table], seq: u64| -> Result<(), String> {
        let visibles: Vec<u64> = (0..=seq).chain([u64::MAX]).collect();
        for (i, t) in tables.iter().enumerate() {
            if let Some(d) = disagreement(t, &keys, &visibles) {
                return Err(format!("table {i} of {}: {d}", tables.len()));
            }
        }
        Ok(())
    };
    for op in ops {
        match *op {
            Op::Write { key, ts, kind } => {
                seq += 1;
                let user = &users()[key];
                let value = match kind {
                    Kind::Delete => Vec::new(),
                    _ => format!("{seq}").into_bytes(),
                };
                let table = tables.last_mut().ok_or("no table")?;
                table.mem.insert(user, ts, seq, kind, &value);
                let ikey = key::internal_key(user, ts, seq, kind);
                table.entries.push((ikey, value));
            }
            Op::Freeze => {
                check(&tables, seq)?;
                tables.push(new_table());
            }
        }
    }
    check(&tables, seq)
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        3 => Just(Kind::Put),
        2 => Just(Kind::Delete),
        1 => Just(Kind::PutExpiring),
    ];
    prop_oneof![
        // Few timestamps: equal ones (ties broken by kind, then sequence
        // number) and ones older than a key's newest version.
        20 => (0..users().len(), 0u64..6, kind)
            .prop_map(|(key, ts, kind)| Op::Write { key, ts, kind }),
        1 => Just(Op::Freeze),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 128 }))]

    /// Point reads through the index agree with a seek from the head and
    /// with the model, with one bucket (every key in one chain) and with
    /// many.
    #[test]
    fn point_reads_agree_with_the_skip_list(
        ops in proptest::collection::vec(op_strategy(), 0..120),
        many_buckets in any::<bool>(),
    ) {
        let buckets = if many_buckets { 64 } else { 1 };
        prop_assert_eq!(run(&ops, buckets), Ok(()));
    }
}

/// The negative control: with the index left pointing at a key's old
/// first node when a newer version arrives (planted on this thread), the
/// check finds the newer version missed.
#[test]
fn check_catches_a_stale_index() {
    let ops = [
        Op::Write {
            key: 0,
            ts: 1,
            kind: Kind::Put,
        },
        Op::Write {
            key: 0,
            ts: 5,
            kind: Kind::Put,
        },
    ];
    assert_eq!(run(&ops, 1), Ok(()));
    skiplist::plant_stale_index(true);
    let planted = run(&ops, 1);
    skiplist::plant_stale_index(false);
    let err = planted.expect_err("the stale index goes unnoticed");
    assert!(err.contains("key [97]"), "{err}");
}

/// The bucket count a memtable gets from its byte budget: a power of
/// two within the bounds, one per 256 bytes between them.
#[test]
fn index_buckets_follow_the_budget() {
    assert_eq!(skiplist::index_buckets_for(0), skiplist::INDEX_BUCKETS_MIN);
    assert_eq!(skiplist::index_buckets_for(64 << 20), 1 << 18);
    assert_eq!(skiplist::index_buckets_for((64 << 20) + 1), 1 << 18);
    assert_eq!(skiplist::index_buckets_for(100 << 20), 1 << 19);
    assert_eq!(
        skiplist::index_buckets_for(usize::MAX),
        skiplist::INDEX_BUCKETS_MAX
    );
    assert!(skiplist::INDEX_BUCKETS_MAX.is_power_of_two());
}

/// Readers reading through the index while the writer inserts (new keys,
/// newer and older versions of old ones) find what a seek from the head
/// finds at the same read view: the writer publishes each insert's
/// sequence number after it, as the tx thread publishes the visible one.
#[test]
fn readers_agree_with_the_skip_list_during_inserts() {
    const N: u64 = if cfg!(miri) { 200 } else { 20_000 };
    const KEYS: u64 = 500;
    const READS_MAX: u64 = 2_000_000;
    let mem = Arc::new(Memtable::with_list(0, SkipList::with_index_buckets(64)));
    let visible = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (mem, visible, done) = (Arc::clone(&mem), Arc::clone(&visible), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut found = 0u64;
                while reads < READS_MAX {
                    let finished = done.load(Ordering::Acquire);
                    let at = visible.load(Ordering::Acquire);
                    let user = format!("k{}", (reads * 7 + r) % KEYS);
                    let by_index = mem.get(user.as_bytes(), at);
                    assert_eq!(
                        by_index,
                        mem.get_by_seek(user.as_bytes(), at),
                        "{user} at {at}"
                    );
                    found += u64::from(by_index.is_some());
                    reads += 1;
                    if finished && reads > KEYS {
                        break;
                    }
                }
                found
            })
        })
        .collect();
    for seq in 1..=N {
        let user = format!("k{}", (seq * 7919) % KEYS);
        // Mostly newer versions; every fifth an older one (a late write).
        let ts = if seq % 5 == 0 { seq / 2 } else { seq };
        mem.insert(user.as_bytes(), ts, seq, Kind::Put, &seq.to_le_bytes());
        visible.store(seq, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().expect("reader panicked") > 0);
    }
    for k in 0..KEYS {
        let user = format!("k{k}");
        assert_eq!(
            mem.get(user.as_bytes(), N),
            mem.get_by_seek(user.as_bytes(), N)
        );
    }
}
