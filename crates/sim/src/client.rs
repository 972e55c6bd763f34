//! Simulated clients: each sends one request at a time to a random node
//! and waits for its answer, then thinks for a moment.
//!
//! Three workloads are mixed, each over its own keys, every value unique
//! (it names the operation that wrote it):
//! - **register**: a few keys overwritten, read and now and then deleted
//!   by every client (contention, newest-wins);
//! - **unique set**: each client adds keys nobody else writes, each once,
//!   and reads back the ones it added (a lost add is unambiguous);
//! - **delete / recreate**: a few keys deleted and written again (a
//!   tombstone must not hide a newer value, nor a value resurface over a
//!   newer tombstone).
//!
//! A share of PUTs ([`TTL_PUT_PERCENT`]) carry a TTL drawn from [`TTL_MS`].
//!
//! `ack` is drawn per request from `1..=from`, so some read/write pairs
//! intersect (`ack_w + ack_r > from`) and some do not.

use crate::config::{TTL_MS, TTL_PUT_PERCENT};
use crate::history::{OpId, OpKind};
use ataman_testkit::rng::Rng;

/// Keys of the register workload.
pub const REGISTER_KEYS: usize = 8;
/// Keys of the delete/recreate workload.
pub const DELETE_RECREATE_KEYS: usize = 4;
/// Unique-set keys a client remembers for reading back; older ones are forgotten.
pub const UNIQUE_REMEMBERED_MAX: usize = 64;
/// Longest pause between a client's answer and its next request, ms.
pub const THINK_MS_MAX: u64 = 20;

/// The next request of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The key.
    pub key: Vec<u8>,
    /// What to do.
    pub kind: OpKind,
    /// Replicas that must answer.
    pub ack: usize,
    /// The node to send it to.
    pub coordinator: usize,
    /// A PUT's TTL, ms (`None`: it does not expire).
    pub ttl_ms: Option<u64>,
}

/// One client.
#[derive(Debug, Default)]
pub struct Client {
    /// Its index.
    pub index: usize,
    /// Its request waiting for an answer.
    pub waiting: Option<OpId>,
    unique_next: u64,
    unique_keys: Vec<Vec<u8>>,
}

impl Client {
    /// Client `index`.
    pub fn new(index: usize) -> Self {
        Client {
            index,
            ..Client::default()
        }
    }

    /// Draws the next request; `op` is the id it will get (its values name it).
    pub fn plan(&mut self, rng: &mut Rng, op: OpId, nodes: usize, from: usize) -> Plan {
        let value = format!("v{op}-c{}", self.index).into_bytes();
        let roll = rng.below(100);
        let (key, kind) = if roll < 40 {
            let key = format!("reg/{}", rng.index(REGISTER_KEYS)).into_bytes();
            let kind = match rng.below(100) {
                0..55 => OpKind::Put(value),
                55..90 => OpKind::Get,
                _ => OpKind::Delete,
            };
            (key, kind)
        } else if roll < 70 {
            if self.unique_keys.is_empty() || rng.below(100) < 60 {
                self.unique_next += 1;
                let key = format!("set/{}/{}", self.index, self.unique_next).into_bytes();
                if self.unique_keys.len() >= UNIQUE_REMEMBERED_MAX {
                    self.unique_keys.remove(0);
                }
                self.unique_keys.push(key.clone());
                (key, OpKind::Put(value))
            } else {
                let i = rng.index(self.unique_keys.len());
                (self.unique_keys[i].clone(), OpKind::Get)
            }
        } else {
            let key = format!("dr/{}", rng.index(DELETE_RECREATE_KEYS)).into_bytes();
            let kind = match rng.below(100) {
                0..35 => OpKind::Delete,
                35..70 => OpKind::Put(value),
                _ => OpKind::Get,
            };
            (key, kind)
        };
        let ttl_ms = (matches!(kind, OpKind::Put(_)) && rng.below(100) < TTL_PUT_PERCENT)
            .then(|| rng.between(TTL_MS.0, TTL_MS.1));
        Plan {
            key,
            kind,
            ack: 1 + rng.index(from),
            coordinator: rng.index(nodes),
            ttl_ms,
        }
    }

    /// How long the client thinks before its next request, ms (at least 1,
    /// so its next request starts strictly after the last answer).
    pub fn think_ms(rng: &mut Rng) -> u64 {
        rng.between(1, THINK_MS_MAX)
    }
}
