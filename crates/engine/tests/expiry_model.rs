//! Model-based test of expiry: the engine against a `BTreeMap` on a virtual
//! clock, through puts with and without a deadline, overwrites, deletes,
//! clock advances (expiries), point reads, scans, flushes, compactions
//! (automatic and manual) and reopens; then past the tombstone grace, a
//! full compaction that drops what has expired.
//!
//! The negative control arms the planted bug (compaction drops an expired
//! version without keeping a tombstone) and must see an older version
//! come back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{
    Compression, Db, Durability, Entry, Options, VirtualClock, WalMode, WriteBatch,
};
use ataman_testkit::rng::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Distinct keys (enough to fill three levels of the small tables below).
const KEYS: u64 = 200;
/// Operations per seed.
const OPS: usize = 1500;
/// Seeds the model test runs.
const SEEDS: u64 = 6;
/// The virtual clock's start, Unix milliseconds.
const START_MS: u64 = 1_700_000_000_000;
/// The tombstone grace: longer than the random phase ever advances the
/// clock, so nothing is dropped until the final phase.
const GRACE_MS: u64 = 1_000_000;
/// A write's timestamp is at most this far before or after "now" (late and
/// early writes, as replicas see them).
const TS_SPREAD_MS: u64 = 8;
/// Longest TTL a random put asks for.
const TTL_MS_MAX: u64 = 60;

fn options(clock: &Arc<VirtualClock>, planted: bool) -> Options {
    Options {
        wal_mode: WalMode::Write,
        memtable_bytes_max: 2 * 1024,
        block_bytes: 256,
        block_restart_interval: 4,
        compression: Compression::Lz4,
        block_cache_bytes: 64 * 1024,
        sst_target_bytes: 2 * 1024,
        l0_compaction_trigger: 2,
        l0_stop_writes: 1000,
        l1_bytes_max: 4 * 1024,
        level_size_ratio: 2,
        levels: 4,
        write_stall_timeout: Duration::from_secs(30),
        tombstone_grace: Duration::from_millis(GRACE_MS),
        clock: Arc::clone(clock) as _,
        planted_drop_expired_without_tombstone: planted,
        ..Options::default()
    }
}

/// One version as the model keeps it.
#[derive(Debug, Clone)]
struct Version {
    ts: u64,
    /// Tie rank: tombstone 2, expiring 1, plain 0.
    rank: u8,
    order: u64,
    value: Option<Vec<u8>>,
    deadline_ms: Option<u64>,
}

/// Per key the winning version (newest timestamp, then tie rank, then the
/// later write).
#[derive(Default)]
struct Model {
    map: BTreeMap<Vec<u8>, Version>,
    order: u64,
}

impl Model {
    fn write(&mut self, key: Vec<u8>, ts: u64, value: Option<Vec<u8>>, deadline_ms: Option<u64>) {
        self.order += 1;
        let rank = match (&value, deadline_ms) {
            (None, _) => 2,
            (Some(_), Some(_)) => 1,
            (Some(_), None) => 0,
        };
        let v = Version {
            ts,
            rank,
            order: self.order,
            value,
            deadline_ms,
        };
        match self.map.get(&key) {
            Some(old) if (old.ts, old.rank, old.order) > (v.ts, v.rank, v.order) => {}
            _ => {
                self.map.insert(key, v);
            }
        }
    }

    /// What a read at `now_ms` must return for `key`.
    fn get(&self, key: &[u8], now_ms: u64) -> Option<Entry> {
        self.map.get(key).map(|v| entry_at(v, now_ms))
    }
}

fn entry_at(v: &Version, now_ms: u64) -> Entry {
    match (&v.value, v.deadline_ms) {
        (Some(_), Some(d)) if now_ms >= d => Entry::tombstone(v.ts),
        (Some(value), deadline_ms) => Entry {
            ts: v.ts,
            value: Some(value.clone()),
            deadline_ms,
        },
        (None, _) => Entry::tombstone(v.ts),
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

/// Runs one seed; the first divergence from the model, if any.
fn run_seed(dir: &Path, seed: u64, planted: bool) -> Result<(), String> {
    let clock = VirtualClock::new(START_MS);
    let mut rng = Rng::new(seed);
    let mut db = Some(Db::open(dir, options(&clock, planted)).map_err(|e| e.to_string())?);
    let mut model = Model::default();
    let mut step_value = 0u64;
    for step in 0..OPS {
        let d = db.as_ref().ok_or("no db")?;
        let now = clock.now();
        let ts = timestamp_from_millis(
            rng.between(now - TS_SPREAD_MS, now + TS_SPREAD_MS),
            rng.below(3) as u16,
        );
        let k = key(rng.below(KEYS));
        let roll = rng.below(100);
        step_value += 1;
        let value = format!("v{step_value}-{}", "x".repeat(rng.index(120))).into_bytes();
        let mut batch = WriteBatch::new();
        match roll {
            0..30 => {
                batch.put(&k, &value, ts);
                model.write(k.clone(), ts, Some(value), None);
            }
            30..55 => {
                let deadline = now + rng.between(1, TTL_MS_MAX);
                batch.put_expiring(&k, &value, ts, deadline);
                model.write(k.clone(), ts, Some(value), Some(deadline));
            }
            55..63 => {
                batch.delete(&k, ts);
                model.write(k.clone(), ts, None, None);
            }
            63..75 => clock.advance_ms(rng.between(0, 25)),
            75..90 => {
                let got = d.get(&k).map_err(|e| e.to_string())?;
                if let Some(what) = differs(&got, &model.get(&k, clock.now()), planted) {
                    return Err(format!(
                        "seed {seed} step {step}: get {:?}: {what}",
                        String::from_utf8_lossy(&k)
                    ));
                }
            }
            90..94 => check_scan(d, &model, clock.now(), seed, step)?,
            94..97 => d.flush().map_err(|e| e.to_string())?,
            97..99 => d.compact().map_err(|e| e.to_string())?,
            _ => {
                let old = db.take().ok_or("no db")?;
                old.close().map_err(|e| e.to_string())?;
                db = Some(Db::open(dir, options(&clock, planted)).map_err(|e| e.to_string())?);
            }
        }
        if !batch.is_empty() {
            let d = db.as_ref().ok_or("no db")?;
            d.write(batch, Durability::Complete)
                .map_err(|e| e.to_string())?;
        }
    }
    let d = db.as_ref().ok_or("no db")?;
    check_all(
        d,
        &model,
        clock.now(),
        seed,
        "end of random phase",
        !planted,
    )?;
    // Everything into one level, so no late write sits above a version
    // the next compaction may drop; then past the grace, and compact again.
    d.compact().map_err(|e| e.to_string())?;
    check_all(
        d,
        &model,
        clock.now(),
        seed,
        "after full compaction",
        !planted,
    )?;
    clock.advance_ms(GRACE_MS + TTL_MS_MAX + 2 * TS_SPREAD_MS);
    d.compact().map_err(|e| e.to_string())?;
    check_all(d, &model, clock.now(), seed, "past the grace", false)?;
    let stats = d.stats();
    let left: u64 = stats.level_entries.iter().sum();
    let live = model
        .map
        .values()
        .filter(|v| entry_at(v, clock.now()).value.is_some())
        .count() as u64;
    if left != live {
        return Err(format!(
            "seed {seed}: {left} entries left past the grace, {live} live keys"
        ));
    }
    Ok(())
}

/// Every key read and a full scan against the model. Past the grace
/// (`tombstones_kept` false) a dead key may read as absent.
fn check_all(
    d: &Db,
    model: &Model,
    now_ms: u64,
    seed: u64,
    when: &str,
    tombstones_kept: bool,
) -> Result<(), String> {
    for i in 0..KEYS {
        let k = key(i);
        let got = d.get(&k).map_err(|e| e.to_string())?;
        if let Some(what) = differs(&got, &model.get(&k, now_ms), !tombstones_kept) {
            return Err(format!("seed {seed} {when}: key {i}: {what}"));
        }
    }
    check_scan(d, model, now_ms, seed, usize::MAX)
}

/// How a read differs from the model's, if it does. With `values_only`
/// a tombstone and an absent key are the same (a dropped tombstone, past
/// the grace or by the planted bug, reads as absent).
fn differs(got: &Option<Entry>, want: &Option<Entry>, values_only: bool) -> Option<String> {
    let value = |e: &Option<Entry>| e.as_ref().and_then(|e| e.value.clone());
    let same = if values_only {
        value(got) == value(want)
    } else {
        got == want
    };
    if same {
        return None;
    }
    let what = if value(want).is_none() && value(got).is_some() {
        "an older version resurrected"
    } else {
        "diverges"
    };
    Some(format!("{what}: engine {got:?}, model {want:?}"))
}

/// A scan of live keys against the model.
fn check_scan(d: &Db, model: &Model, now_ms: u64, seed: u64, step: usize) -> Result<(), String> {
    let got: Vec<(Vec<u8>, Entry)> = d
        .scan(b"", None, false)
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let want: Vec<(Vec<u8>, Entry)> = model
        .map
        .iter()
        .map(|(k, v)| (k.clone(), entry_at(v, now_ms)))
        .filter(|(_, e)| e.value.is_some())
        .collect();
    if got != want {
        let back = got
            .iter()
            .find(|(k, _)| !want.iter().any(|(w, _)| w == k))
            .map(|(k, e)| {
                format!(
                    "; {:?} at ts {}: an older version resurrected",
                    String::from_utf8_lossy(k),
                    e.ts
                )
            })
            .unwrap_or_default();
        return Err(format!(
            "seed {seed} step {step}: scan has {} live keys, model {}{back}",
            got.len(),
            want.len()
        ));
    }
    Ok(())
}

trait Now {
    fn now(&self) -> u64;
}

impl Now for Arc<VirtualClock> {
    fn now(&self) -> u64 {
        use ataman_engine::Clock;
        self.now_ms()
    }
}

/// The engine matches the model on every seed: expired values read as
/// tombstones before and after compaction, never resurrect an older
/// version, and are dropped past the grace at the bottom.
#[test]
fn expiry_matches_model() {
    for seed in 1..=SEEDS {
        let dir = tempfile::tempdir().unwrap();
        if let Err(e) = run_seed(dir.path(), seed, false) {
            panic!("{e}");
        }
    }
}

/// Negative control: with the planted bug (expired versions dropped by
/// compaction without a tombstone), the model test sees a divergence.
#[test]
fn planted_drop_without_tombstone_is_caught() {
    let mut caught = Vec::new();
    for seed in 1..=SEEDS {
        let dir = tempfile::tempdir().unwrap();
        if let Err(e) = run_seed(dir.path(), seed, true) {
            caught.push(e);
        }
    }
    assert!(
        caught.iter().any(|e| e.contains("resurrected")),
        "the planted bug went unnoticed on every seed: {caught:?}"
    );
    eprintln!(
        "planted bug caught on {} of {SEEDS} seeds, e.g. {}",
        caught.len(),
        caught[0]
    );
}

/// The tie rule on one replica: at an equal timestamp a tombstone beats an
/// expiring value beats a plain value, whatever order they are applied
/// in, in the memtable and after a flush and a compaction.
#[test]
fn equal_timestamps_tombstone_then_expiring_then_plain() {
    let clock = VirtualClock::new(START_MS);
    let ts = timestamp_from_millis(START_MS, 0);
    let far = START_MS + 1_000_000;
    let orders: [&[u8]; 6] = [b"pet", b"pte", b"ept", b"etp", b"tpe", b"tep"];
    for (n, order) in orders.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(&clock, false)).unwrap();
        let k = format!("k{n}").into_bytes();
        let apply = |db: &Db, what: u8| {
            let mut b = WriteBatch::new();
            match what {
                b'p' => b.put(&k, b"plain", ts),
                b'e' => b.put_expiring(&k, b"exp", ts, far),
                _ => b.delete(&k, ts),
            };
            db.write(b, Durability::Complete).unwrap();
        };
        // Plain vs expiring: the expiring value wins.
        for &w in order.iter().filter(|&&w| w != b't') {
            apply(&db, w);
        }
        let want_exp = Entry {
            ts,
            value: Some(b"exp".to_vec()),
            deadline_ms: Some(far),
        };
        assert_eq!(db.get(&k).unwrap(), Some(want_exp.clone()), "{order:?}");
        db.flush().unwrap();
        assert_eq!(db.get(&k).unwrap(), Some(want_exp), "{order:?} flushed");
        // Then the tombstone, at the same timestamp, wins over both.
        apply(&db, b't');
        assert_eq!(db.get(&k).unwrap(), Some(Entry::tombstone(ts)), "{order:?}");
        db.compact().unwrap();
        assert_eq!(
            db.get(&k).unwrap(),
            Some(Entry::tombstone(ts)),
            "{order:?} compacted"
        );
        // A plain value applied after everything still loses.
        apply(&db, b'p');
        assert_eq!(
            db.get(&k).unwrap(),
            Some(Entry::tombstone(ts)),
            "{order:?} late plain"
        );
        db.close().unwrap();
    }
}
