//! The non-blocking transport's edge cases over real sockets on 127.0.0.1,
//! driven the way the connection code drives it: edge-triggered `mio`
//! events, reads that stop at the first short read, writes that stop at
//! `WouldBlock` and a flush before an answer counts as sent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::blocking::BlockingStream;
use super::load::{self, Identity};
use super::transport::Transport;
use mio::{Events, Interest, Poll, Token};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bound on every test's event loop.
const BOUND: Duration = Duration::from_secs(20);
/// Bytes a test sends (many TLS records, more than a socket buffer).
const PAYLOAD_BYTES: usize = 4 * 1024 * 1024 + 17;

/// Socket buffer bytes asked for (the kernel doubles and rounds it): small,
/// so that the payload cannot fit in the buffers and writes must block.
const SOCKET_BUFFER_BYTES: libc::c_int = 16 * 1024;

/// Shrinks `fd`'s send and receive buffers to [`SOCKET_BUFFER_BYTES`].
fn small_buffers(fd: std::os::fd::RawFd) {
    for option in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        let value = SOCKET_BUFFER_BYTES;
        // SAFETY: setsockopt(2) on a socket this test owns, with a pointer
        // to a live c_int and its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt: {}", io::Error::last_os_error());
    }
}

/// A CA-less self-signed identity for 127.0.0.1 and the trust in it.
fn identity() -> (Identity, Arc<rustls::RootCertStore>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der = CertificateDer::from(cert.der().to_vec());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (
        Identity {
            certs: vec![der],
            key,
        },
        Arc::new(roots),
    )
}

/// A TLS server transport registered edge-triggered with `poll`, and the
/// blocking client connected to it (handshake done on a helper thread).
fn pair(poll: &Poll) -> (Transport, std::thread::JoinHandle<BlockingStream>) {
    let (id, roots) = identity();
    let server_config = load::server_config(id, None).unwrap();
    let client_config = load::client_config(&roots, None).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        let sock = std::net::TcpStream::connect(addr).unwrap();
        small_buffers(std::os::fd::AsRawFd::as_raw_fd(&sock));
        sock.set_read_timeout(Some(BOUND)).unwrap();
        sock.set_write_timeout(Some(BOUND)).unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        BlockingStream::connect_tls(sock, client_config, name, BOUND).unwrap()
    });
    let (sock, _) = listener.accept().unwrap();
    small_buffers(std::os::fd::AsRawFd::as_raw_fd(&sock));
    sock.set_nonblocking(true).unwrap();
    let mut server =
        Transport::accept(mio::net::TcpStream::from_std(sock), Some(server_config)).unwrap();
    poll.registry()
        .register(
            &mut server,
            Token(0),
            Interest::READABLE | Interest::WRITABLE,
        )
        .unwrap();
    (server, client)
}

fn payload() -> Vec<u8> {
    (0..PAYLOAD_BYTES).map(|i| (i % 251) as u8).collect()
}

/// Reads as `Conn::read` does: until a short read (unless the event said
/// the peer closed) or `WouldBlock`; `true` at the end.
fn read_round(
    server: &mut Transport,
    got: &mut Vec<u8>,
    chunk: usize,
    peer_closed: bool,
) -> io::Result<bool> {
    let mut buf = vec![0u8; chunk];
    loop {
        match server.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if n < chunk && !peer_closed {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// Plaintext decrypted but not yet returned never waits for a socket event:
/// an edge-triggered loop that stops at the first short read gets every
/// byte (with buffers smaller and larger than a TLS record), then the end
/// that the client's `close_notify` and TCP end bring.
#[test]
fn edge_triggered_reads_get_everything_then_close_notify() {
    for chunk in [1000, 64 * 1024] {
        let mut poll = Poll::new().unwrap();
        let (mut server, client) = pair(&poll);
        let sent = payload();
        let to_send = sent.clone();
        let writer = std::thread::spawn(move || {
            let mut client = client.join().unwrap();
            client.write_all(&to_send).unwrap();
            if let BlockingStream::Tls(t) = &mut client {
                t.0.send_close_notify();
            }
            client.flush().unwrap();
            client.tcp().shutdown(std::net::Shutdown::Write).unwrap();
            client
        });
        let mut events = Events::with_capacity(16);
        let mut got = Vec::new();
        let deadline = Instant::now() + BOUND;
        let mut ended = false;
        while !ended {
            assert!(
                Instant::now() < deadline,
                "chunk {chunk}: stalled at {} of {} bytes",
                got.len(),
                sent.len()
            );
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            if events.iter().any(|e| e.is_readable()) {
                let closed = events.iter().any(|e| e.is_read_closed());
                ended = read_round(&mut server, &mut got, chunk, closed).unwrap();
            }
        }
        assert!(got == sent, "chunk {chunk}: the bytes differ");
        drop(writer.join().unwrap());
    }
}

/// Writes that stop at `WouldBlock` resume on writable events; `flush`
/// says `WouldBlock` while records are held back and `Ok` once all left;
/// the client receives every byte in order.
#[test]
fn partial_writes_resume_and_flush() {
    let mut poll = Poll::new().unwrap();
    let (mut server, client) = pair(&poll);
    let sent = payload();
    let expected = sent.len();
    let reader = std::thread::spawn(move || {
        let mut client = client.join().unwrap();
        // Let the server fill the socket before reading.
        std::thread::sleep(Duration::from_millis(200));
        let mut got = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        while got.len() < expected {
            let n = client.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed early");
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let mut events = Events::with_capacity(16);
    let mut pos = 0;
    let mut blocked = 0u32;
    let deadline = Instant::now() + BOUND;
    loop {
        assert!(
            Instant::now() < deadline,
            "stalled at {pos} of {}",
            sent.len()
        );
        while pos < sent.len() {
            match server.write(&sent[pos..]) {
                Ok(n) => pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked += 1;
                    break;
                }
                Err(e) => panic!("write: {e}"),
            }
        }
        if pos == sent.len() {
            match server.flush() {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => blocked += 1,
                Err(e) => panic!("flush: {e}"),
            }
        }
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .unwrap();
        // Handshake messages and reads advance on readable events.
        let mut sink = Vec::new();
        let _ = read_round(&mut server, &mut sink, 1024, false);
        assert!(sink.is_empty(), "the client sent data");
    }
    assert!(
        blocked > 0,
        "the socket never filled: the test proves nothing"
    );
    let got = reader.join().unwrap();
    assert!(got == sent, "the bytes differ");
}

/// A plaintext client on the TLS port: the server's read fails (no bytes
/// handed up as a request), and the client gets a TLS alert, not HTTP.
#[test]
fn plaintext_client_fails_the_handshake() {
    let (id, _) = identity();
    let config = load::server_config(id, None).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut plain = std::net::TcpStream::connect(addr).unwrap();
    plain.set_read_timeout(Some(BOUND)).unwrap();
    plain
        .write_all(b"GET /v0/status HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (sock, _) = listener.accept().unwrap();
    sock.set_nonblocking(true).unwrap();
    let mut server = Transport::accept(mio::net::TcpStream::from_std(sock), Some(config)).unwrap();
    let deadline = Instant::now() + BOUND;
    let mut buf = [0u8; 1024];
    let error = loop {
        assert!(
            Instant::now() < deadline,
            "no verdict on the plaintext bytes"
        );
        match server.read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => break e,
            Ok(n) => panic!("{n} plaintext bytes handed up as data"),
        }
    };
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    drop(server);
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    // A TLS record of type 21 (alert), not "HTTP/".
    assert_eq!(answer.first(), Some(&21), "{answer:?}");
}
