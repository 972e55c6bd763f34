//! The slow log: the last requests that took longer than a threshold, with
//! where their time went, kept per node in a fixed-capacity ring
//! (docs/API.md "GET /v0/slowlog", docs/RESP.md "SLOWLOG").
//!
//! Modelled on Redis's `SLOWLOG` (a threshold in microseconds, default
//! [`THRESHOLD_US_DEFAULT`] = 10 ms; [`LEN_DEFAULT`] = 128 entries, newest
//! first; ids that only grow, kept across `RESET`), and on etcd's lesson:
//! an entry holds the key (cut at [`KEY_BYTES_MAX`]), sizes, the client's
//! address, the command and its stages, **never a value**.
//!
//! # Rules
//! - A request is recorded when the threshold is not negative and its
//!   duration is at least the threshold ([`should_record`]): 0 records
//!   every request, a negative threshold none (Redis's `>=`).
//! - The ring keeps the newest `len_max` entries; a lower `len_max` drops
//!   the oldest at once; `len_max` is at most [`LEN_MAX`].
//! - Ids start at 0 and grow by one per entry recorded; `RESET` empties the
//!   ring and keeps the counter (Redis does the same), so a reader that
//!   remembers the highest id it saw never mistakes a new entry for one
//!   it already has.
//!
//! - One ring per network thread ([`RINGS`] at most; thread `t` records
//!   into ring `t % RINGS`), each keeping its newest `len_max`. A read
//!   merges the rings by id and keeps the newest `len_max` of the union:
//!   that is exactly the newest `len_max` the node recorded, since an
//!   entry among those has fewer than `len_max` newer entries in its own
//!   ring ([`merge_newest`]). `LEN` is `min(len_max, entries held)`.
//!
//! # Thread safety
//! [`SlowLog`] is shared by every network thread. The threshold is an
//! atomic read on every request. A request at or over it is written by
//! its own thread into that thread's ring, built in place in its slot
//! ([`Ring::push_with`]): the ring's mutex is then uncontended (no other
//! thread records into it; a reader takes it for the time of a copy), on
//! a cache line of its own, and the id is one relaxed `fetch_add` taken
//! under it, so each ring's ids grow. Readers (`SLOWLOG GET`,
//! `GET /v0/slowlog`) and `RESET`/`slowlog-max-len` take the rings one
//! after another; the settings are serialised by their own mutex.
//!
//! # Invariants
//! - `slots.len() <= len_max <= LEN_MAX` in every ring after every operation.
//! - A ring's entries are in decreasing id order (newest first); ids are
//!   unique across the rings.

mod rings;

pub use rings::{SlowLog, merge_newest};

/// Entries kept by default (Redis's `slowlog-max-len` default).
pub const LEN_DEFAULT: usize = 128;
/// The largest `slowlog-max-len` accepted: the ring's memory stays
/// bounded whatever an operator sets (an entry is a few hundred bytes).
pub const LEN_MAX: usize = 10_000;
/// The default threshold, µs (Redis's `slowlog-log-slower-than` default).
pub const THRESHOLD_US_DEFAULT: i64 = 10_000;
/// Bytes of a key kept in an entry (Redis's `SLOWLOG_ENTRY_MAX_STRING`);
/// the entry says how long the key was.
pub const KEY_BYTES_MAX: usize = 128;
/// Replica answers kept in an entry (a request asks at most `from`
/// replicas, at most the cluster's size; past this the slowest are kept).
pub const REPLICAS_MAX: usize = 16;
/// Rings a slow log keeps (one per network thread; more threads share).
pub const RINGS: usize = 64;
/// Entries one `SLOWLOG GET` or `GET /v0/slowlog` answers when it names
/// no count (Redis's default for `SLOWLOG GET`).
pub const GET_DEFAULT: usize = 10;

/// What a client asks of the slow log, whatever protocol carried it
/// (`SLOWLOG`, `CONFIG SET`, `GET`/`POST /v0/slowlog`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The newest `count` entries (`SLOWLOG GET`, `GET /v0/slowlog`).
    Get {
        /// Entries at most.
        count: usize,
    },
    /// Entries held (`SLOWLOG LEN`).
    Len,
    /// Forget every entry (`SLOWLOG RESET`).
    Reset,
    /// Change the settings (`CONFIG SET`, `POST /v0/slowlog`).
    Set {
        /// A new threshold, µs.
        threshold_us: Option<i64>,
        /// A new ring capacity.
        len_max: Option<usize>,
    },
}

impl Op {
    /// True for the operations that change the log (they need the admin role).
    pub fn changes(self) -> bool {
        matches!(self, Op::Reset | Op::Set { .. })
    }
}

/// True when a request of `duration_us` is recorded under `threshold_us`.
pub fn should_record(threshold_us: i64, duration_us: u64) -> bool {
    threshold_us >= 0 && duration_us >= threshold_us as u64
}

/// True when a request arriving under `threshold_us` gathers its
/// [`Facts`] (its key copied, its sizes counted: ~150 instructions a
/// request): only while the log is on. A request that arrives while the
/// log is off carries [`Facts::bare`] (no key), which is never recorded,
/// even if the log is turned on before it is answered.
pub fn gathers_facts(threshold_us: i64) -> bool {
    threshold_us >= 0
}

/// Which front end served the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The `/v0` HTTP API.
    Http,
    /// The Redis protocol.
    Resp,
}

impl Protocol {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Resp => "resp",
        }
    }
}

/// A key's first [`KEY_BYTES_MAX`] bytes, inline: taken for every request
/// without an allocation, kept only for a slow one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyPrefix {
    bytes: [u8; KEY_BYTES_MAX],
    kept: u8,
    /// The key's whole length, bytes.
    pub key_bytes: u32,
}

const _: () = assert!(KEY_BYTES_MAX <= u8::MAX as usize);

impl KeyPrefix {
    /// No key.
    pub const NONE: KeyPrefix = KeyPrefix {
        bytes: [0; KEY_BYTES_MAX],
        kept: 0,
        key_bytes: 0,
    };

    /// The first [`KEY_BYTES_MAX`] bytes of `key`.
    pub fn of(key: &[u8]) -> KeyPrefix {
        let kept = key.len().min(KEY_BYTES_MAX);
        let mut bytes = [0; KEY_BYTES_MAX];
        bytes[..kept].copy_from_slice(&key[..kept]);
        KeyPrefix {
            bytes,
            kept: kept as u8,
            key_bytes: u32::try_from(key.len()).unwrap_or(u32::MAX),
        }
    }

    /// The bytes kept.
    pub fn kept(&self) -> &[u8] {
        &self.bytes[..self.kept as usize]
    }
}

impl std::fmt::Debug for KeyPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeyPrefix({:?} of {} bytes)",
            String::from_utf8_lossy(self.kept()),
            self.key_bytes
        )
    }
}

/// What a request is, as far as the slow log tells it: gathered when it
/// is parsed, turned into an [`Entry`] only if it turns out slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The command (RESP, lower case as in the command table) or the
    /// method and route (HTTP: `GET /v0/entity`).
    pub command: &'static str,
    /// Its (first) key.
    pub key: KeyPrefix,
    /// Keys the command names.
    pub keys: u32,
    /// Bytes of the values it carries (never the values).
    pub value_bytes: u64,
    /// Arguments as sent, the command's name included (RESP; 0 for HTTP).
    pub args: u32,
}

impl Facts {
    /// A command without key or value.
    pub const fn bare(command: &'static str) -> Facts {
        Facts {
            command,
            key: KeyPrefix::NONE,
            keys: 0,
            value_bytes: 0,
            args: 0,
        }
    }
}

/// One replica's answer to a replicated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaTime {
    /// The replica (its URL; this node's own for the local replica).
    pub node: String,
    /// When it answered, µs after the coordinator asked it.
    pub answer_us: u64,
}

/// Where a request's time went, as far as the request path measures it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stages {
    /// µs from the request's arrival (parsed) to the coordinator asking
    /// its replicas; `None`: not replicated (served by this node alone).
    pub queue_us: Option<u64>,
    /// The replicas that answered before the request was answered, in
    /// answer order (at most [`REPLICAS_MAX`]).
    pub replicas: Vec<ReplicaTime>,
}

impl Stages {
    /// No stage (a request served by this node alone); keeps the
    /// replicas' buffers for the next entry written over this one.
    pub fn clear(&mut self) {
        self.queue_us = None;
        self.replicas.clear();
    }

    /// The replica that answered last (the one the request waited for).
    pub fn slowest(&self) -> Option<&ReplicaTime> {
        self.replicas.iter().max_by_key(|r| r.answer_us)
    }
}

/// A replicated request's stages as the coordinator marks them: when it
/// asked the replicas and when each answered, by node index. Inline and
/// `Copy`: carried with every verdict without an allocation, turned into
/// [`Stages`] (with the replicas' URLs) only for a slow request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageMarks {
    /// When the coordinator asked the replicas.
    pub asked: std::time::Instant,
    answers: [(u16, u32); REPLICAS_MAX],
    answered: u8,
}

const _: () = assert!(REPLICAS_MAX <= u8::MAX as usize);

impl StageMarks {
    /// Marks of a request asked at `asked`, no answer yet.
    pub fn new(asked: std::time::Instant) -> StageMarks {
        StageMarks {
            asked,
            answers: [(0, 0); REPLICAS_MAX],
            answered: 0,
        }
    }

    /// Node `node` answered at `at` (past [`REPLICAS_MAX`] answers, the
    /// later ones are dropped: the request was answered by then).
    pub fn answer(&mut self, node: usize, at: std::time::Instant) {
        let i = self.answered as usize;
        if i >= REPLICAS_MAX {
            return;
        }
        let us = at.saturating_duration_since(self.asked).as_micros();
        self.answers[i] = (
            u16::try_from(node).unwrap_or(u16::MAX),
            u32::try_from(us).unwrap_or(u32::MAX),
        );
        self.answered += 1;
    }

    /// The answers marked: `(node index, µs after asked)`, in answer order.
    pub fn answers(&self) -> &[(u16, u32)] {
        &self.answers[..self.answered as usize]
    }

    /// The latest answer's µs (0 without one).
    pub fn last_us(&self) -> u32 {
        self.answers().iter().map(|a| a.1).max().unwrap_or(0)
    }

    /// The stages of a request parsed at `started`, the replicas named by `url`.
    pub fn stages(&self, started: std::time::Instant, url: impl Fn(usize, &mut String)) -> Stages {
        let mut stages = Stages::default();
        self.fill_stages(started, &mut stages, url);
        stages
    }

    /// [`StageMarks::stages`] written over `stages` in place: the replicas'
    /// names are written into the `String`s already there (`url` appends
    /// node `n`'s name to an empty one), so a slot reused for a request
    /// with as many replicas allocates nothing.
    pub fn fill_stages(
        &self,
        started: std::time::Instant,
        stages: &mut Stages,
        url: impl Fn(usize, &mut String),
    ) {
        let queue = self.asked.saturating_duration_since(started).as_micros();
        stages.queue_us = Some(u64::try_from(queue).unwrap_or(u64::MAX));
        let answers = self.answers();
        stages.replicas.truncate(answers.len());
        for (i, &(node, us)) in answers.iter().enumerate() {
            if i == stages.replicas.len() {
                stages.replicas.push(ReplicaTime {
                    node: String::new(),
                    answer_us: 0,
                });
            }
            let replica = &mut stages.replicas[i];
            replica.node.clear();
            url(node as usize, &mut replica.node);
            replica.answer_us = u64::from(us);
        }
    }
}

/// Of two marks, those of the part that waited longest (a multi-key
/// command's slowest key tells where its time went).
pub fn slower(a: Option<StageMarks>, b: Option<StageMarks>) -> Option<StageMarks> {
    match (a, b) {
        (Some(a), Some(b))
            if b.asked + std::time::Duration::from_micros(b.last_us().into())
                > a.asked + std::time::Duration::from_micros(a.last_us().into()) =>
        {
            Some(b)
        }
        (Some(a), _) => Some(a),
        (None, b) => b,
    }
}

/// A recorded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Unique on this node while it runs; grows by one per entry.
    pub id: u64,
    /// When it was recorded (its end), Unix seconds.
    pub unix_time_s: u64,
    /// From its arrival to its answer, µs.
    pub duration_us: u64,
    /// The front end.
    pub protocol: Protocol,
    /// What it was.
    pub facts: Facts,
    /// The client's address (`None`: unknown); shown as `ip:port`
    /// ([`Entry::client_text`]), formatted when read, not when recorded.
    pub client: Option<std::net::SocketAddr>,
    /// The client's name (`CLIENT SETNAME`; empty for HTTP).
    pub client_name: String,
    /// Its stages.
    pub stages: Stages,
}

impl Entry {
    /// An entry with nothing in it (a slot before it is first written).
    pub fn blank() -> Entry {
        Entry {
            id: 0,
            unix_time_s: 0,
            duration_us: 0,
            protocol: Protocol::Resp,
            facts: Facts::bare(""),
            client: None,
            client_name: String::new(),
            stages: Stages::default(),
        }
    }

    /// The client's `ip:port` (`?` when unknown).
    pub fn client_text(&self) -> String {
        self.client.map_or_else(|| "?".into(), |a| a.to_string())
    }
}

/// A bounded ring of entries (pure; [`SlowLog`] keeps one per network
/// thread). Its slots are overwritten in place once full: recording
/// writes the new entry over the oldest where it lies, nothing is
/// shifted, copied or reallocated.
#[derive(Debug)]
pub struct Ring {
    /// Oldest to newest from `next` round to `next - 1`.
    slots: Vec<Entry>,
    /// The slot the next entry overwrites once `slots` is full (0 before).
    next: usize,
    len_max: usize,
}

impl Default for Ring {
    fn default() -> Self {
        Ring::new(LEN_DEFAULT)
    }
}

impl Ring {
    /// An empty ring keeping `len_max` entries (at most [`LEN_MAX`]).
    pub fn new(len_max: usize) -> Ring {
        Ring {
            slots: Vec::new(),
            next: 0,
            len_max: len_max.min(LEN_MAX),
        }
    }

    /// Records an entry under `id` (greater than every id held), written
    /// by `fill` in place over the oldest slot once the ring is full (the
    /// slot holds an older entry, or a blank one: `fill` writes every
    /// field but `id`); nothing with `len_max` 0.
    pub fn push_with(&mut self, id: u64, fill: impl FnOnce(&mut Entry)) {
        debug_assert!(self.newest_first().next().is_none_or(|e| e.id < id));
        let slot = if self.slots.len() < self.len_max {
            self.slots.push(Entry::blank());
            let last = self.slots.len() - 1;
            &mut self.slots[last]
        } else if self.len_max > 0 {
            let i = self.next;
            self.next = if i + 1 == self.len_max { 0 } else { i + 1 };
            &mut self.slots[i]
        } else {
            return;
        };
        fill(slot);
        slot.id = id;
        self.check();
    }

    /// The entries, newest first.
    fn newest_first(&self) -> impl Iterator<Item = &Entry> {
        let (older, newer) = self.slots.split_at(self.next);
        newer.iter().chain(older).rev()
    }

    /// The newest `n` entries, newest first.
    pub fn newest(&self, n: usize) -> Vec<Entry> {
        self.newest_first().take(n).cloned().collect()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Entries kept at most.
    pub fn len_max(&self) -> usize {
        self.len_max
    }

    /// Forgets every entry.
    pub fn reset(&mut self) {
        self.slots.clear();
        self.next = 0;
    }

    /// The ids held, newest first.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.newest_first().map(|e| e.id)
    }

    /// Drops the entries older than id `oldest_kept`.
    pub fn drop_older_than(&mut self, oldest_kept: u64) {
        let older = self.slots.iter().filter(|e| e.id < oldest_kept).count();
        // Oldest first from slot 0: the older ones are a prefix.
        self.slots.rotate_left(self.next);
        self.next = 0;
        self.slots.drain(..older);
        self.check();
    }

    /// Keeps at most `len_max` entries from now on (the oldest dropped at once).
    pub fn set_len_max(&mut self, len_max: usize) -> Result<(), String> {
        if len_max > LEN_MAX {
            return Err(format!(
                "slowlog-max-len {len_max} over the limit of {LEN_MAX}"
            ));
        }
        // Oldest first from slot 0, then the oldest past the new bound dropped.
        self.slots.rotate_left(self.next);
        self.next = 0;
        let extra = self.slots.len().saturating_sub(len_max);
        self.slots.drain(..extra);
        self.len_max = len_max;
        self.check();
        Ok(())
    }

    fn check(&self) {
        debug_assert!(self.slots.len() <= self.len_max && self.len_max <= LEN_MAX);
        debug_assert!(self.next == 0 || self.next < self.slots.len());
        debug_assert!(self.slots.len() == self.len_max || self.next == 0);
        debug_assert!(
            self.newest_first()
                .zip(self.newest_first().skip(1))
                .all(|(newer, older)| newer.id > older.id),
            "entries newest first"
        );
    }
}

/// Unix seconds now: `time(2)` (Redis's `time(NULL)`), a fraction of
/// `SystemTime::now().duration_since(UNIX_EPOCH)`'s instructions on every
/// recorded request (docs/BENCHMARKS.md, the slow log); 0 before 1970.
pub fn unix_now_s() -> u64 {
    // SAFETY: `time` with a null pointer only returns the time; it writes
    // through no pointer and cannot fail in a way that is undefined.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    u64::try_from(now).unwrap_or(0)
}

/// `GET /v0/slowlog`'s document: the settings and the newest `limit`
/// entries, newest first (docs/API.md).
pub fn render_json(log: &SlowLog, limit: usize) -> String {
    use crate::http::json::json_string;
    use std::fmt::Write;
    let entries = log.newest(limit);
    let mut out = String::with_capacity(256 + entries.len() * 256);
    let _ = write!(
        out,
        "{{\"threshold_us\":{},\"len\":{},\"len_max\":{},\"entries\":[",
        log.threshold_us(),
        log.len(),
        log.len_max()
    );
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let f = &e.facts;
        let _ = write!(
            out,
            "{{\"id\":{},\"unix_time_s\":{},\"duration_us\":{},\"protocol\":\"{}\",\"command\":",
            e.id,
            e.unix_time_s,
            e.duration_us,
            e.protocol.name()
        );
        json_string(&mut out, f.command);
        out.push_str(",\"key\":");
        json_string(&mut out, &String::from_utf8_lossy(f.key.kept()));
        let _ = write!(
            out,
            ",\"key_bytes\":{},\"key_truncated\":{},\"keys\":{},\"value_bytes\":{},\"args\":{},\"client\":",
            f.key.key_bytes,
            f.key.kept().len() < f.key.key_bytes as usize,
            f.keys,
            f.value_bytes,
            f.args
        );
        json_string(&mut out, &e.client_text());
        out.push_str(",\"client_name\":");
        json_string(&mut out, &e.client_name);
        out.push_str(",\"stages\":{\"queue_us\":");
        match e.stages.queue_us {
            Some(us) => {
                let _ = write!(out, "{us}");
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"replicas\":[");
        for (j, r) in e.stages.replicas.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str("{\"node\":");
            json_string(&mut out, &r.node);
            let _ = write!(out, ",\"answer_us\":{}}}", r.answer_us);
        }
        out.push_str("],\"slowest_replica\":");
        match e.stages.slowest() {
            Some(r) => json_string(&mut out, &r.node),
            None => out.push_str("null"),
        }
        out.push_str("}}");
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring with an id counter of its own (the [`SlowLog`]'s role).
    struct Counted {
        ring: Ring,
        next_id: u64,
    }

    impl Counted {
        fn new(len_max: usize) -> Counted {
            Counted {
                ring: Ring::new(len_max),
                next_id: 0,
            }
        }

        fn push(&mut self, e: Entry) -> u64 {
            let id = self.next_id;
            self.next_id += 1;
            self.ring.push_with(id, |slot| *slot = e);
            id
        }
    }

    impl std::ops::Deref for Counted {
        type Target = Ring;
        fn deref(&self) -> &Ring {
            &self.ring
        }
    }

    impl std::ops::DerefMut for Counted {
        fn deref_mut(&mut self) -> &mut Ring {
            &mut self.ring
        }
    }

    /// A bare RESP `get` entry that took `duration_us` (shared with
    /// `slowlog::rings`' tests).
    pub(super) fn entry(duration_us: u64) -> Entry {
        Entry {
            id: u64::MAX,
            unix_time_s: 1,
            duration_us,
            protocol: Protocol::Resp,
            facts: Facts::bare("get"),
            client: Some(([127, 0, 0, 1], 1).into()),
            client_name: String::new(),
            stages: Stages::default(),
        }
    }

    /// The threshold: negative records nothing, 0 everything, else `>=`.
    #[test]
    fn threshold_rule() {
        assert!(!gathers_facts(-1));
        assert!(gathers_facts(0));
        assert!(gathers_facts(THRESHOLD_US_DEFAULT));
        assert!(!should_record(-1, u64::MAX));
        assert!(should_record(0, 0));
        assert!(should_record(10_000, 10_000));
        assert!(!should_record(10_000, 9_999));
        let log = SlowLog::default();
        assert_eq!(log.threshold_us(), THRESHOLD_US_DEFAULT);
        assert!(!log.is_slow(9_999) && log.is_slow(10_000));
        log.set_threshold_us(-1);
        assert!(!log.is_slow(u64::MAX));
    }

    /// Bounded: never more than `len_max`, the newest kept, newest first,
    /// ids growing by one.
    #[test]
    fn ring_keeps_the_newest_len_max_in_id_order() {
        let mut ring = Counted::new(3);
        for d in 0..5 {
            assert_eq!(ring.push(entry(d)), d);
        }
        assert_eq!(ring.len(), 3);
        let ids: Vec<u64> = ring.newest(10).iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        assert_eq!(ring.newest(1)[0].duration_us, 4);
        assert!(ring.newest(0).is_empty());
        // The default is Redis's.
        assert_eq!(Ring::default().len_max(), LEN_DEFAULT);
    }

    /// The ring overwritten in place against a model (the newest
    /// `len_max` ids, newest first) over a seeded mix of records, capacity
    /// changes up and down, and resets: wrapping, shrinking a wrapped ring
    /// and growing it again keep the newest in order.
    #[test]
    fn ring_matches_a_model_through_wraps_and_resizes() {
        let mut ring = Counted::new(4);
        let mut model: Vec<u64> = Vec::new(); // ids, newest first
        let mut len_max = 4;
        let mut seed = 0x2545_f491_u64;
        for step in 0..2_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            match (seed >> 33) % 20 {
                0 => {
                    len_max = ((seed >> 40) % 7) as usize;
                    ring.set_len_max(len_max).unwrap();
                    model.truncate(len_max);
                }
                1 => {
                    ring.reset();
                    model.clear();
                }
                _ => {
                    let id = ring.push(entry(step));
                    model.insert(0, id);
                    model.truncate(len_max);
                }
            }
            let ids: Vec<u64> = ring.newest(LEN_MAX).iter().map(|e| e.id).collect();
            assert_eq!(ids, model, "step {step}");
        }
    }

    /// The client's address is kept as an address and shown as `ip:port`
    /// when read (`?` when the socket could not say).
    #[test]
    fn client_is_shown_as_ip_port() {
        let mut e = entry(1);
        assert_eq!(e.client_text(), "127.0.0.1:1");
        e.client = Some("[::1]:6379".parse().unwrap());
        assert_eq!(e.client_text(), "[::1]:6379");
        e.client = None;
        assert_eq!(e.client_text(), "?");
    }

    /// A lower max-len drops the oldest at once; past LEN_MAX is refused;
    /// 0 keeps nothing.
    #[test]
    fn max_len_shrinks_at_once_and_is_bounded() {
        let mut ring = Counted::new(5);
        for d in 0..5 {
            ring.push(entry(d));
        }
        ring.set_len_max(2).unwrap();
        let ids: Vec<u64> = ring.newest(10).iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3]);
        assert!(
            ring.set_len_max(LEN_MAX + 1)
                .unwrap_err()
                .contains("over the limit")
        );
        assert_eq!(ring.len_max(), 2);
        ring.set_len_max(LEN_MAX).unwrap();
        ring.set_len_max(0).unwrap();
        ring.push(entry(9));
        assert!(ring.is_empty());
        assert_eq!(Ring::new(LEN_MAX + 5).len_max(), LEN_MAX);
    }

    /// A key is cut at KEY_BYTES_MAX and says how long it was.
    #[test]
    fn key_prefix_is_bounded() {
        let long = vec![b'k'; KEY_BYTES_MAX + 7];
        let p = KeyPrefix::of(&long);
        assert_eq!(p.kept().len(), KEY_BYTES_MAX);
        assert_eq!(p.key_bytes as usize, KEY_BYTES_MAX + 7);
        assert_eq!(KeyPrefix::of(b"ab").kept(), b"ab");
        assert!(KeyPrefix::NONE.kept().is_empty());
    }

    /// Marks become stages: the queue before the replicas were asked,
    /// each answer after it, bounded at REPLICAS_MAX; the slower of two
    /// marks is the one whose last answer came later.
    #[test]
    fn marks_become_stages() {
        use std::time::{Duration, Instant};
        let parsed = Instant::now();
        let asked = parsed + Duration::from_micros(50);
        let mut marks = StageMarks::new(asked);
        marks.answer(2, asked + Duration::from_micros(900));
        marks.answer(0, asked + Duration::from_micros(100));
        for _ in 0..REPLICAS_MAX {
            marks.answer(1, asked + Duration::from_micros(5));
        }
        assert_eq!(marks.answers().len(), REPLICAS_MAX);
        let stages = marks.stages(parsed, |n, s| s.push_str(&format!("node{n}")));
        assert_eq!(stages.queue_us, Some(50));
        assert_eq!(stages.slowest().unwrap().node, "node2");
        assert_eq!(stages.replicas[1].answer_us, 100);
        let quick = StageMarks::new(asked);
        assert_eq!(slower(Some(quick), Some(marks)), Some(marks));
        assert_eq!(slower(Some(marks), Some(quick)), Some(marks));
        assert_eq!(slower(None, Some(quick)), Some(quick));
    }

    /// The JSON names the stages and the slowest replica, and never holds
    /// anything but the key and sizes.
    #[test]
    fn json_names_the_slowest_replica() {
        let log = SlowLog::default();
        let mut e = entry(12_000);
        e.facts = Facts {
            command: "PUT /v0/entity",
            key: KeyPrefix::of(b"user:\"1\""),
            keys: 1,
            value_bytes: 5,
            args: 0,
        };
        e.stages = Stages {
            queue_us: Some(40),
            replicas: vec![
                ReplicaTime {
                    node: "http://a".into(),
                    answer_us: 300,
                },
                ReplicaTime {
                    node: "http://b".into(),
                    answer_us: 11_000,
                },
            ],
        };
        log.record(e);
        let json = render_json(&log, 10);
        assert!(json.starts_with("{\"threshold_us\":10000,\"len\":1,\"len_max\":128,"));
        assert!(json.contains("\"key\":\"user:\\\"1\\\"\""), "{json}");
        assert!(json.contains("\"slowest_replica\":\"http://b\""), "{json}");
        assert!(json.contains("\"queue_us\":40"), "{json}");
        assert!(json.contains("\"value_bytes\":5"), "{json}");
        assert!(json.contains("\"client\":\"127.0.0.1:1\""), "{json}");
        assert_eq!(render_json(&log, 0).matches("\"id\"").count(), 0);
    }
}
