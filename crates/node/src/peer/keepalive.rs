//! TCP keepalive on peer connections.
//!
//! Peer connections live for hours and may carry nothing for minutes. A
//! peer that vanishes without closing (power loss, a cut network) would
//! leave a half-open connection behind forever: on the server side nothing
//! is ever read again, on the client side nothing answers. Keepalive
//! probes make the kernel notice and report the connection as failed
//! after [`KEEPALIVE_IDLE`] + [`KEEPALIVE_COUNT`] × [`KEEPALIVE_INTERVAL`]
//! (25 s) of silence, and `TCP_USER_TIMEOUT` bounds how long written data
//! may stay unacknowledged. Both ends then see an error and drop the
//! connection; the client link reconnects.

use std::os::fd::AsRawFd;
use std::time::Duration;

/// Idle time before the first probe.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
/// Time between probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Unanswered probes before the connection fails.
pub const KEEPALIVE_COUNT: u32 = 3;
/// Longest time written data may stay unacknowledged before the connection fails.
pub const USER_TIMEOUT: Duration = Duration::from_secs(25);

/// Turns keepalive on for `socket`; returns the first option the kernel
/// refused, as text (the connection still works without it).
pub fn enable(socket: &impl AsRawFd) -> Result<(), String> {
    let fd = socket.as_raw_fd();
    let options = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1, "SO_KEEPALIVE"),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            KEEPALIVE_IDLE.as_secs() as libc::c_int,
            "TCP_KEEPIDLE",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            KEEPALIVE_INTERVAL.as_secs() as libc::c_int,
            "TCP_KEEPINTVL",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            KEEPALIVE_COUNT as libc::c_int,
            "TCP_KEEPCNT",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            USER_TIMEOUT.as_millis() as libc::c_int,
            "TCP_USER_TIMEOUT",
        ),
    ];
    for (level, name, value, label) in options {
        // SAFETY: `fd` is an open socket owned by `socket` for the duration
        // of the call; the option value is a live c_int of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(format!("{label}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Reads an integer socket option (for tests).
#[cfg(test)]
fn get(socket: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals of the sizes passed.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn enable_sets_every_option() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert_eq!(get(&stream, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0);
        enable(&stream).unwrap();
        assert_eq!(get(&stream, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(&stream, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 10);
        assert_eq!(get(&stream, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 5);
        assert_eq!(get(&stream, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
        assert_eq!(
            get(&stream, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
            25_000
        );
    }
}
