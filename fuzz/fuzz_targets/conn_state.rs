#![no_main]
//! Arbitrary bytes as a client's session with the real connection state
//! machine (`ataman_node::net::conn::Conn`, through
//! `net::conn_driver`): the first byte picks HTTP or RESP and a node with
//! or without client tokens; the rest is a script of sends (split where
//! the fuzzer likes, `@T` standing for a valid token), engine answers to
//! the writes pending (ok or failed), timeouts and shutdowns. Nothing may
//! panic.

use ataman_node::net::conn_driver::{TestNode, play, script_of};
use std::sync::OnceLock;

/// One node without tokens and one with, for the whole run.
static NODES: OnceLock<[TestNode; 2]> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let nodes = NODES.get_or_init(|| {
        let start = |tokens| TestNode::start(tokens).expect("a test node starts");
        [start(false), start(true)]
    });
    let resp = mode & 1 == 1;
    let node = &nodes[usize::from(mode & 2 == 2)];
    play(node, resp, &script_of(rest)).expect("a connection opens");
});
