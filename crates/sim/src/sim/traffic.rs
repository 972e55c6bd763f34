//! The traffic of a run: client requests, the coordinators' work, messages
//! between nodes, local engine writes and hint deliveries.

use super::{DISK_MS_MAX, Event, Sim};
use crate::client::Client;
use crate::config::{HINT_TICK_MS, PlantedBug, REPLICATION_TIMEOUT_MS};
use crate::coordinator::{LocalWrite, Outbox};
use crate::history::{Happening, Op, OpId, OpKind, OpResult};
use crate::network::{Answer, Message, Request, Waiter};
use ataman_node::peer::frame::Version;
use ataman_node::replication::HINT_BATCH_MAX;
use ataman_node::replication::coordinator::{Decision, Kind, Outcome};

impl Sim {
    pub(super) fn client_next(&mut self, client: usize) {
        if self.ops_issued >= self.config.steps {
            return;
        }
        let id = self.history.ops.len();
        let plan = self.clients[client].plan(
            &mut self.world.rng,
            id,
            self.config.nodes,
            self.config.replicas,
        );
        self.ops_issued += 1;
        self.issue(client, plan);
    }

    /// Sends a request for `client` (an index past the clients: the final sweep).
    pub(super) fn issue(&mut self, client: usize, plan: crate::client::Plan) {
        let id = self.history.ops.len();
        let now = self.now();
        let node = &mut self.nodes[plan.coordinator];
        let mut op = Op {
            id,
            client,
            coordinator: plan.coordinator,
            key: plan.key.clone(),
            kind: plan.kind.clone(),
            ack: plan.ack,
            from: self.config.replicas,
            ts: None,
            earlier_ts: Vec::new(),
            invoked_ms: now,
            completed_ms: None,
            result: OpResult::Pending,
        };
        if !node.is_up() {
            op.result = OpResult::Refused;
            op.completed_ms = Some(now);
            self.history.ops.push(op);
            self.ops_done += usize::from(client < self.clients.len());
            self.client_answered(client);
            return;
        }
        let kind = match &plan.kind {
            OpKind::Get => Kind::Read,
            OpKind::Put(value) => Kind::Write(Version {
                ts: node.stamp(now),
                value: Some(value.clone()),
            }),
            OpKind::Delete => Kind::Write(Version {
                ts: node.stamp(now),
                value: None,
            }),
        };
        if let Kind::Write(v) = &kind {
            op.ts = Some(v.ts);
        }
        self.history.ops.push(op);
        if let Some(c) = self.clients.get_mut(client) {
            c.waiting = Some(id);
        }
        let mut out = Outbox::default();
        node.coordinate(
            &self.seeds,
            id,
            plan.key,
            kind,
            plan.ack,
            self.config.replicas,
            self.config.planted_bug,
            &mut out,
        );
        self.carry_out(plan.coordinator, out);
    }

    pub(super) fn client_answered(&mut self, client: usize) {
        if let Some(c) = self.clients.get_mut(client) {
            c.waiting = None;
            let think = Client::think_ms(&mut self.world.rng);
            self.world.schedule(think, Event::ClientNext { client });
        }
    }

    /// Records the answer of `op` (the first one only).
    pub(super) fn complete(&mut self, op: OpId, result: OpResult) {
        let now = self.now();
        let entry = &mut self.history.ops[op];
        if entry.result != OpResult::Pending {
            return;
        }
        entry.result = result;
        entry.completed_ms = Some(now);
        let client = entry.client;
        if client < self.clients.len() {
            self.ops_done += 1;
        }
        self.client_answered(client);
    }

    pub(super) fn carry_out(&mut self, node: usize, out: Outbox) {
        let incarnation = self.nodes[node].incarnation();
        for (to, message) in out.sends {
            self.send(node, to, message, 0);
        }
        for write in out.local_writes {
            self.local_writes_pending += 1;
            let after = self.world.rng.between(0, DISK_MS_MAX);
            self.world.schedule(
                after,
                Event::LocalWrite {
                    node,
                    incarnation,
                    write,
                },
            );
        }
        for id in out.deadlines {
            self.world.schedule(
                REPLICATION_TIMEOUT_MS,
                Event::Deadline {
                    node,
                    incarnation,
                    id,
                },
            );
        }
        for (op, decision) in out.replies {
            let result = match decision {
                Decision::Written => OpResult::Written,
                Decision::Read(v) => OpResult::Read(v),
                Decision::Failed(why) => OpResult::Failed(why),
                Decision::Restamp { .. } => unreachable!("the node re-stamps, never replies so"),
            };
            self.complete(op, result);
        }
        self.stats.repairs += out.repairs;
        self.stats.hints_kept += out.hints;
        self.stats.restamps += out.restamped.len() as u64;
        for (op, ts) in out.restamped {
            let entry = &mut self.history.ops[op];
            entry.earlier_ts.extend(entry.ts);
            entry.ts = Some(ts);
        }
    }

    pub(super) fn send(&mut self, from: usize, to: usize, message: Message, extra_ms: u64) {
        let now = self.now();
        if let Some(delay) = self.network.send(&mut self.world.rng, from, to, now) {
            self.world
                .schedule(extra_ms + delay, Event::Deliver { from, to, message });
        }
    }

    pub(super) fn deliver(&mut self, from: usize, to: usize, message: Message) {
        let now = self.now();
        if !self.network.arrive(from, to, now) {
            return;
        }
        match message {
            Message::Request {
                waiter,
                incarnation,
                request,
            } => {
                let answer = if self.nodes[to].is_up() {
                    let refuse_older = self.config.planted_bug != Some(PlantedBug::NoRestamp);
                    let answer = self.nodes[to].serve(now, &request, refuse_older);
                    match (&answer, &request) {
                        (Answer::Written, Request::Write { key, version }) => {
                            self.replica_wrote(to, key.clone(), version.ts)
                        }
                        (Answer::Failed(_), _) => self.check_disk(to),
                        _ => {}
                    }
                    answer
                } else if self.nodes[to].powered_off() {
                    return; // the machine is off: silence until the deadline
                } else {
                    Answer::Failed(format!("node {to}: connection refused"))
                };
                if waiter != Waiter::Nobody {
                    let disk = self.world.rng.between(0, DISK_MS_MAX);
                    let reply = Message::Answer {
                        waiter,
                        incarnation,
                        answer,
                    };
                    self.send(to, from, reply, disk);
                }
            }
            Message::Answer {
                waiter,
                incarnation,
                answer,
            } => {
                let node = &mut self.nodes[to];
                if !node.is_up() || node.incarnation() != incarnation {
                    return;
                }
                match waiter {
                    Waiter::Coordination { id, position } => {
                        let outcome = match answer {
                            Answer::Written => Outcome::Written,
                            Answer::HoldsNewer(ts) => Outcome::HoldsNewer(ts),
                            Answer::Read(v) => Outcome::Read(v),
                            Answer::Failed(why) => Outcome::Failed(why),
                        };
                        let mut out = Outbox::default();
                        node.on_outcome(now, id, position, outcome, &mut out);
                        self.carry_out(to, out);
                    }
                    Waiter::Hint { seq } => {
                        let done = matches!(answer, Answer::Written | Answer::HoldsNewer(_));
                        node.hints.answered(from, seq, done);
                    }
                    Waiter::Nobody => {}
                }
            }
        }
    }

    pub(super) fn local_write(&mut self, node: usize, incarnation: u64, write: LocalWrite) {
        assert!(self.local_writes_pending > 0, "local write never started");
        self.local_writes_pending -= 1;
        let n = &self.nodes[node];
        if !n.is_up() || n.incarnation() != incarnation {
            return; // the process died with the write in flight
        }
        let result = n.write(&write.key, &write.version);
        match &result {
            Ok(()) => self.replica_wrote(node, write.key.clone(), write.version.ts),
            Err(_) => self.check_disk(node),
        }
        if let Some((id, position)) = write.waiter {
            let outcome = match result {
                Ok(()) => Outcome::Written,
                Err(e) => Outcome::Failed(format!("local replica: {e}")),
            };
            let mut out = Outbox::default();
            let now = self.now();
            self.nodes[node].on_outcome(now, id, position, outcome, &mut out);
            self.carry_out(node, out);
        }
    }

    pub(super) fn replica_wrote(&mut self, node: usize, key: Vec<u8>, ts: u64) {
        let at_ms = self.now();
        self.history.happenings.push(Happening::ReplicaWrote {
            at_ms,
            node,
            key,
            ts,
        });
    }

    /// A write failed on `node`: if its engine refuses writes (a disk
    /// fault), restart it a little later, as an operator would.
    pub(super) fn hint_tick(&mut self) {
        for node in 0..self.nodes.len() {
            if !self.nodes[node].is_up() {
                continue;
            }
            let incarnation = self.nodes[node].incarnation();
            let rounds = self.nodes[node].hints.start_rounds(HINT_BATCH_MAX);
            for crate::hints::RoundStart { peer, round, hints } in rounds {
                self.world.schedule(
                    REPLICATION_TIMEOUT_MS,
                    Event::HintDeadline {
                        node,
                        incarnation,
                        peer,
                        round,
                    },
                );
                for (seq, hint) in hints {
                    let message = Message::Request {
                        waiter: Waiter::Hint { seq },
                        incarnation,
                        request: Request::Write {
                            key: hint.key,
                            version: hint.version,
                        },
                    };
                    self.send(node, peer, message, 0);
                }
            }
        }
        self.world.schedule(HINT_TICK_MS, Event::HintTick);
    }
}
