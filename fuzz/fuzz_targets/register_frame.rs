#![no_main]
//! Arbitrary bytes as register frames (the consensus register's Prepare,
//! Accept, Commit, Release and their answers). Nothing may panic, a
//! decoded frame never claims bytes it was not given, and every decoded
//! message encodes back to exactly the bytes it was decoded from.
//!
//! Two readings of the input, as in `peer_frame`: a stream of frames, and
//! one body behind a correct header (so the body decoder is exercised
//! although random bytes almost never carry a matching checksum).

use ataman_node::peer::framing::FRAME_HEADER_BYTES;
use ataman_node::replication::register::wire::{
    REGISTER_BODY_BYTES_MAX, RegisterMessage, decode, encode,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((msg, consumed))) = decode(rest) {
        assert!(consumed >= FRAME_HEADER_BYTES && consumed <= rest.len());
        check_reencodes(&msg, &rest[..consumed]);
        rest = &rest[consumed..];
    }

    if data.len() <= REGISTER_BODY_BYTES_MAX {
        let mut framed = Vec::with_capacity(FRAME_HEADER_BYTES + data.len());
        framed.extend_from_slice(&(data.len() as u32).to_le_bytes());
        framed.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
        framed.extend_from_slice(data);
        match decode(&framed) {
            Ok(Some((msg, consumed))) => {
                assert_eq!(consumed, framed.len());
                check_reencodes(&msg, &framed);
            }
            Ok(None) => panic!("a complete frame read as incomplete"),
            Err(_) => {}
        }
    }
});

fn check_reencodes(msg: &RegisterMessage, bytes: &[u8]) {
    let mut encoded = Vec::new();
    encode(msg, &mut encoded);
    assert_eq!(encoded, bytes, "{msg:?} re-encodes differently");
}
