//! One run of the register simulation: [`ACCEPTORS`] acceptors and
//! several clients, each running one operation at a time through the
//! register's proposer rules, over a network that loses, delays
//! (reorders) and duplicates messages, while acceptors crash and restart
//! with their durable state; a layout transition starts mid-run.
//!
//! # What is simulated
//! - An acceptor carries out each request with `acceptor::step`, makes the
//!   new state durable (kept across its crashes), then sends the answer
//!   ("persist then reply"). A crashed acceptor drops what reaches it. Its
//!   durable state is what the node keeps on disk: the Paxos record's
//!   bytes and the key's stored version, written by `record::plan` and
//!   read back by `record::decode` before each step.
//! - Every message crosses the register's wire codec (`register::wire`):
//!   encoded when sent, decoded when delivered.
//! - A client's operation is a read, a write of a value no one wrote
//!   before, or a compare-and-set from the last value it saw. It names the
//!   old replica set before [`TRANSITION_AT_MS`]; after, the old and the
//!   new set, or the old set alone [`STALE_VIEW_PERCENT`] of the time (its
//!   node has not learned the new layout). A round that ends without a
//!   quorum times out ([`ROUND_TIMEOUT_MS`]); back-offs draw their jitter
//!   from the run's generator; an operation that fails is an unknown
//!   outcome in the history.
//! - Each proposer node has its own clock, skewed up to [`SKEW_MS_MAX`],
//!   that never returns one time twice and carries the node id in its low
//!   `hlc::NODE_BITS` bits (as the node's HLC).
//!
//! The history is then checked with `ataman_testkit::linearizable`.
//!
//! # What a plain read sees
//! The node's plain `GET` reads the key's stored versions from a quorum
//! of its replicas, the newest winning. So when an operation is answered,
//! a majority of the old replica set (every quorum includes one) must
//! hold its value stored, or a value decided after it (a stored version
//! whose ballot is at least the first ballot the value was stored
//! under: decided values' ballots grow along the chain). Each answer is
//! checked against the acceptors' durable state at that instant; the run
//! counts the answers that fail it ([`RegisterRun::unstored_answers`]).

use super::config::*;
use crate::world::World;
use ataman_node::replication::register::acceptor::{self, Answer, KeyState, Request, Value};
use ataman_node::replication::register::ballot::Ballot;
use ataman_node::replication::register::proposer::{
    Current, Limits, Next, Output, Proposer, backoff_ms,
};
use ataman_node::replication::register::quorum::{self, Quorum};
use ataman_node::replication::register::record::{self, Persist};
use ataman_node::replication::register::wire::{self, RegisterMessage};
use ataman_testkit::linearizable::{self, Entry, Register, RegisterOp, Verdict};

type Update = Box<dyn FnMut(&Current) -> Option<Next>>;

/// What one run found.
#[derive(Debug)]
pub struct RegisterRun {
    /// The checker's verdict on the history.
    pub verdict: Verdict,
    /// The history checked.
    pub history: Vec<Entry<RegisterOp>>,
    /// Operations that succeeded.
    pub ok: usize,
    /// Operations that failed (unknown outcome).
    pub failed: usize,
    /// Operations done in one round trip (reads that found nothing in flight).
    pub one_round_trip: usize,
    /// Acceptors holding a Paxos record for the key at the end.
    pub records_held: usize,
    /// Operations answered while fewer than a majority of the old set
    /// stored their value (or a later one): a plain read right after the
    /// answer could miss it (the module doc).
    pub unstored_answers: usize,
    /// Crashes that lost a record write not synced (a promise, a prune).
    pub unsynced_lost: usize,
    /// Rounds that took a ballot another operation had used (must be 0:
    /// `proposer`, "Rules").
    pub ballots_reused: usize,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Write(u64),
    Cas { expect: Option<u64>, new: u64 },
}

#[derive(Clone)]
enum Event {
    ToAcceptor {
        to: u16,
        client: usize,
        request: Request,
    },
    ToClient {
        client: usize,
        from: u16,
        answer: Answer,
    },
    Start {
        client: usize,
    },
    RoundTimeout {
        client: usize,
        op: usize,
        attempt: u32,
    },
    Retry {
        client: usize,
        op: usize,
    },
    Crash {
        acceptor: u16,
        /// Down for a few milliseconds only (the crash right after an
        /// unsynced promise: late accepts of lower ballots still arrive).
        brief: bool,
    },
    Restart {
        acceptor: u16,
    },
}

struct InFlight {
    entry: usize,
    kind: Kind,
    proposer: Proposer<Update>,
    attempt: u32,
}

struct Client {
    node: u16,
    done: usize,
    last_seen: Option<u64>,
    current: Option<InFlight>,
    /// The last operation done: answers to its ballot still reach it.
    finished: Option<Proposer<Update>>,
}

struct Run {
    config: RegisterSimConfig,
    world: World<Event>,
    durable: Vec<Disk>,
    down: Vec<bool>,
    /// Each acceptor's floor since its last restart (`record::restart_floor`).
    restart_floors: Vec<Ballot>,
    clocks: Vec<u64>,
    skews_ms: Vec<u64>,
    clients: Vec<Client>,
    history: Vec<Entry<RegisterOp>>,
    ok: usize,
    failed: usize,
    one_round_trip: usize,
    unknown_reads: Vec<usize>,
    /// Each value's first stored ballot time.
    first_stored: std::collections::HashMap<u64, u64>,
    unstored_answers: usize,
    unsynced_lost: usize,
    /// Every ballot a round took, and the operation (history entry) that took it.
    ballots: std::collections::HashMap<Ballot, usize>,
    ballots_reused: usize,
}

/// One acceptor's state on disk, as the node keeps it: the Paxos record's
/// bytes and the key's stored version, and the node clock's durable
/// reservation. A record write the plan does not sync is applied (the
/// next step reads it) but lost by a crash unless a synced one followed.
#[derive(Debug, Clone, Default)]
struct Disk {
    record: Option<Vec<u8>>,
    /// The record as a crash leaves it: as of the last synced write.
    synced: Option<Vec<u8>>,
    stored: Option<ataman_node::peer::frame::Stamped>,
    /// The clock reservation (`hlc`): durable, only grows.
    reserved: u64,
}

impl Disk {
    /// The acceptor's state, read back as the node reads it.
    fn load(&self) -> KeyState {
        record::decode(self.record.as_deref(), self.stored.as_ref())
            .unwrap_or_else(|e| panic!("the simulation's own record does not decode: {e}"))
    }

    /// Carries out one step's writes, in `record::plan`'s order.
    fn store(&mut self, writes: Vec<Persist>) {
        for write in writes {
            match write {
                // The main engine's write: always synced before the answer.
                Persist::Committed(version) => self.stored = Some(version),
                Persist::Record { bytes, sync } => {
                    self.record = Some(bytes);
                    if sync {
                        // The register store's WAL syncs what came before too.
                        self.synced = self.record.clone();
                    }
                }
                Persist::Prune => self.record = None,
            }
        }
    }

    /// A crash: what was not synced is gone.
    fn crash(&mut self) {
        self.record = self.synced.clone();
    }
}

/// `message` encoded and decoded again, as it crosses a connection.
fn through_wire(message: RegisterMessage) -> RegisterMessage {
    let mut bytes = Vec::new();
    wire::encode(&message, &mut bytes);
    match wire::decode(&bytes) {
        Ok(Some((decoded, used))) if used == bytes.len() && decoded == message => decoded,
        other => panic!("{message:?} does not cross the wire: {other:?}"),
    }
}

/// A request as it reaches the acceptor, across the codec.
fn request_through_wire(request: Request) -> Request {
    let message = RegisterMessage::Ask {
        id: 1,
        key: b"register".to_vec(),
        request,
    };
    match through_wire(message) {
        RegisterMessage::Ask { request, .. } => request,
        other => panic!("an Ask decoded as {other:?}"),
    }
}

/// An answer as it reaches the proposer, across the codec.
fn answer_through_wire(answer: Answer) -> Answer {
    let message = RegisterMessage::Reply {
        id: 1,
        result: Ok(Some(answer)),
    };
    match through_wire(message) {
        RegisterMessage::Reply {
            result: Ok(Some(answer)),
            ..
        } => answer,
        other => panic!("a Reply decoded as {other:?}"),
    }
}

/// The ballot an answer names.
fn answered(answer: &Answer) -> Option<ataman_node::replication::register::Ballot> {
    Some(match answer {
        Answer::Promise { ballot, .. } | Answer::Refused { ballot, .. } => *ballot,
        Answer::Accepted(b) | Answer::Committed(b) => *b,
    })
}

fn encode(v: u64) -> Value {
    Some(v.to_le_bytes().to_vec())
}

/// A write of `v` (no deadline: the simulation's values do not expire).
fn write(v: u64) -> Next {
    Next {
        value: encode(v),
        deadline_ms: None,
    }
}

fn decode(v: &Value) -> Option<u64> {
    v.as_ref().map(|bytes| {
        let array: [u8; 8] = bytes
            .as_slice()
            .try_into()
            .unwrap_or_else(|_| panic!("the simulation writes 8-byte values only: {bytes:?}"));
        u64::from_le_bytes(array)
    })
}

/// Runs one seed.
pub fn run_register(seed: u64, config: &RegisterSimConfig) -> RegisterRun {
    let mut world = World::new(seed);
    let skews_ms = (0..ACCEPTORS)
        .map(|_| world.rng.below(SKEW_MS_MAX + 1))
        .collect();
    let clients = (0..config.clients)
        .map(|i| Client {
            node: (i % ACCEPTORS) as u16,
            done: 0,
            last_seen: None,
            current: None,
            finished: None,
        })
        .collect();
    let mut run = Run {
        config: config.clone(),
        world,
        durable: vec![Disk::default(); ACCEPTORS],
        down: vec![false; ACCEPTORS],
        restart_floors: vec![Ballot::ZERO; ACCEPTORS],
        clocks: vec![0; ACCEPTORS],
        skews_ms,
        clients,
        history: Vec::new(),
        ok: 0,
        failed: 0,
        one_round_trip: 0,
        unknown_reads: Vec::new(),
        first_stored: std::collections::HashMap::new(),
        unstored_answers: 0,
        unsynced_lost: 0,
        ballots: std::collections::HashMap::new(),
        ballots_reused: 0,
    };
    for client in 0..config.clients {
        let after = run.world.rng.below(THINK_MS_MAX);
        run.world.schedule(after, Event::Start { client });
    }
    let span_ms = (config.ops_per_client as u64) * 40 + TRANSITION_AT_MS;
    for _ in 0..config.crashes {
        let at = run.world.rng.below(span_ms);
        let acceptor = run.world.rng.below(ACCEPTORS as u64) as u16;
        run.world.schedule(
            at,
            Event::Crash {
                acceptor,
                brief: false,
            },
        );
    }
    while let Some(event) = run.world.pop() {
        run.handle(event);
    }
    assert!(
        !run.world.exhausted(),
        "seed {seed}: the event bound was hit"
    );
    let history: Vec<Entry<RegisterOp>> = run
        .history
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !run.unknown_reads.contains(i))
        .map(|(_, e)| e)
        .collect();
    let verdict = linearizable::check(&Register, &history);
    RegisterRun {
        verdict,
        history,
        ok: run.ok,
        failed: run.failed,
        one_round_trip: run.one_round_trip,
        records_held: run
            .durable
            .iter()
            .filter(|d| d.load().holds_record())
            .count(),
        unstored_answers: run.unstored_answers,
        unsynced_lost: run.unsynced_lost,
        ballots_reused: run.ballots_reused,
    }
}

impl Run {
    fn handle(&mut self, event: Event) {
        match event {
            Event::ToAcceptor {
                to,
                client,
                request,
            } => self.at_acceptor(to, client, &request_through_wire(request)),
            Event::ToClient {
                client,
                from,
                answer,
            } => {
                let answer = answer_through_wire(answer);
                let c = &mut self.clients[client];
                let current = c
                    .current
                    .as_mut()
                    .filter(|f| Some(f.proposer.ballot()) == answered(&answer));
                if let Some(flight) = current {
                    let out = flight.proposer.on_answer(from, answer);
                    self.carry_out(client, out);
                } else if let Some(finished) = c.finished.as_mut() {
                    // A late promise to a one-round read (released), a
                    // commit's acknowledgement.
                    let _ = finished.on_answer(from, answer);
                    for (to, request) in finished.take_outbox() {
                        self.send(Event::ToAcceptor {
                            to,
                            client,
                            request,
                        });
                    }
                }
            }
            Event::Start { client } => self.start(client),
            Event::RoundTimeout {
                client,
                op,
                attempt,
            } => {
                let Some(flight) = self.clients[client].current.as_mut() else {
                    return;
                };
                if flight.entry != op || flight.attempt != attempt {
                    return;
                }
                let out = flight.proposer.timed_out();
                self.carry_out(client, out);
            }
            Event::Retry { client, op } => {
                let Some(seen) = self.clients[client]
                    .current
                    .as_ref()
                    .map(|f| f.proposer.seen())
                else {
                    return;
                };
                let now = self.now_above(self.clients[client].node, seen.time);
                let Some(flight) = self.clients[client].current.as_mut() else {
                    return;
                };
                if flight.entry != op {
                    return;
                }
                flight.attempt += 1;
                flight.proposer.retry(now);
                let ballot = flight.proposer.ballot();
                self.note_ballot(ballot, op);
                self.send_outbox(client);
            }
            Event::Crash { acceptor, brief } => {
                // One acceptor down at a time: every set keeps a majority.
                if self.down.iter().any(|d| *d) {
                    return;
                }
                self.down[usize::from(acceptor)] = true;
                let disk = &mut self.durable[usize::from(acceptor)];
                self.unsynced_lost += usize::from(disk.record != disk.synced);
                disk.crash();
                let down_max = if brief {
                    BRIEF_DOWN_MS_MAX
                } else {
                    self.config.down_ms_max
                };
                let after = self.world.rng.between(1, down_max);
                self.world.schedule(after, Event::Restart { acceptor });
            }
            Event::Restart { acceptor } => {
                let i = usize::from(acceptor);
                self.down[i] = false;
                self.restart_floors[i] = match self.config.bug {
                    Some(RegisterBug::ForgetsPromises) => Ballot::ZERO,
                    _ => record::restart_floor(Some(self.durable[i].reserved)),
                };
            }
        }
    }

    /// The node's clock: skewed, never the same time twice.
    /// The node's clock after it observed `above` (a ballot's time, as the
    /// node's HLC observes the operation's highest ballot seen; the planted
    /// `register-reuses-ballots` leaves that out).
    fn now_above(&mut self, node: u16, above: u64) -> u64 {
        let i = usize::from(node);
        if self.config.bug != Some(RegisterBug::ReusesBallots) {
            self.clocks[i] = self.clocks[i].max(above >> ataman_node::hlc::NODE_BITS);
        }
        self.now_for(node)
    }

    /// Records that operation `entry` uses `ballot`; another operation
    /// that used it before is a reuse ([`RegisterRun::ballots_reused`]).
    fn note_ballot(&mut self, ballot: Ballot, entry: usize) {
        if *self.ballots.entry(ballot).or_insert(entry) != entry {
            self.ballots_reused += 1;
        }
    }

    fn now_for(&mut self, node: u16) -> u64 {
        let i = usize::from(node);
        let wall = (self.world.now_ms() + self.skews_ms[i]) * 1000;
        self.clocks[i] = (self.clocks[i] + 1).max(wall);
        (self.clocks[i] << ataman_node::hlc::NODE_BITS) | u64::from(node)
    }

    fn at_acceptor(&mut self, to: u16, client: usize, request: &Request) {
        let i = usize::from(to);
        if self.down[i] {
            return;
        }
        let mode = match self.config.bug {
            Some(RegisterBug::AcceptsBelowPromise) => acceptor::Mode::PlantedAcceptsBelowPromise,
            _ => acceptor::Mode::Sound,
        };
        let before = self.durable[i].load();
        let step = acceptor::step_above(&before, request, mode, self.restart_floors[i]);
        // Stored (and, where the plan says, synced) before the answer leaves.
        let writes = record::plan(&before, &step, self.durable[i].reserved);
        let unsynced = writes
            .iter()
            .any(|w| matches!(w, Persist::Record { sync: false, .. }));
        if unsynced && self.world.rng.below(1000) < self.config.crash_after_unsynced_per_mille {
            self.world.schedule(
                0,
                Event::Crash {
                    acceptor: to,
                    brief: true,
                },
            );
        }
        if writes.iter().any(|w| matches!(w, Persist::Record { .. })) {
            // The node stamps a record write with its clock, which has
            // observed the ballot: the reservation then covers the promise
            // and runs up to a lease ahead (drawn here, so some later
            // proposers' ballots pass it and take the synced path).
            let lease = self.world.rng.below(LEASE_MAX) << ataman_node::hlc::NODE_BITS;
            let reserved = &mut self.durable[i].reserved;
            *reserved = (*reserved).max(step.next.promised.time.saturating_add(lease));
        }
        for w in &writes {
            if let Persist::Committed(version) = w
                && let Some(v) = decode(&version.value)
            {
                let first = self.first_stored.entry(v).or_insert(version.ts);
                *first = (*first).min(version.ts);
            }
        }
        self.durable[i].store(writes);
        assert_eq!(
            self.durable[i].load(),
            record::as_stored(&step.next),
            "what is on disk reads back as the step's state"
        );
        assert!(
            self.durable[i].record.is_some() || !step.next.holds_record(),
            "a record is kept while the acceptor holds one (and one a crash \
             brought back after its unsynced prune may linger, read as none)"
        );
        if let Some(answer) = step.answer {
            self.send(Event::ToClient {
                client,
                from: to,
                answer,
            });
        }
    }

    /// Puts `event` (a message) on the network: lost, once, or twice,
    /// each copy with its own delay.
    fn send(&mut self, event: Event) {
        let rng = &mut self.world.rng;
        if rng.below(1000) < self.config.loss_per_mille {
            return;
        }
        if rng.below(1000) < self.config.duplicate_per_mille {
            let delay = self.world.rng.between(DELAY_MS_MIN, DELAY_MS_MAX);
            self.world.schedule(delay, event.clone());
        }
        let delay = self.world.rng.between(DELAY_MS_MIN, DELAY_MS_MAX);
        self.world.schedule(delay, event);
    }

    fn start(&mut self, client: usize) {
        let c = &self.clients[client];
        if c.done >= self.config.ops_per_client || c.current.is_some() {
            return;
        }
        let node = c.node;
        let last_seen = c.last_seen;
        let unique = (client as u64 + 1) * 1000 + c.done as u64;
        let kind = match self.world.rng.below(3) {
            0 => Kind::Read,
            1 => Kind::Write(unique),
            _ => Kind::Cas {
                expect: last_seen,
                new: unique,
            },
        };
        let update: Update = match kind {
            Kind::Read => Box::new(|_: &Current| None),
            Kind::Write(v) => Box::new(move |_: &Current| Some(write(v))),
            Kind::Cas { expect, new } => {
                Box::new(move |cur: &Current| (decode(&cur.value) == expect).then(|| write(new)))
            }
        };
        let now_ms = self.world.now_ms();
        let sets = if now_ms < TRANSITION_AT_MS || self.world.rng.percent(STALE_VIEW_PERCENT) {
            vec![OLD_SET.to_vec()]
        } else {
            vec![OLD_SET.to_vec(), NEW_SET.to_vec()]
        };
        let mode = match self.config.bug {
            Some(RegisterBug::QuorumNewSetOnly) => quorum::Mode::PlantedNewSetOnly,
            _ => quorum::Mode::Sound,
        };
        let quorum = Quorum::new(sets, mode).unwrap_or_else(|e| panic!("fixed sets: {e}"));
        let limits = Limits {
            planted_replies_before_commit: self.config.bug
                == Some(RegisterBug::RepliesBeforeCommit),
            ..Limits::default()
        };
        let mut proposer = Proposer::new(node, quorum, limits, update);
        let op = match kind {
            Kind::Read => RegisterOp::Read(None),
            Kind::Write(v) => RegisterOp::Write(v),
            Kind::Cas { expect, new } => RegisterOp::Cas {
                expect,
                new,
                swapped: None,
            },
        };
        let entry = self.history.len();
        self.history.push(Entry {
            op,
            call: now_ms,
            ret: None,
        });
        let now = self.now_above(node, proposer.seen().time);
        proposer.start(now);
        self.note_ballot(proposer.ballot(), entry);
        self.clients[client].current = Some(InFlight {
            entry,
            kind,
            proposer,
            attempt: 1,
        });
        self.send_outbox(client);
    }

    fn send_outbox(&mut self, client: usize) {
        let Some(flight) = self.clients[client].current.as_mut() else {
            return;
        };
        let (entry, attempt) = (flight.entry, flight.attempt);
        for (to, request) in flight.proposer.take_outbox() {
            self.send(Event::ToAcceptor {
                to,
                client,
                request,
            });
        }
        self.world.schedule(
            ROUND_TIMEOUT_MS,
            Event::RoundTimeout {
                client,
                op: entry,
                attempt,
            },
        );
    }

    fn carry_out(&mut self, client: usize, out: Output) {
        match out {
            Output::Wait => {
                // Commits and releases after the outcome still go out.
                self.flush_after_outcome(client);
            }
            Output::Backoff { attempt } => {
                let random = self.world.rng.next_u64();
                let Some(flight) = self.clients[client].current.as_ref() else {
                    return;
                };
                let op = flight.entry;
                let wait = backoff_ms(attempt, random).max(1);
                self.world.schedule(wait, Event::Retry { client, op });
            }
            Output::Done {
                before,
                written,
                round_trips,
            } => {
                let Some(flight) = self.clients[client].current.as_mut() else {
                    return;
                };
                let (entry, kind) = (flight.entry, flight.kind);
                let outbox = flight.proposer.take_outbox();
                for (to, request) in outbox {
                    self.send(Event::ToAcceptor {
                        to,
                        client,
                        request,
                    });
                }
                let before = decode(&before.value);
                let e = &mut self.history[entry];
                e.ret = Some(self.world.now_ms());
                e.op = match kind {
                    Kind::Read => RegisterOp::Read(before),
                    Kind::Write(v) => RegisterOp::Write(v),
                    Kind::Cas { expect, new } => RegisterOp::Cas {
                        expect,
                        new,
                        swapped: Some(written),
                    },
                };
                self.ok += 1;
                if round_trips == 1 {
                    self.one_round_trip += 1;
                }
                let answered = match kind {
                    Kind::Write(v) => Some(v),
                    Kind::Cas { new, .. } if written => Some(new),
                    _ => before,
                };
                if !self.stored_at_a_majority(answered) {
                    self.unstored_answers += 1;
                }
                self.clients[client].last_seen = answered;
                self.finish(client);
            }
            Output::Failed(_) => {
                let Some(flight) = self.clients[client].current.as_ref() else {
                    return;
                };
                if matches!(flight.kind, Kind::Read) {
                    // A read whose result is unknown says nothing.
                    self.unknown_reads.push(flight.entry);
                }
                self.failed += 1;
                self.finish(client);
            }
        }
    }

    /// A majority of the old set holds `value` stored, or a value decided
    /// after it (the module doc); trivially so for a register never written.
    fn stored_at_a_majority(&self, value: Option<u64>) -> bool {
        let Some(v) = value else {
            return true;
        };
        let Some(&first) = self.first_stored.get(&v) else {
            return false;
        };
        let holding = OLD_SET
            .iter()
            .filter(|&&id| {
                self.durable[usize::from(id)]
                    .stored
                    .as_ref()
                    .is_some_and(|s| s.ts >= first)
            })
            .count();
        holding > OLD_SET.len() / 2
    }

    /// The operation is over: the client thinks, then starts its next.
    fn finish(&mut self, client: usize) {
        let c = &mut self.clients[client];
        c.finished = c.current.take().map(|f| f.proposer);
        c.done += 1;
        let after = self.world.rng.below(THINK_MS_MAX);
        self.world.schedule(after, Event::Start { client });
    }

    fn flush_after_outcome(&mut self, client: usize) {
        let Some(flight) = self.clients[client].current.as_mut() else {
            return;
        };
        for (to, request) in flight.proposer.take_outbox() {
            self.send(Event::ToAcceptor {
                to,
                client,
                request,
            });
        }
    }
}
