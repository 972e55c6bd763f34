//! Background work yields the CPU to the foreground: the `ataman-sync`
//! thread (serving anti-entropy and transition sessions) and the
//! `ataman-copy` threads (a transition copy's sessions) run at a lower
//! CPU priority than the network threads, so on a busy host the copy
//! takes the CPU the foreground leaves (its bytes are bounded by the
//! token bucket besides: `super::rate`).

/// How much nicer than the process a background thread runs (Linux nice
/// values: 10 gives a thread about a tenth of the CPU share of a
/// default-priority thread it competes with).
pub const BACKGROUND_NICE_STEP: i32 = 10;

/// Lowers the calling thread's CPU priority by [`BACKGROUND_NICE_STEP`]
/// (on Linux the nice value is per thread). Best effort: a failure is
/// logged and the thread runs as it was.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `nice` takes a plain integer and only changes the
        // calling thread's nice value; errno is reset first because -1 is
        // also a valid result.
        let failed = unsafe {
            *libc::__errno_location() = 0;
            libc::nice(BACKGROUND_NICE_STEP) == -1 && *libc::__errno_location() != 0
        };
        if failed {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "could not lower a background thread's CPU priority"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that lowers its priority is nicer afterwards; its
    /// neighbours are not (the nice value is per thread).
    #[cfg(target_os = "linux")]
    #[test]
    fn lowers_only_the_calling_thread() {
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            lower_this_thread();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + BACKGROUND_NICE_STEP).min(19));
        assert_eq!(nice(), before);
    }
}
