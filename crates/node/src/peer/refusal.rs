//! Which versions a node accepts from a peer: the same rule for a peer's
//! write (the peer protocol) and for anti-entropy's fetch and push.

use crate::peer::frame::Stamped;

/// Why a version received from a peer (a write, or anti-entropy's fetch or
/// push) is refused, if it is: the node's key and value limits, and a
/// timestamp too far ahead of this node's clock.
pub fn refuse_version(
    config: &crate::config::NodeConfig,
    key: &[u8],
    version: &Stamped,
) -> Option<String> {
    if key.is_empty() || key.len() > config.key_bytes_max {
        return Some(format!(
            "key of {} bytes outside 1..={}",
            key.len(),
            config.key_bytes_max
        ));
    }
    if let Some(v) = &version.value
        && v.len() > config.value_bytes_max
    {
        return Some(format!(
            "value of {} bytes over {}",
            v.len(),
            config.value_bytes_max
        ));
    }
    if !crate::hlc::acceptable_from_peer(version.ts) {
        return Some(format!(
            "timestamp {} is more than {} ms ahead of this node's clock",
            version.ts,
            crate::hlc::PEER_CLOCK_AHEAD_MS_MAX
        ));
    }
    None
}
