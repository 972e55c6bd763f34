//! Shared helpers of the black-box HTTP tests: a real `ataman serve`
//! process on a free port and a temporary data directory, and raw HTTP/1.1
//! connections to it.
//!
//! Everything is bounded in time: starting (10 s), every socket read and
//! write (10 s), stopping (10 s). A helper that cannot do its job panics
//! with what it saw, which fails the test that called it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)] // each test file uses a different subset

pub mod cluster;
pub mod harness_run;
pub mod raw_resp;
pub mod redis_server;
pub mod resp_client;
pub mod rmw_cases;
pub mod spare;

use ataman::http_client::response::read_response;
pub use ataman::http_client::response::{Response, ResponseError};
use ataman::http_client::url::target;
use ataman::launcher::NodeProcess;
/// The test kit's seeded generator, for test workloads.
#[allow(unused_imports)] // each test file uses a different subset
pub use ataman_testkit::rng::Rng;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bound on a node becoming ready (listening line, then status 200).
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on a node exiting after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on every socket read and write of the tests.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// `/v0/entity?id=KEY`, percent-encoded.
pub fn entity(key: &[u8]) -> String {
    target("/v0/entity", &[("id", key)])
}

/// A request: request line, `Host`, the extra headers, `Content-Length`
/// when there is a body, the empty line, the body.
pub fn request(
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut bytes = format!("{method} {target} HTTP/1.1\r\nHost: ataman\r\n").into_bytes();
    for (name, value) in headers {
        bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    if let Some(body) = body {
        bytes.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    bytes.extend_from_slice(b"\r\n");
    if let Some(body) = body {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// Asserts an error answer as docs/API.md "Errors" defines it: the status,
/// a `text/plain` body of one line.
pub fn assert_error(response: &Response, status: u16, context: &str) {
    assert_eq!(
        response.status,
        status,
        "{context}: expected {status}, got {} with body {:?}",
        response.status,
        String::from_utf8_lossy(&response.body)
    );
    let content_type = response.header_str("content-type").unwrap_or_default();
    assert!(
        content_type.to_ascii_lowercase().starts_with("text/plain"),
        "{context}: error answer with Content-Type {content_type:?}, expected text/plain"
    );
    let text = String::from_utf8_lossy(&response.body);
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    assert!(
        !line.is_empty() && !line.contains('\n'),
        "{context}: error body is not one line: {text:?}"
    );
}

/// One raw connection to a node.
pub struct Conn {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connects, with every read and write bounded by [`IO_TIMEOUT`].
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    /// [`Conn::open`], the connect's error returned (a node killed on
    /// purpose refuses it).
    pub fn try_open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader })
    }

    /// Writes `bytes` in one `write_all`.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Reads the next response (1xx answers included).
    pub fn read(&mut self) -> Result<Response, ResponseError> {
        read_response(&mut self.reader)
    }

    /// Sends one request and returns its final answer; panics on I/O errors.
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Response {
        self.send(&request(method, target, headers, body))
            .unwrap_or_else(|e| panic!("{method} {target}: write failed: {e}"));
        let response = self
            .read()
            .unwrap_or_else(|e| panic!("{method} {target}: no answer: {e}"));
        assert!(
            !(100..200).contains(&response.status),
            "{method} {target}: unexpected {} without Expect",
            response.status
        );
        response
    }

    /// `GET /v0/entity?id=KEY`.
    pub fn get(&mut self, key: &[u8]) -> Response {
        self.request("GET", &entity(key), &[], None)
    }

    /// `PUT /v0/entity?id=KEY` with `value` as the body.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Response {
        self.request("PUT", &entity(key), &[], Some(value))
    }

    /// `DELETE /v0/entity?id=KEY`.
    pub fn delete(&mut self, key: &[u8]) -> Response {
        self.request("DELETE", &entity(key), &[], None)
    }

    /// Bounds the following reads by `timeout` instead of [`IO_TIMEOUT`].
    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
    }

    /// Closes our sending side (the server sees end of input).
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// True when the server closes the connection (end of stream or reset)
    /// within `bound`; panics if it sends bytes instead.
    pub fn closed_within(&mut self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let result = self.reader.fill_buf().map(|b| b.to_vec());
            self.stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            match result {
                Ok(bytes) if bytes.is_empty() => return true,
                Ok(bytes) => panic!(
                    "expected a close, got bytes {:?}",
                    String::from_utf8_lossy(&bytes)
                ),
                Err(e) => match e.kind() {
                    std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe => return true,
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                        return false;
                    }
                    std::io::ErrorKind::Interrupted => continue,
                    _ => panic!("unexpected error while waiting for a close: {e}"),
                },
            }
        }
    }
}

/// A running `ataman serve` on `127.0.0.1:0` with a temporary data directory.
/// Dropping it kills the process.
pub struct Node {
    process: Option<NodeProcess>,
    /// The node's stderr (its log) of every start, when kept ([`Node::start_logged`]).
    log: Option<Arc<Mutex<String>>>,
    log_drain: Option<JoinHandle<()>>,
    addr: SocketAddr,
    args: Vec<String>,
    /// Soft and hard `RLIMIT_NOFILE` of the process, when lowered.
    fd_limit: Option<u64>,
    // Field order: the process dies (Drop) before the directory goes.
    root: tempfile::TempDir,
}

impl Node {
    /// Starts a node with `args` added to `serve --listen 127.0.0.1:0 --data-dir DIR`.
    pub fn start(args: &[&str]) -> Node {
        Node::stopped(args, None).started()
    }

    /// Like [`Node::start`], but its stderr (the log) is kept for
    /// [`Node::log`] instead of shown, across restarts.
    pub fn start_logged(args: &[&str]) -> Node {
        let mut node = Node::stopped(args, None);
        node.log = Some(Arc::new(Mutex::new(String::new())));
        node.started()
    }

    /// What the node wrote on stderr so far (all of it once it was
    /// stopped); panics unless started by [`Node::start_logged`].
    pub fn log(&self) -> String {
        let log = self.log.as_ref().expect("started without keeping the log");
        log.lock().unwrap().clone()
    }

    /// Like [`Node::start`], with both the soft and the hard descriptor
    /// limit (`RLIMIT_NOFILE`) of the process set to `limit`.
    pub fn start_with_fd_limit(args: &[&str], limit: u64) -> Node {
        Node::stopped(args, Some(limit)).started()
    }

    /// A node not started yet (see [`Node::start_expecting_exit`]), with
    /// the descriptor limit `fd_limit` when given.
    pub fn stopped(args: &[&str], fd_limit: Option<u64>) -> Node {
        Node {
            process: None,
            log: None,
            log_drain: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            args: args.iter().map(|a| a.to_string()).collect(),
            fd_limit,
            root: tempfile::tempdir().unwrap(),
        }
    }

    fn started(mut self) -> Node {
        self.spawn();
        self
    }

    /// The process id of the running node.
    pub fn pid(&self) -> u32 {
        self.process
            .as_ref()
            .expect("the node is not running")
            .pid()
    }

    /// `ataman serve` on `127.0.0.1:0` with this node's data directory,
    /// arguments and descriptor limit.
    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ataman"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(self.data_dir())
            .args(&self.args)
            .stdin(Stdio::null());
        if let Some(limit) = self.fd_limit {
            use std::os::unix::process::CommandExt;
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            // SAFETY: between fork and exec the closure only calls
            // setrlimit(2), which is async-signal-safe, and allocates nothing.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        command
    }

    /// The address the node listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// True between a start and a stop by the test (a process that died
    /// on its own still counts as running until stopped).
    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// The data directory (kept across restarts).
    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// A new connection.
    pub fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    /// `GET /v0/entity?id=KEY` on a new connection.
    pub fn get(&self, key: &[u8]) -> Response {
        self.conn().get(key)
    }

    /// `PUT /v0/entity?id=KEY` on a new connection.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Response {
        self.conn().put(key, value)
    }

    /// `DELETE /v0/entity?id=KEY` on a new connection.
    pub fn delete(&self, key: &[u8]) -> Response {
        self.conn().delete(key)
    }

    /// `GET target` on a new connection.
    pub fn get_target(&self, target: &str) -> Response {
        self.conn().request("GET", target, &[], None)
    }

    fn spawn(&mut self) {
        assert!(self.process.is_none(), "the node is still running");
        let mut command = self.command();
        command.stderr(if self.log.is_some() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
        let log = self.log.clone();
        let mut log_drain = None;
        let launched = NodeProcess::launch(command, START_TIMEOUT, |child| {
            if let (Some(log), Some(stderr)) = (log, child.stderr.take()) {
                // Ends when the process closes stderr.
                log_drain = Some(std::thread::spawn(move || {
                    let mut reader = BufReader::new(stderr);
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        log.lock().unwrap().push_str(&line);
                        line.clear();
                    }
                }));
            }
        });
        self.log_drain = log_drain;
        let process = launched.unwrap_or_else(|e| panic!("ataman serve: {e}"));
        self.addr = process.addr();
        self.process = Some(process);
    }

    fn signal(&self, signal: libc::c_int) {
        let process = self.process.as_ref().expect("the node is not running");
        assert!(process.signal(signal), "kill({signal}) failed");
    }

    fn reap(&mut self) -> ExitStatus {
        let mut process = self.process.take().expect("the node is not running");
        let Some(status) = process.wait_within(STOP_TIMEOUT) else {
            drop(process); // kills it
            panic!("the node did not exit within {STOP_TIMEOUT:?}");
        };
        if let Some(drain) = self.log_drain.take() {
            let _ = drain.join();
        }
        status
    }

    /// SIGKILL, then wait for the process.
    pub fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.reap();
    }

    /// SIGTERM, then wait (bounded by [`STOP_TIMEOUT`]) and return the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.reap()
    }

    /// Starts the node again on the same data directory (a new port);
    /// the previous process must have been stopped.
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// Like [`Node::restart`], with `extra` arguments for this start only.
    pub fn restart_with(&mut self, extra: &[&str]) {
        let kept = self.args.len();
        self.args.extend(extra.iter().map(|a| a.to_string()));
        self.spawn();
        self.args.truncate(kept);
    }

    /// Runs `ataman serve` with this node's arguments and data directory
    /// while it is stopped, for a start that must fail: waits (bounded by
    /// [`START_TIMEOUT`]) for the process to exit and returns its status and
    /// stderr. Panics if it is still running then (it started).
    pub fn start_expecting_exit(&self) -> (ExitStatus, String) {
        assert!(self.process.is_none(), "the node is still running");
        let mut child = self
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ataman serve");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("wait for the node") {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                return (status, stderr);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the node did not exit within {START_TIMEOUT:?}: it started");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Removes the data directory (the node must be stopped).
    pub fn wipe_data(&self) {
        assert!(
            self.process.is_none(),
            "stop the node before wiping its data"
        );
        let dir = self.data_dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        assert!(!Path::new(&dir).exists());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Killed and reaped before the directory goes.
        drop(self.process.take());
    }
}

/// Ports [`fixed_resp_addr`] picks from: below Linux's ephemeral range
/// (32768 up), so no `127.0.0.1:0` bind of another test can be handed the
/// port while a node is restarted on it, and above the ports
/// `tests/cluster_cmd.rs` picks from (20000..31000).
const FIXED_PORTS: std::ops::Range<u16> = 31_000..32_700;

/// A free `127.0.0.1:PORT` for a listener that must keep its port across
/// restarts (`--resp-listen`): a port outside the ephemeral range, free
/// when checked (bound, then released).
pub fn fixed_resp_addr() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let span = u64::from(FIXED_PORTS.end - FIXED_PORTS.start);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let offset = (u64::from(std::process::id()) * 7919 + n * 104_729) % span;
        let port = FIXED_PORTS.start + offset as u16;
        if std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok() {
            return format!("127.0.0.1:{port}");
        }
    }
    panic!("no free port in {FIXED_PORTS:?}");
}

/// The peer upgrade request a test client sends to the node at `addr` as
/// `self_url`, naming the layout version the node reports in
/// `/v0/cluster` (the fence refuses a peer that names none).
pub fn peer_upgrade_request(addr: SocketAddr, self_url: &str) -> Vec<u8> {
    let r = Conn::open(addr).request("GET", "/v0/cluster", &[], None);
    let text = String::from_utf8_lossy(&r.body).into_owned();
    let version = text
        .split("\"layout_version\":")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no layout_version in /v0/cluster: {text}"));
    ataman_node::peer::handshake::with_layout(
        ataman_node::peer::handshake::upgrade_request(&addr.to_string(), self_url),
        version,
    )
}
