//! Who may do what: the role each command needs, whatever protocol carried
//! it (HTTP today; the RESP front end calls the same [`authorize`]).

use crate::net::dispatch::Command;

/// A client token's role. Each role implies the ones before it:
/// `Read < Write < Admin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads, ranges, the cluster view, the repair state, metrics.
    Read,
    /// Also writes and deletes.
    Write,
    /// Also whatever changes the cluster: repair rounds, layout changes.
    Admin,
}

impl Role {
    /// The name used in the token file and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// The role a token file names, if any.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "read" => Some(Role::Read),
            "write" => Some(Role::Write),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A command refused to a role too weak for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this request needs the {} role", needed.name())]
pub struct Denied {
    /// The least role the command needs.
    pub needed: Role,
}

/// The least role `command` needs; `None`: open to anyone (health checks).
pub fn needed(command: &Command<'_>) -> Option<Role> {
    match command {
        Command::Status => None,
        Command::Get { .. }
        | Command::Range { .. }
        | Command::Cluster
        | Command::RepairStatus
        | Command::Metrics => Some(Role::Read),
        Command::Write { .. } => Some(Role::Write),
        Command::RepairStart => Some(Role::Admin),
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
            Command::Get {
                key: b"k".to_vec(),
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
                key: b"k".to_vec(),
                value: Some(b"v"),
                ack: 1,
                from: 1,
            },
            Command::Write {
                key: b"k".to_vec(),
                value: None,
                ack: 1,
                from: 1,
            },
            Command::RepairStart,
        ]
    }

    /// The table of the issue: reads need read, writes write, repair admin,
    /// status nothing; each role implies the weaker ones.
    #[test]
    fn every_command_against_every_role() {
        let expected = |c: &Command<'_>| match c {
            Command::Status => [true, true, true],
            Command::Write { .. } => [false, true, true],
            Command::RepairStart => [false, false, true],
            _ => [true, true, true],
        };
        for command in commands() {
            let got =
                [Role::Read, Role::Write, Role::Admin].map(|r| authorize(r, &command).is_ok());
            assert_eq!(got, expected(&command), "{command:?}");
        }
        assert_eq!(
            authorize(Role::Read, &commands()[6]),
            Err(Denied {
                needed: Role::Write
            })
        );
    }

    #[test]
    fn role_names_round_trip() {
        for role in [Role::Read, Role::Write, Role::Admin] {
            assert_eq!(Role::parse(role.name()), Some(role));
        }
        assert_eq!(Role::parse("Admin"), None);
        assert_eq!(Role::parse(""), None);
    }
}
