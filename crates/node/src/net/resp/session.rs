//! A RESP connection's session (what `HELLO`, `CLIENT`, `AUTH` and
//! `ATAMAN.REPLICATION` set), the node's limits it is checked against, and
//! the two replies that read the session: `ATAMAN.REPLICATION` and `WAIT`.
//!
//! Pure: no socket, no engine.
//!
//! # Rules
//! - **Defaults follow the live placement.** A session that never sent
//!   `ATAMAN.REPLICATION` has no `ack`/`from` of its own: each command
//!   takes the node's defaults of the moment it runs ([`Limits`], built
//!   per command from the thread's routing limits, as HTTP's defaults are),
//!   so a connection opened before a layout change writes with the new
//!   layout's `R` after it. A session that chose its own `ack`/`from` keeps
//!   them, checked again per command against the live cluster size: a
//!   choice the cluster no longer allows is refused, saying so.
//! - **`WAIT` answers what is true.** Each write this connection was
//!   answered for is confirmed by a number of copies: `ack` when it
//!   succeeded (the coordinator's verdict fires once `ack` replicas
//!   answered; a node alone is one copy), 0 when it failed for want of
//!   replicas (it may be on fewer than `ack`, or none). A failure that
//!   wrote nothing (an invalid request, a refusal) is no write. `WAIT`
//!   answers, at once, the smallest count over the writes since the
//!   previous `WAIT`, less one (Redis counts replicas besides the master);
//!   with no write since, the previous `WAIT`'s answer stands (copies
//!   are never taken back); with no write ever, 0.

use super::encode::{Proto, Reply};
use crate::net::answer::{Answer, Awaited, Failure};
use std::borrow::Cow;

/// What the table needs of the node, read per command.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest key.
    pub key_bytes_max: usize,
    /// Largest value.
    pub value_bytes_max: usize,
    /// Nodes in the cluster (the read layout's members, now).
    pub cluster_size: u32,
    /// `from` by default (`R` of the read layout, now).
    pub from_default: u32,
}

/// A connection's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The protocol replies are written in.
    pub proto: Proto,
    /// The connection's id (`CLIENT ID`).
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// `CLIENT SETINFO LIB-NAME`.
    pub lib_name: Option<Vec<u8>>,
    /// `CLIENT SETINFO LIB-VER`.
    pub lib_ver: Option<Vec<u8>>,
    /// The open `MULTI` transaction's queue ([`super::multi`]).
    pub multi: Option<super::multi::Queue>,
    /// The watched key and what was seen of it ([`super::watch`]).
    pub watch: Option<super::watch::Watched>,
    /// `ack` and `from` chosen by `ATAMAN.REPLICATION`; `None`: the
    /// node's defaults of the moment each command runs.
    pub replication: Option<(u32, u32)>,
    /// The role `AUTH` gave (`None`: not authenticated; see [`super::auth`]).
    pub role: Option<crate::auth::Role>,
    /// What `WAIT` answers ([`Confirmed`]).
    pub confirmed: Confirmed,
}

/// Copies this connection's writes were confirmed on, for `WAIT`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confirmed {
    /// The fewest copies of any write answered since the last `WAIT`
    /// (`None`: no write since).
    pub since_wait: Option<u32>,
    /// The last `WAIT`'s answer.
    pub last_answer: u32,
}

impl Session {
    /// A new connection's session: RESP2, the node's default `ack`/`from`.
    pub fn new(id: u64) -> Self {
        Session {
            proto: Proto::Resp2,
            id,
            name: None,
            lib_name: None,
            lib_ver: None,
            multi: None,
            watch: None,
            replication: None,
            role: None,
            confirmed: Confirmed::default(),
        }
    }

    /// The `ack` and `from` a command sent now runs with, or why the
    /// session's own choice no longer fits the cluster.
    pub fn ack_from(&self, limits: Limits) -> Result<(u32, u32), String> {
        match self.replication {
            None => Ok(default_replication(limits)),
            Some((ack, from)) => {
                crate::api::replication(Some(ack), Some(from), limits.cluster_size).map_err(|e| {
                    format!(
                        "{e}: this connection's ATAMAN.REPLICATION {ack} {from} no longer fits \
                         the cluster; set it again, or RESET for the node's defaults"
                    )
                })
            }
        }
    }

    /// Notes a write answered, confirmed on `copies` copies.
    pub fn note_write(&mut self, copies: u32) {
        let c = &mut self.confirmed;
        c.since_wait = Some(c.since_wait.map_or(copies, |m| m.min(copies)));
    }
}

/// Copies a command's writes were confirmed on, from their answers (a
/// command's reads among them are passed over): the fewest over its
/// writes, `ack` for a write done, 0 for one that failed for want of
/// replicas; `None` when the command wrote nothing.
pub fn copies_confirmed<'a>(answers: impl Iterator<Item = &'a Answer>, ack: u32) -> Option<u32> {
    answers
        .filter_map(|a| match a {
            Answer::Done(Awaited::Put(_) | Awaited::Delete(_)) => Some(ack),
            Answer::Failed(Failure::NotEnoughReplicas, _) => Some(0),
            _ => None,
        })
        .min()
}

/// The node's defaults under `limits` (HTTP's defaults: `from` = `R`,
/// `ack` a majority of it).
fn default_replication(limits: Limits) -> (u32, u32) {
    crate::api::replication_with(None, None, limits.cluster_size, limits.from_default)
        .unwrap_or((1, limits.cluster_size.max(1)))
}

/// `WAIT numreplicas timeout`: answered at once with what is true
/// ([the rules](self)); it never waits, as nothing more will be confirmed.
pub fn wait(args: &[Cow<'_, [u8]>], session: &mut Session) -> Reply {
    let numbers = [&args[1], &args[2]].map(|a| super::decode::parse_i64(a));
    match numbers {
        [Some(n), Some(t)] if n >= 0 && t >= 0 => {
            let c = &mut session.confirmed;
            if let Some(copies) = c.since_wait.take() {
                c.last_answer = copies.saturating_sub(1);
            }
            Reply::Int(i64::from(c.last_answer))
        }
        [Some(_), Some(_)] => Reply::err("timeout is negative"),
        _ => Reply::err("value is not an integer or out of range"),
    }
}

/// `ATAMAN.REPLICATION [ack from]`: sets this connection's `ack`/`from`
/// (checked as HTTP's query parameters are, against the cluster now), and
/// answers the pair a command sent now runs with.
pub fn replication(args: &[Cow<'_, [u8]>], session: &mut Session, limits: Limits) -> Reply {
    match args.len() {
        1 => {}
        3 => {
            let number = |a: &[u8]| super::decode::parse_i64(a).and_then(|n| u32::try_from(n).ok());
            let (Some(ack), Some(from)) = (number(&args[1]), number(&args[2])) else {
                return Reply::err("ack and from must be positive integers");
            };
            match crate::api::replication(Some(ack), Some(from), limits.cluster_size) {
                Ok(pair) => session.replication = Some(pair),
                Err(e) => return Reply::err(e),
            }
        }
        _ => return super::table::wrong_arity("ataman.replication"),
    }
    match session.ack_from(limits) {
        Ok((ack, from)) => Reply::Array(vec![
            Reply::Int(i64::from(ack)),
            Reply::Int(i64::from(from)),
        ]),
        Err(e) => Reply::err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cluster_size: u32, from_default: u32) -> Limits {
        Limits {
            key_bytes_max: 8,
            value_bytes_max: 16,
            cluster_size,
            from_default,
        }
    }

    use crate::net::resp::test_args as args;

    /// A session without a choice of its own takes the defaults of the
    /// limits each command brings: a layout grown from R=1 to R=3 is
    /// followed by the same session (regression: the defaults were fixed
    /// when the connection opened).
    #[test]
    fn defaults_follow_the_limits_of_each_command() {
        let mut session = Session::new(1);
        assert_eq!(session.ack_from(limits(2, 1)), Ok((1, 1)));
        assert_eq!(session.ack_from(limits(3, 3)), Ok((2, 3)));
        let asked = replication(&args(&["ataman.replication"]), &mut session, limits(3, 3));
        assert_eq!(asked, Reply::Array(vec![Reply::Int(2), Reply::Int(3)]));
        assert_eq!(session.replication, None, "asking chooses nothing");
        // A choice of its own is kept, and checked against the cluster now.
        let set = replication(
            &args(&["ataman.replication", "3", "3"]),
            &mut session,
            limits(3, 3),
        );
        assert_eq!(set, Reply::Array(vec![Reply::Int(3), Reply::Int(3)]));
        assert_eq!(session.ack_from(limits(5, 3)), Ok((3, 3)));
        let shrunk = session.ack_from(limits(2, 2)).unwrap_err();
        assert!(shrunk.contains("ATAMAN.REPLICATION 3 3"), "{shrunk}");
        assert!(matches!(
            replication(&args(&["ataman.replication"]), &mut session, limits(2, 2)),
            Reply::Error(_)
        ));
    }

    /// `WAIT` answers the fewest copies of the writes since the last
    /// `WAIT`, less one; the previous answer with no write since; 0 with
    /// no write ever (regression: it answered the session's `ack - 1`,
    /// copies earlier writes never had).
    #[test]
    fn wait_answers_the_fewest_copies_confirmed() {
        let mut session = Session::new(1);
        session.replication = Some((3, 3));
        let wait_now = |s: &mut Session| wait(&args(&["wait", "2", "0"]), s);
        assert_eq!(wait_now(&mut session), Reply::Int(0), "no write yet");
        session.note_write(1);
        session.note_write(3);
        assert_eq!(wait_now(&mut session), Reply::Int(0));
        session.note_write(3);
        session.note_write(2);
        assert_eq!(wait_now(&mut session), Reply::Int(1));
        assert_eq!(wait_now(&mut session), Reply::Int(1), "nothing new");
        session.note_write(3);
        assert_eq!(wait_now(&mut session), Reply::Int(2));
        session.note_write(0);
        assert_eq!(wait_now(&mut session), Reply::Int(0), "a failed write");
        let v = Answer::Value(b"v".to_vec(), 1);
        let done = Answer::Done(Awaited::Delete(1));
        let short = Answer::Failed(Failure::NotEnoughReplicas, "1 of 2".into());
        let refused = Answer::Failed(Failure::Busy, "refilling".into());
        assert_eq!(copies_confirmed([&v, &done].into_iter(), 2), Some(2));
        assert_eq!(copies_confirmed([&done, &short].into_iter(), 2), Some(0));
        assert_eq!(copies_confirmed([&v, &refused].into_iter(), 2), None);
        assert!(matches!(
            wait(&args(&["wait", "1", "-1"]), &mut session),
            Reply::Error(_)
        ));
        assert!(matches!(
            wait(&args(&["wait", "x", "0"]), &mut session),
            Reply::Error(_)
        ));
    }
}
