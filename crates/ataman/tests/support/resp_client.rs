//! A real Redis client (the `redis` crate) on a node's RESP port, for the
//! RESP tests that send commands as words: a connection with bounded
//! reads and writes, a command run, and a command that must succeed.

use redis::{Connection, Value};
use std::time::Duration;

/// A connection to `addr` (RESP3 when `resp3`), every read and write
/// bounded by `timeout`.
pub fn connect(addr: &str, resp3: bool, timeout: Duration) -> Connection {
    let protocol = if resp3 { "?protocol=resp3" } else { "" };
    let client = redis::Client::open(format!("redis://{addr}/{protocol}")).unwrap();
    let con = client.get_connection().unwrap();
    con.set_read_timeout(Some(timeout)).unwrap();
    con.set_write_timeout(Some(timeout)).unwrap();
    con
}

/// Runs the command `args` (its name first).
pub fn run(con: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con)
}

/// Runs the command `args`; panics, naming it, when it fails.
pub fn ok(con: &mut Connection, args: &[&str]) -> Value {
    run(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}
