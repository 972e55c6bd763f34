//! The replication driver, sans I/O: the requests one coordinator has in
//! flight and the hints it delivers, as events in and actions out.
//!
//! It owns no socket, engine, clock or hint store. Whoever drives it (the
//! network thread's adapter, `net_io`, or the deterministic simulation,
//! `crates/sim`) feeds it events — a client request
//! ([`Replicator::start`]), a replica's answer ([`Replicator::on_answer`]),
//! time passing ([`Replicator::tick`]), a hint round
//! ([`Replicator::start_hint_round`]), shutdown
//! ([`Replicator::expire_all`]) — and carries out the [`Action`]s it
//! queues ([`Replicator::next_action`]): send a request to a peer, read or
//! write the local replica, answer the client, keep or remove hints. The
//! rules of one request are [`super::coordinator`]'s; this file routes
//! them. Time is milliseconds on a clock the driver's owner chooses.
//!
//! # Rules
//! - A request asks all its replicas at once: the local one by
//!   [`Action::ReadLocal`] / [`Action::WriteLocal`], every other one by
//!   [`Action::Send`], each carrying the request's deadline, and its
//!   replica's answer comes back as [`Replicator::on_answer`] with the
//!   [`Waiter`] the action named (a send refused at once is answered at
//!   once, [`ReplicaAnswer::Failed`]).
//! - The first decision answers the client ([`Action::Reply`]): `Err` only
//!   when the table is full ([`COORDINATIONS_MAX`]) or the clock cannot
//!   stamp a re-stamped write.
//! - A write answered with a newer version is re-stamped: the clock
//!   observes the newer timestamp and stamps the write above it
//!   ([`Action::Restamped`]), the request's generation is raised so answers
//!   to the earlier round are dropped, and every replica is asked again
//!   under the same deadline.
//! - A replica whose link closed because this node learned a newer
//!   layout version (the request was on a connection naming the old one,
//!   which the peer would refuse: the fence) is asked again once on the
//!   next connection ([`Replicator::resend`]), under the same deadline, up
//!   to [`RESENDS_MAX`] times per request; past that it failed. The
//!   request keeps the replicas it was planned with: its deadline ends
//!   before the transition counts on every old-placement write being
//!   over (the driver's `ack` wait, docs/ARCHITECTURE.md "Membership").
//! - A request ends once every replica answered, or at its deadline
//!   ([`Replicator::tick`]; the client gets 504 if it was not answered
//!   yet). Then its aftermath: read repair (a remote replica gets
//!   [`Action::Send`] with [`Waiter::Repair`], the local one
//!   [`Action::WriteLocal`] without waiter), and a write keeps a hint
//!   ([`Action::KeepHint`]) for every remote replica that did not
//!   acknowledge.
//! - Hints go to each peer in rounds: at most one round in flight per
//!   peer, at most [`HINT_BATCH_MAX`] hints in sequence order after the
//!   peer's cursor. A hint acknowledged (or answered with a newer version:
//!   it is needed no more) is removed when its round ends
//!   ([`Action::RemoveHints`]). A round ends when every hint was answered
//!   or at its deadline; if any hint failed or went unanswered, the next
//!   round starts at the same cursor, otherwise past the last hint sent.
//!
//! # Invariants
//! - Every table entry is either live or on the free list, never both:
//!   `live + free = table` (asserted on every change).
//! - An entry's generation only grows; an answer carries the generation
//!   it was asked in, and one of another generation is dropped.
//! - A hint round's `in_flight` counts exactly the hints of that round
//!   not yet answered; answers to an ended round are dropped by its id.
//!
//! [`Replicator::invariants`] checks all of them at once (tests).

use super::coordinator::{Aftermath, Coordination, Decision, ReplicaAnswer, ReplicaOp};
use crate::peer::frame::Stamped;
use std::collections::VecDeque;

/// Replicated requests in flight on one driver; more are refused (503).
pub const COORDINATIONS_MAX: usize = 65_536;
/// Hints sent to one peer per delivery round.
pub const HINT_BATCH_MAX: usize = 256;
/// Replicas one request asks again after a redial ([`Replicator::resend`]).
pub const RESENDS_MAX: u32 = 4;

/// Who waits for a replica's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiter {
    /// Replica `position` of request `index` in the driver's table.
    Coordination {
        /// The request's entry in the table.
        index: usize,
        /// The entry's generation when the replica was asked.
        generation: u64,
        /// The replica's position in the request's replica list.
        position: usize,
    },
    /// Hint `seq`, sent in round `round`.
    Hint {
        /// The round (per peer) it was sent in.
        round: u64,
        /// The hint's sequence number in the store.
        seq: u64,
    },
    /// A read repair: nobody waits.
    Repair,
    /// A consensus register operation's request (`super::register_ops`;
    /// not the driver's: the network thread routes its answers there).
    Register {
        /// The operation.
        op: u64,
    },
}

/// What a peer is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerRequest {
    /// Answer the newest version of the key.
    Read {
        /// The key.
        key: Vec<u8>,
    },
    /// Apply this version of the key.
    Write {
        /// The key.
        key: Vec<u8>,
        /// The version.
        version: Stamped,
    },
}

/// What the driver asks its owner to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<T> {
    /// Send `request` to node `node`; its answer (or failure) comes back
    /// as [`Replicator::on_answer`] with `waiter` (unless it is [`Waiter::Repair`]).
    Send {
        /// The destination node.
        node: usize,
        /// Who waits.
        waiter: Waiter,
        /// The request.
        request: PeerRequest,
        /// When the waiter stops waiting.
        deadline_ms: u64,
    },
    /// Read `key` from the local engine and answer `waiter` with the outcome.
    ReadLocal {
        /// Who waits.
        waiter: Waiter,
        /// The key.
        key: Vec<u8>,
    },
    /// Write `version` of `key` to the local engine; `waiter` (if any)
    /// hears the outcome through [`Replicator::on_answer`]. Without a
    /// waiter it is a read repair: the clock observes its timestamp.
    WriteLocal {
        /// Who waits.
        waiter: Option<Waiter>,
        /// The key.
        key: Vec<u8>,
        /// The version.
        version: Stamped,
    },
    /// The client's answer (`Err`: 503 with the reason).
    Reply {
        /// Where it goes.
        to: T,
        /// The answer.
        answer: Result<Decision, String>,
    },
    /// A write was re-stamped `ts` (above a newer version a replica held).
    Restamped {
        /// Whose request.
        to: T,
        /// The new timestamp.
        ts: u64,
    },
    /// A write failed after its last re-stamp: a replica still held a newer version.
    RestampsExhausted,
    /// Keep a hint: node `node` missed `version` of `key`.
    KeepHint {
        /// The node that missed it.
        node: usize,
        /// The key.
        key: Vec<u8>,
        /// The version.
        version: Stamped,
    },
    /// Node `node` acknowledged these hints: remove them from the store.
    RemoveHints {
        /// The node.
        node: usize,
        /// Their sequence numbers.
        seqs: Vec<u64>,
    },
}

/// A client's replicated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<T> {
    /// Where the answer goes.
    pub reply_to: T,
    /// The key.
    pub key: Vec<u8>,
    /// Read, or write this version.
    pub kind: ReplicaOp,
    /// Replicas that must answer.
    pub ack: usize,
    /// The key's replicas, in placement order (`from` of them); during a
    /// layout transition the union of the live versions' sets.
    pub replicas: Vec<usize>,
    /// The replica sets `ack` is needed in, as positions in `replicas`
    /// (one per live layout version); empty: one set, every replica.
    pub sets: Vec<Vec<usize>>,
}

/// A hint read from the store for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// Its sequence number (rounds go in this order).
    pub seq: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The missed version.
    pub version: Stamped,
}

/// What to read from the hint store for the next round to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintQuery {
    /// Hints with a sequence number above this (all: `None`).
    pub after: Option<u64>,
    /// At most this many.
    pub max: usize,
}

/// Who the driver is and how long it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverConfig {
    /// This node's index in the cluster list.
    pub self_index: usize,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// How long a request (and a hint round) waits for its replicas, ms.
    pub timeout_ms: u64,
    /// The planted bug `read-repair-writes-older` (`crate::config::PlantedBug`):
    /// read repair sends the oldest answer's value under the newest
    /// answer's timestamp ([`Coordination::planted_older_repair`]).
    pub planted_older_repair: bool,
}

struct Live<T> {
    coordination: Coordination,
    reply_to: T,
    key: Vec<u8>,
    replicas: Vec<usize>,
    deadline_ms: u64,
    /// Replicas asked again after a redial ([`RESENDS_MAX`]).
    resends: u32,
}

struct Entry<T> {
    generation: u64,
    live: Option<Live<T>>,
}

#[derive(Debug, Default)]
struct HintCursor {
    /// Every hint up to this seq was delivered (or is retried from here).
    after: Option<u64>,
    /// The current round's id (0: none yet).
    round: u64,
    /// Hints of the current round still unanswered.
    in_flight: usize,
    /// When the current round stops waiting.
    deadline_ms: u64,
    /// A hint of the current round failed: the next round starts at `after` again.
    failed: bool,
    /// Highest seq sent in the current round.
    sent_max: Option<u64>,
    /// Seqs acknowledged in the current round.
    acked: Vec<u64>,
}

/// One coordinator's replication state: its requests in flight and its
/// hint delivery rounds. `T` says where a client's answer goes.
pub struct Replicator<T> {
    config: DriverConfig,
    table: Vec<Entry<T>>,
    free: Vec<usize>,
    live: usize,
    hint_cursors: Vec<HintCursor>,
    actions: VecDeque<Action<T>>,
}

/// Stamps a re-stamped write: observes the newer timestamp given and
/// returns a new one above it, or why the clock cannot stamp.
pub type Stamp<'a> = &'a mut dyn FnMut(u64) -> Result<u64, String>;

impl<T: Copy> Replicator<T> {
    /// An idle driver.
    pub fn new(config: DriverConfig) -> Self {
        Replicator {
            config,
            table: Vec::new(),
            free: Vec::new(),
            live: 0,
            hint_cursors: (0..config.nodes).map(|_| HintCursor::default()).collect(),
            actions: VecDeque::new(),
        }
    }

    /// The next action to carry out, oldest first.
    pub fn next_action(&mut self) -> Option<Action<T>> {
        self.actions.pop_front()
    }

    /// The node table grew to `nodes` (a node joined the layout): hint
    /// delivery gets a cursor for each new index. Indices never shrink or
    /// move (`cluster::node_table`).
    pub fn grow_nodes(&mut self, nodes: usize) {
        while self.hint_cursors.len() < nodes {
            self.hint_cursors.push(HintCursor::default());
        }
        self.config.nodes = self.config.nodes.max(nodes);
    }

    /// Requests in flight.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Where the answers of the requests in flight go.
    pub fn waiting(&self) -> Vec<T> {
        self.table
            .iter()
            .filter_map(|e| e.live.as_ref().map(|l| l.reply_to))
            .collect()
    }

    /// True while a hint round is in flight to any peer.
    pub fn delivering_hints(&self) -> bool {
        self.hint_cursors.iter().any(|c| c.in_flight > 0)
    }

    fn check_table(&self) {
        debug_assert_eq!(
            self.live + self.free.len(),
            self.table.len(),
            "every entry live or free"
        );
    }

    /// Every invariant of the `# Invariants` paragraph, checked in full.
    pub fn invariants(&self) -> Result<(), String> {
        let live = self.table.iter().filter(|e| e.live.is_some()).count();
        if live != self.live {
            return Err(format!("{live} live entries, counted {}", self.live));
        }
        if self.live + self.free.len() != self.table.len() {
            return Err(format!(
                "{} live + {} free != {} entries",
                self.live,
                self.free.len(),
                self.table.len()
            ));
        }
        if let Some(&i) = self.free.iter().find(|&&i| self.table[i].live.is_some()) {
            return Err(format!("entry {i} is free and live"));
        }
        Ok(())
    }

    /// A client request: asks all its replicas at once.
    pub fn start(&mut self, now_ms: u64, request: Request<T>) {
        if self.live >= COORDINATIONS_MAX {
            self.actions.push_back(Action::Reply {
                to: request.reply_to,
                answer: Err(format!(
                    "{COORDINATIONS_MAX} replicated requests in flight on this thread; retry"
                )),
            });
            return;
        }
        let coordination = if request.sets.is_empty() {
            Coordination::new(request.kind, request.ack, request.replicas.len())
        } else {
            Coordination::with_sets(
                request.kind,
                request.ack,
                request.replicas.len(),
                request.sets,
            )
        };
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.table.push(Entry {
                    generation: 0,
                    live: None,
                });
                self.table.len() - 1
            }
        };
        let entry = &mut self.table[index];
        debug_assert!(entry.live.is_none(), "a free entry holds no request");
        entry.generation += 1;
        entry.live = Some(Live {
            coordination,
            reply_to: request.reply_to,
            key: request.key,
            replicas: request.replicas,
            deadline_ms: now_ms.saturating_add(self.config.timeout_ms),
            resends: 0,
        });
        self.live += 1;
        self.check_table();
        self.ask_all(index);
    }

    /// Queues the request of entry `index` to each of its replicas.
    fn ask_all(&mut self, index: usize) {
        let replicas = match self.table[index].live.as_ref() {
            Some(live) => live.replicas.len(),
            None => return,
        };
        for position in 0..replicas {
            if let Some(action) = self.ask(index, position) {
                self.actions.push_back(action);
            }
        }
    }

    /// The action that asks replica `position` of request `index` (in its
    /// current generation), if the request is live.
    fn ask(&self, index: usize, position: usize) -> Option<Action<T>> {
        let entry = self.table.get(index)?;
        let live = entry.live.as_ref()?;
        let node = *live.replicas.get(position)?;
        let waiter = Waiter::Coordination {
            index,
            generation: entry.generation,
            position,
        };
        let key = live.key.clone();
        Some(
            match (node == self.config.self_index, live.coordination.kind()) {
                (true, ReplicaOp::Read) => Action::ReadLocal { waiter, key },
                (true, ReplicaOp::Write(version)) => Action::WriteLocal {
                    waiter: Some(waiter),
                    key,
                    version: version.clone(),
                },
                (false, kind) => Action::Send {
                    node,
                    waiter,
                    request: match kind {
                        ReplicaOp::Read => PeerRequest::Read { key },
                        ReplicaOp::Write(version) => PeerRequest::Write {
                            key,
                            version: version.clone(),
                        },
                    },
                    deadline_ms: live.deadline_ms,
                },
            },
        )
    }

    /// The replica `waiter` waits for was on a link that closed because
    /// this node learned a newer layout version: asks it again (the same
    /// waiter, the same deadline) and returns true, unless the request is
    /// over, of another generation, or out of [`RESENDS_MAX`]; then false,
    /// and the caller answers it failed.
    pub fn resend(&mut self, waiter: Waiter) -> bool {
        let Waiter::Coordination {
            index,
            generation,
            position,
        } = waiter
        else {
            return false;
        };
        let Some(entry) = self.table.get_mut(index) else {
            return false;
        };
        let Some(live) = entry.live.as_mut() else {
            return false;
        };
        if entry.generation != generation || live.resends >= RESENDS_MAX {
            return false;
        }
        live.resends += 1;
        match self.ask(index, position) {
            Some(action) => {
                self.actions.push_back(action);
                true
            }
            None => false,
        }
    }

    /// Where the answer of request `index` goes, if it is live in
    /// `generation` (the slow log marks its replicas' answers by it).
    pub fn reply_to_of(&self, index: usize, generation: u64) -> Option<T> {
        let entry = self.table.get(index)?;
        if entry.generation != generation {
            return None;
        }
        entry.live.as_ref().map(|live| live.reply_to)
    }

    /// Node `node` answered (or failed) the request `waiter` waits for.
    /// `stamp` re-stamps a write a replica holds a newer version of.
    pub fn on_answer(
        &mut self,
        node: usize,
        waiter: Waiter,
        outcome: ReplicaAnswer,
        stamp: Stamp<'_>,
    ) {
        match waiter {
            Waiter::Coordination {
                index,
                generation,
                position,
            } => self.record(index, generation, position, outcome, stamp),
            Waiter::Hint { round, seq } => self.hint_answered(node, round, seq, &outcome),
            Waiter::Repair | Waiter::Register { .. } => {}
        }
    }

    fn record(
        &mut self,
        index: usize,
        generation: u64,
        position: usize,
        outcome: ReplicaAnswer,
        stamp: Stamp<'_>,
    ) {
        let Some(entry) = self.table.get_mut(index) else {
            return;
        };
        if entry.generation != generation {
            return; // finished (or re-stamped) before this late answer came
        }
        let Some(live) = entry.live.as_mut() else {
            return;
        };
        match live.coordination.record(position, outcome) {
            Some(Decision::Restamp { above }) => {
                self.restamp(index, above, stamp);
                return;
            }
            Some(decision) => {
                if matches!(decision, Decision::Failed(_)) && live.coordination.gave_up_restamping()
                {
                    self.actions.push_back(Action::RestampsExhausted);
                }
                self.actions.push_back(Action::Reply {
                    to: live.reply_to,
                    answer: Ok(decision),
                });
            }
            None => {}
        }
        if live.coordination.settled() {
            self.finish(index);
        }
    }

    /// Stamps the write of entry `index` above `above` and asks every
    /// replica again; a clock that cannot stamp ends the request with
    /// `Err` and without aftermath (nothing was acknowledged).
    fn restamp(&mut self, index: usize, above: u64, stamp: Stamp<'_>) {
        let stamped = stamp(above);
        let entry = &mut self.table[index];
        let before = entry.generation;
        entry.generation += 1; // answers to the earlier round are dropped
        debug_assert!(entry.generation > before, "generations only grow");
        let ts = match stamped {
            Ok(ts) => ts,
            Err(e) => {
                if let Some(live) = entry.live.take() {
                    self.free.push(index);
                    self.live -= 1;
                    self.check_table();
                    self.actions.push_back(Action::Reply {
                        to: live.reply_to,
                        answer: Err(e),
                    });
                }
                return;
            }
        };
        let Some(live) = entry.live.as_mut() else {
            return;
        };
        live.coordination = live.coordination.restamped(ts);
        self.actions.push_back(Action::Restamped {
            to: live.reply_to,
            ts,
        });
        self.ask_all(index);
    }

    /// Frees a settled request and queues its aftermath.
    fn finish(&mut self, index: usize) {
        let Some(live) = self.table[index].live.take() else {
            return;
        };
        self.free.push(index);
        self.live -= 1;
        self.check_table();
        let Aftermath { repair, hint } = live.coordination.aftermath();
        let repair = match repair {
            Some((newest, stale)) if self.config.planted_older_repair => {
                Some((live.coordination.planted_older_repair(newest), stale))
            }
            repair => repair,
        };
        if let Some((version, stale)) = repair {
            for position in stale {
                let node = live.replicas[position];
                let key = live.key.clone();
                let version = version.clone();
                self.actions.push_back(if node == self.config.self_index {
                    Action::WriteLocal {
                        waiter: None,
                        key,
                        version,
                    }
                } else {
                    Action::Send {
                        node,
                        waiter: Waiter::Repair,
                        request: PeerRequest::Write { key, version },
                        deadline_ms: live.deadline_ms,
                    }
                });
            }
        }
        if let ReplicaOp::Write(version) = live.coordination.kind() {
            for position in hint {
                let node = live.replicas[position];
                if node == self.config.self_index {
                    continue; // the local engine failed: nothing a hint could fix
                }
                self.actions.push_back(Action::KeepHint {
                    node,
                    key: live.key.clone(),
                    version: version.clone(),
                });
            }
        }
    }

    /// Time passed: requests past their deadline end (504 if unanswered),
    /// and hint rounds past theirs end.
    pub fn tick(&mut self, now_ms: u64) {
        let why = format!("{} ms", self.config.timeout_ms);
        for index in 0..self.table.len() {
            let Some(live) = self.table[index].live.as_mut() else {
                continue;
            };
            if live.deadline_ms > now_ms {
                continue;
            }
            if let Some(decision) = live.coordination.expire(&why) {
                self.actions.push_back(Action::Reply {
                    to: live.reply_to,
                    answer: Ok(decision),
                });
            }
            self.finish(index);
        }
        for node in 0..self.hint_cursors.len() {
            let cursor = &mut self.hint_cursors[node];
            if cursor.in_flight > 0 && cursor.deadline_ms <= now_ms {
                cursor.in_flight = 0;
                cursor.failed = true;
                self.end_hint_round(node);
            }
        }
    }

    /// Shutdown: every request in flight ends now (504 if unanswered), and
    /// writes keep their hints for replicas that did not acknowledge.
    pub fn expire_all(&mut self, why: &str) {
        for index in 0..self.table.len() {
            let Some(live) = self.table[index].live.as_mut() else {
                continue;
            };
            if let Some(decision) = live.coordination.expire(why) {
                self.actions.push_back(Action::Reply {
                    to: live.reply_to,
                    answer: Ok(decision),
                });
            }
            self.finish(index);
        }
    }

    /// What to read from the hint store for a round to `node`, or `None`
    /// while a round to it is in flight.
    pub fn hint_round_due(&self, node: usize) -> Option<HintQuery> {
        let cursor = self.hint_cursors.get(node)?;
        (node != self.config.self_index && cursor.in_flight == 0).then_some(HintQuery {
            after: cursor.after,
            max: HINT_BATCH_MAX,
        })
    }

    /// Starts a round to `node` with `hints`, what the store returned for
    /// [`Replicator::hint_round_due`]'s query (in sequence order).
    pub fn start_hint_round(&mut self, now_ms: u64, node: usize, hints: Vec<Hint>) {
        if self.hint_round_due(node).is_none() {
            return;
        }
        let deadline_ms = now_ms.saturating_add(self.config.timeout_ms);
        let cursor = &mut self.hint_cursors[node];
        if hints.is_empty() {
            // Everything after the cursor was delivered; what is counted
            // pending is being removed. Start over from the beginning
            // next time in case an earlier round left gaps.
            cursor.after = None;
            return;
        }
        let hints: Vec<Hint> = hints.into_iter().take(HINT_BATCH_MAX).collect();
        cursor.round += 1;
        cursor.deadline_ms = deadline_ms;
        cursor.failed = false;
        cursor.acked.clear();
        cursor.in_flight = hints.len();
        cursor.sent_max = hints.iter().map(|h| h.seq).max();
        let round = cursor.round;
        for hint in hints {
            self.actions.push_back(Action::Send {
                node,
                waiter: Waiter::Hint {
                    round,
                    seq: hint.seq,
                },
                request: PeerRequest::Write {
                    key: hint.key,
                    version: hint.version,
                },
                deadline_ms,
            });
        }
    }

    fn hint_answered(&mut self, node: usize, round: u64, seq: u64, outcome: &ReplicaAnswer) {
        let Some(cursor) = self.hint_cursors.get_mut(node) else {
            return;
        };
        if cursor.round != round || cursor.in_flight == 0 {
            return; // the round ended before this late answer came
        }
        cursor.in_flight -= 1;
        match outcome {
            // A peer holding a newer version needs this hint no more.
            ReplicaAnswer::Written | ReplicaAnswer::HoldsNewer(_) => cursor.acked.push(seq),
            ReplicaAnswer::Read(_) | ReplicaAnswer::Failed(_) => cursor.failed = true,
        }
        if cursor.in_flight == 0 {
            self.end_hint_round(node);
        }
    }

    /// A round ended: remove what was acknowledged, move the cursor past
    /// it unless something failed (then the next round retries from it).
    fn end_hint_round(&mut self, node: usize) {
        let cursor = &mut self.hint_cursors[node];
        let acked = std::mem::take(&mut cursor.acked);
        if !cursor.failed && cursor.sent_max.is_some() {
            cursor.after = cursor.sent_max;
        }
        cursor.sent_max = None;
        if !acked.is_empty() {
            self.actions
                .push_back(Action::RemoveHints { node, seqs: acked });
        }
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
