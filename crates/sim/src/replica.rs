//! A simulated node serving its peers, as the real peer server does
//! (`ataman_node::net::peer_conn`): a write stamped too far ahead of the
//! node's clock is refused, otherwise its timestamp is observed by the
//! node's clock and the write is made durable before the answer, unless
//! the node holds a newer version (then it answers with that version's
//! timestamp and the coordinator re-stamps); a read
//! answers the newest version. Versions an anti-entropy round brings are
//! applied as the real node applies them (`antientropy::local::apply`).

use crate::network::Answer;
use crate::node::SimNode;
use ataman_node::hlc;
use ataman_node::peer::frame::Stamped;
use ataman_node::replication::driver::PeerRequest;

impl SimNode {
    /// Serves a peer's request at virtual time `now_ms`.
    /// With `refuse_older` false (the planted bug `NoRestamp`) an older
    /// write is stored like any other.
    pub fn serve(&mut self, now_ms: u64, request: &PeerRequest, refuse_older: bool) -> Answer {
        match request {
            PeerRequest::Write { key, version } => {
                if !hlc::acceptable_from_peer_at(version.ts, self.wall_ms(now_ms)) {
                    return Answer::Failed(format!(
                        "timestamp {} is more than {} ms ahead of this node's clock",
                        version.ts,
                        hlc::PEER_CLOCK_AHEAD_MS_MAX
                    ));
                }
                self.hlc.observe(version.ts);
                match self.read(key) {
                    // The node's rule (net/peer_conn.rs): the one tie rule.
                    Ok(Some(held)) if refuse_older && held.newer_than(version) => {
                        return Answer::HoldsNewer(held.ts);
                    }
                    Ok(_) => {}
                    Err(e) => return Answer::Failed(format!("read before write failed: {e}")),
                }
                match self.write(key, version) {
                    Ok(()) => Answer::Written,
                    Err(e) => Answer::Failed(e),
                }
            }
            PeerRequest::Read { key } => match self.read(key) {
                Ok(v) => Answer::Read(v),
                Err(e) => Answer::Failed(format!("read failed: {e}")),
            },
        }
    }

    /// Applies versions an anti-entropy round brought, at virtual time
    /// `now_ms`: a timestamp too far ahead of this node's clock is left
    /// out, the clock observes the newest of the rest, and they are written
    /// durably in one batch. Returns the `(key, ts)` applied.
    pub fn apply_versions(
        &mut self,
        now_ms: u64,
        items: Vec<(Vec<u8>, Stamped)>,
    ) -> Result<Vec<(Vec<u8>, u64)>, String> {
        let wall_ms = self.wall_ms(now_ms);
        let accepted: Vec<(Vec<u8>, Stamped)> = items
            .into_iter()
            .filter(|(_, v)| hlc::acceptable_from_peer_at(v.ts, wall_ms))
            .collect();
        let Some(ts_max) = accepted.iter().map(|(_, v)| v.ts).max() else {
            return Ok(Vec::new());
        };
        self.hlc.observe(ts_max);
        self.write_all(accepted.iter().map(|(k, v)| (k.as_slice(), v)))?;
        Ok(accepted.into_iter().map(|(k, v)| (k, v.ts)).collect())
    }
}
