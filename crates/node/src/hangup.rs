//! SIGHUP, shared: one handler counts hangups, and every reloader (the
//! token file, the TLS files) remembers the count it last acted on, so one
//! signal reloads them all whichever installed the handler first.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many SIGHUPs arrived since start.
static HANGUPS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_hangup(_: libc::c_int) {
    HANGUPS.fetch_add(1, Ordering::SeqCst);
}

/// Makes SIGHUP count (instead of ending the process). Idempotent.
pub fn install() -> std::io::Result<()> {
    let handler: extern "C" fn(libc::c_int) = on_hangup;
    // SAFETY: the handler only adds to an atomic, which is
    // async-signal-safe; signal(2) has no other precondition.
    let previous = unsafe { libc::signal(libc::SIGHUP, handler as libc::sighandler_t) };
    if previous == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The number of SIGHUPs so far.
pub fn count() -> u64 {
    HANGUPS.load(Ordering::SeqCst)
}

/// A reloader's view: true once per new SIGHUP since the last call.
#[derive(Debug, Default)]
pub struct Seen(AtomicU64);

impl Seen {
    /// True if a SIGHUP arrived since the last call (or since creation).
    pub fn take(&self) -> bool {
        let now = count();
        self.0.swap(now, Ordering::SeqCst) != now
    }

    /// Starts from the hangups counted so far.
    pub fn now() -> Seen {
        Seen(AtomicU64::new(count()))
    }
}
