//! Repair-based collection's rule: until when a key's replicas are known
//! to hold every tombstone this node holds (docs/decisions/0007,
//! "Repair-based collection").
//!
//! This node records, per (peer URL, layout version), the last two
//! sessions of its own rounds that completed with that peer ([`Repairs`]):
//! when the round started (before its scan) and when the session ended. A
//! session that completed made both sides hold, for every key they share,
//! the newer of what each held when its tree was built: this node's tree
//! at its round's start, the peer's when it answered.
//!
//! # Rules
//! [`repaired_before`] of a key, given its other replicas in every live
//! layout (`(URL, version)` pairs):
//! - **No other replica** (a single node, `R = 1`): `Some(u64::MAX)`,
//!   nothing to wait for; the caller caps it at now.
//! - **A replica never repaired** under that layout version: `None`,
//!   nothing of the key is collected (a layout change resets: a new
//!   version has no records until its rounds complete).
//! - Otherwise let `t2` be the earliest start among the replicas' *last*
//!   sessions, and for each replica `X` the newest of its two sessions that
//!   *ended* at or before `t2` (none: `None`). The answer is the earliest
//!   start among those sessions.
//!
//! # Why it is sound
//! Suppose a tombstone (or anything) stamped `ts` reached some replica, or
//! this node, by `ts + margin` (the caller's margin: the request timeout
//! and the clock skew; what arrives later by hints is the residual,
//! docs/decisions/0007). If `ts + margin` is at or before the answer, then
//! for each replica `X` a completed session with `X` started after the
//! version had landed wherever it landed and ended by `t2`: so by `t2` this
//! node held it, or something newer. Every replica's last session started
//! at or after `t2`, so its scan here held it, and the session left the
//! replica with it or something newer. A version older than it cannot come
//! back from a replica afterwards: it loses to what each replica holds.
//! One round is not enough: its sessions share one scan, made before
//! what the round fetches from its later peers.

use std::collections::BTreeMap;

/// Peers × live layout versions recorded at most (256 nodes, two live
/// versions); a record past it is not kept (its keys wait).
pub const RECORDS_MAX: usize = 2 * crate::hlc::NODES_MAX;

/// One completed session of this node's round with a peer, Unix ms on
/// this node's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// When the round started (before its scan).
    pub started_ms: u64,
    /// When the session completed.
    pub ended_ms: u64,
}

/// The last two completed sessions with one peer under one layout version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRepairs {
    /// The newest.
    pub last: Session,
    /// The one before it.
    pub previous: Option<Session>,
}

/// One other replica of a key: its URL and the live layout version it is
/// a replica in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica<'a> {
    /// The replica's URL.
    pub url: &'a str,
    /// The layout version.
    pub version: u64,
}

/// The records of completed sessions, by layout version, then peer URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repairs {
    versions: BTreeMap<u64, BTreeMap<String, PeerRepairs>>,
}

impl Repairs {
    /// Records a completed session with `url` under layout `version`; the
    /// previous last becomes the previous. False when the table is full.
    pub fn record(&mut self, url: &str, version: u64, session: Session) -> bool {
        if let Some(p) = self.versions.get_mut(&version).and_then(|v| v.get_mut(url)) {
            *p = PeerRepairs {
                last: session,
                previous: Some(p.last),
            };
            return true;
        }
        let repairs = PeerRepairs {
            last: session,
            previous: None,
        };
        self.restore(url.to_owned(), version, repairs)
    }

    /// Puts back a record (read from the file); false when the table is full.
    pub fn restore(&mut self, url: String, version: u64, repairs: PeerRepairs) -> bool {
        if self.len() >= RECORDS_MAX {
            return false;
        }
        self.versions
            .entry(version)
            .or_default()
            .insert(url, repairs);
        true
    }

    /// Forgets every version not in `live` (a layout that ended).
    pub fn keep_versions(&mut self, live: &[u64]) {
        self.versions.retain(|v, _| live.contains(v));
    }

    /// The record of `url` under `version`.
    pub fn get(&self, url: &str, version: u64) -> Option<&PeerRepairs> {
        self.versions.get(&version)?.get(url)
    }

    /// Every record, in (version, URL) order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64, &PeerRepairs)> {
        self.versions
            .iter()
            .flat_map(|(v, peers)| peers.iter().map(move |(u, p)| (u.as_str(), *v, p)))
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.versions.values().map(BTreeMap::len).sum()
    }

    /// True without records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The rule (module header): the time before which every version this
/// node holds of a key with these other `replicas` is held by all of
/// them too, or `None` while one is not covered.
pub fn repaired_before(replicas: &[Replica<'_>], repairs: &Repairs) -> Option<u64> {
    if replicas.is_empty() {
        return Some(u64::MAX);
    }
    let mut records = Vec::with_capacity(replicas.len());
    for r in replicas {
        records.push(repairs.get(r.url, r.version)?);
    }
    let t2 = records.iter().map(|p| p.last.started_ms).min()?;
    records
        .iter()
        .map(|p| {
            [Some(p.last), p.previous]
                .into_iter()
                .flatten()
                .find(|s| s.ended_ms <= t2)
                .map(|s| s.started_ms)
        })
        .try_fold(u64::MAX, |m, s| s.map(|s| m.min(s)))
}

/// The collection horizon of a key from its `repaired_before`: capped at
/// now, less the `margin_ms` a write takes to land (0 when never repaired).
pub fn horizon_ms(repaired_before: Option<u64>, now_ms: u64, margin_ms: u64) -> u64 {
    repaired_before.map_or(0, |r| r.min(now_ms).saturating_sub(margin_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(started_ms: u64, ended_ms: u64) -> Session {
        Session {
            started_ms,
            ended_ms,
        }
    }

    fn r(url: &str, version: u64) -> Replica<'_> {
        Replica { url, version }
    }

    /// Rounds of this node with b and c every 100 ms, each 10 ms long:
    /// the key is repaired before the start of the round before the last.
    #[test]
    fn two_rounds_with_every_replica_repair_before_the_first() {
        let mut rep = Repairs::default();
        let both = [r("b", 1), r("c", 1)];
        for start in [100, 200, 300] {
            rep.record("b", 1, s(start, start + 5));
            rep.record("c", 1, s(start, start + 10));
        }
        assert_eq!(repaired_before(&both, &rep), Some(200));
        assert_eq!(repaired_before(&[r("b", 1)], &rep), Some(200));
        assert_eq!(repaired_before(&[], &rep), Some(u64::MAX));
    }

    /// One round only: nothing is repaired yet (its scan came before
    /// what it fetched from its later peers).
    #[test]
    fn one_round_is_not_enough() {
        let mut rep = Repairs::default();
        rep.record("b", 1, s(100, 105));
        rep.record("c", 1, s(100, 110));
        assert_eq!(repaired_before(&[r("b", 1), r("c", 1)], &rep), None);
    }

    /// A replica missing (stopped: its sessions fail) holds the key's
    /// horizon back, however many rounds completed with the others.
    #[test]
    fn a_replica_missing_holds_the_key_back() {
        let mut rep = Repairs::default();
        rep.record("c", 1, s(50, 60));
        for start in [100, 200, 300, 400] {
            rep.record("b", 1, s(start, start + 5));
        }
        let both = [r("b", 1), r("c", 1)];
        // c's one session is older than b's last, but b has none that
        // ended before c's started: not covered.
        assert_eq!(repaired_before(&both, &rep), None);
        assert_eq!(repaired_before(&[r("b", 1), r("d", 1)], &rep), None);
        // c back: one round with it is not enough, two are.
        rep.record("c", 1, s(500, 510));
        rep.record("b", 1, s(500, 505));
        assert_eq!(repaired_before(&both, &rep), Some(50));
        rep.record("c", 1, s(600, 610));
        rep.record("b", 1, s(600, 605));
        assert_eq!(repaired_before(&both, &rep), Some(500));
    }

    /// A round that ended before a tombstone was written does not cover
    /// it: the horizon stays before the tombstone until later rounds.
    #[test]
    fn a_round_ended_before_the_tombstone_does_not_cover_it() {
        let mut rep = Repairs::default();
        for start in [100, 200] {
            rep.record("b", 1, s(start, start + 5));
        }
        let tombstone_ms = 250;
        let h = horizon_ms(repaired_before(&[r("b", 1)], &rep), 1_000, 0);
        assert!(h < tombstone_ms, "{h}");
        rep.record("b", 1, s(300, 305));
        rep.record("b", 1, s(400, 405));
        let h = horizon_ms(repaired_before(&[r("b", 1)], &rep), 1_000, 0);
        assert!(h >= tombstone_ms, "{h}");
        // The margin keeps a tombstone stamped just before a round's start.
        let h = horizon_ms(repaired_before(&[r("b", 1)], &rep), 1_000, 60);
        assert_eq!(h, 240);
    }

    /// A layout change resets: records are per version, a replica in the
    /// new version has none until rounds under it complete, and a key with
    /// replicas in two live versions needs both.
    #[test]
    fn a_layout_change_resets() {
        let mut rep = Repairs::default();
        for start in [100, 200] {
            rep.record("b", 1, s(start, start + 5));
        }
        assert_eq!(repaired_before(&[r("b", 1)], &rep), Some(100));
        assert_eq!(repaired_before(&[r("b", 2)], &rep), None);
        assert_eq!(repaired_before(&[r("b", 1), r("c", 2)], &rep), None);
        rep.keep_versions(&[2]);
        assert!(rep.is_empty());
        assert_eq!(repaired_before(&[r("b", 1)], &rep), None);
    }

    /// The horizon: never repaired is 0, no replica is now less the
    /// margin, never past now.
    #[test]
    fn horizon_caps_at_now_and_subtracts_the_margin() {
        assert_eq!(horizon_ms(None, 1_000, 10), 0);
        assert_eq!(horizon_ms(Some(u64::MAX), 1_000, 10), 990);
        assert_eq!(horizon_ms(Some(500), 1_000, 10), 490);
        assert_eq!(horizon_ms(Some(5), 1_000, 10), 0);
    }

    /// The table is bounded; a known peer is always updated.
    #[test]
    fn records_are_bounded() {
        let mut rep = Repairs::default();
        for i in 0..RECORDS_MAX {
            assert!(rep.record(&format!("n{i}"), 1, s(1, 2)));
        }
        assert!(!rep.record("late", 1, s(1, 2)));
        assert!(rep.record("n0", 1, s(3, 4)));
        assert_eq!(rep.get("n0", 1).map(|p| p.previous), Some(Some(s(1, 2))));
        assert_eq!(rep.len(), RECORDS_MAX);
    }
}
