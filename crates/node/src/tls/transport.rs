//! A non-blocking stream for the `mio` loops: plain TCP, or a rustls
//! session over TCP. The connection code reads and writes it like a
//! socket.
//!
//! # Semantics (edge-triggered polling)
//! - `read` fills as much of the buffer as it can: it returns fewer bytes
//!   than asked only once the socket said `WouldBlock`, gave a short read
//!   (it is drained: later bytes bring a new edge) or ended, so
//!   plaintext decrypted but not yet returned never waits for a socket
//!   event that will not come. `Ok(0)` is the end (a `close_notify`, or a
//!   TCP end without one); when the end comes with the last bytes, those
//!   are returned first and the next read says `Ok(0)` (as with TCP, where
//!   the poller's read-closed hint makes the caller read on). A record that
//!   does not decrypt or a failed handshake is an `InvalidData` error (the
//!   alert is sent first).
//! - `write` takes plaintext into the session and sends what the socket
//!   accepts; `WouldBlock` when neither the session nor the socket has room.
//! - `flush` sends the encrypted bytes still held back: `WouldBlock` while
//!   some remain. A caller that wrote everything must flush before it
//!   considers its answer sent (and flush again on the next writable event).
//! - Handshake messages are sent from `read` as well, so a handshake
//!   advances on readable events alone.

use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use rustls_pki_types::ServerName;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

/// A rustls session and its socket.
pub struct TlsSocket {
    sock: TcpStream,
    conn: Connection,
    /// The socket read its end.
    eof: bool,
}

/// Plain TCP or TLS over TCP.
pub enum Transport {
    /// No TLS.
    Plain(TcpStream),
    /// TLS (server side for accepted connections, client side for peer links).
    Tls(Box<TlsSocket>),
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl Transport {
    /// An accepted connection: TLS with `config`, plain without.
    pub fn accept(sock: TcpStream, config: Option<Arc<ServerConfig>>) -> io::Result<Transport> {
        match config {
            None => Ok(Transport::Plain(sock)),
            Some(config) => {
                let conn = ServerConnection::new(config).map_err(tls_error)?;
                Ok(Transport::Tls(Box::new(TlsSocket {
                    sock,
                    conn: conn.into(),
                    eof: false,
                })))
            }
        }
    }

    /// A dialled connection: TLS to `name` with `config`, plain without.
    pub fn dial(
        sock: TcpStream,
        tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    ) -> io::Result<Transport> {
        match tls {
            None => Ok(Transport::Plain(sock)),
            Some((config, name)) => {
                let conn = ClientConnection::new(config, name).map_err(tls_error)?;
                Ok(Transport::Tls(Box::new(TlsSocket {
                    sock,
                    conn: conn.into(),
                    eof: false,
                })))
            }
        }
    }

    /// The socket.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => &t.sock,
        }
    }

    /// The other end's address.
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.tcp().peer_addr()
    }

    /// True when the other end presented a certificate the CA verified
    /// (only a TLS session with client verification can say so).
    pub fn peer_verified(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => !t.conn.is_handshaking() && t.conn.peer_certificates().is_some(),
        }
    }

    /// True for a TLS session.
    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// Sends a `close_notify` if the socket takes it now (best effort,
    /// before the connection is dropped).
    pub fn close_notify(&mut self) {
        if let Transport::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.write_pending();
        }
    }

    /// The blocking form of this stream (the sync thread takes it): the
    /// session, with whatever it holds decrypted, moves with the socket.
    pub fn into_blocking(self) -> io::Result<super::blocking::BlockingStream> {
        match self {
            Transport::Plain(s) => {
                let std: std::net::TcpStream = s.into();
                std.set_nonblocking(false)?;
                Ok(super::blocking::BlockingStream::Plain(std))
            }
            Transport::Tls(t) => {
                let TlsSocket { sock, conn, .. } = *t;
                let std: std::net::TcpStream = sock.into();
                std.set_nonblocking(false)?;
                Ok(super::blocking::BlockingStream::tls(conn, std))
            }
        }
    }
}

impl TlsSocket {
    /// Sends encrypted bytes the session holds; `WouldBlock` if some remain.
    fn write_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// [`TlsSocket::write_pending`], where a full socket is not an error
    /// (the next writable event or flush sends the rest).
    fn write_pending_lazily(&mut self) -> io::Result<()> {
        match self.write_pending() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        // The last socket read was short: the socket is drained (bytes that
        // arrive later bring a new edge), so no read that would only say
        // `WouldBlock` is spent; as with plain TCP in `net::conn`.
        let mut drained = false;
        loop {
            while filled < buf.len() {
                match self.conn.reader().read(&mut buf[filled..]) {
                    Ok(0) => return Ok(filled), // close_notify: the end
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // The TCP end without close_notify: the end all the same
                    // (every message is framed by its own length).
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(filled),
                    Err(e) => return Err(e),
                }
            }
            if filled == buf.len() || self.eof {
                return Ok(filled);
            }
            if drained {
                return if filled > 0 {
                    Ok(filled)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
            let mut probe = ShortReadProbe {
                sock: &mut self.sock,
                short: false,
            };
            match self.conn.read_tls(&mut probe) {
                Ok(0) => self.eof = true,
                Ok(_) => drained = probe.short,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.write_pending_lazily()?;
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                // The alert tells the other end why.
                let _ = self.write_pending();
                return Err(tls_error(e));
            }
            self.write_pending_lazily()?;
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_pending_lazily()?;
        let n = self.conn.writer().write(buf)?;
        self.write_pending_lazily()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}

/// The socket, noting whether its last read returned less than asked.
struct ShortReadProbe<'a> {
    sock: &'a mut TcpStream,
    short: bool,
}

impl Read for ShortReadProbe<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(t) => t.write_pending(),
        }
    }
}

impl AsRawFd for Transport {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

impl Source for Transport {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.register(registry, token, interests),
            Transport::Tls(t) => t.sock.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.reregister(registry, token, interests),
            Transport::Tls(t) => t.sock.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.deregister(registry),
            Transport::Tls(t) => t.sock.deregister(registry),
        }
    }
}
