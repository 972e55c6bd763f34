#![no_main]
//! Arbitrary bytes as an HTTP request head, then routed; and as a query string.
//! Nothing may panic, and a parsed head never claims bytes it was not given.

use ataman_node::api::{RouteConfig, route};
use ataman_node::http::query::{parse_query, percent_decode};
use ataman_node::http::request::{Limits, Parsed, parse_head};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        header_bytes_max: 4096,
        body_bytes_max: 1 << 20,
    };
    if let Parsed::Head(head) = parse_head(data, limits) {
        assert!(head.head_bytes <= data.len());
        assert!(head.content_length <= limits.body_bytes_max);
        let cfg = RouteConfig {
            key_bytes_max: 64,
            cluster_size: 3,
            from_default: 3,
        };
        let _ = route(&head, cfg);
    }
    let _ = parse_query(data);
    let _ = percent_decode(data);
});
