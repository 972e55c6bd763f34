//! CPU time of the whole process (all threads: the benchmark's drivers and
//! the engine's writer, WAL and compaction threads), from `getrusage`.

use std::time::Duration;

/// User plus system CPU time this process has used so far.
pub fn process_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `struct rusage` into the pointer we pass,
    // which points to a properly sized and aligned, zero-initialized value;
    // RUSAGE_SELF is always a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        // getrusage(RUSAGE_SELF) cannot fail on Linux with a valid pointer;
        // report zero rather than invent a figure.
        return Duration::ZERO;
    }
    // SAFETY: zero-initialized and, on success, filled in by the kernel.
    let usage = unsafe { usage.assume_init() };
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u64::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

/// CPU seconds spent per million operations (0 when no operation ran).
pub fn cpu_sec_per_mop(cpu: Duration, ops: u64) -> f64 {
    if ops == 0 {
        0.0
    } else {
        cpu.as_secs_f64() / (ops as f64 / 1e6)
    }
}
