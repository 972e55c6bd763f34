#![no_main]
//! Arbitrary bytes as sync frames (anti-entropy sessions). Nothing may
//! panic, a decoded frame never claims bytes it was not given, and every
//! decoded message encodes back to exactly the bytes it was decoded from.
//!
//! Two readings of the input: as a stream of frames, decoded frame after
//! frame until an error or an incomplete frame; and as one frame body
//! behind a correct header (length and CRC32C computed here), so the body
//! decoder is exercised even though random bytes almost never carry a
//! matching checksum. A third reading puts the input, with its CRC32C
//! appended, as both layouts of a `Transition` frame (kind 13), so the
//! layout decoder behind it is reached past the layout's own checksum.

use ataman_node::antientropy::wire::{FRAME_BODY_BYTES_MAX, Message, decode, encode};
use ataman_node::cluster::layout::LAYOUT_BYTES_MAX;
use ataman_node::peer::framing::FRAME_HEADER_BYTES;

/// The kind byte of a Transition frame (docs/FORMAT.md, "Sync frame").
const KIND_TRANSITION: u8 = 13;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((msg, consumed))) = decode(rest) {
        assert!(consumed >= FRAME_HEADER_BYTES && consumed <= rest.len());
        check_reencodes(&msg, &rest[..consumed]);
        rest = &rest[consumed..];
    }

    if data.len() <= FRAME_BODY_BYTES_MAX {
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

    if data.len() + 4 <= LAYOUT_BYTES_MAX {
        let mut layout = data.to_vec();
        layout.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
        let mut body = vec![KIND_TRANSITION];
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&12u32.to_le_bytes());
        for _ in 0..2 {
            body.extend_from_slice(&(layout.len() as u32).to_le_bytes());
            body.extend_from_slice(&layout);
        }
        let mut framed = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
        framed.extend_from_slice(&(body.len() as u32).to_le_bytes());
        framed.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        framed.extend_from_slice(&body);
        if let Ok(Some((msg, consumed))) = decode(&framed) {
            assert_eq!(consumed, framed.len());
            check_reencodes(&msg, &framed);
        }
    }
});

fn check_reencodes(msg: &Message, bytes: &[u8]) {
    let mut encoded = Vec::new();
    encode(msg, &mut encoded);
    assert_eq!(encoded, bytes, "{msg:?} re-encodes differently");
}
