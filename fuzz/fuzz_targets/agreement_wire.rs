#![no_main]
//! Arbitrary bytes as the layout agreement's messages (requests and
//! replies, gossip included) and as a layout on its own (`LAYOUT`, both
//! formats: node ids and retired ids included). Nothing may panic, and a
//! decoded message or layout encodes to bytes that decode to it again.
//!
//! Two readings of the input: as it is, and with a correct crc32c
//! appended, so the decoders past the checksum are exercised even though
//! random bytes almost never carry a matching one.

use ataman_node::cluster::agreement_wire::{Reply, Request};
use ataman_node::cluster::layout::Layout;

fn check(bytes: &[u8]) {
    if let Ok(q) = Request::decode(bytes) {
        assert_eq!(Request::decode(&q.encode()), Ok(q));
    }
    if let Ok(a) = Reply::decode(bytes) {
        assert_eq!(Reply::decode(&a.encode()), Ok(a));
    }
    if let Ok(l) = Layout::decode(bytes) {
        assert_eq!(Layout::decode(&l.encode()), Ok(l));
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check(data);
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    check(&sealed);
});
