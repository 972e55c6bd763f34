//! `WATCH`/`UNWATCH` as pure rules: optimistic check-and-set for a
//! `MULTI … EXEC` of one key. `WATCH` remembers the version of the key
//! it read; `EXEC` runs only if that version is still the key's newest,
//! checked in the same conditional write that applies the transaction
//! (`crate::net::rmw_local`, `ataman_engine::db::condition`).
//!
//! # Rules (Redis 7's `multi.c`, checked side by side in
//! `crates/ataman/tests/resp_multi.rs`)
//! 1. **What is remembered.** `WATCH k` reads `k` (after this
//!    connection's earlier writes are answered) and keeps [`Seen`]: the
//!    timestamp of its newest version (`None`: no version at all) and
//!    whether it was live (a value not expired at the read). Watching a
//!    key already watched keeps the first [`Seen`] (Redis keeps the first
//!    watch: a write between the two still aborts `EXEC`).
//! 2. **When `EXEC` is aborted** ([`holds`] is false; `EXEC` answers the
//!    null array and nothing runs): the key's newest version is not the
//!    one seen (any write of the key since, by any client, this one
//!    included, even of the same value), or the key was live when watched
//!    and has expired since (Redis 7's `isWatchedKeyExpired`). A key
//!    absent (or already expired) at `WATCH` and still so at `EXEC` holds.
//!    Sound because timestamps name versions: the node's clock stamps each
//!    write once, so an unchanged timestamp is an unchanged key. A flush
//!    or compaction between the two moves the version to a table, never
//!    changes its timestamp; it may drop a tombstone or an expired value,
//!    which changes what is read and so aborts: a false abort the client
//!    retries, never a missed change.
//! 3. **One key** (docs/RESP.md, "Transactions"). A transaction touches
//!    one key, and its watch is part of it: `WATCH a b` with two distinct
//!    keys, or `WATCH b` while `a` is watched, is refused (nothing is
//!    added); the watched key is the transaction's key, so `MULTI` then a
//!    command naming another key is refused when queued (`EXEC` answers
//!    `EXECABORT`). A transaction that names no key (`PING`, or nothing)
//!    under a watch is a check of the watched key.
//! 4. **Cleared** by `UNWATCH`, `EXEC` (whatever it answers, `EXECABORT`
//!    included), `DISCARD` and `RESET`; not by `EXEC` without `MULTI`.
//!    `WATCH` inside `MULTI` is `ERR WATCH inside MULTI is not allowed`
//!    ([`super::multi`]).

use super::encode::Reply;
use std::borrow::Cow;

/// What `WATCH` read of its key (rule 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The timestamp of the key's newest version (`None`: none).
    pub ts: Option<u64>,
    /// A value not expired at the read.
    pub live: bool,
}

impl Seen {
    /// What a `WATCH` whose read failed keeps: a version no key ever has
    /// (`u64::MAX` is past every timestamp the clock can stamp), so the
    /// `EXEC` it guards answers the null array. Redis's `WATCH` of a valid
    /// key never fails, and a client that pipelines `WATCH … EXEC` cannot
    /// react to the error in between: its transaction must not run
    /// unguarded.
    pub const FAILED: Seen = Seen {
        ts: Some(u64::MAX),
        live: true,
    };

    /// What a read found: the newest version's timestamp, whether it
    /// holds a value and that value's deadline, at `now_ms`.
    pub fn of(ts: Option<u64>, has_value: bool, deadline_ms: Option<u64>, now_ms: u64) -> Seen {
        Seen {
            ts,
            live: has_value && deadline_ms.is_none_or(|d| d > now_ms),
        }
    }
}

/// The connection's watch: one key and what was seen of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// The key.
    pub key: Vec<u8>,
    /// What `WATCH` read.
    pub seen: Seen,
}

/// What `WATCH key…` (arity checked) does, given the connection's watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Read this key and keep what was seen (rule 1).
    Read(Vec<u8>),
    /// Answered now: `+OK` (already watched) or a refusal (rule 3).
    Reply(Reply),
}

/// Rules 1 and 3 for `WATCH` of `keys` (at least one).
pub fn watch(keys: &[Cow<'_, [u8]>], current: Option<&Watched>) -> Verdict {
    let first = &keys[0];
    if let Some(other) = keys.iter().find(|k| k[..] != first[..]) {
        return Verdict::Reply(one_key(other, first));
    }
    match current {
        Some(w) if w.key[..] == first[..] => Verdict::Reply(super::encode::OK),
        Some(w) => Verdict::Reply(one_key(first, &w.key)),
        None => Verdict::Read(first.to_vec()),
    }
}

/// Rule 3's refusal of `key` beside the watched `watched`.
fn one_key(key: &[u8], watched: &[u8]) -> Reply {
    Reply::err(format!(
        "a transaction touches one key, its watch included: WATCH '{}' beside '{}' \
         (docs/RESP.md)",
        String::from_utf8_lossy(&key[..key.len().min(64)]),
        String::from_utf8_lossy(&watched[..watched.len().min(64)]),
    ))
}

/// Rule 2: true when `EXEC` may run, the key now being `now`.
pub fn holds(at_watch: Seen, now: Seen) -> bool {
    at_watch.ts == now.ts && (!at_watch.live || now.live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::resp::test_args as args;

    /// Rule 2: any new version aborts, as does a live value's expiry; an
    /// absent or expired key that stays so holds.
    #[test]
    fn exec_runs_only_on_the_version_seen() {
        let live = Seen::of(Some(10), true, None, 100);
        assert!(holds(live, Seen::of(Some(10), true, None, 200)));
        assert!(!holds(live, Seen::of(Some(11), true, None, 200)));
        assert!(!holds(live, Seen::of(None, false, None, 200)));
        let expiring = Seen::of(Some(10), true, Some(150), 100);
        assert!(expiring.live);
        assert!(!holds(expiring, Seen::of(Some(10), true, Some(150), 150)));
        let expired = Seen::of(Some(10), true, Some(50), 100);
        assert!(!expired.live);
        assert!(holds(expired, Seen::of(Some(10), true, Some(50), 200)));
        let absent = Seen::of(None, false, None, 100);
        assert!(holds(absent, absent));
        // A failed WATCH holds for no version, present or absent.
        for now in [
            live,
            absent,
            expired,
            Seen::of(Some(u64::MAX - 1), true, None, 1),
        ] {
            assert!(!holds(Seen::FAILED, now), "{now:?}");
        }
        assert!(!holds(absent, Seen::of(Some(1), false, None, 100)));
    }

    /// Rules 1 and 3: a new watch reads its key; a repeat keeps the first;
    /// a second key is refused.
    #[test]
    fn a_watch_holds_one_key() {
        let w = Watched {
            key: b"a".to_vec(),
            seen: Seen::of(Some(1), true, None, 0),
        };
        assert_eq!(
            watch(&args(&["a", "a"]), None),
            Verdict::Read(b"a".to_vec())
        );
        assert_eq!(
            watch(&args(&["a"]), Some(&w)),
            Verdict::Reply(super::super::encode::OK)
        );
        for keys in [&["b"][..], &["a", "b"]] {
            let Verdict::Reply(Reply::Error(e)) = watch(&args(keys), Some(&w)) else {
                panic!("{keys:?} accepted")
            };
            assert!(e.contains("one key") && e.contains("'b'"), "{e}");
        }
        let Verdict::Reply(Reply::Error(e)) = watch(&args(&["a", "b"]), None) else {
            panic!("two keys accepted")
        };
        assert!(e.contains("'b' beside 'a'"), "{e}");
    }
}
