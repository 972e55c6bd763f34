//! The bearer token the clients send (`Authorization: Bearer TOKEN`), for
//! a node started with `--auth-token-file`: from `--token-file FILE` (its
//! first token: a file of the node's `TOKEN ROLE` format works, as does a
//! file holding the token alone), else from the `ATAMAN_TOKEN` variable.

use std::path::Path;
use std::sync::OnceLock;

/// The environment variable holding a token.
pub const TOKEN_ENV: &str = "ATAMAN_TOKEN";

static TOKEN: OnceLock<Option<String>> = OnceLock::new();

/// The first token of a token file's text: the first field of its first
/// line that is neither blank nor a comment.
pub fn first_token(text: &str) -> Option<&str> {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .and_then(|l| l.split_ascii_whitespace().next())
}

/// Chooses the token for this process: `file`'s first token, else
/// `ATAMAN_TOKEN`, else none. Call once, before any request.
pub fn init(file: Option<&Path>) -> Result<(), String> {
    let token = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?;
            let token = first_token(&text)
                .ok_or_else(|| format!("--token-file {}: no token in it", path.display()))?;
            Some(token.to_owned())
        }
        None => std::env::var(TOKEN_ENV)
            .ok()
            .filter(|t| !t.trim().is_empty()),
    };
    let _ = TOKEN.set(token.map(|t| t.trim().to_owned()));
    Ok(())
}

/// The token to send, if any (`ATAMAN_TOKEN` when [`init`] was not called).
pub fn bearer() -> Option<&'static str> {
    TOKEN
        .get_or_init(|| {
            std::env::var(TOKEN_ENV)
                .ok()
                .filter(|t| !t.trim().is_empty())
        })
        .as_deref()
}

/// The header line for [`bearer`], or nothing.
pub fn header_line() -> String {
    bearer().map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_token_of_either_format() {
        assert_eq!(first_token("# c\n\n  abc read\nxyz admin\n"), Some("abc"));
        assert_eq!(first_token("only-the-token\n"), Some("only-the-token"));
        assert_eq!(first_token("# nothing\n"), None);
    }
}
