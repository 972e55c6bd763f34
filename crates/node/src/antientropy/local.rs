//! The local engine's side of a session, for both roles: building the
//! trees, scanning digests, reading and applying versions.
//!
//! Everything here reads through `Db::scan` / `Db::get` (the engine's read
//! views: no lock is held against writers) and writes through `Db::write`
//! with `Durability::Complete` (queued to the engine's single writer). Every
//! scanned entry is paid for in the node's token bucket before the next one
//! is read, and the stop flag is checked between batches.
//!
//! Long local work never goes silent: a [`Meter`] made with
//! [`Meter::alive`] tells the other side of the session "still working"
//! (a `KeepAlive` frame) as it goes, even while it sleeps on the token
//! bucket. Long scans re-open the engine's scan after the last key every
//! [`SCAN_REOPEN_BYTES`] or [`SCAN_REOPEN_AFTER`] ([`scan_each`]), so a
//! rate-limited scan does not pin one read view (and the SSTs compaction
//! replaced) for its whole length.

use super::Node;
use super::merkle::{Tree, bucket_of};
use super::scope::{self, NodeSet};
use super::stream::{KeepAlive, SessionError};
use super::wire::{self, BATCH_BYTES_MAX, DIGEST_ENTRIES_MAX, DigestEntry, Message, bitmap_has};
use crate::peer::frame::Stamped;
use crate::peer::refusal::refuse_version;
use crate::version_order::{Tag, VersionRef};
use ataman_engine::{Durability, Entry, WriteBatch};
use std::time::{Duration, Instant};

/// Entries a digest answer scans at most, whatever it finds: a sparse
/// bucket set still answers promptly, with a resume key ("Sync frame").
pub const DIGEST_SCAN_ENTRIES_MAX: usize = 65_536;
/// Bytes (keys, values and [`entry_cost`]'s overhead) a digest answer, or
/// one chunk of the initiator's scan of the same range, scans at most: a
/// page of large values ends early too, with a resume key ("Sync frame").
pub const DIGEST_SCAN_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// A long scan is re-opened after the last key once it scanned this much.
pub const SCAN_REOPEN_BYTES: u64 = 64 * 1024 * 1024;
/// A long scan is re-opened after the last key once it was open this long.
pub const SCAN_REOPEN_AFTER: Duration = Duration::from_secs(5);
/// Token-bucket cost of an entry beyond its key and value bytes (its
/// internal key suffix and block overhead, roughly).
const ENTRY_OVERHEAD_BYTES: u64 = 16;
/// Scanned bytes paid to the token bucket at once (fewer lock round trips).
const RATE_PAYMENT_BYTES: u64 = 256 * 1024;
/// Entries between two checks of the stop flag in a long scan.
const STOP_CHECK_ENTRIES: usize = 1024;
/// In a transition copy's sessions ([`Meter::for_copy`]), a byte read
/// from the engine (scanned for a page or a digest, or read for a fetch)
/// costs this fraction of a byte sent or applied. A policy, not a
/// measured cost: the limit bounds what the copy moves (each source
/// scans its whole store to find its share, three times the share at
/// R = 3, more in a comparing pass); the reads still pay a
/// share, so a comparison that sends little cannot scan unbounded, and
/// their CPU yields to the foreground (`super::priority`)
/// (docs/bench-log/2026-11-26-layout-copy-profile.md).
pub const COPY_READ_COST_DIVISOR: u64 = 16;

/// What the tie rule and the trees see of an engine entry (an expired
/// value comes out of the engine as a tombstone already).
pub fn tag_of(entry: &Entry) -> Tag {
    Tag::of(VersionRef {
        ts: entry.ts,
        value: entry.value.as_deref(),
        expiring: entry.deadline_ms.is_some(),
    })
}

/// The scan cost of one entry in the token bucket.
pub fn entry_cost(key: &[u8], entry: &Entry) -> u64 {
    key.len() as u64 + entry.value.as_ref().map_or(0, |v| v.len() as u64) + ENTRY_OVERHEAD_BYTES
}

/// Pays scanned bytes to the token bucket in chunks and checks the stop
/// flag; made with [`Meter::alive`], it also keeps the session alive.
pub struct Meter<'a> {
    node: &'a Node<'a>,
    owed: u64,
    entries: usize,
    alive: Option<&'a mut (dyn KeepAlive + 'a)>,
    /// A read byte costs `1 / read_divisor` (1, or [`COPY_READ_COST_DIVISOR`]).
    read_divisor: u64,
    /// Read bytes not yet worth one token.
    read_owed: u64,
}

impl<'a> Meter<'a> {
    /// A meter on the node's token bucket.
    pub fn new(node: &'a Node<'a>) -> Self {
        Meter {
            node,
            owed: 0,
            entries: 0,
            alive: None,
            read_divisor: 1,
            read_owed: 0,
        }
    }

    /// This meter, for a transition copy's session: reads cost
    /// [`COPY_READ_COST_DIVISOR`] times less than sent bytes.
    pub fn for_copy(mut self) -> Self {
        self.read_divisor = COPY_READ_COST_DIVISOR;
        self
    }

    /// A meter that also sends `KeepAlive`s on `stream` while it works.
    pub fn alive(node: &'a Node<'a>, stream: &'a mut (dyn KeepAlive + 'a)) -> Self {
        Meter {
            alive: Some(stream),
            ..Meter::new(node)
        }
    }

    /// The node this meter pays for.
    pub fn node(&self) -> &'a Node<'a> {
        self.node
    }

    fn keep_alive(&mut self) -> Result<(), SessionError> {
        match self.alive.as_deref_mut() {
            Some(stream) => stream.keep_alive(),
            None => Ok(()),
        }
    }

    /// Counts `bytes` scanned or sent; may sleep on the token bucket.
    pub fn pay(&mut self, bytes: u64) -> Result<(), SessionError> {
        self.owed += bytes;
        self.entries += 1;
        if self.owed >= RATE_PAYMENT_BYTES {
            self.settle()?;
        }
        if self.entries.is_multiple_of(STOP_CHECK_ENTRIES) {
            if self.node.stopping() {
                return Err(SessionError::Stopped);
            }
            self.keep_alive()?;
        }
        Ok(())
    }

    /// Counts `bytes` read from the engine (scanned or read for a fetch):
    /// [`Meter::pay`] of their cost (see [`Meter::for_copy`]).
    pub fn pay_read(&mut self, bytes: u64) -> Result<(), SessionError> {
        if self.read_divisor <= 1 {
            return self.pay(bytes);
        }
        self.read_owed += bytes;
        let cost = self.read_owed / self.read_divisor;
        self.read_owed %= self.read_divisor;
        self.pay(cost)
    }

    /// Pays what is owed now, in pieces of a quarter second's worth of the
    /// rate (a large value's debt is slept off in slices), keeping the
    /// session alive between pieces.
    pub fn settle(&mut self) -> Result<(), SessionError> {
        let mut owed = std::mem::take(&mut self.owed);
        let node = self.node;
        let piece = (node.antientropy.rate.bytes_per_sec() / 4).max(1);
        while owed > 0 {
            let now = owed.min(piece);
            node.antientropy.rate.take(now, &|| node.stopping())?;
            owed -= now;
            self.keep_alive()?;
        }
        Ok(())
    }
}

/// Pays for `bytes` sent on `stream` (or, by a copy's gaining node,
/// received and applied) at once, keeping the session alive
/// while the token bucket makes this side wait (never silent between frames).
pub fn pay_sent(
    node: &Node<'_>,
    stream: &mut dyn KeepAlive,
    bytes: u64,
) -> Result<(), SessionError> {
    let mut meter = Meter::alive(node, stream);
    meter.pay(bytes)?;
    meter.settle()
}

/// Which keys this node keeps together with a peer (`scope`), computed
/// once per key for every peer at once.
pub struct Scope<'a> {
    seeds: &'a [u64],
    replicas: usize,
    nodes: usize,
    me: usize,
}

impl<'a> Scope<'a> {
    /// This node's scope in `node`'s cluster at its `--replication-factor`.
    pub fn new(node: &'a Node<'a>) -> Self {
        Scope {
            seeds: node.topology.seeds(),
            replicas: node.topology.replication_factor(),
            nodes: node.topology.len(),
            me: node.topology.self_index(),
        }
    }

    /// The nodes keeping `key` when this node is one of them; `None` when it
    /// is not. With R = cluster size every node keeps every key (no ranking).
    pub fn holders(&self, key: &[u8]) -> Option<NodeSet> {
        if self.replicas >= self.nodes {
            let mut all = NodeSet::default();
            for i in 0..self.nodes {
                all.insert(i);
            }
            return Some(all);
        }
        let set = scope::holders(self.seeds, key, self.replicas);
        set.contains(self.me).then_some(set)
    }

    /// True when this node and `peer` both keep `key`.
    pub fn shared_with(&self, key: &[u8], peer: usize) -> bool {
        if self.replicas >= self.nodes {
            return true;
        }
        scope::shared(self.seeds, key, self.replicas, self.me, peer)
    }
}

fn scan_failed(e: impl std::fmt::Display) -> SessionError {
    SessionError::Engine(format!("scan failed: {e}"))
}

/// Calls `f` with every entry in `[start, end)` (tombstones included), in
/// key order, after paying for it with `meter`, until `f` answers false.
/// The engine's scan is re-opened after the last key every
/// [`SCAN_REOPEN_BYTES`] scanned or [`SCAN_REOPEN_AFTER`], so a long scan
/// (slowed by the token bucket, or interleaved with network round trips)
/// holds no read view for long: SSTs that compaction replaced are freed.
pub fn scan_each(
    node: &Node<'_>,
    start: &[u8],
    end: Option<&[u8]>,
    meter: &mut Meter<'_>,
    f: impl FnMut(Vec<u8>, Entry) -> Result<bool, SessionError>,
) -> Result<(), SessionError> {
    scan_each_reopening(node, start, end, meter, SCAN_REOPEN_BYTES, f)
}

/// [`scan_each`], re-opening after `reopen_bytes` (tests use tiny ones).
pub(super) fn scan_each_reopening(
    node: &Node<'_>,
    start: &[u8],
    end: Option<&[u8]>,
    meter: &mut Meter<'_>,
    reopen_bytes: u64,
    mut f: impl FnMut(Vec<u8>, Entry) -> Result<bool, SessionError>,
) -> Result<(), SessionError> {
    let mut from = start.to_vec();
    'open: loop {
        let opened = Instant::now();
        let mut scanned = 0u64;
        for item in node
            .db
            .scan_without_filling(&from, end, true)
            .map_err(scan_failed)?
        {
            let (key, entry) = item.map_err(scan_failed)?;
            let cost = entry_cost(&key, &entry);
            meter.pay_read(cost)?;
            scanned += cost;
            let reopen = scanned >= reopen_bytes || opened.elapsed() >= SCAN_REOPEN_AFTER;
            if reopen {
                from = successor(&key);
            }
            if !f(key, entry)? {
                return Ok(());
            }
            if reopen {
                continue 'open;
            }
        }
        return Ok(());
    }
}

/// One scan of the whole engine: a tree per peer in `peers` over the keys
/// this node keeps with that peer. Returns the trees (finished) and the
/// entries each holds. With `alive`, the other side of that session hears
/// a `KeepAlive` while the scan runs.
pub fn build_trees(
    node: &Node<'_>,
    peers: &[usize],
    depth: u32,
    alive: Option<&mut dyn KeepAlive>,
) -> Result<Vec<(Tree, u64)>, SessionError> {
    let scope = Scope::new(node);
    let mut trees: Vec<(Tree, u64)> = peers.iter().map(|_| (Tree::new(depth), 0)).collect();
    let mut meter = match alive {
        Some(stream) => Meter::alive(node, stream),
        None => Meter::new(node),
    };
    scan_each(node, b"", None, &mut meter, |key, entry| {
        let Some(holders) = scope.holders(&key) else {
            return Ok(true);
        };
        let tag = tag_of(&entry);
        for ((tree, count), &peer) in trees.iter_mut().zip(peers) {
            if holders.contains(peer) {
                tree.add(&key, &tag);
                *count += 1;
            }
        }
        Ok(true)
    })?;
    meter.settle()?;
    for (tree, _) in &mut trees {
        tree.finish();
    }
    Ok(trees)
}

/// The smallest key after `key` (scans start there to resume strictly after it).
pub fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The entries in `(after, last]` (to the end when `last` is `None`) that
/// `wanted` keeps, in key order: at most `entries_max` (and
/// [`DIGEST_ENTRIES_MAX`]) of them, at most [`BATCH_BYTES_MAX`] of keys,
/// after at most [`DIGEST_SCAN_ENTRIES_MAX`] entries or
/// [`DIGEST_SCAN_BYTES_MAX`] examined. The second value is the last key
/// examined when a bound cut the page (resume after it), `None` when the
/// page reaches `last` (or the end).
pub fn page(
    node: &Node<'_>,
    after: Option<&[u8]>,
    last: Option<&[u8]>,
    entries_max: usize,
    meter: &mut Meter<'_>,
    wanted: impl Fn(&[u8]) -> bool,
) -> Result<(Vec<DigestEntry>, Option<Vec<u8>>), SessionError> {
    let entries_max = entries_max.clamp(1, DIGEST_ENTRIES_MAX);
    let start = after.map(successor).unwrap_or_default();
    let end = last.map(successor);
    let mut entries = Vec::new();
    let mut key_bytes = 0usize;
    let mut scanned = 0usize;
    let mut scanned_bytes = 0u64;
    let mut cut = None;
    scan_each(node, &start, end.as_deref(), meter, |key, entry| {
        scanned += 1;
        scanned_bytes += entry_cost(&key, &entry);
        if wanted(&key) {
            key_bytes += key.len();
            entries.push(DigestEntry {
                key: key.clone(),
                tag: tag_of(&entry),
            });
        }
        if entries.len() >= entries_max
            || key_bytes >= BATCH_BYTES_MAX
            || scanned >= DIGEST_SCAN_ENTRIES_MAX
            || scanned_bytes >= DIGEST_SCAN_BYTES_MAX
        {
            cut = Some(key);
            return Ok(false);
        }
        Ok(true)
    })?;
    meter.settle()?;
    Ok((entries, cut))
}

/// One page of a transition source's answer to `Share`.
#[derive(Debug, Default)]
pub struct SharePage {
    /// The share's versions, values included, in key order.
    pub items: Vec<(Vec<u8>, Stamped)>,
    /// The digest of the rest of the scope in the same range.
    pub others: Vec<DigestEntry>,
    /// The last key examined when a bound cut the page (resume after it),
    /// `None` when the page reaches the end.
    pub next: Option<Vec<u8>>,
}

/// The keys in `(after, end]` that `classify` puts in the scope, in key
/// order: `Some(true)` ones (the share) as versions with their values,
/// `Some(false)` ones as digest entries. At most
/// [`wire::SHARE_ITEMS_MAX`] versions, [`DIGEST_ENTRIES_MAX`] entries and
/// [`BATCH_BYTES_MAX`] of keys and values (or the first version alone
/// when it is larger), after at most [`DIGEST_SCAN_ENTRIES_MAX`] entries
/// or [`DIGEST_SCAN_BYTES_MAX`] examined.
pub fn share_page(
    node: &Node<'_>,
    after: Option<&[u8]>,
    meter: &mut Meter<'_>,
    classify: impl Fn(&[u8]) -> Option<bool>,
) -> Result<SharePage, SessionError> {
    let start = after.map(successor).unwrap_or_default();
    let mut page = SharePage::default();
    let mut bytes = 0usize;
    let (mut scanned, mut scanned_bytes) = (0usize, 0u64);
    let mut examined: Option<Vec<u8>> = None;
    scan_each(node, &start, None, meter, |key, entry| {
        scanned += 1;
        scanned_bytes += entry_cost(&key, &entry);
        match classify(&key) {
            Some(true) => {
                let version = Stamped::from_entry(entry);
                let size = version_bytes(&key, &version);
                if (!page.items.is_empty() || !page.others.is_empty())
                    && bytes + size > BATCH_BYTES_MAX
                {
                    // This one starts the next page.
                    page.next = examined.take();
                    return Ok(false);
                }
                bytes += size;
                page.items.push((key.clone(), version));
            }
            Some(false) => {
                bytes += key.len();
                page.others.push(DigestEntry {
                    key: key.clone(),
                    tag: tag_of(&entry),
                });
            }
            None => {}
        }
        if page.items.len() >= wire::SHARE_ITEMS_MAX
            || page.others.len() >= DIGEST_ENTRIES_MAX
            || bytes >= BATCH_BYTES_MAX
            || scanned >= DIGEST_SCAN_ENTRIES_MAX
            || scanned_bytes >= DIGEST_SCAN_BYTES_MAX
        {
            page.next = Some(key);
            return Ok(false);
        }
        examined = Some(key);
        Ok(true)
    })?;
    meter.settle()?;
    Ok(page)
}

/// The responder's answer to a Digest: [`page`] of the entries kept with
/// `peer` in the buckets of `bitmap`, strictly after `after`, to the end
/// of the key space; `next` is the last key examined, or `None` at the
/// end. `stream` hears a `KeepAlive` while the page is scanned.
#[allow(clippy::too_many_arguments)]
pub fn digest_page(
    node: &Node<'_>,
    peer: usize,
    depth: u32,
    bitmap: &[u8],
    after: Option<&[u8]>,
    entries_max: u32,
    stream: &mut dyn KeepAlive,
) -> Result<Message, SessionError> {
    let scope = Scope::new(node);
    let mut meter = Meter::alive(node, stream);
    let (entries, next) = page(node, after, None, entries_max as usize, &mut meter, |key| {
        bitmap_has(bitmap, bucket_of(key, depth)) && scope.shared_with(key, peer)
    })?;
    Ok(Message::DigestPage { entries, next })
}

/// The newest version of `key` here, tombstones included.
pub fn read_version(node: &Node<'_>, key: &[u8]) -> Result<Option<Stamped>, SessionError> {
    node.db
        .get(key)
        .map(|e| e.map(Stamped::from_entry))
        .map_err(|e| SessionError::Engine(format!("read failed: {e}")))
}

/// The bytes a version takes in a batch (for the batch bounds).
pub fn version_bytes(key: &[u8], version: &Stamped) -> usize {
    key.len() + version.value.as_ref().map_or(0, Vec::len) + 16
}

/// The responder's answer to a Fetch: versions of a prefix of `keys`, at
/// most [`BATCH_BYTES_MAX`] of them, or the first one alone when it is
/// larger (so the frame always fits its bound).
pub fn read_versions(
    node: &Node<'_>,
    keys: Vec<Vec<u8>>,
    stream: &mut dyn KeepAlive,
) -> Result<Message, SessionError> {
    read_versions_metered(node, keys, &mut Meter::alive(node, stream))
}

/// [`read_versions`], paying its reads with `meter`.
pub fn read_versions_metered(
    node: &Node<'_>,
    keys: Vec<Vec<u8>>,
    meter: &mut Meter<'_>,
) -> Result<Message, SessionError> {
    let mut items = Vec::with_capacity(keys.len());
    let mut bytes = 0usize;
    for key in keys {
        let version = read_version(node, &key)?;
        let size = version
            .as_ref()
            .map_or(key.len(), |v| version_bytes(&key, v));
        // One version alone always fits a frame; with others, only within
        // the batch bound (so a huge value never joins a full batch).
        if !items.is_empty() && bytes + size > BATCH_BYTES_MAX {
            break;
        }
        meter.pay_read(size as u64)?;
        bytes += size;
        items.push((key, version));
    }
    meter.settle()?;
    Ok(Message::Versions { items })
}

/// Versions left out of a write, each with why.
pub type Refused = Vec<(Vec<u8>, String)>;

/// Applies versions received from a peer with one durable write: every
/// version is checked first (`refuse_version`: key and value limits, a
/// timestamp not far ahead of this node's clock); refused ones are left
/// out and returned with the reason. The clock observes every applied
/// timestamp. A version that does not win over the one held here by the
/// one tie rule (`crate::version_order`: older, or a loser under the same
/// timestamp) is accepted and not written, so a late or racing push never
/// replaces the winner (the engine alone would keep the later of two
/// values under one timestamp). Returns `(applied, refused)`.
pub fn apply(
    node: &Node<'_>,
    items: Vec<(Vec<u8>, Stamped)>,
) -> Result<(u64, Refused), SessionError> {
    let accepted = items.len();
    let applied = apply_counted(node, items)?;
    Ok(((accepted - applied.refused.len()) as u64, applied.refused))
}

/// What [`apply_counted`] did with each version.
#[derive(Debug, Default)]
pub struct Applied {
    /// Versions written (they won over what was held, or nothing was).
    pub written: u64,
    /// Versions accepted and not written: what is held here wins.
    pub held_newer: u64,
    /// Versions refused, with why.
    pub refused: Refused,
}

/// [`apply`], counting the versions written apart from those a newer
/// held version made moot (a restore's summary reports both).
pub fn apply_counted(
    node: &Node<'_>,
    items: Vec<(Vec<u8>, Stamped)>,
) -> Result<Applied, SessionError> {
    let accepted = items.len() as u64;
    let mut winners = Vec::with_capacity(items.len());
    for (key, version) in items {
        if read_version(node, &key)?.is_none_or(|held| version.newer_than(&held)) {
            winners.push((key, version));
        }
    }
    let candidates = winners.len() as u64;
    let (batch, refused) = checked_batch(node, winners);
    if !batch.is_empty() {
        write_durably(node, batch)?;
    }
    let written = candidates - refused.len() as u64;
    Ok(Applied {
        written,
        held_newer: accepted - candidates,
        refused,
    })
}

/// [`apply`] for versions in strictly increasing key order (a transition
/// copy's pass): they are ingested, written straight to tables of the
/// deepest level free for their keys (`ataman_engine::Db::ingest`: no WAL,
/// no memtable, no compactions to carry them down), or written as
/// [`apply`] does when no level is free.
pub fn ingest(
    node: &Node<'_>,
    items: Vec<(Vec<u8>, Stamped)>,
) -> Result<(u64, Refused), SessionError> {
    let (batch, refused) = checked_batch(node, items);
    let applied = batch.len() as u64;
    if applied == 0 {
        return Ok((0, refused));
    }
    let ingested = node
        .db
        .ingest(&batch)
        .map_err(|e| SessionError::Engine(format!("ingest failed: {e}")))?;
    if ingested.is_none() {
        write_durably(node, batch)?;
    }
    Ok((applied, refused))
}

/// The versions of `items` this node accepts (`refuse_version`), as one
/// batch in their order, and the others with why; the clock observes
/// every accepted timestamp.
fn checked_batch(node: &Node<'_>, items: Vec<(Vec<u8>, Stamped)>) -> (WriteBatch, Refused) {
    let mut batch = WriteBatch::new();
    let mut refused = Vec::new();
    let mut ts_max = 0;
    for (key, version) in items {
        if let Some(why) = refuse_version(node.config, &key, &version) {
            refused.push((key, why));
            continue;
        }
        version.add_to(&mut batch, &key);
        ts_max = ts_max.max(version.ts);
    }
    if !batch.is_empty() {
        node.hlc.observe(ts_max);
    }
    (batch, refused)
}

fn write_durably(node: &Node<'_>, batch: WriteBatch) -> Result<(), SessionError> {
    node.db
        .write(batch, Durability::Complete)
        .map(|_| ())
        .map_err(|e| SessionError::Engine(format!("write failed: {e}")))
}

/// Refused versions of a whole session: how many, and why the first was
/// (not every key: a session may refuse millions).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Refusals {
    /// Versions refused.
    pub count: u64,
    /// The first refused version's key and reason.
    pub first: Option<String>,
}

impl Refusals {
    /// Counts a batch's refused versions (keeps the first reason seen).
    pub fn add(&mut self, refused: &[(Vec<u8>, String)]) {
        if let (None, Some((key, why))) = (&self.first, refused.first()) {
            self.first = Some(wire::cut_message(format!(
                "key {:?}: {why}",
                String::from_utf8_lossy(&key[..key.len().min(64)])
            )));
        }
        self.count += refused.len() as u64;
    }

    /// Counts `count` versions refused elsewhere, the first for `why`.
    pub fn add_count(&mut self, count: u64, why: &str) {
        if count > 0 && self.first.is_none() {
            self.first = Some(why.to_string());
        }
        self.count += count;
    }

    /// `N version(s) refused; first: …`, empty when none.
    pub fn text(&self) -> String {
        match &self.first {
            None if self.count == 0 => String::new(),
            first => format!(
                "{} version(s) refused; first: {}",
                self.count,
                first.as_deref().unwrap_or("?")
            ),
        }
    }
}

/// Checks that `msg` is the answer kind the initiator waits for.
pub fn unexpected(msg: &Message, wanted: &str) -> SessionError {
    match msg {
        Message::Error { message } => SessionError::Refused(message.clone()),
        other => SessionError::Protocol(format!("expected {wanted}, got {}", kind_name(other))),
    }
}

/// A message's kind, for errors.
pub fn kind_name(msg: &Message) -> &'static str {
    match msg {
        Message::Hello { .. } => "Hello",
        Message::Welcome { .. } => "Welcome",
        Message::TreeNodes { .. } => "TreeNodes",
        Message::Hashes { .. } => "Hashes",
        Message::Digest { .. } => "Digest",
        Message::DigestPage { .. } => "DigestPage",
        Message::Fetch { .. } => "Fetch",
        Message::Versions { .. } => "Versions",
        Message::Push { .. } => "Push",
        Message::PushAck { .. } => "PushAck",
        Message::Error { .. } => "Error",
        Message::KeepAlive => "KeepAlive",
        Message::Transition { .. } => "Transition",
        Message::TransitionWelcome { .. } => "TransitionWelcome",
        Message::Share { .. } => "Share",
        Message::SharePage { .. } => "SharePage",
    }
}

/// The wire's `wire::error_message` for a session error.
pub fn error_frame(e: &SessionError) -> Message {
    wire::error_message(e.to_string())
}
