//! `ataman ctl layout show|plan|apply|wait`: the cluster's layout
//! (docs/API.md "Layout", docs/CTL.md).
//!
//! - `show`: the layout a node runs with (`GET /v0/layout`), as text:
//!
//!   ```text
//!   layout version 1, replication factor 3, settled
//!   http://127.0.0.1:19401 (node id 0)
//!   http://127.0.0.1:19402 (node id 1, this node)
//!   http://127.0.0.1:19403 (node id 2)
//!   ```
//! - `plan`: what a change would move, without changing anything: every
//!   member answers `GET /v0/layout/plan?…` with what it would send to
//!   each gaining node (each key once, from its first old replica); the
//!   sums per node are printed ([`plan_text`]).
//! - `apply`: `POST /v0/layout?version=N&…`; prints the layout chosen.
//! - `wait`: polls `GET /v0/layout` until it is settled, printing each
//!   change of progress ([`progress_line`]).

use std::collections::BTreeMap;

/// One `ataman ctl layout` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum LayoutCommand {
    /// Print the layout the node runs with: version, replication factor,
    /// whether it is settled, the members.
    Show,
    /// Print the keys and bytes each node would send and receive for a
    /// change, without changing anything.
    Plan {
        #[command(flatten)]
        change: ChangeArgs,
    },
    /// Commit a change as layout version --version (the current one + 1).
    Apply {
        #[command(flatten)]
        change: ChangeArgs,
        /// The version the change becomes: the current version + 1.
        #[arg(long)]
        version: u64,
    },
    /// Wait until the layout is settled (no transition, nothing to move),
    /// printing progress; bounded by --timeout-ms [default: 600000].
    Wait,
}

/// A change as `plan` and `apply` name it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ChangeArgs {
    /// A node to add (its URL); repeatable.
    #[arg(long)]
    pub add: Vec<String>,
    /// A member to remove (its URL); repeatable.
    #[arg(long)]
    pub remove: Vec<String>,
    /// A new replication factor.
    #[arg(long)]
    pub replication_factor: Option<u64>,
    /// A node whose data is lost for good (its URL), removed by this change
    /// (with --remove) or by the transition under way (alone, with that
    /// transition's --version): copies skip it; repeatable. Without it a
    /// leaving node that does not answer holds the transition.
    #[arg(long)]
    pub dead: Vec<String>,
}

impl ChangeArgs {
    /// The query parameters naming the change (after any `version`).
    pub fn query(&self) -> Vec<(&'static str, Vec<u8>)> {
        let mut q = Vec::new();
        for url in &self.add {
            q.push(("add", url.as_bytes().to_vec()));
        }
        for url in &self.remove {
            q.push(("remove", url.as_bytes().to_vec()));
        }
        if let Some(r) = self.replication_factor {
            q.push(("replication_factor", r.to_string().into_bytes()));
        }
        for url in &self.dead {
            q.push(("dead", url.as_bytes().to_vec()));
        }
        q
    }

    /// True when the change names nothing.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty() && self.replication_factor.is_none()
    }
}

/// The text of a `GET /v0/layout` document, or why it is not one.
pub fn show_text(doc: &serde_json::Value) -> Result<String, String> {
    let field = |name: &str| doc.get(name).ok_or(format!("no \"{name}\""));
    let version = field("version")?
        .as_u64()
        .ok_or("\"version\" is not an integer")?;
    let r = field("replication_factor")?
        .as_u64()
        .ok_or("\"replication_factor\" is not an integer")?;
    // `POST /v0/layout`'s answer is the layout alone, without it.
    let state = match doc.get("settled") {
        None => "",
        Some(v) => match v.as_bool().ok_or("\"settled\" is not a boolean")? {
            true => ", settled",
            false => ", moving",
        },
    };
    let me = doc.get("self").and_then(|s| s.as_str()).unwrap_or("");
    let removed = doc.get("removed").and_then(|s| s.as_bool()) == Some(true);
    let mut out = format!(
        "layout version {version}, replication factor {r}{state}{}\n",
        if removed {
            ", this node is not a member"
        } else {
            ""
        }
    );
    let ids = doc.get("node_ids");
    for url in members(doc)? {
        out.push_str(&url);
        let mut notes = Vec::new();
        if let Some(id) = ids.and_then(|m| m.get(&url)).and_then(|v| v.as_u64()) {
            notes.push(format!("node id {id}"));
        }
        if url == me {
            notes.push("this node".to_owned());
        }
        if !notes.is_empty() {
            out.push_str(&format!(" ({})", notes.join(", ")));
        }
        out.push('\n');
    }
    for wait in doc
        .get("waiting_for")
        .and_then(|w| w.as_array())
        .into_iter()
        .flatten()
    {
        let node = wait.get("node").and_then(|n| n.as_str()).unwrap_or("?");
        let reason = wait.get("reason").and_then(|r| r.as_str()).unwrap_or("?");
        out.push_str(&format!("waiting for {node}: {reason}\n"));
    }
    Ok(out)
}

/// The member URLs of a `GET /v0/layout` document.
pub fn members(doc: &serde_json::Value) -> Result<Vec<String>, String> {
    doc.get("nodes")
        .ok_or("no \"nodes\"")?
        .as_array()
        .ok_or("\"nodes\" is not an array")?
        .iter()
        .map(|n| {
            n.as_str()
                .map(str::to_owned)
                .ok_or_else(|| "a node is not a string".to_owned())
        })
        .collect()
}

/// Keys and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Volume {
    /// Keys.
    pub keys: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Per node: what it sends and what it receives.
pub type PlanTotals = BTreeMap<String, (Volume, Volume)>;

/// Adds node `from`'s plan answer (`{"version": N, "sends": {"URL":
/// {"keys": K, "bytes": B}, …}}`, docs/API.md "Layout") to `totals`.
pub fn add_plan(
    totals: &mut PlanTotals,
    from: &str,
    doc: &serde_json::Value,
) -> Result<(), String> {
    let sends = doc
        .get("sends")
        .and_then(|s| s.as_object())
        .ok_or("a plan without a \"sends\" object")?;
    for (to, send) in sends {
        let number = |name: &str| {
            send.get(name)
                .and_then(|v| v.as_u64())
                .ok_or(format!("a send without an integer \"{name}\""))
        };
        let v = Volume {
            keys: number("keys")?,
            bytes: number("bytes")?,
        };
        let sender = &mut totals.entry(from.to_owned()).or_default().0;
        sender.keys += v.keys;
        sender.bytes += v.bytes;
        let receiver = &mut totals.entry(to.clone()).or_default().1;
        receiver.keys += v.keys;
        receiver.bytes += v.bytes;
    }
    totals.entry(from.to_owned()).or_default();
    Ok(())
}

/// The plan as a table: one line per node, then the total moved.
pub fn plan_text(totals: &PlanTotals) -> String {
    let mut out = String::from("node\tsend_keys\tsend_bytes\treceive_keys\treceive_bytes\n");
    let mut moved = Volume::default();
    for (url, (send, receive)) in totals {
        out.push_str(&format!(
            "{url}\t{}\t{}\t{}\t{}\n",
            send.keys, send.bytes, receive.keys, receive.bytes
        ));
        moved.keys += receive.keys;
        moved.bytes += receive.bytes;
    }
    out.push_str(&format!(
        "total\t{}\t{}\t{}\t{}\n",
        moved.keys, moved.bytes, moved.keys, moved.bytes
    ));
    out
}

/// One line of `wait`'s progress from the `GET /v0/layout` documents of
/// every member (the first one's version): settled when every one is,
/// and the copy figures each node gives for itself (its own entry of
/// `moving`), summed.
pub fn progress_line(docs: &[serde_json::Value]) -> Result<(String, bool), String> {
    let first = docs.first().ok_or("no layout document")?;
    let version = first
        .get("version")
        .and_then(|v| v.as_u64())
        .ok_or("no integer \"version\"")?;
    let mut settled = true;
    let mut sum = [0u64; 4];
    let names = [
        "keys_to_copy",
        "keys_copied",
        "bytes_to_copy",
        "bytes_copied",
    ];
    for doc in docs {
        settled &= doc
            .get("settled")
            .and_then(|v| v.as_bool())
            .ok_or("no boolean \"settled\"")?;
        let me = doc.get("self").and_then(|s| s.as_str()).unwrap_or("");
        let own = doc.get("moving").and_then(|m| m.as_array()).and_then(|a| {
            a.iter()
                .find(|e| e.get("url").and_then(|u| u.as_str()) == Some(me))
        });
        if let Some(entry) = own {
            for (total, name) in sum.iter_mut().zip(names) {
                *total += entry.get(name).and_then(|v| v.as_u64()).unwrap_or(0);
            }
        }
    }
    let state = if settled { "settled" } else { "moving" };
    Ok((
        format!(
            "layout version {version}: {state}, keys copied {}/{}, bytes copied {}/{}\n",
            sum[1], sum[0], sum[3], sum[2]
        ),
        settled,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's fields become the text; a malformed one is an error.
    #[test]
    fn show_lines() {
        let doc = serde_json::json!({
            "version": 2, "nodes": ["http://a:1", "http://b:2"], "replication_factor": 2,
            "self": "http://b:2", "removed": false, "settled": true, "moving": []
        });
        assert_eq!(
            show_text(&doc).unwrap(),
            "layout version 2, replication factor 2, settled\nhttp://a:1\nhttp://b:2 (this node)\n"
        );
        // With the members' node ids (`GET /v0/layout` has them).
        let mut with_ids = doc.clone();
        with_ids["node_ids"] = serde_json::json!({"http://a:1": 3, "http://b:2": 0});
        assert_eq!(
            show_text(&with_ids).unwrap(),
            "layout version 2, replication factor 2, settled\nhttp://a:1 (node id 3)\nhttp://b:2 (node id 0, this node)\n"
        );
        assert!(show_text(&serde_json::json!({"version": "x"})).is_err());
        let waiting = serde_json::json!({
            "version": 3, "nodes": ["http://a:1"], "replication_factor": 1, "settled": false,
            "waiting_for": [{"node": "http://c:3", "reason": "copy source not answering"}]
        });
        assert!(
            show_text(&waiting)
                .unwrap()
                .ends_with("http://a:1\nwaiting for http://c:3: copy source not answering\n")
        );
    }

    /// Sends add up per sender and per receiver; a node that sends nothing
    /// still has its line; the total counts each key once.
    #[test]
    fn plan_sums() {
        let mut totals = PlanTotals::new();
        let a =
            serde_json::json!({"version": 2, "sends": {"http://d:4": {"keys": 3, "bytes": 300}}});
        let b =
            serde_json::json!({"version": 2, "sends": {"http://d:4": {"keys": 2, "bytes": 50}}});
        let c = serde_json::json!({"version": 2, "sends": {}});
        for (from, doc) in [("http://a:1", &a), ("http://b:2", &b), ("http://c:3", &c)] {
            add_plan(&mut totals, from, doc).unwrap();
        }
        assert_eq!(
            plan_text(&totals),
            "node\tsend_keys\tsend_bytes\treceive_keys\treceive_bytes\n\
             http://a:1\t3\t300\t0\t0\n\
             http://b:2\t2\t50\t0\t0\n\
             http://c:3\t0\t0\t0\t0\n\
             http://d:4\t0\t0\t5\t350\n\
             total\t5\t350\t5\t350\n"
        );
        let bad = serde_json::json!({"sends": {"y": {"keys": -1, "bytes": 1}}});
        assert!(add_plan(&mut totals, "x", &bad).is_err());
    }

    /// Progress sums each node's own figures (not what it says of the
    /// others); settled only when every node is.
    #[test]
    fn progress() {
        let entry = |url: &str, k: u64| {
            serde_json::json!({"url": url, "keys_to_copy": k, "keys_copied": k / 2,
                "bytes_to_copy": k * 10, "bytes_copied": k * 5})
        };
        let a = serde_json::json!({"version": 3, "settled": true, "self": "a",
            "moving": [entry("a", 10), entry("b", 99)]});
        let b = serde_json::json!({"version": 3, "settled": false, "self": "b",
            "moving": [entry("a", 99), entry("b", 4)]});
        let (line, settled) = progress_line(&[a.clone(), b]).unwrap();
        assert_eq!(
            line,
            "layout version 3: moving, keys copied 7/14, bytes copied 70/140\n"
        );
        assert!(!settled);
        assert!(progress_line(&[a]).unwrap().1);
        assert!(progress_line(&[serde_json::json!({"version": 3})]).is_err());
    }

    /// The change's query names every part, in order.
    #[test]
    fn change_query() {
        let c = ChangeArgs {
            add: vec!["http://d:4".into()],
            remove: vec!["http://a:1".into()],
            replication_factor: Some(2),
            dead: vec!["http://a:1".into()],
        };
        let q: Vec<(&str, String)> = c
            .query()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v).unwrap()))
            .collect();
        assert_eq!(
            q,
            vec![
                ("add", "http://d:4".to_owned()),
                ("remove", "http://a:1".to_owned()),
                ("replication_factor", "2".to_owned()),
                ("dead", "http://a:1".to_owned())
            ]
        );
        assert!(ChangeArgs::default().is_empty() && !c.is_empty());
    }
}
