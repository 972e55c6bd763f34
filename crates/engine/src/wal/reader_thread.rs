//! The recovery reader thread: reads, verifies and decodes WAL chunks ahead
//! of the applier.
//!
//! Checksumming and validating payloads is a large part of replay's CPU
//! time; doing it on a second thread lets it overlap with applying (the
//! idea is Tarantool's snapshot reader thread). The thread runs the same
//! [`Scanner`] the inline mode runs and hands each [`Chunk`] (whole records,
//! about [`CHUNK_PAYLOAD_BYTES_TARGET`](crate::wal::replay_scan::CHUNK_PAYLOAD_BYTES_TARGET)
//! bytes of payload) to the caller's thread.
//!
//! # Flow control
//! The channel is a rendezvous channel (bound [`READER_CHANNEL_BOUND`] = 0):
//! a send completes only when the applier takes the chunk. So at any time at
//! most [`CHUNKS_IN_FLIGHT_MAX`] = 2 chunks are read but not yet applied:
//! the one the applier is applying, and one the reader has finished and is
//! waiting to hand over. The reader does not start a third until the
//! applier takes the second. Memory is therefore bounded by two chunks plus
//! the reader's segment window.
//!
//! # Shutdown
//! - The reader ends after handing over the chunk with the last event (end
//!   of segments, a torn tail, or an error, which arrives after the records
//!   before it).
//! - When `apply` fails the applier drops the receiver; the reader's next
//!   send fails and it returns. The applier always joins the thread before
//!   returning, so no thread outlives the replay.
//! - A panic on the reader drops its sender, which ends the applier's
//!   receive loop; the join then turns the panic into an error.

use crate::error::{Error, Result};
use crate::wal::replay_scan::{Chunk, Scanner};
use std::any::Any;
use std::io;
use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::thread;

/// Name of the recovery reader thread.
pub const READER_THREAD_NAME: &str = "ataman-wal-reader";

/// Chunks the channel buffers: none, a send waits for the applier's receive.
pub const READER_CHANNEL_BOUND: usize = 0;

/// Chunks read but not yet applied, at most: one being applied, one waiting in a send.
pub const CHUNKS_IN_FLIGHT_MAX: usize = READER_CHANNEL_BOUND + 2;

// Recovery's flow control promises two chunks ahead, no more (docs/FORMAT.md, "Reader thread").
const _: () = assert!(CHUNKS_IN_FLIGHT_MAX == 2);

/// Runs `scanner` on the reader thread and `consume` on the caller's for each
/// chunk, in order; stops at the first error `consume` returns.
pub fn run(
    scanner: Scanner<'_>,
    dir: &Path,
    consume: &mut dyn FnMut(Chunk) -> Result<()>,
) -> Result<()> {
    thread::scope(|scope| {
        let (sender, receiver) = sync_channel::<Chunk>(READER_CHANNEL_BOUND);
        let mut scanner = scanner;
        let reader = thread::Builder::new()
            .name(READER_THREAD_NAME.to_string())
            .spawn_scoped(scope, move || {
                while let Some(chunk) = scanner.next_chunk() {
                    if sender.send(chunk).is_err() {
                        // The applier stopped; nobody wants the rest.
                        return;
                    }
                }
            })
            .map_err(|e| Error::io(dir, e))?;

        let mut outcome = Ok(());
        for chunk in receiver.iter() {
            if let Err(e) = consume(chunk) {
                outcome = Err(e);
                break;
            }
        }
        // Unblocks a reader waiting in send.
        drop(receiver);
        let joined = reader.join();
        outcome?;
        joined.map_err(|panic| panicked(dir, panic.as_ref()))
    })
}

/// The error a panic on the reader thread becomes.
fn panicked(dir: &Path, panic: &(dyn Any + Send)) -> Error {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".to_string());
    Error::io(
        dir,
        io::Error::other(format!("{READER_THREAD_NAME} thread panicked: {message}")),
    )
}
