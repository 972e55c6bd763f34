//! The planted copy bug `copy-skips-keys` (`--debug-planted-bug`,
//! docs/RELIABILITY.md "Negative controls"): a transition copy leaves out
//! some keys, as a copy with an off-by-one at a page boundary would.
//!
//! # Rules
//! - **Which keys.** A key is skipped when a hash of its bytes (FNV-1a,
//!   64 bits) is a multiple of [`SKIP_ONE_IN`]: the same keys on every
//!   source and in both passes (`one_pass`'s ingest and `pull`'s apply),
//!   so a key skipped from one source is not brought by another.
//! - **Only when planted.** [`skips`] is false unless the node was started
//!   with the bug; a build without the `planted-bugs` feature never is.

use crate::config::PlantedBug;

/// One key in this many is left out by the planted copy: coarse, so the
/// harness's `leavecut` profile (some hundred keys copied, one in ten
/// with both old replicas leaving) loses several in every run.
pub const SKIP_ONE_IN: u64 = 4;

/// FNV-1a over `key` (a stable hash: the same on every node and run).
fn fnv1a(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// True when the planted bug `bug` makes the copy leave `key` out.
pub fn skips(bug: Option<PlantedBug>, key: &[u8]) -> bool {
    bug == Some(PlantedBug::CopySkipsKeys) && fnv1a(key).is_multiple_of(SKIP_ONE_IN)
}

/// `versions` without the keys the planted bug skips (all of them when
/// it is off).
pub fn keep<V>(bug: Option<PlantedBug>, versions: &mut Vec<(Vec<u8>, V)>) {
    if bug == Some(PlantedBug::CopySkipsKeys) {
        versions.retain(|(key, _)| !skips(bug, key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the bug nothing is skipped; with it about one key in
    /// [`SKIP_ONE_IN`] is, the same keys every time.
    #[test]
    fn skips_one_key_in_four_only_when_planted() {
        let keys: Vec<Vec<u8>> = (0..10_000).map(|i| format!("s{i}").into_bytes()).collect();
        assert!(keys.iter().all(|k| !skips(None, k)));
        let bug = Some(PlantedBug::CopySkipsKeys);
        let skipped = keys.iter().filter(|k| skips(bug, k)).count();
        assert!((2_000..=3_000).contains(&skipped), "{skipped}");
        let mut versions: Vec<(Vec<u8>, ())> = keys.iter().map(|k| (k.clone(), ())).collect();
        keep(None, &mut versions);
        assert_eq!(versions.len(), keys.len());
        keep(bug, &mut versions);
        assert_eq!(versions.len(), keys.len() - skipped);
        assert!(versions.iter().all(|(k, _)| !skips(bug, k)));
    }
}
