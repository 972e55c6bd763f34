//! The RESP command table against every role: the walk iterates
//! [`COMMANDS`] itself, so a command added to the table without an
//! invocation and an expected role here fails the test by name; no
//! catch-all arm gives a new command a role by default.
//!
//! Each command goes the way a connection takes it: [`auth::gate`], then
//! [`table::plan`], then the admission its plan meets on the connection
//! (`Conn::fan_out`: [`auth::admit`]; `Conn::read_then`: the read and
//! [`Chain::would_write`]; `Conn::scan`: [`scan::every_key`]; replies of
//! the table and the node's answers: none beyond the gate).

use super::auth::{self, Gate};
use super::commands::COMMANDS;
use super::encode::Reply;
use super::expiry::Chain;
use super::scan;
use super::session::{Limits, Session};
use super::table::{self, NodeQuery, Plan};
use crate::auth::{Auth, Role};
use std::borrow::Cow;
use std::os::unix::fs::PermissionsExt;

const LIMITS: Limits = Limits {
    key_bytes_max: 64,
    value_bytes_max: 64,
    cluster_size: 3,
    from_default: 3,
};

/// One invocation of `name` the table plans (not refuses for its syntax).
fn invocation(name: &str) -> &'static [&'static str] {
    match name {
        "ping" => &["ping"],
        "echo" => &["echo", "x"],
        "quit" => &["quit"],
        "reset" => &["reset"],
        "hello" => &["hello", "3"],
        "auth" => &["auth", "nobody-has-this-token"],
        "select" => &["select", "0"],
        "client" => &["client", "id"],
        "command" => &["command", "count"],
        "info" => &["info"],
        "config" => &["config", "get", "save"],
        "dbsize" => &["dbsize"],
        "time" => &["time"],
        "get" => &["get", "k"],
        "set" => &["set", "k", "v"],
        "del" => &["del", "k"],
        "unlink" => &["unlink", "k"],
        "exists" => &["exists", "k"],
        "mget" => &["mget", "k", "j"],
        "mset" => &["mset", "k", "v"],
        "wait" => &["wait", "1", "0"],
        "ataman.replication" => &["ataman.replication"],
        "ttl" => &["ttl", "k"],
        "pttl" => &["pttl", "k"],
        "setex" => &["setex", "k", "10", "v"],
        "psetex" => &["psetex", "k", "10", "v"],
        "expire" => &["expire", "k", "10"],
        "pexpire" => &["pexpire", "k", "10"],
        "expireat" => &["expireat", "k", "1700000000"],
        "pexpireat" => &["pexpireat", "k", "1700000000000"],
        "persist" => &["persist", "k"],
        "getex" => &["getex", "k"],
        "expiretime" => &["expiretime", "k"],
        "pexpiretime" => &["pexpiretime", "k"],
        "scan" => &["scan", "0"],
        "type" => &["type", "k"],
        "strlen" => &["strlen", "k"],
        "memory" => &["memory", "usage", "k"],
        "slowlog" => &["slowlog", "get"],
        "bgsave" => &["bgsave"],
        "lastsave" => &["lastsave"],
        "ataman.hotkeys" => &["ataman.hotkeys", "5"],
        "incr" => &["incr", "k"],
        "decr" => &["decr", "k"],
        "incrby" => &["incrby", "k", "2"],
        "decrby" => &["decrby", "k", "2"],
        "incrbyfloat" => &["incrbyfloat", "k", "0.5"],
        "append" => &["append", "k", "v"],
        "getset" => &["getset", "k", "v"],
        "getdel" => &["getdel", "k"],
        "setnx" => &["setnx", "k", "v"],
        "setrange" => &["setrange", "k", "1", "v"],
        "getrange" => &["getrange", "k", "0", "-1"],
        other => panic!("`{other}` is in the command table without an invocation here"),
    }
}

/// What `name` needs: `None` open before `AUTH`; else the least role.
fn needed(name: &str) -> Option<Role> {
    match name {
        "auth" | "hello" | "quit" => None,
        // Connection and node questions: any role.
        "ping" | "echo" | "reset" | "select" | "client" | "command" | "info" | "config"
        | "dbsize" | "time" | "wait" | "ataman.replication" => Some(Role::Read),
        // Reading the slow log: read (its changes: admin, below).
        "slowlog" | "ataman.hotkeys" => Some(Role::Read),
        // A checkpoint holds every value and pins disk: the admin's.
        "bgsave" => Some(Role::Admin),
        "lastsave" => Some(Role::Read),
        "get" | "exists" | "mget" | "ttl" | "pttl" | "expiretime" | "pexpiretime" | "scan"
        | "type" | "strlen" | "memory" | "getrange" => Some(Role::Read),
        // A read-then-write command may write whatever its read finds.
        "set" | "del" | "unlink" | "mset" | "setex" | "psetex" | "expire" | "pexpire"
        | "expireat" | "pexpireat" | "persist" | "getex" | "incr" | "decr" | "incrby"
        | "decrby" | "incrbyfloat" | "append" | "getset" | "getdel" | "setnx" | "setrange" => {
            Some(Role::Write)
        }
        other => panic!("`{other}` is in the command table without an expected role here"),
    }
}

/// True when the connection runs `words` under `role` (`None`: not
/// authenticated): it passes the gate and its plan's admission.
fn admitted(auth: &Auth, role: Option<Role>, words: &[&str]) -> bool {
    let args: Vec<Cow<'static, [u8]>> = words
        .iter()
        .map(|w| Cow::Owned(w.as_bytes().to_vec()))
        .collect();
    let mut session = Session::new(1);
    session.role = role;
    let instead;
    let args = match auth::gate(auth, &mut session, &args) {
        Gate::Plan => &args[..],
        Gate::PlanInstead(rest) => {
            instead = rest;
            &instead[..]
        }
        // AUTH's own reply (a wrong token here) is its answer, not a refusal.
        Gate::Reply(Reply::Error(e)) => return !e.starts_with("NOAUTH"),
        Gate::Reply(_) => return true,
    };
    let (_, plan) = table::plan(args, &mut session, LIMITS);
    let admission = match plan {
        Plan::Keys(op, commands) => auth::admit(auth, &session, op, &commands),
        Plan::ReadThen(read, chain) => {
            let commands = [read, Chain::would_write(&chain)];
            auth::admit_named(auth, &session, chain.name, &commands)
        }
        Plan::Scan(_) => auth::admit_named(auth, &session, "scan", &[scan::every_key()]),
        Plan::Slowlog(name, op) => auth::admit_named(
            auth,
            &session,
            name,
            &[crate::net::dispatch::Command::Slowlog(op)],
        ),
        Plan::Rmw(name, update) => auth::admit_named(auth, &session, name, &[update.as_command()]),
        Plan::Watch(key, ack, from) => {
            let read = crate::net::dispatch::Command::Get {
                key: key.into(),
                ack,
                from,
            };
            auth::admit_named(auth, &session, "watch", &[read])
        }
        Plan::Reply(Reply::Error(e)) => panic!("{words:?} refused by the table: {e}"),
        Plan::Node(NodeQuery::BgSave) => auth::admit_named(
            auth,
            &session,
            "bgsave",
            &[crate::net::dispatch::Command::Backup(
                crate::api::BackupAsk::Create {
                    lease_s: None,
                    at: None,
                },
                b"",
            )],
        ),
        Plan::Reply(_) | Plan::Close(_) | Plan::Node(_) => Ok(()),
    };
    admission.is_ok()
}

/// Every command of the table against no role and each role: admitted
/// exactly when the role is at least the one it needs.
#[test]
fn every_command_of_the_table_against_every_role() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, "reader-token-0123456 read\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let auth = Auth {
        tokens: Some(crate::auth::reload::TokenStore::open(&path).unwrap()),
        ..Auth::default()
    };
    for spec in COMMANDS {
        let words = invocation(spec.name);
        let needs = needed(spec.name);
        for role in [None, Some(Role::Read), Some(Role::Write), Some(Role::Admin)] {
            let expected = match (needs, role) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(n), Some(r)) => r >= n,
            };
            assert_eq!(
                admitted(&auth, role, words),
                expected,
                "{} under {role:?} (needs {needs:?})",
                spec.name
            );
        }
    }
    // The subcommands that change the slow log need the admin role.
    for words in [
        &["slowlog", "reset"][..],
        &["config", "set", "slowlog-log-slower-than", "0"],
        &["config", "set", "slowlog-max-len", "5"],
    ] {
        let got = [Role::Read, Role::Write, Role::Admin].map(|r| admitted(&auth, Some(r), words));
        assert_eq!(got, [false, false, true], "{words:?}");
    }
    for words in [&["slowlog", "len"][..], &["slowlog", "get", "5"]] {
        assert!(admitted(&auth, Some(Role::Read), words), "{words:?}");
    }
    // Without tokens every command is admitted, authenticated or not.
    let open = Auth::default();
    for spec in COMMANDS {
        assert!(
            admitted(&open, None, invocation(spec.name)),
            "{}",
            spec.name
        );
    }
}
