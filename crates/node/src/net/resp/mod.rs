//! The Redis protocol (RESP2 and RESP3) front end's pure pieces
//! (docs/RESP.md): what a RESP connection ([`super::conn`]) parses with and
//! renders with. The dispatcher behind it is HTTP's ([`super::dispatch`]).
//!
//! - [`auth`]: `AUTH`, `HELLO … AUTH`, `NOAUTH`, `WRONGPASS`, `NOPERM`.
//! - [`decode`]: bytes to a command's arguments (multibulk and inline), bounded.
//! - [`describe`]: `TYPE`, `STRLEN`, `MEMORY USAGE`: a key described from its read.
//! - [`commands`]: the commands served and the names refused.
//! - [`session`]: a connection's session, the node's limits it is checked
//!   against (read per command), `ATAMAN.REPLICATION` and `WAIT`.
//! - [`table`]: a command's name and arity to a reply, a session change,
//!   neutral [`super::dispatch::Command`]s, or a question for the node;
//!   and the combination of a multi-key command's answers into one reply.
//! - [`key_commands`]: a key command's dispatcher commands, one inline.
//! - [`encode`]: replies in RESP2 or RESP3.
//! - [`info`]: `INFO`'s text.
//! - [`slowlog`]: `SLOWLOG` and `CONFIG SET slowlog-…`, in Redis's reply shape.
//! - [`write_kind`]: which commands are writes (a read on the connection
//!   waits for its earlier writes).
//! - [`keyspace`]: this node's key counts (`DBSIZE`, `INFO`), counted on a
//!   range thread.

pub mod auth;
#[cfg(test)]
mod auth_walk_tests;
pub mod commands;
pub mod decode;
pub mod describe;
pub mod encode;
pub mod expiry;
pub mod info;
pub mod key_commands;
pub mod keyspace;
pub mod multi;
pub mod multi_apply;
pub mod rmw;
pub mod rmw_plan;
pub mod scan;
pub mod session;
pub mod slowlog;
pub mod table;
pub mod watch;
pub mod write_kind;

/// The Redis version whose commands' behaviour the front end follows
/// (`INFO`'s `redis_version`, `HELLO`'s `version`).
pub const REDIS_VERSION: &str = "7.2.0";

/// Appends the RESP command counters to the metrics page.
pub fn render_metrics(out: &mut String, metrics: &crate::metrics::NodeMetrics) {
    use std::fmt::Write;
    use std::sync::atomic::Ordering;
    out.push_str(
        "# HELP ataman_resp_commands_total RESP commands served, by command (other: unknown or refused).\n\
         # TYPE ataman_resp_commands_total counter\n",
    );
    let names = table::COMMANDS.iter().map(|s| s.name).chain(["other"]);
    for (name, counter) in names.zip(&metrics.resp_commands) {
        let n = counter.load(Ordering::Relaxed);
        if n > 0 {
            let _ = writeln!(out, "ataman_resp_commands_total{{command=\"{name}\"}} {n}");
        }
    }
    crate::metrics::histogram(
        out,
        "ataman_resp_key_command_duration_seconds",
        "Time from the first byte of a RESP command on keys to its reply being ready.",
        "",
        1e-6,
        &metrics.resp_key_latency_us.snapshot(),
        true,
    );
    let _ = writeln!(
        out,
        "# HELP ataman_rmw_retries_total Atomic read-modify-writes retried after a concurrent write.\n\
         # TYPE ataman_rmw_retries_total counter\n\
         ataman_rmw_retries_total {}\n\
         # HELP ataman_rmw_gave_up_total Atomic read-modify-writes refused after too many conflicts in a row.\n\
         # TYPE ataman_rmw_gave_up_total counter\n\
         ataman_rmw_gave_up_total {}\n\
         # HELP ataman_resp_watch_aborts_total EXECs answered nil because the WATCHed key changed.\n\
         # TYPE ataman_resp_watch_aborts_total counter\n\
         ataman_resp_watch_aborts_total {}",
        metrics.rmw_retries.load(Ordering::Relaxed),
        metrics.rmw_gave_up.load(Ordering::Relaxed),
        metrics.watch_aborts.load(Ordering::Relaxed),
    );
    metrics.register.render(out);
}

static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Marks the node's start (`INFO`'s `uptime_in_seconds` counts from it).
pub fn mark_started() {
    let _ = STARTED.set(std::time::Instant::now());
}

/// Time since [`mark_started`] (zero before it).
pub fn uptime() -> std::time::Duration {
    STARTED
        .get()
        .map_or(std::time::Duration::ZERO, |t| t.elapsed())
}

/// A command's arguments from its words, as the decoder lends them (the
/// tests of the command modules).
#[cfg(test)]
pub(crate) fn test_args(words: &[&str]) -> Vec<std::borrow::Cow<'static, [u8]>> {
    words
        .iter()
        .map(|w| std::borrow::Cow::Owned(w.as_bytes().to_vec()))
        .collect()
}
