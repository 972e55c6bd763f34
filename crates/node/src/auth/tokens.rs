//! The client token file (`--auth-token-file`): lines of `TOKEN ROLE`,
//! `#` comments and blank lines; and the set of tokens it gives, looked up
//! in constant time.
//!
//! Only a SHA-256 digest of each token is kept. A lookup hashes the token
//! presented and compares it with every digest, without stopping early, so
//! the time taken says nothing about which token matched, or how much of one.
//! No error message and no log line holds a token.

use super::policy::Role;
use sha2::{Digest, Sha256};
use std::path::Path;
use subtle::ConstantTimeEq;

/// The shortest token accepted, bytes: a guessable token protects nothing.
pub const TOKEN_BYTES_MIN: usize = 16;
/// The longest token accepted, bytes.
pub const TOKEN_BYTES_MAX: usize = 1024;
/// Most tokens one file may hold.
pub const TOKENS_MAX: usize = 10_000;

/// Why a token file is refused; every message names the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenFileError {
    /// A line is not `TOKEN ROLE`.
    #[error("{file}:{line}: expected `TOKEN ROLE` (ROLE is read, write or admin)")]
    Shape {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
    },
    /// The role is not one of read, write, admin.
    #[error("{file}:{line}: unknown role {role:?} (read, write or admin)")]
    Role {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What the line says.
        role: String,
    },
    /// The token is too short, too long, or holds a byte a header cannot carry.
    #[error(
        "{file}:{line}: a token must be {TOKEN_BYTES_MIN}..={TOKEN_BYTES_MAX} visible ASCII characters"
    )]
    Token {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
    },
    /// The same token twice.
    #[error("{file}:{line}: this token appears on an earlier line")]
    Duplicate {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
    },
    /// No token at all: nobody could use the node.
    #[error("{file}: no token (lines of `TOKEN ROLE`)")]
    Empty {
        /// The file.
        file: String,
    },
    /// More than [`TOKENS_MAX`] tokens.
    #[error("{file}: more than {TOKENS_MAX} tokens")]
    TooMany {
        /// The file.
        file: String,
    },
}

/// The tokens of one token file, by digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenSet {
    entries: Vec<([u8; 32], Role)>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl TokenSet {
    /// Parses the text of token file `file` (named in errors).
    pub fn parse(file: &Path, text: &str) -> Result<TokenSet, TokenFileError> {
        let name = || file.display().to_string();
        let mut entries: Vec<([u8; 32], Role)> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let mut fields = trimmed.split_ascii_whitespace();
            let (Some(token), Some(role), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(TokenFileError::Shape { file: name(), line });
            };
            let Some(role) = Role::parse(role) else {
                return Err(TokenFileError::Role {
                    file: name(),
                    line,
                    role: role.to_owned(),
                });
            };
            let visible = token.bytes().all(|b| b.is_ascii_graphic());
            if !visible || !(TOKEN_BYTES_MIN..=TOKEN_BYTES_MAX).contains(&token.len()) {
                return Err(TokenFileError::Token { file: name(), line });
            }
            let d = digest(token.as_bytes());
            if entries.iter().any(|(e, _)| *e == d) {
                return Err(TokenFileError::Duplicate { file: name(), line });
            }
            if entries.len() == TOKENS_MAX {
                return Err(TokenFileError::TooMany { file: name() });
            }
            entries.push((d, role));
        }
        if entries.is_empty() {
            return Err(TokenFileError::Empty { file: name() });
        }
        Ok(TokenSet { entries })
    }

    /// The role of `token`, if it is one of the set. Every entry is
    /// compared, in constant time each, whatever matched.
    pub fn role_of(&self, token: &[u8]) -> Option<Role> {
        let d = digest(token);
        let mut found: Option<Role> = None;
        for (entry, role) in &self.entries {
            let hit: bool = entry.ct_eq(&d).into();
            // Both arms do the same work; only the assignment differs.
            found = if hit { Some(*role) } else { found };
        }
        found
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the set holds no token (never, for a parsed file).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/etc/ataman/tokens";

    fn parse(text: &str) -> Result<TokenSet, TokenFileError> {
        TokenSet::parse(Path::new(FILE), text)
    }

    #[test]
    fn roles_comments_and_blank_lines() {
        let set = parse(
            "# readers\nreader-token-0123456 read\n\n  writer-token-0123456   write  \n\tadmin-token-01234567 admin # not a comment here\n",
        );
        // A third field is an error, even one that looks like a comment.
        assert_eq!(
            set,
            Err(TokenFileError::Shape {
                file: FILE.into(),
                line: 5
            })
        );
        let set = parse("# readers\nreader-token-0123456 read\n\n  writer-token-0123456   write  \nadmin-token-01234567 admin\n")
            .unwrap();
        assert_eq!(set.len(), 3);
        assert_eq!(set.role_of(b"reader-token-0123456"), Some(Role::Read));
        assert_eq!(set.role_of(b"writer-token-0123456"), Some(Role::Write));
        assert_eq!(set.role_of(b"admin-token-01234567"), Some(Role::Admin));
        assert_eq!(set.role_of(b"admin-token-0123456"), None, "a prefix");
        assert_eq!(set.role_of(b"admin-token-012345678"), None, "longer");
        assert_eq!(set.role_of(b""), None);
    }

    #[test]
    fn errors_name_file_and_line_and_never_the_token() {
        let secret = "supersecret-token-xyz";
        let cases = [
            (format!("{secret}\n"), 1, "expected `TOKEN ROLE`"),
            (format!("\n{secret} root\n"), 2, "unknown role \"root\""),
            ("short read\n".to_owned(), 1, "visible ASCII"),
            (
                format!("{secret} read\n{secret} admin\n"),
                2,
                "earlier line",
            ),
        ];
        for (text, line, what) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{FILE}:{line}: ")), "{e}");
            assert!(e.contains(what), "{e}");
            assert!(!e.contains(secret), "the token leaked: {e}");
        }
        let e = parse("# nothing\n\n").unwrap_err().to_string();
        assert_eq!(e, format!("{FILE}: no token (lines of `TOKEN ROLE`)"));
    }
}
