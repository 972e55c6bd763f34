//! Tests of the register frame codec.

use super::*;
use proptest::prelude::*;

fn encoded(msg: &RegisterMessage) -> Vec<u8> {
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

fn malformed_text(buf: &[u8]) -> String {
    match decode(buf) {
        Err(FrameError::Malformed(why)) => why,
        other => panic!("expected Malformed, got {other:?}"),
    }
}

fn b(time: u64, node: NodeId) -> Ballot {
    Ballot { time, node }
}

/// The worked example of docs/FORMAT.md ("Register frame"): a Prepare of
/// key `k` under ballot (time 9, node 2), id 7, byte for byte.
#[test]
fn worked_example_prepare() {
    let msg = RegisterMessage::Ask {
        id: 7,
        key: b"k".to_vec(),
        request: Request::Prepare(b(9, 2)),
    };
    let body: Vec<u8> = [
        &[5u8][..],
        &7u64.to_le_bytes(),
        &1u32.to_le_bytes(),
        b"k",
        &[1],
        &9u64.to_le_bytes(),
        &2u16.to_le_bytes(),
    ]
    .concat();
    assert_eq!(body.len(), 25);
    assert_eq!(crc32c::crc32c(&body), 0xe63d_ade1);
    assert_eq!(encoded(&msg), frame(&body));
    assert_eq!(decode(&frame(&body)), Ok(Some((msg, 33))));
}

/// Every request and answer shape decodes to what was encoded, and a
/// frame cut anywhere reads as incomplete.
#[test]
fn every_shape_round_trips() {
    let p = |t, v: Option<&[u8]>| Proposal {
        ballot: b(t, 1),
        value: v.map(<[u8]>::to_vec),
        deadline_ms: None,
    };
    let msgs = vec![
        RegisterMessage::Ask {
            id: 1,
            key: vec![],
            request: Request::Accept(p(3, Some(b"v"))),
        },
        RegisterMessage::Ask {
            id: 2,
            key: b"key".to_vec(),
            request: Request::Commit(p(4, None)),
        },
        RegisterMessage::Ask {
            id: 3,
            key: b"key".to_vec(),
            request: Request::Release(b(5, 255)),
        },
        RegisterMessage::Reply {
            id: 4,
            result: Ok(None),
        },
        RegisterMessage::Reply {
            id: 5,
            result: Ok(Some(Answer::Promise {
                ballot: b(6, 0),
                accepted: Some(p(5, Some(b"a"))),
                committed: Some(p(4, None)),
            })),
        },
        RegisterMessage::Reply {
            id: 6,
            result: Ok(Some(Answer::Refused {
                ballot: b(6, 0),
                floor: Ballot::ZERO,
            })),
        },
        RegisterMessage::Reply {
            id: 7,
            result: Err(ReplicaError::new(ReplicaErrorKind::Failed, "disk")),
        },
    ];
    for msg in msgs {
        let bytes = encoded(&msg);
        assert_eq!(decode(&bytes), Ok(Some((msg.clone(), bytes.len()))));
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), Ok(None), "{msg:?} cut at {cut}");
        }
    }
}

/// Bad input is a specific error, never a panic: a zero ballot in a
/// request, a node id past `NODES_MAX`, an unknown op, trailing bytes, a
/// peer frame's kind, a header over the bound.
#[test]
fn bad_bodies_are_refused_by_name() {
    let ask =
        |rest: &[u8]| frame(&[&[5u8][..], &7u64.to_le_bytes(), &0u32.to_le_bytes(), rest].concat());
    let zero = [&[1u8][..], &0u64.to_le_bytes(), &0u16.to_le_bytes()].concat();
    assert!(malformed_text(&ask(&zero)).contains("zero"));
    let far = [&[1u8][..], &1u64.to_le_bytes(), &256u16.to_le_bytes()].concat();
    assert!(malformed_text(&ask(&far)).contains("ballot node"));
    let op = [&[9u8][..], &1u64.to_le_bytes(), &1u16.to_le_bytes()].concat();
    assert!(malformed_text(&ask(&op)).contains("op"));
    let trailing = [&[4u8][..], &1u64.to_le_bytes(), &1u16.to_le_bytes(), &[0]].concat();
    assert!(malformed_text(&ask(&trailing)).contains("after the last field"));
    assert_eq!(
        decode(&frame(&[1u8, 0, 0, 0, 0, 0, 0, 0, 0])),
        Err(FrameError::UnknownKind(1))
    );
    let mut head = Vec::new();
    head.extend_from_slice(&((REGISTER_BODY_BYTES_MAX + 1) as u32).to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    assert!(matches!(decode(&head), Err(FrameError::TooLarge { .. })));
}

/// The largest message the encoder can make, a Promise with two values
/// at `VALUE_BYTES_MAX`, fits the body bound (the bound is not too small).
#[test]
fn largest_promise_fits_the_bound() {
    let value = Some(vec![0u8; VALUE_BYTES_MAX]);
    let msg = RegisterMessage::Reply {
        id: u64::MAX,
        result: Ok(Some(Answer::Promise {
            ballot: b(u64::MAX, 255),
            accepted: Some(Proposal {
                ballot: b(u64::MAX, 255),
                value: value.clone(),
                deadline_ms: None,
            }),
            committed: Some(Proposal {
                ballot: b(u64::MAX, 255),
                value,
                deadline_ms: None,
            }),
        })),
    };
    let bytes = encoded(&msg);
    assert!(bytes.len() - framing::FRAME_HEADER_BYTES <= REGISTER_BODY_BYTES_MAX);
    assert!(matches!(decode(&bytes), Ok(Some(_))));
}

fn arb_ballot() -> impl Strategy<Value = Ballot> {
    (1..u64::MAX, 0..256u16).prop_map(|(time, node)| Ballot { time, node })
}

fn arb_proposal() -> impl Strategy<Value = Proposal> {
    (
        arb_ballot(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..32)),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(ballot, value, deadline_ms)| Proposal {
            ballot,
            deadline_ms: value.as_ref().and(deadline_ms),
            value,
        })
}

fn arb_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        arb_ballot().prop_map(Request::Prepare),
        arb_proposal().prop_map(Request::Accept),
        arb_proposal().prop_map(Request::Commit),
        arb_ballot().prop_map(Request::Release),
    ]
}

proptest! {
    /// Any request round-trips, and a single flipped bit is caught (by the
    /// checksum, or the frame decodes to something else, never a panic).
    #[test]
    fn requests_round_trip(id in any::<u64>(), key in proptest::collection::vec(any::<u8>(), 0..32),
                           request in arb_request(), flip in any::<usize>()) {
        let msg = RegisterMessage::Ask { id, key, request };
        let mut bytes = encoded(&msg);
        prop_assert_eq!(decode(&bytes), Ok(Some((msg.clone(), bytes.len()))));
        let at = framing::FRAME_HEADER_BYTES + flip % (bytes.len() - framing::FRAME_HEADER_BYTES);
        bytes[at] ^= 1;
        prop_assert!(decode(&bytes).is_err());
    }
}
