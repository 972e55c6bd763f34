//! Unit tests of the fault proxy against small echo servers on 127.0.0.1.
//!
//! Timing assertions are lower bounds only (a delay is at least its
//! duration); every wait is bounded.

use super::*;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Bound on any single wait of these tests.
const WAIT: Duration = Duration::from_secs(5);
/// How long "nothing comes back" is watched.
const SILENCE: Duration = Duration::from_millis(300);

/// An echo server: on accept it writes `greeting`, then echoes every byte
/// until the client's end of stream, then closes. Stops when dropped.
struct EchoServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EchoServer {
    fn start(greeting: &'static [u8]) -> EchoServer {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut connections = Vec::new();
            let started = Instant::now();
            while !flag.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(60) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let flag = Arc::clone(&flag);
                        connections.push(std::thread::spawn(move || echo(stream, greeting, &flag)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for connection in connections {
                let _ = connection.join();
            }
        });
        EchoServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

fn echo(mut stream: TcpStream, greeting: &[u8], stop: &AtomicBool) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    if stream.write_all(greeting).is_err() {
        return;
    }
    let mut buffer = [0u8; 4096];
    let started = Instant::now();
    while !stop.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(60) {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => {
                if stream.write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn connect(proxy: &FaultProxy) -> TcpStream {
    let stream = TcpStream::connect_timeout(&proxy.addr(), WAIT).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    stream
}

fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    stream.read_exact(&mut bytes).unwrap();
    bytes
}

/// True when nothing arrives within `bound` (a timeout), false on bytes
/// or a close.
fn silent_for(stream: &mut TcpStream, bound: Duration) -> bool {
    stream.set_read_timeout(Some(bound)).unwrap();
    let mut byte = [0u8; 1];
    let result = stream.read(&mut byte);
    stream.set_read_timeout(Some(WAIT)).unwrap();
    matches!(result, Err(e) if is_timeout(&e))
}

/// True when the peer closes within `bound` (end of stream or reset).
fn closed_within(stream: &mut TcpStream, bound: Duration) -> bool {
    stream.set_read_timeout(Some(bound)).unwrap();
    let mut buffer = [0u8; 64];
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Polls `condition` until it holds or [`WAIT`] passes.
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Pass forwards both ways, counts bytes, and passes on an end of stream.
#[test]
fn pass_through_echoes() {
    let server = EchoServer::start(b"");
    let proxy = FaultProxy::start(server.addr).unwrap();
    assert_eq!(
        proxy.url(),
        format!("http://127.0.0.1:{}", proxy.addr().port())
    );
    assert_eq!(proxy.mode(), LinkMode::Pass);
    let mut client = connect(&proxy);
    client.write_all(b"hello").unwrap();
    assert_eq!(read_n(&mut client, 5), b"hello");
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut writer = client.try_clone().unwrap();
    let sent = payload.clone();
    let writing = std::thread::spawn(move || writer.write_all(&sent).unwrap());
    assert_eq!(read_n(&mut client, payload.len()), payload);
    writing.join().unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    assert!(
        closed_within(&mut client, WAIT),
        "the end of stream was not passed on"
    );
    let total = 5 + payload.len() as u64;
    assert!(eventually(|| proxy.stats().connections_open == 0));
    let stats = proxy.stats();
    assert_eq!(
        (
            stats.connections_accepted,
            stats.bytes_to_target,
            stats.bytes_from_target
        ),
        (1, total, total)
    );
    assert_eq!(stats.bytes_dropped, 0);
}

/// Delay holds every chunk at least its duration each way, in order.
#[test]
fn delay_holds_chunks_in_order() {
    let server = EchoServer::start(b"");
    let proxy = FaultProxy::start(server.addr).unwrap();
    let delay = Duration::from_millis(100);
    let mut client = connect(&proxy);
    client.write_all(b"0").unwrap();
    assert_eq!(read_n(&mut client, 1), b"0");
    proxy.set_mode(LinkMode::Delay(delay));
    assert_eq!(proxy.mode(), LinkMode::Delay(delay));
    let started = Instant::now();
    for chunk in [b"a", b"b", b"c"] {
        client.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(read_n(&mut client, 1), b"a");
    let round_trip = started.elapsed();
    assert!(
        round_trip >= 2 * delay,
        "round trip {round_trip:?} < 2 x {delay:?}"
    );
    assert_eq!(read_n(&mut client, 2), b"bc");
    // Back to Pass: the link still works.
    proxy.set_mode(LinkMode::Pass);
    client.write_all(b"d").unwrap();
    assert_eq!(read_n(&mut client, 1), b"d");
}

/// Drop keeps connections open but silent, black-holes new ones, and the
/// link resumes when set back to Pass.
#[test]
fn drop_black_holes_and_resumes() {
    let server = EchoServer::start(b"");
    let proxy = FaultProxy::start(server.addr).unwrap();
    let mut client = connect(&proxy);
    client.write_all(b"x").unwrap();
    assert_eq!(read_n(&mut client, 1), b"x");
    proxy.set_mode(LinkMode::Drop);
    client.write_all(b"lost").unwrap();
    assert!(
        silent_for(&mut client, SILENCE),
        "bytes came back through Drop"
    );
    let mut late = connect(&proxy);
    late.write_all(b"also lost").unwrap();
    assert!(
        silent_for(&mut late, SILENCE),
        "a new connection was not black-holed"
    );
    assert!(eventually(|| proxy.stats().bytes_dropped >= 4 + 9));
    assert_eq!(proxy.stats().connections_open, 2);
    proxy.set_mode(LinkMode::Pass);
    client.write_all(b"back").unwrap();
    assert_eq!(read_n(&mut client, 4), b"back");
    late.write_all(b"too").unwrap();
    assert_eq!(read_n(&mut late, 3), b"too");
}

/// Drop one way: requests reach the target, answers are lost.
#[test]
fn drop_one_way_loses_answers_only() {
    let server = EchoServer::start(b"");
    let proxy = FaultProxy::start(server.addr).unwrap();
    let mut client = connect(&proxy);
    proxy.set_mode_one_way(Direction::FromTarget, LinkMode::Drop);
    assert_eq!(proxy.mode(), LinkMode::Pass);
    assert_eq!(proxy.mode_one_way(Direction::FromTarget), LinkMode::Drop);
    client.write_all(b"ping").unwrap();
    assert!(silent_for(&mut client, SILENCE));
    assert!(eventually(|| {
        let stats = proxy.stats();
        stats.bytes_to_target == 4 && stats.bytes_dropped == 4
    }));
}

/// Cut closes open connections and every new one, while the target lives.
#[test]
fn cut_closes_current_and_new_connections() {
    let server = EchoServer::start(b"");
    let proxy = FaultProxy::start(server.addr).unwrap();
    let mut client = connect(&proxy);
    client.write_all(b"x").unwrap();
    assert_eq!(read_n(&mut client, 1), b"x");
    proxy.set_mode(LinkMode::Cut);
    assert!(
        closed_within(&mut client, WAIT),
        "an open connection survived Cut"
    );
    let mut late = connect(&proxy);
    assert!(
        closed_within(&mut late, WAIT),
        "a new connection survived Cut"
    );
    assert!(eventually(|| proxy.stats().connections_open == 0));
    assert!(proxy.stats().connections_cut >= 2);
    // The target itself still answers.
    let mut direct = TcpStream::connect_timeout(&server.addr, WAIT).unwrap();
    direct.set_read_timeout(Some(WAIT)).unwrap();
    direct.write_all(b"y").unwrap();
    assert_eq!(read_n(&mut direct, 1), b"y");
    proxy.set_mode(LinkMode::Pass);
    let mut again = connect(&proxy);
    again.write_all(b"z").unwrap();
    assert_eq!(read_n(&mut again, 1), b"z");
}

/// set_target moves new connections; open ones keep their target.
#[test]
fn set_target_moves_new_connections() {
    let first = EchoServer::start(b"A");
    let second = EchoServer::start(b"B");
    let proxy = FaultProxy::start(first.addr).unwrap();
    let mut old = connect(&proxy);
    assert_eq!(read_n(&mut old, 1), b"A");
    proxy.set_target(second.addr);
    assert_eq!(proxy.target(), Some(second.addr));
    let mut new = connect(&proxy);
    assert_eq!(read_n(&mut new, 1), b"B");
    old.write_all(b"o").unwrap();
    assert_eq!(read_n(&mut old, 1), b"o");
}

/// A refused target or no target closes the client at once.
#[test]
fn unreachable_target_closes_client() {
    let proxy = FaultProxy::start_without_target().unwrap();
    let mut client = connect(&proxy);
    assert!(closed_within(&mut client, WAIT));
    let dead = {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.local_addr().unwrap()
    };
    proxy.set_target(dead);
    let mut client = connect(&proxy);
    assert!(closed_within(&mut client, WAIT));
    assert_eq!(proxy.stats().connections_refused, 2);
}

/// Dropping the proxy closes its listener and its connections.
#[test]
fn drop_stops_everything() {
    let server = EchoServer::start(b"");
    let proxy = FaultProxy::start(server.addr).unwrap();
    let addr = proxy.addr();
    let mut client = connect(&proxy);
    client.write_all(b"x").unwrap();
    assert_eq!(read_n(&mut client, 1), b"x");
    let started = Instant::now();
    drop(proxy);
    assert!(started.elapsed() < JOIN_TIMEOUT + WAIT);
    assert!(closed_within(&mut client, WAIT));
    assert!(TcpStream::connect_timeout(&addr, WAIT).is_err());
}
