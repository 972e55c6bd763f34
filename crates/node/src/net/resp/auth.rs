//! Authentication on the RESP port (docs/RESP.md, docs/SECURITY.md): what
//! a connection may do before and after `AUTH`, in Redis's words.
//!
//! - With `--auth-token-file`, a connection starts unauthenticated: every
//!   command but `AUTH`, `HELLO` and `QUIT` answers [`NOAUTH`].
//! - `AUTH TOKEN`, `AUTH default TOKEN` and `HELLO 3 AUTH default TOKEN`
//!   give the connection the token's role (the user name must be
//!   `default`, the only user); a wrong token answers [`WRONGPASS`] and
//!   leaves the connection as it was.
//! - The role is kept until `RESET` or the connection's end: a token
//!   removed from the file does not end connections it opened.
//! - A command the role does not allow answers `NOPERM` errors.
//! - Without a token file every command is admitted and `AUTH TOKEN`
//!   answers Redis's "no password configured" error.

use super::encode::Reply;
use super::table::{KeyOp, Session};
use crate::auth::metrics::ClientRefusal;
use crate::auth::{Auth, Role};
use crate::net::authorize::authorize;
use crate::net::dispatch::Command;
use std::borrow::Cow;

/// Redis's answer to a command before authentication.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// Redis's answer to a wrong user name or password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// The only user name (Redis's default user).
pub const DEFAULT_USER: &[u8] = b"default";

/// What the gate makes of a command before the table plans it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate<'a> {
    /// Plan the command as sent.
    Plan,
    /// Plan these arguments instead (a `HELLO` whose `AUTH` part succeeded
    /// and was taken out).
    PlanInstead(Vec<Cow<'a, [u8]>>),
    /// Answer this and plan nothing.
    Reply(Reply),
}

fn wrongpass(auth: &Auth) -> Reply {
    auth.metrics.client_refused(ClientRefusal::Unknown);
    Reply::Error(WRONGPASS.into())
}

/// The role of `user` and `token`, or the counted refusal.
fn check(auth: &Auth, user: Option<&[u8]>, token: &[u8]) -> Result<Role, Reply> {
    let Some(tokens) = &auth.tokens else {
        return Ok(Role::Admin);
    };
    if user.is_some_and(|u| !u.eq_ignore_ascii_case(DEFAULT_USER)) {
        return Err(wrongpass(auth));
    }
    tokens.role_of(token).ok_or_else(|| wrongpass(auth))
}

fn is(name: &[u8], want: &str) -> bool {
    name.eq_ignore_ascii_case(want.as_bytes())
}

/// `AUTH [user] TOKEN`.
fn auth_command(auth: &Auth, session: &mut Session, args: &[Cow<'_, [u8]>]) -> Reply {
    let (user, token) = match args {
        [_, token] => (None, token),
        [_, user, token] => (Some(&**user), token),
        _ => return super::table::wrong_arity("auth"),
    };
    if auth.tokens.is_none() && user.is_none() {
        return Reply::err(
            "AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    }
    match check(auth, user, token) {
        Ok(role) => {
            session.role = Some(role);
            Reply::Simple("OK")
        }
        Err(reply) => reply,
    }
}

/// `HELLO [protover [AUTH user TOKEN] [SETNAME name]]`: authenticates if
/// asked, then lets the table answer the rest.
fn hello<'a>(auth: &Auth, session: &mut Session, args: &[Cow<'a, [u8]>]) -> Gate<'a> {
    let Some(at) = args
        .iter()
        .skip(2)
        .position(|a| is(a, "auth"))
        .map(|i| i + 2)
    else {
        return Gate::Plan;
    };
    let (Some(user), Some(token)) = (args.get(at + 1), args.get(at + 2)) else {
        return Gate::Reply(Reply::err("Syntax error in HELLO option 'auth'"));
    };
    match check(auth, Some(user), token) {
        Ok(role) => {
            session.role = Some(role);
            let mut rest = args[..at].to_vec();
            rest.extend_from_slice(&args[at + 3..]);
            Gate::PlanInstead(rest)
        }
        Err(reply) => Gate::Reply(reply),
    }
}

/// The gate in front of the command table.
pub fn gate<'a>(auth: &Auth, session: &mut Session, args: &[Cow<'a, [u8]>]) -> Gate<'a> {
    // The decoder never yields an empty command; the gate does not rely on it.
    let Some(name) = args.first() else {
        return Gate::Reply(Reply::err("Protocol error: an empty command"));
    };
    if is(name, "auth") {
        return Gate::Reply(auth_command(auth, session, args));
    }
    if is(name, "hello") {
        return hello(auth, session, args);
    }
    if auth.tokens.is_none() || session.role.is_some() || is(name, "quit") {
        return Gate::Plan;
    }
    auth.metrics.client_refused(ClientRefusal::Missing);
    Gate::Reply(Reply::Error(NOAUTH.into()))
}

/// The name a key operation is refused under.
fn op_name(op: KeyOp) -> &'static str {
    match op {
        KeyOp::Get => "get",
        KeyOp::Set => "set",
        KeyOp::SetExpiring(name) => name,
        KeyOp::Ttl(unit) => unit.command(),
        // Refused under its own name (`Chain::name`) before its read runs.
        KeyOp::Chained => "expire",
        KeyOp::Del => "del",
        KeyOp::Exists => "exists",
        KeyOp::MGet => "mget",
        KeyOp::MSet => "mset",
        KeyOp::Describe(d) => d.command(),
    }
}

/// Admits a key command's parts under the connection's role, or gives
/// the counted `NOPERM` refusal (nothing of the command runs).
pub fn admit(
    auth: &Auth,
    session: &Session,
    op: KeyOp,
    commands: &[Command<'_>],
) -> Result<(), Reply> {
    admit_named(auth, session, op_name(op), commands)
}

/// [`admit`] for a command refused under `name`.
pub fn admit_named(
    auth: &Auth,
    session: &Session,
    name: &str,
    commands: &[Command<'_>],
) -> Result<(), Reply> {
    if auth.tokens.is_none() {
        return Ok(());
    }
    let Some(role) = session.role else {
        auth.metrics.client_refused(ClientRefusal::Missing);
        return Err(Reply::Error(NOAUTH.into()));
    };
    if commands.iter().all(|c| authorize(role, c).is_ok()) {
        return Ok(());
    }
    auth.metrics.client_refused(ClientRefusal::Forbidden);
    Err(Reply::Error(format!(
        "NOPERM User default has no permissions to run the '{name}' command"
    )))
}
