//! The node's slow log: the threshold, one counter of ids and one
//! [`Ring`] per network thread, read merged by id (the rules are the
//! parent module's, [`crate::slowlog`]).
//!
//! # Thread safety
//! See [`crate::slowlog`]: recording takes only its own thread's ring's
//! lock (uncontended but for a reader's copy), on a cache line of its
//! own; `RESET` and `slowlog-max-len` take the settings lock, then each
//! ring in turn.
//!
//! # Invariants
//! - Every ring's `len_max` is the log's (between two rings' updates in
//!   `set_len_max`, readers use the smaller).
//! - The entries held past the newest `len_max` of the node are never
//!   shown, and none is brought back by a larger `len_max`.

use super::{Entry, LEN_DEFAULT, LEN_MAX, Op, RINGS, Ring, THRESHOLD_US_DEFAULT, should_record};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// One ring on a cache line of its own: network threads recording into
/// neighbouring rings do not share a line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Lane(Mutex<Ring>);

/// The node's slow log: the threshold, the id counter and one ring per
/// network thread (see the module's "Rules" and "Thread safety").
#[derive(Debug)]
pub struct SlowLog {
    threshold_us: AtomicI64,
    /// The next entry's id (taken under its ring's lock).
    next_id: AtomicU64,
    /// Entries kept at most, in all and in each ring.
    len_max: AtomicUsize,
    /// Serialises `RESET` and `slowlog-max-len` (each walks every ring).
    settings: Mutex<()>,
    rings: Box<[Lane]>,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            threshold_us: AtomicI64::new(THRESHOLD_US_DEFAULT),
            next_id: AtomicU64::new(0),
            len_max: AtomicUsize::new(LEN_DEFAULT),
            settings: Mutex::new(()),
            rings: (0..RINGS).map(|_| Lane::default()).collect(),
        }
    }
}

/// A lock whose holder panicked left a ring (or nothing) whose invariants
/// each operation keeps: use it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SlowLog {
    /// The threshold, µs (negative: off).
    pub fn threshold_us(&self) -> i64 {
        self.threshold_us.load(Ordering::Relaxed)
    }

    /// Sets the threshold, µs (negative: off; 0: every request).
    pub fn set_threshold_us(&self, threshold_us: i64) {
        self.threshold_us.store(threshold_us, Ordering::Relaxed);
    }

    /// True when a request of `duration_us` is to be recorded (one atomic load).
    pub fn is_slow(&self, duration_us: u64) -> bool {
        should_record(self.threshold_us(), duration_us)
    }

    /// True when a request arriving now gathers its facts (the log is on;
    /// one atomic load): see [`super::gathers_facts`].
    pub fn gathers_facts(&self) -> bool {
        super::gathers_facts(self.threshold_us())
    }

    /// Records an entry from network thread `thread` (the caller checked
    /// [`SlowLog::is_slow`]), written by `fill` in place in a slot of that
    /// thread's ring (see [`Ring::push_with`]: every field but `id`);
    /// returns its id.
    pub fn record_with(&self, thread: usize, fill: impl FnOnce(&mut Entry)) -> u64 {
        let mut ring = lock(&self.rings[thread % RINGS].0);
        // Under the ring's lock: two threads sharing a ring push in id order.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        ring.push_with(id, fill);
        id
    }

    /// Records `entry` from thread 0 (tests and callers off the request
    /// path; its `id` is overwritten); returns its id.
    pub fn record(&self, entry: Entry) -> u64 {
        self.record_with(0, |slot| *slot = entry)
    }

    /// The newest `n` entries of all the rings, newest first.
    pub fn newest(&self, n: usize) -> Vec<Entry> {
        let keep = n.min(self.len_max());
        let per_ring = self
            .rings
            .iter()
            .map(|lane| lock(&lane.0).newest(keep))
            .filter(|entries| !entries.is_empty())
            .collect();
        merge_newest(per_ring, keep)
    }

    /// Entries held (at most `len_max`).
    pub fn len(&self) -> usize {
        let held: usize = self.rings.iter().map(|lane| lock(&lane.0).len()).sum();
        held.min(self.len_max())
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries kept at most.
    pub fn len_max(&self) -> usize {
        self.len_max.load(Ordering::Relaxed)
    }

    /// Forgets every entry (ids go on growing).
    pub fn reset(&self) {
        let _settings = lock(&self.settings);
        for lane in &self.rings {
            lock(&lane.0).reset();
        }
    }

    /// Keeps at most `len_max` entries from now on.
    pub fn set_len_max(&self, len_max: usize) -> Result<(), String> {
        let _settings = lock(&self.settings);
        if len_max > LEN_MAX {
            return Err(format!(
                "slowlog-max-len {len_max} over the limit of {LEN_MAX}"
            ));
        }
        // Readers truncate to the smaller bound while the rings change.
        let keep = len_max.min(self.len_max());
        self.len_max.store(keep, Ordering::Relaxed);
        // Entries past the newest `keep` of the node are gone (a ring
        // holds its own newest, which may be older than every other
        // ring's): drop them from every ring, or a larger bound would
        // bring them back.
        let mut ids: Vec<u64> = self
            .rings
            .iter()
            .flat_map(|lane| lock(&lane.0).ids().take(keep).collect::<Vec<_>>())
            .collect();
        ids.sort_unstable_by_key(|&id| std::cmp::Reverse(id));
        let oldest_kept = match keep {
            0 => Some(u64::MAX),
            _ => ids.get(keep - 1).copied(),
        };
        for lane in &self.rings {
            let mut ring = lock(&lane.0);
            if let Some(oldest_kept) = oldest_kept {
                ring.drop_older_than(oldest_kept);
            }
            ring.set_len_max(len_max)?;
        }
        self.len_max.store(len_max, Ordering::Relaxed);
        Ok(())
    }

    /// Carries out a [`Op::Set`] or [`Op::Reset`] (the reads are the
    /// caller's, which renders them); the capacity is checked before
    /// anything changes.
    pub fn apply(&self, op: Op) -> Result<(), String> {
        match op {
            Op::Reset => self.reset(),
            Op::Set {
                threshold_us,
                len_max,
            } => {
                if let Some(len_max) = len_max {
                    self.set_len_max(len_max)?;
                }
                if let Some(t) = threshold_us {
                    self.set_threshold_us(t);
                }
            }
            Op::Get { .. } | Op::Len => {}
        }
        Ok(())
    }
}

/// The newest `n` entries of the rings' entries (each ring's newest
/// first, ids unique across them), newest first: a merge by id.
pub fn merge_newest(per_ring: Vec<Vec<Entry>>, n: usize) -> Vec<Entry> {
    debug_assert!(
        per_ring
            .iter()
            .all(|r| r.windows(2).all(|w| w[0].id > w[1].id)),
        "each ring newest first"
    );
    let mut all: Vec<Entry> = per_ring.into_iter().flatten().collect();
    all.sort_unstable_by_key(|e| std::cmp::Reverse(e.id));
    all.truncate(n);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slowlog::ReplicaTime;
    use crate::slowlog::tests::entry;

    /// RESET empties every thread's ring; ids go on from where they were.
    #[test]
    fn reset_keeps_the_id_counter() {
        let log = SlowLog::default();
        log.record_with(0, |e| *e = entry(1));
        log.record_with(1, |e| *e = entry(2));
        assert_eq!(log.len(), 2);
        log.reset();
        assert!(log.is_empty());
        assert!(log.newest(LEN_MAX).is_empty());
        assert_eq!(log.record_with(1, |e| *e = entry(3)), 2);
        assert_eq!(log.len(), 1);
    }

    /// The log of several network threads against a model of one global
    /// ring (the newest `len_max` ids, newest first) over a seeded mix of
    /// records from random threads (more threads than rings too, so rings
    /// are shared), reads of random counts, resets and capacity changes:
    /// the merge by id gives exactly the newest `len_max` the node
    /// recorded, LEN counts them, ids only grow.
    #[test]
    fn rings_merged_match_one_global_model() {
        let log = SlowLog::default();
        log.set_len_max(5).unwrap();
        let mut model: Vec<u64> = Vec::new(); // ids, newest first
        let mut len_max = 5;
        let mut seed = 0x9e37_79b9_u64;
        let mut last_id = None;
        for step in 0..4_000u64 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let pick = (seed >> 33) % 40;
            match pick {
                0 => {
                    len_max = ((seed >> 40) % 9) as usize;
                    log.set_len_max(len_max).unwrap();
                    model.truncate(len_max);
                }
                1 => {
                    log.reset();
                    model.clear();
                }
                _ => {
                    // Threads 0..3 mostly (their rings fill and wrap), now
                    // and then one sharing ring 2 with thread 2.
                    let thread = if pick == 2 {
                        2 + RINGS
                    } else {
                        ((seed >> 45) % 3) as usize
                    };
                    let id = log.record_with(thread, |e| *e = entry(step));
                    assert!(last_id.is_none_or(|last| id > last), "ids grow");
                    last_id = Some(id);
                    model.insert(0, id);
                    model.truncate(len_max);
                }
            }
            let n = ((seed >> 50) % 8) as usize;
            let ids: Vec<u64> = log.newest(n).iter().map(|e| e.id).collect();
            assert_eq!(ids, model[..n.min(model.len())], "step {step}, newest {n}");
            assert_eq!(log.len(), model.len(), "step {step}");
            assert_eq!(log.len_max(), len_max);
        }
    }

    /// A recorded entry is written in place: every field the fill gives,
    /// the id the log's; a slot reused keeps no replica of the entry it
    /// held before.
    #[test]
    fn entry_is_written_in_place() {
        let log = SlowLog::default();
        log.set_len_max(1).unwrap();
        log.record_with(3, |e| {
            *e = entry(7);
            e.stages.replicas.push(ReplicaTime {
                node: "http://a".into(),
                answer_us: 1,
            });
        });
        let id = log.record_with(3, |e| {
            e.duration_us = 9;
            e.stages.clear();
        });
        let held = log.newest(10);
        assert_eq!(held.len(), 1);
        assert_eq!((held[0].id, held[0].duration_us), (id, 9));
        assert!(held[0].stages.replicas.is_empty());
    }
}
