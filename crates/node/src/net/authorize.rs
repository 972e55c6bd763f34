//! Who may do what: the role each command needs, whatever protocol carried
//! it. HTTP asks it through [`super::auth_gate`]; another front end (RESP)
//! calls the same [`authorize`].

use super::dispatch::Command;
use crate::auth::{Denied, Role};

/// The least role `command` needs; `None`: open to anyone (health checks).
pub fn needed(command: &Command<'_>) -> Option<Role> {
    match command {
        // Health: probes carry no token, and none says anything about keys.
        Command::Status | Command::Livez | Command::Readyz | Command::ClusterHealth => None,
        // The dashboard's files hold no data: the page asks for a token
        // and sends it on every fetch of the data below (docs/DASHBOARD.md).
        Command::Ui(_) => None,
        // Request rates, latencies and disk use of each node: read.
        Command::Recent { .. } => Some(Role::Read),
        Command::Get { .. }
        | Command::GetVersion { .. }
        | Command::Range { .. }
        | Command::ClusterRange(_)
        | Command::Layout
        | Command::Cluster
        | Command::RepairStatus
        | Command::Metrics => Some(Role::Read),
        // Reading the slow log shows keys (cut), sizes and client
        // addresses, never values: the read role, as the metrics and the
        // dashboard; changing it (a threshold of 0 costs every request a
        // lock) is the admin's (docs/RESP.md "Slow log").
        Command::Slowlog(op) if op.changes() => Some(Role::Admin),
        Command::Slowlog(_) | Command::ClusterSlowlog { .. } => Some(Role::Read),
        // Hot keys show keys and their shares, never values: read.
        Command::HotKeys { .. } => Some(Role::Read),
        Command::Write { .. } => Some(Role::Write),
        Command::RepairStart | Command::LayoutChange { .. } | Command::LayoutPlan { .. } => {
            Some(Role::Admin)
        }
        // A checkpoint holds every key and value of the node and pins disk:
        // the admin's, listing and deleting too (docs/BACKUP.md).
        Command::Backup(..) => Some(Role::Admin),
        // `LASTSAVE`: a time, nothing about keys.
        Command::BackupLastSave => Some(Role::Read),
        // Every version of every key, tombstones included: a peer's part
        // of a cluster range. No client role opens it: the connection's
        // peer gate (`Conn::range_gate`) asks for the cluster secret's
        // proof or a CA-verified certificate first.
        // The same for a peer's layout agreement message (`LAYOUT_PROTOCOL`).
        // And for a peer's part of a cluster hot-key report.
        // And for a peer's recent figures, and its slow log.
        Command::InternalRange { .. }
        | Command::InternalLayout(_)
        | Command::InternalHotKeys
        | Command::InternalRecent
        | Command::InternalSlowlog { .. } => None,
    }
}

/// Whether `role` may carry out `command`.
pub fn authorize(role: Role, command: &Command<'_>) -> Result<(), Denied> {
    match needed(command) {
        Some(needed) if role < needed => Err(Denied { needed }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands() -> Vec<Command<'static>> {
        vec![
            Command::Status,
            Command::Livez,
            Command::Readyz,
            Command::ClusterHealth,
            Command::Get {
                key: b"k".to_vec().into(),
                ack: 1,
                from: 1,
            },
            Command::Range {
                start: b"a".to_vec(),
                end: None,
            },
            Command::Cluster,
            Command::RepairStatus,
            Command::Metrics,
            Command::Write {
                key: b"k".to_vec().into(),
                value: Some(b"v"),
                expiry: crate::ttl::Expiry::Never,
                ack: 1,
                from: 1,
            },
            Command::Write {
                key: b"k".to_vec().into(),
                value: None,
                expiry: crate::ttl::Expiry::Never,
                ack: 1,
                from: 1,
            },
            Command::RepairStart,
            Command::Slowlog(crate::slowlog::Op::Get { count: 1 }),
            Command::Slowlog(crate::slowlog::Op::Len),
            Command::Slowlog(crate::slowlog::Op::Reset),
            Command::Slowlog(crate::slowlog::Op::Set {
                threshold_us: Some(0),
                len_max: None,
            }),
            Command::LayoutChange {
                version: 2,
                change: crate::cluster::layout::Change::default(),
            },
            Command::Backup(
                crate::api::BackupAsk::Create {
                    lease_s: None,
                    at: None,
                },
                b"",
            ),
            Command::Backup(crate::api::BackupAsk::List, b""),
            Command::Backup(crate::api::BackupAsk::Delete { name: "x".into() }, b""),
            Command::Backup(
                crate::api::BackupAsk::Ingest {
                    probe: false,
                    t: None,
                    restore: "r".into(),
                },
                b"x",
            ),
            Command::Backup(
                crate::api::BackupAsk::Restoring {
                    begin: true,
                    restore: "r".into(),
                },
                b"",
            ),
            Command::BackupLastSave,
            Command::Ui(Some(crate::ui::Asset::Page)),
            Command::Ui(None),
            Command::Recent { cluster: true },
            Command::ClusterSlowlog { limit: 20 },
        ]
    }

    /// The table of the issue: reads need read, writes write, repair admin,
    /// status nothing; each role implies the weaker ones.
    #[test]
    fn every_command_against_every_role() {
        let expected = |c: &Command<'_>| match c {
            Command::Status | Command::Ui(_) => [true, true, true],
            Command::Write { .. } => [false, true, true],
            Command::RepairStart | Command::LayoutChange { .. } => [false, false, true],
            Command::Backup(..) => [false, false, true],
            Command::Slowlog(op) if op.changes() => [false, false, true],
            _ => [true, true, true],
        };
        for command in commands() {
            let got =
                [Role::Read, Role::Write, Role::Admin].map(|r| authorize(r, &command).is_ok());
            assert_eq!(got, expected(&command), "{command:?}");
        }
        assert_eq!(
            authorize(Role::Read, &commands()[9]),
            Err(Denied {
                needed: Role::Write
            })
        );
    }
}
