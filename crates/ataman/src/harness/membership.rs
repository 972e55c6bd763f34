//! The membership faults (`join`, `leave`, `replace`, `leavecut`): online layout
//! changes on the running cluster, each a permanent step that is never
//! healed (docs/API.md "Layout", docs/RELIABILITY.md).
//!
//! | kind | step |
//! | --- | --- |
//! | `join` | the first spare slot starts empty with `--join` (a member's URL), then `POST /v0/layout?version=N&add=URL`; once every member says `settled`, clients send to it |
//! | `leave` | clients stop sending to the member, `POST …&remove=URL`; once it says `safe_to_stop` it is stopped and wiped: a spare again (its URL may join again later) |
//! | `replace` | `kill -9` of the member, the first spare starts with `--join`, one version `remove=DEAD&dead=DEAD&add=NEW` (declared dead: the copies skip it); the dead slot is wiped: a spare |
//! | `leavecut` | two members: clients stop sending to them, every link between them and the rest cut, one version `remove=A&remove=B` (not dead: their data must be copied first); the cut held up to [`CUT_HOLD`] (the step says whether the members settled meanwhile: a copy that skipped them), healed; once settled and each says `safe_to_stop`, both are stopped and wiped |
//!
//! One step at a time (the process lane runs them), each bounded: the
//! commit retries a 409 (a transition under way) or 503 (no majority) up
//! to [`COMMIT_TIMEOUT`]; an answer lost in the network is settled by
//! reading the layout back. A step whose change was not committed is
//! undone (the spare stopped and wiped, the dead member restarted). The
//! wait for `settled` ([`SETTLE_TIMEOUT`]) and for `safe_to_stop`
//! ([`SAFE_TO_STOP_TIMEOUT`]) may pass with the step recorded as such: a
//! removed node not yet safe keeps running (it serves no client) and is
//! stopped by a later step once it is.
//!
//! Why no `wipe` with these: a wiped member's data directory holds no
//! layout, and a node whose seed's layout names it refuses to start
//! without one (`cluster/join.rs`, "remove it from the cluster and add it
//! again"), so a wiped member could not come back under its URL.

use super::client::request_once;
use super::cluster::{Cluster, ClusterView, Role};
use crate::faultproxy::LinkMode;
use ataman_testkit::lock::lock;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bound on committing one change (409 and 503 retried until it).
pub const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on every member saying `settled` after a commit.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on a removed node saying `safe_to_stop`.
pub const SAFE_TO_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between two questions to the nodes.
pub const POLL: Duration = Duration::from_millis(250);
/// How long a `leavecut` holds its two leaving nodes cut off, at most:
/// well beyond the time the old copy rule tried a leaving source that did
/// not answer before it gave up on it (about 15 s of tries; 21 s measured
/// on a loaded 2-core machine, the planted
/// `copy-skips-partitioned-leaving-node`), so a copy that skips them
/// settles within it. Ends early once every staying member is settled.
pub const CUT_HOLD: Duration = Duration::from_secs(35);
/// Fewest members a `leavecut` starts from: the three that stay are a
/// majority of the five, so the change commits while two are cut off.
pub const LEAVE_CUT_MEMBERS_MIN: usize = 5;
/// Bound on one layout or status request (a proposal may take seconds).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The member a step planned as `planned` hits: `planned` itself when it
/// is one of `members`, else `members[planned % len]`; None without members.
pub fn pick(planned: usize, members: &[usize]) -> Option<usize> {
    if members.contains(&planned) {
        return Some(planned);
    }
    let len = members.len();
    (len > 0).then(|| members[planned % len])
}

/// `GET path` on `addr` as JSON (None without a 200 JSON answer).
fn get_json(addr: SocketAddr, path: &str) -> Option<Value> {
    let (status, body) = request_once(addr, "GET", path, REQUEST_TIMEOUT).ok()?;
    (status == 200)
        .then(|| serde_json::from_slice(&body).ok())
        .flatten()
}

/// A layout as the nodes serve it: version, members, settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `version`.
    pub version: u64,
    /// `nodes` (sorted URLs).
    pub nodes: Vec<String>,
    /// `settled`.
    pub settled: bool,
    /// `node_ids`: each member URL's node id.
    pub node_ids: BTreeMap<String, u64>,
}

fn seen(v: &Value) -> Option<Seen> {
    Some(Seen {
        version: v["version"].as_u64()?,
        nodes: v["nodes"]
            .as_array()?
            .iter()
            .filter_map(|u| u.as_str().map(str::to_owned))
            .collect(),
        settled: v["settled"].as_bool().unwrap_or(false),
        node_ids: v["node_ids"]
            .as_object()
            .map(|ids| {
                ids.iter()
                    .filter_map(|(url, id)| Some((url.clone(), id.as_u64()?)))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// What membership steps need: the cluster (locked one operation at a
/// time, never across a wait) and its view (addresses, client targets).
pub struct Membership<'a> {
    cluster: &'a Mutex<Cluster>,
    view: Arc<ClusterView>,
}

impl<'a> Membership<'a> {
    /// Steps on `cluster`.
    pub fn new(cluster: &'a Mutex<Cluster>) -> Membership<'a> {
        let view = lock(cluster).view();
        Membership { cluster, view }
    }

    fn url(&self, i: usize) -> &str {
        &self.view.urls()[i]
    }

    /// Members with a running process, in slot order.
    fn running_members(&self) -> Vec<usize> {
        let c = lock(self.cluster);
        c.member_slots()
            .into_iter()
            .filter(|&i| c.is_up(i))
            .collect()
    }

    /// The newest layout any running member serves (the highest version).
    pub fn layout(&self) -> Option<Seen> {
        self.running_members()
            .into_iter()
            .filter_map(|i| get_json(self.view.addr(i), "/v0/layout").and_then(|v| seen(&v)))
            .max_by_key(|s| s.version)
    }

    /// `(slot, node id)` of every member of the newest layout a running
    /// member serves (empty when none answers).
    pub fn node_ids(&self) -> Vec<(usize, u64)> {
        let Some(now) = self.layout() else {
            return Vec::new();
        };
        (0..self.view.len())
            .filter_map(|i| now.node_ids.get(self.url(i)).map(|&id| (i, id)))
            .collect()
    }

    /// Commits the change `add`/`remove` against the layout the members
    /// serve, retrying 409 and 503 up to [`COMMIT_TIMEOUT`], through the
    /// running members that stay. `Ok(version)` once committed (also
    /// when the answer was lost but the layout read back has the change),
    /// `Err` with the last answer otherwise. `dead`: the removed nodes are
    /// declared dead in the same request (`dead=URL`: their data is gone,
    /// the copies skip them).
    fn commit(&self, add: Option<usize>, remove: &[usize], dead: bool) -> Result<u64, String> {
        let started = Instant::now();
        let add_url = add.map(|i| self.url(i).to_owned());
        let remove_urls: Vec<String> = remove.iter().map(|&i| self.url(i).to_owned()).collect();
        let has_change = |s: &Seen| {
            add_url.as_ref().is_none_or(|u| s.nodes.contains(u))
                && remove_urls.iter().all(|u| !s.nodes.contains(u))
        };
        let mut last = String::from("no running member answered");
        let mut tries = 0u32;
        // Bounded by COMMIT_TIMEOUT: every iteration ends with a pause.
        while started.elapsed() < COMMIT_TIMEOUT {
            tries += 1;
            let members: Vec<usize> = self
                .running_members()
                .into_iter()
                .filter(|i| !remove.contains(i))
                .collect();
            let Some(&via) = members.get(tries as usize % members.len().max(1)) else {
                std::thread::sleep(POLL);
                continue;
            };
            let Some(current) = self.layout() else {
                std::thread::sleep(POLL);
                continue;
            };
            let version = (current.version + 1).to_string();
            let mut query: Vec<(&str, &[u8])> = vec![("version", version.as_bytes())];
            if let Some(url) = &add_url {
                query.push(("add", url.as_bytes()));
            }
            for url in &remove_urls {
                query.push(("remove", url.as_bytes()));
                if dead {
                    query.push(("dead", url.as_bytes()));
                }
            }
            let target = crate::http_client::url::target("/v0/layout", &query);
            match request_once(self.view.addr(via), "POST", &target, REQUEST_TIMEOUT) {
                Ok((200, body)) => {
                    let version = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|v| v["version"].as_u64())
                        .unwrap_or(current.version + 1);
                    return Ok(version);
                }
                Ok((status, body)) => {
                    last = format!(
                        "{status} from node {via}: {}",
                        String::from_utf8_lossy(&body).trim_end()
                    );
                    if status == 400 {
                        break;
                    }
                }
                Err(e) => last = format!("no answer from node {via}: {e}"),
            }
            std::thread::sleep(POLL);
            if let Some(now) = self.layout()
                && now.version > current.version
                && has_change(&now)
            {
                return Ok(now.version);
            }
        }
        match self.layout() {
            Some(now) if has_change(&now) => Ok(now.version),
            _ => Err(format!(
                "not committed after {tries} tries in {} ms: {last}",
                started.elapsed().as_millis()
            )),
        }
    }

    /// The running members that do not yet serve `version` (or newer),
    /// settled.
    fn behind(&self, version: u64) -> Vec<usize> {
        self.running_members()
            .into_iter()
            .filter(|&i| {
                let s = get_json(self.view.addr(i), "/v0/layout").and_then(|v| seen(&v));
                !s.is_some_and(|s| s.version >= version && s.settled)
            })
            .collect()
    }

    /// Waits until every running member serves `version` (or newer),
    /// settled; the time it took, or `Err` naming who was not.
    fn wait_settled(&self, version: u64) -> Result<u128, String> {
        let started = Instant::now();
        let mut behind = Vec::new();
        // Bounded by SETTLE_TIMEOUT.
        while started.elapsed() < SETTLE_TIMEOUT {
            behind = self.behind(version);
            if behind.is_empty() {
                return Ok(started.elapsed().as_millis());
            }
            std::thread::sleep(POLL);
        }
        Err(format!(
            "not settled at version {version} within {SETTLE_TIMEOUT:?}: nodes {behind:?}"
        ))
    }

    /// The slots of `nodes` some running member's `waiting_for` names
    /// (`GET /v0/layout`: what its transition waits for).
    fn waited_for(&self, nodes: &[usize]) -> Vec<usize> {
        let named: Vec<String> = self
            .running_members()
            .into_iter()
            .filter_map(|i| get_json(self.view.addr(i), "/v0/layout"))
            .flat_map(|v| {
                v["waiting_for"]
                    .as_array()
                    .map(|w| {
                        w.iter()
                            .filter_map(|e| e["node"].as_str().map(str::to_owned))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
            .collect();
        nodes
            .iter()
            .copied()
            .filter(|&i| named.iter().any(|u| u == self.url(i)))
            .collect()
    }

    /// Every link between a node of `nodes` and a node outside them set
    /// to `mode`, both ways (links among `nodes` untouched).
    fn cut_off(&self, nodes: &[usize], mode: LinkMode) {
        let links = lock(self.cluster).links();
        for &a in nodes {
            for b in (0..links.len()).filter(|b| !nodes.contains(b)) {
                for (x, y) in [(a, b), (b, a)] {
                    if let Some(link) = links.link(x, y) {
                        link.set_mode(mode);
                    }
                }
            }
        }
    }

    /// True once slot `i` says `safe_to_stop`.
    fn safe_to_stop(&self, i: usize) -> bool {
        get_json(self.view.addr(i), "/v0/status").is_some_and(|v| v["safe_to_stop"] == true)
    }

    /// Stops and wipes every removed node that says it is safe to stop;
    /// what was done, for the step's record.
    fn retire_removed(&self) -> String {
        let removed: Vec<usize> = {
            let c = lock(self.cluster);
            (0..c.len())
                .filter(|&i| c.role(i) == Role::Removed)
                .collect()
        };
        let mut done = Vec::new();
        for i in removed {
            if self.safe_to_stop(i) {
                done.push(format!("node {i} {}", self.stop_and_retire(i)));
            }
        }
        if done.is_empty() {
            String::new()
        } else {
            format!("; earlier removed: {}", done.join(", "))
        }
    }

    fn stop_and_retire(&self, i: usize) -> String {
        let mut c = lock(self.cluster);
        let stopped = match c.stop(i) {
            Ok(()) => "stopped".to_owned(),
            Err(e) => format!("stopped ({e})"),
        };
        match c.retire(i) {
            Ok(()) => format!("{stopped}, wiped"),
            Err(e) => format!("{stopped}, not wiped: {e}"),
        }
    }

    /// Starts the first spare slot with `--join` through a running member.
    fn start_spare(&self) -> Result<usize, String> {
        let seed = self
            .running_members()
            .first()
            .map(|&i| self.url(i).to_owned())
            .ok_or("no running member to join through")?;
        let mut c = lock(self.cluster);
        let spare = c.first_spare().ok_or("no spare slot")?;
        c.start_joining(spare, &seed)
            .map_err(|e| format!("slot {spare} did not start: {e}"))?;
        Ok(spare)
    }

    /// Undoes a started spare whose change was not committed.
    fn abandon_spare(&self, spare: usize) -> String {
        format!("slot {spare} {}", self.stop_and_retire(spare))
    }

    /// After a commit adding `new` (if any): every member settled, then
    /// clients send to `new`.
    fn settle(&self, version: u64, new: Option<usize>) -> String {
        let settled = self.wait_settled(version);
        if let Some(new) = new {
            self.view.set_target(new, true);
        }
        match settled {
            Ok(ms) => format!("settled after {ms} ms"),
            Err(e) => e,
        }
    }

    /// `join`: the targets hit and what happened.
    pub fn join(&self) -> (Vec<usize>, String) {
        let earlier = self.retire_removed();
        let spare = match self.start_spare() {
            Ok(s) => s,
            Err(e) => return (Vec::new(), format!("skipped: {e}{earlier}")),
        };
        let detail = match self.commit(Some(spare), &[], false) {
            Ok(version) => {
                lock(self.cluster).set_role(spare, Role::Member);
                format!(
                    "committed version {version}: slot {spare} added; {}",
                    self.settle(version, Some(spare))
                )
            }
            Err(e) => format!("{e}; {}", self.abandon_spare(spare)),
        };
        (vec![spare], format!("{detail}{earlier}"))
    }

    /// `leave` of the member `planned` picks ([`pick`]).
    pub fn leave(&self, planned: usize, min_members: usize) -> (Vec<usize>, String) {
        let earlier = self.retire_removed();
        let members = lock(self.cluster).member_slots();
        let Some(node) = pick(planned, &self.running_members()) else {
            return (Vec::new(), format!("skipped: no running member{earlier}"));
        };
        if members.len() <= min_members {
            return (
                vec![node],
                format!(
                    "skipped: {} members, the fewest allowed{earlier}",
                    members.len()
                ),
            );
        }
        self.view.set_target(node, false);
        let version = match self.commit(None, &[node], false) {
            Ok(v) => v,
            Err(e) => {
                self.view.set_target(node, true);
                return (vec![node], format!("{e}{earlier}"));
            }
        };
        lock(self.cluster).set_role(node, Role::Removed);
        let settled = self.settle(version, None);
        let started = Instant::now();
        // Bounded by SAFE_TO_STOP_TIMEOUT.
        while started.elapsed() < SAFE_TO_STOP_TIMEOUT && !self.safe_to_stop(node) {
            std::thread::sleep(POLL);
        }
        let end = if self.safe_to_stop(node) {
            format!(
                "safe to stop after {} ms, {}",
                started.elapsed().as_millis(),
                self.stop_and_retire(node)
            )
        } else {
            format!("not safe to stop within {SAFE_TO_STOP_TIMEOUT:?}: left running")
        };
        (
            vec![node],
            format!("committed version {version}: slot {node} removed; {settled}; {end}{earlier}"),
        )
    }

    /// `leavecut` of the member `planned` picks and the next running
    /// member: both cut off from every other node through their link
    /// proxies, then removed in one version (no `dead=`), the cut held
    /// while the transition runs (up to [`CUT_HOLD`], less if every
    /// staying member settles meanwhile), healed, then the members
    /// settled and each leaving node stopped and wiped once safe.
    pub fn leave_cut(&self, planned: usize, min_members: usize) -> (Vec<usize>, String) {
        let earlier = self.retire_removed();
        let running = self.running_members();
        let members = lock(self.cluster).member_slots();
        let Some(first) = pick(planned, &running) else {
            return (Vec::new(), format!("skipped: no running member{earlier}"));
        };
        let at = running.iter().position(|&i| i == first).unwrap_or(0);
        let second = running[(at + 1) % running.len()];
        let pair = [first, second];
        if second == first || members.len() < (min_members + 2).max(LEAVE_CUT_MEMBERS_MIN) {
            return (
                pair.to_vec(),
                format!(
                    "skipped: {} members, too few to remove two{earlier}",
                    members.len()
                ),
            );
        }
        for node in pair {
            self.view.set_target(node, false);
        }
        self.cut_off(&pair, LinkMode::Cut);
        let version = match self.commit(None, &pair, false) {
            Ok(v) => v,
            Err(e) => {
                self.cut_off(&pair, LinkMode::Pass);
                for node in pair {
                    self.view.set_target(node, true);
                }
                return (pair.to_vec(), format!("{e}{earlier}"));
            }
        };
        for node in pair {
            lock(self.cluster).set_role(node, Role::Removed);
        }
        let started = Instant::now();
        let mut held_for = Vec::new();
        let mut settled_cut_off = false;
        // Bounded by CUT_HOLD: every iteration ends with a pause.
        while started.elapsed() < CUT_HOLD {
            for node in self.waited_for(&pair) {
                if !held_for.contains(&node) {
                    held_for.push(node);
                }
            }
            if self.behind(version).is_empty() {
                settled_cut_off = true;
                break;
            }
            std::thread::sleep(POLL);
        }
        let held_ms = started.elapsed().as_millis();
        self.cut_off(&pair, LinkMode::Pass);
        let during = if settled_cut_off {
            format!("SETTLED after {held_ms} ms while both were cut off (waited for {held_for:?})")
        } else {
            format!("held {held_ms} ms cut off, not settled, waiting for {held_for:?}")
        };
        let settled = self.settle(version, None);
        let started = Instant::now();
        // Bounded by SAFE_TO_STOP_TIMEOUT.
        while started.elapsed() < SAFE_TO_STOP_TIMEOUT
            && !pair.iter().all(|&n| self.safe_to_stop(n))
        {
            std::thread::sleep(POLL);
        }
        let ends: Vec<String> = pair
            .iter()
            .map(|&n| {
                if self.safe_to_stop(n) {
                    format!("node {n} safe to stop, {}", self.stop_and_retire(n))
                } else {
                    format!(
                        "node {n} not safe to stop within {SAFE_TO_STOP_TIMEOUT:?}: left running"
                    )
                }
            })
            .collect();
        (
            pair.to_vec(),
            format!(
                "committed version {version}: slots {first} and {second} removed while cut off; \
                 {during}; healed, {settled}; {}{earlier}",
                ends.join(", ")
            ),
        )
    }

    /// `replace` of the member `planned` picks: `kill -9`, then a spare
    /// added in the same version that removes it.
    pub fn replace(&self, planned: usize) -> (Vec<usize>, String) {
        let earlier = self.retire_removed();
        let Some(dead) = pick(planned, &self.running_members()) else {
            return (Vec::new(), format!("skipped: no running member{earlier}"));
        };
        if lock(self.cluster).first_spare().is_none() {
            return (vec![dead], format!("skipped: no spare slot{earlier}"));
        }
        self.view.set_target(dead, false);
        let killed = match lock(self.cluster).kill9(dead) {
            Ok(()) => "kill -9".to_owned(),
            Err(e) => format!("kill -9 ({e})"),
        };
        let spare = match self.start_spare() {
            Ok(s) => s,
            Err(e) => {
                let again = self.restart_member(dead);
                return (vec![dead], format!("{killed}; {e}; {again}{earlier}"));
            }
        };
        let detail = match self.commit(Some(spare), &[dead], true) {
            Ok(version) => {
                {
                    let mut c = lock(self.cluster);
                    c.set_role(spare, Role::Member);
                    if let Err(e) = c.retire(dead) {
                        tracing::warn!(slot = dead, error = %e, "test-cluster: cannot wipe a replaced node");
                    }
                }
                format!(
                    "{killed}; committed version {version}: slot {dead} replaced by slot {spare}; {}",
                    self.settle(version, Some(spare))
                )
            }
            Err(e) => {
                let undone = self.abandon_spare(spare);
                format!("{killed}; {e}; {undone}; {}", self.restart_member(dead))
            }
        };
        (vec![dead, spare], format!("{detail}{earlier}"))
    }

    fn restart_member(&self, i: usize) -> String {
        let result = lock(self.cluster).restart(i);
        self.view.set_target(i, true);
        match result {
            Ok(()) => format!("slot {i} restarted"),
            Err(e) => format!("slot {i} restart failed: {e}"),
        }
    }

    /// Before the final checks: stops removed nodes that are safe, waits
    /// (bounded) for every member to settle, and says where the cluster
    /// ended: version and member slots.
    pub fn finish(&self) -> String {
        let earlier = self.retire_removed();
        let Some(now) = self.layout() else {
            return format!("final layout: no member answered{earlier}");
        };
        let settled = match self.wait_settled(now.version) {
            Ok(ms) => format!("settled after {ms} ms more"),
            Err(e) => e,
        };
        let slots: Vec<usize> = (0..self.view.len())
            .filter(|&i| now.nodes.iter().any(|u| u == self.url(i)))
            .collect();
        format!(
            "final layout version {}, member slots {slots:?}, {settled}{earlier}",
            now.version
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member planned is itself; a non-member maps onto the members,
    /// never outside them; no members, no target.
    #[test]
    fn pick_stays_among_members() {
        let members = [0, 2, 3, 5];
        assert_eq!(pick(2, &members), Some(2));
        for planned in 0..12 {
            let got = pick(planned, &members).unwrap();
            assert!(members.contains(&got), "{planned} -> {got}");
        }
        assert_eq!(pick(1, &members), Some(2));
        assert_eq!(pick(4, &[]), None);
    }
}
