//! Tests of the peer frame codec.

use super::*;
use proptest::prelude::*;

fn encoded(msg: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode(msg, &mut out);
    out
}

/// A frame around `body` with a correct header (for hand-made bodies).
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// `kind | id = 7 | rest`.
fn body(kind: u8, rest: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&7u64.to_le_bytes());
    out.extend_from_slice(rest);
    out
}

fn malformed_text(buf: &[u8]) -> String {
    match decode(buf) {
        Err(FrameError::Malformed(why)) => why,
        other => panic!("expected Malformed, got {other:?}"),
    }
}

fn arb_version() -> impl Strategy<Value = Stamped> {
    (
        any::<u64>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        proptest::option::of(0..=ataman_engine::expiry::DEADLINE_MS_MAX),
    )
        .prop_map(|(ts, value, deadline_ms)| Stamped {
            ts,
            deadline_ms: deadline_ms.filter(|_| value.is_some()),
            value,
        })
}

fn arb_error() -> impl Strategy<Value = ReplicaError> {
    (
        prop_oneof![
            Just(ReplicaErrorKind::Unavailable),
            Just(ReplicaErrorKind::Failed),
            Just(ReplicaErrorKind::Invalid),
            Just(ReplicaErrorKind::StaleLayout),
        ],
        "\\PC{0,40}",
    )
        .prop_map(|(kind, message)| ReplicaError { kind, message })
}

fn arb_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..32)
}

fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (any::<u64>(), arb_key(), arb_version()).prop_map(|(id, key, version)| Message::Write {
            id,
            key,
            version
        }),
        (
            any::<u64>(),
            proptest::result::maybe_err(
                prop_oneof![
                    Just(Applied::Stored),
                    any::<u64>().prop_map(|ts| Applied::HoldsNewer { ts })
                ],
                arb_error()
            )
        )
            .prop_map(|(id, result)| Message::WriteAck { id, result }),
        (any::<u64>(), arb_key()).prop_map(|(id, key)| Message::Read { id, key }),
        (
            any::<u64>(),
            proptest::result::maybe_err(proptest::option::of(arb_version()), arb_error())
        )
            .prop_map(|(id, result)| Message::ReadReply { id, result }),
    ]
}

proptest! {
    /// Every message decodes to itself and consumes exactly its frame.
    #[test]
    fn round_trip(msg in arb_message()) {
        let bytes = encoded(&msg);
        prop_assert_eq!(decode(&bytes), Ok(Some((msg, bytes.len()))));
    }

    /// Every strict prefix of a frame is "incomplete", never an error or a message.
    #[test]
    fn every_prefix_is_incomplete(msg in arb_message()) {
        let bytes = encoded(&msg);
        for cut in 0..bytes.len() {
            prop_assert_eq!(decode(&bytes[..cut]), Ok(None), "cut at {}", cut);
        }
    }

    /// A flipped bit anywhere is an error, never a different message. A flip
    /// in the length may also read as "incomplete" (it asks for more bytes);
    /// the checksum catches it when they come.
    #[test]
    fn flipped_bit_is_detected(msg in arb_message(), at in any::<prop::sample::Index>(), bit in 0..8u8) {
        let mut bytes = encoded(&msg);
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        let decoded = decode(&bytes);
        if i < 4 {
            prop_assert!(!matches!(decoded, Ok(Some(_))), "flip at {}: {:?}", i, decoded);
        } else {
            prop_assert!(decoded.is_err(), "flip at {}: {:?}", i, decoded);
        }
    }

    /// Frames sent back to back decode one after another, in order.
    #[test]
    fn concatenated_frames_decode_in_order(msgs in proptest::collection::vec(arb_message(), 0..20)) {
        let mut stream = Vec::new();
        for m in &msgs {
            encode(m, &mut stream);
        }
        let mut rest = &stream[..];
        let mut decoded = Vec::new();
        while let Some((m, used)) = decode(rest).unwrap() {
            decoded.push(m);
            rest = &rest[used..];
        }
        prop_assert!(rest.is_empty());
        prop_assert_eq!(decoded, msgs);
    }

    /// Arbitrary bytes never panic, and a decoded frame never claims bytes it was not given.
    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(Some((_, used))) = decode(&bytes) {
            prop_assert!(used <= bytes.len());
        }
    }
}

/// A header announcing a body over the limit is refused before any body byte arrives.
#[test]
fn too_large_from_the_header_alone() {
    let mut header = ((FRAME_BODY_BYTES_MAX + 1) as u32).to_le_bytes().to_vec();
    header.extend_from_slice(&[0; 4]);
    assert_eq!(
        decode(&header),
        Err(FrameError::TooLarge {
            len: FRAME_BODY_BYTES_MAX + 1,
            max: FRAME_BODY_BYTES_MAX
        })
    );
    let mut header = u32::MAX.to_le_bytes().to_vec();
    header.extend_from_slice(&[0; 4]);
    assert!(matches!(decode(&header), Err(FrameError::TooLarge { .. })));
    // At the bound the decoder waits for the body.
    let mut header = (FRAME_BODY_BYTES_MAX as u32).to_le_bytes().to_vec();
    header.extend_from_slice(&[0; 4]);
    assert_eq!(decode(&header), Ok(None));
}

/// A key and value at their engine bounds fit a frame and round-trip; one
/// byte more of either is refused.
#[test]
fn key_and_value_at_and_past_their_bounds() {
    let msg = Message::Write {
        id: u64::MAX,
        key: vec![b'k'; KEY_BYTES_MAX],
        version: Stamped {
            ts: u64::MAX,
            value: Some(vec![b'v'; VALUE_BYTES_MAX]),
            deadline_ms: Some(u64::MAX >> 16),
        },
    };
    let bytes = encoded(&msg);
    assert!(bytes.len() - FRAME_HEADER_BYTES <= FRAME_BODY_BYTES_MAX);
    assert_eq!(decode(&bytes), Ok(Some((msg, bytes.len()))));

    let mut key_over = ((KEY_BYTES_MAX + 1) as u32).to_le_bytes().to_vec();
    key_over.extend(vec![b'k'; KEY_BYTES_MAX + 1]);
    let why = malformed_text(&frame(&body(KIND_READ, &key_over)));
    assert!(
        why.contains("key") && why.contains("over the limit"),
        "{why}"
    );

    let mut value_over = vec![0, 0, 0, 0]; // empty key
    value_over.extend_from_slice(&1u64.to_le_bytes());
    value_over.push(1);
    value_over.extend_from_slice(&((VALUE_BYTES_MAX + 1) as u32).to_le_bytes());
    let why = malformed_text(&frame(&body(KIND_WRITE, &value_over)));
    assert!(
        why.contains("value") && why.contains("over the limit"),
        "{why}"
    );
}

/// Error messages are cut to the limit at a character boundary, and a
/// longer one on the wire is refused.
#[test]
fn error_message_bound() {
    let e = ReplicaError::new(
        ReplicaErrorKind::Failed,
        "é".repeat(ERROR_MESSAGE_BYTES_MAX),
    );
    assert_eq!(e.message.len(), ERROR_MESSAGE_BYTES_MAX);
    let e = ReplicaError::new(
        ReplicaErrorKind::Failed,
        format!("x{}", "é".repeat(ERROR_MESSAGE_BYTES_MAX)),
    );
    assert_eq!(e.message.len(), ERROR_MESSAGE_BYTES_MAX - 1);
    let msg = Message::WriteAck {
        id: 1,
        result: Err(e),
    };
    let bytes = encoded(&msg);
    assert_eq!(decode(&bytes), Ok(Some((msg, bytes.len()))));

    let mut over = vec![STATUS_FAILED];
    over.extend_from_slice(&((ERROR_MESSAGE_BYTES_MAX + 1) as u32).to_le_bytes());
    over.extend(vec![b'x'; ERROR_MESSAGE_BYTES_MAX + 1]);
    let why = malformed_text(&frame(&body(KIND_WRITE_ACK, &over)));
    assert!(why.contains("message"), "{why}");
}

/// Every way a body with a good checksum can be wrong is named.
#[test]
fn malformed_bodies_are_named() {
    assert!(malformed_text(&frame(&[])).contains("kind"));
    assert!(malformed_text(&frame(&[KIND_READ, 1, 2])).contains("id"));
    assert_eq!(
        decode(&frame(&body(0, &[]))),
        Err(FrameError::UnknownKind(0))
    );
    assert_eq!(
        decode(&frame(&body(5, &[]))),
        Err(FrameError::UnknownKind(5))
    );
    // A key length past the end of the body.
    let why = malformed_text(&frame(&body(KIND_READ, &[9, 0, 0, 0, b'a'])));
    assert!(why.contains("key") && why.contains("left"), "{why}");
    // Trailing bytes after the last field.
    let why = malformed_text(&frame(&body(KIND_READ, &[1, 0, 0, 0, b'a', b'!'])));
    assert!(why.contains("1 bytes after"), "{why}");
    // has_value, found and status out of range.
    let mut bad_flag = vec![0, 0, 0, 0];
    bad_flag.extend_from_slice(&1u64.to_le_bytes());
    bad_flag.push(3);
    assert!(malformed_text(&frame(&body(KIND_WRITE, &bad_flag))).contains("has_value"));
    // A deadline past the maximum, and one cut short.
    let mut far = vec![0, 0, 0, 0];
    far.extend_from_slice(&1u64.to_le_bytes());
    far.push(2);
    far.extend_from_slice(&(ataman_engine::expiry::DEADLINE_MS_MAX + 1).to_le_bytes());
    far.extend_from_slice(&[0, 0, 0, 0]);
    assert!(malformed_text(&frame(&body(KIND_WRITE, &far))).contains("deadline_ms"));
    let mut short = vec![0, 0, 0, 0];
    short.extend_from_slice(&1u64.to_le_bytes());
    short.extend_from_slice(&[2, 1, 2, 3]);
    assert!(malformed_text(&frame(&body(KIND_WRITE, &short))).contains("deadline_ms"));
    assert!(malformed_text(&frame(&body(KIND_READ_REPLY, &[0, 2]))).contains("found"));
    assert!(malformed_text(&frame(&body(KIND_WRITE_ACK, &[6]))).contains("status"));
    assert!(malformed_text(&frame(&body(KIND_READ_REPLY, &[4]))).contains("status"));
    // HoldsNewer carries a full timestamp.
    assert!(malformed_text(&frame(&body(KIND_WRITE_ACK, &[4, 1, 2]))).contains("ts"));
    // A message that is not UTF-8.
    let why = malformed_text(&frame(&body(
        KIND_WRITE_ACK,
        &[STATUS_INVALID, 2, 0, 0, 0, 0xc3, 0x28],
    )));
    assert!(why.contains("UTF-8"), "{why}");
    // The ok WriteAck carries no message: a status-0 frame with one is trailing bytes.
    assert!(malformed_text(&frame(&body(KIND_WRITE_ACK, &[0, 0, 0, 0, 0]))).contains("after"));
}

/// A checksum mismatch reports both checksums.
#[test]
fn checksum_mismatch_reports_both() {
    let mut bytes = encoded(&Message::Read {
        id: 1,
        key: b"k".to_vec(),
    });
    let expected = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let found = crc32c::crc32c(&bytes[FRAME_HEADER_BYTES..]);
    assert_eq!(
        decode(&bytes),
        Err(FrameError::ChecksumMismatch { expected, found })
    );
}

/// The example in docs/FORMAT.md, "Peer frame", is what the encoder writes.
#[test]
fn format_doc_example_is_what_the_encoder_writes() {
    let msg = Message::Write {
        id: 1,
        key: b"k".to_vec(),
        version: Stamped {
            ts: 7,
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        },
    };
    let expected: Vec<u8> = [
        &[0x1c, 0, 0, 0][..],      // body_len = 28
        &[0x34, 0xaf, 0x13, 0x5f], // crc = 0x5f13af34
        &[KIND_WRITE],             // kind
        &1u64.to_le_bytes(),       // id
        &[1, 0, 0, 0, b'k'],       // key
        &7u64.to_le_bytes(),       // ts
        &[1, 1, 0, 0, 0, b'v'],    // has_value, value
    ]
    .concat();
    assert_eq!(crc32c::crc32c(&expected[8..]), 0x5f13_af34);
    assert_eq!(encoded(&msg), expected);
}
