//! `ataman internal crash-writer`: the child process of the crash tests.
//!
//! Writes with durability `complete` from several threads and prints one
//! line per acknowledged write, `ack <key> <ts>`, after the engine reported
//! it durable. The parent kills it with SIGKILL at a random moment and then
//! checks that every acknowledged write survived. The value of each write is
//! a function of its key and timestamp ([`value_for`]), so the parent can
//! also check that nothing was stored that was never written.

use ataman_engine::{Db, Durability, Options, WalMode};
use ataman_testkit::rng::Rng;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Arguments of the crash writer.
#[derive(Debug, Clone, clap::Args)]
pub struct CrashWriterArgs {
    /// Database directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Cycle number: timestamps of this run start at `cycle << 32`, above every earlier cycle's.
    #[arg(long)]
    pub cycle: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Distinct keys (overwrites are part of the test).
    #[arg(long, default_value_t = 2000)]
    pub keys: u64,
    /// Writes before exiting on its own (a bound, in case nobody kills it).
    #[arg(long, default_value_t = 1_000_000)]
    pub writes_max: u64,
}

/// The value stored for `key` at `ts`: derivable, so a wrong value is detectable.
pub fn value_for(key: &str, ts: u64) -> Vec<u8> {
    let mut v = format!("{key}@{ts}:").into_bytes();
    v.resize(v.len() + (ts % 700) as usize, b'a' + (ts % 26) as u8);
    v
}

/// Small engine limits, so flushes and compactions run during the test.
pub fn crash_options() -> Options {
    Options {
        wal_mode: WalMode::Fsync,
        memtable_bytes_max: 256 * 1024,
        sst_target_bytes: 256 * 1024,
        l1_bytes_max: 1024 * 1024,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

/// Runs until killed or `writes_max` writes are done.
pub fn run(args: CrashWriterArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = Arc::new(Db::open(&args.dir, crash_options())?);
    let next_ts = Arc::new(AtomicU64::new(args.cycle << 32));
    let stdout = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    {
        let mut out = stdout.lock().map_err(|_| "stdout lock poisoned")?;
        writeln!(out, "ready")?;
        out.flush()?;
    }
    let per_thread = args.writes_max / args.threads.max(1) as u64;
    let mut handles = Vec::new();
    for t in 0..args.threads {
        let (db, next_ts, stdout) = (Arc::clone(&db), Arc::clone(&next_ts), Arc::clone(&stdout));
        let keys = args.keys.max(1);
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let mut rng = Rng::derive(0, t as u64);
            for _ in 0..per_thread {
                let key = format!("key{:06}", rng.below(keys));
                let ts = next_ts.fetch_add(1, Ordering::Relaxed);
                db.put(
                    key.as_bytes(),
                    &value_for(&key, ts),
                    ts,
                    Durability::Complete,
                )
                .map_err(|e| e.to_string())?;
                let mut out = stdout.lock().map_err(|_| "stdout lock poisoned")?;
                writeln!(out, "ack {key} {ts}").map_err(|e| e.to_string())?;
                out.flush().map_err(|e| e.to_string())?;
            }
            Ok(())
        }));
    }
    for h in handles {
        h.join().map_err(|_| "writer thread panicked")??;
    }
    Ok(())
}
