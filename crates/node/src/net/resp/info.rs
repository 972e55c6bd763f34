//! `INFO`'s text from the node's figures (pure): the sections tools read
//! (`# Server`, `# Clients`, `# Memory`, `# Persistence`, `# Stats`,
//! `# Replication`, `# Keyspace`), each `name:value` line a real figure
//! (docs/RESP.md says what each means).

use std::fmt::Write;

/// The figures `INFO` reports.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// ataman's version.
    pub ataman_version: &'static str,
    /// The process id.
    pub process_id: u32,
    /// The RESP port.
    pub tcp_port: u16,
    /// Seconds since the node started.
    pub uptime_sec: u64,
    /// Open client connections (HTTP and RESP).
    pub connected_clients: u64,
    /// The client connection cap.
    pub maxclients: u64,
    /// `appendonly`: the WAL is on.
    pub aof_enabled: bool,
    /// `appendfsync`: `always`, `no` (written, not synced) …
    pub appendfsync: &'static str,
    /// Connections accepted since the start.
    pub total_connections_received: u64,
    /// RESP commands served since the start.
    pub total_commands_processed: u64,
    /// Nodes in the cluster.
    pub cluster_nodes: usize,
    /// Bytes the engine holds in memory and accounts: memtables (active
    /// and waiting for flush) and the block cache.
    pub used_memory: u64,
    /// The process's resident set, in bytes (0 where unknown).
    pub used_memory_rss: u64,
    /// This node's keys ([`super::keyspace`]).
    pub keyspace: super::keyspace::Keyspace,
}

/// Sections in the order Redis prints them.
const SECTIONS: [&str; 7] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "keyspace",
];

/// `INFO [section…]`: the asked sections (`all`, `default`, `everything`
/// or none: every one); an unknown one is left out (as Redis does).
pub fn render(sections: &[String], f: &Figures) -> String {
    let every = sections.is_empty()
        || sections
            .iter()
            .any(|s| matches!(s.as_str(), "all" | "default" | "everything"));
    let mut out = String::with_capacity(1024);
    for name in SECTIONS {
        if !every && !sections.iter().any(|s| s == name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(&mut out, name, f);
    }
    out
}

fn kv(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

fn section(out: &mut String, name: &str, f: &Figures) {
    match name {
        "server" => {
            out.push_str("# Server\r\n");
            kv(out, "redis_version", super::REDIS_VERSION);
            kv(out, "ataman_version", f.ataman_version);
            kv(out, "redis_mode", "standalone");
            kv(out, "os", std::env::consts::OS);
            kv(out, "arch_bits", usize::BITS);
            kv(out, "process_id", f.process_id);
            kv(out, "tcp_port", f.tcp_port);
            kv(out, "uptime_in_seconds", f.uptime_sec);
            kv(out, "uptime_in_days", f.uptime_sec / 86_400);
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            kv(out, "connected_clients", f.connected_clients);
            kv(out, "maxclients", f.maxclients);
            kv(out, "blocked_clients", 0);
        }
        "memory" => {
            out.push_str("# Memory\r\n");
            kv(out, "used_memory", f.used_memory);
            kv(out, "used_memory_human", human(f.used_memory));
            kv(out, "used_memory_rss", f.used_memory_rss);
            kv(out, "used_memory_rss_human", human(f.used_memory_rss));
            kv(out, "maxmemory", 0);
            kv(out, "maxmemory_policy", "noeviction");
        }
        "persistence" => {
            out.push_str("# Persistence\r\n");
            kv(out, "loading", 0);
            kv(out, "aof_enabled", u8::from(f.aof_enabled));
            kv(out, "aof_fsync", f.appendfsync);
            kv(out, "rdb_changes_since_last_save", 0);
        }
        "stats" => {
            out.push_str("# Stats\r\n");
            kv(
                out,
                "total_connections_received",
                f.total_connections_received,
            );
            kv(out, "total_commands_processed", f.total_commands_processed);
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            kv(out, "role", "master");
            kv(out, "connected_slaves", 0);
            kv(out, "ataman_cluster_nodes", f.cluster_nodes);
        }
        _ => {
            out.push_str("# Keyspace\r\n");
            let k = f.keyspace;
            if k.keys > 0 {
                let line = format!(
                    "keys={},expires={},avg_ttl={}",
                    k.keys, k.expires, k.avg_ttl_ms
                );
                kv(out, "db0", line);
            }
        }
    }
}

/// The process's resident set in bytes, from `/proc/self/statm` (0 where
/// there is none: not Linux).
pub fn resident_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages.saturating_mul(u64::try_from(page_bytes).unwrap_or(0))
}

/// Bytes as Redis's `*_human` fields write them: `B`, then `K`, `M`, `G`,
/// `T` (powers of 1024) with two decimals.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["K", "M", "G", "T"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_by_default_and_one_when_asked() {
        let f = Figures {
            keyspace: super::super::keyspace::Keyspace {
                keys: 3,
                expires: 1,
                avg_ttl_ms: 500,
                exact: true,
            },
            used_memory: 3 * 1024 * 1024 / 2,
            aof_enabled: true,
            appendfsync: "always",
            ..Figures::default()
        };
        let all = render(&[], &f);
        for header in [
            "# Server\r\n",
            "# Clients\r\n",
            "# Persistence\r\nloading:0\r\naof_enabled:1\r\n",
            "# Stats\r\n",
            "# Replication\r\nrole:master\r\n",
            "# Memory\r\nused_memory:1572864\r\nused_memory_human:1.50M\r\n",
            "# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=500\r\n",
        ] {
            assert!(all.contains(header), "{header} missing from {all}");
        }
        let one = render(&["persistence".into()], &f);
        assert!(
            one.starts_with("# Persistence\r\n") && !one.contains("# Server"),
            "{one}"
        );
        assert_eq!(render(&["nosuch".into()], &f), "");
        assert_eq!(
            [human(0), human(1023), human(1024), human(5 << 30)],
            ["0B", "1023B", "1.00K", "5.00G"]
        );
    }
}
