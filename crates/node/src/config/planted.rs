//! The bugs a node can be started with on purpose (`--debug-planted-bug`,
//! in a build with the `planted-bugs` feature): each the negative control
//! of a test or of the fault harness (docs/API.md "Test hooks").

use super::NodeConfig;

/// `--debug-planted-bug`, in a build with the `planted-bugs` feature (the
/// tests' build of `ataman`): a deliberate bug for the fault harness's
/// negative control.
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PlantedBugArgs {
    /// Test hook: a deliberate bug for a negative control: `ack-before-wal`, `connection-panic`, `copy-skips-partitioned-leaving-node`, `joined-takes-id-zero`, `add-checks-only-status`, `range-alone-outside-read-set`, `livez-follows-peers`, `readyz-ignores-copy`, `no-startup-responder`, `slowlog-keeps-value`, `peer-address-resolved-once`, `read-repair-writes-older`, `expired-value-served`, `expires-early`, `copy-skips-keys`, `collect-ignores-shallower` or `collect-on-grace-alone`.
    /// Test hook: a deliberate bug for a negative control: `ack-before-wal`, `connection-panic`, `copy-skips-partitioned-leaving-node`, `joined-takes-id-zero`, `add-checks-only-status`, `range-alone-outside-read-set`, `livez-follows-peers`, `readyz-ignores-copy`, `no-startup-responder`, `slowlog-keeps-value`, `peer-address-resolved-once`, `read-repair-writes-older`, `expired-value-served`, `expires-early`, `ui-script-broken` or `recent-counts-nothing`.
    #[arg(long, env = "ATAMAN_DEBUG_PLANTED_BUG", hide = true)]
    pub debug_planted_bug: Option<String>,
}

/// A default build knows no planted bug: the option does not exist.
#[cfg(not(feature = "planted-bugs"))]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PlantedBugArgs {}

/// True when this build knows `--debug-planted-bug` (the `planted-bugs`
/// feature); the harness checks it before it asks nodes for a bug.
pub const PLANTED_BUGS_COMPILED: bool = cfg!(feature = "planted-bugs");

/// A bug planted on purpose, so the fault-injection harness can show it
/// catches it (`--debug-planted-bug`, docs/API.md "Test hooks"). A node
/// built without the `planted-bugs` feature never constructs one (the
/// simulation passes one to a rule it shares, `ttl::Expiry::as_planted`,
/// for its own `--planted-bug`).
#[cfg_attr(not(feature = "planted-bugs"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// Acknowledge writes once the engine applied them to the memtable,
    /// before the WAL wrote them (`Durability::None`), and keep no WAL at
    /// all (`WalMode::None`, `engine_options`): a `kill -9` loses every
    /// write acknowledged since the memtable's last flush.
    AckBeforeWal,
    /// The RESP command `ATAMAN.PLANTED-PANIC` panics the network thread
    /// while it handles that connection (the containment's negative
    /// control: `net::event_loop` closes the connection and counts it).
    ConnectionPanic,
    /// A layout transition's copy counts as complete when the only
    /// sources it could not copy from are nodes the new layout removes,
    /// declared dead or not (`cluster::copy_completion`,
    /// `Mode::PlantedSkipsLeaving`): a partitioned leaving node's writes
    /// are lost.
    CopySkipsPartitionedLeavingNode,
    /// A node started with `--join` stamps with node id 0 (the first
    /// bootstrap member's) once added, instead of its id in the layout, as
    /// it did when the id was its position in the start-up list.
    JoinedTakesIdZero,
    /// A layout change proposes an added URL when it answers
    /// `GET /v0/status` with 200, whoever answers (the old reachability
    /// check, `cluster::added_identity`, `Mode::PlantedStatusOnly`): a
    /// member added again under another host name wedges the transition.
    AddChecksOnlyStatus,
    /// A node answers a cluster range with `ack=1` from its own data
    /// whether or not it is in the read set (the old rule,
    /// `range::coverage::answers_alone_planted`): a node still receiving
    /// its copy answers with the keys it has so far.
    RangeAloneOutsideReadSet,
    /// `GET /livez` answers 503 when the cluster-health judgement is not
    /// `ok` (a peer down), as etcd's `/health` did: the negative control
    /// of `tests/health.rs`'s liveness with peers down.
    LivezFollowsPeers,
    /// `GET /readyz` ignores rule 6 of `health::readiness` (a joining
    /// node copying is called ready): the negative control of the
    /// joining-copy readiness test.
    ReadyzIgnoresCopy,
    /// No start-up responder (`health::startup`): `--listen` is bound but
    /// answers nothing until the log is replayed: the negative control of
    /// the replay readiness test.
    NoStartupResponder,
    /// The slow log keeps an HTTP write's value where its key belongs
    /// (`net::conn::slow_note`): the negative control of the slow log's
    /// "never a value" check (`tests/slowlog.rs`).
    SlowlogKeepsValue,
    /// A peer's host name is resolved once, when a link first connects,
    /// and its address kept while the node runs (the old rule,
    /// `peer::address::plan`): a peer container that comes back at another
    /// address is never reached again (`scripts/multihost`'s control).
    PeerAddressResolvedOnce,
    /// After every read, every replica that answered gets the oldest value
    /// answered stamped one tick above the newest (`replication::driver`,
    /// `Coordination::planted_older_repair`): an older value comes back
    /// as the newest version. The exact checker's negative control.
    ReadRepairWritesOlder,
    /// A write's deadline is stamped as if `ttl_ms` were seconds
    /// (`net::dispatch::stamp_deadline`): an expired value is served. The
    /// exact checker's expiry negative control (served late).
    ExpiredValueServed,
    /// A write's deadline is stamped a quarter of `ttl_ms` after its
    /// stamp (`net::dispatch::stamp_deadline`): a value expires before its
    /// deadline. The exact checker's expiry negative control (premature).
    ExpiresEarly,
    /// A transition copy leaves out the keys `antientropy/transfer/planted.rs`
    /// picks (one in four, by a hash of the key, the same on every
    /// source): a key whose old replicas all leave is lost.
    CopySkipsKeys,
    /// Tombstones and expired versions collected on the grace alone
    /// (`lib.rs`, no `Options::collection_horizon`), as before
    /// repair-based collection: a tombstone goes while a replica that
    /// missed the delete still holds the older value.
    /// `tests/tombstone_repair.rs`' negative control.
    CollectOnGraceAlone,
    /// The engine's old collection rule
    /// (`Options::planted_collect_when_nothing_deeper`): a tombstone past the
    /// grace is dropped once no deeper level overlaps the merge, though an
    /// older version may remain shallower or in a memtable.
    CollectIgnoresShallower,
    /// A restore's ingest keeps versions stamped after the backup's `T`
    /// (`net::backup_transfer`): the point-in-time negative control.
    BackupIgnoresT,
    /// The dashboard's script is served cut in half (`net::recent::asset`):
    /// the page loads and shows nothing. `tests/dashboard.rs`' broken-asset
    /// control.
    UiScriptBroken,
    /// The recent-figures ring samples every request counter as zero
    /// (`lib.rs`, the main thread's chores): the dashboard shows no rate.
    /// `tests/dashboard.rs`' rate control.
    RecentCountsNothing,
    /// An atomic read-modify-write (`INCR`, `SET NX`, …) submits its write
    /// without its condition (`net::rmw_local`): two network threads'
    /// increments of one key overwrite each other. The negative control of
    /// `tests/resp_rmw.rs`'s exact counter.
    RmwSkipsConflictCheck,
    /// An HTTP request is served at once even while an earlier write of
    /// its connection has no reply (`net::conn::http_order`): a pipelined
    /// `GET` behind a `PUT` of its key reads from before it. The negative
    /// control of `tests/http_protocol.rs`' read-your-writes check.
    HttpReadsSkipPendingWrites,
    /// The consensus register's acceptor takes an `Accept` below the
    /// ballot it promised (`replication::register::acceptor`'s
    /// `PlantedAcceptsBelowPromise`): a proposer that lost the prepare race
    /// still decides. The negative control of `tests/register.rs`.
    RegisterAcceptsBelowPromise,
    /// The consensus register runs a `WATCH`ed transaction and evaluates
    /// nothing of what `WATCH` saw (`net::register_rmw`): `EXEC` writes
    /// over a change made since. The negative control of
    /// `tests/resp_register_watch.rs`.
    RegisterWatchIgnoresVersion,
}

/// When writes are acknowledged: once durable, unless the planted bug
/// `ack-before-wal` is on (said loudly).
pub fn write_durability(config: &NodeConfig) -> ataman_engine::Durability {
    use ataman_engine::Durability;
    match config.planted_bug {
        // `register-accepts-below-promise` is logged where it is read
        // (`net::register_acceptor::mode`).
        None
        | Some(
            PlantedBug::CopySkipsPartitionedLeavingNode | PlantedBug::RegisterAcceptsBelowPromise,
        ) => Durability::Complete,
        Some(PlantedBug::ConnectionPanic) => {
            for _ in 0..3 {
                tracing::error!(
                    "PLANTED BUG connection-panic: the RESP command ATAMAN.PLANTED-PANIC panics the network thread. Test use only."
                );
            }
            Durability::Complete
        }
        Some(PlantedBug::AckBeforeWal) => {
            for _ in 0..3 {
                tracing::error!(
                    "PLANTED BUG ack-before-wal: writes are acknowledged before the WAL has them; a crash loses acknowledged writes. Test use only."
                );
            }
            Durability::None
        }
        Some(
            bug @ (PlantedBug::LivezFollowsPeers
            | PlantedBug::ReadyzIgnoresCopy
            | PlantedBug::NoStartupResponder),
        ) => {
            tracing::error!(
                "PLANTED BUG {bug:?}: a health endpoint answers wrongly (health::readiness). Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::JoinedTakesIdZero) => {
            tracing::error!(
                "PLANTED BUG joined-takes-id-zero: a node started with --join stamps with node id 0 once added; two coordinators issue one timestamp. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::AddChecksOnlyStatus) => {
            tracing::error!(
                "PLANTED BUG add-checks-only-status: an added URL is proposed when it answers GET /v0/status, whoever answers. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::RangeAloneOutsideReadSet) => {
            tracing::error!(
                "PLANTED BUG range-alone-outside-read-set: a node outside the read set answers an ack=1 cluster range from its own data. Test use only."
            );
            Durability::Complete
        }
        Some(bug @ (PlantedBug::UiScriptBroken | PlantedBug::RecentCountsNothing)) => {
            tracing::error!(
                "PLANTED BUG {bug:?}: the dashboard shows nothing or no rate. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::SlowlogKeepsValue) => {
            tracing::error!(
                "PLANTED BUG slowlog-keeps-value: the slow log keeps an HTTP write's value in place of its key. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::PeerAddressResolvedOnce) => {
            tracing::error!(
                "PLANTED BUG peer-address-resolved-once: a peer's name is resolved once; a peer that comes back at another address is not reached. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::ReadRepairWritesOlder) => {
            tracing::error!(
                "PLANTED BUG read-repair-writes-older: after every read, the oldest value answered is sent to every replica, stamped one tick above the newest. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::ExpiredValueServed) => {
            tracing::error!(
                "PLANTED BUG expired-value-served: deadlines are stamped as if ttl_ms were seconds. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::BackupIgnoresT) => {
            tracing::error!(
                "PLANTED BUG backup-ignores-t: a restore keeps versions stamped after the backup's T. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::ExpiresEarly) => {
            tracing::error!(
                "PLANTED BUG expires-early: deadlines are stamped a quarter of ttl_ms after the stamp. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::CopySkipsKeys) => {
            tracing::error!(
                "PLANTED BUG copy-skips-keys: a transition copy leaves out one key in 4. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::CollectIgnoresShallower) => {
            tracing::error!(
                "PLANTED BUG collect-ignores-shallower: compaction drops a tombstone past the grace once nothing deeper overlaps, older versions shallower or not. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::CollectOnGraceAlone) => {
            tracing::error!(
                "PLANTED BUG collect-on-grace-alone: tombstones are collected once past the grace, whether anti-entropy covered them with every replica or not. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::RmwSkipsConflictCheck) => {
            tracing::error!(
                "PLANTED BUG rmw-skips-conflict-check: read-modify-write commands write without their condition. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::RegisterWatchIgnoresVersion) => {
            tracing::error!(
                "PLANTED BUG register-watch-ignores-version: EXEC of a WATCHed key through the consensus register ignores what WATCH saw. Test use only."
            );
            Durability::Complete
        }
        Some(PlantedBug::HttpReadsSkipPendingWrites) => {
            tracing::error!(
                "PLANTED BUG http-reads-skip-pending-writes: a pipelined HTTP request does not wait for its connection's earlier writes. Test use only."
            );
            Durability::Complete
        }
    }
}

#[cfg(feature = "planted-bugs")]
pub(super) fn planted_bug(args: &PlantedBugArgs) -> Result<Option<PlantedBug>, String> {
    args.debug_planted_bug
        .as_deref()
        .map(parse_planted_bug)
        .transpose()
}

#[cfg(not(feature = "planted-bugs"))]
pub(super) fn planted_bug(_args: &PlantedBugArgs) -> Result<Option<PlantedBug>, String> {
    Ok(None)
}

#[cfg(feature = "planted-bugs")]
fn parse_planted_bug(s: &str) -> Result<PlantedBug, String> {
    match s {
        "ack-before-wal" => Ok(PlantedBug::AckBeforeWal),
        "connection-panic" => Ok(PlantedBug::ConnectionPanic),
        "copy-skips-partitioned-leaving-node" => Ok(PlantedBug::CopySkipsPartitionedLeavingNode),
        "joined-takes-id-zero" => Ok(PlantedBug::JoinedTakesIdZero),
        "add-checks-only-status" => Ok(PlantedBug::AddChecksOnlyStatus),
        "range-alone-outside-read-set" => Ok(PlantedBug::RangeAloneOutsideReadSet),
        "livez-follows-peers" => Ok(PlantedBug::LivezFollowsPeers),
        "readyz-ignores-copy" => Ok(PlantedBug::ReadyzIgnoresCopy),
        "no-startup-responder" => Ok(PlantedBug::NoStartupResponder),
        "slowlog-keeps-value" => Ok(PlantedBug::SlowlogKeepsValue),
        "peer-address-resolved-once" => Ok(PlantedBug::PeerAddressResolvedOnce),
        "read-repair-writes-older" => Ok(PlantedBug::ReadRepairWritesOlder),
        "expired-value-served" => Ok(PlantedBug::ExpiredValueServed),
        "expires-early" => Ok(PlantedBug::ExpiresEarly),
        "copy-skips-keys" => Ok(PlantedBug::CopySkipsKeys),
        "collect-ignores-shallower" => Ok(PlantedBug::CollectIgnoresShallower),
        "collect-on-grace-alone" => Ok(PlantedBug::CollectOnGraceAlone),
        "backup-ignores-t" => Ok(PlantedBug::BackupIgnoresT),
        "ui-script-broken" => Ok(PlantedBug::UiScriptBroken),
        "recent-counts-nothing" => Ok(PlantedBug::RecentCountsNothing),
        "rmw-skips-conflict-check" => Ok(PlantedBug::RmwSkipsConflictCheck),
        "http-reads-skip-pending-writes" => Ok(PlantedBug::HttpReadsSkipPendingWrites),
        "register-accepts-below-promise" => Ok(PlantedBug::RegisterAcceptsBelowPromise),
        "register-watch-ignores-version" => Ok(PlantedBug::RegisterWatchIgnoresVersion),
        other => Err(format!(
            "debug-planted-bug must be ack-before-wal, connection-panic, copy-skips-partitioned-leaving-node, joined-takes-id-zero, add-checks-only-status, range-alone-outside-read-set, livez-follows-peers, readyz-ignores-copy, no-startup-responder, slowlog-keeps-value, peer-address-resolved-once, read-repair-writes-older, expired-value-served, expires-early, copy-skips-keys, collect-ignores-shallower, backup-ignores-t, ui-script-broken, recent-counts-nothing, rmw-skips-conflict-check, http-reads-skip-pending-writes, register-accepts-below-promise, register-watch-ignores-version or collect-on-grace-alone, not {other:?}"
        )),
    }
}
