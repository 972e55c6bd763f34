//! The sync protocol's frames: what two replicas exchange in an
//! anti-entropy session (`docs/FORMAT.md`, section "Sync frame").
//!
//! A session is a connection upgraded with `Upgrade: ataman-sync/1` on the
//! node's one port. The initiator sends a request, waits for its answer,
//! sends the next: strictly one request in flight, so there are no request
//! ids. Frames are framed like peer frames (`crate::peer::framing`: length,
//! CRC32C, body); the body is a kind byte and the kind's fields.
//!
//! [`encode`] and [`decode`] are pure over bytes, so the fuzz target
//! (`fuzz/fuzz_targets/sync_frame.rs`) and the tests call exactly what the
//! sessions call. Every count and length is checked against its bound and
//! against what is left of the body before anything is allocated or
//! sliced: no input makes the decoder panic.

use super::merkle::{DEPTH_MAX, kind_byte, kind_of_byte};
use crate::cluster::layout::{LAYOUT_BYTES_MAX, Layout};
use crate::peer::frame::{Stamped, put_stamped, stamped};
use crate::peer::framing::{self, Cursor, FramingError, put_bytes};
use crate::version_order::Tag;
use ataman_engine::key::{KEY_BYTES_MAX, VALUE_BYTES_MAX};

/// The protocol version a Hello or a Transition carries; a node refuses
/// any other ("Sync frame"). 2: digest entries carry the kind and the
/// value digest, and tree leaves hash them (version 1 had a tombstone flag
/// and hashed no value).
pub const VERSION: u32 = 2;

/// Largest frame body: one key and value at their engine bounds plus
/// fields, as for peer frames ("Sync frame").
pub const FRAME_BODY_BYTES_MAX: usize = KEY_BYTES_MAX + VALUE_BYTES_MAX + 64;
/// Longest node URL in a Hello or Welcome, bytes.
pub const URL_BYTES_MAX: usize = 1024;
/// Longest error message, bytes.
pub const MESSAGE_BYTES_MAX: usize = 1024;
/// Most tree node indexes in one TreeNodes request (and hashes in its answer).
pub const TREE_NODES_PER_REQUEST_MAX: usize = 4096;
/// Largest bucket bitmap of a Digest: one bit per leaf of the deepest tree.
pub const BUCKET_BITMAP_BYTES_MAX: usize = (1 << DEPTH_MAX) / 8;
/// Most entries in one DigestPage.
pub const DIGEST_ENTRIES_MAX: usize = 4096;
/// Most keys in one Fetch (and versions in its answer).
pub const FETCH_KEYS_MAX: usize = 1024;
/// Most versions in one Push.
pub const PUSH_ITEMS_MAX: usize = 4096;
/// The bytes of keys (and values) the sender puts in one DigestPage,
/// Versions or Push before it stops adding; a single item may exceed it.
pub const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most versions in one SharePage.
pub const SHARE_ITEMS_MAX: usize = 4096;
/// A `Transition`'s depth: transition sessions compare no trees (under
/// writes every bucket differs, so a tree only adds a scan). The
/// responder answers at once and refuses TreeNodes; the initiator pages
/// the digest of every bucket of depth `merkle::DEPTH`, or the versions of
/// the responder's share.
pub const NO_TREE_DEPTH: u32 = 0;

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_TREE_NODES: u8 = 3;
const KIND_HASHES: u8 = 4;
const KIND_DIGEST: u8 = 5;
const KIND_DIGEST_PAGE: u8 = 6;
const KIND_FETCH: u8 = 7;
const KIND_VERSIONS: u8 = 8;
const KIND_PUSH: u8 = 9;
const KIND_PUSH_ACK: u8 = 10;
const KIND_ERROR: u8 = 11;
const KIND_KEEP_ALIVE: u8 = 12;
const KIND_TRANSITION: u8 = 13;
const KIND_TRANSITION_WELCOME: u8 = 14;
const KIND_SHARE: u8 = 15;
const KIND_SHARE_PAGE: u8 = 16;
/// A SharePage's `next` flag: the page's last key (0: none, 1: a key follows).
const NEXT_IS_LAST_KEY: u8 = 2;

/// Bytes of one digest entry after its key: ts (8), kind (1), digest (8).
const DIGEST_ENTRY_FIXED_BYTES: usize = 17;

/// One key's newest version in a digest: enough to compare by the tie
/// rule (`crate::version_order::Tag`), not the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestEntry {
    /// The key.
    pub key: Vec<u8>,
    /// Its newest version's timestamp, kind and value digest.
    pub tag: Tag,
}

/// One message of the sync protocol. Requests go from the initiator to
/// the responder; each gets exactly one answer (or [`Message::Error`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Request: open a session. Refused unless every field matches the responder's.
    Hello {
        /// [`VERSION`].
        version: u32,
        /// The initiator's own URL, as in `--cluster`.
        url: String,
        /// The initiator's `--replication-factor`.
        replicas: u32,
        /// Depth of the trees to compare.
        depth: u32,
        /// `xxh3_64` of the sorted cluster URL list (see `fingerprint`).
        fingerprint: u64,
    },
    /// Answer to Hello: the responder built its tree of the keys both keep.
    Welcome {
        /// [`VERSION`].
        version: u32,
        /// The responder's own URL.
        url: String,
        /// Keys (tombstones included) in the responder's tree.
        entries: u64,
    },
    /// Request: the hashes of these nodes of the responder's tree.
    TreeNodes {
        /// Tree level (0 = root).
        level: u32,
        /// Node indexes within the level.
        indexes: Vec<u32>,
    },
    /// Answer to TreeNodes: one hash per index, in order.
    Hashes {
        /// The hashes.
        hashes: Vec<u64>,
    },
    /// Request: the next page of the digest of the keys in these buckets.
    Digest {
        /// Bit `b` (byte `b / 8`, bit `b % 8`, LSB first) set: bucket `b` wanted.
        buckets: Vec<u8>,
        /// Resume strictly after this key (`None`: from the first key).
        after: Option<Vec<u8>>,
        /// Most entries wanted in the answer.
        entries_max: u32,
    },
    /// Answer to Digest: every wanted key in `(after, next]` (or to the end).
    DigestPage {
        /// The entries, in key order.
        entries: Vec<DigestEntry>,
        /// The last key the responder examined (resume after it), or
        /// `None`: the page reaches the end of the key space.
        next: Option<Vec<u8>>,
    },
    /// Request: the newest versions of these keys.
    Fetch {
        /// The keys.
        keys: Vec<Vec<u8>>,
    },
    /// Answer to Fetch: versions of a prefix of the keys asked for, in order
    /// (the initiator asks again for the rest); `None`: no version at all.
    Versions {
        /// `(key, version)` pairs.
        items: Vec<(Vec<u8>, Option<Stamped>)>,
    },
    /// Request: apply these versions durably.
    Push {
        /// `(key, version)` pairs.
        items: Vec<(Vec<u8>, Stamped)>,
    },
    /// Answer to Push: every version not refused is durable (or older
    /// than what the responder has); the session goes on either way.
    PushAck {
        /// Versions applied.
        applied: u32,
        /// Versions refused (over the responder's limits, too far ahead of its clock).
        refused: u32,
        /// Why the first refused version was refused (empty when none), at
        /// most [`MESSAGE_BYTES_MAX`] bytes.
        first_refusal: String,
    },
    /// Answer to anything: the request was refused; the session ends.
    Error {
        /// Why, at most [`MESSAGE_BYTES_MAX`] bytes.
        message: String,
    },
    /// Either direction, while the sender works before its next request
    /// or answer (a long scan, a rate-limited page): "still here". The
    /// receiver skips it; it only restarts the receiver's silence timeout.
    KeepAlive,
    /// Request: open a transition session instead of a Hello: the
    /// initiator (`url`) gains keys going from layout `old` to `new` and
    /// pulls those the responder holds a replica of in `old`
    /// (`super::transfer::scope`). Answered [`Message::TransitionWelcome`].
    Transition {
        /// [`VERSION`].
        version: u32,
        /// The initiator's own URL: the gaining node, a member of `new`.
        url: String,
        /// Depth of the trees to compare; [`NO_TREE_DEPTH`]: none.
        depth: u32,
        /// The layout being left.
        old: Layout,
        /// The layout being entered (`old.version + 1`).
        new: Layout,
    },
    /// Answer to Transition: the session is open.
    TransitionWelcome {
        /// [`VERSION`].
        version: u32,
        /// The responder's own URL.
        url: String,
        /// Keys (tombstones included) of the initiator's copy the
        /// responder holds as their first old replica (its share),
        /// estimated from the responder's store size and a sample of the
        /// placement: progress figures, not a bound.
        entries: u64,
        /// Their key and value bytes, estimated the same way.
        bytes: u64,
    },
    /// Request (transition sessions only): the next page of the
    /// responder's scope of the initiator's copy: the versions of its
    /// share, the digest of the rest.
    Share {
        /// Resume strictly after this key (`None`: from the first key).
        after: Option<Vec<u8>>,
    },
    /// Answer to Share: every key of the scope in `(after, next]` (or to
    /// the end), in key order: the share's as versions with their values,
    /// the others as digest entries; at most [`SHARE_ITEMS_MAX`] versions,
    /// [`DIGEST_ENTRIES_MAX`] digest entries and [`BATCH_BYTES_MAX`] of
    /// keys and values (or one larger version alone).
    SharePage {
        /// `(key, version)` pairs of the share, tombstones included.
        items: Vec<(Vec<u8>, Stamped)>,
        /// The rest of the scope in the same range.
        others: Vec<DigestEntry>,
        /// The last key the responder examined (resume after it), or
        /// `None`: the page reaches the end of the key space.
        next: Option<Vec<u8>>,
    },
}

/// Why bytes are not a sync frame. Every error ends the session.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SyncFrameError {
    /// The header announces a body over [`FRAME_BODY_BYTES_MAX`].
    #[error("sync frame body of {len} bytes over the limit of {max}")]
    TooLarge {
        /// The announced body length, bytes.
        len: usize,
        /// The limit, bytes.
        max: usize,
    },
    /// The body's CRC32C is not the one in the header.
    #[error("sync frame checksum mismatch: header says {expected:#010x}, body has {found:#010x}")]
    ChecksumMismatch {
        /// The checksum in the header.
        expected: u32,
        /// The checksum of the body received.
        found: u32,
    },
    /// The body does not decode; the text names the field.
    #[error("malformed sync frame: {0}")]
    Malformed(String),
    /// The kind byte is none of the known kinds.
    #[error("unknown sync frame kind {0}")]
    UnknownKind(u8),
}

impl From<FramingError> for SyncFrameError {
    fn from(e: FramingError) -> Self {
        match e {
            FramingError::TooLarge { len, max } => SyncFrameError::TooLarge { len, max },
            FramingError::ChecksumMismatch { expected, found } => {
                SyncFrameError::ChecksumMismatch { expected, found }
            }
        }
    }
}

/// Cuts `message` at a character boundary to [`MESSAGE_BYTES_MAX`] bytes.
pub fn error_message(message: impl Into<String>) -> Message {
    Message::Error {
        message: cut_message(message.into()),
    }
}

/// `message` cut at a character boundary to [`MESSAGE_BYTES_MAX`] bytes.
pub fn cut_message(mut message: String) -> String {
    if message.len() > MESSAGE_BYTES_MAX {
        let mut end = MESSAGE_BYTES_MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

/// The cluster fingerprint a Hello carries: `xxh3_64` of the cluster's
/// URLs, sorted, each followed by `\n`. Placement does not depend on the
/// order of `--cluster`, so neither does the fingerprint.
pub fn fingerprint(nodes: &[String]) -> u64 {
    let mut sorted: Vec<&str> = nodes.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let mut text = String::new();
    for url in sorted {
        text.push_str(url);
        text.push('\n');
    }
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// The fingerprint a session's Hello carries: the read layout's members
/// (any order) and its version, so two nodes compare only under the same
/// layout version.
pub fn layout_fingerprint(nodes: &[String], version: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(&fingerprint(nodes).to_le_bytes(), version)
}

/// The number of bytes a bitmap of `depth`'s buckets has.
pub fn bitmap_bytes(depth: u32) -> usize {
    (1usize << depth).div_ceil(8)
}

/// True when bucket `b` is set in `bitmap` (false past its end).
pub fn bitmap_has(bitmap: &[u8], b: u32) -> bool {
    bitmap
        .get(b as usize / 8)
        .is_some_and(|byte| byte & (1 << (b % 8)) != 0)
}

/// A bitmap of `depth`'s buckets with `buckets` set.
pub fn bitmap_of(depth: u32, buckets: &[u32]) -> Vec<u8> {
    let mut bitmap = vec![0u8; bitmap_bytes(depth)];
    for &b in buckets {
        bitmap[b as usize / 8] |= 1 << (b % 8);
    }
    bitmap
}

/// Appends one frame holding `msg` to `out`.
///
/// The caller keeps every bound (counts, URL and message lengths, keys and
/// values at the engine's bounds, batches at [`BATCH_BYTES_MAX`] or one
/// item); they are debug-asserted here and checked by [`decode`].
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    let start = framing::begin(out);
    match msg {
        Message::Hello {
            version,
            url,
            replicas,
            depth,
            fingerprint,
        } => {
            out.push(KIND_HELLO);
            out.extend_from_slice(&version.to_le_bytes());
            put_text(out, url, URL_BYTES_MAX);
            out.extend_from_slice(&replicas.to_le_bytes());
            out.extend_from_slice(&depth.to_le_bytes());
            out.extend_from_slice(&fingerprint.to_le_bytes());
        }
        Message::Welcome {
            version,
            url,
            entries,
        } => {
            out.push(KIND_WELCOME);
            out.extend_from_slice(&version.to_le_bytes());
            put_text(out, url, URL_BYTES_MAX);
            out.extend_from_slice(&entries.to_le_bytes());
        }
        Message::TreeNodes { level, indexes } => {
            debug_assert!(indexes.len() <= TREE_NODES_PER_REQUEST_MAX);
            out.push(KIND_TREE_NODES);
            out.extend_from_slice(&level.to_le_bytes());
            put_count(out, indexes.len());
            for i in indexes {
                out.extend_from_slice(&i.to_le_bytes());
            }
        }
        Message::Hashes { hashes } => {
            debug_assert!(hashes.len() <= TREE_NODES_PER_REQUEST_MAX);
            out.push(KIND_HASHES);
            put_count(out, hashes.len());
            for h in hashes {
                out.extend_from_slice(&h.to_le_bytes());
            }
        }
        Message::Digest {
            buckets,
            after,
            entries_max,
        } => {
            debug_assert!(buckets.len() <= BUCKET_BITMAP_BYTES_MAX);
            out.push(KIND_DIGEST);
            out.extend_from_slice(&entries_max.to_le_bytes());
            put_optional_key(out, after.as_deref());
            put_bytes(out, buckets);
        }
        Message::DigestPage { entries, next } => {
            debug_assert!(entries.len() <= DIGEST_ENTRIES_MAX);
            out.push(KIND_DIGEST_PAGE);
            put_digest_entries(out, entries);
            put_optional_key(out, next.as_deref());
        }
        Message::Fetch { keys } => {
            debug_assert!(keys.len() <= FETCH_KEYS_MAX);
            out.push(KIND_FETCH);
            put_count(out, keys.len());
            for k in keys {
                put_key(out, k);
            }
        }
        Message::Versions { items } => {
            debug_assert!(items.len() <= FETCH_KEYS_MAX);
            out.push(KIND_VERSIONS);
            put_count(out, items.len());
            for (k, v) in items {
                put_key(out, k);
                match v {
                    None => out.push(0),
                    Some(v) => {
                        out.push(1);
                        put_stamped(out, v);
                    }
                }
            }
        }
        Message::Push { items } => {
            debug_assert!(items.len() <= PUSH_ITEMS_MAX);
            out.push(KIND_PUSH);
            put_versions(out, items);
        }
        Message::PushAck {
            applied,
            refused,
            first_refusal,
        } => {
            out.push(KIND_PUSH_ACK);
            out.extend_from_slice(&applied.to_le_bytes());
            out.extend_from_slice(&refused.to_le_bytes());
            put_text(out, first_refusal, MESSAGE_BYTES_MAX);
        }
        Message::Error { message } => {
            out.push(KIND_ERROR);
            put_text(out, message, MESSAGE_BYTES_MAX);
        }
        Message::KeepAlive => out.push(KIND_KEEP_ALIVE),
        Message::Transition {
            version,
            url,
            depth,
            old,
            new,
        } => {
            out.push(KIND_TRANSITION);
            out.extend_from_slice(&version.to_le_bytes());
            put_text(out, url, URL_BYTES_MAX);
            out.extend_from_slice(&depth.to_le_bytes());
            put_bytes(out, &old.encode());
            put_bytes(out, &new.encode());
        }
        Message::TransitionWelcome {
            version,
            url,
            entries,
            bytes,
        } => {
            out.push(KIND_TRANSITION_WELCOME);
            out.extend_from_slice(&version.to_le_bytes());
            put_text(out, url, URL_BYTES_MAX);
            out.extend_from_slice(&entries.to_le_bytes());
            out.extend_from_slice(&bytes.to_le_bytes());
        }
        Message::Share { after } => {
            out.push(KIND_SHARE);
            put_optional_key(out, after.as_deref());
        }
        Message::SharePage {
            items,
            others,
            next,
        } => {
            debug_assert!(items.len() <= SHARE_ITEMS_MAX);
            debug_assert!(others.len() <= DIGEST_ENTRIES_MAX);
            out.push(KIND_SHARE_PAGE);
            put_versions(out, items);
            put_digest_entries(out, others);
            // `next` is usually the page's last key: said with a flag, so a
            // page of one version at the engine's bounds fits the frame.
            match next {
                Some(k) if page_last_key(items, others) == Some(k.as_slice()) => {
                    out.push(NEXT_IS_LAST_KEY)
                }
                _ => put_optional_key(out, next.as_deref()),
            }
        }
    }
    framing::seal(out, start, FRAME_BODY_BYTES_MAX);
}

fn put_versions(out: &mut Vec<u8>, items: &[(Vec<u8>, Stamped)]) {
    put_count(out, items.len());
    for (k, v) in items {
        put_key(out, k);
        put_stamped(out, v);
    }
}

fn put_digest_entries(out: &mut Vec<u8>, entries: &[DigestEntry]) {
    put_count(out, entries.len());
    for e in entries {
        put_key(out, &e.key);
        out.extend_from_slice(&e.tag.ts.to_le_bytes());
        out.push(kind_byte(e.tag.kind));
        out.extend_from_slice(&e.tag.digest.to_le_bytes());
    }
}

/// The largest key of a share page (both lists are in key order).
fn page_last_key<'a>(
    items: &'a [(Vec<u8>, Stamped)],
    others: &'a [DigestEntry],
) -> Option<&'a [u8]> {
    let item = items.last().map(|(k, _)| k.as_slice());
    let other = others.last().map(|e| e.key.as_slice());
    item.max(other)
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    debug_assert!(key.len() <= KEY_BYTES_MAX, "key over KEY_BYTES_MAX");
    put_bytes(out, key);
}

fn put_text(out: &mut Vec<u8>, text: &str, max: usize) {
    debug_assert!(text.len() <= max, "text over {max} bytes");
    put_bytes(out, text.as_bytes());
}

fn put_optional_key(out: &mut Vec<u8>, key: Option<&[u8]>) {
    match key {
        None => out.push(0),
        Some(k) => {
            out.push(1);
            put_key(out, k);
        }
    }
}

/// Decodes the first frame in `buf`: `Ok(None)` while incomplete, else the
/// message and the bytes it occupied. An error ends the session.
pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>, SyncFrameError> {
    let Some((body, consumed)) = framing::split(buf, FRAME_BODY_BYTES_MAX)? else {
        return Ok(None);
    };
    Ok(Some((decode_body(body)?, consumed)))
}

/// Decodes a body whose length and checksum were checked.
pub fn decode_body(body: &[u8]) -> Result<Message, SyncFrameError> {
    let mut c = Cursor::new(body);
    let kind = c.u8("kind").map_err(SyncFrameError::Malformed)?;
    if !(KIND_HELLO..=KIND_SHARE_PAGE).contains(&kind) {
        return Err(SyncFrameError::UnknownKind(kind));
    }
    let msg = fields(kind, &mut c).map_err(SyncFrameError::Malformed)?;
    c.finish().map_err(SyncFrameError::Malformed)?;
    Ok(msg)
}

fn fields(kind: u8, c: &mut Cursor<'_>) -> Result<Message, String> {
    Ok(match kind {
        KIND_HELLO => Message::Hello {
            version: c.u32("version")?,
            url: c.string("url", URL_BYTES_MAX)?,
            replicas: c.u32("replicas")?,
            depth: c.u32("depth")?,
            fingerprint: c.u64("fingerprint")?,
        },
        KIND_WELCOME => Message::Welcome {
            version: c.u32("version")?,
            url: c.string("url", URL_BYTES_MAX)?,
            entries: c.u64("entries")?,
        },
        KIND_TREE_NODES => {
            let level = c.u32("level")?;
            let n = c.count("index count", TREE_NODES_PER_REQUEST_MAX, 4)?;
            let indexes = (0..n).map(|_| c.u32("index")).collect::<Result<_, _>>()?;
            Message::TreeNodes { level, indexes }
        }
        KIND_HASHES => {
            let n = c.count("hash count", TREE_NODES_PER_REQUEST_MAX, 8)?;
            let hashes = (0..n).map(|_| c.u64("hash")).collect::<Result<_, _>>()?;
            Message::Hashes { hashes }
        }
        KIND_DIGEST => {
            let entries_max = c.u32("entries_max")?;
            let after = optional_key(c, "after")?;
            let buckets = c.bytes("buckets", BUCKET_BITMAP_BYTES_MAX)?;
            Message::Digest {
                buckets,
                after,
                entries_max,
            }
        }
        KIND_DIGEST_PAGE => {
            let entries = digest_entries(c)?;
            let next = optional_key(c, "next")?;
            Message::DigestPage { entries, next }
        }
        KIND_FETCH => {
            let n = c.count("key count", FETCH_KEYS_MAX, 4)?;
            let keys = (0..n)
                .map(|_| c.bytes("key", KEY_BYTES_MAX))
                .collect::<Result<_, _>>()?;
            Message::Fetch { keys }
        }
        KIND_VERSIONS => {
            let n = c.count("version count", FETCH_KEYS_MAX, 5)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let key = c.bytes("key", KEY_BYTES_MAX)?;
                let v = match c.flag("found")? {
                    false => None,
                    true => Some(stamped(c)?),
                };
                items.push((key, v));
            }
            Message::Versions { items }
        }
        KIND_PUSH => Message::Push {
            items: versions(c, PUSH_ITEMS_MAX)?,
        },
        KIND_PUSH_ACK => Message::PushAck {
            applied: c.u32("applied")?,
            refused: c.u32("refused")?,
            first_refusal: c.string("first_refusal", MESSAGE_BYTES_MAX)?,
        },
        KIND_ERROR => Message::Error {
            message: c.string("message", MESSAGE_BYTES_MAX)?,
        },
        KIND_TRANSITION => Message::Transition {
            version: c.u32("version")?,
            url: c.string("url", URL_BYTES_MAX)?,
            depth: c.u32("depth")?,
            old: layout(c, "old")?,
            new: layout(c, "new")?,
        },
        KIND_TRANSITION_WELCOME => Message::TransitionWelcome {
            version: c.u32("version")?,
            url: c.string("url", URL_BYTES_MAX)?,
            entries: c.u64("entries")?,
            bytes: c.u64("bytes")?,
        },
        KIND_SHARE => Message::Share {
            after: optional_key(c, "after")?,
        },
        KIND_SHARE_PAGE => {
            let items = versions(c, SHARE_ITEMS_MAX)?;
            let others = digest_entries(c)?;
            let next = match c.u8("next")? {
                NEXT_IS_LAST_KEY => match page_last_key(&items, &others) {
                    Some(last) => Some(last.to_vec()),
                    None => return Err("next: the page's last key, in a page of none".into()),
                },
                0 => None,
                1 => Some(c.bytes("next", KEY_BYTES_MAX)?),
                other => return Err(format!("next: flag {other}, not 0, 1 or 2")),
            };
            Message::SharePage {
                items,
                others,
                next,
            }
        }
        _ => Message::KeepAlive,
    })
}

/// A count (at most `max`) of `(key, version)` pairs.
fn versions(c: &mut Cursor<'_>, max: usize) -> Result<Vec<(Vec<u8>, Stamped)>, String> {
    let n = c.count("version count", max, 13)?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        let key = c.bytes("key", KEY_BYTES_MAX)?;
        items.push((key, stamped(c)?));
    }
    Ok(items)
}

fn digest_entries(c: &mut Cursor<'_>) -> Result<Vec<DigestEntry>, String> {
    let n = c.count(
        "entry count",
        DIGEST_ENTRIES_MAX,
        4 + DIGEST_ENTRY_FIXED_BYTES,
    )?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let key = c.bytes("key", KEY_BYTES_MAX)?;
        let ts = c.u64("ts")?;
        let kind = kind_of_byte(c.u8("kind")?).ok_or_else(|| "kind: not 0, 1 or 2".to_owned())?;
        let digest = c.u64("digest")?;
        if kind == crate::version_order::Kind::Tombstone && digest != 0 {
            return Err("digest: not 0 for a tombstone".into());
        }
        entries.push(DigestEntry {
            key,
            tag: Tag { ts, kind, digest },
        });
    }
    Ok(entries)
}

/// A layout in its own byte format (`cluster::layout`), checked in full.
fn layout(c: &mut Cursor<'_>, field: &str) -> Result<Layout, String> {
    let bytes = c.bytes(field, LAYOUT_BYTES_MAX)?;
    Layout::decode(&bytes).map_err(|e| format!("{field} layout: {e}"))
}

fn optional_key(c: &mut Cursor<'_>, field: &str) -> Result<Option<Vec<u8>>, String> {
    Ok(match c.flag(field)? {
        false => None,
        true => Some(c.bytes(field, KEY_BYTES_MAX)?),
    })
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
