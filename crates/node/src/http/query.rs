//! Query strings: splitting `a=1&b=2` and percent-decoding the parts.

/// Why a query could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError(pub String);

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `s` (`%XX` → byte; `+` stays `+`). A truncated or
/// non-hex escape is an error, never silently kept.
pub fn percent_decode(s: &[u8]) -> Result<Vec<u8>, QueryError> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let (Some(&h), Some(&l)) = (s.get(i + 1), s.get(i + 2)) else {
                return Err(QueryError(format!("truncated percent escape at byte {i}")));
            };
            match (hex(h), hex(l)) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(QueryError(format!("bad percent escape at byte {i}"))),
            }
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Percent-encodes bytes for a query value (unreserved characters kept).
pub fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One decoded `name=value` pair.
pub type Param = (Vec<u8>, Vec<u8>);

/// The decoded parameters of a query string, in order.
pub fn parse_query(query: &[u8]) -> Result<Vec<Param>, QueryError> {
    let mut params = Vec::new();
    for part in query.split(|&b| b == b'&') {
        if part.is_empty() {
            continue;
        }
        let (name, value) = match part.iter().position(|&b| b == b'=') {
            Some(eq) => (&part[..eq], &part[eq + 1..]),
            None => (part, &[][..]),
        };
        params.push((percent_decode(name)?, percent_decode(value)?));
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Escapes decode, `+` is kept, bad escapes are errors.
    #[test]
    fn decoding() {
        assert_eq!(percent_decode(b"a%2Fb+c").unwrap(), b"a/b+c");
        assert_eq!(percent_decode(b"%00%ff").unwrap(), vec![0, 255]);
        assert!(percent_decode(b"%G1").is_err());
        assert!(percent_decode(b"%4").is_err());
        assert!(percent_decode(b"abc%").is_err());
        let q = parse_query(b"id=k%20y&ack=1&&flag").unwrap();
        assert_eq!(q[0], (b"id".to_vec(), b"k y".to_vec()));
        assert_eq!(q[2], (b"flag".to_vec(), Vec::new()));
    }

    proptest! {
        /// Encoding then decoding returns the bytes; arbitrary input never panics.
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..64), junk in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(percent_decode(percent_encode(&bytes).as_bytes()).unwrap(), bytes);
            let _ = parse_query(&junk);
        }
    }
}
