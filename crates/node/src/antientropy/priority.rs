//! Background work yields the CPU to the foreground: the `ataman-sync`
//! thread (serving anti-entropy and transition sessions), the
//! `ataman-copy` threads (a transition copy's sessions) and the engine's
//! compaction thread (which also runs a cleanup's purge) run at a lower
//! CPU priority than the network threads, so on a busy host the copy and
//! the merges take the CPU the foreground leaves (a copy's bytes are
//! bounded by the token bucket besides: `super::rate`).

/// How much nicer than the process a background thread runs (Linux nice
/// values: 10 gives a thread about a tenth of the CPU share of a
/// default-priority thread it competes with).
pub const BACKGROUND_NICE_STEP: i32 = 10;

/// Lowers the calling thread's CPU priority by [`BACKGROUND_NICE_STEP`]
/// (`ataman_engine::thread_priority`). Best effort: a failure is logged
/// and the thread runs as it was.
pub fn lower_this_thread() {
    if let Err(error) = ataman_engine::thread_priority::lower_this_thread(BACKGROUND_NICE_STEP) {
        tracing::debug!(%error, "could not lower a background thread's CPU priority");
    }
}

#[cfg(test)]
mod tests {
    /// The checkpoint's thread yields as much as anti-entropy's threads.
    #[test]
    fn the_backup_job_runs_at_the_same_step() {
        assert_eq!(
            super::BACKGROUND_NICE_STEP,
            crate::backup::job::BACKGROUND_NICE_STEP
        );
    }
}
