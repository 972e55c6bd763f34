//! The chunked decoder against RFC 9112's grammar, split at every byte.

use super::*;
use proptest::prelude::*;

const LIMIT: u64 = 1 << 20;

/// Feeds `input` in pieces cut at `cuts` (sorted offsets), as reads would.
fn feed_split(
    input: &[u8],
    cuts: &[usize],
    limit: u64,
) -> Result<Option<(Vec<u8>, usize)>, ChunkedError> {
    let mut decoder = Decoder::new(limit);
    let mut body = Vec::new();
    let mut used = 0;
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(from, input.len());
        let n = decoder.feed(&input[from..cut], &mut body)?;
        used += n;
        if decoder.is_done() {
            return Ok(Some((body, used)));
        }
        assert_eq!(
            n,
            cut - from,
            "an unfinished decoder consumes all it is given"
        );
        from = cut;
    }
    Ok(None)
}

/// The encoding of `body` in chunks of the given sizes (cycled), with
/// extensions and trailers as asked.
fn encode(body: &[u8], sizes: &[usize], extensions: bool, trailers: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < body.len() {
        let n = sizes[i % sizes.len()].clamp(1, body.len() - at);
        i += 1;
        if i % 2 == 0 {
            out.extend_from_slice(format!("{n:X}").as_bytes());
        } else {
            out.extend_from_slice(format!("0{n:x}").as_bytes());
        }
        if extensions {
            out.extend_from_slice(b";name=\"v;x\" ; flag");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body[at..at + n]);
        out.extend_from_slice(b"\r\n");
        at += n;
    }
    out.extend_from_slice(b"0");
    if extensions {
        out.extend_from_slice(b";last");
    }
    out.extend_from_slice(b"\r\n");
    if trailers {
        out.extend_from_slice(b"Checksum: abc\r\nX-Empty:\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A body in chunks, with an extension and trailers; the bytes after it
/// are not consumed.
#[test]
fn decodes_a_body_and_stops_at_its_end() {
    let input = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nGET / HTTP/1.1\r\n";
    let (body, used) = decode_all(input, LIMIT).unwrap().unwrap();
    assert_eq!(
        decode_all(b"1 \t;x\r\nA\r\n0\r\n\r\n", LIMIT)
            .unwrap()
            .unwrap()
            .0,
        b"A"
    );
    assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.");
    assert_eq!(&input[used..], b"GET / HTTP/1.1\r\n");
    assert_eq!(decode_all(b"0\r\n\r\n", LIMIT), Ok(Some((Vec::new(), 5))));
    assert_eq!(decode_all(b"000\r\n\r\n", LIMIT), Ok(Some((Vec::new(), 7))));
    // Not complete yet: no answer, no error.
    assert_eq!(decode_all(b"5\r\nabc", LIMIT), Ok(None));
    assert_eq!(decode_all(b"0\r\nX: y\r\n", LIMIT), Ok(None));
}

/// Each malformed case is refused with Malformed, whichever byte is wrong.
#[test]
fn malformed_bodies_are_refused() {
    #[rustfmt::skip]
    let cases: &[&[u8]] = &[
        b"\r\n",                      // no size
        b"x\r\n",                     // not hex
        b"-1\r\n",                    // sign
        b"1 x\r\nA\r\n",              // whitespace then not `;`
        b"3\nabc\r\n0\r\n\r\n",       // bare LF after the size
        b"3\r\nabcd\r\n0\r\n\r\n",    // data longer than the size
        b"3\r\nab\r\n0\r\n\r\n",      // data shorter (CRLF eaten as data)
        b"3\r\nabc\n0\r\n\r\n",       // bare LF after data
        b"3\r\nabcX\r\n",             // no CRLF after data
        b"0\r\n\n",                   // bare LF at the end
        b"0\r\nno colon\r\n\r\n",     // a trailer that is not a field
        b"0\r\n: empty name\r\n\r\n", // a trailer without a name
        b"0\r\nX: y\nZ: w\r\n\r\n",   // bare LF in a trailer
        b"0\r\nX: a\0b\r\n\r\n",      // NUL in a trailer
        b"0\r\n\rX",                  // CR then not LF at the end
        b"1;a\nb\r\n",                // bare LF in an extension
        b"10000000000000000\r\n",     // 17 hex digits: over 64 bits
    ];
    for (i, case) in cases.iter().enumerate() {
        assert!(
            matches!(decode_all(case, LIMIT), Err(ChunkedError::Malformed(_))),
            "case {i}: {:?} gave {:?}",
            String::from_utf8_lossy(case),
            decode_all(case, LIMIT)
        );
    }
}

/// A body over the limit is refused as soon as the size that crosses it is
/// read, before its data; exactly at the limit it is accepted.
#[test]
fn the_limit_is_checked_on_the_chunk_size() {
    assert_eq!(
        decode_all(b"6\r\nabcdef\r\n0\r\n\r\n", 6).map(|r| r.map(|(b, _)| b)),
        Ok(Some(b"abcdef".to_vec()))
    );
    assert_eq!(
        decode_all(b"4\r\nabcd\r\n3\r\n", 6),
        Err(ChunkedError::TooLarge { limit: 6 })
    );
    assert_eq!(
        decode_all(b"FFFFFFFFFFFFFFFF\r\n", LIMIT),
        Err(ChunkedError::TooLarge { limit: LIMIT })
    );
}

/// Size lines and trailers are bounded: at the bound accepted, past it refused.
#[test]
fn lines_are_bounded() {
    // A size line of exactly SIZE_LINE_BYTES_MAX bytes (with CRLF).
    let mut line = b"1;".to_vec();
    line.resize(SIZE_LINE_BYTES_MAX - 2, b'x');
    line.extend_from_slice(b"\r\n");
    let mut ok = line.clone();
    ok.extend_from_slice(b"A\r\n0\r\n\r\n");
    assert_eq!(decode_all(&ok, LIMIT).unwrap().unwrap().0, b"A");
    let mut long = b"1;x".to_vec();
    long.extend_from_slice(&line[2..]);
    assert!(matches!(
        decode_all(&long, LIMIT),
        Err(ChunkedError::Malformed(_))
    ));
    // Leading zeros count towards the same bound.
    let zeros = vec![b'0'; SIZE_LINE_BYTES_MAX + 1];
    assert!(matches!(
        decode_all(&zeros, LIMIT),
        Err(ChunkedError::Malformed(_))
    ));
    // Trailers: TRAILER_BYTES_MAX of fields ("X:", the value, CRLF), then
    // the final CRLF.
    let mut t = b"0\r\n".to_vec();
    t.extend_from_slice(b"X:");
    t.extend(std::iter::repeat_n(b'v', TRAILER_BYTES_MAX - 4));
    t.extend_from_slice(b"\r\n\r\n");
    assert!(decode_all(&t, LIMIT).unwrap().is_some());
    let mut over = b"0\r\nX:v".to_vec();
    over.extend_from_slice(&t[5..]);
    assert!(matches!(
        decode_all(&over, LIMIT),
        Err(ChunkedError::Malformed(_))
    ));
}

proptest! {
    /// Any body, encoded in random chunk sizes with or without extensions
    /// and trailers, then cut at random places (and at every byte for the
    /// first cases): the decoder gives back exactly the plain body and
    /// consumes exactly the encoding, whatever the cuts.
    #[test]
    fn split_anywhere_gives_the_plain_body(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        sizes in proptest::collection::vec(1usize..40, 1..5),
        extensions in any::<bool>(),
        trailers in any::<bool>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        next in proptest::collection::vec(any::<u8>(), 0..10),
    ) {
        let encoded = encode(&body, &sizes, extensions, trailers);
        let mut input = encoded.clone();
        input.extend_from_slice(&next);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        cuts.sort_unstable();
        let got = feed_split(&input, &cuts, LIMIT).unwrap();
        prop_assert_eq!(got, Some((body.clone(), encoded.len())));
        let every_byte: Vec<usize> = (1..input.len()).collect();
        prop_assert_eq!(
            feed_split(&input, &every_byte, LIMIT).unwrap(),
            Some((body.clone(), encoded.len()))
        );
    }

    /// Arbitrary bytes, split anywhere: never a panic, the same verdict
    /// as decoding them at once, and never more body than the limit.
    #[test]
    fn arbitrary_bytes_split_anywhere(
        input in proptest::collection::vec(any::<u8>(), 0..200),
        cut in any::<prop::sample::Index>(),
        limit in 0u64..64,
    ) {
        let whole = decode_all(&input, limit);
        let split = feed_split(&input, &[cut.index(input.len() + 1)], limit);
        prop_assert_eq!(&whole, &split);
        if let Ok(Some((body, _))) = whole {
            prop_assert!(body.len() as u64 <= limit);
        }
    }
}
