//! A GET answered from a memtable allocates nothing (issue 32, item 2):
//! the engine lends the value ([`Db::get_with`]), the network thread
//! copies it into its spare buffer ([`answer::read_lent`]), renders the
//! RESP reply into the connection's output buffer and gives the buffer
//! back ([`answer::give_back`]). Counted by a global allocator that
//! counts the allocations of the calling thread only (the engine's own
//! threads allocate as they like).
//!
//! The negative control: the owning read (`Db::get`, the path before) is
//! counted by the same allocator and must show its copy, so a count of
//! zero means no allocation, not a counter that sees nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::{Db, Durability, Options, WalMode};
use ataman_node::net::answer::{self, Answer};
use ataman_node::net::resp::encode;
use ataman_node::value_spare::ValueSpare;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's allocations.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to `System` unchanged; the count is a
// thread-local `Cell` with a const initializer and no destructor, so
// counting neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// GETs per counted loop.
const GETS: u64 = 100;

fn open_with_key(dir: &std::path::Path) -> Db {
    let opts = Options {
        wal_mode: WalMode::Write,
        ..Options::default()
    };
    let db = Db::open(dir, opts).unwrap();
    db.put(b"key:1", &[7u8; 100], 1, Durability::Complete)
        .unwrap();
    db
}

/// A local GET of a key in the memtable, its RESP reply rendered, makes
/// no allocation once the thread's buffers exist; the owning read makes
/// at least one per GET.
#[test]
fn a_memtable_get_and_its_reply_allocate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_key(dir.path());
    let spare = ValueSpare::default();
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    let get = |out: &mut Vec<u8>| {
        out.clear();
        let answer = answer::read_lent(&db, b"key:1", &spare);
        let Answer::Value(value, _) = &answer else {
            panic!("{answer:?}")
        };
        encode::bulk(out, value);
        answer::give_back(answer, &spare);
    };
    // The first GET makes the thread's buffers (the spare value buffer,
    // the engine's per-thread seek key).
    get(&mut out);
    let before = allocations();
    for _ in 0..GETS {
        get(&mut out);
    }
    assert_eq!(allocations() - before, 0, "allocations in {GETS} GETs");
    assert!(out.starts_with(b"$100\r\n"));

    // The negative control: the owning read copies the value each time.
    let before = allocations();
    for _ in 0..GETS {
        let answer = answer::read(db.get(b"key:1"));
        assert!(matches!(answer, Answer::Value(ref v, _) if v.len() == 100));
    }
    assert!(allocations() - before >= GETS);
}
