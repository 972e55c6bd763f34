//! The RESP request decoder: RESP2 multibulk (`*N\r\n$L\r\n…\r\n`, what
//! every client library sends) and inline commands (`PING\r\n`, what a
//! person types over telnet).
//!
//! Pure: bytes in, a command's arguments (borrowed from the bytes where
//! no unescaping was needed) or `Partial` or an error out. Every length is
//! bounded before anything is allocated for it:
//! - the argument count by [`ARGS_MAX`];
//! - before a connection authenticates (client tokens on), both by the
//!   small [`Limits::UNAUTHENTICATED`] (10 arguments, bulks of 16 KiB);
//! - a bulk's length by [`Limits::bulk_bytes_max`] (the node passes the
//!   larger of `--value-bytes-max` and `--key-bytes-max`; the command table
//!   refuses a key or value over its own limit afterwards, keeping the
//!   connection);
//! - an inline line and a length line by [`INLINE_BYTES_MAX`] and
//!   [`LENGTH_LINE_BYTES_MAX`].
//!
//! Strict as redis-server 7 is (checked side by side,
//! `crates/ataman/tests/resp_strict.rs`): a `*N` or `$N` number is
//! [`parse_i64`]'s (`string2ll`: no leading zero, no `+`, no `-0`), else
//! `Protocol error: invalid multibulk length` or `invalid bulk length`; an
//! inline line splits as `sdssplitargs` splits it (`split_inline`). Two
//! places are stricter than Redis, which skips two bytes blindly there: a
//! CR of a length line not followed by LF, and a bulk not followed by
//! CRLF, are refused.
//!
//! Every [`DecodeError`] ends the connection after its reply: past a
//! malformed frame, or a bulk too large to buffer, the decoder cannot tell
//! where the next command starts (skipping the bulk would mean trusting
//! the length that was just refused), so the connection is closed after
//! the error reply, as Redis does; the node serves everyone else on.

use std::borrow::Cow;

/// Arguments in one command (the command's name included); a larger
/// multibulk count is refused.
pub const ARGS_MAX: usize = 1024 * 1024;
/// Longest inline command line (as Redis: 64 KiB).
pub const INLINE_BYTES_MAX: usize = 64 * 1024;
/// Longest `*N` or `$N` line, `\r\n` included; longer is malformed.
pub const LENGTH_LINE_BYTES_MAX: usize = 32;

/// Arguments in one command of a connection that has not authenticated
/// while client tokens are on (Redis's limit too): room for
/// `HELLO 3 AUTH user TOKEN SETNAME name`, nothing for a bulk load.
pub const UNAUTHENTICATED_ARGS_MAX: usize = 10;
/// Largest bulk of a connection that has not authenticated (Redis's
/// 16 KiB too); a token is far shorter.
pub const UNAUTHENTICATED_BULK_BYTES_MAX: usize = 16 * 1024;
/// Bytes a connection that has not authenticated may have buffered: its
/// largest command (ten bulks at their limit with their framing, or an
/// inline line of [`INLINE_BYTES_MAX`]) fits, a value of 16 MiB does not.
pub const UNAUTHENTICATED_READ_BYTES_MAX: usize = 256 * 1024;
const _: () = assert!(crate::auth::tokens::TOKEN_BYTES_MAX <= UNAUTHENTICATED_BULK_BYTES_MAX);
const _: () = assert!(
    LENGTH_LINE_BYTES_MAX
        + UNAUTHENTICATED_ARGS_MAX * (LENGTH_LINE_BYTES_MAX + UNAUTHENTICATED_BULK_BYTES_MAX + 2)
        <= UNAUTHENTICATED_READ_BYTES_MAX
        && INLINE_BYTES_MAX <= UNAUTHENTICATED_READ_BYTES_MAX
);

/// Bounds the decoder enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string.
    pub bulk_bytes_max: usize,
    /// Most arguments in one command (at most [`ARGS_MAX`]).
    pub args_max: usize,
    /// The connection has not authenticated (client tokens are on): the
    /// bounds are the small ones, and a refusal says so.
    pub unauthenticated: bool,
}

impl Limits {
    /// The bounds of an authenticated connection (or of any, without
    /// client tokens): bulks of `bulk_bytes_max`, [`ARGS_MAX`] arguments.
    pub fn authenticated(bulk_bytes_max: usize) -> Limits {
        Limits {
            bulk_bytes_max,
            args_max: ARGS_MAX,
            unauthenticated: false,
        }
    }

    /// The bounds before `AUTH` (docs/RESP.md, "Authentication").
    pub const UNAUTHENTICATED: Limits = Limits {
        bulk_bytes_max: UNAUTHENTICATED_BULK_BYTES_MAX,
        args_max: UNAUTHENTICATED_ARGS_MAX,
        unauthenticated: true,
    };

    /// The refusal of `count` arguments, over `args_max`.
    fn too_many(self, count: u64) -> DecodeError {
        if self.unauthenticated {
            DecodeError::Unauthenticated {
                what: "multibulk length",
                len: count,
                max: self.args_max,
            }
        } else {
            DecodeError::TooManyArgs(count)
        }
    }
}

/// Why the bytes cannot be decoded; the connection answers
/// `-ERR Protocol error: …` (or the refusal) and closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Malformed framing.
    #[error("Protocol error: {0}")]
    Protocol(&'static str),
    /// A multibulk's element is not a bulk string (Redis's words, the
    /// byte found in place of `$` as `shown_byte` shows it).
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedDollar(char),
    /// A multibulk count over [`ARGS_MAX`].
    #[error("Protocol error: {0} arguments over the limit of {ARGS_MAX}")]
    TooManyArgs(u64),
    /// A connection that has not authenticated sent a command over its
    /// small bounds ([`Limits::UNAUTHENTICATED`]).
    #[error("Protocol error: unauthenticated {what} {len} over {max} (AUTH first)")]
    Unauthenticated {
        /// `multibulk length` or `bulk length`.
        what: &'static str,
        /// The count or length sent.
        len: u64,
        /// The bound.
        max: usize,
    },
    /// A bulk over [`Limits::bulk_bytes_max`].
    #[error("Protocol error: a bulk of {len} bytes over the limit of {max} (--value-bytes-max)")]
    BulkTooLarge {
        /// Its declared length.
        len: u64,
        /// The limit.
        max: usize,
    },
}

/// One decoded command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    /// Its arguments, the command's name first; never empty.
    pub args: Vec<Cow<'a, [u8]>>,
    /// Bytes of the input it took.
    pub consumed: usize,
}

/// What the front of a buffer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// An incomplete command: read more.
    Partial,
    /// Bytes that carry no command (an empty line, `*0`, `*-1`): skip them.
    Skip(usize),
    /// A complete command.
    Command(Request<'a>),
}

/// Decodes the command at the front of `buf`.
pub fn decode(buf: &[u8], limits: Limits) -> Result<Decoded<'_>, DecodeError> {
    decode_into(buf, limits, Vec::new())
}

/// As [`decode`], a multibulk's arguments gathered in `spare` (emptied
/// first): the room of an earlier command's, so a connection allocates
/// none per command ([`recycle`]).
pub fn decode_into<'a>(
    buf: &'a [u8],
    limits: Limits,
    spare: Vec<Cow<'a, [u8]>>,
) -> Result<Decoded<'a>, DecodeError> {
    match buf.first() {
        None => Ok(Decoded::Partial),
        Some(b'*') => multibulk(buf, limits, spare),
        Some(_) => inline(buf, limits),
    }
}

/// `args` emptied, its room kept for arguments of any lifetime (the
/// standard library collects a `Vec`'s `into_iter().map(…)` into the
/// same allocation when the items have the same layout; an empty one
/// maps nothing).
pub fn recycle<'b>(mut args: Vec<Cow<'_, [u8]>>) -> Vec<Cow<'b, [u8]>> {
    args.clear();
    args.into_iter().map(|_| Cow::Borrowed(&[][..])).collect()
}

/// Which length line is read: its refusal names it as Redis does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LengthOf {
    /// A `*N` line: `invalid multibulk length`.
    Multibulk,
    /// A `$N` line: `invalid bulk length`.
    Bulk,
}

impl LengthOf {
    /// Redis's refusal of a malformed line of this kind.
    fn invalid(self) -> DecodeError {
        match self {
            LengthOf::Multibulk => DecodeError::Protocol(INVALID_MULTIBULK_LENGTH),
            LengthOf::Bulk => DecodeError::Protocol(INVALID_BULK_LENGTH),
        }
    }
}

/// Redis's words for a `*N` line that is no `string2ll` number.
pub const INVALID_MULTIBULK_LENGTH: &str = "invalid multibulk length";
/// Redis's words for a `$N` line that is no `string2ll` number, or negative.
pub const INVALID_BULK_LENGTH: &str = "invalid bulk length";

/// The number on a `*N` or `$N` line starting at `at` (its marker byte
/// included), and where the line after it starts; `None`: incomplete.
/// The number's grammar is [`parse_i64`]'s (Redis's `string2ll`: no
/// leading zero, no `+`, no `-0`); anything else is `what`'s refusal.
fn length_line(buf: &[u8], at: usize, what: LengthOf) -> Result<Option<(i64, usize)>, DecodeError> {
    let rest = &buf[at + 1..];
    // The usual line, 1 to 18 digits (no leading zero but a lone `0`) then
    // CRLF, in one pass: what the general path below makes of it too (no
    // sign, no overflow, the CR inside the window); anything else takes
    // that path.
    let mut n: i64 = 0;
    let mut digits = 0;
    while let Some(&d) = rest
        .get(digits)
        .filter(|d| d.is_ascii_digit() && digits < 18)
    {
        n = n * 10 + i64::from(d - b'0');
        digits += 1;
    }
    let canonical = digits == 1 || rest.first() != Some(&b'0');
    if digits > 0 && canonical && rest.get(digits..digits + 2) == Some(b"\r\n") {
        return Ok(Some((n, at + 1 + digits + 2)));
    }
    length_line_general(buf, at, what)
}

/// [`length_line`] for any line: a sign, a long number, malformed or
/// incomplete input.
fn length_line_general(
    buf: &[u8],
    at: usize,
    what: LengthOf,
) -> Result<Option<(i64, usize)>, DecodeError> {
    let rest = &buf[at + 1..];
    let window = &rest[..rest.len().min(LENGTH_LINE_BYTES_MAX)];
    let Some(end) = window.iter().position(|&b| b == b'\r') else {
        if rest.len() >= LENGTH_LINE_BYTES_MAX {
            // No `string2ll` number is this long: the line, once whole,
            // would be refused with these words (Redis waits for its end).
            return Err(what.invalid());
        }
        return Ok(None);
    };
    if end + 1 >= rest.len() {
        return Ok(None);
    }
    if rest[end + 1] != b'\n' {
        return Err(DecodeError::Protocol("expected \\n after \\r"));
    }
    let digits = &rest[..end];
    let n = parse_i64(digits).ok_or(what.invalid())?;
    Ok(Some((n, at + 1 + end + 2)))
}

/// Redis's `string2ll`: a decimal integer, `0` or a digit 1-9 first, with
/// an optional leading `-` (not before `0`); no other character (no `+`,
/// no leading zero, no space); `i64::MIN..=i64::MAX`, None past it. Every
/// integer argument and every length line is read with it, so `EX 01`,
/// `*01` and `$-0` are refused as Redis refuses them.
pub fn parse_i64(digits: &[u8]) -> Option<i64> {
    if digits == b"0" {
        return Some(0);
    }
    let (negative, body) = match digits.split_first() {
        Some((b'-', body)) => (true, body),
        _ => (false, digits),
    };
    // 20 digits already pass u64's range for most values; checked below.
    if !matches!(body.first(), Some(b'1'..=b'9'))
        || body.len() > 20
        || !body.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let magnitude = body.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    if negative {
        // -(2^63) is i64::MIN; 0u64.wrapping_sub keeps it exact.
        (magnitude <= i64::MIN.unsigned_abs()).then(|| 0i64.wrapping_sub_unsigned(magnitude))
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// A byte as an error reply shows it: printable ASCII as itself, a space
/// for any other (a reply line holds no CR or LF, and Redis's own `%c`
/// would send a raw control byte).
fn shown_byte(b: u8) -> char {
    if b.is_ascii_graphic() {
        char::from(b)
    } else {
        ' '
    }
}

fn multibulk<'a>(
    buf: &'a [u8],
    limits: Limits,
    spare: Vec<Cow<'a, [u8]>>,
) -> Result<Decoded<'a>, DecodeError> {
    let Some((count, mut at)) = length_line(buf, 0, LengthOf::Multibulk)? else {
        return Ok(Decoded::Partial);
    };
    if count <= 0 {
        // Redis ignores an empty or null multibulk.
        return Ok(Decoded::Skip(at));
    }
    if count as u64 > limits.args_max.min(ARGS_MAX) as u64 {
        return Err(limits.too_many(count as u64));
    }
    let count = count as usize;
    // Reserve by what the bytes present can hold, not by the claim.
    let mut args = spare;
    args.clear();
    args.reserve(count.min(buf.len() / 4 + 1));
    for _ in 0..count {
        match buf.get(at) {
            None => return Ok(Decoded::Partial),
            Some(b'$') => {}
            Some(&got) => return Err(DecodeError::ExpectedDollar(shown_byte(got))),
        }
        let Some((len, start)) = length_line(buf, at, LengthOf::Bulk)? else {
            return Ok(Decoded::Partial);
        };
        if len < 0 {
            return Err(LengthOf::Bulk.invalid());
        }
        if len as u64 > limits.bulk_bytes_max as u64 && limits.unauthenticated {
            return Err(DecodeError::Unauthenticated {
                what: "bulk length",
                len: len as u64,
                max: limits.bulk_bytes_max,
            });
        }
        if len as u64 > limits.bulk_bytes_max as u64 {
            return Err(DecodeError::BulkTooLarge {
                len: len as u64,
                max: limits.bulk_bytes_max,
            });
        }
        let end = start + len as usize;
        if buf.len() < end + 2 {
            return Ok(Decoded::Partial);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(DecodeError::Protocol("expected \\r\\n after a bulk"));
        }
        args.push(Cow::Borrowed(&buf[start..end]));
        at = end + 2;
    }
    Ok(Decoded::Command(Request { args, consumed: at }))
}

fn inline(buf: &[u8], limits: Limits) -> Result<Decoded<'_>, DecodeError> {
    let window = &buf[..buf.len().min(INLINE_BYTES_MAX)];
    let Some(newline) = window.iter().position(|&b| b == b'\n') else {
        if buf.len() >= INLINE_BYTES_MAX {
            return Err(DecodeError::Protocol("too big inline request"));
        }
        return Ok(Decoded::Partial);
    };
    let consumed = newline + 1;
    let line = match buf[..newline].split_last() {
        Some((b'\r', line)) => line,
        _ => &buf[..newline],
    };
    let args = split_inline(line)?;
    if args.is_empty() {
        return Ok(Decoded::Skip(consumed));
    }
    if args.len() > limits.args_max.min(ARGS_MAX) {
        return Err(limits.too_many(args.len() as u64));
    }
    Ok(Decoded::Command(Request { args, consumed }))
}

/// Splits an inline line into arguments as Redis's `sdssplitargs` does:
/// - blanks between arguments are any of `isspace`'s (space, `\t`, `\n`,
///   `\v`, `\f`, `\r`), so `PING\rECHO x` is three arguments;
/// - an unquoted run ends at a space, `\t`, `\n` or `\r` (`\v` and `\f`
///   are its bytes, as in Redis);
/// - a `"` or `'` anywhere in an argument opens a quoted part that ends
///   it: `a"b c"` is `ab c`; `"…"` takes the escapes `\n \r \t \b \a
///   \xHH` and `\c` for any other `c`, `'…'` only `\'`;
/// - after a closing quote comes a blank or the line's end; else, or
///   with a quote left open, the line is malformed ([`UNBALANCED`]).
///
/// One difference, on purpose: a NUL byte is an ordinary byte here (Redis
/// reads an inline line as a C string and never finds the end of one
/// that holds a NUL: it waits for more until the line is too big).
fn split_inline(line: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, DecodeError> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|&b| is_blank(b)) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(args);
        }
        let start = i;
        while line
            .get(i)
            .is_some_and(|&b| !ends_unquoted(b) && b != b'"' && b != b'\'')
        {
            i += 1;
        }
        match line.get(i) {
            Some(&quote @ (b'"' | b'\'')) => {
                let mut arg = line[start..i].to_vec();
                i = if quote == b'"' {
                    double_quoted(line, i + 1, &mut arg)?
                } else {
                    single_quoted(line, i + 1, &mut arg)?
                };
                args.push(Cow::Owned(arg));
            }
            _ => args.push(Cow::Borrowed(&line[start..i])),
        }
    }
}

/// C's `isspace`: the blanks skipped between inline arguments.
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The bytes that end an unquoted inline argument (`sdssplitargs`'s).
fn ends_unquoted(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The refusal of an inline line with a quote left open, or a closing
/// quote not followed by a blank (Redis's words).
pub const UNBALANCED: DecodeError = DecodeError::Protocol("unbalanced quotes in request");

/// After a closing quote there must be a blank or the end of the line.
fn after_quote(line: &[u8], close: usize) -> Result<usize, DecodeError> {
    match line.get(close + 1) {
        None => Ok(close + 1),
        Some(&b) if is_blank(b) => Ok(close + 1),
        Some(_) => Err(UNBALANCED),
    }
}

/// The rest of a `"…"` part from `i` (past the opening quote) appended
/// to `arg`; where the argument ends.
fn double_quoted(line: &[u8], mut i: usize, arg: &mut Vec<u8>) -> Result<usize, DecodeError> {
    loop {
        match line.get(i) {
            None => return Err(UNBALANCED),
            Some(b'"') => return after_quote(line, i),
            Some(b'\\') => {
                let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
                match (line.get(i + 1), hex(line.get(i + 2)), hex(line.get(i + 3))) {
                    (Some(b'x'), Some(h), Some(l)) => {
                        arg.push((h * 16 + l) as u8);
                        i += 4;
                    }
                    (Some(&c), _, _) => {
                        arg.push(match c {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                        i += 2;
                    }
                    (None, _, _) => return Err(UNBALANCED),
                }
            }
            Some(&c) => {
                arg.push(c);
                i += 1;
            }
        }
    }
}

/// The rest of a `'…'` part from `i` (past the opening quote) appended
/// to `arg`; where the argument ends.
fn single_quoted(line: &[u8], mut i: usize, arg: &mut Vec<u8>) -> Result<usize, DecodeError> {
    loop {
        match line.get(i) {
            None => return Err(UNBALANCED),
            Some(b'\'') => return after_quote(line, i),
            Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                arg.push(b'\'');
                i += 2;
            }
            Some(&c) => {
                arg.push(c);
                i += 1;
            }
        }
    }
}

/// `args` as a RESP2 multibulk request (what clients send): the model the
/// decoder is tested against, and the tests' and fuzzers' encoder.
pub fn encode_request(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        bulk_bytes_max: 1024,
        args_max: ARGS_MAX,
        unauthenticated: false,
    };

    /// A multibulk of `n` arguments of `len` bytes each.
    fn multibulk_of(n: usize, len: usize) -> Vec<u8> {
        let arg = vec![b'a'; len];
        let args: Vec<&[u8]> = (0..n).map(|_| &arg[..]).collect();
        let mut buf = Vec::new();
        encode_request(&mut buf, &args);
        buf
    }

    // Before AUTH a command may have 10 arguments and bulks of 16 KiB, and
    // no more (multibulk and inline); the refusal names the bound.
    #[test]
    fn unauthenticated_limits_hold_at_and_past_the_bound() {
        let at = Limits::UNAUTHENTICATED;
        let buf = multibulk_of(UNAUTHENTICATED_ARGS_MAX, 1);
        assert_eq!(
            args_of(decode(&buf, at).unwrap()).0.len(),
            UNAUTHENTICATED_ARGS_MAX
        );
        let e = decode(&multibulk_of(UNAUTHENTICATED_ARGS_MAX + 1, 1), at).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Protocol error: unauthenticated multibulk length 11 over 10 (AUTH first)"
        );
        let buf = multibulk_of(1, UNAUTHENTICATED_BULK_BYTES_MAX);
        assert_eq!(args_of(decode(&buf, at).unwrap()).1, buf.len());
        // Refused on its length line, before any of its bytes are sent.
        let e = decode(b"*1\r\n$16385\r\n", at).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Protocol error: unauthenticated bulk length 16385 over 16384 (AUTH first)"
        );
        let inline = format!("{}\r\n", ["a"; 11].join(" "));
        assert!(matches!(
            decode(inline.as_bytes(), at),
            Err(DecodeError::Unauthenticated { len: 11, .. })
        ));
        // Authenticated, the same commands pass.
        let big = Limits::authenticated(1 << 20);
        assert!(decode(&multibulk_of(11, UNAUTHENTICATED_BULK_BYTES_MAX + 1), big).is_ok());
    }

    fn args_of(d: Decoded<'_>) -> (Vec<Vec<u8>>, usize) {
        match d {
            Decoded::Command(r) => (r.args.iter().map(|a| a.to_vec()).collect(), r.consumed),
            other => panic!("not a command: {other:?}"),
        }
    }

    // A connection decodes into the room of its last command's arguments:
    // the stale ones never show, and the room is kept, not reallocated.
    #[test]
    fn decoding_into_spare_room_keeps_the_room_and_none_of_its_arguments() {
        let first = multibulk_of(5, 3);
        let Decoded::Command(request) = decode(&first, LIMITS).unwrap() else {
            panic!("not a command");
        };
        let room = request.args.capacity();
        let spare = recycle(request.args);
        assert!(spare.is_empty());
        assert_eq!(spare.capacity(), room, "recycle keeps the allocation");
        let mut second = Vec::new();
        encode_request(&mut second, &[b"GET", b"k"]);
        let decoded = decode_into(&second, LIMITS, spare).unwrap();
        assert_eq!(decoded, decode(&second, LIMITS).unwrap());
        assert_eq!(args_of(decoded).0, vec![b"GET".to_vec(), b"k".to_vec()]);
        // Inline commands and partial input ignore the room.
        assert_eq!(
            decode_into(b"PING\r\n", LIMITS, vec![Cow::Borrowed(&b"x"[..])]).unwrap(),
            decode(b"PING\r\n", LIMITS).unwrap()
        );
        let stale = vec![Cow::Borrowed(&b"x"[..])];
        assert_eq!(
            decode_into(b"*2\r\n$3\r\nGET", LIMITS, stale),
            Ok(Decoded::Partial)
        );
    }

    #[test]
    fn a_multibulk_is_its_arguments_and_its_length() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1";
        let (args, consumed) = args_of(decode(buf, LIMITS).unwrap());
        assert_eq!(args, vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(consumed, buf.len() - 2);
        assert_eq!(decode(&buf[consumed..], LIMITS), Ok(Decoded::Partial));
    }

    #[test]
    fn every_proper_prefix_is_partial() {
        let mut buf = Vec::new();
        encode_request(&mut buf, &[b"SET", b"k\r\n\0", b""]);
        for end in 0..buf.len() {
            assert_eq!(decode(&buf[..end], LIMITS), Ok(Decoded::Partial), "{end}");
        }
        assert_eq!(args_of(decode(&buf, LIMITS).unwrap()).1, buf.len());
    }

    #[test]
    fn inline_commands_split_on_spaces_and_quotes() {
        let (args, consumed) = args_of(decode(b"PING\r\n", LIMITS).unwrap());
        assert_eq!((args, consumed), (vec![b"PING".to_vec()], 6));
        let (args, _) = args_of(decode(b"set  \"a b\\x41\\n\" 'it\\'s'\tz\n", LIMITS).unwrap());
        assert_eq!(
            args,
            vec![
                b"set".to_vec(),
                b"a bA\n".to_vec(),
                b"it's".to_vec(),
                b"z".to_vec()
            ]
        );
        assert_eq!(decode(b"\r\n", LIMITS), Ok(Decoded::Skip(2)));
        assert_eq!(decode(b"PING", LIMITS), Ok(Decoded::Partial));
        assert_eq!(decode(b"get \"a\n", LIMITS), Err(UNBALANCED));
        assert_eq!(decode(b"get \"a\"b\n", LIMITS), Err(UNBALANCED));
    }

    /// `parse_i64` takes all of i64 as Redis's `string2ll` does (it took
    /// 18 digits at most, so `CONFIG SET … 9223372036854775807` was "not an
    /// integer"), and nothing past it.
    #[test]
    fn parse_i64_takes_the_whole_range_and_nothing_past_it() {
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"1000000000000000000"), Some(10i64.pow(18)));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-9223372036854775809"), None);
        assert_eq!(parse_i64(b"18446744073709551616"), None);
        assert_eq!(parse_i64(b"99999999999999999999999"), None);
        // string2ll's strictness: no leading zero, no `-0`, no `+`.
        for bad in [
            &b""[..],
            b"-",
            b"+5",
            b"5 ",
            b" 5",
            b"1e3",
            b"--1",
            b"0x10",
            b"-0",
            b"007",
            b"00",
            b"-01",
            b"1.0",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn malformed_and_oversized_frames_are_errors() {
        let protocol = |b: &[u8]| matches!(decode(b, LIMITS), Err(DecodeError::Protocol(_)));
        assert!(protocol(b"*x\r\n"));
        assert_eq!(
            decode(b"*1\r\n:1\r\n", LIMITS),
            Err(DecodeError::ExpectedDollar(':'))
        );
        assert!(protocol(b"*1\r\n$-1\r\n"));
        assert!(protocol(b"*1\r\n$1\r\nab\r\n"));
        assert!(protocol(b"*1\rx"));
        assert!(protocol(&[b'*'; 64]));
        assert!(protocol(&vec![b'a'; INLINE_BYTES_MAX]));
        assert_eq!(
            decode(b"*1\r\n$1025\r\n", LIMITS),
            Err(DecodeError::BulkTooLarge {
                len: 1025,
                max: 1024
            })
        );
        assert_eq!(
            decode(format!("*{}\r\n", ARGS_MAX + 1).as_bytes(), LIMITS),
            Err(DecodeError::TooManyArgs(ARGS_MAX as u64 + 1))
        );
        assert_eq!(decode(b"*0\r\n", LIMITS), Ok(Decoded::Skip(4)));
        assert_eq!(decode(b"*-1\r\n", LIMITS), Ok(Decoded::Skip(5)));
        let e = DecodeError::Protocol(INVALID_BULK_LENGTH).to_string();
        assert_eq!(e, "Protocol error: invalid bulk length");
        let e = DecodeError::ExpectedDollar(shown_byte(b'\r')).to_string();
        assert_eq!(e, "Protocol error: expected '$', got ' '");
    }

    /// What a case decodes to, as the table below writes it.
    #[derive(Debug, PartialEq)]
    enum Outcome {
        /// A command of these arguments, the whole input taken.
        Args(&'static [&'static [u8]]),
        /// No command: these bytes skipped.
        Skip(usize),
        /// Refused: `-ERR ` and these words, then the connection closes.
        Refused(&'static str),
    }

    /// What the decoder made of a case.
    #[derive(Debug)]
    enum Got {
        Command(Vec<Vec<u8>>, usize),
        Skipped(usize),
        Partial,
        Refused(String),
    }

    fn outcome_of(input: &[u8]) -> Got {
        match decode(input, LIMITS) {
            Ok(Decoded::Command(r)) => {
                Got::Command(r.args.iter().map(|a| a.to_vec()).collect(), r.consumed)
            }
            Ok(Decoded::Skip(n)) => Got::Skipped(n),
            Ok(Decoded::Partial) => Got::Partial,
            Err(e) => Got::Refused(e.to_string()),
        }
    }

    /// Each case as redis-server 7.0 answers it (checked side by side:
    /// `crates/ataman/tests/resp_strict.rs` sends the same bytes to both):
    /// lengths and integers are `string2ll`'s (no leading zero, no `+`, no
    /// `-0`), refused with Redis's words; inline lines split as
    /// `sdssplitargs` splits them.
    #[test]
    fn malformed_lengths_and_inline_lines_decode_as_redis_decodes_them() {
        use Outcome::*;
        const MULTI: &str = "Protocol error: invalid multibulk length";
        const BULK: &str = "Protocol error: invalid bulk length";
        const QUOTES: &str = "Protocol error: unbalanced quotes in request";
        let cases: &[(&[u8], Outcome)] = &[
            // Lengths.
            (b"*1\r\n$4\r\nPING\r\n", Args(&[b"PING"])),
            (b"*01\r\n$4\r\nPING\r\n", Refused(MULTI)),
            (b"*00\r\n", Refused(MULTI)),
            (b"*-0\r\n", Refused(MULTI)),
            (b"*+1\r\n$4\r\nPING\r\n", Refused(MULTI)),
            (b"*\r\n", Refused(MULTI)),
            (b"*1 \r\n", Refused(MULTI)),
            (b"*-01\r\n", Refused(MULTI)),
            (
                b"*1111111111111111111111111111111111111111\r\n",
                Refused(MULTI),
            ),
            (b"*1\r\n$04\r\nPING\r\n", Refused(BULK)),
            (b"*1\r\n$-0\r\n", Refused(BULK)),
            (b"*1\r\n$+4\r\nPING\r\n", Refused(BULK)),
            (b"*1\r\n$\r\n", Refused(BULK)),
            (b"*1\r\n$-1\r\n", Refused(BULK)),
            (
                b"*1\r\n$1111111111111111111111111111111111111111\r\n",
                Refused(BULK),
            ),
            (
                b"*1\r\n:4\r\n",
                Refused("Protocol error: expected '$', got ':'"),
            ),
            (b"*0\r\n", Skip(4)),
            (b"*-1\r\n", Skip(5)),
            (b"*-5\r\n", Skip(5)),
            (b"*1\r\n$0\r\n\r\n", Args(&[b""])),
            // Inline lines.
            (b"PING\rECHO x\r\n", Args(&[b"PING", b"ECHO", b"x"])),
            (b"PING\rx\n", Args(&[b"PING", b"x"])),
            (b"ECHO\tx\r\n", Args(&[b"ECHO", b"x"])),
            (b"ECHO \"a\\x41\"\r\n", Args(&[b"ECHO", b"aA"])),
            (b"ECHO 'a b'\r\n", Args(&[b"ECHO", b"a b"])),
            (b"ECHO a\"b c\"\r\n", Args(&[b"ECHO", b"ab c"])),
            (b"ECHO \x0bx\r\n", Args(&[b"ECHO", b"x"])),
            (b"ECHO a\x0bb\x0c\r\n", Args(&[b"ECHO", b"a\x0bb\x0c"])),
            (b"ECHO \"a\"\x0bb\r\n", Args(&[b"ECHO", b"a", b"b"])),
            (
                b"ECHO \"\\q\" \"\\x4g\"\r\n",
                Args(&[b"ECHO", b"q", b"x4g"]),
            ),
            (
                b"ECHO '\\n' 'it\\'s'\r\n",
                Args(&[b"ECHO", b"\\n", b"it's"]),
            ),
            (b"ECHO \"\" ''\r\n", Args(&[b"ECHO", b"", b""])),
            (b"ECHO \"a\r\n", Refused(QUOTES)),
            (b"ECHO 'a\r\n", Refused(QUOTES)),
            (b"ECHO a\"b\"c\r\n", Refused(QUOTES)),
            (b"ECHO a'b\r\n", Refused(QUOTES)),
            (b"ECHO ''x\r\n", Refused(QUOTES)),
            (b"ECHO \"a\\\r\n", Refused(QUOTES)),
            (b" \t\x0b\r\n", Skip(5)),
            (b"\n", Skip(1)),
        ];
        for (input, want) in cases {
            let got = outcome_of(input);
            let ok = match (want, &got) {
                (Args(args), Got::Command(got_args, consumed)) => {
                    *consumed == input.len() && got_args.iter().eq(args.iter())
                }
                (Skip(n), Got::Skipped(skipped)) => n == skipped,
                (Refused(words), Got::Refused(text)) => text == words,
                _ => false,
            };
            assert!(
                ok,
                "{:?}: want {want:?}, got {got:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Decodes `stream` as a connection would if it arrived in pieces cut
    /// at `cuts`: decode what is buffered after each piece.
    fn decode_in_pieces(stream: &[u8], cuts: &[usize]) -> Vec<Vec<Vec<u8>>> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.push(stream.len());
        cuts.sort_unstable();
        let (mut got, mut start) = (Vec::new(), 0);
        for cut in cuts {
            loop {
                match decode(&stream[start..cut.max(start)], LIMITS).unwrap() {
                    Decoded::Partial => break,
                    Decoded::Skip(n) => start += n,
                    Decoded::Command(r) => {
                        got.push(r.args.iter().map(|a| a.to_vec()).collect());
                        start += r.consumed;
                    }
                }
            }
        }
        assert_eq!(start, stream.len());
        got
    }

    // A length line's one-pass reading is the general one's, on the lines
    // it takes (short numbers) and at its bounds (18 and 19 digits).
    #[test]
    fn short_length_lines_read_as_the_general_path_reads_them() {
        for line in [
            &b"$0\r\n"[..],
            b"$3\r\nGET",
            b"*18446744073709551615\r\n",
            b"$999999999999999999\r\n",
            b"$9999999999999999999\r\n",
            b"$-1\r\n",
            b"$12\r",
            b"$12\rx",
            b"$1 \r\n",
            b"$0\r\n",
            b"$01\r\n",
            b"$00\r\n",
            b"$-0\r\n",
            b"$10\r\n",
            b"$",
        ] {
            for what in [LengthOf::Multibulk, LengthOf::Bulk] {
                assert_eq!(
                    length_line(line, 0, what),
                    length_line_general(line, 0, what),
                    "{line:?}"
                );
            }
        }
        assert_eq!(
            length_line(b"$999999999999999999\r\n", 0, LengthOf::Bulk),
            Ok(Some((999_999_999_999_999_999, 21)))
        );
    }

    proptest! {
        /// Any bytes after the marker: both paths read them alike.
        #[test]
        fn length_line_is_the_general_path(
            digits in "[0-9]{0,22}",
            tail in prop::collection::vec(prop::sample::select(vec![b'\r', b'\n', b'0', b'-', b'x']), 0..4),
        ) {
            let mut line = b"$".to_vec();
            line.extend_from_slice(digits.as_bytes());
            line.extend_from_slice(&tail);
            prop_assert_eq!(
                length_line(&line, 0, LengthOf::Bulk),
                length_line_general(&line, 0, LengthOf::Bulk)
            );
        }

        /// The decoder against the encoder model: any commands, any split.
        #[test]
        fn decodes_what_the_model_encodes_at_any_split(
            commands in prop::collection::vec(
                prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6),
                1..8,
            ),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
        ) {
            let mut stream = Vec::new();
            for c in &commands {
                let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                encode_request(&mut stream, &args);
            }
            prop_assert_eq!(decode_in_pieces(&stream, &cuts), commands);
        }

        /// Arbitrary bytes never panic, and a command never claims bytes
        /// it was not given.
        #[test]
        fn arbitrary_bytes_are_decoded_or_refused(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            match decode(&bytes, LIMITS) {
                Ok(Decoded::Command(r)) => prop_assert!(r.consumed <= bytes.len() && !r.args.is_empty()),
                Ok(Decoded::Skip(n)) => prop_assert!(n > 0 && n <= bytes.len()),
                Ok(Decoded::Partial) | Err(_) => {}
            }
        }
    }
}
