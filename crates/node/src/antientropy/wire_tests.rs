//! Tests of the sync frame codec.

use super::*;
use proptest::prelude::*;

fn encoded(msg: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode(msg, &mut out);
    out
}

/// A frame around `body` with a correct header.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn malformed(body: &[u8]) -> String {
    match decode(&frame(body)) {
        Err(SyncFrameError::Malformed(why)) => why,
        other => panic!("expected Malformed, got {other:?}"),
    }
}

fn arb_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..24)
}

fn arb_version() -> impl Strategy<Value = Stamped> {
    (
        any::<u64>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..48)),
        proptest::option::of(0..=ataman_engine::expiry::DEADLINE_MS_MAX),
    )
        .prop_map(|(ts, value, deadline_ms)| Stamped {
            ts,
            deadline_ms: deadline_ms.filter(|_| value.is_some()),
            value,
        })
}

fn arb_digest_entry() -> impl Strategy<Value = DigestEntry> {
    use crate::version_order::{Kind, Tag};
    (arb_key(), any::<u64>(), 0usize..3, any::<u64>()).prop_map(|(key, ts, kind, digest)| {
        let kind = [Kind::Value, Kind::Tombstone, Kind::Expiring][kind];
        let digest = if kind == Kind::Tombstone { 0 } else { digest };
        DigestEntry {
            key,
            tag: Tag { ts, kind, digest },
        }
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            any::<u32>(),
            "\\PC{0,40}",
            any::<u32>(),
            any::<u32>(),
            any::<u64>()
        )
            .prop_map(
                |(version, url, replicas, depth, fingerprint)| Message::Hello {
                    version,
                    url,
                    replicas,
                    depth,
                    fingerprint
                }
            ),
        (any::<u32>(), "\\PC{0,40}", any::<u64>()).prop_map(|(version, url, entries)| {
            Message::Welcome {
                version,
                url,
                entries,
            }
        }),
        (any::<u32>(), proptest::collection::vec(any::<u32>(), 0..50))
            .prop_map(|(level, indexes)| Message::TreeNodes { level, indexes }),
        proptest::collection::vec(any::<u64>(), 0..50)
            .prop_map(|hashes| Message::Hashes { hashes }),
        (
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::option::of(arb_key()),
            any::<u32>()
        )
            .prop_map(|(buckets, after, entries_max)| Message::Digest {
                buckets,
                after,
                entries_max
            }),
        (
            proptest::collection::vec(arb_digest_entry(), 0..20),
            proptest::option::of(arb_key())
        )
            .prop_map(|(entries, next)| Message::DigestPage { entries, next }),
        proptest::collection::vec(arb_key(), 0..20).prop_map(|keys| Message::Fetch { keys }),
        proptest::collection::vec((arb_key(), proptest::option::of(arb_version())), 0..20)
            .prop_map(|items| Message::Versions { items }),
        proptest::collection::vec((arb_key(), arb_version()), 0..20)
            .prop_map(|items| Message::Push { items }),
        (any::<u32>(), any::<u32>(), "\\PC{0,40}").prop_map(|(applied, refused, first_refusal)| {
            Message::PushAck {
                applied,
                refused,
                first_refusal,
            }
        }),
        "\\PC{0,60}".prop_map(|message| Message::Error { message }),
        Just(Message::KeepAlive),
        (
            any::<u32>(),
            "\\PC{0,40}",
            any::<u32>(),
            arb_layout(),
            arb_layout()
        )
            .prop_map(|(version, url, depth, old, new)| Message::Transition {
                version,
                url,
                depth,
                old,
                new,
            }),
        (any::<u32>(), "\\PC{0,40}", any::<u64>(), any::<u64>()).prop_map(
            |(version, url, entries, bytes)| Message::TransitionWelcome {
                version,
                url,
                entries,
                bytes,
            }
        ),
        proptest::option::of(arb_key()).prop_map(|after| Message::Share { after }),
        (
            proptest::collection::vec((arb_key(), arb_version()), 0..20),
            proptest::collection::vec(arb_digest_entry(), 0..20),
            proptest::option::of(arb_key())
        )
            .prop_map(|(items, others, next)| Message::SharePage {
                items,
                others,
                next
            }),
    ]
}

/// A valid layout of one to six members.
fn arb_layout() -> impl Strategy<Value = Layout> {
    (
        any::<u64>(),
        proptest::collection::btree_set(1u16..9999, 1..6),
        1usize..7,
    )
        .prop_map(|(version, ports, r)| {
            let nodes: Vec<String> = ports
                .iter()
                .map(|p| format!("http://127.0.0.1:{p}"))
                .collect();
            let r = r.min(nodes.len());
            Layout::new(version, nodes, r).unwrap()
        })
}

proptest! {
    /// Every message decodes to itself, occupies exactly its bytes, and
    /// every proper prefix of it is incomplete, not an error.
    #[test]
    fn round_trip(msg in arb_message(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
        let bytes = encoded(&msg);
        let mut stream = bytes.clone();
        stream.extend_from_slice(&tail);
        prop_assert_eq!(decode(&stream), Ok(Some((msg, bytes.len()))));
        for cut in 0..bytes.len() {
            prop_assert_eq!(decode(&bytes[..cut]), Ok(None));
        }
    }

    /// Arbitrary bytes, raw or behind a correct header, never panic; what
    /// decodes re-encodes to the same bytes.
    #[test]
    fn decoder_never_panics(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&body);
        let framed = frame(&body);
        if let Ok(Some((msg, used))) = decode(&framed) {
            prop_assert_eq!(used, framed.len());
            prop_assert_eq!(encoded(&msg), framed);
        }
    }

    /// Mutating one byte of a valid frame never panics the decoder.
    #[test]
    fn mutated_frames_never_panic(msg in arb_message(), at in any::<usize>(), byte in any::<u8>()) {
        let mut bytes = encoded(&msg);
        let i = at % bytes.len();
        bytes[i] = byte;
        let _ = decode(&bytes);
        // Also with the checksum fixed, so the body decoder sees the mutation.
        let body = bytes[framing::FRAME_HEADER_BYTES..].to_vec();
        let _ = decode(&frame(&body));
    }
}

/// An oversized length is refused from the header alone; a wrong checksum
/// is named; an unknown kind is named; bytes after the fields are refused.
#[test]
fn framing_errors() {
    let mut header = ((FRAME_BODY_BYTES_MAX + 1) as u32).to_le_bytes().to_vec();
    header.extend_from_slice(&[0; 4]);
    assert_eq!(
        decode(&header),
        Err(SyncFrameError::TooLarge {
            len: FRAME_BODY_BYTES_MAX + 1,
            max: FRAME_BODY_BYTES_MAX
        })
    );
    let ack = Message::PushAck {
        applied: 3,
        refused: 0,
        first_refusal: String::new(),
    };
    let mut bytes = encoded(&ack);
    bytes[8] ^= 0xff;
    assert!(matches!(
        decode(&bytes),
        Err(SyncFrameError::ChecksumMismatch { .. })
    ));
    assert_eq!(decode(&frame(&[0])), Err(SyncFrameError::UnknownKind(0)));
    assert_eq!(decode(&frame(&[17])), Err(SyncFrameError::UnknownKind(17)));
    assert!(malformed(&[12, 0]).contains("after the last field"));
    let mut body = encoded(&ack)[8..].to_vec();
    body.push(0);
    assert!(malformed(&body).contains("after the last field"));
}

/// Counts over their bound, or larger than the rest of the body could
/// hold, are refused before anything is allocated.
#[test]
fn counts_are_bounded() {
    let mut body = vec![KIND_HASHES];
    body.extend_from_slice(&((TREE_NODES_PER_REQUEST_MAX + 1) as u32).to_le_bytes());
    assert!(malformed(&body).contains("over the limit"));
    let mut body = vec![KIND_DIGEST_PAGE];
    body.extend_from_slice(&4000u32.to_le_bytes());
    assert!(malformed(&body).contains("cannot fit"));
    let mut body = vec![KIND_FETCH];
    body.extend_from_slice(&((FETCH_KEYS_MAX + 1) as u32).to_le_bytes());
    assert!(malformed(&body).contains("over the limit"));
    let mut body = vec![KIND_PUSH];
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&((KEY_BYTES_MAX + 1) as u32).to_le_bytes());
    body.extend_from_slice(&[0; 16]);
    assert!(malformed(&body).contains("over the limit"));
    let mut body = vec![KIND_DIGEST, 0, 0, 0, 0, 0];
    body.extend_from_slice(&((BUCKET_BITMAP_BYTES_MAX + 1) as u32).to_le_bytes());
    assert!(malformed(&body).contains("over the limit"));
    let mut body = vec![KIND_ERROR];
    body.extend_from_slice(&2u32.to_le_bytes());
    body.extend_from_slice(&[0xff, 0xfe]);
    assert!(malformed(&body).contains("UTF-8"));
    let mut body = vec![KIND_DIGEST_PAGE];
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(2);
    assert!(malformed(&body).contains("not 0 or 1"));
}

/// The largest message a session sends, a Push of one key and value at
/// the engine's bounds, fits the frame bound.
#[test]
fn largest_push_fits() {
    let msg = Message::Push {
        items: vec![(
            vec![1; KEY_BYTES_MAX],
            Stamped {
                ts: 1,
                value: Some(vec![2; VALUE_BYTES_MAX]),
                deadline_ms: Some(u64::MAX >> 16),
            },
        )],
    };
    let bytes = encoded(&msg);
    assert!(bytes.len() - framing::FRAME_HEADER_BYTES <= FRAME_BODY_BYTES_MAX);
    assert_eq!(decode(&bytes).unwrap().unwrap().1, bytes.len());
}

/// A SharePage of one version at the engine's bounds, resuming after it,
/// fits the frame bound (`next` is a flag, not the key again); a page
/// saying "after its last key" with no key is malformed.
#[test]
fn largest_share_page_fits() {
    let key = vec![1; KEY_BYTES_MAX];
    let msg = Message::SharePage {
        items: vec![(
            key.clone(),
            Stamped {
                ts: 1,
                value: Some(vec![2; VALUE_BYTES_MAX]),
                deadline_ms: Some(u64::MAX >> 16),
            },
        )],
        others: Vec::new(),
        next: Some(key),
    };
    let bytes = encoded(&msg);
    assert!(bytes.len() - framing::FRAME_HEADER_BYTES <= FRAME_BODY_BYTES_MAX);
    assert_eq!(decode(&bytes).unwrap().unwrap(), (msg, bytes.len()));
    let body = [KIND_SHARE_PAGE, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    assert!(malformed(&body).contains("page of none"));
    let body = [KIND_SHARE_PAGE, 0, 0, 0, 0, 0, 0, 0, 0, 3];
    assert!(malformed(&body).contains("not 0, 1 or 2"));
}

/// Error messages are cut at a character boundary to their bound.
#[test]
fn error_messages_are_cut() {
    let Message::Error { message } = error_message("é".repeat(MESSAGE_BYTES_MAX)) else {
        panic!("not an error");
    };
    assert!(message.len() <= MESSAGE_BYTES_MAX && message.len() >= MESSAGE_BYTES_MAX - 1);
    let bytes = encoded(&Message::Error { message });
    assert!(decode(&bytes).unwrap().is_some());
}

/// Bitmaps: one bit per bucket, LSB first; the fingerprint ignores order.
#[test]
fn bitmaps_and_fingerprint() {
    let bitmap = bitmap_of(4, &[0, 9, 15]);
    assert_eq!(bitmap, vec![0b0000_0001, 0b1000_0010]);
    assert!(bitmap_has(&bitmap, 9) && !bitmap_has(&bitmap, 8) && !bitmap_has(&bitmap, 99));
    assert_eq!(bitmap_bytes(0), 1);
    assert_eq!(bitmap_bytes(12), 512);
    let a = vec!["http://a:1".to_string(), "http://b:2".to_string()];
    let b = vec!["http://b:2".to_string(), "http://a:1".to_string()];
    assert_eq!(fingerprint(&a), fingerprint(&b));
    assert_ne!(fingerprint(&a), fingerprint(&a[..1]));
}

/// The example of docs/FORMAT.md ("Sync frame", "Example") is what the
/// encoder writes.
#[test]
fn format_doc_example_is_what_the_encoder_writes() {
    let msg = Message::Digest {
        buckets: vec![0x05],
        after: Some(b"k".to_vec()),
        entries_max: 4096,
    };
    let bytes = encoded(&msg);
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex.join(" "),
        "10 00 00 00 dd ab dd aa 05 00 10 00 00 01 01 00 00 00 6b 01 00 00 00 05"
    );
}

/// A KeepAlive is a kind byte alone (docs/FORMAT.md, "Sync frame").
#[test]
fn keep_alive_is_one_byte() {
    let bytes = encoded(&Message::KeepAlive);
    assert_eq!(&bytes[..4], &[1, 0, 0, 0]);
    assert_eq!(&bytes[8..], &[12]);
    assert_eq!(decode(&bytes), Ok(Some((Message::KeepAlive, 9))));
}

/// A Transition's layouts must be valid in their own format: a layout
/// with a flipped byte fails its checksum and names the field.
#[test]
fn a_transition_with_a_bad_layout_is_malformed() {
    let old = Layout::new(3, vec!["http://127.0.0.1:1".into()], 1).unwrap();
    let new = Layout::new(
        4,
        vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
        1,
    )
    .unwrap();
    let msg = Message::Transition {
        version: VERSION,
        url: "http://127.0.0.1:2".into(),
        depth: 12,
        old,
        new,
    };
    let bytes = encoded(&msg);
    assert_eq!(decode(&bytes), Ok(Some((msg, bytes.len()))));
    let mut body = bytes[framing::FRAME_HEADER_BYTES..].to_vec();
    // The old layout's bytes start after kind, version, url and depth.
    let old_at = 1 + 4 + 4 + "http://127.0.0.1:2".len() + 4 + 4;
    body[old_at + 6] ^= 1;
    assert!(
        malformed(&body).contains("old layout"),
        "{}",
        malformed(&body)
    );
}
