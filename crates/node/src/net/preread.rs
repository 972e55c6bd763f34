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

thread_local! {
    /// This thread's pre-read answers, in command order.
    static QUEUE: RefCell<VecDeque<(Vec<u8>, Answer)>> = const { RefCell::new(VecDeque::new()) };
}

/// Pre-reads the plain GETs at the front of `buf` (see the module header).
pub fn fill(ctx: &NetContext, buf: &[u8], limits: decode::Limits) {
    // In a cluster a GET may be replicated rather than read here.
    if ctx.shared.topology.len() != 1 {
        return;
    }
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    while keys.len() < PREREAD_KEYS_MAX {
        let Ok(Decoded::Command(request)) = decode::decode(&buf[at..], limits) else {
            break;
        };
        let is_get = request.args.len() == 2 && request.args[0].eq_ignore_ascii_case(b"get");
        if !is_get {
            break;
        }
        let start = at + request.consumed;
        // A bulk argument is borrowed from `buf`; anything else (an
        // inline command's owned copy) ends the run.
        let key = match &request.args[1] {
            std::borrow::Cow::Borrowed(k) => *k,
            std::borrow::Cow::Owned(_) => break,
        };
        keys.push(key);
        at = start;
    }
    if keys.len() < PREREAD_KEYS_MIN {
        return;
    }
    let answers = ctx.db.get_many(&keys);
    QUEUE.with_borrow_mut(|q| {
        q.clear();
        q.extend(
            keys.iter()
                .zip(answers)
                .map(|(k, r)| (k.to_vec(), answer::read(r))),
        );
    });
}

/// The answer of a local GET of `key`: its pre-read when the queue holds
/// one (earlier entries, pre-read for GETs that took another path, are
/// dropped), else a read of the engine.
pub fn take_or_read(ctx: &NetContext, key: &[u8]) -> Answer {
    let pre = QUEUE.with_borrow_mut(|q| {
        while let Some((k, a)) = q.pop_front() {
            if k == key {
                return Some(a);
            }
        }
        None
    });
    pre.unwrap_or_else(|| answer::read(ctx.db.get(key)))
}

/// Drops whatever was not taken.
pub fn clear() {
    QUEUE.with_borrow_mut(VecDeque::clear);
}
