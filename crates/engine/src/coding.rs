//! Little helpers for the byte formats: LEB128 varints, fixed-width
//! integers, and ASCII decimals (HTTP heads and ids, written by the node
//! and by the load generator).
//!
//! Decoders take a `&mut &[u8]` cursor and return `None` when the input ends
//! early or is malformed; callers turn that into a corruption error that
//! names the file and offset.

/// Digits of the largest `u64` in decimal.
const DECIMAL_DIGITS_MAX: usize = 20;

/// The two-digit decimals `00` to `99`, side by side.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Appends `n` in decimal (what `write!(out, "{n}")` writes, without `fmt`
/// and without allocating), two digits per division: an HTTP answer
/// writes three or four numbers (a 19-digit version twice).
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; DECIMAL_DIGITS_MAX];
    let mut at = DECIMAL_DIGITS_MAX;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    out.extend_from_slice(&digits[at..]);
}

/// Longest LEB128 encoding of a `u64`.
pub const VARINT64_BYTES_MAX: usize = 10;

/// Appends `v` as an unsigned LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads an unsigned LEB128 varint; `None` if truncated or longer than 10 bytes.
pub fn get_varint(input: &mut &[u8]) -> Option<u64> {
    let mut result: u64 = 0;
    for i in 0..VARINT64_BYTES_MAX {
        let byte = *input.get(i)?;
        let part = u64::from(byte & 0x7f);
        if i == VARINT64_BYTES_MAX - 1 && byte > 1 {
            return None; // would overflow 64 bits
        }
        result |= part << (7 * i);
        if byte & 0x80 == 0 {
            *input = &input[i + 1..];
            return Some(result);
        }
    }
    None
}

/// Reads a varint that must fit in `usize` and be at most `max`.
pub fn get_len(input: &mut &[u8], max: usize) -> Option<usize> {
    let v = usize::try_from(get_varint(input)?).ok()?;
    (v <= max).then_some(v)
}

/// Splits `n` bytes off the front of the cursor.
pub fn get_bytes<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if input.len() < n {
        return None;
    }
    let (head, tail) = input.split_at(n);
    *input = tail;
    Some(head)
}

/// Reads a little-endian `u32`.
pub fn get_u32_le(input: &mut &[u8]) -> Option<u32> {
    let b = get_bytes(input, 4)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

/// Reads a little-endian `u64`.
pub fn get_u64_le(input: &mut &[u8]) -> Option<u64> {
    let b = get_bytes(input, 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// Reads one byte.
pub fn get_u8(input: &mut &[u8]) -> Option<u8> {
    let b = *input.first()?;
    *input = &input[1..];
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decimal(n: u64) -> String {
        let mut out = b"x".to_vec();
        push_decimal(&mut out, n);
        String::from_utf8(out).unwrap()
    }

    /// Decimals are `fmt`'s at every digit count's bounds, appended.
    #[test]
    fn decimals_are_what_fmt_writes_at_every_width() {
        let mut n = 1u64;
        for _ in 0..20 {
            for v in [n - 1, n, n + 1, n.saturating_mul(10) - 1] {
                assert_eq!(decimal(v), format!("x{v}"));
            }
            n = n.saturating_mul(10);
        }
        assert_eq!(decimal(u64::MAX), format!("x{}", u64::MAX));
    }

    proptest! {
        /// Any `u64` reads as `fmt` writes it.
        #[test]
        fn decimals_match_fmt(v in any::<u64>()) {
            prop_assert_eq!(decimal(v), format!("x{v}"));
        }
    }

    /// Varints round-trip at every width and reject truncation and overflow.
    #[test]
    fn varint_round_trip_and_rejects() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut cur = &buf[..];
            assert_eq!(get_varint(&mut cur), Some(v));
            assert!(cur.is_empty());
            let mut short = &buf[..buf.len() - 1];
            assert_eq!(get_varint(&mut short), None);
        }
        let mut overflow: &[u8] = &[0xff; 10];
        assert_eq!(get_varint(&mut overflow), None);
    }
}
