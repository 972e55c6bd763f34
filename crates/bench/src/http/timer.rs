//! A high-resolution wake-up for the client's event loop: a `timerfd`
//! registered with `mio`. `epoll_wait`'s own timeout has millisecond
//! resolution (mio rounds it up), which would send every request of a
//! fast schedule up to 1 ms late and charge that to the server.

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// One-shot timer, re-armed relative to now. Its expiries are never read:
/// under the edge-triggered poll each expiry is a new edge, and re-arming
/// resets the count, so a `read` per wake-up would only cost a syscall.
///
/// # Invariants
/// `fd` is a non-blocking `CLOCK_MONOTONIC` timerfd owned by this value.
#[derive(Debug)]
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    /// A new disarmed timer.
    pub fn new() -> io::Result<Timer> {
        // SAFETY: timerfd_create takes no pointers; a negative return is an error.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a freshly created descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Timer { fd })
    }

    /// Registers the timer for readable events under `token`.
    pub fn register(&self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut SourceFd(&self.fd.as_raw_fd()),
            token,
            Interest::READABLE,
        )
    }

    /// Fires once after `delay` (at least 1 ns: a zero value would disarm it).
    pub fn arm(&self, delay: Duration) -> io::Result<()> {
        let delay = delay.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(delay.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(delay.subsec_nanos() as i32),
            },
        };
        // SAFETY: `spec` is a valid itimerspec on the stack; the old-value pointer may be null.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};

    /// An armed timer wakes a poll with no timeout, well before a second,
    /// and, re-armed without reading the expiry, wakes it again (the client
    /// never reads the descriptor: one `read` per wake-up saved).
    #[test]
    fn wakes_poll_again_without_a_read() {
        let mut poll = Poll::new().unwrap();
        let timer = Timer::new().unwrap();
        timer.register(poll.registry(), Token(7)).unwrap();
        let mut events = Events::with_capacity(4);
        for _ in 0..3 {
            timer.arm(Duration::from_micros(300)).unwrap();
            poll.poll(&mut events, Some(Duration::from_secs(5)))
                .unwrap();
            assert!(events.iter().any(|e| e.token() == Token(7)));
        }
        // Not re-armed: no further wake-up.
        poll.poll(&mut events, Some(Duration::from_millis(20)))
            .unwrap();
        assert!(events.is_empty());
    }
}
