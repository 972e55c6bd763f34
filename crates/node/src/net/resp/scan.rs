//! `SCAN`'s pieces (docs/RESP.md): its arguments, Redis's glob patterns
//! for `MATCH`, the bounded table that turns a cluster iteration's resume
//! key into an integer-looking cursor, as clients expect, and the reply of
//! one page. The page itself is computed on a range thread
//! (`crate::range::page_thread`) and delivered by the connection
//! (`crate::net::conn`'s `resp_scan`).

use super::encode::Reply;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Keys a page reads when `COUNT` is not given (Redis's default).
pub const SCAN_COUNT_DEFAULT: usize = 10;
/// Largest `COUNT` honoured: a larger one reads this many keys (the page is
/// held whole on the range thread and in the reply).
pub const SCAN_COUNT_MAX: usize = 10_000;

/// The error of a cursor this node does not know (never given, evicted
/// past [`CURSORS_MAX`], or given by another node or before a restart).
pub const UNKNOWN_CURSOR: &str = "invalid cursor: unknown or expired on this node (SCAN cursors \
     live in the memory of the node that gave them; restart the iteration from 0)";

/// A `SCAN` command's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanArgs {
    /// The cursor (`0`: a new iteration).
    pub cursor: u64,
    /// `MATCH`: only keys matching this glob are returned.
    pub pattern: Option<Vec<u8>>,
    /// Keys to read for this page (`COUNT`, at most [`SCAN_COUNT_MAX`]).
    pub count: usize,
    /// `TYPE`: false when it names a type other than `string` (every
    /// ataman value is a string: the iteration is empty).
    pub strings: bool,
}

/// Parses `SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]`, with Redis's
/// errors for malformed ones.
pub fn parse_args(args: &[Cow<'_, [u8]>]) -> Result<ScanArgs, Reply> {
    let cursor = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let mut scan = ScanArgs {
        cursor,
        pattern: None,
        count: SCAN_COUNT_DEFAULT,
        strings: true,
    };
    let mut rest = args[2..].chunks(2);
    for pair in &mut rest {
        let [option, value] = pair else {
            return Err(Reply::err("syntax error"));
        };
        if option.eq_ignore_ascii_case(b"match") {
            // `*` matches everything: no filter.
            scan.pattern = (&value[..] != b"*").then(|| value.to_vec());
        } else if option.eq_ignore_ascii_case(b"count") {
            let count = std::str::from_utf8(value)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or_else(|| Reply::err("value is not an integer or out of range"))?;
            if count < 1 {
                return Err(Reply::err("syntax error"));
            }
            scan.count = usize::try_from(count).map_or(SCAN_COUNT_MAX, |c| c.min(SCAN_COUNT_MAX));
        } else if option.eq_ignore_ascii_case(b"type") {
            scan.strings = value.eq_ignore_ascii_case(b"string");
        } else {
            return Err(Reply::err("syntax error"));
        }
    }
    Ok(scan)
}

/// The node's cursors (one table per process: a cursor resumes on any
/// connection to the node that gave it).
static CURSORS: Mutex<Cursors> = Mutex::new(Cursors {
    entries: VecDeque::new(),
    last_id: 0,
});

/// Where cursor `0` starts: the least key there can be (keys are never
/// empty, and a peer's range refuses an empty start).
pub const FIRST_KEY: &[u8] = &[0];

/// The key an iteration resumes at: `0` starts at [`FIRST_KEY`]; `None`
/// for a cursor this node does not know ([`UNKNOWN_CURSOR`]).
pub fn resume_key(cursor: u64) -> Option<Vec<u8>> {
    if cursor == 0 {
        return Some(FIRST_KEY.to_vec());
    }
    let cursors = CURSORS.lock().unwrap_or_else(|p| p.into_inner());
    cursors.get(cursor).map(<[u8]>::to_vec)
}

/// The reply of a page read from the cluster: the next cursor (`0` when
/// the iteration is done) and the page's keys that match `pattern`.
pub fn page_reply(keys: Vec<Vec<u8>>, next: Option<Vec<u8>>, pattern: Option<&[u8]>) -> Reply {
    let cursor = match next {
        Some(key) => CURSORS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key),
        None => 0,
    };
    let keys = keys
        .into_iter()
        .filter(|k| pattern.is_none_or(|p| glob_match(p, k)))
        .map(Reply::Bulk)
        .collect();
    Reply::Array(vec![Reply::text(cursor.to_string()), Reply::Array(keys)])
}

/// One single-byte element of a glob pattern, and the index after it.
fn element(pattern: &[u8], p: usize, byte: u8) -> (bool, usize) {
    match pattern[p] {
        b'?' => (true, p + 1),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == byte, p + 2),
        b'[' => class(pattern, p + 1, byte),
        literal => (literal == byte, p + 1),
    }
}

/// A `[...]` class starting after its `[`: `^` negates, `\` escapes,
/// `a-z` is a range (either order); a class the pattern ends inside
/// closes there, as Redis reads it.
fn class(pattern: &[u8], mut p: usize, byte: u8) -> (bool, usize) {
    let negated = pattern.get(p) == Some(&b'^');
    if negated {
        p += 1;
    }
    let mut matched = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            matched |= pattern[p + 1] == byte;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (a, b) = (pattern[p], pattern[p + 2]);
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            matched |= (low..=high).contains(&byte);
            p += 3;
        } else {
            matched |= pattern[p] == byte;
            p += 1;
        }
    }
    // Past the `]` (or at the end of an unterminated class).
    (matched != negated, (p + 1).min(pattern.len()))
}

/// Whether `text` matches the Redis glob `pattern`: `*` any run of bytes,
/// `?` one byte, `[abc]`, `[^a-z]` classes, `\x` the byte `x`; every other
/// byte itself. Iterative with one backtrack point (every element but `*`
/// matches exactly one byte), so its cost is bounded by
/// `pattern.len() * text.len()` whatever the pattern.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if pattern.get(p) == Some(&b'*') {
            star = Some((p + 1, t));
            p += 1;
            continue;
        }
        if p < pattern.len() {
            let (matched, next) = element(pattern, p, text[t]);
            if matched {
                p = next;
                t += 1;
                continue;
            }
        }
        match star {
            Some((after, from)) => {
                p = after;
                t = from + 1;
                star = Some((after, from + 1));
            }
            None => return false,
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// Cursors one node keeps; past it the oldest is forgotten.
pub const CURSORS_MAX: usize = 4096;

/// The cursors of unfinished iterations: an integer id for each resume
/// key, so a client sees a number. Oldest-first eviction bounds it; an
/// evicted or unknown cursor is an error the client restarts from `0`
/// (docs/RESP.md).
#[derive(Debug, Default)]
pub struct Cursors {
    entries: VecDeque<(u64, Vec<u8>)>,
    last_id: u64,
}

impl Cursors {
    /// A cursor for the iteration resuming at `key` (never 0: `0` starts
    /// and ends an iteration).
    pub fn insert(&mut self, key: Vec<u8>) -> u64 {
        self.last_id = self.last_id.wrapping_add(1).max(1);
        if self.entries.len() >= CURSORS_MAX {
            self.entries.pop_front();
        }
        self.entries.push_back((self.last_id, key));
        self.last_id
    }

    /// The resume key of `cursor`, if it is still kept.
    pub fn get(&self, cursor: u64) -> Option<&[u8]> {
        self.entries
            .iter()
            .rev()
            .find(|(id, _)| *id == cursor)
            .map(|(_, key)| key.as_slice())
    }

    /// Cursors kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What a `SCAN` page reads, for its admission: every key (the read role).
pub fn every_key() -> crate::net::dispatch::Command<'static> {
    crate::net::dispatch::Command::Range {
        start: Vec::new(),
        end: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Examples from Redis's documented glob semantics (`KEYS`, `SCAN
    /// MATCH`).
    #[test]
    fn globs_match_as_redis_documents() {
        let cases: &[(&str, &str, bool)] = &[
            ("h?llo", "hello", true),
            ("h?llo", "hallo", true),
            ("h?llo", "hxllo", true),
            ("h?llo", "hllo", false),
            ("h*llo", "hllo", true),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hbllo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hallo", true),
            ("h[a-b]llo", "hbllo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h[b-a]llo", "hallo", true),
            ("*", "", true),
            ("*", "anything", true),
            ("", "", true),
            ("", "x", false),
            ("a*", "a", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("user:*", "user:1000", true),
            ("user:*", "users:1", false),
            ("*:1?", "user:10", true),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("h\\?llo", "hello", false),
            ("[\\]]", "]", true),
            ("[a\\-z]", "-", true),
            ("[a\\-z]", "b", false),
            ("[abc", "b", true),
            ("[abc", "d", false),
            ("x\\", "x\\", true),
            ("**a**", "bab", true),
            (
                "*a*a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ];
        for &(pattern, text, expected) in cases {
            assert_eq!(
                glob_match(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern:?} against {text:?}"
            );
        }
    }

    use crate::net::resp::test_args as args;

    /// Options in any order and case; bad ones refused with Redis's words.
    #[test]
    fn arguments_parse_as_redis_reads_them() {
        let scan = parse_args(&args(&[
            "scan", "7", "count", "50", "MATCH", "a*", "type", "string",
        ]));
        let expected = ScanArgs {
            cursor: 7,
            pattern: Some(b"a*".to_vec()),
            count: 50,
            strings: true,
        };
        assert_eq!(scan, Ok(expected));
        let plain = parse_args(&args(&["scan", "0", "match", "*"])).ok();
        assert_eq!(
            plain.as_ref().map(|s| (s.count, s.pattern.is_none())),
            Some((SCAN_COUNT_DEFAULT, true))
        );
        let huge = parse_args(&args(&["scan", "0", "COUNT", "99999999999"])).ok();
        assert_eq!(huge.map(|s| s.count), Some(SCAN_COUNT_MAX));
        let hash = parse_args(&args(&["scan", "0", "TYPE", "hash"])).ok();
        assert_eq!(hash.map(|s| s.strings), Some(false));
        for bad in [
            &["scan", "x"][..],
            &["scan", "-1"],
            &["scan", "0", "count"],
            &["scan", "0", "count", "0"],
            &["scan", "0", "count", "ten"],
            &["scan", "0", "bogus", "1"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    /// A page's reply: a cursor that resumes at its next key, or `0`; its
    /// keys filtered by the pattern.
    #[test]
    fn page_replies_keep_the_resume_key_behind_a_cursor() {
        let keys = vec![b"ab".to_vec(), b"b".to_vec(), b"ac".to_vec()];
        let Reply::Array(parts) = page_reply(keys, Some(b"ac\0".to_vec()), Some(b"a*")) else {
            panic!("not an array");
        };
        let Reply::Bulk(cursor) = &parts[0] else {
            panic!("no cursor");
        };
        let cursor: u64 = String::from_utf8_lossy(cursor).parse().unwrap_or(0);
        assert_ne!(cursor, 0);
        assert_eq!(resume_key(cursor), Some(b"ac\0".to_vec()));
        assert_eq!(
            parts[1],
            Reply::Array(vec![
                Reply::Bulk(b"ab".to_vec()),
                Reply::Bulk(b"ac".to_vec())
            ])
        );
        assert_eq!(resume_key(0), Some(vec![0]));
        assert_eq!(resume_key(u64::MAX), None);
        let last = page_reply(Vec::new(), None, None);
        assert_eq!(
            last,
            Reply::Array(vec![Reply::text("0"), Reply::Array(Vec::new())])
        );
    }

    /// Cursors are never 0, found while kept, forgotten oldest first.
    #[test]
    fn cursors_are_bounded_oldest_first() {
        let mut cursors = Cursors::default();
        assert!(cursors.is_empty());
        let first = cursors.insert(b"a".to_vec());
        assert_ne!(first, 0);
        assert_eq!(cursors.get(first), Some(&b"a"[..]));
        assert_eq!(cursors.get(0), None);
        for i in 0..CURSORS_MAX {
            cursors.insert(i.to_string().into_bytes());
        }
        assert_eq!(cursors.len(), CURSORS_MAX);
        assert_eq!(cursors.get(first), None, "the oldest is evicted");
        let newest = cursors.insert(b"z".to_vec());
        assert_eq!(cursors.get(newest), Some(&b"z"[..]));
        assert_eq!(cursors.len(), CURSORS_MAX);
        // Ids skip 0 when they wrap.
        let mut wrapping = Cursors {
            last_id: u64::MAX,
            ..Cursors::default()
        };
        assert_eq!(wrapping.insert(b"w".to_vec()), 1);
    }
}
