//! Tests of the recovery reader thread: flow control, shutdown on an apply
//! error, panics, and where the reading happens.

use crate::error::Error;
use crate::fs::OsFs;
use crate::wal::reader_thread::{CHUNKS_IN_FLIGHT_MAX, READER_THREAD_NAME};
use crate::wal::replay::{ReplayOptions, replay};
use crate::wal::test_segments::{BOTH_MODES, WatchedFs, batch, record, records, write_segment};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

/// How long a replay in these tests may take before it counts as a deadlock.
const TEST_DEADLINE_SECS: u64 = 120;

/// Runs `f` on another thread; fails the test if it does not finish in time.
fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(f());
    });
    receiver
        .recv_timeout(Duration::from_secs(TEST_DEADLINE_SECS))
        .expect("replay deadlocked or its thread panicked")
}

/// A segment of `count` small records spanning several read blocks and chunks.
fn many_records(count: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (framed, _) = records(1, count, 1000);
    write_segment(dir.path(), 1, &framed);
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// An error from `apply` stops replay at once in both modes, is returned as
/// is, and the reader thread (blocked handing over a chunk) is released and
/// joined instead of deadlocking.
#[test]
fn apply_error_stops_replay_and_releases_the_reader() {
    let (_guard, dir) = many_records(4000);
    for mode in BOTH_MODES {
        let dir = dir.clone();
        let (calls, result) = within_deadline(move || {
            let mut calls = 0u32;
            let result = replay(&OsFs, &dir, &[1], mode, &mut |_, _| {
                calls += 1;
                if calls == 3 {
                    return Err(Error::Busy { what: "test apply" });
                }
                Ok(())
            });
            (calls, result)
        });
        assert_eq!(calls, 3, "{mode:?}");
        assert!(matches!(result, Err(Error::Busy { what: "test apply" })));
    }
}

/// A panic on the reader thread, even after chunks were handed over,
/// becomes an error of the replay instead of a hang or a lost panic.
#[test]
fn reader_panic_becomes_an_error() {
    let (_guard, dir) = many_records(4000);
    let outcome = within_deadline(move || {
        let fs = WatchedFs::default();
        let panic_on_read = fs.panic_on_read.clone();
        let mut calls = 0u32;
        let opts = ReplayOptions {
            reader_thread: true,
            force: false,
        };
        let result = replay(&fs, &dir, &[1], opts, &mut |_, _| {
            calls += 1;
            panic_on_read.store(true, Ordering::SeqCst);
            Ok(())
        });
        (calls, result.map(|r| r.records))
    });
    match outcome {
        (calls, Err(Error::Io { source, .. })) => {
            assert!((1..4000).contains(&calls), "calls {calls}");
            assert!(source.to_string().contains("panicked"), "{source}");
        }
        other => panic!("expected an error for the panic, got {other:?}"),
    }
}

/// While the applier is busy with the first chunk, the reader reads at most
/// one more: with records of a chunk each, no byte past the second record
/// is read (a channel that buffered one chunk more would read a third).
#[test]
fn reader_stays_at_most_two_chunks_ahead() {
    assert_eq!(CHUNKS_IN_FLIGHT_MAX, 2);
    let dir = tempfile::tempdir().unwrap();
    let record_bytes = 1536 * 1024;
    let framed: Vec<Vec<u8>> = (0..8u64)
        .map(|i| record(i + 1, &batch(i + 1, 1, record_bytes)))
        .collect();
    let record_len = framed[0].len() as u64;
    assert!(framed.iter().all(|r| r.len() as u64 == record_len));
    write_segment(dir.path(), 1, &framed);
    let dir = dir.path().to_path_buf();
    let (read_end_at_first, records) = within_deadline(move || {
        let fs = WatchedFs::default();
        let read_end_max = fs.read_end_max.clone();
        let mut read_end_at_first = None;
        let opts = ReplayOptions {
            reader_thread: true,
            force: false,
        };
        let report = replay(&fs, &dir, &[1], opts, &mut |_, _| {
            if read_end_at_first.is_none() {
                // Give the reader ample time to run ahead as far as it may.
                std::thread::sleep(Duration::from_millis(300));
                read_end_at_first = Some(read_end_max.load(Ordering::SeqCst));
            }
            Ok(())
        });
        (read_end_at_first, report.map(|r| r.records))
    });
    assert_eq!(records.unwrap(), 8);
    let read_end = read_end_at_first.unwrap();
    assert!(
        read_end <= 2 * record_len,
        "read {read_end} bytes ahead, record {record_len}"
    );
}

/// With the reader thread all reading happens on the thread named
/// `ataman-wal-reader`; without it, on the caller's thread.
#[test]
fn reads_happen_on_the_named_reader_thread_only_when_asked() {
    let (_guard, dir) = many_records(100);
    for mode in BOTH_MODES {
        let fs = WatchedFs::default();
        let report = replay(&fs, &dir, &[1], mode, &mut |_, _| Ok(())).unwrap();
        assert_eq!(report.records, 100);
        let names = fs.read_threads.lock().unwrap().clone();
        let caller = std::thread::current().name().unwrap_or("").to_string();
        let expected = if mode.reader_thread {
            READER_THREAD_NAME.to_string()
        } else {
            caller
        };
        assert_eq!(names.into_iter().collect::<Vec<_>>(), vec![expected]);
    }
}
