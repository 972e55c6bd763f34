//! The cluster's health as one observer sees it: how many members
//! answer, whether every key still has a quorum, and the transition under
//! way. One pure rule ([`judge`]) that the node's `GET /v0/cluster/health`
//! (the node as observer: its gossip's last answers) and `ataman cluster
//! status` (the tool as observer: which nodes answered its samples) both
//! use (docs/CLUSTER.md, "Cluster health").
//!
//! # Rules
//! With `N` members, `a` of them answering and `u` unknown (never asked
//! yet), each key on `R` of them and a quorum `q = R / 2 + 1` (the
//! default `ack`):
//! - a key's replica set has at least `R - (N - a - u) - u` answering
//!   members, so when `N - a <= R - q` **every key** has a quorum (an
//!   unknown member counts as not answering: the claim is only made when
//!   proven);
//! - a key's set has at most `min(R, a + u)` answering members, so when
//!   `a + u < q` **no key** has one (an unknown member counts as
//!   answering: the claim is only made when proven);
//! - otherwise **some keys** may lack one (which ones depends on where
//!   they are placed; an unknown member leaves it open).
//!
//! The status is `ok` when every member answers, `degraded` when some do
//! not but every key has a quorum, `partial` when some keys may lack one,
//! and `unavailable` when none has. During a transition the members are
//! those of every live version and `R` the smaller one: a write needs a
//! quorum in each version's set, and each set is drawn from them.

/// What the judgement is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// Members of the live layout versions.
    pub members: usize,
    /// Members seen answering.
    pub answering: usize,
    /// Members not asked yet (neither answering nor failing).
    pub unknown: usize,
    /// `R`: replicas of each key (the smaller one of the live versions).
    pub replication_factor: usize,
    /// `(old, new)` versions while a transition is under way.
    pub transition: Option<(u64, u64)>,
}

/// Whether keys have a quorum of answering replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quorum {
    /// Every key.
    AllKeys,
    /// Some keys may lack one.
    SomeKeys,
    /// No key.
    NoKeys,
}

impl Quorum {
    /// The JSON and text spelling.
    pub fn label(self) -> &'static str {
        match self {
            Quorum::AllKeys => "all_keys",
            Quorum::SomeKeys => "some_keys",
            Quorum::NoKeys => "no_keys",
        }
    }
}

/// The judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    /// `ok`, `degraded`, `partial` or `unavailable` (see the rules).
    pub status: &'static str,
    /// Whether keys have a quorum.
    pub quorum: Quorum,
}

/// The rule of the module header. Counts past `members` are clamped.
pub fn judge(o: &Observed) -> Judged {
    let n = o.members;
    let answering = o.answering.min(n);
    let unknown = o.unknown.min(n - answering);
    let r = o.replication_factor.clamp(1, n.max(1));
    let q = r / 2 + 1;
    let quorum = if n > 0 && n - answering <= r - q {
        Quorum::AllKeys
    } else if answering + unknown < q {
        Quorum::NoKeys
    } else {
        Quorum::SomeKeys
    };
    let status = match quorum {
        Quorum::AllKeys if n > 0 && answering == n => "ok",
        Quorum::AllKeys => "degraded",
        Quorum::SomeKeys => "partial",
        Quorum::NoKeys => "unavailable",
    };
    Judged { status, quorum }
}

/// `{"status":…,"quorum":…,"members":N,"answering":A,"unknown":U,
/// "replication_factor":R,"transition":null|{"from":V,"to":W},
/// "nodes":[{"url":…,"answering":true|false|null},…]}`: the node's
/// `GET /v0/cluster/health`, `nodes` being each member with what this
/// node saw (`null`: not asked yet).
pub fn render_json(o: &Observed, nodes: &[(String, Option<bool>)]) -> String {
    use crate::http::json::json_string;
    let j = judge(o);
    let mut out = format!(
        "{{\"status\":\"{}\",\"quorum\":\"{}\",\"members\":{},\"answering\":{},\"unknown\":{},\"replication_factor\":{},\"transition\":",
        j.status,
        j.quorum.label(),
        o.members,
        o.answering,
        o.unknown,
        o.replication_factor
    );
    match o.transition {
        Some((from, to)) => out.push_str(&format!("{{\"from\":{from},\"to\":{to}}}")),
        None => out.push_str("null"),
    }
    out.push_str(",\"nodes\":[");
    for (i, (url, answering)) in nodes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"url\":");
        json_string(&mut out, url);
        out.push_str(",\"answering\":");
        out.push_str(match answering {
            Some(true) => "true",
            Some(false) => "false",
            None => "null",
        });
        out.push('}');
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(members: usize, answering: usize, unknown: usize, r: usize) -> Judged {
        judge(&Observed {
            members,
            answering,
            unknown,
            replication_factor: r,
            transition: None,
        })
    }

    /// Three nodes, R = 3 (q = 2): all up is ok, one down leaves every key
    /// a quorum, two down leave none.
    #[test]
    fn three_of_three() {
        assert_eq!(seen(3, 3, 0, 3).status, "ok");
        assert_eq!(seen(3, 2, 0, 3).status, "degraded");
        assert_eq!(seen(3, 2, 0, 3).quorum, Quorum::AllKeys);
        assert_eq!(seen(3, 1, 0, 3).status, "unavailable");
        assert_eq!(seen(3, 0, 0, 3).quorum, Quorum::NoKeys);
    }

    /// Five nodes, R = 3: one down is degraded, two or three down leave
    /// some keys (those whose replicas they are) without a quorum, four
    /// down leave none.
    #[test]
    fn five_nodes_r3() {
        assert_eq!(seen(5, 4, 0, 3).quorum, Quorum::AllKeys);
        assert_eq!(seen(5, 3, 0, 3).quorum, Quorum::SomeKeys);
        assert_eq!(seen(5, 2, 0, 3).quorum, Quorum::SomeKeys);
        assert_eq!(seen(5, 2, 0, 3).status, "partial");
        assert_eq!(seen(5, 1, 0, 3).quorum, Quorum::NoKeys);
    }

    /// Unknown members are counted against each claim: never proof of a
    /// quorum, never proof of its loss.
    #[test]
    fn unknown_members_prove_nothing() {
        // 3 nodes, R 3: self answering, two never asked.
        assert_eq!(seen(3, 1, 2, 3).quorum, Quorum::SomeKeys);
        assert_eq!(seen(3, 2, 1, 3).quorum, Quorum::AllKeys);
        assert_eq!(seen(3, 2, 1, 3).status, "degraded");
    }

    /// R = 1: any member down loses the keys it holds; a single node is
    /// ok alone; counts past the members are clamped, R past N too.
    #[test]
    fn edges() {
        assert_eq!(seen(1, 1, 0, 1).status, "ok");
        assert_eq!(seen(2, 1, 0, 1).quorum, Quorum::SomeKeys);
        assert_eq!(seen(2, 0, 0, 1).quorum, Quorum::NoKeys);
        assert_eq!(seen(3, 9, 9, 3).status, "ok");
        assert_eq!(seen(2, 2, 0, 7).status, "ok");
        assert_eq!(seen(0, 0, 0, 3).status, "unavailable");
    }

    /// The document names status, quorum, the transition and each node.
    #[test]
    fn document() {
        let o = Observed {
            members: 2,
            answering: 1,
            unknown: 1,
            replication_factor: 2,
            transition: Some((1, 2)),
        };
        let doc = render_json(
            &o,
            &[
                ("http://a:1".into(), Some(true)),
                ("http://b:2".into(), None),
            ],
        );
        assert_eq!(
            doc,
            "{\"status\":\"partial\",\"quorum\":\"some_keys\",\"members\":2,\"answering\":1,\"unknown\":1,\
             \"replication_factor\":2,\"transition\":{\"from\":1,\"to\":2},\
             \"nodes\":[{\"url\":\"http://a:1\",\"answering\":true},{\"url\":\"http://b:2\",\"answering\":null}]}"
        );
    }
}
