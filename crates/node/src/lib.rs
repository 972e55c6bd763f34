//! # ataman-node
//!
//! An ataman node. For now it opens the storage engine on the data
//! directory, reports what recovery found, and waits for Ctrl-C / SIGTERM;
//! the HTTP `/v0` API and the network / tx / WAL thread layout come next.

use ataman_engine::{Db, Options};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Default address a node listens on.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:19234";
/// Default data directory.
pub const DATA_DIR_DEFAULT: &str = "./ataman-data";

/// `ataman serve` options.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (HOST:PORT).
    #[arg(long, env = "ATAMAN_LISTEN", default_value = LISTEN_DEFAULT)]
    pub listen: String,
    /// Directory holding the node's data (created if missing).
    #[arg(long, env = "ATAMAN_DATA_DIR", default_value = DATA_DIR_DEFAULT)]
    pub data_dir: PathBuf,
    /// Open the engine, report, and exit instead of waiting.
    #[arg(long)]
    pub check: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Runs a node until SIGINT or SIGTERM.
pub fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open(&args.data_dir, Options::default())?;
    let report = db.recovery_report();
    println!(
        "ataman: engine open at {} ({} WAL records replayed in {:.3}s{})",
        args.data_dir.display(),
        report.replay.records,
        report.replay_duration.as_secs_f64(),
        match &report.replay.torn_tail {
            Some((path, offset, dropped)) => format!(
                "; torn WAL tail cut in {} at offset {offset} ({dropped} bytes)",
                path.display()
            ),
            None => String::new(),
        }
    );
    println!(
        "ataman: the HTTP API on {} is coming in the next release; press Ctrl-C to stop",
        args.listen
    );
    if args.check {
        db.close()?;
        return Ok(());
    }
    // SAFETY: `on_signal` only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    db.close()?;
    println!("ataman: stopped");
    Ok(())
}
