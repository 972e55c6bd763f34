//! A real `redis-server` for side-by-side tests (the Debian package,
//! installed by `.ci/run`): on a free 127.0.0.1 port, no persistence,
//! stopped on drop. A missing tool fails the test, naming the package.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on the server's start.
const LISTEN_WAIT: Duration = Duration::from_secs(30);

/// A `redis-server` on a free port, stopped on drop.
pub struct Redis {
    child: Child,
    /// Its address, `127.0.0.1:PORT`.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The path of the Debian package redis-server's tool `name`
/// (`redis-server`, `redis-cli`); panics when it is missing.
pub fn tool(name: &str) -> String {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    assert!(
        found.status.success(),
        "{name} is missing: install the Debian package redis-server (.ci/run does)"
    );
    String::from_utf8(found.stdout).unwrap().trim().to_owned()
}

/// Starts one and waits (bounded) until it listens.
pub fn start() -> Redis {
    let server = tool("redis-server");
    let addr = super::fixed_resp_addr();
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(server)
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
        .args(["--appendonly", "no", "--dir", dir.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let redis = Redis {
        child,
        addr,
        _dir: dir,
    };
    let started = Instant::now();
    while std::net::TcpStream::connect(&redis.addr).is_err() {
        assert!(
            started.elapsed() < LISTEN_WAIT,
            "redis-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    redis
}
