#![no_main]
//! Arbitrary bytes as a RESP request stream: decoded command after command,
//! each planned by the command table and its replies encoded. Nothing may
//! panic, and a command never claims bytes it was not given.

use ataman_node::net::resp::decode::{Decoded, Limits, decode};
use ataman_node::net::resp::encode::encode;
use ataman_node::net::resp::table::{self, Plan, Session};

/// Commands decoded per input, at most.
const COMMANDS_MAX: usize = 256;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The first byte picks the bounds before AUTH or after.
    let (limits, data) = match data.split_first() {
        Some((&mode, rest)) if mode & 1 == 1 => (Limits::UNAUTHENTICATED, rest),
        Some((_, rest)) => (Limits::authenticated(1024), rest),
        None => return,
    };
    let table_limits = table::Limits {
        key_bytes_max: 64,
        value_bytes_max: 1024,
        cluster_size: 3,
        from_default: 3,
    };
    let mut session = Session::new(1);
    let mut at = 0;
    let mut out = Vec::new();
    for _ in 0..COMMANDS_MAX {
        match decode(&data[at..], limits) {
            Ok(Decoded::Command(request)) => {
                assert!(request.consumed > 0 && request.consumed <= data.len() - at);
                assert!(!request.args.is_empty());
                at += request.consumed;
                match table::plan(&request.args, &mut session, table_limits).1 {
                    Plan::Reply(reply) | Plan::Close(reply) => {
                        out.clear();
                        encode(&mut out, &reply, session.proto);
                    }
                    Plan::Keys(_, commands) => assert!(!commands.is_empty()),
                    Plan::ReadThen(_, chain) => assert!(!chain.key.is_empty()),
                    Plan::Node(_) => {}
                    // A read-modify-write (or a transaction's EXEC) names
                    // its one key, and a transaction holds at most the
                    // queue's bound of steps.
                    Plan::Rmw(_, update) => {
                        assert!(!update.key.is_empty());
                        assert!(update.steps.len() <= ataman_node::net::resp::multi::TX_QUEUED_MAX);
                    }
                    // A watch names its one key, checked like any key.
                    Plan::Watch(key, _, _) => assert!(!key.is_empty()),
                    Plan::Scan(scan) => assert!(scan.count > 0),
                    // A slow-log operation never changes more than the
                    // ring allows.
                    Plan::Slowlog(_, op) => {
                        if let ataman_node::slowlog::Op::Set {
                            len_max: Some(n), ..
                        } = op
                        {
                            assert!(n <= ataman_node::slowlog::LEN_MAX);
                        }
                    }
                }
            }
            Ok(Decoded::Skip(n)) => {
                assert!(n > 0 && n <= data.len() - at);
                at += n;
            }
            Ok(Decoded::Partial) | Err(_) => break,
        }
    }
});
