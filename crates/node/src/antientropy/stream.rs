//! A sync session's connection: blocking frame I/O on a `std::net::TcpStream`
//! that never waits past a deadline and notices a stop request.
//!
//! Reads and writes use a short socket timeout ([`IO_SLICE`]) and loop:
//! between slices the stop flag and the caller's deadline are checked, so a
//! silent peer costs at most the deadline and a SIGTERM at most a slice.
//!
//! Waits for a frame measure *silence*, not total work: every byte received
//! restarts the wait, and a side busy with long local work (a scan at the
//! rate bound) sends a `KeepAlive` frame every [`KEEP_ALIVE_PERIOD`]
//! ([`SyncStream::keep_alive`]), which [`SyncStream::recv`] skips.

use super::status::SyncMetrics;
use super::wire::{self, Message, SyncFrameError};
use crate::peer::framing::{self, FRAME_HEADER_BYTES};
use crate::tls::blocking::BlockingStream;
use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Socket timeout of one read or write call: how often the stop flag is checked.
pub const IO_SLICE: Duration = Duration::from_millis(250);
/// Bytes read per call.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// A side doing local work between frames sends a `KeepAlive` this often.
pub const KEEP_ALIVE_PERIOD: Duration = Duration::from_secs(5);
/// Longest silence while waiting for a frame (an answer, the next
/// request): twelve keep-alive periods.
pub const SILENCE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest silence while waiting for the Welcome: it also covers the time
/// the session waits in the peer's hand-off queue behind the session it
/// serves (nothing is sent meanwhile).
pub const WELCOME_TIMEOUT: Duration = Duration::from_secs(300);
/// How long sending one frame may take.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(120);

/// The waits of a session (the constants above; tests shorten them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// [`KEEP_ALIVE_PERIOD`].
    pub keep_alive: Duration,
    /// [`SILENCE_TIMEOUT`].
    pub silence: Duration,
    /// [`WELCOME_TIMEOUT`].
    pub welcome: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            keep_alive: KEEP_ALIVE_PERIOD,
            silence: SILENCE_TIMEOUT,
            welcome: WELCOME_TIMEOUT,
        }
    }
}

/// Something that can tell the other side "still working" (a session's
/// stream); local work calls it as it goes ([`super::local::Meter`]).
pub trait KeepAlive {
    /// Sends a `KeepAlive` frame when nothing was sent for a keep-alive period.
    fn keep_alive(&mut self) -> Result<(), SessionError>;
}

/// Why a session ended early.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The connection failed (refused, reset, closed mid-frame).
    #[error("{0}")]
    Io(String),
    /// Nothing arrived (or could be sent) before the deadline.
    #[error("timed out: the peer did not answer in time")]
    TimedOut,
    /// The other side broke the protocol (bad frame, unexpected message).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The other side refused (its `Error` message).
    #[error("refused by the peer: {0}")]
    Refused(String),
    /// This node refused the other side's Hello (and told it why).
    #[error("refused: {0}")]
    Refusing(String),
    /// The peer's sync server is busy (it answered the upgrade with 503).
    #[error("the peer's anti-entropy server is busy: {0}")]
    Busy(String),
    /// The node is shutting down.
    #[error("stopped: the node is shutting down")]
    Stopped,
    /// The local engine failed.
    #[error("local engine: {0}")]
    Engine(String),
}

impl From<SyncFrameError> for SessionError {
    fn from(e: SyncFrameError) -> Self {
        SessionError::Protocol(e.to_string())
    }
}

impl From<super::rate::Stopped> for SessionError {
    fn from(_: super::rate::Stopped) -> Self {
        SessionError::Stopped
    }
}

/// One end of a sync session.
pub struct SyncStream<'a> {
    stream: BlockingStream,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    stop: &'a dyn Fn() -> bool,
    metrics: &'a SyncMetrics,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// When the last frame was sent (or the stream made).
    last_sent: Instant,
    keep_alive_period: Duration,
}

impl KeepAlive for SyncStream<'_> {
    fn keep_alive(&mut self) -> Result<(), SessionError> {
        if self.last_sent.elapsed() >= self.keep_alive_period {
            self.send(&Message::KeepAlive, Instant::now() + SEND_TIMEOUT)?;
        }
        Ok(())
    }
}

impl<'a> SyncStream<'a> {
    /// Wraps a connected (and upgraded) socket; `leftover` are bytes read
    /// past the upgrade's head; [`KeepAlive::keep_alive`] sends one every
    /// `keep_alive_period` at most.
    pub fn new(
        stream: BlockingStream,
        leftover: Vec<u8>,
        stop: &'a dyn Fn() -> bool,
        metrics: &'a SyncMetrics,
        keep_alive_period: Duration,
    ) -> io::Result<Self> {
        let sock = stream.tcp();
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(IO_SLICE))?;
        sock.set_write_timeout(Some(IO_SLICE))?;
        let _ = sock.set_nodelay(true);
        Ok(SyncStream {
            stream,
            bytes_received: leftover.len() as u64,
            rbuf: leftover,
            wbuf: Vec::new(),
            stop,
            metrics,
            bytes_sent: 0,
            last_sent: Instant::now(),
            keep_alive_period,
        })
    }

    /// Sends one message, all of it before `deadline`. Returns its bytes.
    pub fn send(&mut self, msg: &Message, deadline: Instant) -> Result<u64, SessionError> {
        self.wbuf.clear();
        wire::encode(msg, &mut self.wbuf);
        let mut pos = 0;
        while pos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[pos..]) {
                Ok(0) => return Err(SessionError::Io("connection closed while sending".into())),
                Ok(n) => pos += n,
                Err(e) if waiting(&e) => self.check(deadline)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SessionError::Io(format!("send failed: {e}"))),
            }
        }
        // TLS: the records still held back go out before the frame counts as sent.
        loop {
            match self.stream.flush() {
                Ok(()) => break,
                Err(e) if waiting(&e) => self.check(deadline)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SessionError::Io(format!("send failed: {e}"))),
            }
        }
        let n = self.wbuf.len() as u64;
        self.last_sent = Instant::now();
        self.bytes_sent += n;
        self.metrics.bytes_sent.fetch_add(n, Ordering::Relaxed);
        if self.wbuf.capacity() > wire::BATCH_BYTES_MAX * 2 {
            self.wbuf = Vec::new(); // one huge value does not stay allocated
        }
        Ok(n)
    }

    /// Receives one message, skipping `KeepAlive` frames; `Ok(None)` when
    /// the other side closed the connection between frames. Times out only
    /// after `silence` without a byte from the other side.
    pub fn recv(&mut self, silence: Duration) -> Result<Option<Message>, SessionError> {
        loop {
            match self.recv_frame(silence)? {
                Some(Message::KeepAlive) => continue,
                other => return Ok(other),
            }
        }
    }

    fn recv_frame(&mut self, silence: Duration) -> Result<Option<Message>, SessionError> {
        if !self.fill(FRAME_HEADER_BYTES, silence)? {
            return Ok(None);
        }
        let head = self
            .rbuf
            .first_chunk::<FRAME_HEADER_BYTES>()
            .ok_or_else(|| SessionError::Protocol("short header".into()))?;
        let (body_len, _) =
            framing::header(head, wire::FRAME_BODY_BYTES_MAX).map_err(SyncFrameError::from)?;
        let frame_bytes = FRAME_HEADER_BYTES + body_len;
        if !self.fill(frame_bytes, silence)? {
            return Err(SessionError::Io(
                "connection closed in the middle of a frame".into(),
            ));
        }
        let (msg, used) = wire::decode(&self.rbuf)?
            .ok_or_else(|| SessionError::Protocol("a complete frame read as incomplete".into()))?;
        debug_assert_eq!(used, frame_bytes);
        self.rbuf.drain(..used);
        if self.rbuf.capacity() > wire::BATCH_BYTES_MAX * 2 {
            self.rbuf.shrink_to(READ_CHUNK_BYTES);
        }
        Ok(Some(msg))
    }

    /// Reads until `rbuf` holds `want` bytes, for at most `silence` after
    /// the last byte received. False when the connection closed before any
    /// byte of the frame; an error when it closed mid-frame.
    fn fill(&mut self, want: usize, silence: Duration) -> Result<bool, SessionError> {
        let mut deadline = Instant::now() + silence;
        while self.rbuf.len() < want {
            let start = self.rbuf.len();
            let chunk = (want - start).clamp(1, READ_CHUNK_BYTES);
            self.rbuf.resize(start + chunk, 0);
            let result = self.stream.read(&mut self.rbuf[start..]);
            let n = *result.as_ref().unwrap_or(&0);
            self.rbuf.truncate(start + n);
            match result {
                Ok(0) if self.rbuf.is_empty() => return Ok(false),
                Ok(0) => {
                    return Err(SessionError::Io(
                        "connection closed in the middle of a frame".into(),
                    ));
                }
                Ok(n) => {
                    deadline = Instant::now() + silence;
                    self.bytes_received += n as u64;
                    self.metrics
                        .bytes_received
                        .fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if waiting(&e) => self.check(deadline)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SessionError::Io(format!("receive failed: {e}"))),
            }
        }
        Ok(true)
    }

    /// True when the other side closed (or reset) the connection and
    /// nothing it sent is waiting to be read: a non-blocking peek.
    pub fn peer_closed(&mut self) -> bool {
        if !self.rbuf.is_empty() {
            return false;
        }
        self.stream.peer_closed()
    }

    fn check(&self, deadline: Instant) -> Result<(), SessionError> {
        if (self.stop)() {
            return Err(SessionError::Stopped);
        }
        if Instant::now() >= deadline {
            return Err(SessionError::TimedOut);
        }
        Ok(())
    }
}

/// A socket timeout: nothing moved during one slice.
fn waiting(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
