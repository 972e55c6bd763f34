//! `/v0/backup`'s requests (docs/API.md, "Backup"): what each method and
//! query asks, checked. The bounds that need the node's state (a lease's
//! upper bound, a checkpoint's name and files) are checked where that
//! state is (`net::backup_http`).

use super::{Action, Param, Params, bad, not_allowed, number};
use crate::http::request::Method;

/// What a request to `/v0/backup` asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupAsk {
    /// Take a node checkpoint (`POST [?lease_s=N][&at=TS[&skew_ms=MS]]`).
    Create {
        /// Its lease in seconds (`None`: the default hour).
        lease_s: Option<u64>,
        /// A cluster backup's point: checkpoint once the clock passed it
        /// (`backup::point_in_time`).
        at: Option<PointAt>,
    },
    /// The held checkpoints, the node's clock and its bounds (`GET`).
    List,
    /// A chunk of one file of a held checkpoint (`GET
    /// ?name=NAME&file=PATH[&offset=N]`).
    File {
        /// The checkpoint.
        name: String,
        /// The file, relative to the checkpoint (as its manifest lists it).
        path: String,
        /// Where the chunk starts.
        offset: u64,
    },
    /// Remove a checkpoint (`DELETE ?name=NAME`).
    Delete {
        /// Its name.
        name: String,
    },
    /// A restore's versions, applied where this node keeps their keys
    /// (`POST ?ingest=1&restore=ID[&t=TS]`, the body
    /// `backup::ingest_wire`); with `ingest=probe`, only whether the store
    /// is empty. Each batch applied marks its restore under way
    /// ([`BackupAsk::Restoring`]).
    Ingest {
        /// Only answer whether the store holds no entry.
        probe: bool,
        /// The backup's `T`: versions stamped after it are dropped
        /// (`point_in_time::kept`); `None` keeps every version.
        t: Option<u64>,
        /// The restore's id (1 to 64 of `A-Z a-z 0-9 - _`); empty for a
        /// probe.
        restore: String,
    },
    /// A restore starts writing into this node (`POST
    /// ?ingest=begin&restore=ID`) or is done (`POST ?ingest=done&restore=ID`):
    /// `/readyz` answers 503 `restoring` while any restore's mark holds
    /// (docs/BACKUP.md, "Restore").
    Restoring {
        /// `true` for `begin`, `false` for `done`.
        begin: bool,
        /// The restore's id.
        restore: String,
    },
}

/// A cluster backup's point in time as a member is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointAt {
    /// `T`, a hybrid-logical-clock timestamp.
    pub ts: u64,
    /// The clock skew assumed between members, milliseconds (`None`: the
    /// rule's default).
    pub skew_ms: Option<u64>,
}

/// `/v0/backup` (module header).
pub(super) fn backup(method: &Method, params: &Params<'_>) -> Action {
    let [lease_s, name, file, offset, at, skew_ms, ingest, t, restore] = params.pick([
        "lease_s", "name", "file", "offset", "at", "skew_ms", "ingest", "t", "restore",
    ]);
    let ask = match method {
        Method::Get => get(name, file, offset),
        Method::Other(m) if m == "POST" => match ingest.one() {
            Ok(None) => post(lease_s, at, skew_ms),
            Ok(Some(ingest)) => ingest_ask(&ingest, t, restore),
            Err(refused) => Err(refused),
        },
        Method::Delete => {
            text(name, "DELETE /v0/backup needs name=NAME").map(|name| BackupAsk::Delete { name })
        }
        _ => Err(not_allowed("GET, HEAD, POST, DELETE")),
    };
    ask.map_or_else(|refused| refused, Action::Backup)
}

fn get(name: Param<'_>, file: Param<'_>, offset: Param<'_>) -> Result<BackupAsk, Action> {
    if name.value.is_none() && file.value.is_none() {
        return Ok(BackupAsk::List);
    }
    let name = text(name, "GET /v0/backup?file= needs name=NAME")?;
    let path = text(file, "GET /v0/backup?name= needs file=PATH")?;
    let offset = number_u64(offset)?.unwrap_or(0);
    Ok(BackupAsk::File { name, path, offset })
}

/// The longest restore id.
pub const RESTORE_ID_BYTES_MAX: usize = 64;

/// What [`valid_restore_id`] accepts, for a 400's text.
pub const RESTORE_ID_RULE: &str =
    "restore must be 1 to 64 characters of A-Z, a-z, 0-9, '-' and '_'";

/// A restore id (`ingest=…&restore=ID`, the key of its readiness mark): 1 to [`RESTORE_ID_BYTES_MAX`] ASCII letters, digits, `-`, `_`.
pub fn valid_restore_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= RESTORE_ID_BYTES_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn ingest_ask(ingest: &[u8], t: Param<'_>, restore: Param<'_>) -> Result<BackupAsk, Action> {
    let t = number_u64(t)?;
    if ingest == b"probe" {
        let restore = String::new();
        return Ok(BackupAsk::Ingest {
            probe: true,
            t,
            restore,
        });
    }
    if !matches!(ingest, b"1" | b"begin" | b"done") {
        return Err(bad("ingest must be 1, probe, begin or done"));
    }
    let restore = text(restore, "ingest=1, begin and done need restore=ID")?;
    if !valid_restore_id(&restore) {
        return Err(bad(RESTORE_ID_RULE));
    }
    Ok(match ingest {
        b"1" => BackupAsk::Ingest {
            probe: false,
            t,
            restore,
        },
        begin => BackupAsk::Restoring {
            begin: begin == b"begin",
            restore,
        },
    })
}

fn post(lease_s: Param<'_>, at: Param<'_>, skew_ms: Param<'_>) -> Result<BackupAsk, Action> {
    let lease_s = match number(lease_s)? {
        Some(0) => return Err(bad("lease_s must be at least 1")),
        lease_s => lease_s.map(u64::from),
    };
    let skew_ms = number_u64(skew_ms)?;
    // The skew's default and bound are the backup rule's
    // (`net::backup_http`, `backup::point_in_time`).
    let at = match (number_u64(at)?, skew_ms) {
        (None, Some(_)) => return Err(bad("skew_ms needs at=TS")),
        (None, None) => None,
        (Some(ts), skew_ms) => Some(PointAt { ts, skew_ms }),
    };
    Ok(BackupAsk::Create { lease_s, at })
}

/// A required UTF-8 parameter.
fn text(param: Param<'_>, missing: &str) -> Result<String, Action> {
    let name = param.name;
    match param.one()? {
        None => Err(bad(missing)),
        Some(raw) => std::str::from_utf8(&raw)
            .map(str::to_owned)
            .map_err(|_| bad(format!("{name} must be UTF-8"))),
    }
}

fn number_u64(param: Param<'_>) -> Result<Option<u64>, Action> {
    let name = param.name;
    match param.one()? {
        None => Ok(None),
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| bad(format!("{name} must be a non-negative integer"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::query::Query;

    fn ask(method: Method, query: &str) -> Action {
        let params = Params {
            query: Query::parse(query.as_bytes()).unwrap(),
        };
        backup(&method, &params)
    }

    fn post() -> Method {
        Method::Other("POST".into())
    }

    #[test]
    fn each_method_and_query_is_its_ask() {
        assert_eq!(ask(Method::Get, ""), Action::Backup(BackupAsk::List));
        assert_eq!(
            ask(Method::Get, "name=ckpt-1&file=data/CLOCK&offset=5"),
            Action::Backup(BackupAsk::File {
                name: "ckpt-1".into(),
                path: "data/CLOCK".into(),
                offset: 5
            })
        );
        assert_eq!(
            ask(post(), "at=99&skew_ms=10"),
            Action::Backup(BackupAsk::Create {
                lease_s: None,
                at: Some(PointAt {
                    ts: 99,
                    skew_ms: Some(10)
                })
            })
        );
        assert_eq!(
            ask(post(), "ingest=probe"),
            Action::Backup(BackupAsk::Ingest {
                probe: true,
                t: None,
                restore: String::new(),
            })
        );
        assert_eq!(
            ask(post(), "ingest=1&t=77&restore=a-1"),
            Action::Backup(BackupAsk::Ingest {
                probe: false,
                t: Some(77),
                restore: "a-1".into(),
            })
        );
        assert_eq!(
            ask(post(), "ingest=begin&restore=a-1"),
            Action::Backup(BackupAsk::Restoring {
                begin: true,
                restore: "a-1".into(),
            })
        );
        assert_eq!(
            ask(post(), "ingest=done&restore=B_2"),
            Action::Backup(BackupAsk::Restoring {
                begin: false,
                restore: "B_2".into(),
            })
        );
        assert_eq!(
            ask(Method::Delete, "name=x"),
            Action::Backup(BackupAsk::Delete { name: "x".into() })
        );
    }

    #[test]
    fn ids_are_short_and_plain() {
        for good in ["a", "r-1_B", &"x".repeat(RESTORE_ID_BYTES_MAX)] {
            assert!(valid_restore_id(good), "{good}");
        }
        for bad in [
            "",
            "a b",
            "a/b",
            "é",
            "a%",
            &"x".repeat(RESTORE_ID_BYTES_MAX + 1),
        ] {
            assert!(!valid_restore_id(bad), "{bad}");
        }
    }

    #[test]
    fn bad_queries_are_400_not_asks() {
        for (method, query) in [
            (Method::Get, "name=ckpt-1"),
            (Method::Get, "file=x"),
            (Method::Get, "name=a&file=b&offset=-1"),
            (post(), "lease_s=0"),
            (post(), "skew_ms=5"),
            (post(), "at=x"),
            (post(), "ingest=2"),
            (post(), "ingest=BEGIN"),
            (post(), "ingest=1&t=x&restore=a"),
            (post(), "ingest=1"),
            (post(), "ingest=begin"),
            (post(), "ingest=done&restore="),
            (post(), "ingest=done&restore=a%20b"),
            (post(), "ingest=1&restore=a&restore=b"),
            (Method::Delete, ""),
        ] {
            assert!(
                matches!(ask(method, query), Action::Error(_)),
                "{query} accepted"
            );
        }
    }
}
