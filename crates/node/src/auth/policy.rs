//! The roles of client tokens. Which role each command needs is
//! `net::authorize`, next to the commands.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_round_trip() {
        for role in [Role::Read, Role::Write, Role::Admin] {
            assert_eq!(Role::parse(role.name()), Some(role));
        }
        assert_eq!(Role::parse("Admin"), None);
        assert_eq!(Role::parse(""), None);
    }
}
