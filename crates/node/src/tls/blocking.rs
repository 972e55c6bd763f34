//! A blocking stream, plain TCP or TLS, for the threads that do blocking
//! I/O with socket timeouts: the anti-entropy sync sessions (both ends)
//! and the command-line clients.
//!
//! A socket timeout surfaces as the socket's own `WouldBlock` or
//! `TimedOut` error and leaves the session consistent: bytes already
//! taken stay queued and go out on the next call.

use rustls::{ClientConfig, ClientConnection, Connection};
use rustls_pki_types::ServerName;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Plain TCP or TLS over TCP, blocking.
pub enum BlockingStream {
    /// No TLS.
    Plain(TcpStream),
    /// TLS: the session and its socket.
    Tls(Box<(Connection, TcpStream)>),
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl BlockingStream {
    /// A session taken over with its socket (the handshake done or not).
    pub fn tls(conn: Connection, sock: TcpStream) -> BlockingStream {
        BlockingStream::Tls(Box::new((conn, sock)))
    }

    /// Dials TLS over the connected `sock` to `name` and completes the
    /// handshake within `timeout` (the server's certificate verified).
    pub fn connect_tls(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        timeout: Duration,
    ) -> io::Result<BlockingStream> {
        let conn = ClientConnection::new(config, name).map_err(tls_error)?;
        let mut stream = BlockingStream::tls(conn.into(), sock);
        stream.handshake(timeout)?;
        Ok(stream)
    }

    /// Completes the handshake, for at most `timeout`.
    fn handshake(&mut self, timeout: Duration) -> io::Result<()> {
        let BlockingStream::Tls(t) = self else {
            return Ok(());
        };
        let (conn, sock) = &mut **t;
        let deadline = Instant::now() + timeout;
        while conn.is_handshaking() {
            match conn.complete_io(sock) {
                Ok((0, 0)) if conn.is_handshaking() => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed during the TLS handshake",
                    ));
                }
                Ok(_) => {}
                Err(e) if waiting(&e) && Instant::now() < deadline => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The socket.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            BlockingStream::Plain(s) => s,
            BlockingStream::Tls(t) => &t.1,
        }
    }

    /// True when the other end closed (or reset) the connection and nothing
    /// it sent waits to be read: a non-blocking peek at the socket.
    pub fn peer_closed(&mut self) -> bool {
        if let BlockingStream::Tls(t) = self
            && t.0
                .process_new_packets()
                .is_ok_and(|state| state.plaintext_bytes_to_read() > 0)
        {
            return false;
        }
        let sock = self.tcp();
        if sock.set_nonblocking(true).is_err() {
            return true;
        }
        let mut byte = [0u8; 1];
        let closed = match sock.peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        };
        closed || sock.set_nonblocking(false).is_err()
    }
}

/// A socket timeout: nothing moved during one slice.
fn waiting(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sends what the session holds (blocking; a timeout leaves the rest queued).
fn write_pending(conn: &mut Connection, sock: &mut TcpStream) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(sock) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Read for BlockingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (conn, sock) = match self {
            BlockingStream::Plain(s) => return s.read(buf),
            BlockingStream::Tls(t) => &mut **t,
        };
        loop {
            match conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            write_pending(conn, sock)?;
            // An end (0) shows in the reader on the next round.
            conn.read_tls(sock)?;
            if let Err(e) = conn.process_new_packets() {
                let _ = write_pending(conn, sock);
                return Err(tls_error(e));
            }
        }
    }
}

impl Write for BlockingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (conn, sock) = match self {
            BlockingStream::Plain(s) => return s.write(buf),
            BlockingStream::Tls(t) => &mut **t,
        };
        write_pending(conn, sock)?;
        let n = conn.writer().write(buf)?;
        // The bytes are taken: a timeout now is reported by the next call.
        let _ = write_pending(conn, sock);
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            BlockingStream::Plain(s) => s.flush(),
            BlockingStream::Tls(t) => {
                let (conn, sock) = &mut **t;
                write_pending(conn, sock)
            }
        }
    }
}
