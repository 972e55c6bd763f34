//! A simulated node coordinating replicated requests, as the real node's
//! `replication::Replicator` does, with the real rules
//! (`ataman_node::replication::coordinator::Coordination`):
//!
//! - a request goes to all `from` replicas of `placement` at once: the
//!   local one through the engine (a write completes after a disk delay; a
//!   read is answered on the spot), remote ones as messages;
//! - each outcome is recorded; the client's answer is the first decision
//!   (`ack` successes, or more than `from - ack` failures: 504);
//! - the deadline ([`REPLICATION_TIMEOUT_MS`])
//!   expires what is still waiting;
//! - once every replica answered or the deadline passed, the aftermath:
//!   read repair to every replica that answered an older version, and a
//!   hint for every remote replica that did not acknowledge a write.
//!
//! The node's side effects are returned in an [`Outbox`] for the driver
//! ([`crate::sim`]) to carry out on the network and the clock.

use crate::config::{PlantedBug, REPLICATION_TIMEOUT_MS};
use crate::history::OpId;
use crate::network::{Message, Request, Waiter};
use crate::node::SimNode;
use ataman_node::cluster::placement;
use ataman_node::peer::frame::Version;
use ataman_node::replication::coordinator::{Aftermath, Coordination, Decision, Kind, Outcome};
use std::collections::BTreeMap;

/// Replicated requests in flight on one node, at most (the real
/// `COORDINATIONS_MAX` per thread; a simulated client has one at a time,
/// so this is never reached).
pub const COORDINATIONS_MAX: usize = ataman_node::replication::COORDINATIONS_MAX;

/// A request in flight.
#[derive(Debug)]
struct Live {
    coordination: Coordination,
    op: OpId,
    key: Vec<u8>,
    replicas: Vec<usize>,
}

/// The requests a node coordinates (in memory: a crash forgets them).
#[derive(Debug, Default)]
pub struct Coordinations {
    live: BTreeMap<u64, Live>,
    next_id: u64,
}

/// A write to the node's own engine, carried out after a disk delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalWrite {
    /// The request and replica position that wait for it (`None`: a read repair).
    pub waiter: Option<(u64, usize)>,
    /// The key.
    pub key: Vec<u8>,
    /// The version.
    pub version: Version,
}

/// What a node's coordination asks the driver to do.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Messages to send: (destination node, message).
    pub sends: Vec<(usize, Message)>,
    /// Writes to the local engine.
    pub local_writes: Vec<LocalWrite>,
    /// Decided client answers.
    pub replies: Vec<(OpId, Decision)>,
    /// Requests whose deadline to schedule (ids), [`REPLICATION_TIMEOUT_MS`] from now.
    pub deadlines: Vec<u64>,
    /// Read repairs sent.
    pub repairs: u64,
    /// Hints kept.
    pub hints: u64,
    /// Writes re-stamped above a newer version a replica held: (op, new ts).
    pub restamped: Vec<(OpId, u64)>,
}

impl SimNode {
    /// Starts client operation `op` on `key` (a read, or a write of a
    /// version this node stamped) with `ack` of `from`; `seeds` are the
    /// cluster's placement seeds.
    #[allow(clippy::too_many_arguments)]
    pub fn coordinate(
        &mut self,
        seeds: &[u64],
        op: OpId,
        key: Vec<u8>,
        kind: Kind,
        ack: usize,
        from: usize,
        planted: Option<PlantedBug>,
        out: &mut Outbox,
    ) {
        assert!(self.is_up(), "a down node coordinates nothing");
        assert!(
            self.coordinations.live.len() < COORDINATIONS_MAX,
            "coordinations bound"
        );
        let replicas = placement::rank_with_seeds(seeds, &key, from);
        let answer_at = match (planted, &kind) {
            (Some(PlantedBug::AckMinusOne), Kind::Write(_)) if ack >= 2 => ack - 1,
            _ => ack,
        };
        let coordination = Coordination::new(kind, answer_at, replicas.len());
        self.launch(
            Live {
                coordination,
                op,
                key,
                replicas,
            },
            out,
        );
    }

    /// Registers `live` under a new id and asks all its replicas. (A new id
    /// per round keeps a re-stamped write's earlier answers out of the new
    /// round; each round has its own deadline, a little longer in all than
    /// the real node's one deadline per request.)
    fn launch(&mut self, live: Live, out: &mut Outbox) {
        self.coordinations.next_id += 1;
        let id = self.coordinations.next_id;
        let kind = live.coordination.kind().clone();
        let (key, replicas) = (live.key.clone(), live.replicas.clone());
        self.coordinations.live.insert(id, live);
        out.deadlines.push(id);
        for (position, &node) in replicas.iter().enumerate() {
            if node == self.index {
                match &kind {
                    Kind::Read => {
                        let outcome = match self.read(&key) {
                            Ok(v) => Outcome::Read(v),
                            Err(e) => Outcome::Failed(format!("local replica: read failed: {e}")),
                        };
                        // A read: never re-stamped, so the time is not used.
                        self.on_outcome(0, id, position, outcome, out);
                    }
                    Kind::Write(version) => out.local_writes.push(LocalWrite {
                        waiter: Some((id, position)),
                        key: key.clone(),
                        version: version.clone(),
                    }),
                }
                continue;
            }
            let request = match &kind {
                Kind::Read => Request::Read { key: key.clone() },
                Kind::Write(version) => Request::Write {
                    key: key.clone(),
                    version: version.clone(),
                },
            };
            out.sends.push((
                node,
                Message::Request {
                    waiter: Waiter::Coordination { id, position },
                    incarnation: self.incarnation,
                    request,
                },
            ));
        }
    }

    /// Replica `position` of request `id` answered (or failed).
    pub fn on_outcome(
        &mut self,
        now_ms: u64,
        id: u64,
        position: usize,
        outcome: Outcome,
        out: &mut Outbox,
    ) {
        let Some(live) = self.coordinations.live.get_mut(&id) else {
            return; // finished before this late answer came
        };
        match live.coordination.record(position, outcome) {
            Some(Decision::Restamp { above }) => {
                // As the real replicator: stamp above the newer version and
                // ask every replica again.
                let Some(mut live) = self.coordinations.live.remove(&id) else {
                    return;
                };
                self.hlc.observe(above);
                let ts = self.stamp(now_ms);
                live.coordination = live.coordination.restamped(ts);
                out.restamped.push((live.op, ts));
                self.launch(live, out);
                return;
            }
            Some(decision) => out.replies.push((live.op, decision)),
            None => {}
        }
        if live.coordination.settled() {
            self.finish(id, out);
        }
    }

    /// The deadline of request `id` passed.
    pub fn expire(&mut self, id: u64, out: &mut Outbox) {
        let Some(live) = self.coordinations.live.get_mut(&id) else {
            return;
        };
        let why = format!("{REPLICATION_TIMEOUT_MS} ms");
        if let Some(decision) = live.coordination.expire(&why) {
            out.replies.push((live.op, decision));
        }
        self.finish(id, out);
    }

    /// Frees a settled request and carries out its aftermath.
    fn finish(&mut self, id: u64, out: &mut Outbox) {
        let Some(live) = self.coordinations.live.remove(&id) else {
            return;
        };
        let Aftermath { repair, hint } = live.coordination.aftermath();
        if let Some((version, stale)) = repair {
            for position in stale {
                let node = live.replicas[position];
                out.repairs += 1;
                if node == self.index {
                    out.local_writes.push(LocalWrite {
                        waiter: None,
                        key: live.key.clone(),
                        version: version.clone(),
                    });
                } else {
                    out.sends.push((
                        node,
                        Message::Request {
                            waiter: Waiter::Nobody,
                            incarnation: self.incarnation,
                            request: Request::Write {
                                key: live.key.clone(),
                                version: version.clone(),
                            },
                        },
                    ));
                }
            }
        }
        if let Kind::Write(version) = live.coordination.kind() {
            for position in hint {
                let node = live.replicas[position];
                if node == self.index {
                    continue; // the local engine failed: nothing a hint could fix
                }
                self.hints.add(node, live.key.clone(), version.clone());
                out.hints += 1;
            }
        }
    }

    /// Client operations this node is coordinating now.
    pub fn coordinating(&self) -> Vec<OpId> {
        self.coordinations.live.values().map(|l| l.op).collect()
    }
}
