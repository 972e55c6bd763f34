#![no_main]
//! Arbitrary bytes as a stream of peer frames, decoded frame after frame
//! until an error or an incomplete frame. Nothing may panic, a decoded
//! frame never claims bytes it was not given, and every decoded message
//! encodes back to exactly the bytes it was decoded from.

use ataman_node::peer::frame::{FRAME_HEADER_BYTES, decode, encode};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let mut encoded = Vec::new();
    while let Ok(Some((msg, consumed))) = decode(rest) {
        assert!(consumed >= FRAME_HEADER_BYTES && consumed <= rest.len());
        encoded.clear();
        encode(&msg, &mut encoded);
        assert_eq!(encoded, &rest[..consumed], "{msg:?} re-encodes differently");
        rest = &rest[consumed..];
    }
});
