//! From a parsed request to the work it asks for, whatever protocol
//! carried it: a read from the engine's read view, a write handed to the
//! engine, a request handed to this thread's replication coordinator, a
//! document rendered, or a range to stream.
//!
//! The connection's protocol parses a [`Command`] and renders the
//! [`Answer`] the work ends with ([`super::render`] for HTTP); nothing here
//! knows either (docs/ARCHITECTURE.md, "Where a new protocol plugs in").

use super::answer::{self, Answer, Awaited, Format};
use crate::peer::frame::Stamped;
use crate::replication::coordinator::ReplicaOp;
use crate::replication::{ReplyTo, Request};
use crate::state::{NetContext, NodeShared, Target};
use ataman_engine::{ScanIter, Submission, WriteBatch};
use std::borrow::Cow;

/// A request, validated, whatever protocol carried it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// Read a key from `ack` of `from` replicas.
    Get {
        /// The key (lent by the connection's read buffer when the protocol
        /// carries it unescaped: RESP).
        key: Cow<'a, [u8]>,
        /// Replicas that must answer.
        ack: u32,
        /// Replicas asked.
        from: u32,
    },
    /// Read a key's newest version, its deadline included
    /// ([`crate::net::answer::Answer::ValueUntil`]; RESP's `TTL`, `PTTL`).
    GetVersion {
        /// The key (lent by the connection's read buffer when the protocol
        /// carries it unescaped: RESP).
        key: Cow<'a, [u8]>,
        /// Replicas that must answer.
        ack: u32,
        /// Replicas asked.
        from: u32,
    },
    /// Write `value` as the key's value, or delete the key (`None`).
    Write {
        /// The key (lent by the connection's read buffer when the protocol
        /// carries it unescaped: RESP).
        key: Cow<'a, [u8]>,
        /// The value (lent by the connection's read buffer); `None`: delete.
        value: Option<&'a [u8]>,
        /// Replicas that must answer.
        ack: u32,
        /// Replicas asked.
        from: u32,
        /// When a put's value expires (a delete ignores it).
        expiry: crate::ttl::Expiry,
    },
    /// Stream the live entries of `[start, end)`.
    Range {
        /// First key (inclusive).
        start: Vec<u8>,
        /// End key (exclusive), if any.
        end: Option<Vec<u8>>,
    },
    /// Stream the live entries of `[start, end)` of the whole cluster.
    ClusterRange(crate::range::Plan),
    /// Stream this node's versions of `[start, end)` for a peer's cluster
    /// range (tombstones and timestamps included).
    InternalRange {
        /// First key (inclusive).
        start: Vec<u8>,
        /// End key (exclusive), if any.
        end: Option<Vec<u8>>,
    },
    /// Health.
    Status,
    /// `GET /livez` (`super::health`).
    Livez,
    /// `GET /readyz` (`super::health`).
    Readyz,
    /// `GET /v0/cluster/health` (`super::health`).
    ClusterHealth,
    /// This node's view of the cluster.
    Cluster,
    /// The layout this node runs with.
    Layout,
    /// Change the layout (`POST /v0/layout`; on a layout worker).
    LayoutChange {
        /// The version asked for.
        version: u64,
        /// What changes.
        change: crate::cluster::layout::Change,
    },
    /// What this node would send for a change (`GET /v0/layout/plan`;
    /// a scan, on a layout worker).
    LayoutPlan {
        /// The change planned.
        change: crate::cluster::layout::Change,
    },
    /// A peer's layout agreement message (on a layout worker).
    InternalLayout(&'a [u8]),
    /// Start an anti-entropy round now.
    RepairStart,
    /// The anti-entropy rounds' state.
    RepairStatus,
    /// The metrics page.
    Metrics,
    /// Read or change the slow log (`GET`/`POST /v0/slowlog`, `SLOWLOG`,
    /// `CONFIG SET slowlog-…`).
    Slowlog(crate::slowlog::Op),
    /// A request to `/v0/backup` and its body (`super::backup_http`):
    /// a checkpoint (on a job, `crate::backup::job`), the list, a chunk
    /// of a checkpoint's file, a removal, a restore's versions.
    Backup(crate::api::BackupAsk, &'a [u8]),
    /// When the last checkpoint completed (`LASTSAVE`; only admitted
    /// through [`super::authorize`], answered by the RESP side).
    BackupLastSave,
    /// The hot keys (`GET /v0/hotkeys`): at most `limit`, this node's or
    /// the cluster's.
    HotKeys {
        /// Keys listed at most.
        limit: usize,
        /// Merge every member's report (on a range thread).
        cluster: bool,
    },
    /// A peer's ask for this node's whole hot-key report.
    InternalHotKeys,
    /// A file of the dashboard (`GET /ui`); `None`: a missing one (404).
    Ui(Option<crate::ui::Asset>),
    /// The recent figures (`GET /v0/recent`), this node's or every member's.
    Recent {
        /// Ask every member (on a layout worker).
        cluster: bool,
    },
    /// A peer's ask for this node's recent figures.
    InternalRecent,
    /// The cluster's slow log (`GET /v0/slowlog?cluster=1`), on a layout worker.
    ClusterSlowlog {
        /// Entries listed at most.
        limit: usize,
    },
    /// A peer's ask for this node's newest `limit` slow-log entries.
    InternalSlowlog {
        /// Entries listed at most.
        limit: usize,
    },
}

/// What became of a command.
pub enum Dispatched {
    /// Answered at once.
    Now(Answer),
    /// Handed to the engine or the coordinator: the answer comes with the
    /// completion ([`answer::written`]) or the verdict ([`answer::decided`])
    /// addressed to the command's [`ReplyTo`].
    Later(Awaited),
    /// A range to stream, entry by entry, encoded as the [`Encoding`] says.
    Stream(Box<ScanIter>, Encoding),
    /// A cluster range: its range thread feeds the answer.
    Feed(crate::range::FeedReceiver),
    /// A layout request: a layout worker hands back the whole answer.
    Job(crate::layout_io::endpoints::LayoutJob),
}

/// How a streamed range's entries are written, one chunk each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `key \n value` of live entries (`/v0/entities`).
    Values,
    /// A version with its timestamp, tombstones too (`crate::range::wire`).
    Versions,
}

impl<'a> Command<'a> {
    /// A read of `key` from `ack` of `from` replicas.
    pub fn get(key: Cow<'a, [u8]>, ack: u32, from: u32) -> Self {
        Command::Get { key, ack, from }
    }
}

/// Carries out `command`; work handed on is answered to `reply_to`.
/// Replicated requests are queued in `replicated` (started together at the
/// end of the loop iteration), engine writes in the context's pending writes.
pub fn dispatch(
    ctx: &NetContext,
    replicated: &mut Vec<Request>,
    reply_to: ReplyTo,
    command: Command<'_>,
) -> Dispatched {
    let shared = &ctx.shared;
    if let Some(refused) = super::membership_gate::refusal(&shared.transition, &command) {
        return Dispatched::Now(refused);
    }
    if let Command::Get { key, .. } | Command::GetVersion { key, .. } | Command::Write { key, .. } =
        &command
    {
        note_hot(ctx, key);
    }
    match command {
        Command::Status => Dispatched::Now(super::membership_gate::status(
            &shared.transition,
            super::membership_gate::self_url(shared),
        )),
        Command::Livez => Dispatched::Now(super::health::livez(shared)),
        Command::Readyz => Dispatched::Now(super::health::readyz(shared)),
        Command::ClusterHealth => Dispatched::Now(super::health::cluster_health(shared)),
        Command::Cluster => {
            let text = crate::replication::status::render_json(shared);
            Dispatched::Now(Answer::Document(Format::Json, text))
        }
        Command::Layout => {
            let text = super::membership_gate::layout(shared);
            Dispatched::Now(Answer::Document(Format::Json, text))
        }
        Command::RepairStart => {
            let round = shared.antientropy.status.request();
            Dispatched::Now(Answer::Started(format!("{{\"round\":{round}}}")))
        }
        Command::RepairStatus => {
            let status = &shared.antientropy.status;
            let text = status.render_json_refilling(shared.refill.active());
            Dispatched::Now(Answer::Document(Format::Json, text))
        }
        Command::Metrics => {
            let mut text = shared.metrics.render(&ctx.db);
            crate::replication::status::render_metrics(&mut text, shared);
            shared.antientropy.metrics.render(&mut text);
            shared.antientropy.copy.render(&mut text);
            shared.auth.metrics.render(&mut text);
            shared.ranges.render(&mut text);
            shared.backups.render_metrics(&mut text);
            if let Some(membership) = &shared.membership {
                crate::layout_io::endpoints::render_metrics(&mut text, membership);
            }
            super::resp::render_metrics(&mut text, &shared.metrics);
            if let Some(m) = &shared.membership {
                crate::cluster::transition_state::render_metrics(&mut text, m);
                shared.transition.cleanup.render(&mut text);
            }
            Dispatched::Now(Answer::Document(Format::Metrics, text))
        }
        Command::Slowlog(op) => Dispatched::Now(slowlog(&shared.metrics.slowlog, op)),
        Command::Backup(ask, body) => {
            let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
            super::backup_http::answer(shared, wake, ask, body)
        }
        Command::BackupLastSave => Dispatched::Now(Answer::Document(
            Format::Json,
            format!("{{\"last_save_s\":{}}}", shared.backups.last_save_s()),
        )),
        Command::HotKeys { limit, cluster } => {
            super::hotkeys::answer(ctx, reply_to, limit, cluster)
        }
        Command::InternalHotKeys => Dispatched::Now(super::hotkeys::internal(ctx)),
        Command::Ui(asset) => Dispatched::Now(super::recent::asset(shared, asset)),
        Command::Recent { cluster } => super::recent::answer(ctx, reply_to, cluster),
        Command::InternalRecent => Dispatched::Now(super::recent::internal(ctx)),
        Command::ClusterSlowlog { limit } => super::slowlog_cluster::answer(ctx, reply_to, limit),
        Command::InternalSlowlog { limit } => {
            Dispatched::Now(super::slowlog_cluster::internal(ctx, limit))
        }
        Command::Get { key, ack, from } if !local_only(ctx, &key, ack, from, false) => {
            replicated.push(replicated_request(
                reply_to,
                key.into_owned(),
                ReplicaOp::Read,
                ack,
                from,
            ));
            Dispatched::Later(Awaited::Read)
        }
        Command::GetVersion { key, ack, from } if !local_only(ctx, &key, ack, from, false) => {
            replicated.push(replicated_request(
                reply_to,
                key.into_owned(),
                ReplicaOp::Read,
                ack,
                from,
            ));
            Dispatched::Later(Awaited::ReadVersion)
        }
        Command::Write {
            key,
            value,
            ack,
            from,
            expiry,
        } if !local_only(ctx, &key, ack, from, true) => {
            let ts = match shared.hlc.now() {
                Ok(ts) => ts,
                Err(e) => return Dispatched::Now(answer::busy(e.to_string())),
            };
            let deadline_ms = match stamp_deadline(ctx, ts, expiry) {
                Ok(d) => d,
                Err(answer) => return Dispatched::Now(answer),
            };
            let version = Stamped {
                ts,
                value: value.map(<[u8]>::to_vec),
                deadline_ms,
            };
            let kind = ReplicaOp::Write(version);
            replicated.push(replicated_request(
                reply_to,
                key.into_owned(),
                kind,
                ack,
                from,
            ));
            Dispatched::Later(awaited_write(value, ts))
        }
        Command::ClusterRange(plan) => cluster_range(ctx, reply_to, plan),
        Command::LayoutChange { version, change } => {
            let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
            let started = crate::layout_io::endpoints::start_change(shared, wake, version, change);
            started.map_or_else(layout_now, Dispatched::Job)
        }
        Command::LayoutPlan { change } => {
            let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
            let started = crate::layout_io::endpoints::start_plan(shared, wake, change);
            started.map_or_else(layout_now, Dispatched::Job)
        }
        Command::InternalLayout(body) => {
            let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
            let started = crate::layout_io::endpoints::start_internal(shared, wake, body);
            started.map_or_else(layout_now, Dispatched::Job)
        }
        Command::Get { .. }
        | Command::GetVersion { .. }
        | Command::Range { .. }
        | Command::InternalRange { .. }
            if shared.refill.active() =>
        {
            Dispatched::Now(answer::busy(crate::refill::REFUSAL))
        }
        Command::Get { key, .. } => {
            Dispatched::Now(answer::read_lent(&ctx.db, &key, &ctx.value_spare))
        }
        Command::GetVersion { key, .. } => Dispatched::Now(answer::read_version(ctx.db.get(&key))),
        Command::Write {
            key, value, expiry, ..
        } => write_locally(ctx, reply_to, &key, value, expiry),
        Command::Range { start, end } => match ctx.db.scan(&start, end.as_deref(), false) {
            Ok(iter) => Dispatched::Stream(Box::new(iter), Encoding::Values),
            Err(e) => Dispatched::Now(answer::scan_failed(&e)),
        },
        Command::InternalRange { start, end } => match ctx.db.scan(&start, end.as_deref(), true) {
            Ok(iter) => Dispatched::Stream(Box::new(iter), Encoding::Versions),
            Err(e) => Dispatched::Now(answer::scan_failed(&e)),
        },
    }
}

/// A cluster range: this node's own stream when it alone covers every
/// key (`sources_needed` is 1: `ack=1` of `from` = every node, and this
/// node is in the read set), otherwise a range thread merging enough
/// nodes of the read set (`crate::range`).
fn cluster_range(ctx: &NetContext, reply_to: ReplyTo, plan: crate::range::Plan) -> Dispatched {
    let shared = &ctx.shared;
    let placement = ctx.placement();
    let read_set = crate::range::coverage::read_set(&placement);
    let (ack, from) = (plan.ack as usize, plan.from as usize);
    let alone = match shared.config.planted_bug {
        Some(crate::config::PlantedBug::RangeAloneOutsideReadSet) => {
            crate::range::coverage::answers_alone_planted(&read_set, ack, from)
        }
        _ => crate::range::coverage::answers_alone(&read_set, placement.self_index(), ack, from),
    };
    if alone && !shared.refill.active() {
        let local = Command::Range {
            start: plan.start,
            end: plan.end,
        };
        return dispatch(ctx, &mut Vec::new(), reply_to, local);
    }
    let wake = ctx.feed_wake(reply_to.token, reply_to.generation);
    match crate::range::feed::start(shared, NodeShared::range_node, wake, plan) {
        Ok(feed) => Dispatched::Feed(feed),
        Err(busy) => Dispatched::Now(answer::busy(busy.to_string())),
    }
}

/// A layout request refused at once.
fn layout_now(refused: crate::layout_io::endpoints::Refused) -> Dispatched {
    use crate::layout_io::endpoints::Refused;
    Dispatched::Now(match refused {
        Refused::Invalid(why) => Answer::Failed(answer::Failure::Invalid, why),
        Refused::Busy(why) => answer::busy(why),
    })
}

/// True when the request can be served by this node alone, without a
/// coordinator: a single node, or `ack = 1` with this node the only
/// replica (of a write: in every live version).
pub(super) fn local_only(ctx: &NetContext, key: &[u8], ack: u32, from: u32, write: bool) -> bool {
    let placement = ctx.placement();
    if placement.len() == 1 && placement.is_live_member(placement.self_index()) {
        return true;
    }
    if ack != 1 || from != 1 {
        return false;
    }
    let replicas = if write {
        placement.write(key, 1)
    } else {
        placement.read(key, 1)
    };
    replicas.replicas == [placement.self_index()]
}

/// True when this node is the only replica of `key` in every live layout at
/// the layout's replication factor `R`: the one case an atomic
/// read-modify-write runs here. Decided from the layout, never from the
/// connection's `from` (`ATAMAN.REPLICATION 1 1` must not make a key with
/// other replicas look local: its update would start from a stale value).
pub(crate) fn rmw_local_only(ctx: &NetContext, key: &[u8]) -> bool {
    let placement = ctx.placement();
    if placement.len() == 1 && placement.is_live_member(placement.self_index()) {
        return true;
    }
    let r = placement.replication_factor().max(1);
    placement.write(key, r).replicas == [placement.self_index()]
}

/// What a write of `value` (`None`: a delete) waits for.
fn awaited_write(value: Option<&[u8]>, ts: u64) -> Awaited {
    match value {
        Some(_) => Awaited::Put(ts),
        None => Awaited::Delete(ts),
    }
}

fn replicated_request(
    reply_to: ReplyTo,
    key: Vec<u8>,
    kind: ReplicaOp,
    ack: u32,
    from: u32,
) -> Request {
    Request {
        reply_to,
        key,
        kind,
        ack: ack as usize,
        from: from as usize,
    }
}

/// Starts an atomic read-modify-write of one key: on this node when its
/// only replica is this node ([`super::rmw_local`]), else through the
/// consensus register ([`super::register_rmw`]). RESP's
/// read-modify-write commands and HTTP's conditional `PUT` and `DELETE`
/// (`super::rmw_local::Op::Conditional`) both start here; the register
/// does not take HTTP's conditional writes yet (501, below).
pub fn rmw(
    ctx: &NetContext,
    reply_to: ReplyTo,
    update: &super::rmw_local::Update,
) -> super::rmw_local::Started {
    note_hot(ctx, &update.key);
    if rmw_local_only(ctx, &update.key) {
        return super::rmw_local::start(ctx, reply_to, update);
    }
    if ctx.shared.config.consensus_register {
        return super::register_rmw::start(ctx, reply_to, update);
    }
    super::rmw_local::Started::Refused(Answer::Failed(
        answer::Failure::NotImplemented,
        "atomic read-modify-write of a key with replicas on other nodes is refused: this \
         node runs with --consensus-register=false (the consensus register serves it \
         otherwise); this node serves it for keys whose only replica is this node"
            .into(),
    ))
}

/// How `WATCH` of a key is served (`crate::net::resp::watch`).
#[derive(Debug)]
pub enum WatchStart {
    /// Its only replica is this node: what it sees now.
    Seen(crate::net::resp::watch::Seen),
    /// It has replicas on other nodes: a read through the consensus
    /// register ([`super::rmw_local::Op::Watch`], `net::register_rmw`).
    Register,
}

/// What `WATCH` of `key` does: read here when its only replica is this
/// node, through the consensus register otherwise, refused as [`rmw`] is
/// when the register is off (the `EXEC` it guards could not run).
pub fn watch(ctx: &NetContext, key: &[u8]) -> Result<WatchStart, Answer> {
    if rmw_local_only(ctx, key) {
        return super::rmw_local::seen(ctx, key).map(WatchStart::Seen);
    }
    if ctx.shared.config.consensus_register {
        return Ok(WatchStart::Register);
    }
    Err(Answer::Failed(
        answer::Failure::NotImplemented,
        "WATCH of a key with replicas on other nodes is refused: this node runs with \
         --consensus-register=false (the consensus register serves it otherwise); this node \
         serves it for keys whose only replica is this node"
            .into(),
    ))
}

/// The absolute deadline of a write stamped `ts` with `expiry`, stamped
/// here once (crate::ttl); a deadline past the maximum is a 400.
pub(super) fn stamp_deadline(
    ctx: &NetContext,
    ts: u64,
    expiry: crate::ttl::Expiry,
) -> Result<Option<u64>, Answer> {
    expiry
        .as_planted(ctx.shared.config.planted_bug)
        .deadline_ms(ts)
        .map_err(|why| Answer::Failed(answer::Failure::Invalid, why))
}

/// Stamps a write of `value` (`None`: a delete) and queues it for the engine; its completion
/// comes back to `reply_to`.
fn write_locally(
    ctx: &NetContext,
    reply_to: ReplyTo,
    key: &[u8],
    value: Option<&[u8]>,
    expiry: crate::ttl::Expiry,
) -> Dispatched {
    let ts = match ctx.shared.hlc.now() {
        Ok(ts) => ts,
        Err(e) => return Dispatched::Now(answer::busy(e.to_string())),
    };
    let deadline_ms = match stamp_deadline(ctx, ts, expiry) {
        Ok(d) => d,
        Err(answer) => return Dispatched::Now(answer),
    };
    let mut batch = WriteBatch::with_capacity_for_one(key.len(), value.map_or(0, <[u8]>::len));
    match (value, deadline_ms) {
        (Some(value), Some(deadline_ms)) => batch.put_expiring(key, value, ts, deadline_ms),
        (Some(value), None) => batch.put(key, value, ts),
        (None, _) => batch.delete(key, ts),
    };
    let callback = ctx.completions.callback(Target::Slot {
        token: reply_to.token,
        generation: reply_to.generation,
        slot: reply_to.slot,
    });
    // Collected and handed to the engine once per loop iteration
    // (`Loop::submit_pending`): one hand-off, one wake-up of the tx thread
    // for all of them.
    ctx.pending_writes.borrow_mut().push(Submission {
        batch,
        durability: ctx.shared.write_durability,
        done: callback,
        condition: None,
    });
    Dispatched::Later(awaited_write(value, ts))
}

/// Samples a client request on `key` for the hot keys: one in
/// [`crate::hotkeys::sampler::SAMPLE_EVERY`] passes this thread's gate and
/// takes its thread's summary's lock.
fn note_hot(ctx: &NetContext, key: &[u8]) {
    let mut gate = ctx.hot_gate.get();
    let sampled = gate.pass();
    ctx.hot_gate.set(gate);
    if sampled {
        let hot = &ctx.shared.metrics.hotkeys;
        hot.note(ctx.index, key, hot.ms_at(ctx.now.get()));
    }
}

/// `GET /v0/slowlog` (the newest entries) and `POST /v0/slowlog` (a
/// change, answered with the settings it left).
fn slowlog(log: &crate::slowlog::SlowLog, op: crate::slowlog::Op) -> Answer {
    use crate::slowlog::{Op, render_json};
    let count = match op {
        Op::Get { count } => count,
        Op::Len => 0,
        Op::Reset | Op::Set { .. } => match log.apply(op) {
            Ok(()) => 0,
            Err(why) => return Answer::Failed(answer::Failure::Invalid, why),
        },
    };
    Answer::Document(Format::Json, render_json(log, count))
}
