//! Pre-reads of pipelined RESP GETs: before a RESP connection executes the
//! commands of one read, the plain `GET key`s at the front of its buffer
//! are read together, on one read view, with the engine's interleaved
//! point reads ([`ataman_engine::Db::get_many`]): a memtable bigger than
//! the cache costs a run of cache misses per search, and searches done
//! together overlap them. The dispatcher's local read then takes its
//! answer from here ([`take_or_read`]).
//!
//! # Invariants
//! - Only the GETs before the first command of any other kind are
//!   pre-read, and only while the connection waits for none of its writes:
//!   no write of this connection can fall between a GET's arrival and its
//!   pre-read, so the pre-read is a read the GET could have done.
//! - The queue lives for one [`super::conn::Conn::parse_resp`] call on
//!   this thread ([`clear`] at its end); a GET that finds no pre-read of
//!   its own key reads the engine as before.

use super::answer::{self, Answer};
use super::resp::decode::{self, Decoded};
use crate::state::NetContext;
use std::cell::RefCell;
use std::collections::VecDeque;

/// GETs pre-read at most per buffer.
pub const PREREAD_KEYS_MAX: usize = 64;

/// Fewer GETs than this at the front of a buffer are read one by one.
const PREREAD_KEYS_MIN: usize = 2;

/// This thread's pre-read answers, in command order; the buffers are kept
/// (cleared) from one buffer to the next.
#[derive(Default)]
struct Queue {
    /// The keys, one after another.
    keys: Vec<u8>,
    /// Each pre-read: its key's end in `keys` (it starts where the one
    /// before ends) and its answer.
    answers: VecDeque<(usize, Answer)>,
    /// Where the first key left in `answers` starts.
    key_start: usize,
}

thread_local! {
    static QUEUE: RefCell<Queue> = RefCell::default();
}

/// Pre-reads the plain GETs at the front of `buf` (see the module header).
pub fn fill(ctx: &NetContext, buf: &[u8], limits: decode::Limits) {
    // In a cluster a GET may be replicated rather than read here.
    if ctx.shared.topology.len() != 1 {
        return;
    }
    let mut keys: [&[u8]; PREREAD_KEYS_MAX] = [&[]; PREREAD_KEYS_MAX];
    let mut n = 0;
    let mut at = 0;
    while n < PREREAD_KEYS_MAX {
        let Ok(Decoded::Command(request)) = decode::decode(&buf[at..], limits) else {
            break;
        };
        let is_get = request.args.len() == 2 && request.args[0].eq_ignore_ascii_case(b"get");
        if !is_get {
            break;
        }
        // A bulk argument is borrowed from `buf`; anything else (an
        // inline command's owned copy) ends the run.
        let std::borrow::Cow::Borrowed(key) = request.args[1] else {
            break;
        };
        keys[n] = key;
        n += 1;
        at += request.consumed;
    }
    if n < PREREAD_KEYS_MIN {
        return;
    }
    let keys = &keys[..n];
    let answers = ctx.db.get_many(keys);
    QUEUE.with_borrow_mut(|q| {
        q.keys.clear();
        q.answers.clear();
        q.key_start = 0;
        for (k, r) in keys.iter().zip(answers) {
            q.keys.extend_from_slice(k);
            q.answers.push_back((q.keys.len(), answer::read(r)));
        }
    });
}

/// The answer of a local GET of `key`: its pre-read when the queue holds
/// one (earlier entries, pre-read for GETs that took another path, are
/// dropped), else a read of the engine.
pub fn take_or_read(ctx: &NetContext, key: &[u8]) -> Answer {
    let pre = QUEUE.with_borrow_mut(|q| {
        while let Some((end, a)) = q.answers.pop_front() {
            let start = std::mem::replace(&mut q.key_start, end);
            if q.keys.get(start..end) == Some(key) {
                return Some(a);
            }
        }
        None
    });
    pre.unwrap_or_else(|| answer::read(ctx.db.get(key)))
}

/// Drops whatever was not taken.
pub fn clear() {
    QUEUE.with_borrow_mut(|q| {
        q.keys.clear();
        q.answers.clear();
        q.key_start = 0;
    });
}
