//! A RESP connection's answers about the node and itself: `INFO`,
//! `TIME`, `CONFIG GET`, `CLIENT INFO`, `LASTSAVE`, `HOTKEYS` (docs/RESP.md).

use super::Conn;
use crate::net::resp::encode::{Proto, Reply};
use crate::net::resp::info;
use crate::net::resp::slowlog;
use crate::net::resp::table::{self, NodeQuery};
use crate::state::NetContext;
use std::sync::atomic::Ordering;

impl Conn {
    pub(super) fn node_reply(&self, ctx: &NetContext, query: NodeQuery) -> Reply {
        match query {
            // With its keys: counted first (`count_keys`).
            NodeQuery::Info(sections) => Reply::text(info::render(&sections, &self.figures(ctx))),
            // Counted first (`count_keys`).
            NodeQuery::DbSize => Reply::err("internal error: DBSIZE without its count"),
            NodeQuery::Time => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                Reply::Array(vec![
                    Reply::text(now.as_secs().to_string()),
                    Reply::text(now.subsec_micros().to_string()),
                ])
            }
            NodeQuery::ConfigGet(patterns) => table::config_get(&patterns, &self.config_pairs(ctx)),
            NodeQuery::ClientInfo => Reply::text(self.client_info()),
            NodeQuery::LastSave => Reply::Int(ctx.shared.backups.last_save_s() as i64),
            NodeQuery::BgSave => Reply::err("internal error: BGSAVE outside its path"),
            NodeQuery::HotKeys(count) => crate::net::hotkeys::resp_reply(ctx, count),
        }
    }

    fn local_port(&self) -> u16 {
        self.stream.tcp().local_addr().map_or(0, |a| a.port())
    }

    /// `INFO`'s figures but its keys (counted on a range thread).
    pub(super) fn figures(&self, ctx: &NetContext) -> info::Figures {
        let shared = &ctx.shared;
        let m = &shared.metrics;
        let engine = ctx.db.stats();
        info::Figures {
            ataman_version: env!("CARGO_PKG_VERSION"),
            process_id: std::process::id(),
            tcp_port: self.local_port(),
            uptime_sec: crate::net::resp::uptime().as_secs(),
            connected_clients: shared.connections.load(Ordering::Relaxed) as u64,
            maxclients: shared.connections_cap.load(Ordering::Relaxed) as u64,
            aof_enabled: ctx.config.wal_mode != ataman_engine::WalMode::None,
            appendfsync: appendfsync(ctx),
            total_connections_received: m.connections_accepted.load(Ordering::Relaxed),
            total_commands_processed: m
                .resp_commands
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum(),
            cluster_nodes: shared.placement().read_members().len(),
            used_memory: engine.memtable_bytes
                + engine.immutable_memtable_bytes
                + engine.cache.bytes,
            used_memory_rss: info::resident_bytes(),
            keyspace: Default::default(),
        }
    }

    /// What `CONFIG GET` can answer, in ataman's terms (docs/RESP.md).
    fn config_pairs(&self, ctx: &NetContext) -> Vec<(&'static str, String)> {
        let c = &ctx.config;
        let log = &ctx.shared.metrics.slowlog;
        let aof = if c.wal_mode == ataman_engine::WalMode::None {
            "no"
        } else {
            "yes"
        };
        vec![
            ("save", String::new()),
            ("appendonly", aof.into()),
            ("appendfsync", appendfsync(ctx).into()),
            ("databases", "1".into()),
            ("port", self.local_port().to_string()),
            ("maxclients", c.connections_max.to_string()),
            ("timeout", c.idle_timeout.as_secs().to_string()),
            ("proto-max-bulk-len", c.value_bytes_max.to_string()),
            ("maxmemory", "0".into()),
            ("maxmemory-policy", "noeviction".into()),
            ("io-threads", c.net_threads.to_string()),
            (slowlog::THRESHOLD_PARAM, log.threshold_us().to_string()),
            (slowlog::LEN_MAX_PARAM, log.len_max().to_string()),
        ]
    }

    fn client_info(&self) -> String {
        let addr = |a: std::io::Result<std::net::SocketAddr>| {
            a.map_or_else(|_| "?".into(), |a| a.to_string())
        };
        let lossy = |b: &Option<Vec<u8>>| {
            b.as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        let Some(state) = self.resp.as_ref() else {
            return String::new();
        };
        let s = &state.session;
        format!(
            "id={} addr={} laddr={} name={} db=0 resp={} lib-name={} lib-ver={}\n",
            s.id,
            addr(self.stream.peer_addr()),
            addr(self.stream.tcp().local_addr()),
            lossy(&s.name),
            if s.proto == Proto::Resp3 { 3 } else { 2 },
            lossy(&s.lib_name),
            lossy(&s.lib_ver),
        )
    }
}

/// `appendfsync` in ataman's terms: `always` when every acknowledged
/// write was fsynced, `no` when written to the OS only or not logged.
fn appendfsync(ctx: &NetContext) -> &'static str {
    match ctx.config.wal_mode {
        ataman_engine::WalMode::Fsync => "always",
        _ => "no",
    }
}

/// True when `INFO sections` shows `# Keyspace` (its keys are counted first).
pub(super) fn wants_keys(sections: &[String]) -> bool {
    sections.is_empty()
        || sections
            .iter()
            .any(|s| matches!(s.as_str(), "keyspace" | "all" | "default" | "everything"))
}
