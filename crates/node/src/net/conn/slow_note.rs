//! A connection's side of the slow log ([`crate::slowlog`]): what a
//! request is ([`Facts`], taken when it is parsed, inline, no allocation)
//! and, once it is answered, its entry if it was slow.
//!
//! The test of the threshold is one atomic load
//! ([`crate::slowlog::SlowLog::is_slow`]); only a slow request writes an
//! entry, in place in a slot of its thread's own ring
//! ([`crate::slowlog::SlowLog::record_with`]). The client's address is asked of
//! the socket once per connection and kept as a `SocketAddr`, formatted
//! only when the log is read (formatting it per entry was most of the
//! cost of recording every request: docs/BENCHMARKS.md, the slow log).

use super::Conn;
use crate::api::Route;
use crate::net::dispatch::Command;
use crate::slowlog::{Facts, KeyPrefix, Protocol, StageMarks, unix_now_s};
use crate::state::NetContext;
use std::time::Instant;

/// The slow log's name of an HTTP route and method.
fn http_command(route: Route) -> &'static str {
    match route {
        Route::EntityGet => "GET /v0/entity",
        Route::EntityPut => "PUT /v0/entity",
        Route::EntityDelete => "DELETE /v0/entity",
        Route::Entities => "GET /v0/entities",
        Route::Status => "GET /v0/status",
        Route::Cluster => "/v0/cluster",
        Route::Peer => "GET /v0/peer",
        Route::Metrics => "GET /metrics",
        Route::Repair => "/v0/repair",
        Route::InternalRange => "GET /v0/internal/range",
        Route::InternalLayout => "POST /v0/internal/layout",
        Route::Health => "GET /livez, /readyz or /v0/cluster/health",
        Route::Slowlog => "/v0/slowlog",
        Route::Backup => "/v0/backup",
        Route::HotKeys => "GET /v0/hotkeys",
        Route::Ui => "GET /ui",
        Route::Recent => "GET /v0/recent",
        Route::Other => "other",
    }
}

/// What the slow log keeps of an HTTP request: its route, its key and
/// its body's size (never the body; but see the planted bug
/// `slowlog-keeps-value`, [`planted_keeps_value`]).
/// While the log is off, only the route ([`crate::slowlog::gathers_facts`]:
/// no key, so never recorded).
pub(super) fn http_facts(ctx: &NetContext, route: Route, command: &Command<'_>) -> Facts {
    if !ctx.shared.metrics.slowlog.gathers_facts() {
        return Facts::bare(http_command(route));
    }
    let mut facts = facts_of(route, command);
    planted_keeps_value(ctx, command, &mut facts);
    facts
}

/// [`http_facts`], as the code means it (pure).
fn facts_of(route: Route, command: &Command<'_>) -> Facts {
    let mut facts = Facts::bare(http_command(route));
    match command {
        Command::Get { key, .. } | Command::GetVersion { key, .. } => {
            facts.key = KeyPrefix::of(key);
            facts.keys = 1;
        }
        Command::Write { key, value, .. } => {
            facts.key = KeyPrefix::of(key);
            facts.keys = 1;
            facts.value_bytes = value.map_or(0, |v| v.len() as u64);
        }
        _ => {}
    }
    facts
}

/// The planted bug `slowlog-keeps-value`: `facts` of an HTTP write keep
/// its value where the key belongs (the negative control of the tests'
/// "never a value" check); nothing without it.
fn planted_keeps_value(ctx: &NetContext, command: &Command<'_>, facts: &mut Facts) {
    #[cfg(feature = "planted-bugs")]
    if ctx.config.planted_bug == Some(crate::config::PlantedBug::SlowlogKeepsValue)
        && let Command::Write {
            value: Some(value), ..
        } = command
    {
        facts.key = KeyPrefix::of(value);
    }
    let _ = (ctx, command, facts);
}

impl Conn {
    /// The client's address: asked of the socket once per connection (a
    /// system call), then kept (`None` while the socket cannot say).
    pub(super) fn client_addr(&self) -> Option<std::net::SocketAddr> {
        if self.client_addr.get().is_none() {
            self.client_addr.set(self.stream.peer_addr().ok());
        }
        self.client_addr.get()
    }

    /// The client's `ip:port`, `unknown` if the socket cannot say.
    pub(super) fn client_text(&self, unknown: &str) -> String {
        self.client_addr()
            .map_or_else(|| unknown.to_owned(), |a| a.to_string())
    }

    /// Records a request parsed at `started` and answered after
    /// `duration_us` in the slow log, if it is at or over the threshold,
    /// with the stages its coordinator marked (`None`: served by this
    /// node alone). The entry is written in place in a slot of this
    /// thread's ring: the facts copied once, the client's name and the
    /// replicas' URLs into the slot's own buffers, nothing formatted.
    pub(super) fn note_slow(
        &self,
        ctx: &NetContext,
        (protocol, facts): (Protocol, &Facts),
        started: Instant,
        duration_us: u64,
        marks: Option<StageMarks>,
    ) {
        let log = &ctx.shared.metrics.slowlog;
        // Requests on keys only (docs/API.md "Slow log").
        if facts.keys == 0 || !log.is_slow(duration_us) {
            return;
        }
        let client = self.client_addr();
        let name = self.resp.as_ref().and_then(|r| r.session.name.as_deref());
        log.record_with(ctx.index, |e| {
            e.unix_time_s = unix_now_s();
            e.duration_us = duration_us;
            e.protocol = protocol;
            e.facts = *facts;
            e.client = client;
            e.client_name.clear();
            if let Some(name) = name {
                e.client_name.push_str(&String::from_utf8_lossy(name));
            }
            match marks {
                None => e.stages.clear(),
                Some(m) => {
                    let placement = ctx.placement();
                    m.fill_stages(started, &mut e.stages, |node, out| {
                        if node < placement.len() {
                            out.push_str(placement.url(node));
                        } else {
                            use std::fmt::Write;
                            let _ = write!(out, "node {node}");
                        }
                    });
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HTTP write keeps its key and its body's size, never the body.
    #[test]
    fn http_facts_keep_key_and_size() {
        let put = Command::Write {
            key: b"user:1".to_vec().into(),
            value: Some(&b"secret"[..]),
            ack: 1,
            from: 1,
            expiry: crate::ttl::Expiry::Never,
        };
        let f = facts_of(Route::EntityPut, &put);
        assert_eq!(f.command, "PUT /v0/entity");
        assert_eq!(
            (f.key.kept(), f.keys, f.value_bytes),
            (&b"user:1"[..], 1, 6)
        );
        assert!(!format!("{f:?}").contains("secret"));
        let f = facts_of(Route::Metrics, &Command::Metrics);
        assert_eq!((f.keys, f.value_bytes), (0, 0));
    }
}
