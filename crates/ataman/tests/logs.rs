//! The node's log on a real process (docs/API.md "Logs"): `--log-format
//! json` writes one JSON object a line with the event's fields, and
//! `--log-level` drops what is less severe.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::Node;

/// Every line of `log` as a JSON object; panics, naming the line, on one
/// that is not an object with the keys each event has.
fn json_events(log: &str) -> Vec<serde_json::Map<String, Value>> {
    log.lines()
        .map(|line| {
            let Ok(Value::Object(event)) = serde_json::from_str::<Value>(line) else {
                panic!("a log line is not a JSON object: {line:?}\nwhole log:\n{log}");
            };
            for key in ["timestamp", "level", "target", "message"] {
                assert!(
                    event.get(key).is_some_and(Value::is_string),
                    "no string {key:?} in {line:?}"
                );
            }
            event
        })
        .collect()
}

/// The one event whose message is `message`.
fn event<'a>(
    events: &'a [serde_json::Map<String, Value>],
    message: &str,
) -> &'a serde_json::Map<String, Value> {
    let mut found = events.iter().filter(|e| e["message"] == message);
    let first = found
        .next()
        .unwrap_or_else(|| panic!("no {message:?} event in {events:?}"));
    assert!(found.next().is_none(), "{message:?} logged twice");
    first
}

/// From start to stop every stderr line is a JSON event, and the start-up
/// events carry the data directory and the bound address as fields.
#[test]
fn json_lines_with_fields() {
    let mut node = Node::start_logged(&["--log-format", "json"]);
    assert_eq!(node.put(b"k", b"v").status, 201);
    assert!(node.terminate().success());
    let log = node.log();
    let events = json_events(&log);
    let opened = event(&events, "opened the data directory");
    assert_eq!(opened["level"], "INFO");
    assert_eq!(
        opened["data_dir"],
        node.data_dir().display().to_string().as_str()
    );
    assert!(opened["wal_records_replayed"].is_u64(), "{opened:?}");
    let listening = event(&events, "listening for HTTP requests");
    assert_eq!(listening["addr"], node.addr().to_string().as_str());
    assert_eq!(listening["target"], "ataman_node");
    let last = events.last().unwrap();
    assert_eq!(last["message"], "stopped", "{log}");
}

/// At the default level the start-up events are logged, as text; the same
/// node restarted with `--log-level warn` logs none of them (they are info).
#[test]
fn warn_level_drops_info_events() {
    let mut node = Node::start_logged(&[]);
    assert!(node.terminate().success());
    let info = node.log();
    let listening = info
        .lines()
        .find(|l| l.contains("listening for HTTP requests"))
        .unwrap_or_else(|| panic!("no listening event at info: {info}"));
    assert!(listening.contains(" INFO "), "{listening}");
    assert!(
        listening.ends_with(&format!("addr={}", node.addr())),
        "{listening}"
    );
    assert!(info.contains("opened the data directory"), "{info}");
    assert!(
        serde_json::from_str::<Value>(info.lines().next().unwrap()).is_err(),
        "text is the default format: {info}"
    );
    node.restart_with(&["--log-level", "warn"]);
    assert_eq!(node.put(b"k", b"v").status, 201);
    assert!(node.terminate().success());
    let log = node.log();
    let quiet = &log[info.len()..];
    for line in quiet.lines() {
        assert!(
            line.contains(" WARN ") || line.contains(" ERROR "),
            "a line below warn at --log-level warn: {line:?}"
        );
    }
    assert!(!quiet.contains("opened the data directory"), "{quiet}");
    assert!(!quiet.contains("listening for HTTP requests"), "{quiet}");
}
