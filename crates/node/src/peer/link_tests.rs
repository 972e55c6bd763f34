//! A link against a hand-written peer on a loopback socket: what the
//! coordinator hears when the peer fences its layout version.

use super::*;
use crate::peer::frame::{ReplicaError, ReplicaErrorKind};
use crate::peer::handshake;
use mio::{Events, Poll};
use std::net::TcpListener;

/// A test's waiter: a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct W(u32);

impl LinkWaiter for W {
    fn is_client_request(&self) -> bool {
        true
    }
}

const DEADLINE: Duration = Duration::from_secs(20);

/// Reads the link's upgrade request from `stream` (bounded by a read
/// timeout): its head, and the bytes after it.
fn read_upgrade(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).to_string();
            buf.drain(..end + 4);
            return (head, buf);
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the link closed during its upgrade");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads frames from `stream` until `n` arrived (bounded by the socket's
/// read timeout).
fn read_frames(stream: &mut std::net::TcpStream, buf: &mut Vec<u8>, n: usize) -> Vec<Message> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some((msg, used)) = frame::decode(buf).expect("a well-formed frame") {
            buf.drain(..used);
            got.push(msg);
        }
        if got.len() >= n {
            return got;
        }
        let read = stream.read(&mut chunk).expect("the link's frames");
        assert!(read > 0, "the link closed before sending {n} frames");
        buf.extend_from_slice(&chunk[..read]);
    }
}

/// A hand-written peer on a loopback port: a thread that accepts one
/// connection and runs `serve` on it. The port, and the thread.
fn peer<T: Send + 'static>(
    serve: impl FnOnce(std::net::TcpStream) -> T + Send + 'static,
) -> (std::net::SocketAddr, std::thread::JoinHandle<T>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || serve(listener.accept().unwrap().0));
    (addr, thread)
}

/// Reads the link's upgrade request and accepts it: its head, and the
/// bytes after it.
fn upgraded(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    let (head, buf) = read_upgrade(stream);
    stream.write_all(&handshake::upgrade_response()).unwrap();
    (head, buf)
}

/// A link's view of the world for these tests, naming layout `version`.
fn env<'a>(status: &'a PeerStatus, batch_frames: &'a Histogram, version: u64) -> LinkEnv<'a> {
    LinkEnv {
        status,
        self_url: "http://127.0.0.1:1",
        batch_frames,
        silence_timeout: DEADLINE,
        secret: None,
        tls: None,
        layout_version: version,
        resolve_once: false,
    }
}

/// A write of `k` = `v` at timestamp 1, with request id `id`.
fn write(id: u64) -> Message {
    Message::Write {
        id,
        key: b"k".to_vec(),
        version: Stamped {
            ts: 1,
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        },
    }
}

/// Drives `link` until `n` requests have an outcome (bounded): the
/// outcomes, by waiter.
fn drive(
    link: &mut PeerLink<W>,
    env: &LinkEnv<'_>,
    poll: &mut Poll,
    n: usize,
) -> Vec<(W, PeerReply)> {
    let mut outcomes: Vec<(W, PeerReply)> = Vec::new();
    let mut events = Events::with_capacity(16);
    let start = Instant::now();
    while outcomes.len() < n {
        assert!(start.elapsed() < DEADLINE, "no outcome: {outcomes:?}");
        poll.poll(&mut events, Some(Duration::from_millis(20)))
            .unwrap();
        for event in events.iter() {
            link.on_event(
                env,
                poll.registry(),
                event.is_readable(),
                event.is_writable(),
                &mut outcomes,
            );
        }
        link.flush(env, poll.registry(), &mut outcomes);
    }
    outcomes.sort_by_key(|(w, _)| w.0);
    outcomes
}

/// The peer answers the first request `StaleLayout` and closes (as
/// `net::peer_conn` does): both requests in flight come back `Fenced`,
/// not `Failed`, and the link then says the version is fenced
/// (`net_io` sends nothing under it) until this node places with a newer
/// one.
#[test]
fn a_fenced_connection_answers_everything_on_it_fenced() {
    let (addr, peer) = peer(|mut stream| {
        let (head, mut buf) = upgraded(&mut stream);
        let frames = read_frames(&mut stream, &mut buf, 2);
        let mut out = Vec::new();
        frame::encode(
            &Message::WriteAck {
                id: frames[0].id(),
                result: Err(ReplicaError::new(
                    ReplicaErrorKind::StaleLayout,
                    "stale layout: the coordinator is on layout version 1, this node knows version 2",
                )),
            },
            &mut out,
        );
        stream.write_all(&out).unwrap();
        // Then closes, without answering the second request.
        drop(stream);
        head
    });

    let outcomes = two_requests_against(addr);
    assert!(
        matches!(&outcomes[..], [(W(1), PeerReply::Fenced(a)), (W(2), PeerReply::Fenced(_))]
            if a.contains("knows version 2")),
        "{outcomes:?}"
    );
    let head = peer.join().unwrap();
    assert!(head.contains("X-Ataman-Layout: 1"), "{head}");
}

/// The peer refuses the upgrade itself with 409 (it knew the newer
/// version before this connection): what waited for the connection is
/// answered `Fenced`.
#[test]
fn a_fenced_upgrade_answers_what_waits_fenced() {
    let (addr, peer) = peer(|mut stream| {
        read_upgrade(&mut stream);
        let body =
            "stale layout: the coordinator is on layout version 1, this node knows version 2";
        let answer = format!(
            "HTTP/1.1 409 Conflict\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).unwrap();
    });
    let outcomes = two_requests_against(addr);
    assert!(
        matches!(
            &outcomes[..],
            [(W(1), PeerReply::Fenced(_)), (W(2), PeerReply::Fenced(_))]
        ),
        "{outcomes:?}"
    );
    peer.join().unwrap();
}

/// Sends two writes placed with layout version 1 through a new link to
/// `addr` and drives it until both are answered; checks that the link
/// then says version 1 is fenced and version 2 is not. The outcomes, by
/// waiter.
fn two_requests_against(addr: std::net::SocketAddr) -> Vec<(W, PeerReply)> {
    let mut poll = Poll::new().unwrap();
    let status = PeerStatus::new(LinkState::Idle);
    let batch_frames = Histogram::default();
    let mut link: PeerLink<W> =
        PeerLink::new(format!("http://{addr}"), addr.to_string(), Token(1), 16);
    let now = Instant::now();
    for w in [W(1), W(2)] {
        link.send(
            &env(&status, &batch_frames, 1),
            poll.registry(),
            now,
            now + DEADLINE,
            w,
            write,
        )
        .unwrap();
    }
    let outcomes = drive(&mut link, &env(&status, &batch_frames, 1), &mut poll, 2);
    // Under the fenced version the link says so; under a newer one it
    // lets requests go.
    assert!(
        link.fenced(&env(&status, &batch_frames, 1), Instant::now())
            .is_some()
    );
    assert_eq!(
        link.fenced(&env(&status, &batch_frames, 2), Instant::now()),
        None
    );
    outcomes
}

/// Every request the peer answers is timed in its kind's histogram; a
/// refusal is counted as failed, not timed.
#[test]
fn answered_requests_are_timed_by_kind() {
    let (addr, peer) = peer(|mut stream| {
        let (_, mut buf) = upgraded(&mut stream);
        let frames = read_frames(&mut stream, &mut buf, 3);
        let mut out = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let answer = match (i, f) {
                (_, Message::Read { id, .. }) => Message::ReadReply {
                    id: *id,
                    result: Ok(None),
                },
                (0, f) => Message::WriteAck {
                    id: f.id(),
                    result: Ok(Applied::Stored),
                },
                (_, f) => Message::WriteAck {
                    id: f.id(),
                    result: Err(ReplicaError::new(
                        ReplicaErrorKind::Unavailable,
                        "the write queue is full",
                    )),
                },
            };
            frame::encode(&answer, &mut out);
        }
        stream.write_all(&out).unwrap();
        // Holds the connection open until the link has read the answers.
        let mut rest = [0u8; 64];
        let _ = stream.read(&mut rest);
    });

    let mut poll = Poll::new().unwrap();
    let status = PeerStatus::new(LinkState::Idle);
    let batch_frames = Histogram::default();
    let env = env(&status, &batch_frames, 1);
    let mut link: PeerLink<W> =
        PeerLink::new(format!("http://{addr}"), addr.to_string(), Token(1), 16);
    let now = Instant::now();
    let read = |id| Message::Read {
        id,
        key: b"k".to_vec(),
    };
    link.send(&env, poll.registry(), now, now + DEADLINE, W(1), write)
        .unwrap();
    link.send(&env, poll.registry(), now, now + DEADLINE, W(2), read)
        .unwrap();
    link.send(&env, poll.registry(), now, now + DEADLINE, W(3), write)
        .unwrap();
    let outcomes = drive(&mut link, &env, &mut poll, 3);
    assert!(
        matches!(
            &outcomes[..],
            [
                (W(1), PeerReply::Written),
                (W(2), PeerReply::Read(None)),
                (W(3), PeerReply::Failed(_))
            ]
        ),
        "{outcomes:?}"
    );
    let (writes, reads) = (status.write_us.snapshot(), status.read_us.snapshot());
    assert_eq!((writes.count, reads.count), (1, 1));
    assert!(writes.max <= u64::try_from(now.elapsed().as_micros()).unwrap());
    assert_eq!(status.failed.load(Ordering::Relaxed), 1);
    drop(link);
    peer.join().unwrap();
}
