//! `SCAN`'s pure pieces (the command itself is not served yet;
//! docs/RESP.md): Redis's glob patterns for `MATCH`, and the bounded table
//! that turns a cluster iteration's resume key into an integer-looking
//! cursor, as clients expect.

use std::collections::VecDeque;

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
