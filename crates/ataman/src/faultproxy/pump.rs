//! One direction of one proxied connection: read from `src`, apply the
//! direction's [`LinkMode`], write to `dst`.
//!
//! Every blocking call is bounded by [`POLL_INTERVAL`] (the read timeout of
//! `src`, the write timeout of `dst`), so the pump sees a mode change or
//! the stop flag within about one interval even when a peer is silent or
//! does not read.

use super::{CHUNK_BYTES_MAX, DELAY_QUEUE_BYTES_MAX, Direction, LinkMode, POLL_INTERVAL, Shared};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Shortest read timeout (a zero timeout is refused by the socket API).
const READ_TIMEOUT_MIN: Duration = Duration::from_millis(1);

/// What was read and is waiting for its time to be forwarded.
enum Chunk {
    /// Bytes, never empty.
    Data { due: Instant, bytes: Vec<u8> },
    /// The end of `src`'s stream, passed on as a half close of `dst`.
    End { due: Instant },
}

impl Chunk {
    fn due(&self) -> Instant {
        match self {
            Chunk::Data { due, .. } | Chunk::End { due } => *due,
        }
    }
}

/// The outcome of one read.
enum ReadOutcome {
    Bytes(usize),
    End,
    Nothing,
}

/// How a pump ended.
enum Ending {
    /// `src` ended and that end was passed on: half-close `dst`.
    HalfClose,
    /// A cut, a stop, or an I/O error: close both sockets, which also ends
    /// the other direction's pump.
    Abort,
}

/// Moves the bytes of one direction. `dst` is `None` for a black hole
/// accepted without a reachable target.
///
/// Invariants: chunks leave `queue` in the order they were read;
/// `queued_bytes` is the sum of the queued data and at most
/// [`DELAY_QUEUE_BYTES_MAX`] plus one chunk; after `src_ended` nothing more
/// is read.
pub(super) struct Pump {
    shared: Arc<Shared>,
    direction: Direction,
    src: TcpStream,
    dst: Option<TcpStream>,
    queue: VecDeque<Chunk>,
    queued_bytes: usize,
    src_ended: bool,
}

impl Pump {
    pub(super) fn new(
        shared: Arc<Shared>,
        direction: Direction,
        src: TcpStream,
        dst: Option<TcpStream>,
    ) -> Pump {
        Pump {
            shared,
            direction,
            src,
            dst,
            queue: VecDeque::new(),
            queued_bytes: 0,
            src_ended: false,
        }
    }

    pub(super) fn direction(&self) -> Direction {
        self.direction
    }

    /// Runs until the stream ends, the link is cut or the proxy stops.
    pub(super) fn run(mut self) {
        let ending = self.pump().unwrap_or(Ending::Abort);
        match ending {
            Ending::HalfClose => {
                if let Some(dst) = &self.dst {
                    let _ = dst.shutdown(Shutdown::Write);
                }
            }
            Ending::Abort => {
                // Every link has exactly one ToTarget pump: it counts the cut.
                if self.direction == Direction::ToTarget && self.shared.cut() {
                    self.shared
                        .counters
                        .connections_cut
                        .fetch_add(1, Ordering::Relaxed);
                }
                let _ = self.src.shutdown(Shutdown::Both);
                if let Some(dst) = &self.dst {
                    let _ = dst.shutdown(Shutdown::Both);
                }
            }
        }
    }

    fn pump(&mut self) -> io::Result<Ending> {
        if let Some(dst) = &self.dst {
            dst.set_write_timeout(Some(POLL_INTERVAL))?;
        }
        let mut buffer = vec![0u8; CHUNK_BYTES_MAX];
        // Bounded by the stream: every iteration waits at most about one
        // POLL_INTERVAL, and the loop ends on end of stream, cut or stop.
        loop {
            if self.shared.stopped() || self.shared.cut() {
                return Ok(Ending::Abort);
            }
            let mode = self.shared.mode(self.direction);
            if mode == LinkMode::Drop {
                self.discard_queue();
            } else {
                if self.dst.is_none() {
                    // A black hole without a target cannot start forwarding.
                    return Ok(Ending::Abort);
                }
                if self.forward_due(mode == LinkMode::Pass)? {
                    return Ok(Ending::HalfClose);
                }
                if self.src_ended && self.queue.is_empty() {
                    // The end arrived while the link dropped everything.
                    return Ok(Ending::HalfClose);
                }
            }
            let wait = match mode {
                LinkMode::Drop => POLL_INTERVAL,
                _ => self.wait_for_front(),
            };
            if self.src_ended || self.queued_bytes >= DELAY_QUEUE_BYTES_MAX {
                std::thread::sleep(wait);
                continue;
            }
            let outcome = self.read(&mut buffer, wait)?;
            if matches!(outcome, ReadOutcome::Nothing) {
                continue;
            }
            // The mode when the bytes arrived decides, not the one before
            // the read began: a test that sets Drop and then writes must
            // see its bytes dropped.
            if self.shared.stopped() || self.shared.cut() {
                return Ok(Ending::Abort);
            }
            let delay = match self.shared.mode(self.direction) {
                LinkMode::Cut => return Ok(Ending::Abort),
                LinkMode::Drop => {
                    if let ReadOutcome::Bytes(n) = outcome {
                        self.shared.count_dropped(n);
                    }
                    continue;
                }
                LinkMode::Pass => Duration::ZERO,
                LinkMode::Delay(delay) => delay,
            };
            let due = Instant::now() + delay;
            match outcome {
                ReadOutcome::Nothing => {}
                ReadOutcome::End => self.queue.push_back(Chunk::End { due }),
                ReadOutcome::Bytes(n) if delay.is_zero() && self.queue.is_empty() => {
                    self.write(&buffer[..n])?;
                }
                ReadOutcome::Bytes(n) => {
                    self.queued_bytes += n;
                    self.queue.push_back(Chunk::Data {
                        due,
                        bytes: buffer[..n].to_vec(),
                    });
                }
            }
        }
    }

    /// How long to wait before the front chunk is due, at most one
    /// [`POLL_INTERVAL`].
    fn wait_for_front(&self) -> Duration {
        match self.queue.front() {
            Some(chunk) => chunk
                .due()
                .saturating_duration_since(Instant::now())
                .clamp(READ_TIMEOUT_MIN, POLL_INTERVAL),
            None => POLL_INTERVAL,
        }
    }

    /// Reads once, waiting at most `timeout`; the end of the stream is
    /// remembered in `src_ended`.
    fn read(&mut self, buffer: &mut [u8], timeout: Duration) -> io::Result<ReadOutcome> {
        assert!(!self.src_ended, "read after the end of the stream");
        self.src
            .set_read_timeout(Some(timeout.max(READ_TIMEOUT_MIN)))?;
        match self.src.read(buffer) {
            Ok(0) => {
                self.src_ended = true;
                Ok(ReadOutcome::End)
            }
            Ok(n) => Ok(ReadOutcome::Bytes(n)),
            Err(e) if is_timeout(&e) => Ok(ReadOutcome::Nothing),
            Err(e) => Err(e),
        }
    }

    /// Forwards the chunks that are due (all of them when `all`), in order.
    /// True once the end of the stream was forwarded.
    fn forward_due(&mut self, all: bool) -> io::Result<bool> {
        while let Some(chunk) = self.queue.front() {
            if !all && chunk.due() > Instant::now() {
                return Ok(false);
            }
            match self.queue.pop_front() {
                Some(Chunk::Data { bytes, .. }) => {
                    self.queued_bytes -= bytes.len();
                    self.write(&bytes)?;
                }
                Some(Chunk::End { .. }) => {
                    debug_assert!(self.queue.is_empty(), "data queued after the end");
                    return Ok(true);
                }
                None => return Ok(false),
            }
        }
        Ok(false)
    }

    /// Drops every queued chunk (the link became a black hole); an end of
    /// stream among them stays remembered in `src_ended`.
    fn discard_queue(&mut self) {
        self.shared.count_dropped(self.queued_bytes);
        self.queue.clear();
        self.queued_bytes = 0;
    }

    /// Writes all of `bytes` to `dst`, each attempt bounded by
    /// [`POLL_INTERVAL`] so that a cut or a stop ends a blocked write.
    fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let Some(dst) = &self.dst else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let mut dst = dst;
        while !bytes.is_empty() {
            if self.shared.stopped() || self.shared.cut() {
                return Err(io::ErrorKind::ConnectionAborted.into());
            }
            match dst.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.shared.count_forwarded(self.direction, n);
                    bytes = &bytes[n..];
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// True for the errors a socket timeout produces (or a signal).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
