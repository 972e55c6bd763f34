//! The hinted-handoff store: writes a peer missed, kept durably until it
//! is back.
//!
//! When a replica does not acknowledge a write (down, timed out), the
//! coordinating node records a *hint* here and delivers it once the replica
//! answers again. The store is a second instance of the project's engine
//! ([`ataman_engine::Db`]) in `<data_dir>/hints/`, a directory the main
//! engine never reads.
//!
//! What the hint engine holds (`docs/FORMAT.md`, "Hint record"):
//! - key: `xxh3_64(peer URL)` u64 BE, then `seq` u64 BE. One peer's hints are
//!   one contiguous key range, in `seq` order, so [`HintStore::pending`] is
//!   one scan.
//! - value: the hint record (the missed write's timestamp, key and value).
//! - engine timestamps: a hint is put at [`HINT_PUT_TS`] and removed with a
//!   tombstone at [`HINT_DELETE_TS`]; each hint key is written once and
//!   removed once. The tombstone grace period is zero, so compaction drops
//!   a delivered hint as soon as it merges the tombstone with its put (or
//!   finds the put nowhere else).
//!
//! The store is bounded by the bytes of pending hints (key + record of
//! each). At the bound new hints are refused ([`HintError::Full`]) and
//! counted in [`HintStats::dropped`]; anti-entropy repairs what they would
//! have.

pub mod record;
#[cfg(test)]
mod tests;

pub use record::{HINT_DELETE_TS, HINT_KEY_BYTES, HINT_PUT_TS, HINT_RECORD_HEADER_BYTES};

use ataman_engine::fs::FileSystem;
use ataman_engine::key::KEY_BYTES_MAX;
use ataman_engine::{Db, Durability, Entry, Options, WalMode, WriteBatch};
use ataman_testkit::lock::lock;
use record::{
    checked_record, corrupt, decode_record, encode_record, hint_key, parse_hint_key, peer_hash,
};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Memtable size of the hint engine: hints are small and few next to the
/// data, so a smaller memtable than the main engine's keeps replay short.
pub const HINTS_MEMTABLE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Block cache of the hint engine: hints are read once, in order, on
/// delivery, so little cache helps.
pub const HINTS_BLOCK_CACHE_BYTES: usize = 8 * 1024 * 1024;

/// One write a peer missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The store-wide sequence number: only grows, orders a peer's hints.
    pub seq: u64,
    /// The user key of the missed write.
    pub key: Vec<u8>,
    /// The missed write's timestamp (hybrid logical clock).
    pub ts: u64,
    /// The missed write's value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The value's deadline, Unix milliseconds, if it expires (carried
    /// unchanged from the coordinator's stamp).
    pub deadline_ms: Option<u64>,
}

/// What the hint store can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum HintError {
    /// Pending hints plus this one would exceed the store's byte bound.
    #[error("hint store full: {bytes} of {bytes_max} bytes")]
    Full {
        /// Bytes of the hints pending when the hint was refused.
        bytes: u64,
        /// The bound.
        bytes_max: u64,
    },
    /// The hint engine refused or failed an operation.
    #[error("hint store: {0}")]
    Engine(String),
    /// A record in the hint engine does not decode.
    #[error("hint store: record {key} does not decode: {reason}")]
    Corrupt {
        /// The hint engine key, in hex (peer hash, then seq).
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The caller passed a hint the store will not keep.
    #[error("hint store: invalid hint: {0}")]
    Invalid(String),
}

/// Totals and counters of a [`HintStore`], for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HintStats {
    /// Hints pending, all peers.
    pub pending: u64,
    /// Bytes of the pending hints (engine key + record of each).
    pub pending_bytes: u64,
    /// Hints accepted by [`HintStore::add`] since open.
    pub added: u64,
    /// Hints removed by [`HintStore::remove`] (tombstone applied) since open.
    pub delivered: u64,
    /// Hints refused at the byte bound since open.
    pub dropped: u64,
    /// Hints the engine refused or failed to store since open.
    pub failed: u64,
    /// Hint removals the engine refused or failed since open (the hints
    /// stay pending and are delivered again).
    pub remove_failed: u64,
}

/// Pending hints of one peer (or of all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pending {
    count: u64,
    bytes: u64,
}

/// What is pending, and the next sequence number.
#[derive(Debug, Default)]
struct Ledger {
    /// Per peer hash; a peer with nothing pending has no entry.
    peers: HashMap<u64, Pending>,
    /// The sum of `peers`.
    total: Pending,
    /// The sequence number the next hint gets.
    next_seq: u64,
    /// Hints whose removal tombstone is queued but not yet applied.
    removing: HashSet<(u64, u64)>,
}

impl Ledger {
    fn credit(&mut self, peer_hash: u64, bytes: u64) {
        let p = self.peers.entry(peer_hash).or_default();
        p.count += 1;
        p.bytes += bytes;
        self.total.count += 1;
        self.total.bytes += bytes;
    }

    fn debit(&mut self, peer_hash: u64, bytes: u64) {
        if let Some(p) = self.peers.get_mut(&peer_hash) {
            // Saturating: after an engine failure the ledger may be off
            // (see `HintStore`'s invariants); it must not wrap.
            p.count = p.count.saturating_sub(1);
            p.bytes = p.bytes.saturating_sub(bytes);
            if p.count == 0 {
                self.peers.remove(&peer_hash);
            }
        }
        self.total.count = self.total.count.saturating_sub(1);
        self.total.bytes = self.total.bytes.saturating_sub(bytes);
    }
}

/// The part engine callbacks reach.
#[derive(Debug, Default)]
struct Accounts {
    ledger: Mutex<Ledger>,
    added: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    remove_failed: AtomicU64,
}

impl Accounts {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // Every ledger update is complete before anything can panic, so a
        // poisoned lock still guards a consistent ledger.
        lock(&self.ledger)
    }

    /// The engine failed a hint it had accepted.
    fn add_failed(&self, peer_hash: u64, bytes: u64) {
        self.ledger().debit(peer_hash, bytes);
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A removal batch was applied (`ok`) or refused: `removed` is
    /// `(seq, bytes)` of each hint in it, already debited.
    fn remove_done(&self, peer_hash: u64, removed: &[(u64, u64)], ok: bool) {
        let mut ledger = self.ledger();
        for &(seq, bytes) in removed {
            ledger.removing.remove(&(peer_hash, seq));
            if !ok {
                ledger.credit(peer_hash, bytes);
            }
        }
        drop(ledger);
        let counter = if ok {
            &self.delivered
        } else {
            &self.remove_failed
        };
        counter.fetch_add(removed.len() as u64, Ordering::Relaxed);
    }
}

/// The durable store of hints for peers that missed writes.
///
/// # Thread safety
/// `HintStore` is `Send + Sync`: share it behind an `Arc` between the
/// network threads. [`add`](HintStore::add) and
/// [`remove`](HintStore::remove) may run concurrently from any threads;
/// neither waits on disk (they queue to the engine's writer and return).
/// [`pending`](HintStore::pending) is a scan on the caller's thread and
/// never blocks writes. Hints are queued in `seq` order (the ledger lock is
/// held from assigning the number to queuing the write), so a reader never
/// sees a hint before an older one of the same store.
///
/// # Invariants
/// - `seq` only grows: at open it starts after the highest seq found
///   (tombstones included), then each accepted hint takes the next one.
/// - The ledger counts a hint from the moment `add` queues it until
///   `remove` queues its tombstone; removals of one hint twice count once
///   (a hint being removed is in `removing` until its tombstone is
///   visible, and removals are serialized by `remove_order`).
/// - The byte bound is checked and reserved under one lock, so concurrent
///   adds never overshoot it.
/// - After the engine fails (poisoned: a failed write or fsync), a write it
///   applied may still be reported failed, so the counts may be off until
///   the next open, which recounts from the engine.
pub struct HintStore {
    db: Db,
    accounts: Arc<Accounts>,
    bytes_max: u64,
    /// Serializes `remove` (see the invariants).
    remove_order: Mutex<()>,
}

impl std::fmt::Debug for HintStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HintStore")
            .field("bytes_max", &self.bytes_max)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl HintStore {
    /// Opens (creating) the store in `dir`, counting what is pending per
    /// peer. A record that does not decode fails the open with
    /// [`HintError::Corrupt`] naming its key.
    pub fn open(dir: &Path, bytes_max: u64, wal_mode: WalMode) -> Result<HintStore, HintError> {
        Self::open_on(dir, bytes_max, wal_mode, Options::default().fs)
    }

    /// [`HintStore::open`] on the file system `fs` (a node under the
    /// `--fault-control` test hook passes its fault-injecting one).
    pub fn open_on(
        dir: &Path,
        bytes_max: u64,
        wal_mode: WalMode,
        fs: Arc<dyn FileSystem>,
    ) -> Result<HintStore, HintError> {
        let opts = Options {
            fs,
            wal_mode,
            tombstone_grace: Duration::ZERO,
            memtable_bytes_max: HINTS_MEMTABLE_BYTES_MAX,
            block_cache_bytes: HINTS_BLOCK_CACHE_BYTES,
            compaction_nice: crate::antientropy::priority::BACKGROUND_NICE_STEP,
            ..Options::default()
        };
        Self::open_with_options(dir, bytes_max, opts)
    }

    /// [`HintStore::open`] with the engine options given (tests pass a
    /// simulated file system).
    fn open_with_options(
        dir: &Path,
        bytes_max: u64,
        opts: Options,
    ) -> Result<HintStore, HintError> {
        let db = Db::open(dir, opts)
            .map_err(|e| HintError::Engine(format!("cannot open {}: {e}", dir.display())))?;
        let ledger = recount(&db)?;
        Ok(HintStore {
            db,
            accounts: Arc::new(Accounts {
                ledger: Mutex::new(ledger),
                ..Accounts::default()
            }),
            bytes_max,
            remove_order: Mutex::new(()),
        })
    }

    /// The bound on pending bytes this store was opened with.
    pub fn bytes_max(&self) -> u64 {
        self.bytes_max
    }

    /// Records that peer `peer` (its URL) missed this version of `key`
    /// (`value` `None`: a tombstone).
    ///
    /// Asynchronous and durable: the hint is queued to the engine with
    /// `Durability::Complete` and this returns at once, never waiting on an
    /// fsync. When pending bytes plus this hint's encoded size would exceed
    /// `bytes_max`, the hint is refused with [`HintError::Full`] and counted
    /// in `dropped`. An engine refusal now is an [`HintError::Engine`]; a
    /// failure the engine reports later is counted in `failed` and the hint
    /// stops counting as pending.
    pub fn add(
        &self,
        peer: &str,
        key: &[u8],
        ts: u64,
        value: Option<&[u8]>,
    ) -> Result<(), HintError> {
        self.add_expiring(peer, key, ts, value, None)
    }

    /// [`HintStore::add`] for a value that may carry a deadline (Unix
    /// milliseconds), kept in the record unchanged.
    pub fn add_expiring(
        &self,
        peer: &str,
        key: &[u8],
        ts: u64,
        value: Option<&[u8]>,
        deadline_ms: Option<u64>,
    ) -> Result<(), HintError> {
        if key.len() > KEY_BYTES_MAX {
            return Err(HintError::Invalid(format!(
                "key of {} bytes exceeds the limit of {KEY_BYTES_MAX}",
                key.len()
            )));
        }
        let record = encode_record(key, ts, value, deadline_ms);
        let bytes = (HINT_KEY_BYTES + record.len()) as u64;
        let peer_hash = peer_hash(peer);
        let mut ledger = self.accounts.ledger();
        let bytes_after = ledger.total.bytes.saturating_add(bytes);
        if bytes_after > self.bytes_max {
            let bytes = ledger.total.bytes;
            drop(ledger);
            self.accounts.dropped.fetch_add(1, Ordering::Relaxed);
            return Err(HintError::Full {
                bytes,
                bytes_max: self.bytes_max,
            });
        }
        let seq = ledger.next_seq;
        ledger.next_seq = seq
            .checked_add(1)
            .ok_or_else(|| HintError::Engine("hint sequence numbers exhausted".into()))?;
        let mut batch = WriteBatch::new();
        batch.put(&hint_key(peer_hash, seq), &record, HINT_PUT_TS);
        // Credited before the engine can call back (the callback needs
        // this lock, held until the write is queued).
        ledger.credit(peer_hash, bytes);
        let accounts = Arc::clone(&self.accounts);
        let done = Box::new(move |r: ataman_engine::Result<u64>| {
            if r.is_err() {
                accounts.add_failed(peer_hash, bytes);
            }
        });
        match self.db.submit(batch, Durability::Complete, done) {
            Ok(()) => {
                drop(ledger);
                self.accounts.added.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                ledger.debit(peer_hash, bytes);
                drop(ledger);
                self.accounts.failed.fetch_add(1, Ordering::Relaxed);
                Err(HintError::Engine(format!(
                    "cannot queue a hint for {peer}: {e}"
                )))
            }
        }
    }

    /// Up to `limit` pending hints for `peer` with `seq > after` (`None`:
    /// from the start), in `seq` order. One scan of the engine on the
    /// caller's thread; never blocks writes. A hint just added may not be
    /// visible yet (the engine applies it shortly after `add` returns).
    /// A record that does not decode is a [`HintError::Corrupt`] naming
    /// its key.
    pub fn pending(
        &self,
        peer: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Hint>, HintError> {
        let first_seq = match after {
            None => 0,
            Some(seq) => match seq.checked_add(1) {
                Some(next) => next,
                None => return Ok(Vec::new()),
            },
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        let peer_hash = peer_hash(peer);
        let start = hint_key(peer_hash, first_seq);
        let end = peer_hash.checked_add(1).map(|next| hint_key(next, 0));
        let scan = self
            .db
            .scan(&start, end.as_ref().map(|e| e.as_slice()), false)
            .map_err(|e| HintError::Engine(format!("cannot scan the hints of {peer}: {e}")))?;
        let mut hints: Vec<Hint> = Vec::new();
        for item in scan {
            let (engine_key, entry) = item
                .map_err(|e| HintError::Engine(format!("cannot scan the hints of {peer}: {e}")))?;
            let (hash, seq) = parse_hint_key(&engine_key)?;
            let Some(record) = checked_record(&engine_key, &entry)? else {
                continue; // a tombstone: the scan excludes them
            };
            assert_eq!(hash, peer_hash, "scan left the peer's key range");
            debug_assert!(hints.last().is_none_or(|h| h.seq < seq));
            let r = decode_record(record).map_err(|reason| corrupt(&engine_key, reason))?;
            hints.push(Hint {
                seq,
                key: r.key.to_vec(),
                ts: r.ts,
                value: r.value.map(<[u8]>::to_vec),
                deadline_ms: r.deadline_ms,
            });
            if hints.len() >= limit {
                break;
            }
        }
        Ok(hints)
    }

    /// Removes delivered hints of `peer`: queues their tombstones with
    /// `Durability::Submit` and returns (a hint delivered twice after a
    /// crash is harmless: replicas keep the newest timestamp). Seqs that
    /// are not pending (unknown, already removed, or not yet visible to
    /// [`pending`](HintStore::pending)) are ignored. Costs one point read
    /// per seq (to learn the hint's size for the count). A removal the
    /// engine refuses is counted in `remove_failed` and the hint stays
    /// pending.
    pub fn remove(&self, peer: &str, seqs: &[u64]) {
        let peer_hash = peer_hash(peer);
        let _order = lock(&self.remove_order);
        let mut wanted = seqs.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        {
            let ledger = self.accounts.ledger();
            wanted.retain(|&seq| !ledger.removing.contains(&(peer_hash, seq)));
        }
        // Not in `removing`: never removed, or its tombstone is visible
        // (the callback clears it only after the apply), so `get` tells.
        let mut batch = WriteBatch::new();
        let mut removed: Vec<(u64, u64)> = Vec::new();
        for seq in wanted {
            let key = hint_key(peer_hash, seq);
            match self.db.get(&key) {
                Ok(Some(Entry {
                    value: Some(record),
                    ..
                })) => {
                    batch.delete(&key, HINT_DELETE_TS);
                    removed.push((seq, (HINT_KEY_BYTES + record.len()) as u64));
                }
                Ok(_) => {}
                Err(_) => {
                    self.accounts.remove_failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if removed.is_empty() {
            return;
        }
        {
            let mut ledger = self.accounts.ledger();
            for &(seq, bytes) in &removed {
                ledger.removing.insert((peer_hash, seq));
                ledger.debit(peer_hash, bytes);
            }
        }
        let accounts = Arc::clone(&self.accounts);
        let in_batch = removed.clone();
        let done = Box::new(move |r: ataman_engine::Result<u64>| {
            accounts.remove_done(peer_hash, &in_batch, r.is_ok());
        });
        if self.db.submit(batch, Durability::Submit, done).is_err() {
            // Refused at once: the callback was dropped without running.
            self.accounts.remove_done(peer_hash, &removed, false);
        }
    }

    /// Pending hints and their bytes for `peer`.
    pub fn count(&self, peer: &str) -> (u64, u64) {
        let p = self
            .accounts
            .ledger()
            .peers
            .get(&peer_hash(peer))
            .copied()
            .unwrap_or_default();
        (p.count, p.bytes)
    }

    /// Totals and counters for metrics.
    pub fn stats(&self) -> HintStats {
        let total = self.accounts.ledger().total;
        let a = &self.accounts;
        HintStats {
            pending: total.count,
            pending_bytes: total.bytes,
            added: a.added.load(Ordering::Relaxed),
            delivered: a.delivered.load(Ordering::Relaxed),
            dropped: a.dropped.load(Ordering::Relaxed),
            failed: a.failed.load(Ordering::Relaxed),
            remove_failed: a.remove_failed.load(Ordering::Relaxed),
        }
    }

    /// SSTables the hint engine holds open (for the descriptor budget).
    pub fn tables_open(&self) -> usize {
        self.db.stats().level_files.iter().sum()
    }

    /// A checkpoint of the store into `dir` (which must not exist): its
    /// engine's ([`Db::checkpoint`]), for a node checkpoint (docs/BACKUP.md).
    pub fn checkpoint(&self, dir: &Path) -> Result<ataman_engine::db::CheckpointReport, HintError> {
        self.db
            .checkpoint(dir)
            .map_err(|e| HintError::Engine(format!("cannot checkpoint: {e}")))
    }

    /// Flushes and closes the engine; queued hints and removals are
    /// written first.
    pub fn close(self) -> Result<(), HintError> {
        self.db
            .close()
            .map_err(|e| HintError::Engine(format!("cannot close: {e}")))
    }
}

/// Scans the whole hint engine once: what is pending per peer, and the
/// next sequence number (after every seq found, tombstones included, so a
/// new hint never lands under an old tombstone).
fn recount(db: &Db) -> Result<Ledger, HintError> {
    let mut ledger = Ledger::default();
    let mut seq_max = 0u64;
    let scan = db
        .scan(&[], None, true)
        .map_err(|e| HintError::Engine(format!("cannot scan the hints: {e}")))?;
    for item in scan {
        let (engine_key, entry) =
            item.map_err(|e| HintError::Engine(format!("cannot scan the hints: {e}")))?;
        let (peer_hash, seq) = parse_hint_key(&engine_key)?;
        seq_max = seq_max.max(seq);
        if let Some(record) = checked_record(&engine_key, &entry)? {
            decode_record(record).map_err(|reason| corrupt(&engine_key, reason))?;
            ledger.credit(peer_hash, (HINT_KEY_BYTES + record.len()) as u64);
        }
    }
    ledger.next_seq = seq_max
        .checked_add(1)
        .ok_or_else(|| HintError::Engine("hint sequence numbers exhausted".into()))?;
    Ok(ledger)
}
