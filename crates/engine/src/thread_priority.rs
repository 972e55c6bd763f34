//! Background threads yield the CPU to the foreground: a thread lowers
//! its own CPU priority (on Linux the nice value is per thread), so on a
//! busy host it takes the CPU the foreground threads leave. The engine's
//! compaction thread does (`Options::compaction_nice`); a node's
//! background threads do too.

/// Lowers the calling thread's CPU priority by `step` nice steps (10
/// gives a thread about a tenth of the CPU share of a default-priority
/// thread it competes with). Best effort: on failure the thread runs as
/// it was and the error says why; elsewhere than Linux it does nothing.
pub fn lower_this_thread(step: i32) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `nice` takes a plain integer and only changes the
        // calling thread's nice value; errno is reset first because -1 is
        // also a valid result.
        let failed = unsafe {
            *libc::__errno_location() = 0;
            libc::nice(step) == -1 && *libc::__errno_location() != 0
        };
        if failed {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = step;
    Ok(())
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
            lower_this_thread(7).unwrap();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 7).min(19));
        assert_eq!(nice(), before);
    }
}
