//! The traffic of a run: client requests, the nodes' drivers at work
//! (the real `ataman_node::replication::driver`: this file feeds it events
//! and carries out its actions on the simulated network, engines and hint
//! stores), messages between nodes and local engine writes.

use super::{DISK_MS_MAX, Event, LocalWrite, Sim};
use crate::client::Client;
use crate::config::{HINT_TICK_MS, PlantedBug, REPLICATION_TIMEOUT_MS};
use crate::history::{Happening, Op, OpId, OpKind, OpResult};
use crate::network::{Answer, Message};
use ataman_node::peer::frame::Stamped;
use ataman_node::replication::coordinator::{Decision, ReplicaAnswer, ReplicaOp};
use ataman_node::replication::driver::{Action, PeerRequest, Request, Waiter};

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
            deadline_ms: None,
            ttl_ms: plan.ttl_ms,
            invoked_ms: now,
            completed_ms: None,
            result: OpResult::Pending,
        };
        // A node that is no member (joining) serves no client, as the
        // node's membership gate answers 503; its clock holds no id.
        // (A read stamps nothing: 0 is not used.)
        let stamp = match plan.kind {
            _ if !node.is_up() || node.node_id().is_none() => None,
            OpKind::Get => Some(0),
            _ => node.stamp(now),
        };
        let Some(ts) = stamp else {
            op.result = OpResult::Refused;
            op.completed_ms = Some(now);
            self.history.ops.push(op);
            self.ops_done += usize::from(client < self.clients.len());
            self.client_answered(client);
            return;
        };
        let kind = match &plan.kind {
            OpKind::Get => ReplicaOp::Read,
            OpKind::Put(value) => {
                // The deadline, stamped once here through the node's
                // dispatch rule (with the node's planted `expires-early`).
                let planted = (self.config.planted_bug == Some(PlantedBug::ExpiresEarly))
                    .then_some(ataman_node::config::PlantedBug::ExpiresEarly);
                let deadline_ms = ataman_node::ttl::Expiry::from_ttl_ms(plan.ttl_ms)
                    .as_planted(planted)
                    .deadline_ms(ts);
                match deadline_ms {
                    Ok(deadline_ms) => {
                        op.deadline_ms = deadline_ms;
                        ReplicaOp::Write(Stamped {
                            deadline_ms,
                            ..Stamped::value(ts, value.clone())
                        })
                    }
                    Err(why) => {
                        op.result = OpResult::Failed(why);
                        op.completed_ms = Some(now);
                        self.history.ops.push(op);
                        self.ops_done += usize::from(client < self.clients.len());
                        self.client_answered(client);
                        return;
                    }
                }
            }
            OpKind::Delete => ReplicaOp::Write(Stamped::tombstone(ts)),
        };
        if let ReplicaOp::Write(v) = &kind {
            op.ts = Some(v.ts);
        }
        self.history.ops.push(op);
        if let Some(c) = self.clients.get_mut(client) {
            c.waiting = Some(id);
        }
        // The planted bug: a write answers after one replica fewer.
        let ack = match (self.config.planted_bug, &kind) {
            (Some(PlantedBug::AckMinusOne), ReplicaOp::Write(_)) if plan.ack >= 2 => plan.ack - 1,
            _ => plan.ack,
        };
        let (replicas, sets) = self.replicas_for(
            plan.coordinator,
            &plan.key,
            matches!(kind, ReplicaOp::Write(_)),
        );
        self.nodes[plan.coordinator].driver.start(
            now,
            Request {
                reply_to: id,
                key: plan.key,
                kind,
                ack,
                replicas,
                sets,
            },
        );
        self.schedule_deadline(plan.coordinator);
        self.drive(plan.coordinator);
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

    /// A deadline of `node`'s driver, [`REPLICATION_TIMEOUT_MS`] from now.
    fn schedule_deadline(&mut self, node: usize) {
        let incarnation = self.nodes[node].incarnation();
        self.world.schedule(
            REPLICATION_TIMEOUT_MS,
            Event::Deadline { node, incarnation },
        );
    }

    /// What the coordinator `node` answers for `v`: a value past its
    /// deadline on the node's own clock is not found (as the node's
    /// `net::answer` does), recorded as a tombstone at its timestamp (the
    /// way an engine returns an expired version).
    fn expired_as_tombstone(&self, node: usize, v: Stamped) -> Stamped {
        let wall_ms = self.nodes[node].wall_ms(self.now());
        match v.deadline_ms {
            Some(d) if v.value.is_some() && ataman_engine::expiry::is_expired(d, wall_ms) => {
                Stamped::tombstone(v.ts)
            }
            _ => v,
        }
    }

    /// Carries out every action `node`'s driver queued, and those they
    /// lead to (a local read is answered at once).
    pub(super) fn drive(&mut self, node: usize) {
        while let Some(action) = self.nodes[node].driver.next_action() {
            self.carry_out(node, action);
        }
        // The driver's invariants, checked in full (its table is small here).
        debug_assert_eq!(self.nodes[node].driver.invariants(), Ok(()));
    }

    fn carry_out(&mut self, node: usize, action: Action<OpId>) {
        let incarnation = self.nodes[node].incarnation();
        match action {
            Action::Send {
                node: to,
                waiter,
                request,
                deadline_ms: _,
            } => {
                if waiter == Waiter::Repair {
                    self.stats.repairs += 1;
                }
                let message = Message::Request {
                    waiter,
                    incarnation,
                    request,
                };
                self.send(node, to, message, 0);
            }
            Action::ReadLocal { waiter, key } => {
                let outcome = match self.nodes[node].read(&key) {
                    Ok(v) => ReplicaAnswer::Read(v),
                    Err(e) => ReplicaAnswer::Failed(format!("local replica: read failed: {e}")),
                };
                self.answer(node, node, waiter, outcome);
            }
            Action::WriteLocal {
                waiter,
                key,
                version,
            } => {
                if waiter.is_none() {
                    // A read repair: the clock observes every version the engine holds.
                    self.stats.repairs += 1;
                    self.nodes[node].hlc.observe(version.ts);
                }
                self.local_writes_pending += 1;
                let after = self.world.rng.between(0, DISK_MS_MAX);
                let write = LocalWrite {
                    waiter,
                    key,
                    version,
                };
                self.world.schedule(
                    after,
                    Event::LocalWrite {
                        node,
                        incarnation,
                        write,
                    },
                );
            }
            Action::Reply { to, answer } => {
                let result = match answer {
                    Ok(Decision::Written { .. }) => OpResult::Written,
                    Ok(Decision::Read(v)) => {
                        OpResult::Read(v.map(|v| self.expired_as_tombstone(node, v)))
                    }
                    Ok(Decision::Failed(why)) | Err(why) => OpResult::Failed(why),
                    Ok(Decision::Restamp { .. }) => {
                        unreachable!("the driver re-stamps, never replies so")
                    }
                };
                self.complete(to, result);
            }
            Action::Restamped { to, ts } => {
                self.stats.restamps += 1;
                let entry = &mut self.history.ops[to];
                entry.earlier_ts.extend(entry.ts);
                entry.ts = Some(ts);
            }
            Action::RestampsExhausted => {}
            Action::KeepHint {
                node: peer,
                key,
                version,
            } => {
                self.stats.hints_kept += 1;
                self.nodes[node].hints.add(peer, key, version);
            }
            Action::RemoveHints { node: peer, seqs } => {
                self.nodes[node].hints.remove(peer, &seqs);
            }
        }
    }

    /// Feeds `node`'s driver the answer `from` gave to `waiter`.
    fn answer(&mut self, node: usize, from: usize, waiter: Waiter, outcome: ReplicaAnswer) {
        let now = self.now();
        let n = &mut self.nodes[node];
        let wall_ms = n.wall_ms(now);
        let (hlc, driver) = (&n.hlc, &mut n.driver);
        let mut stamp = |above: u64| {
            hlc.observe(above);
            hlc.now_at(wall_ms).map_err(|e| e.to_string())
        };
        driver.on_answer(from, waiter, outcome, &mut stamp);
        self.drive(node);
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
                        (Answer::Written, PeerRequest::Write { key, version }) => {
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
                if waiter != Waiter::Repair {
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
                let outcome = match answer {
                    Answer::Written => ReplicaAnswer::Written,
                    Answer::HoldsNewer(ts) => ReplicaAnswer::HoldsNewer(ts),
                    Answer::Read(v) => ReplicaAnswer::Read(v),
                    Answer::Failed(why) => ReplicaAnswer::Failed(why),
                };
                self.answer(to, from, waiter, outcome);
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
        if let Some(waiter) = write.waiter {
            let outcome = match result {
                Ok(()) => ReplicaAnswer::Written,
                Err(e) => ReplicaAnswer::Failed(format!("local replica: {e}")),
            };
            self.answer(node, node, waiter, outcome);
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
    /// Every node's hint-delivery tick, as the real node's thread 0: a
    /// round to each peer with hints pending and no round in flight.
    pub(super) fn hint_tick(&mut self) {
        let now = self.now();
        for node in 0..self.nodes.len() {
            if !self.nodes[node].is_up() {
                continue;
            }
            let mut started = false;
            for peer in 0..self.nodes.len() {
                let n = &mut self.nodes[node];
                let Some(query) = n.driver.hint_round_due(peer) else {
                    continue;
                };
                if n.hints.count(peer) == 0 {
                    continue;
                }
                let hints = n.hints.pending(peer, query.after, query.max);
                started |= !hints.is_empty();
                n.driver.start_hint_round(now, peer, hints);
            }
            if started {
                self.schedule_deadline(node);
            }
            self.drive(node);
        }
        self.world.schedule(HINT_TICK_MS, Event::HintTick);
    }
}
