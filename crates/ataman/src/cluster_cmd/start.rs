//! `ataman cluster start`: N `ataman serve` children of this process on
//! consecutive ports of 127.0.0.1, supervised in the foreground.
//!
//! Node `i` listens on `127.0.0.1:(base + i)` with data in `DIR/node-i`,
//! and for RESP on `127.0.0.1:(resp base + i)` (by default
//! base + [`RESP_PORT_OFFSET`]);
//! every node gets the same `--cluster` list and its own `--self`. The
//! command prints one line per node once every node answers
//! `GET /v0/status` with 200, then waits for SIGINT or SIGTERM, SIGTERMs
//! the children and waits for them (bounded by [`STOP_TIMEOUT_MS`], then
//! SIGKILL). A child that exits on its own is reported on stderr and the
//! others keep running. Each child's stderr is copied to ours, every line
//! prefixed with `node i: `; its stdout (the listening line) is dropped.

use super::local_members::{self, Supervisor};
use crate::http_client::exchange::exchange;
use crate::http_client::url::BaseUrl;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Default port of node 0.
pub const BASE_PORT_DEFAULT: u16 = 19234;
/// The RESP base port's distance from `--base-port` unless given.
pub const RESP_PORT_OFFSET: u16 = 1000;
/// Default directory of the nodes' data directories.
pub const DIR_DEFAULT: &str = "./ataman-cluster";
/// Most nodes one command starts.
pub const NODES_MAX: usize = 64;
/// Default bound on every node answering `GET /v0/status` with 200, in ms.
pub const START_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Bound on the children exiting after SIGTERM before they get SIGKILL, in
/// ms (a node drains in-flight requests for up to 10 s).
pub const STOP_TIMEOUT_MS: u64 = 15_000;
/// Pause between two looks at the children and the stop flag, in ms.
pub const SUPERVISE_INTERVAL_MS: u64 = 50;
/// Bound on one readiness probe, in ms.
pub const PROBE_TIMEOUT_MS: u64 = 1_000;
/// Pause between two looks for nodes `cluster add|remove` asked for, in ms.
pub const ADOPT_INTERVAL_MS: u64 = 500;

/// `ataman cluster start` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct StartArgs {
    /// Nodes to start.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Port of node 0; node i listens on base + i.
    #[arg(long, default_value_t = BASE_PORT_DEFAULT)]
    pub base_port: u16,
    /// RESP port of node 0; node i listens for RESP on it + i [default: --base-port + 1000].
    #[arg(long)]
    pub resp_base_port: Option<u16>,
    /// Directory holding node-0, node-1, … (created if missing, kept after the stop).
    #[arg(long, default_value = DIR_DEFAULT)]
    pub dir: PathBuf,
    /// Bound on every node answering GET /v0/status with 200, in ms.
    #[arg(long, default_value_t = START_TIMEOUT_MS_DEFAULT)]
    pub start_timeout_ms: u64,
    /// Start a TLS cluster: DIR holds `ca.crt`, `node.crt` and `node.key`
    /// (`ataman cert create-ca` and `create-node`); every node uses them.
    #[arg(long)]
    pub certs_dir: Option<PathBuf>,
    /// Extra `ataman serve` arguments for every node (after `--`).
    #[arg(last = true)]
    pub serve_args: Vec<String>,
}

/// Why the cluster could not be started or run.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `--certs-dir` holds no usable `ca.crt`.
    #[error("{0}")]
    Tls(String),
    /// `--nodes` is 0 or past [`NODES_MAX`].
    #[error("--nodes must be between 1 and {NODES_MAX}, not {0}")]
    Nodes(usize),
    /// The ports do not fit below 65536.
    #[error("{nodes} ports from --base-port {base} do not fit below 65536")]
    PortRange {
        /// `--base-port`.
        base: u16,
        /// `--nodes`.
        nodes: usize,
    },
    /// A node's port is taken (checked before anything starts).
    #[error("port {port} on 127.0.0.1 is already in use ({source}); choose another --base-port")]
    PortInUse {
        /// The busy port.
        port: u16,
        /// What bind(2) said.
        source: std::io::Error,
    },
    /// A data directory could not be created.
    #[error("cannot create {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The path of this executable is unknown.
    #[error("cannot find the ataman executable: {0}")]
    Exe(std::io::Error),
    /// A signal handler could not be installed.
    #[error("cannot install the SIGINT/SIGTERM handlers")]
    Signals,
    /// A child could not be started.
    #[error("cannot start node {index}: {source}")]
    Spawn {
        /// The node.
        index: usize,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A child exited before it answered.
    #[error("node {index} exited before it was ready: {status}")]
    Exited {
        /// The node.
        index: usize,
        /// How it exited.
        status: ExitStatus,
    },
    /// A child did not answer in time.
    #[error("node {index} did not answer GET /v0/status with 200 within {timeout_ms} ms")]
    NotReady {
        /// The node.
        index: usize,
        /// `--start-timeout-ms`.
        timeout_ms: u64,
    },
    /// Every node exited on its own; nothing is left to run.
    #[error("every node exited")]
    AllExited,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> Result<(), StartError> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` only stores to an atomic, which is
        // async-signal-safe; signal(2) has no other precondition.
        let previous = unsafe {
            libc::signal(
                signal,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
        if previous == libc::SIG_ERR {
            return Err(StartError::Signals);
        }
    }
    Ok(())
}

/// One child node.
struct Member {
    index: usize,
    url: String,
    resp: String,
    data_dir: PathBuf,
    child: Child,
    /// Set once the child was reaped.
    exited: Option<ExitStatus>,
    stderr_copy: Option<JoinHandle<()>>,
}

impl Member {
    /// Reaps the child if it has exited; true when it is gone.
    fn poll_exit(&mut self) -> bool {
        if self.exited.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exited = Some(status);
        }
        self.exited.is_some()
    }

    fn sigterm(&self) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: kill(2) on our own child, not yet reaped (`exited` is
        // None), so the pid cannot have been reused.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

/// Checks that every port is free by binding it, then releases them all.
fn check_ports(ports: &[u16]) -> Result<(), StartError> {
    let mut held = Vec::with_capacity(ports.len());
    for &port in ports {
        match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(listener) => held.push(listener),
            Err(source) => return Err(StartError::PortInUse { port, source }),
        }
    }
    drop(held);
    Ok(())
}

/// Copies a child's stderr to ours, line by line, prefixed; ends when the
/// child closes it.
fn copy_stderr(index: usize, child: &mut Child) -> Option<JoinHandle<()>> {
    let stderr = child.stderr.take()?;
    std::thread::Builder::new()
        .name(format!("node-{index}-stderr"))
        .spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                eprint!("node {index}: {line}");
                if !line.ends_with('\n') {
                    eprintln!();
                }
                line.clear();
            }
        })
        .ok()
}

/// How the supervisor starts a node: the executable, the directory, the
/// ports, the arguments every node gets.
struct Launch {
    exe: PathBuf,
    dir: PathBuf,
    supervisor: Supervisor,
    /// The `--cluster` list of the nodes `--nodes` names.
    urls: Vec<String>,
    serve_args: Vec<String>,
}

impl Launch {
    /// Starts node `index`: a member of the `--cluster` list, or with
    /// `--join SEED` when `join` names a seed (`cluster add`).
    fn spawn(&self, index: usize, join: Option<&str>) -> Result<Member, StartError> {
        let range = || StartError::PortRange {
            base: self.supervisor.base_port,
            nodes: index + 1,
        };
        let url = self.supervisor.url(index).ok_or_else(range)?;
        let resp = format!(
            "127.0.0.1:{}",
            self.supervisor.resp_port(index).ok_or_else(range)?
        );
        let data_dir = local_members::node_dir(&self.dir, index);
        let listen = ataman_node::tls::strip_scheme(&url).to_string();
        let mut command = Command::new(&self.exe);
        command
            .arg("serve")
            .args(["--listen", &listen, "--resp-listen", &resp, "--data-dir"])
            .arg(&data_dir);
        match join {
            Some(seed) => command.args(["--self", &url, "--join", seed]),
            None => command.args(["--cluster", &self.urls.join(","), "--self", &url]),
        };
        let mut child = command
            .args(&self.serve_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| StartError::Spawn { index, source })?;
        let stderr_copy = copy_stderr(index, &mut child);
        Ok(Member {
            index,
            url,
            resp,
            data_dir,
            child,
            exited: None,
            stderr_copy,
        })
    }

    /// Nodes `cluster add` asked for that are not running yet: started.
    /// Nodes `cluster remove` removed that still run: SIGTERMed.
    fn adopt(&self, members: &mut Vec<Member>, reported: &mut Vec<bool>) {
        for k in local_members::node_indices(&self.dir) {
            let known = members.iter().any(|m| m.index == k);
            let removed = local_members::is_removed(&self.dir, k);
            let seed = local_members::join_seed(&self.dir, k);
            if let (false, false, Some(seed)) = (known, removed, seed) {
                match self.spawn(k, Some(&seed)) {
                    Ok(member) => {
                        eprintln!(
                            "ataman cluster: node {k}: {}, resp {} joining through {seed} (data {}, pid {})",
                            member.url,
                            member.resp,
                            member.data_dir.display(),
                            member.child.id()
                        );
                        members.push(member);
                        reported.push(false);
                    }
                    Err(e) => tracing::warn!(node = k, "cluster: {e}"),
                }
            }
        }
        for (member, reported) in members.iter_mut().zip(reported.iter_mut()) {
            if !*reported && local_members::is_removed(&self.dir, member.index) {
                *reported = true;
                if !member.poll_exit() {
                    member.sigterm();
                }
                eprintln!(
                    "ataman cluster: node {} ({}) was removed from the layout; stopping it",
                    member.index, member.url
                );
            }
        }
    }
}

fn answers_status(url: &str) -> bool {
    let Ok(base) = BaseUrl::parse(url) else {
        return false;
    };
    let timeout = Duration::from_millis(PROBE_TIMEOUT_MS);
    exchange(&base, "GET", "/v0/status", None, timeout).is_ok_and(|r| r.status == 200)
}

/// Waits until every member answers; `Ok(false)` if a stop signal came first.
fn wait_ready(members: &mut [Member], timeout_ms: u64) -> Result<bool, StartError> {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    for member in members.iter_mut() {
        loop {
            if STOP.load(Ordering::SeqCst) {
                return Ok(false);
            }
            if answers_status(&member.url) {
                break;
            }
            if member.poll_exit()
                && let Some(status) = member.exited
            {
                return Err(StartError::Exited {
                    index: member.index,
                    status,
                });
            }
            if Instant::now() >= deadline {
                return Err(StartError::NotReady {
                    index: member.index,
                    timeout_ms,
                });
            }
            std::thread::sleep(Duration::from_millis(SUPERVISE_INTERVAL_MS));
        }
    }
    Ok(true)
}

/// SIGTERMs every running member, waits up to [`STOP_TIMEOUT_MS`], then
/// SIGKILLs what is left; reports exits that were not clean.
fn stop_all(members: &mut [Member]) {
    for member in members.iter_mut() {
        if !member.poll_exit() {
            member.sigterm();
        }
    }
    let deadline = Instant::now() + Duration::from_millis(STOP_TIMEOUT_MS);
    while members.iter_mut().any(|m| !m.poll_exit()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(SUPERVISE_INTERVAL_MS));
    }
    for member in members.iter_mut() {
        if !member.poll_exit() {
            tracing::warn!(
                node = member.index,
                url = %member.url,
                "cluster: the node did not stop within {STOP_TIMEOUT_MS} ms; killing it"
            );
            let _ = member.child.kill();
            member.exited = member.child.wait().ok();
        }
        if let Some(copy) = member.stderr_copy.take() {
            let _ = copy.join();
        }
    }
}

/// Runs until a stop signal, starting and stopping the nodes `cluster
/// add|remove` ask for every [`ADOPT_INTERVAL_MS`]; returns an error if
/// every node exited.
fn supervise(members: &mut Vec<Member>, launch: &Launch) -> Result<(), StartError> {
    let mut reported = vec![false; members.len()];
    let mut adopted_at = Instant::now();
    while !STOP.load(Ordering::SeqCst) {
        if adopted_at.elapsed() >= Duration::from_millis(ADOPT_INTERVAL_MS) {
            adopted_at = Instant::now();
            launch.adopt(members, &mut reported);
        }
        for (member, reported) in members.iter_mut().zip(reported.iter_mut()) {
            if !*reported
                && member.poll_exit()
                && let Some(status) = member.exited
            {
                *reported = true;
                tracing::warn!(
                    node = member.index,
                    url = %member.url,
                    pid = member.child.id(),
                    %status,
                    "cluster: a node exited on its own"
                );
            }
        }
        if reported.iter().all(|r| *r) {
            return Err(StartError::AllExited);
        }
        std::thread::sleep(Duration::from_millis(SUPERVISE_INTERVAL_MS));
    }
    Ok(())
}

/// Runs `cluster start` until SIGINT or SIGTERM.
pub fn run(args: &StartArgs) -> Result<(), StartError> {
    if args.nodes == 0 || args.nodes > NODES_MAX {
        return Err(StartError::Nodes(args.nodes));
    }
    let ports_from = |base: Option<u16>| {
        let base = base.ok_or(StartError::PortRange {
            base: args.base_port,
            nodes: args.nodes,
        })?;
        (0..args.nodes)
            .map(|i| u16::try_from(usize::from(base) + i).ok())
            .collect::<Option<Vec<u16>>>()
            .ok_or(StartError::PortRange {
                base,
                nodes: args.nodes,
            })
    };
    let ports = ports_from(Some(args.base_port))?;
    let resp_base = args
        .resp_base_port
        .or(args.base_port.checked_add(RESP_PORT_OFFSET));
    let resp_ports = ports_from(resp_base)?;
    check_ports(&[ports.as_slice(), resp_ports.as_slice()].concat())?;
    let exe = std::env::current_exe().map_err(StartError::Exe)?;
    let tls_args = match &args.certs_dir {
        Some(dir) => {
            crate::http_client::tls::set_ca(&dir.join("ca.crt")).map_err(StartError::Tls)?;
            crate::http_client::tls::serve_args(dir)
        }
        None => Vec::new(),
    };
    let scheme = if args.certs_dir.is_some() {
        "https"
    } else {
        "http"
    };
    let urls: Vec<String> = ports
        .iter()
        .map(|port| format!("{scheme}://127.0.0.1:{port}"))
        .collect();
    let serve_args: Vec<String> = tls_args
        .into_iter()
        .chain(args.serve_args.iter().cloned())
        .collect();
    for i in 0..args.nodes {
        let path = local_members::node_dir(&args.dir, i);
        std::fs::create_dir_all(&path).map_err(|source| StartError::Dir {
            path: path.clone(),
            source,
        })?;
    }
    let launch = Launch {
        exe,
        dir: args.dir.clone(),
        supervisor: Supervisor {
            pid: std::process::id(),
            scheme: scheme.to_owned(),
            base_port: args.base_port,
            resp_base_port: resp_ports[0],
            nodes: args.nodes,
        },
        urls,
        serve_args,
    };
    let file = args.dir.join(local_members::SUPERVISOR_FILE);
    std::fs::write(&file, launch.supervisor.render())
        .map_err(|source| StartError::Dir { path: file, source })?;
    install_signal_handlers()?;
    let mut members = Vec::with_capacity(args.nodes);
    let mut result = Ok(());
    let starting = local_members::node_indices(&args.dir)
        .into_iter()
        .filter(|&k| !local_members::is_removed(&args.dir, k))
        .filter_map(|k| match local_members::join_seed(&args.dir, k) {
            Some(seed) => Some((k, Some(seed))),
            None => (k < args.nodes).then_some((k, None)),
        });
    for (index, seed) in starting {
        match launch.spawn(index, seed.as_deref()) {
            Ok(member) => members.push(member),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        result = match wait_ready(&mut members, args.start_timeout_ms) {
            Ok(true) => {
                for member in &members {
                    println!(
                        "node {}: {}, resp {} (data {}, pid {})",
                        member.index,
                        member.url,
                        member.resp,
                        member.data_dir.display(),
                        member.child.id()
                    );
                }
                eprintln!(
                    "ataman cluster: {} nodes up; SIGINT (Ctrl-C) or SIGTERM stops them",
                    members.len()
                );
                supervise(&mut members, &launch)
            }
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        };
    }
    stop_all(&mut members);
    result
}
