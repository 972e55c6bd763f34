#![no_main]
//! Arbitrary bytes as a chunked request body (`node/src/http/chunked.rs`),
//! decoded at once and split at a point the input chooses: nothing may
//! panic, both ways give the same verdict and body, the body never exceeds
//! the limit, and a complete body never claims bytes it was not given.

use ataman_node::http::chunked::{ChunkedError, Decoder, decode_all};

const LIMIT_BYTES: u64 = 4096;

fn split(data: &[u8], cut: usize) -> Result<Option<(Vec<u8>, usize)>, ChunkedError> {
    let mut decoder = Decoder::new(LIMIT_BYTES);
    let mut body = Vec::new();
    let first = decoder.feed(&data[..cut], &mut body)?;
    if decoder.is_done() {
        return Ok(Some((body, first)));
    }
    assert_eq!(first, cut, "an unfinished decoder consumes all it is given");
    let second = decoder.feed(&data[cut..], &mut body)?;
    Ok(decoder.is_done().then_some((body, first + second)))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else {
        return;
    };
    let whole = decode_all(data, LIMIT_BYTES);
    let cut = usize::from(cut).min(data.len());
    assert_eq!(whole, split(data, cut));
    if let Ok(Some((body, used))) = whole {
        assert!(body.len() as u64 <= LIMIT_BYTES);
        assert!(used <= data.len());
    }
});
