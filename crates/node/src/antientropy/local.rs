//! The local engine's side of a session, for both roles: building the
//! trees, scanning digests, reading and applying versions.
//!
//! Everything here reads through `Db::scan` / `Db::get` (the engine's read
//! views: no lock is held against writers) and writes through `Db::write`
//! with `Durability::Complete` (queued to the engine's single writer). Every
//! scanned entry is paid for in the node's token bucket before the next one
//! is read, and the stop flag is checked between batches.

use super::merkle::{Tree, bucket_of};
use super::scope::{self, NodeSet};
use super::stream::SessionError;
use super::wire::{self, BATCH_BYTES_MAX, DIGEST_ENTRIES_MAX, DigestEntry, Message, bitmap_has};
use crate::net::NodeShared;
use crate::peer::frame::Version;
use crate::peer::server::refuse_version;
use ataman_engine::{Durability, Entry, WriteBatch};

/// Entries a digest answer scans at most, whatever it finds: a sparse
/// bucket set still answers promptly, with a resume key ("Sync frame").
pub const DIGEST_SCAN_ENTRIES_MAX: usize = 65_536;
/// Token-bucket cost of an entry beyond its key and value bytes (its
/// internal key suffix and block overhead, roughly).
const ENTRY_OVERHEAD_BYTES: u64 = 16;
/// Scanned bytes paid to the token bucket at once (fewer lock round trips).
const RATE_PAYMENT_BYTES: u64 = 256 * 1024;
/// Entries between two checks of the stop flag in a long scan.
const STOP_CHECK_ENTRIES: usize = 1024;

/// The scan cost of one entry in the token bucket.
pub fn entry_cost(key: &[u8], entry: &Entry) -> u64 {
    key.len() as u64 + entry.value.as_ref().map_or(0, |v| v.len() as u64) + ENTRY_OVERHEAD_BYTES
}

/// Pays scanned bytes to the token bucket in chunks and checks the stop flag.
pub struct Meter<'a> {
    shared: &'a NodeShared,
    owed: u64,
    entries: usize,
}

impl<'a> Meter<'a> {
    /// A meter on the node's token bucket.
    pub fn new(shared: &'a NodeShared) -> Self {
        Meter {
            shared,
            owed: 0,
            entries: 0,
        }
    }

    /// Counts `bytes` scanned or sent; may sleep on the token bucket.
    pub fn pay(&mut self, bytes: u64) -> Result<(), SessionError> {
        self.owed += bytes;
        self.entries += 1;
        if self.owed >= RATE_PAYMENT_BYTES {
            self.settle()?;
        }
        if self.entries.is_multiple_of(STOP_CHECK_ENTRIES) && self.shared.stopping() {
            return Err(SessionError::Stopped);
        }
        Ok(())
    }

    /// Pays what is owed now.
    pub fn settle(&mut self) -> Result<(), SessionError> {
        let owed = std::mem::take(&mut self.owed);
        if owed > 0 {
            let shared = self.shared;
            shared.antientropy.rate.take(owed, &|| shared.stopping())?;
        }
        Ok(())
    }
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
    /// This node's scope in `shared`'s cluster at its `--replication-factor`.
    pub fn new(shared: &'a NodeShared) -> Self {
        Scope {
            seeds: shared.topology.seeds(),
            replicas: shared.config.replication_factor,
            nodes: shared.topology.len(),
            me: shared.topology.self_index(),
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

/// One scan of the whole engine: a tree per peer in `peers` over the keys
/// this node keeps with that peer. Returns the trees (finished) and the
/// entries each holds.
pub fn build_trees(
    shared: &NodeShared,
    peers: &[usize],
    depth: u32,
) -> Result<Vec<(Tree, u64)>, SessionError> {
    let scope = Scope::new(shared);
    let mut trees: Vec<(Tree, u64)> = peers.iter().map(|_| (Tree::new(depth), 0)).collect();
    let mut meter = Meter::new(shared);
    let scan = shared
        .db
        .scan(b"", None, true)
        .map_err(|e| SessionError::Engine(format!("scan failed: {e}")))?;
    for item in scan {
        let (key, entry) = item.map_err(|e| SessionError::Engine(format!("scan failed: {e}")))?;
        meter.pay(entry_cost(&key, &entry))?;
        let Some(holders) = scope.holders(&key) else {
            continue;
        };
        for ((tree, count), &peer) in trees.iter_mut().zip(peers) {
            if holders.contains(peer) {
                tree.add(&key, entry.ts, entry.value.is_none());
                *count += 1;
            }
        }
    }
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

/// The responder's answer to a Digest: the entries kept with `peer` in the
/// buckets of `bitmap`, in key order, strictly after `after`; at most
/// `entries_max` (and [`DIGEST_ENTRIES_MAX`]) of them, at most
/// [`BATCH_BYTES_MAX`] of keys, and at most [`DIGEST_SCAN_ENTRIES_MAX`]
/// entries examined. `next` is the last key examined, or `None` at the end.
pub fn digest_page(
    shared: &NodeShared,
    peer: usize,
    depth: u32,
    bitmap: &[u8],
    after: Option<&[u8]>,
    entries_max: u32,
) -> Result<Message, SessionError> {
    let scope = Scope::new(shared);
    let entries_max = (entries_max as usize).clamp(1, DIGEST_ENTRIES_MAX);
    let start = after.map(successor).unwrap_or_default();
    let scan = shared
        .db
        .scan(&start, None, true)
        .map_err(|e| SessionError::Engine(format!("scan failed: {e}")))?;
    let mut meter = Meter::new(shared);
    let mut entries = Vec::new();
    let mut key_bytes = 0usize;
    let mut scanned = 0usize;
    for item in scan {
        let (key, entry) = item.map_err(|e| SessionError::Engine(format!("scan failed: {e}")))?;
        meter.pay(entry_cost(&key, &entry))?;
        scanned += 1;
        if bitmap_has(bitmap, bucket_of(&key, depth)) && scope.shared_with(&key, peer) {
            key_bytes += key.len();
            entries.push(DigestEntry {
                key: key.clone(),
                ts: entry.ts,
                tombstone: entry.value.is_none(),
            });
        }
        if entries.len() >= entries_max
            || key_bytes >= BATCH_BYTES_MAX
            || scanned >= DIGEST_SCAN_ENTRIES_MAX
        {
            meter.settle()?;
            return Ok(Message::DigestPage {
                entries,
                next: Some(key),
            });
        }
    }
    meter.settle()?;
    Ok(Message::DigestPage {
        entries,
        next: None,
    })
}

/// The newest version of `key` here, tombstones included.
pub fn read_version(shared: &NodeShared, key: &[u8]) -> Result<Option<Version>, SessionError> {
    shared
        .db
        .get(key)
        .map(|e| {
            e.map(|e| Version {
                ts: e.ts,
                value: e.value,
            })
        })
        .map_err(|e| SessionError::Engine(format!("read failed: {e}")))
}

/// The bytes a version takes in a batch (for the batch bounds).
pub fn version_bytes(key: &[u8], version: &Version) -> usize {
    key.len() + version.value.as_ref().map_or(0, Vec::len) + 16
}

/// The responder's answer to a Fetch: versions of a prefix of `keys`, at
/// most [`BATCH_BYTES_MAX`] of them (and at least one).
pub fn read_versions(shared: &NodeShared, keys: Vec<Vec<u8>>) -> Result<Message, SessionError> {
    let mut meter = Meter::new(shared);
    let mut items = Vec::with_capacity(keys.len());
    let mut bytes = 0usize;
    for key in keys {
        if bytes >= BATCH_BYTES_MAX {
            break;
        }
        let version = read_version(shared, &key)?;
        let size = version
            .as_ref()
            .map_or(key.len(), |v| version_bytes(&key, v));
        meter.pay(size as u64)?;
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
/// timestamp. Returns `(applied, refused)`.
pub fn apply(
    shared: &NodeShared,
    items: Vec<(Vec<u8>, Version)>,
) -> Result<(u64, Refused), SessionError> {
    let mut batch = WriteBatch::new();
    let mut refused = Vec::new();
    let mut ts_max = 0;
    for (key, version) in items {
        if let Some(why) = refuse_version(&shared.config, &key, &version) {
            refused.push((key, why));
            continue;
        }
        match &version.value {
            Some(value) => batch.put(&key, value, version.ts),
            None => batch.delete(&key, version.ts),
        };
        ts_max = ts_max.max(version.ts);
    }
    let applied = batch.len() as u64;
    if applied > 0 {
        shared.hlc.observe(ts_max);
        shared
            .db
            .write(batch, Durability::Complete)
            .map_err(|e| SessionError::Engine(format!("write failed: {e}")))?;
    }
    Ok((applied, refused))
}

/// A wire message naming the first refused version.
pub fn refusal_text(refused: &[(Vec<u8>, String)]) -> String {
    match refused.first() {
        None => String::new(),
        Some((key, why)) => format!(
            "{} version(s) refused; first: key {:?}: {why}",
            refused.len(),
            String::from_utf8_lossy(&key[..key.len().min(64)])
        ),
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
    }
}

/// The wire's `wire::error_message` for a session error.
pub fn error_frame(e: &SessionError) -> Message {
    wire::error_message(e.to_string())
}
