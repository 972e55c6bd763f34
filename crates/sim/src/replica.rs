//! A simulated node serving its peers, as the real peer server does
//! (`ataman_node::peer::server`): a write stamped too far ahead of the
//! node's clock is refused, otherwise its timestamp is observed by the
//! node's clock and the write is made durable before the answer; a read
//! answers the newest version.

use crate::network::{Answer, Request};
use crate::node::SimNode;
use ataman_node::hlc;

impl SimNode {
    /// Serves a peer's request at virtual time `now_ms`.
    pub fn serve(&mut self, now_ms: u64, request: &Request) -> Answer {
        match request {
            Request::Write { key, version } => {
                if !hlc::acceptable_from_peer_at(version.ts, self.wall_ms(now_ms)) {
                    return Answer::Failed(format!(
                        "timestamp {} is more than {} ms ahead of this node's clock",
                        version.ts,
                        hlc::PEER_CLOCK_AHEAD_MS_MAX
                    ));
                }
                self.hlc.observe(version.ts);
                match self.write(key, version) {
                    Ok(()) => Answer::Written,
                    Err(e) => Answer::Failed(e),
                }
            }
            Request::Read { key } => match self.read(key) {
                Ok(v) => Answer::Read(v),
                Err(e) => Answer::Failed(format!("read failed: {e}")),
            },
        }
    }
}
