//! A local cluster of real `ataman serve` processes, each behind a
//! [`FaultProxy`].
//!
//! The URL of node `i` in `--cluster` is its proxy's URL, so faults set on
//! proxy `i` hit all peer traffic *to* node `i`; the test's own requests
//! ([`TestCluster::get`], [`TestCluster::put`], …) go to node `i`
//! directly. A restarted node gets a new port and its proxy follows it.
//!
//! Every node has its own temporary directory (from [`Node::start`]).
//! Dropping the cluster kills the nodes, then stops the proxies.

use super::{Node, Response};
use ataman::faultproxy::FaultProxy;
use ataman::http_client::url::target;
use ataman_node::cluster::placement;

/// `n` nodes, each behind its own proxy.
pub struct TestCluster {
    // Field order: the nodes die (Drop) before their proxies stop.
    nodes: Vec<Node>,
    proxies: Vec<FaultProxy>,
    urls: Vec<String>,
}

impl TestCluster {
    /// Starts `n` nodes; node `i` runs with `--cluster <every proxy URL>
    /// --self <proxy i URL>` and `extra`. The proxies start first (their
    /// URLs are the cluster), each gets its target when its node is up.
    pub fn start(n: usize, extra: &[&str]) -> TestCluster {
        Self::start_each(n, extra, |_| Vec::new())
    }

    /// Like [`TestCluster::start`], node `i` also getting `own(i)`.
    pub fn start_each(n: usize, extra: &[&str], own: impl Fn(usize) -> Vec<String>) -> TestCluster {
        assert!(n >= 1, "a cluster has at least one node");
        let proxies: Vec<FaultProxy> = (0..n)
            .map(|_| FaultProxy::start_without_target().expect("start a fault proxy"))
            .collect();
        let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
        let cluster = urls.join(",");
        let nodes = urls
            .iter()
            .zip(&proxies)
            .enumerate()
            .map(|(i, (url, proxy))| {
                let mut args = vec!["--cluster", cluster.as_str(), "--self", url.as_str()];
                args.extend_from_slice(extra);
                let own = own(i);
                args.extend(own.iter().map(String::as_str));
                let node = Node::start(&args);
                proxy.set_target(node.addr());
                node
            })
            .collect();
        TestCluster {
            nodes,
            proxies,
            urls,
        }
    }

    /// Nodes in the cluster.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Every node's URL (its proxy's), in `--cluster` order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The proxy in front of node `i`.
    pub fn proxy(&self, i: usize) -> &FaultProxy {
        &self.proxies[i]
    }

    /// SIGKILL node `i` and wait for it.
    pub fn kill9(&mut self, i: usize) {
        self.nodes[i].kill9();
    }

    /// SIGTERM node `i` and wait (bounded) for a clean exit.
    pub fn terminate(&mut self, i: usize) {
        let status = self.nodes[i].terminate();
        assert!(
            status.success(),
            "node {i} exited with {status} after SIGTERM"
        );
    }

    /// Starts stopped node `i` again on its data directory (a new port)
    /// and points its proxy at it.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
        self.proxies[i].set_target(self.nodes[i].addr());
    }

    /// Like [`TestCluster::restart`], with `extra` arguments for this start only.
    pub fn restart_with(&mut self, i: usize, extra: &[&str]) {
        self.nodes[i].restart_with(extra);
        self.proxies[i].set_target(self.nodes[i].addr());
    }

    /// True unless node `i` was stopped by the test and not restarted.
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_running()
    }

    /// `GET /v0/entity?id=KEY&ack=A&from=F` to node `i` directly.
    pub fn get(&self, i: usize, key: &[u8], ack: u32, from: u32) -> Response {
        self.nodes[i].get_target(&entity(key, ack, from))
    }

    /// `PUT /v0/entity?id=KEY&ack=A&from=F` with `value` to node `i` directly.
    pub fn put(&self, i: usize, key: &[u8], value: &[u8], ack: u32, from: u32) -> Response {
        self.nodes[i]
            .conn()
            .request("PUT", &entity(key, ack, from), &[], Some(value))
    }

    /// `DELETE /v0/entity?id=KEY&ack=A&from=F` to node `i` directly.
    pub fn delete(&self, i: usize, key: &[u8], ack: u32, from: u32) -> Response {
        self.nodes[i]
            .conn()
            .request("DELETE", &entity(key, ack, from), &[], None)
    }

    /// Indices of the `from` replicas of `key`, most preferred first (the
    /// nodes' own placement over [`TestCluster::urls`]).
    pub fn replicas(&self, key: &[u8], from: usize) -> Vec<usize> {
        placement::replicas(&self.urls, key, from)
    }
}

/// `/v0/entity?id=KEY&ack=A&from=F`, the key percent-encoded.
pub fn entity(key: &[u8], ack: u32, from: u32) -> String {
    let (ack, from) = (ack.to_string(), from.to_string());
    target(
        "/v0/entity",
        &[
            ("id", key),
            ("ack", ack.as_bytes()),
            ("from", from.as_bytes()),
        ],
    )
}

/// A response body as text (for messages).
pub fn body(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Asserts a status, showing the body when it differs.
#[track_caller]
pub fn assert_status(r: &Response, status: u16, context: &str) {
    assert_eq!(r.status, status, "{context}: body {:?}", body(r));
}

/// Polls `check` every 50 ms until it holds; panics after `timeout`.
pub fn eventually(what: &str, timeout: std::time::Duration, mut check: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !check() {
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
