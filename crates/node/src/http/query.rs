//! Query strings: splitting `a=1&b=2` and percent-decoding the parts.

use std::borrow::Cow;

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

/// [`percent_decode`] that borrows `s` when it holds no escape (the usual
/// case: `id=123`), so decoding allocates only for escaped text.
pub fn percent_decode_cow(s: &[u8]) -> Result<Cow<'_, [u8]>, QueryError> {
    if s.contains(&b'%') {
        percent_decode(s).map(Cow::Owned)
    } else {
        Ok(Cow::Borrowed(s))
    }
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

/// The raw `name=value` parts of a query string, in order, not decoded
/// (empty parts skipped; a part without `=` has an empty value).
pub fn raw_pairs(query: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    query
        .split(|&b| b == b'&')
        .filter(|part| !part.is_empty())
        .map(|part| match part.iter().position(|&b| b == b'=') {
            Some(eq) => (&part[..eq], &part[eq + 1..]),
            None => (part, &[][..]),
        })
}

/// The decoded parameters of a query string, in order.
pub fn parse_query(query: &[u8]) -> Result<Vec<Param>, QueryError> {
    raw_pairs(query)
        .map(|(name, value)| Ok((percent_decode(name)?, percent_decode(value)?)))
        .collect()
}

/// A query string checked once (every escape valid, the same errors as
/// [`parse_query`]) whose parameters are then looked up by name without
/// allocating, unless a name or value holds an escape.
///
/// A query without any `%` (the usual one: `id=123`) has nothing to check
/// or decode: it is walked once, by [`Query::for_each`], not twice.
#[derive(Debug, Clone, Copy)]
pub struct Query<'q> {
    raw: &'q [u8],
    /// True when `raw` holds a `%`: its parts are decoded.
    escaped: bool,
}

impl<'q> Query<'q> {
    /// Checks every part of `raw`; the error is the one [`parse_query`]
    /// gives for the same input (none without a `%`).
    pub fn parse(raw: &'q [u8]) -> Result<Self, QueryError> {
        let escaped = raw.contains(&b'%');
        if escaped {
            for (name, value) in raw_pairs(raw) {
                percent_decode_cow(name)?;
                percent_decode_cow(value)?;
            }
        }
        Ok(Query { raw, escaped })
    }

    /// Calls `f` with every parameter's decoded name and value, in order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Cow<'q, [u8]>)) {
        if !self.escaped {
            for (name, value) in raw_pairs(self.raw) {
                f(name, Cow::Borrowed(value));
            }
            return;
        }
        for (name, value) in raw_pairs(self.raw) {
            // Checked in `parse`: decoding cannot fail here.
            if let (Ok(name), Ok(value)) = (percent_decode_cow(name), percent_decode_cow(value)) {
                f(&name, value);
            }
        }
    }

    /// The decoded values of every parameter whose decoded name is `name`, in order.
    pub fn values(&self, name: &[u8]) -> Vec<Cow<'q, [u8]>> {
        let mut found = Vec::new();
        self.for_each(|n, v| {
            if n == name {
                found.push(v);
            }
        });
        found
    }
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
        /// `Query` agrees with `parse_query` (the model): the same error,
        /// or for every name the same values in the same order.
        #[test]
        fn query_matches_parse_query(
            parts in proptest::collection::vec(("[a-c%=]{0,3}", "[0-9a-f%=G]{0,4}"), 0..6),
        ) {
            let raw = parts
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join("&");
            let model = parse_query(raw.as_bytes());
            let query = Query::parse(raw.as_bytes());
            match (&model, &query) {
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (Ok(list), Ok(q)) => {
                    for (name, _) in list {
                        let want: Vec<&[u8]> = list
                            .iter()
                            .filter(|(n, _)| n == name)
                            .map(|(_, v)| v.as_slice())
                            .collect();
                        let got = q.values(name);
                        prop_assert_eq!(got.iter().map(|v| &**v).collect::<Vec<_>>(), want);
                    }
                    prop_assert!(q.values(b"zz").is_empty());
                }
                _ => prop_assert!(false, "model {:?} vs query {:?}", model, query.is_ok()),
            }
        }

        /// Encoding then decoding returns the bytes; arbitrary input never panics.
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..64), junk in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(percent_decode(percent_encode(&bytes).as_bytes()).unwrap(), bytes);
            let _ = parse_query(&junk);
        }
    }
}
