//! The real connection state machine ([`Conn`]) driven without an event
//! loop, for the stateful connection fuzzer (`fuzz/fuzz_targets/conn_state.rs`)
//! and the property test in `conn_driver_tests.rs`.
//!
//! Compiled only for tests and with the `conn-driver` feature (the fuzz
//! crate's); a production build has none of it. Nothing here changes how
//! a connection behaves: the driver is a small event loop of its own.
//!
//! - [`TestNode`]: a one-node node in process (its engine in a temporary
//!   folder, no threads of the node's own), with or without client tokens
//!   (`--auth-token-file`, one `admin` token, [`ADMIN_TOKEN`]).
//! - [`Driven`]: one accepted connection of it, HTTP or RESP, whose client
//!   end is a loopback socket the driver writes into. Its writes wait in
//!   the thread's pending writes until [`Driven::complete_writes`] answers
//!   them (as the engine's completions would, ok or failed), so a test
//!   chooses when writes are pending; replicated requests are refused
//!   (a one-node cluster makes none unless a command asks more replicas).
//!
//! Every call does what the event loop does for the same event: read,
//! parse, answer, flush; [`Driven::send`] returns once the bytes were read.

use super::conn::{Conn, Next};
use crate::auth::Auth;
use crate::config::{NodeConfig, ServeArgs};
use crate::replication::Request;
use crate::state::{Completion, NetContext, NodeShared, Target};
use crate::tls::transport::Transport;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The token of the `admin` role in a [`TestNode`] with tokens.
pub const ADMIN_TOKEN: &str = "conn-driver-admin-token-0001";
/// Output a [`Driven`] keeps (the rest is read and dropped).
pub const OUTPUT_KEPT_BYTES_MAX: usize = 1 << 20;
/// Reads of the client end per call, at most (each drains what is there).
const DRAIN_READS_MAX: usize = 1024;
/// Longest wait for loopback delivery, in milliseconds.
pub const WAIT_MS_MAX: u64 = 10_000;
/// Rounds of read-and-parse per [`Driven::send`], at most.
const SEND_ROUNDS_MAX: usize = 64;

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A one-node node in process, for driving connections.
pub struct TestNode {
    shared: Arc<NodeShared>,
    listener: std::net::TcpListener,
    dir: PathBuf,
    _poll: mio::Poll,
}

impl TestNode {
    /// A node with its engine in a fresh temporary folder; `tokens`: with
    /// `--auth-token-file` (one `admin` token, [`ADMIN_TOKEN`]).
    pub fn start(tokens: bool) -> Result<TestNode, String> {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("ataman-conn-driver-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let token_file = dir.join("tokens");
        if tokens {
            write_private(&token_file, &format!("{ADMIN_TOKEN} admin\n"))?;
        }
        let args = ServeArgs {
            listen: Some("127.0.0.1:1".into()),
            data_dir: Some(dir.join("data")),
            wal_mode: Some("none".into()),
            auth_token_file: tokens.then_some(token_file),
            ..ServeArgs::default()
        };
        let config = NodeConfig::resolve(&args)?;
        let auth = Auth::load(&config)?;
        let opts = ataman_engine::Options {
            wal_mode: ataman_engine::WalMode::None,
            ..ataman_engine::Options::default()
        };
        let db = ataman_engine::Db::open(&config.data_dir, opts).map_err(|e| e.to_string())?;
        let hints = crate::hints::HintStore::open(
            &dir.join("hints"),
            1 << 20,
            ataman_engine::WalMode::None,
        )
        .map_err(|e| e.to_string())?;
        let backups =
            Arc::new(crate::backup::Backups::open(&config.data_dir).map_err(|e| e.to_string())?);
        let (antientropy, _receiver) = crate::antientropy::AntiEntropy::new(1 << 20);
        let poll = mio::Poll::new().map_err(|e| e.to_string())?;
        let waker = mio::Waker::new(poll.registry(), mio::Token(0)).map_err(|e| e.to_string())?;
        let placement = crate::cluster::live::LivePlacement::new(
            &config.cluster,
            config.self_index,
            &config.peer_via,
            config.replication_factor,
            1,
            None,
        );
        let shared = Arc::new(NodeShared {
            tls: None,
            refill: crate::refill::Refill::off(&config.data_dir),
            db: Arc::new(db),
            hlc: crate::hlc::Hlc::for_node(0),
            topology: crate::cluster::Topology::new(config.cluster.clone(), 0),
            membership: None,
            placement,
            transition: Arc::new(crate::cluster::transition_state::TransitionShared::new(1)),
            config,
            metrics: crate::metrics::NodeMetrics::default(),
            connections: AtomicUsize::new(0),
            peer_connections: AtomicUsize::new(0),
            connections_cap: AtomicUsize::new(usize::MAX),
            shutting_down: AtomicBool::new(false),
            inboxes: vec![Arc::new(crate::state::Inbox::new(waker))],
            hints: Arc::new(hints),
            backups,
            peers: NodeShared::peer_statuses(0),
            antientropy,
            ranges: crate::range::Ranges::default(),
            register: None,
            write_durability: ataman_engine::Durability::Complete,
            auth,
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        Ok(TestNode {
            shared,
            listener,
            dir,
            _poll: poll,
        })
    }

    /// The node's shared state (its metrics, its configuration).
    pub fn shared(&self) -> &Arc<NodeShared> {
        &self.shared
    }

    /// A new connection: RESP when `resp`, else HTTP.
    pub fn connect(&self, resp: bool) -> Result<Driven, String> {
        let addr = self.listener.local_addr().map_err(|e| e.to_string())?;
        let client = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
        let (server, _) = self.listener.accept().map_err(|e| e.to_string())?;
        client.set_nonblocking(true).map_err(|e| e.to_string())?;
        server.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stream = Transport::Plain(mio::net::TcpStream::from_std(server));
        let ctx = NetContext::new(Arc::clone(&self.shared), 0);
        let generation = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let conn = if resp {
            Conn::new_resp(stream, generation, &ctx)
        } else {
            Conn::new(stream, generation)
        };
        Ok(Driven {
            ctx,
            conn: Some(conn),
            client,
            scratch: vec![0; super::conn::READ_CHUNK_BYTES],
            replicated: Vec::new(),
            output: Vec::new(),
        })
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_private(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| e.to_string())?;
    f.write_all(text.as_bytes()).map_err(|e| e.to_string())
}

/// One step of a [`play`]ed script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The client sends these bytes (`@T` in them becomes [`ADMIN_TOKEN`]).
    Send(Vec<u8>),
    /// The engine answers the writes pending (ok, or failed).
    CompleteWrites(bool),
    /// The request timeout fires.
    TimeOut,
    /// The client closes its writing side.
    ShutWrite,
}

/// Plays `script` on a new connection of `node` (RESP when `resp`),
/// then answers whatever writes are left; the connection's output.
/// Panics only where the connection state machine does.
pub fn play(node: &TestNode, resp: bool, script: &[Step]) -> Result<Vec<u8>, String> {
    let mut d = node.connect(resp)?;
    for step in script {
        match step {
            Step::Send(bytes) => {
                d.send(&with_token(bytes));
            }
            Step::CompleteWrites(ok) => d.complete_writes(*ok),
            Step::TimeOut => d.time_out(),
            Step::ShutWrite => d.shut_write(),
        }
        if !d.is_open() {
            break;
        }
    }
    d.complete_writes(true);
    Ok(d.output)
}

/// Decodes fuzz bytes into a script: each step is one byte, low two bits
/// the kind: 0 sends the next `1 + (byte >> 2)` bytes, 1 and 2 complete
/// the writes pending (ok, failed), 3 a timeout (odd upper bits) or the
/// client's shutdown.
pub fn script_of(mut data: &[u8]) -> Vec<Step> {
    let mut script = Vec::new();
    while let Some((&op, rest)) = data.split_first() {
        data = rest;
        script.push(match op & 3 {
            0 => {
                let n = (1 + usize::from(op >> 2)).min(data.len());
                let (chunk, rest) = data.split_at(n);
                data = rest;
                Step::Send(chunk.to_vec())
            }
            1 => Step::CompleteWrites(true),
            2 => Step::CompleteWrites(false),
            _ if op & 4 != 0 => Step::TimeOut,
            _ => Step::ShutWrite,
        });
    }
    script
}

/// `bytes` with every `@T` replaced by [`ADMIN_TOKEN`].
fn with_token(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"@T") {
            out.extend_from_slice(ADMIN_TOKEN.as_bytes());
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// One connection of a [`TestNode`] and its client end.
pub struct Driven {
    ctx: NetContext,
    /// `None` once the connection closed (or was handed off).
    conn: Option<Conn>,
    client: std::net::TcpStream,
    scratch: Vec<u8>,
    replicated: Vec<Request>,
    output: Vec<u8>,
}

impl Driven {
    /// True until the connection closed.
    pub fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    /// What the connection sent so far (its first [`OUTPUT_KEPT_BYTES_MAX`]).
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// Writes `bytes` to the connection and lets it read and answer them;
    /// false once the connection closed. Bytes the socket does not take
    /// (the connection stopped reading at a bound) are dropped.
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        let mut at = 0;
        if bytes.is_empty() {
            return self.conn.is_some();
        }
        for _ in 0..SEND_ROUNDS_MAX {
            if self.conn.is_none() {
                return false;
            }
            match self.client.write(&bytes[at..]) {
                Ok(0) => {}
                Ok(n) => {
                    at += n;
                    self.wait_arrived();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {}
            }
            self.ready(false);
            self.drain();
            if at >= bytes.len() {
                break;
            }
        }
        self.conn.is_some()
    }

    /// Reads the connection's output until `done` says it is complete
    /// (true), or for at most [`WAIT_MS_MAX`] (false): loopback delivery
    /// may lag the write that sent it.
    pub fn wait_output(&mut self, done: impl Fn(&[u8]) -> bool) -> bool {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(WAIT_MS_MAX);
        loop {
            self.drain();
            if done(&self.output) {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Waits (at most [`WAIT_MS_MAX`]) until bytes just written reached the
    /// connection's socket, so the next read sees them (loopback delivery
    /// may lag the write on a loaded machine).
    fn wait_arrived(&self) {
        let Some(conn) = self.conn.as_ref() else {
            return;
        };
        let until = std::time::Instant::now() + std::time::Duration::from_millis(WAIT_MS_MAX);
        let mut probe = [0u8; 1];
        while matches!(conn.stream.tcp().peek(&mut probe), Err(ref e) if e.kind() == io::ErrorKind::WouldBlock)
            && std::time::Instant::now() < until
        {
            std::thread::yield_now();
        }
    }

    /// Closes the client's writing side and lets the connection see it.
    pub fn shut_write(&mut self) {
        let _ = self.client.shutdown(std::net::Shutdown::Write);
        self.ready(true);
        self.drain();
    }

    /// Answers every write handed to the engine since the last call, as
    /// the engine's completions would (`ok`: durable; else failed), and
    /// refuses every replicated request; then answers what they decided.
    pub fn complete_writes(&mut self, ok: bool) {
        let pending = std::mem::take(&mut *self.ctx.pending_writes.borrow_mut());
        for s in pending {
            let result = if ok {
                Ok(0)
            } else {
                Err(ataman_engine::Error::Closed)
            };
            (s.done)(result);
        }
        let replicated = std::mem::take(&mut self.replicated);
        if let Some(conn) = self.conn.as_mut() {
            for r in replicated {
                conn.decide(
                    &self.ctx,
                    r.reply_to.slot,
                    Err("conn driver: no replicas".into()),
                    None,
                );
            }
            conn.run_chains(&self.ctx, 0, &mut self.replicated);
        }
        self.take_completions();
        self.ready(false);
        self.drain();
    }

    /// The request timeout fires (`--request-timeout-ms`).
    pub fn time_out(&mut self) {
        if let Some(conn) = self.conn.as_mut() {
            conn.time_out_request(&self.ctx);
            let next = conn.flush(&self.ctx);
            self.after(next);
        }
        self.drain();
    }

    /// Delivers the completions in the thread's inbox, as the event loop's
    /// `take_inbox` does.
    fn take_completions(&mut self) {
        let mut conns = Vec::new();
        let mut completions: Vec<Completion> = Vec::new();
        self.ctx.shared.inboxes[0].take(&mut conns, &mut completions);
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        for c in completions {
            match c.target {
                Target::Slot {
                    generation, slot, ..
                } if generation == conn.generation => {
                    conn.complete(&self.ctx, slot, c.result, c.invalid);
                }
                Target::Peer { generation, id, .. } if generation == conn.generation => {
                    conn.peer_ack(id, c.result, c.invalid);
                }
                _ => {}
            }
        }
    }

    /// What the event loop does on a socket event: read, parse, answer.
    fn ready(&mut self, peer_closed: bool) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let next = conn.on_ready(
            &self.ctx,
            0,
            &mut self.scratch,
            &mut self.replicated,
            peer_closed,
        );
        self.after(next);
    }

    fn after(&mut self, next: Next) {
        if next != Next::Keep {
            self.conn = None;
        }
    }

    /// Reads what the connection sent to the client end.
    fn drain(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        for _ in 0..DRAIN_READS_MAX {
            match self.client.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    let room = OUTPUT_KEPT_BYTES_MAX.saturating_sub(self.output.len());
                    self.output.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}
