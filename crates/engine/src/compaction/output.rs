//! Writing the output SSTables of a flush or compaction.

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, Kind};
use crate::manifest::FileMeta;
use crate::sst::{BlockCache, Table, TableBuilder, TableOptions, table_file_name};
use crate::version::LiveTable;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// What to drop while copying entries into new tables.
#[derive(Debug, Clone, Copy)]
pub struct DropPolicy {
    /// Drop tombstones older than the grace period (only at the bottom level).
    pub drop_expired_tombstones: bool,
    /// Current time in Unix milliseconds (for tombstone expiry).
    pub now_ms: u64,
    /// Tombstone grace period in milliseconds.
    pub grace_ms: u64,
}

impl DropPolicy {
    /// Keeps every newest version, tombstones included.
    pub fn keep_tombstones() -> Self {
        DropPolicy {
            drop_expired_tombstones: false,
            now_ms: 0,
            grace_ms: 0,
        }
    }

    /// Drops tombstones whose timestamp is older than `grace_ms` before now.
    pub fn bottom_level(grace_ms: u64) -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        DropPolicy {
            drop_expired_tombstones: true,
            now_ms,
            grace_ms,
        }
    }

    fn drops(&self, kind: Kind, ts: u64) -> bool {
        self.drop_expired_tombstones
            && kind == Kind::Delete
            && key::timestamp_millis(ts).saturating_add(self.grace_ms) <= self.now_ms
    }
}

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
    policy: DropPolicy,
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
        let newest = !have_last || last_user_key.as_slice() != parsed.user_key;
        if newest {
            last_user_key.clear();
            last_user_key.extend_from_slice(parsed.user_key);
            have_last = true;
            if !policy.drops(parsed.kind, parsed.ts) {
                if builder.is_none() {
                    builder = Some(start_table(sink)?);
                }
                if let Some((_, b)) = builder.as_mut() {
                    b.add(ikey, input.value())?;
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
    Ok(Arc::new(LiveTable::new(
        meta,
        table,
        path,
        Arc::clone(sink.fs),
    )))
}
