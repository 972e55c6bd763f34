//! The cluster under test: `N` real `ataman serve` processes on 127.0.0.1,
//! a [`FaultProxy`] on every directed link between them, and the process
//! control the faults need (kill -9, SIGSTOP/SIGCONT, restart, wipe, stop).
//!
//! Wiring. Node `i`'s URL in `--cluster` is a pass-through "front" proxy
//! (it names the node and always reaches it, whatever port the node has
//! after a restart). Node `i` reaches node `j` through its own proxy
//! `link[i][j]`, given with `--peer-via URL_j=ADDR`: so a fault on
//! `link[i][j]` hits exactly the connections `i` opened to `j` (the
//! requests `i` sends to `j` and `j`'s answers), nothing else. The
//! harness's clients talk to the nodes directly, never through a proxy.
//!
//! Each node has a directory `DIR/node-i` holding `data/` (its data
//! directory), `serve.log` (its stderr, appended across restarts) and
//! `fault-control` (its `--fault-control` file, rewritten atomically).
//!
//! Every wait is bounded: start ([`START_TIMEOUT`]), stop
//! ([`STOP_TIMEOUT`], then SIGKILL), every HTTP exchange.

use super::HarnessError;
use super::client::request_once;
use crate::faultproxy::{FaultProxy, LinkMode};
use crate::launcher::NodeProcess;
use ataman_testkit::lock::lock;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bound on a node becoming ready (listening line, then status 200).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a node exiting after SIGTERM (then SIGKILL).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Bound on one status or metrics request.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// The `ataman` executable.
    pub exe: PathBuf,
    /// The directory holding every node's directory.
    pub dir: PathBuf,
    /// Members at the start, 2 or more.
    pub nodes: usize,
    /// Spare slots after them: started only by a `join` or `replace`
    /// (`membership.rs`). With spares, the first start of the members is
    /// followed by a restart naming every slot (see [`Cluster::start`]).
    pub spares: usize,
    /// Added to every node's `ataman serve` command line.
    pub serve_args: Vec<String>,
    /// `sync_delay_ms` in every node's fault-control file for the whole
    /// run (a slow disk; 0: none).
    pub sync_delay_ms: u64,
    /// Every node also listens for RESP (`--resp-listen 127.0.0.1:0`; the
    /// `cas` workload), its address read from its RESP listening line.
    pub resp: bool,
}

/// What the clients need to reach the nodes: the URLs (placement) and each
/// node's current address.
///
/// Thread safety: addresses are behind one mutex each, updated by the
/// fault thread at a restart and read by every client per request.
pub struct ClusterView {
    urls: Vec<String>,
    addrs: Vec<Mutex<SocketAddr>>,
    /// Each node's current RESP address (None: no RESP listener).
    resp_addrs: Vec<Mutex<Option<SocketAddr>>>,
    /// The slots clients send to: the members that serve (a joined node
    /// once its transition settled; a leaving one no more).
    targets: Mutex<Vec<usize>>,
    /// The nodes' `--cluster-secret-file`, read, for the harness's own peer reads.
    secret: Option<ataman_node::auth::secret::ClusterSecret>,
}

/// The secret of `--cluster-secret-file FILE` (or `=FILE`) among `serve_args`, if given.
fn secret_of(
    serve_args: &[String],
) -> Result<Option<ataman_node::auth::secret::ClusterSecret>, HarnessError> {
    const OPTION: &str = "--cluster-secret-file";
    let path = serve_args
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.strip_prefix(OPTION) {
            Some("") => serve_args.get(i + 1).cloned(),
            Some(rest) => rest.strip_prefix('=').map(str::to_owned),
            None => None,
        });
    let Some(path) = path else {
        return Ok(None);
    };
    ataman_node::auth::secret::ClusterSecret::read(std::path::Path::new(&path))
        .map(Some)
        .map_err(|e| HarnessError::Usage(e.to_string()))
}

impl ClusterView {
    /// The cluster secret the nodes share, if any.
    pub fn peer_secret(&self) -> Option<&ataman_node::auth::secret::ClusterSecret> {
        self.secret.as_ref()
    }

    /// Every node's URL, in `--cluster` order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Nodes.
    pub fn len(&self) -> usize {
        self.urls.len()
    }

    /// True for a cluster without nodes (never built).
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    /// Node `i`'s current address.
    pub fn addr(&self, i: usize) -> SocketAddr {
        *lock(&self.addrs[i])
    }

    fn set_addr(&self, i: usize, addr: SocketAddr) {
        *lock(&self.addrs[i]) = addr;
    }

    /// Node `i`'s current RESP address, if it listens for RESP.
    pub fn resp_addr(&self, i: usize) -> Option<SocketAddr> {
        *lock(&self.resp_addrs[i])
    }

    /// The slots clients send to now.
    pub fn targets(&self) -> Vec<usize> {
        lock(&self.targets).clone()
    }

    /// Slot `i` receives client requests (true) or not any more.
    pub fn set_target(&self, i: usize, on: bool) {
        let mut targets = lock(&self.targets);
        targets.retain(|&t| t != i);
        if on {
            targets.push(i);
            targets.sort_unstable();
        }
    }

    /// The slot a request planned for slot `planned` goes to: itself while
    /// it is a target, else a target chosen by `planned`
    /// ([`super::membership::pick`]); `planned` when there is none.
    pub fn route(&self, planned: usize) -> usize {
        super::membership::pick(planned, &lock(&self.targets)).unwrap_or(planned)
    }
}

/// What a slot is in the cluster's membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A member of the newest layout (running, or down for a fault).
    Member,
    /// Not in the layout, no process, no data.
    Spare,
    /// Removed by a layout, still running until it may stop.
    Removed,
}

/// The faults a node's `--fault-control` file asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Control {
    /// `disk_full=1`.
    pub disk_full: bool,
    /// `clock_offset_ms=N`.
    pub clock_offset_ms: i64,
    /// `sync_delay_ms=N` for now (the `crash` fault's slow disk); the
    /// run's own `sync_delay_ms` when larger.
    pub sync_delay_ms: u64,
}

/// The proxies on the directed links, shared by the cluster (which points
/// them at restarted nodes) and the network fault lane (which sets their
/// modes) without a lock: every [`FaultProxy`] method takes `&self`.
pub struct Links {
    /// `proxies[i][j]`: node `i`'s connections to node `j` (None on the diagonal).
    proxies: Vec<Vec<Option<FaultProxy>>>,
}

impl Links {
    /// The proxy carrying node `from`'s connections to node `to`.
    pub fn link(&self, from: usize, to: usize) -> Option<&FaultProxy> {
        self.proxies.get(from)?.get(to)?.as_ref()
    }

    /// Nodes.
    pub fn len(&self) -> usize {
        self.proxies.len()
    }

    /// True without nodes.
    pub fn is_empty(&self) -> bool {
        self.proxies.is_empty()
    }

    /// Every link back to passing bytes at once.
    pub fn heal(&self) {
        for proxy in self.proxies.iter().flatten().flatten() {
            proxy.set_mode(LinkMode::Pass);
        }
    }
}

/// One node's process and files.
struct Member {
    process: Option<NodeProcess>,
    data_dir: PathBuf,
    log_path: PathBuf,
    control_path: PathBuf,
    paused: bool,
    /// Its data directory was wiped since it last started: the next start
    /// passes `--refill` (no replica reads before a refill from every peer).
    wiped: bool,
    role: Role,
    /// The seed URL it joined through (every start passes `--join` again).
    join: Option<String>,
}

/// A running cluster. Dropping it kills every node (then stops the proxies).
pub struct Cluster {
    spec: ClusterSpec,
    // Field order: the nodes go (Drop) before the proxies.
    members: Vec<Member>,
    links: Arc<Links>,
    fronts: Vec<FaultProxy>,
    view: Arc<ClusterView>,
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> HarnessError {
    move |source| HarnessError::Io { what, source }
}

/// `args` for a node: a joining node (`--join`) takes its replication
/// factor from the layout, so without `--replication-factor` (the node
/// refuses one above its one-node list).
fn serve_args(args: &[String], joining: bool) -> Vec<String> {
    const FACTOR: &str = "--replication-factor";
    let mut out = Vec::with_capacity(args.len());
    let mut skip_value = false;
    for a in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if joining && a == FACTOR {
            skip_value = true;
            continue;
        }
        if joining && a.starts_with("--replication-factor=") {
            continue;
        }
        out.push(a.clone());
    }
    out
}

impl Cluster {
    /// Starts the proxies, then every node, and waits until all are ready.
    pub fn start(spec: ClusterSpec) -> Result<Cluster, HarnessError> {
        if spec.nodes < 2 {
            return Err(HarnessError::Usage(format!(
                "a cluster needs 2 nodes or more, not {}",
                spec.nodes
            )));
        }
        let n = spec.nodes + spec.spares;
        let proxy = || FaultProxy::start_without_target().map_err(io_error("start a proxy".into()));
        let fronts = (0..n).map(|_| proxy()).collect::<Result<Vec<_>, _>>()?;
        let mut links = Vec::with_capacity(n);
        for i in 0..n {
            let row = (0..n)
                .map(|j| if i == j { Ok(None) } else { proxy().map(Some) })
                .collect::<Result<Vec<_>, _>>()?;
            links.push(row);
        }
        let scheme = if crate::http_client::tls::enabled() {
            "https://"
        } else {
            "http://"
        };
        let urls: Vec<String> = fronts
            .iter()
            .map(|f| f.url().replacen("http://", scheme, 1))
            .collect();
        let unbound = SocketAddr::from(([127, 0, 0, 1], 0));
        let view = Arc::new(ClusterView {
            urls,
            addrs: (0..n).map(|_| Mutex::new(unbound)).collect(),
            resp_addrs: (0..n).map(|_| Mutex::new(None)).collect(),
            targets: Mutex::new((0..spec.nodes).collect()),
            secret: secret_of(&spec.serve_args)?,
        });
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            let home = spec.dir.join(format!("node-{i}"));
            std::fs::create_dir_all(&home)
                .map_err(io_error(format!("create {}", home.display())))?;
            members.push(Member {
                process: None,
                data_dir: home.join("data"),
                log_path: home.join("serve.log"),
                control_path: home.join("fault-control"),
                paused: false,
                wiped: false,
                role: if i < spec.nodes {
                    Role::Member
                } else {
                    Role::Spare
                },
                join: None,
            });
        }
        let mut cluster = Cluster {
            spec,
            members,
            links: Arc::new(Links { proxies: links }),
            fronts,
            view,
        };
        for i in 0..n {
            cluster.set_control(i, Control::default())?;
        }
        let members = cluster.spec.nodes;
        for i in 0..members {
            cluster.spawn(i)?;
        }
        if cluster.spec.spares > 0 {
            // The first start bootstrapped layout version 1 from the
            // members' list; started again with every slot in `--cluster`
            // (the stored layout wins), each gets `--peer-via` for every
            // slot, so a spare it later dials goes through its link proxy.
            let unclean = cluster.stop_all();
            if let Some((i, what)) = unclean.first() {
                return Err(HarnessError::Node {
                    node: *i,
                    reason: format!("stop after the first start: {what}"),
                });
            }
            for i in 0..members {
                cluster.spawn(i)?;
            }
        }
        Ok(cluster)
    }

    /// The clients' view (URLs and current addresses).
    pub fn view(&self) -> Arc<ClusterView> {
        Arc::clone(&self.view)
    }

    /// Nodes.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True for a cluster without nodes (never built).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Node `i`'s log file.
    pub fn log_path(&self, i: usize) -> &Path {
        &self.members[i].log_path
    }

    /// The link proxies.
    pub fn links(&self) -> Arc<Links> {
        Arc::clone(&self.links)
    }

    /// The proxy carrying node `from`'s connections to node `to`.
    pub fn link(&self, from: usize, to: usize) -> Option<&FaultProxy> {
        self.links.link(from, to)
    }

    /// Every link back to passing bytes at once.
    pub fn heal_links(&self) {
        self.links.heal();
    }

    /// True while node `i` has a process (running or paused).
    pub fn is_up(&self, i: usize) -> bool {
        self.members[i].process.is_some()
    }

    /// Slot `i`'s role.
    pub fn role(&self, i: usize) -> Role {
        self.members[i].role
    }

    /// Sets slot `i`'s role.
    pub fn set_role(&mut self, i: usize, role: Role) {
        self.members[i].role = role;
    }

    /// The slots that are members of the newest layout, in order.
    pub fn member_slots(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.members[i].role == Role::Member)
            .collect()
    }

    /// The first spare slot, if any.
    pub fn first_spare(&self) -> Option<usize> {
        (0..self.len()).find(|&i| self.members[i].role == Role::Spare)
    }

    /// Starts spare slot `i` empty with `--join seed` (it waits to be
    /// added); it stays a spare until the caller commits a layout adding it.
    pub fn start_joining(&mut self, i: usize, seed: &str) -> Result<(), HarnessError> {
        self.members[i].join = Some(seed.to_owned());
        self.members[i].wiped = false;
        self.spawn(i)
    }

    /// Stops node `i`: SIGCONT, SIGTERM, up to [`STOP_TIMEOUT`], then
    /// SIGKILL. `Err` with what happened unless it exited with status 0.
    pub fn stop(&mut self, i: usize) -> Result<(), String> {
        let _ = self.signal(i, libc::SIGCONT);
        let _ = self.signal(i, libc::SIGTERM);
        let member = &mut self.members[i];
        member.paused = false;
        let Some(mut process) = member.process.take() else {
            return Err("was not running".into());
        };
        match process.wait_within(STOP_TIMEOUT) {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(format!("after SIGTERM: {s}")),
            None => Err(format!(
                "not stopped within {STOP_TIMEOUT:?} of SIGTERM; SIGKILL: {}",
                process.kill()
            )),
        }
    }

    /// Makes stopped slot `i` a spare again: data removed, no seed, no
    /// `--refill` (its next start is a fresh `--join`).
    pub fn retire(&mut self, i: usize) -> Result<(), HarnessError> {
        self.wipe(i)?;
        let member = &mut self.members[i];
        member.wiped = false;
        member.join = None;
        member.role = Role::Spare;
        self.view.set_target(i, false);
        Ok(())
    }

    /// Starts node `i` on its data directory and waits until it is ready;
    /// the proxies in front of it follow its new address. The first start
    /// after a wipe passes `--refill`.
    fn spawn(&mut self, i: usize) -> Result<(), HarnessError> {
        let n = self.len();
        let view = Arc::clone(&self.view);
        let urls = view.urls();
        let member = &self.members[i];
        let has_layout = member.data_dir.join("LAYOUT").exists();
        // `--cluster`: the members' list for their first start (it
        // bootstraps layout version 1), every slot later. A node started
        // with `--join` takes no `--cluster` (nor, so, `--peer-via`): it
        // dials its peers at their URLs, the front proxies, whose links
        // no network fault touches (docs/RELIABILITY.md, "Membership").
        let named: Vec<usize> = if member.join.is_some() {
            Vec::new()
        } else if has_layout {
            (0..n).collect()
        } else {
            (0..self.spec.nodes).collect()
        };
        let cluster_list: Vec<&str> = named.iter().map(|&j| urls[j].as_str()).collect();
        let via: Vec<String> = named
            .iter()
            .filter(|&&j| j != i)
            .filter_map(|&j| Some(format!("{}={}", urls[j], self.link(i, j)?.addr())))
            .collect();
        let member = &mut self.members[i];
        assert!(member.process.is_none(), "node {i} is still running");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&member.log_path)
            .map_err(io_error(format!("open {}", member.log_path.display())))?;
        let mut command = Command::new(&self.spec.exe);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&member.data_dir)
            .args(["--self", &urls[i]])
            .args(
                (!named.is_empty())
                    .then(|| {
                        [
                            "--cluster",
                            &cluster_list.join(","),
                            "--peer-via",
                            &via.join(","),
                        ]
                        .map(str::to_owned)
                    })
                    .into_iter()
                    .flatten(),
            )
            .args(
                member
                    .join
                    .iter()
                    .flat_map(|seed| ["--join", seed.as_str()]),
            )
            .arg("--fault-control")
            .arg(&member.control_path)
            .args(member.wiped.then_some("--refill"))
            .args(
                self.spec
                    .resp
                    .then_some(["--resp-listen", "127.0.0.1:0"])
                    .into_iter()
                    .flatten(),
            )
            .args(serve_args(&self.spec.serve_args, member.join.is_some()))
            .stderr(Stdio::from(log));
        let process = NodeProcess::launch(command, START_TIMEOUT, |_| {}).map_err(|e| {
            HarnessError::Node {
                node: i,
                reason: format!("{e}; see {}", member.log_path.display()),
            }
        })?;
        let addr = process.addr();
        let resp_addr =
            match self.spec.resp {
                true => Some(process.resp_addr_within(START_TIMEOUT).ok_or_else(|| {
                    HarnessError::Node {
                        node: i,
                        reason: format!(
                            "no RESP listening line; see {}",
                            member.log_path.display()
                        ),
                    }
                })?),
                false => None,
            };
        *lock(&self.view.resp_addrs[i]) = resp_addr;
        member.process = Some(process);
        self.members[i].wiped = false;
        self.view.set_addr(i, addr);
        self.fronts[i].set_target(addr);
        for j in 0..n {
            if let Some(proxy) = self.link(j, i) {
                proxy.set_target(addr);
            }
        }
        Ok(())
    }

    fn signal(&self, i: usize, signal: libc::c_int) -> bool {
        self.members[i]
            .process
            .as_ref()
            .is_some_and(|p| p.signal(signal))
    }

    /// SIGKILL and wait; the exit status as text.
    fn kill_and_reap(&mut self, i: usize) -> String {
        let member = &mut self.members[i];
        member.paused = false;
        match member.process.take() {
            Some(mut process) => process.kill(),
            None => "not running".into(),
        }
    }

    /// `kill -9` node `i` and wait for it. `Err` with the status when the
    /// process had already exited on its own (a crash to record).
    pub fn kill9(&mut self, i: usize) -> Result<(), String> {
        let _ = self.signal(i, libc::SIGKILL);
        let member = &mut self.members[i];
        member.paused = false;
        let Some(mut process) = member.process.take() else {
            return Err("was not running".into());
        };
        match process.wait() {
            Ok(s) if s.signal() == Some(libc::SIGKILL) => Ok(()),
            Ok(s) => Err(s.to_string()),
            Err(e) => Err(format!("wait failed: {e}")),
        }
    }

    /// `kill -9` every node of `nodes` at once: every SIGKILL is sent
    /// before any is waited for (one by one, the last would live on while
    /// the first is reaped, and write out what the others lost). Then
    /// [`Cluster::kill9`]'s result for each.
    pub fn kill9_at_once(&mut self, nodes: &[usize]) -> Vec<(usize, Result<(), String>)> {
        for &i in nodes {
            let _ = self.signal(i, libc::SIGKILL);
        }
        nodes.iter().map(|&i| (i, self.kill9(i))).collect()
    }

    /// Starts stopped node `i` again on its data directory.
    pub fn restart(&mut self, i: usize) -> Result<(), HarnessError> {
        self.spawn(i)
    }

    /// Removes node `i`'s data directory (the node must be stopped); its
    /// next start passes `--refill`.
    pub fn wipe(&mut self, i: usize) -> Result<(), HarnessError> {
        assert!(self.members[i].process.is_none(), "wipe of a running node");
        self.members[i].wiped = true;
        let dir = &self.members[i].data_dir;
        match std::fs::remove_dir_all(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(HarnessError::Io {
                what: format!("wipe {}", dir.display()),
                source: e,
            }),
        }
    }

    /// SIGSTOP node `i`.
    pub fn pause(&mut self, i: usize) -> bool {
        let done = self.signal(i, libc::SIGSTOP);
        self.members[i].paused |= done;
        done
    }

    /// SIGCONT node `i`.
    pub fn resume(&mut self, i: usize) -> bool {
        self.members[i].paused = false;
        self.signal(i, libc::SIGCONT)
    }

    /// Rewrites node `i`'s fault-control file (atomically: a rename).
    pub fn set_control(&self, i: usize, control: Control) -> Result<(), HarnessError> {
        let path = &self.members[i].control_path;
        let tmp = path.with_extension("tmp");
        let text = format!(
            "disk_full={}\nclock_offset_ms={}\nsync_delay_ms={}\n",
            u8::from(control.disk_full),
            control.clock_offset_ms,
            self.spec.sync_delay_ms.max(control.sync_delay_ms)
        );
        std::fs::write(&tmp, text).map_err(io_error(format!("write {}", tmp.display())))?;
        std::fs::rename(&tmp, path).map_err(io_error(format!("rename to {}", path.display())))
    }

    /// `GET /metrics` of node `i` (None without an answer).
    pub fn metrics(&self, i: usize) -> Option<String> {
        let (status, body) =
            request_once(self.view.addr(i), "GET", "/metrics", PROBE_TIMEOUT).ok()?;
        (status == 200).then(|| String::from_utf8_lossy(&body).into_owned())
    }

    /// Nodes whose process exited while the harness did not stop it, with
    /// their exit status; they are reaped (not running any more).
    pub fn poll_exits(&mut self) -> Vec<(usize, String)> {
        let mut exited = Vec::new();
        for (i, member) in self.members.iter_mut().enumerate() {
            let status = member.process.as_mut().and_then(NodeProcess::try_wait);
            if let Some(status) = status {
                member.process = None;
                member.paused = false;
                exited.push((i, status.to_string()));
            }
        }
        exited
    }

    /// Stops every node: SIGCONT, SIGTERM, wait up to [`STOP_TIMEOUT`],
    /// then SIGKILL. Returns the nodes that did not exit with status 0,
    /// with what happened.
    pub fn stop_all(&mut self) -> Vec<(usize, String)> {
        for i in 0..self.len() {
            let _ = self.signal(i, libc::SIGCONT);
            let _ = self.signal(i, libc::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let mut unclean = Vec::new();
        for i in 0..self.len() {
            let Some(process) = self.members[i].process.as_mut() else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            match process.wait_within(left) {
                Some(s) if s.success() => {
                    self.members[i].process = None;
                }
                Some(s) => {
                    self.members[i].process = None;
                    unclean.push((i, format!("after SIGTERM: {s}")));
                }
                None => {
                    let status = self.kill_and_reap(i);
                    unclean.push((
                        i,
                        format!(
                            "not stopped within {STOP_TIMEOUT:?} of SIGTERM; SIGKILL: {status}"
                        ),
                    ));
                }
            }
        }
        unclean
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            if self.members[i].process.is_some() {
                let _ = self.kill_and_reap(i);
            }
        }
    }
}
