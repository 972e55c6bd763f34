//! `ataman serve --join SEED_URL`: a node that is not yet a member learns
//! the cluster's layout from a member, keeps it as its `LAYOUT`, and keeps
//! up with it while it waits to be added, so that the commit that adds it
//! is its next version.
//!
//! # Rules
//! - At start the node asks the seed (`GET SEED/v0/layout`) and stores the
//!   seed's layout unless its own stored one is as new, or the seed's
//!   already names it (that one arrives as a commit, with its transition;
//!   [`choose`]).
//! - While it is not a member, every [`JOIN_REFRESH`] it asks again: a
//!   newer layout that does not name it and that the seed reports settled
//!   replaces its current one (`AcceptorNode::replace_current`); the
//!   version right after its own that names it is learned as a commit it
//!   missed (`AcceptorNode::learn`, `History::begin`).
//! - The seed is asked over plain HTTP without credentials: a seed with
//!   TLS or `--auth-token-file` is not supported yet.

use super::layout::Layout;
use super::membership::Membership;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How often a node waiting to be added asks its seed again.
pub const JOIN_REFRESH: Duration = Duration::from_secs(2);
/// How long one question to the seed may take (connect, send, answer).
pub const SEED_TIMEOUT: Duration = Duration::from_secs(2);
/// The seed's answer at most, bytes.
pub const SEED_ANSWER_BYTES_MAX: u64 = 1 << 20;
/// Questions to the seed at start before giving up.
pub const SEED_ATTEMPTS_MAX: u32 = 5;

/// A seed's layout and whether it said it was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedLayout {
    /// The layout.
    pub layout: Layout,
    /// `"settled"` in the seed's document.
    pub settled: bool,
}

/// The unsigned integer after `"name":` in `doc`.
fn number(doc: &str, name: &str) -> Option<u64> {
    let key = format!("\"{name}\":");
    let at = doc.find(&key)? + key.len();
    let digits: String = doc[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The strings of the array after `"name":[` in `doc` (URLs: no escapes;
/// a `]` inside a string, as in `http://[::1]:80`, is part of it).
fn strings(doc: &str, name: &str) -> Option<Vec<String>> {
    let key = format!("\"{name}\":[");
    let at = doc.find(&key)? + key.len();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for c in doc[at..].chars() {
        match (&mut current, c) {
            (_, '\\') => return None,
            (None, ']') => return Some(out),
            (None, '"') => current = Some(String::new()),
            (None, _) => {}
            (Some(text), '"') => {
                out.push(std::mem::take(text));
                current = None;
            }
            (Some(text), c) => text.push(c),
        }
    }
    None
}

/// Reads the fixed shape of `GET /v0/layout` (docs/API.md).
pub fn parse_layout_doc(doc: &str) -> Result<SeedLayout, String> {
    let bad = || format!("not a layout document: {doc:.200}");
    let version = number(doc, "version").ok_or_else(bad)?;
    let nodes = strings(doc, "nodes").ok_or_else(bad)?;
    let r = number(doc, "replication_factor").ok_or_else(bad)?;
    let r = usize::try_from(r).map_err(|_| bad())?;
    let layout = Layout::new(version, nodes, r).map_err(|e| format!("{}: {e}", bad()))?;
    Ok(SeedLayout {
        layout,
        settled: doc.contains("\"settled\":true"),
    })
}

/// Asks `seed` (an `http://HOST:PORT` URL) for its layout.
pub fn fetch(seed: &str) -> Result<SeedLayout, String> {
    if seed.starts_with("https://") {
        return Err(format!(
            "--join {seed}: a seed over TLS is not supported yet"
        ));
    }
    let host = super::dial_address(seed);
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("{seed}: resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("{seed}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, SEED_TIMEOUT)
        .map_err(|e| format!("{seed}: connect: {e}"))?;
    let io = |e: std::io::Error| format!("{seed}: {e}");
    stream.set_read_timeout(Some(SEED_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(SEED_TIMEOUT)).map_err(io)?;
    let request = format!("GET /v0/layout HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    stream
        .take(SEED_ANSWER_BYTES_MAX)
        .read_to_end(&mut answer)
        .map_err(io)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{seed}: answer cut"))?;
    let status = head.lines().next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("{seed}: GET /v0/layout answered {}", status.trim()));
    }
    parse_layout_doc(body)
}

/// Which layout a joining node `me` starts with, given the seed's and
/// its stored one: the seed's when it is newer and does not name `me`
/// (it must not become `LAYOUT` without its transition: a layout that
/// adds `me` arrives as a commit, `LAYOUT-NEXT`); else the stored one.
/// `Err` when there is neither. Returns the layout and whether to store it.
pub fn choose(me: &str, seed: Layout, stored: Option<Layout>) -> Result<(Layout, bool), String> {
    match stored {
        Some(own) if own.version >= seed.version || seed.is_member(me) => Ok((own, false)),
        None if seed.is_member(me) => Err(format!(
            "the seed's layout version {} already names this node ({me}), but this data directory holds no layout: remove it from the cluster and add it again",
            seed.version
        )),
        _ => Ok((seed, true)),
    }
}

/// The layout a joining node `me` starts with ([`choose`]), the seed
/// asked up to [`SEED_ATTEMPTS_MAX`] times (once when a layout is stored). Returns the layout and
/// whether it must be stored.
pub fn initial(me: &str, seed: &str, stored: Option<Layout>) -> Result<(Layout, bool), String> {
    let mut last = String::new();
    // With a stored layout, one question: the node starts without the
    // seed and keeps asking it while it waits (`JOIN_REFRESH`).
    let attempts = if stored.is_some() {
        1
    } else {
        SEED_ATTEMPTS_MAX
    };
    for attempt in 0..attempts {
        if attempt > 0 {
            std::thread::sleep(SEED_TIMEOUT);
        }
        match fetch(seed) {
            Ok(s) => return choose(me, s.layout, stored),
            Err(e) => last = e,
        }
    }
    match stored {
        Some(own) => {
            tracing::warn!("cannot ask the seed, starting with the stored layout: {last}");
            Ok((own, false))
        }
        None => Err(format!("cannot learn the cluster's layout: {last}")),
    }
}

/// One refresh from the seed while not a member (the rules above);
/// returns what changed, for the log.
pub fn refresh(membership: &Membership, seed: &SeedLayout) -> Result<Option<String>, String> {
    let me = membership.self_url().to_owned();
    let l = &seed.layout;
    membership.update(|s| {
        let committed = s.acceptor.committed().version;
        if l.is_member(&me) {
            if l.version != committed + 1 {
                return (false, Ok(None));
            }
            if let Err(e) = s.acceptor.learn(l.clone()) {
                return (false, Err(e.to_string()));
            }
            let begun = s.history.begin(l.clone()).is_ok();
            let said = format!(
                "learned version {} from the seed: this node is added",
                l.version
            );
            return (begun, Ok(Some(said)));
        }
        if !seed.settled || l.version <= committed {
            return (false, Ok(None));
        }
        match s.acceptor.replace_current(l.clone()) {
            Ok(true) => {
                s.history = super::history::History::settled(l.clone());
                let said = format!(
                    "the cluster is at version {}: still waiting to be added",
                    l.version
                );
                (true, Ok(Some(said)))
            }
            Ok(false) => (false, Ok(None)),
            Err(e) => (false, Err(e.to_string())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::acceptor_node::AcceptorNode;

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    /// The layout document's fixed shape is read back; damage is refused.
    #[test]
    fn parses_the_layout_document() {
        let l = Layout::new(3, vec![url(2), url(1)], 2).unwrap();
        let doc = crate::replication::layout_status::render_json(3, &l.nodes, 2, &url(1), None);
        let s = parse_layout_doc(&doc).unwrap();
        assert_eq!(s.layout, l);
        assert!(s.settled);
        assert!(parse_layout_doc("{\"version\":3}").is_err());
        let v6 = vec!["http://[::1]:1".to_owned(), "http://[::1]:2".to_owned()];
        let doc6 = crate::replication::layout_status::render_json(1, &v6, 1, &v6[0], None);
        assert_eq!(parse_layout_doc(&doc6).unwrap().layout.nodes, v6);
        let r0 = doc.replace("\"replication_factor\":2", "\"replication_factor\":0");
        assert!(parse_layout_doc(&r0).is_err());
    }

    /// The seed's layout is taken only when newer and not naming this node.
    #[test]
    fn choose_never_skips_a_transition() {
        let me = url(9);
        let v1 = Layout::new(1, vec![url(1), url(2)], 2).unwrap();
        let v2 = Layout::new(2, vec![url(1), url(2), url(3)], 2).unwrap();
        let adds_me = Layout::new(2, vec![url(1), url(2), me.clone()], 2).unwrap();
        assert_eq!(choose(&me, v1.clone(), None).unwrap(), (v1.clone(), true));
        assert_eq!(
            choose(&me, v2.clone(), Some(v1.clone())).unwrap(),
            (v2.clone(), true)
        );
        assert_eq!(
            choose(&me, v1.clone(), Some(v2.clone())).unwrap(),
            (v2, false)
        );
        assert_eq!(
            choose(&me, adds_me.clone(), Some(v1.clone())).unwrap(),
            (v1, false)
        );
        assert!(choose(&me, adds_me, None).is_err());
    }

    /// A waiting node follows newer settled layouts that do not name it,
    /// and learns the one right after its own that adds it.
    #[test]
    fn refresh_follows_then_joins() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = Layout::new(1, vec![url(1), url(2)], 2).unwrap();
        let a = AcceptorNode::open(dir.path(), v1).unwrap();
        let m = Membership::new(url(9), a);
        let v2 = Layout::new(2, vec![url(1), url(2), url(3)], 2).unwrap();
        let unsettled = SeedLayout {
            layout: v2.clone(),
            settled: false,
        };
        assert_eq!(refresh(&m, &unsettled).unwrap(), None);
        let settled = SeedLayout {
            layout: v2.clone(),
            settled: true,
        };
        assert!(refresh(&m, &settled).unwrap().is_some());
        assert_eq!(m.committed(), v2);
        assert!(m.history().removed(&url(9)));
        let skip = Layout::new(4, vec![url(1), url(9)], 2).unwrap();
        let skip = SeedLayout {
            layout: skip,
            settled: false,
        };
        assert_eq!(refresh(&m, &skip).unwrap(), None, "not the next version");
        let v3 = Layout::new(3, vec![url(1), url(2), url(3), url(9)], 2).unwrap();
        let added = SeedLayout {
            layout: v3.clone(),
            settled: false,
        };
        assert!(refresh(&m, &added).unwrap().is_some());
        let h = m.history();
        assert!(h.in_transition() && !h.removed(&url(9)));
        assert_eq!(m.read(|s| s.acceptor.next().cloned()), Some(v3));
    }
}
