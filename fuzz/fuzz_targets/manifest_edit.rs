//! Fuzzes the manifest edit decoder and `ManifestState::apply`.
//!
//! Arbitrary bytes go to `VersionEdit::decode`; whatever decodes is
//! re-encoded (must round-trip) and applied twice to a state (a failed
//! apply must leave the state unchanged), and the state's snapshot edit must
//! rebuild it. Nothing may panic.
#![no_main]

use ataman_engine::manifest::{ManifestState, VersionEdit};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(edit) = VersionEdit::decode(data) else {
        return;
    };
    let mut again = Vec::new();
    edit.encode(&mut again);
    assert_eq!(VersionEdit::decode(&again).as_ref(), Ok(&edit));

    let mut state = ManifestState::default();
    for _ in 0..2 {
        let before = state.clone();
        if state.apply(&edit).is_err() {
            assert_eq!(state, before);
        }
    }
    let mut rebuilt = ManifestState::default();
    assert!(rebuilt.apply(&state.snapshot_edit()).is_ok());
    assert_eq!(rebuilt, state);
});
