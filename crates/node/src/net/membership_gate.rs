//! What a node that is not a member answers: a joining node (`--join`,
//! not added yet) and a removed one serve no client request (503 naming
//! the members), and say where they stand on `GET /v0/status` and
//! `GET /v0/layout` (docs/API.md, "Membership").
//!
//! The standing is the transition driver's (`cluster::transition_state`),
//! read from atomics: the request path takes no lock for a member.

use super::answer::{self, Answer, Format};
use super::dispatch::Command;
use crate::cluster::transition_state::{Standing, TransitionShared};
use crate::http::json::json_string;
use crate::replication::layout_status::render_json;
use crate::state::NodeShared;

/// The 503 a non-member answers a client's data command with, `None`
/// for a member or a command that is not a client's data command.
pub fn refusal(transition: &TransitionShared, command: &Command<'_>) -> Option<Answer> {
    let standing = transition.standing();
    if standing == Standing::Member {
        return None;
    }
    let data = matches!(
        command,
        Command::Get { .. }
            | Command::GetVersion { .. }
            | Command::Write { .. }
            | Command::Range { .. }
            | Command::ClusterRange(_)
    );
    if !data {
        return None;
    }
    let what = match standing {
        Standing::Joining => "joining the cluster, not serving yet",
        _ => "not a member of the cluster (removed)",
    };
    let members = transition.members().join(", ");
    Some(answer::busy(format!(
        "this node is {what}; send requests to a member: {members}"
    )))
}

/// `GET /v0/status`: `ok` for a member (unchanged); for a non-member a
/// JSON object saying who it is (`self`, its `--self` URL: a proposer
/// adds it only under exactly that URL, `cluster::added_identity`) and
/// where it stands.
pub fn status(transition: &TransitionShared, self_url: &str) -> Answer {
    let standing = transition.standing();
    if standing == Standing::Member {
        return Answer::Document(Format::Line, "ok".into());
    }
    let mut own = String::from("{\"self\":");
    json_string(&mut own, self_url);
    own.push('}');
    Answer::Document(
        Format::Json,
        standing_json(transition, standing, transition.settled(), &own),
    )
}

/// This node's URL: its membership's, else its place in the topology.
pub fn self_url(shared: &NodeShared) -> &str {
    match &shared.membership {
        Some(m) => m.self_url(),
        None => &shared.topology.nodes()[shared.topology.self_index()],
    }
}

/// `GET /v0/layout`: the newest committed layout (the node's membership;
/// the topology for a node without one) with the standing's fields.
pub fn layout(shared: &NodeShared) -> String {
    let topology = &shared.topology;
    let self_url = self_url(shared);
    let Some(m) = &shared.membership else {
        // A fixed cluster's ids are its list order (`cluster::live::Placement::fixed`).
        let ids: Vec<u16> = (0..topology.nodes().len()).map(|i| i as u16).collect();
        return render_json(
            topology.version(),
            topology.nodes(),
            &ids,
            shared.config.replication_factor,
            self_url,
            None,
        );
    };
    let history = m.history();
    let l = history.current();
    let doc = render_json(
        l.version,
        &l.nodes,
        &l.ids,
        l.replication_factor,
        m.self_url(),
        Some(&history),
    );
    let mut figures = m.copies.for_version(l.version);
    let own = shared.antientropy.copy.progress();
    figures.retain(|(url, _)| url != m.self_url());
    if own.version == l.version {
        figures.push((m.self_url().to_owned(), own));
    }
    let doc = with_progress(&doc, &figures);
    let t = &shared.transition;
    // What the transition waits for (`cluster::copy_completion`), then
    // this node's cleanups (`cluster::cleanup_metrics`), last.
    let waits = crate::cluster::copy_completion::waiting_for(&history, &t.copy_waits(l.version));
    let doc = match doc.strip_suffix('}') {
        Some(body) => format!(
            "{body},\"waiting_for\":{},\"cleanup\":{}}}",
            waiting_json(&waits),
            t.cleanup.json()
        ),
        None => doc,
    };
    // The driver publishes `settled` on its tick; a transition this node
    // already holds is not settled whatever it last published.
    let settled = t.settled() && !history.in_transition();
    standing_json(t, t.standing(), settled, &doc)
}

/// `[{"node":URL,"reason":TEXT},…]`.
fn waiting_json(waits: &[(String, &str)]) -> String {
    let mut out = String::from("[");
    for (i, (node, reason)) in waits.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"node\":");
        json_string(&mut out, node);
        out.push_str(",\"reason\":");
        json_string(&mut out, reason);
        out.push('}');
    }
    out.push(']');
    out
}

/// `doc` with the entries of `moving` of the nodes in `figures` carrying
/// their copy's figures (each node counts what it receives: this node's
/// own from its metrics, the others' as the gossip last brought them,
/// `crate::cluster::copy_figures`); a member not heard from stays at 0.
pub fn with_progress(
    doc: &str,
    figures: &[(String, crate::cluster::copy_figures::CopyFigures)],
) -> String {
    let mut doc = doc.to_owned();
    for (node, p) in figures {
        let mut url = String::new();
        json_string(&mut url, node);
        let zero = format!(
            "{{\"url\":{url},\"keys_to_copy\":0,\"bytes_to_copy\":0,\"keys_copied\":0,\"bytes_copied\":0}}"
        );
        let filled = format!(
            "{{\"url\":{url},\"keys_to_copy\":{},\"bytes_to_copy\":{},\"keys_copied\":{},\"bytes_copied\":{}}}",
            p.keys_to_copy, p.bytes_to_copy, p.keys_copied, p.bytes_copied
        );
        doc = doc.replacen(&zero, &filled, 1);
    }
    doc
}

/// `doc` (a JSON object) with the standing's fields first: `member`,
/// `joining`, `removed`, `safe_to_stop`, `members`, `settled` (overriding
/// the document's own `removed`, which only looks at the newest layout,
/// and its `settled`).
pub fn standing_json(
    transition: &TransitionShared,
    standing: Standing,
    settled: bool,
    doc: &str,
) -> String {
    let body = doc.strip_prefix('{').unwrap_or(doc);
    let body = drop_field(body, "\"removed\":");
    let body = drop_field(&body, "\"members\":");
    let body = drop_field(&body, "\"settled\":");
    let body = body.strip_suffix('}').unwrap_or(&body);
    let mut out = String::with_capacity(doc.len() + 200);
    out.push('{');
    out.push_str(body);
    if !body.is_empty() {
        out.push(',');
    }
    out.push_str(&format!(
        "\"member\":{},\"joining\":{},\"removed\":{},\"safe_to_stop\":{},\"settled\":{},\"members\":[",
        standing == Standing::Member,
        standing == Standing::Joining,
        standing == Standing::Removed,
        transition.safe_to_stop(),
        settled,
    ));
    for (i, url) in transition.members().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, url);
    }
    out.push_str("]}");
    out
}

/// `body` (a JSON object's fields after its `{`) without the scalar field
/// starting with `name` (true/false; a `members` array up to its `]`).
fn drop_field(body: &str, name: &str) -> String {
    let Some(at) = body.find(name) else {
        return body.to_owned();
    };
    let after = &body[at..];
    let end = if after[name.len()..].starts_with('[') {
        // The `]` outside a string (a URL may hold one: `http://[::1]:80`).
        let mut quoted = false;
        after.char_indices().find_map(|(i, c)| match c {
            '"' => {
                quoted = !quoted;
                None
            }
            ']' if !quoted => Some(i + 1),
            _ => None,
        })
    } else {
        after.find([',', '}'])
    };
    let Some(end) = end else {
        return body.to_owned();
    };
    let mut out = body[..at].to_owned();
    let tail = &after[end..];
    let tail = tail.strip_prefix(',').unwrap_or(tail);
    if out.ends_with(',') && tail.starts_with('}') {
        out.pop();
    }
    out.push_str(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each node given gets its own figures; a member not given stays at 0.
    #[test]
    fn progress_fills_each_nodes_entry() {
        let nodes = vec![
            "http://a:1".to_owned(),
            "http://b:2".to_owned(),
            "http://c:3".to_owned(),
        ];
        let doc = render_json(2, &nodes, &[0, 1, 2], 2, "http://b:2", None);
        let p = |n: u64| crate::antientropy::transfer::CopyProgress {
            version: 2,
            keys_to_copy: 10 * n,
            bytes_to_copy: 100 * n,
            keys_copied: 4 * n,
            bytes_copied: 40 * n,
        };
        let filled = with_progress(
            &doc,
            &[
                ("http://b:2".to_owned(), p(1)),
                ("http://c:3".to_owned(), p(2)),
            ],
        );
        assert!(
            filled.contains("{\"url\":\"http://a:1\",\"keys_to_copy\":0,"),
            "{filled}"
        );
        assert!(
            filled.contains("{\"url\":\"http://b:2\",\"keys_to_copy\":10,\"bytes_to_copy\":100,\"keys_copied\":4,\"bytes_copied\":40}"),
            "{filled}"
        );
        assert!(
            filled.contains("{\"url\":\"http://c:3\",\"keys_to_copy\":20,\"bytes_to_copy\":200,\"keys_copied\":8,\"bytes_copied\":80}"),
            "{filled}"
        );
    }

    fn shared(standing: Standing, settled: bool) -> TransitionShared {
        let t = TransitionShared::new(1);
        let members = vec!["http://a:1".to_owned(), "http://b:2".to_owned()];
        t.set_standing(standing, settled, &members);
        t
    }

    /// A member serves and says `ok`; a joining or removed node refuses
    /// data commands with 503 naming the members, and not the others.
    #[test]
    fn refusals() {
        let get = Command::Get {
            key: b"k".to_vec().into(),
            ack: 1,
            from: 1,
        };
        let m = shared(Standing::Member, true);
        assert!(refusal(&m, &get).is_none());
        assert_eq!(
            status(&m, "http://a:1"),
            Answer::Document(Format::Line, "ok".into())
        );
        for standing in [Standing::Joining, Standing::Removed] {
            let t = shared(standing, true);
            let Some(Answer::Failed(answer::Failure::Busy, why)) = refusal(&t, &get) else {
                panic!("not refused");
            };
            assert!(why.contains("http://a:1, http://b:2"), "{why}");
            assert!(refusal(&t, &Command::Status).is_none());
            assert!(refusal(&t, &Command::Layout).is_none());
        }
    }

    /// The status document; the layout document's own `removed` is replaced.
    #[test]
    fn documents() {
        let t = shared(Standing::Joining, false);
        let Answer::Document(Format::Json, doc) = status(&t, "http://c:3") else {
            panic!("not a document");
        };
        assert_eq!(
            doc,
            "{\"self\":\"http://c:3\",\"member\":false,\"joining\":true,\"removed\":false,\"safe_to_stop\":true,\
             \"settled\":false,\"members\":[\"http://a:1\",\"http://b:2\"]}"
        );
        let r = shared(Standing::Removed, false);
        let doc = standing_json(
            &r,
            Standing::Removed,
            r.settled(),
            "{\"version\":2,\"removed\":true,\"settled\":true}",
        );
        assert_eq!(
            doc,
            "{\"version\":2,\"member\":false,\"joining\":false,\"removed\":true,\"safe_to_stop\":false,\
             \"settled\":false,\"members\":[\"http://a:1\",\"http://b:2\"]}"
        );
        let r = shared(Standing::Removed, true);
        assert!(
            standing_json(&r, Standing::Removed, r.settled(), "{}")
                .contains("\"safe_to_stop\":true")
        );
        assert_eq!(
            drop_field("\"a\":1,\"removed\":false}", "\"removed\":"),
            "\"a\":1}"
        );
    }
}
