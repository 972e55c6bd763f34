//! The peer endpoint as a hostile or broken peer sees it: the upgrade, and
//! writes the node must refuse (review findings, regression tests).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman_node::peer::frame::{self, Applied, Message, ReplicaErrorKind, Stamped};
use ataman_node::peer::handshake::parse_upgrade_response;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::Node;

fn upgraded(node: &Node) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&support::peer_upgrade_request(
        node.addr(),
        "http://test-peer:1",
    ))
    .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the 101");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(used) = parse_upgrade_response(&buf).unwrap() {
            buf.drain(..used);
            return (s, buf);
        }
    }
}

fn answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> Message {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((msg, used)) = frame::decode(buf).unwrap() {
            buf.drain(..used);
            return msg;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Regression: a peer's write stamped near u64::MAX made the node's clock
/// overflow (a panic in debug builds; in release a key nobody could ever
/// overwrite). It is refused as invalid, and the node keeps serving.
#[test]
fn a_timestamp_far_ahead_is_refused() {
    let node = Node::start(&[]);
    let (mut s, mut buf) = upgraded(&node);
    let mut out = Vec::new();
    let forged = Stamped {
        ts: u64::MAX - 3,
        value: Some(b"forever".to_vec()),
        deadline_ms: None,
    };
    frame::encode(
        &Message::Write {
            id: 7,
            key: b"k".to_vec(),
            version: forged,
        },
        &mut out,
    );
    frame::encode(
        &Message::Read {
            id: 8,
            key: b"k".to_vec(),
        },
        &mut out,
    );
    s.write_all(&out).unwrap();
    match answer(&mut s, &mut buf) {
        Message::WriteAck {
            id: 7,
            result: Err(e),
        } => {
            assert_eq!(e.kind, ReplicaErrorKind::Invalid, "{e:?}");
            assert!(e.message.contains("ahead"), "{e:?}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    match answer(&mut s, &mut buf) {
        Message::ReadReply {
            id: 8,
            result: Ok(None),
        } => {}
        other => panic!("the forged write must not be stored: {other:?}"),
    }
    assert_eq!(node.put(b"k", b"v").status, 201);
    assert_eq!(node.get(b"k").body, b"v");
}

/// Re-stamping, the replica's side (docs/FORMAT.md "Peer frame", status
/// 4): a write older than the version held, or under the same timestamp
/// with other contents that the tie rule ranks lower, is not stored and is
/// answered with the held timestamp; the same version again, the tie
/// rule's winner under the same timestamp (what read repair and hints
/// carry: issue 31, "the tie rule"), and a newer one are stored.
#[test]
fn a_replica_answers_holds_newer() {
    let node = Node::start(&[]);
    assert_eq!(node.put(b"k", b"held").status, 201);
    let (mut s, mut buf) = upgraded(&node);
    let send = |msg: Message, s: &mut TcpStream, buf: &mut Vec<u8>| {
        let mut out = Vec::new();
        frame::encode(&msg, &mut out);
        s.write_all(&out).unwrap();
        answer(s, buf)
    };
    let held = match send(
        Message::Read {
            id: 1,
            key: b"k".to_vec(),
        },
        &mut s,
        &mut buf,
    ) {
        Message::ReadReply {
            result: Ok(Some(v)),
            ..
        } => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(held.value.as_deref(), Some(&b"held"[..]));
    let write = |id, ts, value: &[u8]| Message::Write {
        id,
        key: b"k".to_vec(),
        version: Stamped {
            ts,
            value: Some(value.to_vec()),
            deadline_ms: None,
        },
    };
    // Under one timestamp the value with the greater digest wins.
    let digest = ataman_node::version_order::value_digest;
    let candidates = [&b"a"[..], b"b", b"c", b"d", b"e", b"f", b"g", b"h"];
    let loser = *candidates
        .iter()
        .find(|c| digest(c) < digest(b"held"))
        .expect("some candidate ranks below");
    let winner = *candidates
        .iter()
        .find(|c| digest(c) > digest(b"held"))
        .expect("some candidate ranks above");
    let cases = [
        (
            2,
            held.ts - 1,
            &b"older"[..],
            Applied::HoldsNewer { ts: held.ts },
        ),
        (3, held.ts, loser, Applied::HoldsNewer { ts: held.ts }),
        (4, held.ts, &b"held"[..], Applied::Stored),
        (5, held.ts, winner, Applied::Stored),
        // The winner is held now: the first value loses to it.
        (
            6,
            held.ts,
            &b"held"[..],
            Applied::HoldsNewer { ts: held.ts },
        ),
        (7, held.ts + 1, &b"newer"[..], Applied::Stored),
    ];
    for (id, ts, value, want) in cases {
        match send(write(id, ts, value), &mut s, &mut buf) {
            Message::WriteAck { id: got, result } => {
                assert_eq!((got, result), (id, Ok(want)), "write of ts {ts}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(node.get(b"k").body, b"newer");
    let metrics = String::from_utf8_lossy(&node.get_target("/metrics").body).into_owned();
    assert!(
        metrics.contains("\nataman_peer_writes_superseded_total 3\n"),
        "{metrics}"
    );
}
