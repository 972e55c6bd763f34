//! `ataman ctl layout show`: the layout a node runs with
//! (`GET /v0/layout`, docs/API.md "Layout"), as text.
//!
//! ```text
//! layout version 1, replication factor 3, settled
//! http://127.0.0.1:19401
//! http://127.0.0.1:19402 (this node)
//! http://127.0.0.1:19403
//! ```

/// One `ataman ctl layout` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum LayoutCommand {
    /// Print the layout the node runs with: version, replication factor,
    /// whether it is settled, the members.
    Show,
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
    let settled = field("settled")?
        .as_bool()
        .ok_or("\"settled\" is not a boolean")?;
    let me = doc.get("self").and_then(|s| s.as_str()).unwrap_or("");
    let removed = doc.get("removed").and_then(|s| s.as_bool()) == Some(true);
    let mut out = format!(
        "layout version {version}, replication factor {r}, {}{}\n",
        if settled { "settled" } else { "moving" },
        if removed {
            ", this node is not a member"
        } else {
            ""
        }
    );
    for node in field("nodes")?
        .as_array()
        .ok_or("\"nodes\" is not an array")?
    {
        let url = node.as_str().ok_or("a node is not a string")?;
        out.push_str(url);
        if url == me {
            out.push_str(" (this node)");
        }
        out.push('\n');
    }
    Ok(out)
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
        assert!(show_text(&serde_json::json!({"version": "x"})).is_err());
    }
}
