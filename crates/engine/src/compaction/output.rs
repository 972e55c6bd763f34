//! Writing the output SSTables of a flush or compaction.

use super::collect::{self, Elsewhere, Fate, Judge, Verdict};
use super::pace::Pacer;
use super::purge::PurgeFilter;
use crate::error::{Error, Result};
use crate::expiry;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, Kind};
use crate::manifest::FileMeta;
use crate::metrics::EngineMetrics;
use crate::sst::{BlockCache, Table, TableBuilder, TableOptions, table_file_name};
use crate::version::LiveTable;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to drop while copying entries into new tables (the rule:
/// [`super::collect`]).
pub struct DropPolicy<'a> {
    /// The clock, the grace, and whether dead versions are collected.
    pub judge: Judge,
    /// Where older versions may be: asked before a dead version is
    /// dropped. `None` while collecting: the old rule (a planted bug), as
    /// if nothing outside the merge held an older version.
    pub elsewhere: Option<Elsewhere<'a>>,
    /// The key's collection horizon (`Options::collection_horizon`);
    /// `None`: `now - grace`.
    pub horizon: Option<&'a crate::options::CollectionHorizon>,
}

impl std::fmt::Debug for DropPolicy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropPolicy")
            .field("judge", &self.judge)
            .field("elsewhere", &self.elsewhere)
            .field("horizon", &self.horizon.is_some())
            .finish()
    }
}

impl<'a> DropPolicy<'a> {
    /// Keeps every newest version, tombstones included; expired values
    /// (as of `now_ms`) lose their value bytes but stay as tombstones.
    pub fn keep_tombstones(now_ms: u64) -> Self {
        DropPolicy {
            judge: Judge {
                now_ms,
                grace_ms: 0,
                collecting: false,
                planted_drop_expired: false,
            },
            elsewhere: None,
            horizon: None,
        }
    }

    /// Drops tombstones whose timestamp, and expired values whose deadline
    /// (or timestamp, if later), are older than `grace_ms` before `now_ms`,
    /// when no source in `elsewhere` may hold an older version of the key.
    pub fn collecting(now_ms: u64, grace_ms: u64, elsewhere: Elsewhere<'a>) -> Self {
        DropPolicy {
            judge: Judge {
                now_ms,
                grace_ms,
                collecting: true,
                planted_drop_expired: false,
            },
            elsewhere: Some(elsewhere),
            horizon: None,
        }
    }

    /// Judges dead versions by `horizon` (per key) instead of the grace.
    pub fn with_horizon(mut self, horizon: Option<&'a crate::options::CollectionHorizon>) -> Self {
        self.horizon = horizon;
        self
    }

    /// The old rule, a planted bug: drops what is past the grace without
    /// asking where older versions are (the caller collects only when no
    /// deeper level overlaps the merge).
    pub fn planted_collecting_blind(now_ms: u64, grace_ms: u64) -> Self {
        DropPolicy {
            judge: Judge {
                now_ms,
                grace_ms,
                collecting: true,
                planted_drop_expired: false,
            },
            elsewhere: None,
            horizon: None,
        }
    }

    /// Arms the planted bug when `on` (a test hook).
    pub fn with_planted_drop_expired(mut self, on: bool) -> Self {
        self.judge.planted_drop_expired = on;
        self
    }

    fn fate(&self, user_key: &[u8], kind: Kind, ts: u64, value: &[u8]) -> Verdict {
        let horizon = || match self.horizon {
            Some(h) => Some(h(user_key)),
            None => self.judge.grace_horizon_ms(),
        };
        collect::fate(&self.judge, kind, ts, value, horizon, || {
            self.elsewhere
                .as_ref()
                .is_some_and(|e| e.may_hold_older(user_key, ts))
        })
    }
}

/// The stored value of an expiring version compaction cut off: a
/// deadline of 0 and no value bytes.
const EXPIRED_FOREVER: [u8; expiry::DEADLINE_BYTES] = [0; expiry::DEADLINE_BYTES];

/// Where new tables go: what [`write_tables`] needs of the engine, and no
/// more (the engine lends it from its shared state).
pub struct TableSink<'a> {
    /// The database directory the tables are created in.
    pub dir: &'a Path,
    /// The file system they are written through.
    pub fs: &'a Arc<dyn FileSystem>,
    /// The engine's next file number, taken one at a time.
    pub next_file_number: &'a AtomicU64,
    /// Block size, restart interval, bloom bits and compression.
    pub table_options: TableOptions,
    /// The block cache the opened tables read through.
    pub cache: &'a Arc<BlockCache>,
    /// Where expired versions met and dropped are counted.
    pub metrics: &'a EngineMetrics,
}

impl TableSink<'_> {
    fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::Relaxed)
    }
}

/// Copies the newest version of every user key from `input` (positioned
/// by the caller with `seek_to_first`) into new tables of `level`, each
/// closed near `target_bytes` (`u64::MAX`: one table). Older versions are
/// dropped; tombstones per `policy`. Returns the new tables, synced and
/// with their directory entry synced, not yet in any version.
pub fn write_tables(
    sink: &TableSink<'_>,
    input: &mut dyn InternalIterator,
    level: u32,
    target_bytes: u64,
    policy: DropPolicy<'_>,
) -> Result<Vec<Arc<LiveTable>>> {
    write_tables_filtered(sink, input, level, target_bytes, policy, None, None)
}

/// [`write_tables`], skipping first every entry `purge` drops (so a
/// purged key's older versions never become its newest), and reading at
/// `pacer`'s rate. `Error::Closed` when the pacer or the purge's own pace
/// was stopped by the engine's close (the tables written so far are
/// unnamed; the next open removes them).
pub fn write_tables_filtered(
    sink: &TableSink<'_>,
    input: &mut dyn InternalIterator,
    level: u32,
    target_bytes: u64,
    policy: DropPolicy<'_>,
    mut purge: Option<&mut PurgeFilter<'_>>,
    mut pacer: Option<&mut Pacer<'_>>,
) -> Result<Vec<Arc<LiveTable>>> {
    let mut outputs = Vec::new();
    let mut builder: Option<(u64, TableBuilder)> = None;
    // The user key of the previous entry (reused buffer: no allocation per entry).
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut have_last = false;
    while input.valid() {
        let ikey = input.key();
        let parsed = key::parse_internal_key(ikey).ok_or_else(|| Error::Corruption {
            path: sink.dir.to_path_buf(),
            offset: 0,
            kind: crate::error::CorruptionKind::Malformed(
                "undecodable internal key in merge".into(),
            ),
        })?;
        let entry_bytes = ikey.len() + input.value().len();
        if let Some(p) = pacer.as_deref_mut()
            && p.step(entry_bytes as u64)
        {
            return Err(Error::Closed);
        }
        if let Some(p) = purge.as_deref_mut() {
            let dropped = p.drops(parsed.user_key, parsed.seq, entry_bytes);
            if p.stopped {
                // Unnamed tables are removed by the next open.
                return Err(Error::Closed);
            }
            if dropped {
                input.next()?;
                continue;
            }
        }
        let newest = !have_last || last_user_key.as_slice() != parsed.user_key;
        if newest {
            last_user_key.clear();
            last_user_key.extend_from_slice(parsed.user_key);
            have_last = true;
            let verdict = policy.fate(parsed.user_key, parsed.kind, parsed.ts, input.value());
            let fate = verdict.fate;
            if verdict.waiting_past_grace {
                sink.metrics.tombstones_waiting_past_grace.add(1);
            }
            if parsed.kind == Kind::PutExpiring && fate != Fate::Keep {
                sink.metrics.expired_seen.add(1);
                if fate == Fate::Drop {
                    sink.metrics.expired_dropped.add(1);
                }
            }
            if parsed.kind == Kind::Delete && fate == Fate::Drop {
                sink.metrics.tombstones_dropped.add(1);
            }
            if fate != Fate::Drop {
                if builder.is_none() {
                    builder = Some(start_table(sink)?);
                }
                if let Some((_, b)) = builder.as_mut() {
                    let value = input.value();
                    let value = match fate {
                        // Cut off to a deadline of 0: expired on any clock,
                        // so a clock stepped back later cannot show it as
                        // a live (empty) value again. Its grace then counts
                        // from its timestamp, as a delete's does.
                        Fate::KeepExpired => &EXPIRED_FOREVER[..],
                        _ => value,
                    };
                    b.add(ikey, value)?;
                    if b.estimated_bytes() >= target_bytes
                        && let Some((number, b)) = builder.take()
                    {
                        outputs.push(finish_table(sink, number, b, level)?);
                    }
                }
            }
        }
        input.next()?;
    }
    if let Some((number, b)) = builder.take() {
        outputs.push(finish_table(sink, number, b, level)?);
    }
    if !outputs.is_empty() {
        sink.fs
            .sync_dir(sink.dir)
            .map_err(|e| Error::io(sink.dir, e))?;
    }
    Ok(outputs)
}

fn start_table(sink: &TableSink<'_>) -> Result<(u64, TableBuilder)> {
    let number = sink.new_file_number();
    let path = sink.dir.join(table_file_name(number));
    let file = sink.fs.create(&path).map_err(|e| Error::io(&path, e))?;
    Ok((number, TableBuilder::new(file, path, sink.table_options)))
}

fn finish_table(
    sink: &TableSink<'_>,
    number: u64,
    builder: TableBuilder,
    level: u32,
) -> Result<Arc<LiveTable>> {
    let path = sink.dir.join(table_file_name(number));
    let props = builder.finish()?;
    let file = sink.fs.open_read(&path).map_err(|e| Error::io(&path, e))?;
    let table = Table::open(file, path.clone(), number, Arc::clone(sink.cache))?;
    let file_crc32c = props.file_crc32c;
    let meta = FileMeta {
        number,
        level,
        file_bytes: props.file_bytes,
        smallest: props.smallest,
        largest: props.largest,
        entries: props.entries,
        tombstones: props.tombstones,
        ts_min: props.ts_min,
        ts_max: props.ts_max,
    };
    Ok(Arc::new(
        LiveTable::new(meta, table, path, Arc::clone(sink.fs)).with_file_crc32c(file_crc32c),
    ))
}
