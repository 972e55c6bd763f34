//! The `/v0` API: from a parsed request head to what the node must do.
//!
//! Routing and the validation of the path, method and query live here, in
//! one function ([`route`]) the tests and the fuzzer reach directly. It
//! decides 400, 405 and 414; the request head's parser
//! (`crate::http::request`) and the connection (`net::conn`) decide
//! the other status codes (docs/ARCHITECTURE.md, "Status codes: where each
//! is decided").

use crate::http::Status;
use crate::http::conditional::Preconditions;
use crate::http::query::Query;
use crate::http::request::{HttpError, Method, RequestHead};
use crate::peer::handshake::{PEER_PROTOCOL, SYNC_PROTOCOL};
use crate::ttl;
use std::borrow::Cow;

mod backup;
pub use backup::{BackupAsk, PointAt};

/// What a request asks for, after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Read a key.
    Get {
        /// The key.
        key: Vec<u8>,
        /// Replicas that must answer.
        ack: u32,
        /// Replicas asked.
        from: u32,
        /// `If-Match` / `If-None-Match` (`crate::http::conditional`);
        /// `None` without them.
        preconditions: Option<Box<Preconditions>>,
    },
    /// Write the request body as the key's value.
    Put {
        /// The key.
        key: Vec<u8>,
        /// Replicas that must answer.
        ack: u32,
        /// Replicas asked.
        from: u32,
        /// `ttl_ms`: the value expires this many milliseconds after the
        /// write is stamped (`None`: never).
        ttl_ms: Option<u64>,
        /// `If-Match` / `If-None-Match`: a conditional write, atomic
        /// (`net/dispatch.rs`, `rmw`); `None`: a plain write.
        preconditions: Option<Box<Preconditions>>,
    },
    /// Delete a key.
    Delete {
        /// The key.
        key: Vec<u8>,
        /// Replicas that must answer.
        ack: u32,
        /// Replicas asked.
        from: u32,
        /// As `Put`'s.
        preconditions: Option<Box<Preconditions>>,
    },
    /// Stream the live entries of `[start, end)`.
    Range {
        /// First key (inclusive).
        start: Vec<u8>,
        /// End key (exclusive), if any.
        end: Option<Vec<u8>>,
    },
    /// Stream the live entries of `[start, end)` of the whole cluster
    /// (`cluster=1`), covering `ack` of each key's `from` replicas.
    ClusterRange {
        /// First key (inclusive).
        start: Vec<u8>,
        /// End key (exclusive), if any.
        end: Option<Vec<u8>>,
        /// Replicas of each key that must be covered.
        ack: u32,
        /// Replicas of each key.
        from: u32,
    },
    /// Internal, for peers: stream this node's versions of `[start, end)`,
    /// tombstones included (`GET /v0/internal/range`).
    InternalRange {
        /// First key (inclusive).
        start: Vec<u8>,
        /// End key (exclusive), if any.
        end: Option<Vec<u8>>,
    },
    /// Health.
    Status,
    /// The process serves (`GET /livez`).
    Livez,
    /// The node is ready for client traffic (`GET /readyz`).
    Readyz,
    /// The cluster's health as this node sees it (`GET /v0/cluster/health`).
    ClusterHealth,
    /// This node's view of the cluster (JSON).
    Cluster,
    /// The layout this node runs with (JSON).
    Layout,
    /// Change the layout to version `version` (`POST /v0/layout`).
    LayoutChange {
        /// The version asked for (current + 1).
        version: u64,
        /// What changes.
        change: crate::cluster::layout::Change,
    },
    /// What this node would send for a change (`GET /v0/layout/plan`).
    LayoutPlan {
        /// The change planned.
        change: crate::cluster::layout::Change,
    },
    /// Internal, for peers: a layout agreement message as the body
    /// (`POST /v0/internal/layout`).
    InternalLayout,
    /// A peer upgrading the connection to the peer protocol.
    PeerUpgrade,
    /// A peer upgrading the connection to the sync protocol (anti-entropy).
    SyncUpgrade,
    /// Start an anti-entropy round now (`POST /v0/repair`).
    RepairStart,
    /// The anti-entropy rounds' state (`GET /v0/repair`).
    RepairStatus,
    /// Prometheus metrics.
    Metrics,
    /// Read (`GET /v0/slowlog`) or change (`POST /v0/slowlog`) the slow log.
    Slowlog(crate::slowlog::Op),
    /// A request to `/v0/backup` (node checkpoints, a cluster backup's
    /// files, a restore's versions).
    Backup(BackupAsk),
    /// The hot keys (`GET /v0/hotkeys`): this node's, or the cluster's merged.
    HotKeys {
        /// Keys listed at most.
        limit: usize,
        /// Merge every member's report.
        cluster: bool,
    },
    /// Internal, for peers: this node's whole hot-key report (`GET /v0/internal/hotkeys`).
    InternalHotKeys,
    /// One of the dashboard's files (`GET /ui`, `/ui/app.js`,
    /// `/ui/app.css`); `None`: another path under `/ui/` (404).
    Ui(Option<crate::ui::Asset>),
    /// The recent figures (`GET /v0/recent`): this node's, or every
    /// member's (`cluster=1`).
    Recent {
        /// Ask every member.
        cluster: bool,
    },
    /// Internal, for peers: this node's recent figures
    /// (`GET /v0/internal/recent`).
    InternalRecent,
    /// The cluster's slow log (`GET /v0/slowlog?cluster=1`): every
    /// member's newest `limit` entries, merged.
    ClusterSlowlog {
        /// Entries listed at most.
        limit: usize,
    },
    /// Internal, for peers: this node's newest `limit` slow-log entries
    /// (`GET /v0/internal/slowlog?limit=n`).
    InternalSlowlog {
        /// Entries listed at most.
        limit: usize,
    },
    /// Answer with an error.
    Error(HttpError),
}

impl Action {
    /// A `GET`, `PUT` or `DELETE` of `/v0/entity` with `If-Match` or
    /// `If-None-Match` (`crate::http::conditional`).
    #[inline]
    pub fn has_preconditions(&self) -> bool {
        matches!(
            self,
            Action::Get {
                preconditions: Some(_),
                ..
            } | Action::Put {
                preconditions: Some(_),
                ..
            } | Action::Delete {
                preconditions: Some(_),
                ..
            }
        )
    }
}

/// Which route a request took (metrics labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// GET /v0/entity.
    EntityGet,
    /// PUT /v0/entity.
    EntityPut,
    /// DELETE /v0/entity.
    EntityDelete,
    /// GET /v0/entities.
    Entities,
    /// GET /v0/status.
    Status,
    /// GET /v0/cluster.
    Cluster,
    /// GET /v0/peer (upgrade to the peer protocol).
    Peer,
    /// GET /metrics.
    Metrics,
    /// GET and POST /v0/repair.
    Repair,
    /// GET /v0/internal/range (a peer's part of a cluster range).
    InternalRange,
    /// POST /v0/internal/layout (the layout agreement between nodes).
    InternalLayout,
    /// GET /livez, /readyz and /v0/cluster/health.
    Health,
    /// GET and POST /v0/slowlog.
    Slowlog,
    /// GET, POST and DELETE /v0/backup.
    Backup,
    /// GET /v0/hotkeys and /v0/internal/hotkeys.
    HotKeys,
    /// GET /ui and its files.
    Ui,
    /// GET /v0/recent and /v0/internal/recent.
    Recent,
    /// Anything else (errors).
    Other,
}

impl Route {
    /// Every route, in label order.
    pub const ALL: [Route; 18] = [
        Route::EntityGet,
        Route::EntityPut,
        Route::EntityDelete,
        Route::Entities,
        Route::Status,
        Route::Cluster,
        Route::Peer,
        Route::Metrics,
        Route::Repair,
        Route::InternalRange,
        Route::InternalLayout,
        Route::Health,
        Route::Slowlog,
        Route::Backup,
        Route::HotKeys,
        Route::Ui,
        Route::Recent,
        Route::Other,
    ];

    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Route::EntityGet => "entity_get",
            Route::EntityPut => "entity_put",
            Route::EntityDelete => "entity_delete",
            Route::Entities => "entities",
            Route::Status => "status",
            Route::Cluster => "cluster",
            Route::Peer => "peer",
            Route::Metrics => "metrics",
            Route::Repair => "repair",
            Route::InternalRange => "internal_range",
            Route::InternalLayout => "internal_layout",
            Route::Health => "health",
            Route::Slowlog => "slowlog",
            Route::Backup => "backup",
            Route::HotKeys => "hotkeys",
            Route::Ui => "ui",
            Route::Recent => "recent",
            Route::Other => "other",
        }
    }

    /// Index into per-route tables.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Limits and cluster facts routing needs.
#[derive(Debug, Clone, Copy)]
pub struct RouteConfig {
    /// Longest key after percent-decoding.
    pub key_bytes_max: usize,
    /// Nodes in the cluster (1 for a single node): the read layout's
    /// members, `from`'s bound.
    pub cluster_size: u32,
    /// `from` when a request names none: `R` of the read layout.
    pub from_default: u32,
}

fn bad(msg: impl Into<String>) -> Action {
    Action::Error(HttpError::keep(Status::BadRequest, msg))
}

fn not_allowed(allow: &str) -> Action {
    Action::Error(HttpError::keep(
        Status::MethodNotAllowed,
        format!("method not allowed; allowed: {allow}"),
    ))
}

/// The `Allow` of a path that serves GET alone (and HEAD, as every path
/// that serves GET does: `crate::http::request::RequestHead::head_only`).
const GET_ONLY_ALLOW: &str = "GET, HEAD";

/// The `Allow` header for a path's 405.
pub fn allow_for(path: &[u8]) -> &'static str {
    match path {
        b"/v0/entity" => "GET, HEAD, PUT, DELETE",
        b"/v0/repair" | b"/v0/layout" | b"/v0/slowlog" => "GET, HEAD, POST",
        b"/v0/backup" => "GET, HEAD, POST, DELETE",
        b"/v0/internal/layout" => "POST",
        _ => GET_ONLY_ALLOW,
    }
}

/// The request's query, checked; the parameters a route reads are picked
/// in one pass and decoded borrowing the request's bytes unless they hold
/// escapes.
struct Params<'q> {
    query: Query<'q>,
}

/// One parameter a route reads: its name, its first value, whether it came twice.
struct Param<'q> {
    name: &'static str,
    value: Option<Cow<'q, [u8]>>,
    twice: bool,
}

impl<'q> Params<'q> {
    /// The parameters `names`, in one pass over the query.
    fn pick<const N: usize>(&self, names: [&'static str; N]) -> [Param<'q>; N] {
        let mut picked = names.map(|name| Param {
            name,
            value: None,
            twice: false,
        });
        self.query.for_each(|name, value| {
            if let Some(p) = picked.iter_mut().find(|p| p.name.as_bytes() == name) {
                if p.value.is_some() {
                    p.twice = true;
                } else {
                    p.value = Some(value);
                }
            }
        });
        picked
    }
}

impl<'q> Param<'q> {
    /// The value if given once; a second one is 400.
    fn one(self) -> Result<Option<Cow<'q, [u8]>>, Action> {
        if self.twice {
            return Err(bad(format!("parameter {} given twice", self.name)));
        }
        Ok(self.value)
    }
}

fn key_param(
    param: Param<'_>,
    required: bool,
    cfg: RouteConfig,
) -> Result<Option<Vec<u8>>, Action> {
    let name = param.name;
    match param.one()? {
        None if required => Err(bad(format!("missing {name}"))),
        None => Ok(None),
        Some(k) if k.is_empty() => Err(bad(format!("empty {name}"))),
        Some(k) if k.len() > cfg.key_bytes_max => Err(Action::Error(HttpError::keep(
            Status::UriTooLong,
            format!(
                "{name} of {} bytes over the limit of {}",
                k.len(),
                cfg.key_bytes_max
            ),
        ))),
        Some(k) => Ok(Some(k.into_owned())),
    }
}

fn number(param: Param<'_>) -> Result<Option<u32>, Action> {
    let name = param.name;
    match param.one()? {
        None => Ok(None),
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u32>().ok())
            .map(Some)
            .ok_or_else(|| bad(format!("{name} must be a positive integer"))),
    }
}

/// Checks `ack`/`from`: `1 <= ack <= from <= cluster size`; defaults
/// `from` = cluster size, `ack` = from / 2 + 1.
pub fn replication(
    params_ack: Option<u32>,
    params_from: Option<u32>,
    cluster_size: u32,
) -> Result<(u32, u32), String> {
    replication_with(params_ack, params_from, cluster_size, cluster_size)
}

/// [`replication`] with `from` = `from_default` when none is given (`R`).
pub fn replication_with(
    params_ack: Option<u32>,
    params_from: Option<u32>,
    cluster_size: u32,
    from_default: u32,
) -> Result<(u32, u32), String> {
    let from = params_from.unwrap_or(from_default.min(cluster_size));
    let ack = params_ack.unwrap_or(from / 2 + 1);
    if from == 0 || from > cluster_size {
        return Err(format!(
            "from must be between 1 and the cluster size {cluster_size}"
        ));
    }
    if ack == 0 || ack > from {
        return Err(format!("ack must be between 1 and from ({from})"));
    }
    Ok((ack, from))
}

/// Every parameter of `query` as text, or the 400 naming the first one
/// that is not UTF-8.
fn text_pairs(query: &Query<'_>) -> Result<Vec<(String, String)>, Action> {
    let mut pairs = Vec::new();
    let mut not_text = None;
    query.for_each(
        |name, value| match (std::str::from_utf8(name), std::str::from_utf8(&value)) {
            (Ok(n), Ok(v)) => pairs.push((n.to_owned(), v.to_owned())),
            _ => not_text = Some(String::from_utf8_lossy(name).into_owned()),
        },
    );
    if let Some(name) = not_text {
        return Err(bad(format!("parameter {name} is not UTF-8")));
    }
    Ok(pairs)
}

/// `GET /v0/layout/plan`'s parameters: a change as `POST /v0/layout`
/// names it, without `version`.
fn layout_plan(query: &Query<'_>) -> Action {
    let pairs = match text_pairs(query) {
        Ok(pairs) => pairs,
        Err(refused) => return refused,
    };
    if pairs.iter().any(|(n, _)| n == "version") {
        return bad("the plan takes no version: it is planned as the current one + 1");
    }
    let planned = std::iter::once(("version", "0"));
    let params = planned.chain(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    match crate::cluster::change_request::parse(params) {
        Ok((_, change)) => Action::LayoutPlan { change },
        Err(why) => bad(why),
    }
}

/// `POST /v0/layout`'s parameters (`crate::cluster::change_request::parse`).
fn layout_change(query: &Query<'_>) -> Action {
    let pairs = match text_pairs(query) {
        Ok(pairs) => pairs,
        Err(refused) => return refused,
    };
    let params = pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    match crate::cluster::change_request::parse(params) {
        Ok((version, change)) => Action::LayoutChange { version, change },
        Err(why) => bad(why),
    }
}

/// `GET /v0/slowlog[?limit=n][&cluster=1]`: the newest `n` entries (all
/// held without it), this node's or the cluster's (`n` from 1 to
/// `slowlog_cluster::CLUSTER_LIMIT_MAX`, by default its default).
fn slowlog_get(params: &Params<'_>) -> Action {
    use crate::slowlog_cluster::{CLUSTER_LIMIT_DEFAULT, CLUSTER_LIMIT_MAX};
    let [limit, cluster] = params.pick(["limit", "cluster"]);
    let limit = match number(limit) {
        Ok(limit) => limit,
        Err(refused) => return refused,
    };
    match cluster.one().as_ref().map(|c| c.as_deref()) {
        Ok(None | Some(b"0")) => Action::Slowlog(crate::slowlog::Op::Get {
            count: limit.map_or(usize::MAX, |n| n as usize),
        }),
        Ok(Some(b"1")) => cluster_limit(limit, CLUSTER_LIMIT_DEFAULT, CLUSTER_LIMIT_MAX)
            .map_or_else(|e| e, |limit| Action::ClusterSlowlog { limit }),
        Ok(Some(_)) => bad("cluster must be 0 or 1"),
        Err(e) => e.clone(),
    }
}

/// `GET /v0/internal/slowlog?limit=n`: a peer's ask, `n` within the
/// cluster report's bound.
fn internal_slowlog_get(params: &Params<'_>) -> Action {
    use crate::slowlog_cluster::{CLUSTER_LIMIT_DEFAULT, CLUSTER_LIMIT_MAX};
    let [limit] = params.pick(["limit"]);
    match number(limit) {
        Ok(limit) => cluster_limit(limit, CLUSTER_LIMIT_DEFAULT, CLUSTER_LIMIT_MAX)
            .map_or_else(|e| e, |limit| Action::InternalSlowlog { limit }),
        Err(refused) => refused,
    }
}

/// A cluster report's `limit`: `default` when absent, else 1 to `max`.
fn cluster_limit(limit: Option<u32>, default: usize, max: usize) -> Result<usize, Action> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max).contains(&(n as usize)) => Ok(n as usize),
        Some(_) => Err(bad(format!("limit must be between 1 and {max}"))),
    }
}

/// `POST /v0/slowlog?reset=1`, or `?threshold_us=N` (negative: off)
/// and/or `max_len=N`.
fn slowlog_post(params: &Params<'_>) -> Action {
    use crate::slowlog::{LEN_MAX, Op};
    let [reset, threshold, len_max] = params.pick(["reset", "threshold_us", "max_len"]);
    (|| {
        let reset = reset.one()?;
        let threshold = match threshold.one()? {
            None => None,
            Some(raw) => Some(
                std::str::from_utf8(&raw)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .ok_or_else(|| bad("threshold_us must be an integer (negative: off)"))?,
            ),
        };
        let len_max = match number(len_max)? {
            Some(n) if n as usize > LEN_MAX => {
                return Err(bad(format!("max_len must be at most {LEN_MAX}")));
            }
            n => n.map(|n| n as usize),
        };
        match (reset.as_deref(), threshold, len_max) {
            (Some(b"1"), None, None) => Ok(Action::Slowlog(Op::Reset)),
            (Some(_), ..) => Err(bad("reset takes 1 and no other parameter")),
            (None, None, None) => Err(bad(
                "POST /v0/slowlog needs reset=1, threshold_us or max_len",
            )),
            (None, threshold_us, len_max) => Ok(Action::Slowlog(Op::Set {
                threshold_us,
                len_max,
            })),
        }
    })()
    .unwrap_or_else(|e| e)
}

/// `GET /v0/hotkeys[?limit=n][&cluster=1]`.
fn hotkeys_get(params: &Params<'_>) -> Action {
    use crate::hotkeys::sampler::COUNTERS;
    let [limit, cluster] = params.pick(["limit", "cluster"]);
    let limit = match number(limit) {
        Ok(None) => crate::hotkeys::report::KEYS_DEFAULT,
        Ok(Some(n)) if (1..=COUNTERS as u32).contains(&n) => n as usize,
        _ => return bad(format!("limit must be between 1 and {COUNTERS}")),
    };
    let cluster = match cluster.one().as_ref().map(|c| c.as_deref()) {
        Ok(None | Some(b"0")) => false,
        Ok(Some(b"1")) => true,
        _ => return bad("cluster must be 0 or 1"),
    };
    Action::HotKeys { limit, cluster }
}

/// `GET /v0/recent[?cluster=1]`.
fn recent_get(params: &Params<'_>) -> Action {
    let [cluster] = params.pick(["cluster"]);
    match cluster.one().as_ref().map(|c| c.as_deref()) {
        Ok(None | Some(b"0")) => Action::Recent { cluster: false },
        Ok(Some(b"1")) => Action::Recent { cluster: true },
        Ok(Some(_)) => bad("cluster must be 0 or 1"),
        Err(e) => e.clone(),
    }
}

/// The paths the router serves, one per entry of [`ENDPOINTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v0/entity`: GET, PUT, DELETE.
    Entity,
    /// `/v0/entities`: GET (a local or a cluster range).
    Entities,
    /// `/v0/internal/range`: GET, a peer's part of a cluster range.
    InternalRange,
    /// `/v0/status`: GET.
    Status,
    /// `/v0/cluster`: GET.
    Cluster,
    /// `/metrics`: GET.
    Metrics,
    /// `/v0/peer`: the peer and sync upgrades.
    Peer,
    /// `/v0/layout`: GET, POST.
    Layout,
    /// `/v0/layout/plan`: GET.
    LayoutPlan,
    /// `/v0/internal/layout`: POST, the layout agreement between nodes.
    InternalLayout,
    /// `/v0/repair`: GET, POST.
    Repair,
    /// `/livez`: GET, open to anyone.
    Livez,
    /// `/readyz`: GET, open to anyone.
    Readyz,
    /// `/v0/cluster/health`: GET, open to anyone.
    ClusterHealth,
    /// `/v0/slowlog`: GET, POST.
    Slowlog,
    /// `/v0/backup`: GET, POST, DELETE (node checkpoints).
    Backup,
    /// `/v0/hotkeys`: GET.
    HotKeys,
    /// `/v0/internal/hotkeys`: GET, a peer's part of a cluster report.
    InternalHotKeys,
    /// `/ui`, `/ui/app.js`, `/ui/app.css`: GET, open to anyone (the
    /// dashboard holds no data).
    Ui,
    /// `/v0/recent`: GET.
    Recent,
    /// `/v0/internal/recent`: GET, a peer's part of a cluster report.
    InternalRecent,
    /// `/v0/internal/slowlog`: GET, a peer's ask for this node's slow log.
    InternalSlowlog,
}

/// The route table: every path [`route`] serves. A request reaches an
/// endpoint only through this table (any other path is 400), so a test
/// that walks it walks every endpoint (`net::route_auth_tests`).
pub const ENDPOINTS: [(&str, Endpoint); 24] = [
    ("/v0/entity", Endpoint::Entity),
    ("/v0/entities", Endpoint::Entities),
    ("/v0/internal/range", Endpoint::InternalRange),
    ("/v0/status", Endpoint::Status),
    ("/v0/cluster", Endpoint::Cluster),
    ("/metrics", Endpoint::Metrics),
    ("/v0/peer", Endpoint::Peer),
    ("/v0/layout", Endpoint::Layout),
    ("/v0/layout/plan", Endpoint::LayoutPlan),
    ("/v0/internal/layout", Endpoint::InternalLayout),
    ("/v0/repair", Endpoint::Repair),
    ("/livez", Endpoint::Livez),
    ("/readyz", Endpoint::Readyz),
    ("/v0/cluster/health", Endpoint::ClusterHealth),
    ("/v0/slowlog", Endpoint::Slowlog),
    ("/v0/backup", Endpoint::Backup),
    ("/v0/hotkeys", Endpoint::HotKeys),
    ("/v0/internal/hotkeys", Endpoint::InternalHotKeys),
    ("/ui", Endpoint::Ui),
    ("/ui/app.js", Endpoint::Ui),
    ("/ui/app.css", Endpoint::Ui),
    ("/v0/recent", Endpoint::Recent),
    ("/v0/internal/recent", Endpoint::InternalRecent),
    ("/v0/internal/slowlog", Endpoint::InternalSlowlog),
];

/// The endpoint of `path`, if the router serves it.
pub fn endpoint(path: &[u8]) -> Option<Endpoint> {
    ENDPOINTS
        .iter()
        .find(|(p, _)| p.as_bytes() == path)
        .map(|&(_, e)| e)
}

/// `/v0/entity`'s action for `route` (a `GET`, `PUT` or `DELETE`): the
/// key, `ack`/`from`, `ttl_ms` and the preconditions, checked.
fn entity(head: &RequestHead<'_>, params: &Params<'_>, cfg: RouteConfig, route: Route) -> Action {
    (|| {
        let [id, ack, from, ttl] = params.pick(["id", "ack", "from", ttl::TTL_PARAM]);
        let key = key_param(id, true, cfg)?.unwrap_or_default();
        let (ack, from) = (number(ack)?, number(from)?);
        let (ack, from) =
            replication_with(ack, from, cfg.cluster_size, cfg.from_default).map_err(bad)?;
        let ttl_ms = match ttl.one()? {
            None => None,
            Some(_) if route != Route::EntityPut => {
                return Err(bad(format!("{} applies to PUT only", ttl::TTL_PARAM)));
            }
            Some(raw) => Some(ttl::parse_ttl_ms(&raw).map_err(bad)?),
        };
        let preconditions =
            Preconditions::parse(head.if_match.as_deref(), head.if_none_match.as_deref())
                .map_err(bad)?
                .map(Box::new);
        Ok::<_, Action>(match route {
            Route::EntityGet => Action::Get {
                key,
                ack,
                from,
                preconditions,
            },
            Route::EntityPut => Action::Put {
                key,
                ack,
                from,
                ttl_ms,
                preconditions,
            },
            _ => Action::Delete {
                key,
                ack,
                from,
                preconditions,
            },
        })
    })()
    .unwrap_or_else(|e| e)
}

/// Decides what a request head asks for.
pub fn route(head: &RequestHead, cfg: RouteConfig) -> (Route, Action) {
    let params = match Query::parse(head.query) {
        Ok(query) => Params { query },
        Err(e) => return (Route::Other, bad(format!("bad query: {}", e.0))),
    };
    let Some(endpoint) = endpoint(head.path) else {
        if head.path.starts_with(crate::ui::ASSET_PREFIX) {
            // A missing asset of the dashboard: 404, like a missing file.
            return match head.method {
                Method::Get => (Route::Ui, Action::Ui(None)),
                _ => (Route::Ui, not_allowed(GET_ONLY_ALLOW)),
            };
        }
        return (
            Route::Other,
            bad(format!(
                "unknown path {}",
                String::from_utf8_lossy(head.path)
            )),
        );
    };
    match endpoint {
        Endpoint::Entity => {
            let route = match head.method {
                Method::Get => Route::EntityGet,
                Method::Put => Route::EntityPut,
                Method::Delete => Route::EntityDelete,
                Method::Other(_) => return (Route::Other, not_allowed(allow_for(head.path))),
            };
            (route, entity(head, &params, cfg, route))
        }
        Endpoint::Entities => {
            if head.method != Method::Get {
                return (Route::Other, not_allowed(GET_ONLY_ALLOW));
            }
            let action = (|| {
                let [start, end, cluster, ack, from] =
                    params.pick(["start", "end", "cluster", "ack", "from"]);
                let start = key_param(start, true, cfg)?.unwrap_or_default();
                let end = key_param(end, false, cfg)?;
                match cluster.one()?.as_deref() {
                    None | Some(b"0") => Ok::<_, Action>(Action::Range { start, end }),
                    Some(b"1") => {
                        let (ack, from) = (number(ack)?, number(from)?);
                        let (ack, from) =
                            replication_with(ack, from, cfg.cluster_size, cfg.from_default)
                                .map_err(bad)?;
                        Ok(Action::ClusterRange {
                            start,
                            end,
                            ack,
                            from,
                        })
                    }
                    Some(_) => Err(bad("cluster must be 0 or 1")),
                }
            })()
            .unwrap_or_else(|e| e);
            (Route::Entities, action)
        }
        Endpoint::InternalRange => {
            if head.method != Method::Get {
                return (Route::InternalRange, not_allowed(GET_ONLY_ALLOW));
            }
            let action = (|| {
                // A resumed range starts one byte past a key (`range::merge::key_after`).
                let cfg = RouteConfig {
                    key_bytes_max: cfg.key_bytes_max + 1,
                    ..cfg
                };
                let [start, end] = params.pick(["start", "end"]);
                let start = key_param(start, true, cfg)?.unwrap_or_default();
                let end = key_param(end, false, cfg)?;
                Ok::<_, Action>(Action::InternalRange { start, end })
            })()
            .unwrap_or_else(|e| e);
            (Route::InternalRange, action)
        }
        Endpoint::HotKeys if head.method == Method::Get => (Route::HotKeys, hotkeys_get(&params)),
        Endpoint::InternalHotKeys if head.method == Method::Get => {
            (Route::HotKeys, Action::InternalHotKeys)
        }
        Endpoint::Ui if head.method == Method::Get => {
            (Route::Ui, Action::Ui(crate::ui::Asset::at(head.path)))
        }
        Endpoint::Recent if head.method == Method::Get => (Route::Recent, recent_get(&params)),
        Endpoint::InternalRecent if head.method == Method::Get => {
            (Route::Recent, Action::InternalRecent)
        }
        Endpoint::InternalSlowlog if head.method == Method::Get => {
            (Route::Slowlog, internal_slowlog_get(&params))
        }
        Endpoint::Status if head.method == Method::Get => (Route::Status, Action::Status),
        Endpoint::Cluster if head.method == Method::Get => (Route::Cluster, Action::Cluster),
        Endpoint::Metrics if head.method == Method::Get => (Route::Metrics, Action::Metrics),
        Endpoint::Livez if head.method == Method::Get => (Route::Health, Action::Livez),
        Endpoint::Readyz if head.method == Method::Get => (Route::Health, Action::Readyz),
        Endpoint::ClusterHealth if head.method == Method::Get => {
            (Route::Health, Action::ClusterHealth)
        }
        Endpoint::Peer if head.method == Method::Get => match head.upgrade {
            Some(p) if p.eq_ignore_ascii_case(PEER_PROTOCOL.as_bytes()) => {
                (Route::Peer, Action::PeerUpgrade)
            }
            Some(p) if p.eq_ignore_ascii_case(SYNC_PROTOCOL.as_bytes()) => {
                (Route::Peer, Action::SyncUpgrade)
            }
            _ => (
                Route::Peer,
                bad(format!(
                    "the peer endpoint needs Connection: Upgrade and Upgrade: {PEER_PROTOCOL} or {SYNC_PROTOCOL}"
                )),
            ),
        },
        Endpoint::Layout => match &head.method {
            Method::Get => (Route::Cluster, Action::Layout),
            Method::Other(m) if m == "POST" => (Route::Cluster, layout_change(&params.query)),
            _ => (Route::Cluster, not_allowed(allow_for(head.path))),
        },
        Endpoint::LayoutPlan => match &head.method {
            Method::Get => (Route::Cluster, layout_plan(&params.query)),
            _ => (Route::Cluster, not_allowed(GET_ONLY_ALLOW)),
        },
        Endpoint::InternalLayout => match &head.method {
            Method::Other(m) if m == "POST" => (Route::InternalLayout, Action::InternalLayout),
            _ => (Route::InternalLayout, not_allowed(allow_for(head.path))),
        },
        Endpoint::Repair => match &head.method {
            Method::Get => (Route::Repair, Action::RepairStatus),
            Method::Other(m) if m == "POST" => (Route::Repair, Action::RepairStart),
            _ => (Route::Repair, not_allowed(allow_for(head.path))),
        },
        Endpoint::Slowlog => match &head.method {
            Method::Get => (Route::Slowlog, slowlog_get(&params)),
            Method::Other(m) if m == "POST" => (Route::Slowlog, slowlog_post(&params)),
            _ => (Route::Slowlog, not_allowed(allow_for(head.path))),
        },
        Endpoint::Backup => (Route::Backup, backup::backup(&head.method, &params)),
        Endpoint::Status
        | Endpoint::Cluster
        | Endpoint::Metrics
        | Endpoint::Peer
        | Endpoint::Livez
        | Endpoint::Readyz
        | Endpoint::ClusterHealth
        | Endpoint::HotKeys
        | Endpoint::InternalHotKeys
        | Endpoint::Ui
        | Endpoint::Recent
        | Endpoint::InternalRecent
        | Endpoint::InternalSlowlog => (Route::Other, not_allowed(GET_ONLY_ALLOW)),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod layout_route_tests {
    use super::*;
    use crate::cluster::layout::Change;
    use crate::http::request::{Limits, Parsed, parse_head};

    fn act(req: &str) -> (Route, Action) {
        let limits = Limits {
            header_bytes_max: 4096,
            body_bytes_max: 1 << 20,
        };
        let cfg = RouteConfig {
            key_bytes_max: 8,
            cluster_size: 3,
            from_default: 3,
        };
        match parse_head(req.as_bytes(), limits) {
            Parsed::Head(h) => route(&h, cfg),
            other => panic!("{other:?}"),
        }
    }

    fn status(req: &str) -> Status {
        match act(req).1 {
            Action::Error(e) => e.status,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    /// POST /v0/layout takes repeated add and remove, one version and one
    /// R; GET still shows the layout; other methods are 405; bad
    /// parameters 400. The internal endpoint is POST only.
    #[test]
    fn layout_routes() {
        let (route_, action) = act(
            "POST /v0/layout?version=2&add=http%3A%2F%2Fa%3A1&remove=http://b:2&add=http://c:3&replication_factor=2&dead=http://b:2 HTTP/1.1\r\n\r\n",
        );
        assert_eq!(route_, Route::Cluster);
        assert_eq!(
            action,
            Action::LayoutChange {
                version: 2,
                change: Change {
                    add: vec!["http://a:1".into(), "http://c:3".into()],
                    remove: vec!["http://b:2".into()],
                    replication_factor: Some(2),
                    dead: vec!["http://b:2".into()],
                },
            }
        );
        assert_eq!(act("GET /v0/layout HTTP/1.1\r\n\r\n").1, Action::Layout);
        assert_eq!(
            status("PUT /v0/layout HTTP/1.1\r\n\r\n"),
            Status::MethodNotAllowed
        );
        for bad in [
            "POST /v0/layout HTTP/1.1\r\n\r\n",
            "POST /v0/layout?version=x HTTP/1.1\r\n\r\n",
            "POST /v0/layout?version=2&version=3 HTTP/1.1\r\n\r\n",
            "POST /v0/layout?version=2&ack=1 HTTP/1.1\r\n\r\n",
            "POST /v0/layout?version=2&add=%FF HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(status(bad), Status::BadRequest, "{bad}");
        }
        assert_eq!(
            act("POST /v0/internal/layout HTTP/1.1\r\nContent-Length: 3\r\n\r\n"),
            (Route::InternalLayout, Action::InternalLayout)
        );
        assert_eq!(
            status("GET /v0/internal/layout HTTP/1.1\r\n\r\n"),
            Status::MethodNotAllowed
        );
    }
}
