//! HTTP conditional requests on one key (RFC 9110 section 13): the
//! `If-Match` and `If-None-Match` header lists, and the pure rule that
//! decides, from the method and the version the key has now, whether a
//! request proceeds, answers 304 Not Modified or 412 Precondition Failed.
//!
//! A key's entity tag is its version's timestamp in decimal, quoted
//! (`ETag: "117744129006895105"`, docs/API.md "Versions"); the node only
//! makes strong tags. A tag in a request that is not a canonical decimal
//! `u64` can name no version of this node: it never matches, exactly as a
//! byte comparison of the opaque tags would say.
//!
//! # Grammar (RFC 9110 8.8.3, 13.1.1, 13.1.2; lists 5.6.1)
//! ```text
//! If-Match      = "*" / #entity-tag
//! If-None-Match = "*" / #entity-tag
//! entity-tag    = [ "W/" ] DQUOTE *etagc DQUOTE
//! etagc         = %x21 / %x23-7E / %x80-FF
//! ```
//! Empty list elements (`, ,"a"`) are skipped; a list with no element, an
//! unquoted or unterminated tag, `*` among tags, or anything after a tag
//! but a comma is malformed: 400, with the reason. Several lines of one
//! header are one list (the request parser joins them with `, `).
//!
//! # Rules (RFC 9110 13.2.2, the order when both headers are present)
//! 1. **`If-Match`** (strong comparison: a weak tag never matches; `*`
//!    matches when the key has a value now; an absent, deleted or expired
//!    key matches nothing): when false, **412**.
//! 2. **`If-None-Match`** (weak comparison: `W/"5"` matches version 5;
//!    `*` matches when the key has a value): when a tag matches (the
//!    condition is false), a read answers **304** and a write **412**.
//! 3. Otherwise the request **proceeds**.
//!
//! A read of a key with no value would answer 404 whatever its
//! preconditions say: RFC 9110 13.2.1 has a server ignore them then, so a
//! read with no current version always proceeds (to its 404). A write
//! (`PUT`, `DELETE`) of such a key is evaluated: it would succeed.
//! `If-Modified-Since` and `If-Unmodified-Since` are not evaluated (the
//! node sends no `Last-Modified`; RFC 9110 13.1.3, 13.1.4 have them
//! ignored when an entity-tag condition is present, and there is no date
//! to compare otherwise).
//!
//! # Bounds
//! A list holds at most what the request head holds (`--header-bytes-max`
//! bytes, three bytes a tag at least): no separate limit.

/// One entity tag of a request's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// `W/` before it.
    pub weak: bool,
    /// The version it names: its opaque tag as a canonical decimal `u64`;
    /// `None` for any other opaque tag (it names no version of this node).
    pub version: Option<u64>,
}

/// An `If-Match` or `If-None-Match` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tags {
    /// `*`: any current version.
    Any,
    /// These tags, in the request's order (at least one).
    List(Vec<Tag>),
}

/// A request's preconditions (at least one header is present).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `If-Match`.
    pub if_match: Option<Tags>,
    /// `If-None-Match`.
    pub if_none_match: Option<Tags>,
}

/// What a request does to the key, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`: a failed `If-None-Match` answers 304.
    Read,
    /// `PUT`, `DELETE`: every failed condition answers 412.
    Write,
}

/// What the rules decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Carry out the request.
    Proceed,
    /// 304 Not Modified (a read whose `If-None-Match` matched).
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
}

impl Tags {
    /// Parses one header's value (RFC 9110 8.8.3 and 5.6.1); `name` names
    /// the header in the reason of a refusal.
    pub fn parse(value: &[u8], name: &str) -> Result<Tags, String> {
        let bad = |why: &str| Err(format!("malformed {name}: {why}"));
        let trimmed = value.trim_ascii();
        if trimmed == b"*" {
            return Ok(Tags::Any);
        }
        let mut tags = Vec::new();
        let mut at = 0;
        loop {
            // Optional whitespace and empty elements before the next tag.
            while at < trimmed.len() && matches!(trimmed[at], b' ' | b'\t' | b',') {
                at += 1;
            }
            if at == trimmed.len() {
                break;
            }
            let weak = trimmed[at..].starts_with(b"W/");
            if weak {
                at += 2;
            }
            if trimmed.get(at) != Some(&b'"') {
                return match trimmed[at] {
                    b'*' => bad("* must be the whole value"),
                    _ => bad("an entity tag must be quoted, as in \"123\" or W/\"123\""),
                };
            }
            let opaque_start = at + 1;
            let Some(len) = trimmed[opaque_start..].iter().position(|&b| b == b'"') else {
                return bad("an entity tag without its closing quote");
            };
            let opaque = &trimmed[opaque_start..opaque_start + len];
            if let Some(&b) = opaque.iter().find(|&&b| !is_etagc(b)) {
                return bad(&format!("byte 0x{b:02x} inside an entity tag"));
            }
            tags.push(Tag {
                weak,
                version: canonical_decimal(opaque),
            });
            at = opaque_start + len + 1;
            while at < trimmed.len() && matches!(trimmed[at], b' ' | b'\t') {
                at += 1;
            }
            if at < trimmed.len() && trimmed[at] != b',' {
                return bad("entity tags must be separated by commas");
            }
        }
        if tags.is_empty() {
            return bad("no entity tag (send \"*\" or a quoted tag)");
        }
        Ok(Tags::List(tags))
    }

    /// Strong comparison (`If-Match`): a strong tag naming `version`.
    fn strong_match(&self, version: u64) -> bool {
        match self {
            Tags::Any => true,
            Tags::List(tags) => tags.iter().any(|t| !t.weak && t.version == Some(version)),
        }
    }

    /// Weak comparison (`If-None-Match`): a tag naming `version`, weak or not.
    fn weak_match(&self, version: u64) -> bool {
        match self {
            Tags::Any => true,
            Tags::List(tags) => tags.iter().any(|t| t.version == Some(version)),
        }
    }
}

/// `etagc` (RFC 9110 8.8.3): visible ASCII but `"`, and obs-text.
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

/// The `u64` that `opaque` writes in canonical decimal (no sign, no
/// leading zero), as the node's tags are written; `None` otherwise.
fn canonical_decimal(opaque: &[u8]) -> Option<u64> {
    let canonical = !opaque.is_empty()
        && opaque.iter().all(u8::is_ascii_digit)
        && (opaque.len() == 1 || opaque[0] != b'0');
    if !canonical {
        return None;
    }
    std::str::from_utf8(opaque).ok()?.parse().ok()
}

impl Preconditions {
    /// The preconditions of a request's `If-Match` and `If-None-Match`
    /// values (each already joined over its lines); `None` when neither
    /// is present.
    pub fn parse(
        if_match: Option<&[u8]>,
        if_none_match: Option<&[u8]>,
    ) -> Result<Option<Preconditions>, String> {
        if if_match.is_none() && if_none_match.is_none() {
            return Ok(None);
        }
        Ok(Some(Preconditions {
            if_match: if_match.map(|v| Tags::parse(v, "If-Match")).transpose()?,
            if_none_match: if_none_match
                .map(|v| Tags::parse(v, "If-None-Match"))
                .transpose()?,
        }))
    }

    /// The rules: the verdict for `method` on a key whose current version
    /// is `current` (`None`: no value now: absent, deleted or expired).
    pub fn evaluate(&self, method: Method, current: Option<u64>) -> Verdict {
        let Some(version) = current else {
            // A read answers its 404 whatever the preconditions say; a
            // write's `If-Match` names a version that is not there.
            return match (method, &self.if_match) {
                (Method::Write, Some(_)) => Verdict::PreconditionFailed,
                _ => Verdict::Proceed,
            };
        };
        if let Some(tags) = &self.if_match
            && !tags.strong_match(version)
        {
            return Verdict::PreconditionFailed;
        }
        if let Some(tags) = &self.if_none_match
            && tags.weak_match(version)
        {
            return match method {
                Method::Read => Verdict::NotModified,
                Method::Write => Verdict::PreconditionFailed,
            };
        }
        Verdict::Proceed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Method::{Read, Write};
    use Verdict::{NotModified, PreconditionFailed, Proceed};

    fn tags(value: &str) -> Tags {
        Tags::parse(value.as_bytes(), "If-Match").unwrap()
    }

    fn strong(v: u64) -> Tag {
        Tag {
            weak: false,
            version: Some(v),
        }
    }

    fn pre(if_match: Option<&str>, if_none_match: Option<&str>) -> Preconditions {
        Preconditions::parse(
            if_match.map(str::as_bytes),
            if_none_match.map(str::as_bytes),
        )
        .unwrap()
        .unwrap()
    }

    /// Lists parse as RFC 9110 writes them: `*`, one tag, several, weak
    /// ones, empty elements and whitespace skipped, commas inside a tag
    /// kept in it; tags that are not canonical decimals name no version.
    #[test]
    fn lists_parse() {
        assert_eq!(tags("*"), Tags::Any);
        assert_eq!(tags("  *\t"), Tags::Any);
        assert_eq!(tags("\"5\""), Tags::List(vec![strong(5)]));
        assert_eq!(
            tags(" , \"5\" ,W/\"6\",, \"x,y\" "),
            Tags::List(vec![
                strong(5),
                Tag {
                    weak: true,
                    version: Some(6)
                },
                Tag {
                    weak: false,
                    version: None
                },
            ])
        );
        let max = format!("\"{}\"", u64::MAX);
        assert_eq!(tags(&max), Tags::List(vec![strong(u64::MAX)]));
        for foreign in [
            "\"\"",
            "\"05\"",
            "\"-5\"",
            "\"+5\"",
            "\"5a\"",
            "\"18446744073709551616\"",
            "\"\u{e9}\"",
        ] {
            let none = Tags::List(vec![Tag {
                weak: false,
                version: None,
            }]);
            assert_eq!(tags(foreign), none, "{foreign}");
        }
        assert_eq!(canonical_decimal(b"0"), Some(0));
    }

    /// Malformed values are refused with a reason naming the header.
    #[test]
    fn malformed_lists_are_refused() {
        for bad in [
            "",
            "   ",
            ",",
            " , ,",
            "5",
            "abc",
            "W/5",
            "w/\"5\"",
            "\"5",
            "\"5\" \"6\"",
            "\"5\"x",
            "*, \"5\"",
            "\"5\", *",
            "**",
            "\"a b\"",
            "\"a\u{7f}\"",
        ] {
            let refused = Tags::parse(bad.as_bytes(), "If-None-Match");
            let why = refused.expect_err(bad);
            assert!(why.starts_with("malformed If-None-Match: "), "{bad}: {why}");
        }
        assert!(
            Preconditions::parse(Some(b"\"1\""), Some(b"x"))
                .unwrap_err()
                .contains("If-None-Match")
        );
        assert!(
            Preconditions::parse(Some(b"x"), None)
                .unwrap_err()
                .contains("If-Match")
        );
        assert_eq!(Preconditions::parse(None, None), Ok(None));
    }

    /// `If-Match` compares strongly: the version named, in a list, or `*`
    /// for a key with a value; a weak tag or another version fails (412),
    /// for a read as for a write.
    #[test]
    fn if_match_is_strong() {
        for method in [Read, Write] {
            assert_eq!(pre(Some("\"7\""), None).evaluate(method, Some(7)), Proceed);
            assert_eq!(
                pre(Some("\"1\", \"7\""), None).evaluate(method, Some(7)),
                Proceed
            );
            assert_eq!(pre(Some("*"), None).evaluate(method, Some(7)), Proceed);
            for failing in ["\"8\"", "W/\"7\"", "\"07\"", "\"x\""] {
                assert_eq!(
                    pre(Some(failing), None).evaluate(method, Some(7)),
                    PreconditionFailed,
                    "{failing}"
                );
            }
        }
    }

    /// A write of a key with no value: `If-Match` (even `*`) fails, an
    /// `If-None-Match` of any kind holds (create-only); a read of it
    /// proceeds to its 404 whatever the headers say.
    #[test]
    fn a_key_without_a_value() {
        assert_eq!(
            pre(Some("*"), None).evaluate(Write, None),
            PreconditionFailed
        );
        assert_eq!(
            pre(Some("\"7\""), None).evaluate(Write, None),
            PreconditionFailed
        );
        assert_eq!(pre(None, Some("*")).evaluate(Write, None), Proceed);
        assert_eq!(pre(None, Some("\"7\"")).evaluate(Write, None), Proceed);
        for (m, n) in [
            (Some("*"), None),
            (None, Some("*")),
            (Some("\"1\""), Some("\"1\"")),
        ] {
            assert_eq!(pre(m, n).evaluate(Read, None), Proceed, "{m:?} {n:?}");
        }
    }

    /// `If-None-Match` compares weakly: a match is 304 for a read, 412
    /// for a write; `*` matches any value; no match proceeds.
    #[test]
    fn if_none_match_is_weak() {
        for matching in ["\"7\"", "W/\"7\"", "\"1\", W/\"7\"", "*"] {
            let p = pre(None, Some(matching));
            assert_eq!(p.evaluate(Read, Some(7)), NotModified, "{matching}");
            assert_eq!(p.evaluate(Write, Some(7)), PreconditionFailed, "{matching}");
        }
        for other in ["\"8\"", "W/\"8\"", "\"07\""] {
            let p = pre(None, Some(other));
            assert_eq!(p.evaluate(Read, Some(7)), Proceed, "{other}");
            assert_eq!(p.evaluate(Write, Some(7)), Proceed, "{other}");
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic: a list or a reason naming the header.
        #[test]
        fn arbitrary_values(value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Err(why) = Tags::parse(&value, "If-Match") {
                proptest::prop_assert!(why.starts_with("malformed If-Match: "));
            }
        }

        /// A list written as RFC 9110 writes it parses back to its tags.
        #[test]
        fn written_lists_parse_back(
            tags in proptest::collection::vec((proptest::prelude::any::<bool>(), proptest::prelude::any::<u64>()), 1..8),
            spaces in 0usize..3,
        ) {
            let gap = " ".repeat(spaces);
            let written: Vec<String> = tags
                .iter()
                .map(|&(weak, v)| format!("{}\"{v}\"", if weak { "W/" } else { "" }))
                .collect();
            let value = written.join(&format!("{gap},{gap}"));
            let want: Vec<Tag> = tags.iter().map(|&(weak, v)| Tag { weak, version: Some(v) }).collect();
            proptest::prop_assert_eq!(Tags::parse(value.as_bytes(), "If-Match"), Ok(Tags::List(want)));
        }
    }

    /// Both headers: `If-Match` first (RFC 9110 13.2.2): when it fails
    /// the answer is 412 even where `If-None-Match` alone says 304; when
    /// it holds, `If-None-Match` decides.
    #[test]
    fn both_headers_in_the_rfc_order() {
        let p = pre(Some("\"8\""), Some("\"7\""));
        assert_eq!(p.evaluate(Read, Some(7)), PreconditionFailed);
        let p = pre(Some("\"7\""), Some("\"7\""));
        assert_eq!(p.evaluate(Read, Some(7)), NotModified);
        assert_eq!(p.evaluate(Write, Some(7)), PreconditionFailed);
        let p = pre(Some("*"), Some("\"6\""));
        assert_eq!(p.evaluate(Write, Some(7)), Proceed);
    }
}
