//! The one real-process node launcher, shared by the fault harness and the
//! black-box tests: spawns an `ataman serve` that listens on
//! `127.0.0.1:0`, reads the port from its listening line, and calls it
//! ready once `GET /v0/status` answers 200.
//!
//! The caller builds the command (executable, arguments, stderr); the
//! launcher owns stdin (null) and stdout (read for the listening line,
//! then drained until the process closes it, so the node never blocks on
//! a full pipe).
//!
//! Every wait is bounded: the start by the caller's timeout, every status
//! probe by [`STATUS_PROBE_TIMEOUT`], a stop by the caller's timeout
//! (then SIGKILL). A process that failed to start is killed and reaped
//! before the error is returned; a [`NodeProcess`] dropped while running
//! is killed and reaped.

use crate::http_client::exchange::exchange;
use crate::http_client::url::BaseUrl;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The line a listening node prints (docs/API.md, "Starting a node").
pub const LISTENING_PREFIX: &str = "ataman: listening on http://";
/// The same line of a node whose listener speaks TLS.
pub const LISTENING_PREFIX_TLS: &str = "ataman: listening on https://";
/// The line a node with `--resp-listen` prints after the listening line.
pub const RESP_LISTENING_PREFIX: &str = "ataman: listening for RESP on ";
/// Bound on one `GET /v0/status` while waiting for readiness.
pub const STATUS_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two readiness probes, and between two polls of a stop.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Lines of stdout before the listening line kept for the error.
const STDOUT_LINES_KEPT_MAX: usize = 32;

/// Why a node did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The process could not be spawned.
    #[error("spawn {exe}: {source}")]
    Spawn {
        /// The executable.
        exe: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// No valid listening line within the timeout.
    #[error(
        "no `{LISTENING_PREFIX}…` line within {timeout:?} (exit: {status}); stdout before it: {seen:?}"
    )]
    NoListeningLine {
        /// The start bound.
        timeout: Duration,
        /// How the process ended (it was killed if it still ran).
        status: String,
        /// What it printed on stdout instead (at most a few lines).
        seen: Vec<String>,
    },
    /// The process exited before `GET /v0/status` answered 200.
    #[error("exited before it was ready: {status}")]
    Exited {
        /// Its exit status.
        status: String,
    },
    /// `GET /v0/status` did not answer 200 within the timeout.
    #[error("GET /v0/status did not answer 200 within {timeout:?} (exit after SIGKILL: {status})")]
    NotReady {
        /// The start bound.
        timeout: Duration,
        /// How the process ended once killed.
        status: String,
    },
}

/// A running `ataman serve` that was ready once.
pub struct NodeProcess {
    child: Child,
    addr: SocketAddr,
    /// The RESP address, once its line was read (`--resp-listen`).
    resp_addr: Arc<Mutex<Option<SocketAddr>>>,
    /// Set once the process was reaped.
    exited: Option<ExitStatus>,
    stdout_drain: Option<JoinHandle<()>>,
}

impl NodeProcess {
    /// Spawns `command` and waits (bounded by `timeout`) until the node is
    /// ready. `on_spawn` runs right after the spawn, before the wait (to
    /// take a piped stderr, so the node never blocks on it).
    pub fn launch(
        mut command: Command,
        timeout: Duration,
        on_spawn: impl FnOnce(&mut Child),
    ) -> Result<NodeProcess, LaunchError> {
        let started = Instant::now();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|source| LaunchError::Spawn {
                exe: command.get_program().to_string_lossy().into_owned(),
                source,
            })?;
        on_spawn(&mut child);
        let (addr_tx, addr_rx) = mpsc::channel::<Result<String, Vec<String>>>();
        let resp_addr = Arc::new(Mutex::new(None));
        let resp_seen = Arc::clone(&resp_addr);
        let stdout_drain = child.stdout.take().map(|stdout| {
            // Reads the listening line, then drains stdout; ends when the
            // process closes it.
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                let mut seen = Vec::new();
                let mut sent = false;
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if let Some(addr) = line
                        .trim_end()
                        .strip_prefix(RESP_LISTENING_PREFIX)
                        .and_then(|a| a.parse::<SocketAddr>().ok())
                    {
                        *ataman_testkit::lock::lock(&resp_seen) = Some(addr);
                    }
                    if !sent {
                        let text = line.trim_end();
                        if let Some(addr) = text
                            .strip_prefix(LISTENING_PREFIX)
                            .or_else(|| text.strip_prefix(LISTENING_PREFIX_TLS))
                        {
                            let _ = addr_tx.send(Ok(addr.to_owned()));
                            sent = true;
                        } else if seen.len() < STDOUT_LINES_KEPT_MAX {
                            seen.push(text.to_owned());
                        }
                    }
                    line.clear();
                }
                if !sent {
                    let _ = addr_tx.send(Err(seen));
                }
            })
        });
        let mut process = NodeProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            resp_addr,
            exited: None,
            stdout_drain,
        };
        let line = addr_rx.recv_timeout(timeout);
        let addr = match &line {
            Ok(Ok(text)) => text.parse::<SocketAddr>().ok(),
            _ => None,
        };
        let Some(addr) = addr else {
            let seen = match line {
                Ok(Ok(text)) => vec![format!("{LISTENING_PREFIX}{text}")],
                Ok(Err(seen)) => seen,
                Err(_) => Vec::new(),
            };
            return Err(LaunchError::NoListeningLine {
                timeout,
                status: process.kill(),
                seen,
            });
        };
        process.addr = addr;
        process.wait_ready(started, timeout)?;
        Ok(process)
    }

    /// Polls `GET /v0/status` until it answers 200, the process exits or
    /// `timeout` (counted from `started`) passes.
    fn wait_ready(&mut self, started: Instant, timeout: Duration) -> Result<(), LaunchError> {
        let url = BaseUrl {
            host: self.addr.ip().to_string(),
            port: self.addr.port(),
            https: crate::http_client::tls::enabled(),
        };
        loop {
            let answer = exchange(&url, "GET", "/v0/status", None, STATUS_PROBE_TIMEOUT);
            if answer.is_ok_and(|r| r.status == 200) {
                return Ok(());
            }
            if let Some(status) = self.try_wait() {
                return Err(LaunchError::Exited {
                    status: status.to_string(),
                });
            }
            if started.elapsed() > timeout {
                return Err(LaunchError::NotReady {
                    timeout,
                    status: self.kill(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// The address the node listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The RESP address the node printed, waiting up to `timeout` for its
    /// line (None: not printed in time, or no `--resp-listen`).
    pub fn resp_addr_within(&self, timeout: Duration) -> Option<SocketAddr> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(addr) = *ataman_testkit::lock::lock(&self.resp_addr) {
                return Some(addr);
            }
            if Instant::now() >= deadline || self.exited.is_some() {
                return None;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal`; false if the process was reaped or kill(2) failed.
    pub fn signal(&self, signal: libc::c_int) -> bool {
        if self.exited.is_some() {
            return false;
        }
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return false;
        };
        // SAFETY: kill(2) on our own child, not reaped yet (`exited` is
        // None and we hold its `Child`), so the pid cannot be another
        // process's.
        unsafe { libc::kill(pid, signal) == 0 }
    }

    /// The exit status if the process has exited (it is reaped then).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.reaped(status);
        }
        self.exited
    }

    /// Waits for the process to exit (no bound: signal it first).
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        let status = self.child.wait()?;
        self.reaped(status);
        Ok(status)
    }

    /// Waits up to `timeout` for the process to exit; `None` if it still
    /// runs then.
    pub fn wait_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// SIGKILL (a paused process too) and wait; the exit status as text.
    pub fn kill(&mut self) -> String {
        let _ = self.signal(libc::SIGKILL);
        self.wait()
            .map_or_else(|e| format!("wait failed: {e}"), |s| s.to_string())
    }

    fn reaped(&mut self, status: ExitStatus) {
        self.exited = Some(status);
        if let Some(drain) = self.stdout_drain.take() {
            let _ = drain.join();
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.kill();
        }
        if let Some(drain) = self.stdout_drain.take() {
            let _ = drain.join();
        }
    }
}
