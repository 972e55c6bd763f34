//! The one-pass copy's rule for one key (pure, values in and a decision
//! out; `super::one_pass` drives it): every source in the pass offers
//! what it holds of a key the gaining node gains: the key's first old
//! replica offers its version with the value (its share,
//! `super::scope::Share`), the others their digest entry. The newest
//! timestamp wins (equal timestamps are the same write, `crate::hlc`), so
//! the version offered is applied when nobody offers newer; otherwise the
//! newest is fetched from a source that offered it; either unless the
//! gaining node already holds it (or newer: a write of the transition).
//!
//! [`Merger`] gathers the offers: the sources' pages, each in key order,
//! merged like a k-way merge; a key is ready once every unfinished
//! source's pages reached past it (the *frontier*), so it holds every
//! source's offer.

use crate::peer::frame::Stamped;
use std::collections::{BTreeMap, VecDeque};

/// What one source offers of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// Its version, value included (the source's share).
    Version(Stamped),
    /// Only its version's timestamp (a digest entry).
    Digest {
        /// The timestamp.
        ts: u64,
    },
}

impl Offer {
    fn ts(&self) -> u64 {
        match self {
            Offer::Version(v) => v.ts,
            Offer::Digest { ts } => *ts,
        }
    }
}

/// What the gaining node does with one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Apply this version, offered by `source`, unless this node holds
    /// its timestamp or newer.
    ApplyUnlessHeld {
        /// The source that offered it (for the figures).
        source: usize,
        /// The version.
        version: Stamped,
    },
    /// Fetch the key from `source`, unless this node holds `ts` or newer.
    FetchUnlessHeld {
        /// A source that offered the newest timestamp.
        source: usize,
        /// That timestamp.
        ts: u64,
    },
}

/// The decision for one key from every source's offer (`(source, offer)`,
/// at most one per source); `None` when nobody offers anything.
pub fn take(offers: Vec<(usize, Offer)>) -> Option<Take> {
    let newest = offers.iter().map(|(_, o)| o.ts()).max()?;
    let mut digest_source = None;
    for (source, offer) in offers {
        match offer {
            Offer::Version(version) if version.ts == newest => {
                return Some(Take::ApplyUnlessHeld { source, version });
            }
            Offer::Digest { ts } if ts == newest && digest_source.is_none() => {
                digest_source = Some(source);
            }
            _ => {}
        }
    }
    digest_source.map(|source| Take::FetchUnlessHeld { source, ts: newest })
}

/// Every source's offers of one key, by key.
pub type Offers = BTreeMap<Vec<u8>, Vec<(usize, Offer)>>;

/// One source's offers not yet ready, and how far its pages reached.
#[derive(Debug, Default)]
struct Queue {
    offers: VecDeque<(Vec<u8>, Offer)>,
    /// The last key its pages reached (`None`: no page yet).
    after: Option<Vec<u8>>,
    finished: bool,
}

/// The k-way merge of the sources' pages (values in: pages; out: the
/// keys ready, with every source's offer).
#[derive(Debug)]
pub struct Merger {
    queues: Vec<Queue>,
}

impl Merger {
    /// A merge of `sources` sources, each resuming after `after`.
    pub fn new(sources: usize, after: Option<Vec<u8>>) -> Merger {
        let queue = || Queue {
            after: after.clone(),
            ..Queue::default()
        };
        Merger {
            queues: (0..sources).map(|_| queue()).collect(),
        }
    }

    /// The sources to ask for their next page: unfinished, every offer
    /// of theirs already ready.
    pub fn used_up(&self) -> Vec<usize> {
        (0..self.queues.len())
            .filter(|&i| !self.queues[i].finished && self.queues[i].offers.is_empty())
            .collect()
    }

    /// How far source `i`'s pages reached (where its next page starts).
    pub fn after(&self, i: usize) -> Option<&[u8]> {
        self.queues[i].after.as_deref()
    }

    /// Source `i`'s next page: its offers, in key order, all within
    /// `(after(i), next]`; `next` `None`: its last page.
    pub fn push(&mut self, i: usize, offers: Vec<(Vec<u8>, Offer)>, next: Option<Vec<u8>>) {
        let q = &mut self.queues[i];
        q.offers.extend(offers);
        q.finished = next.is_none();
        if next.is_some() {
            q.after = next;
        }
    }

    /// The frontier: the smallest key every unfinished source's pages
    /// reached. `Some(None)`: every source finished (no bound); `None`:
    /// a source has no page yet (nothing is ready).
    fn frontier(&self) -> Option<Option<Vec<u8>>> {
        let mut least: Option<&Vec<u8>> = None;
        for q in self.queues.iter().filter(|q| !q.finished) {
            let after = q.after.as_ref()?;
            least = Some(least.map_or(after, |l| l.min(after)));
        }
        Some(least.cloned())
    }

    /// Takes every ready key (up to the frontier) with every source's
    /// offer of it, and the frontier (`None`: every source finished).
    /// Empty when no key is ready yet.
    pub fn ready(&mut self) -> (Offers, Option<Vec<u8>>) {
        let mut ready = Offers::new();
        let Some(frontier) = self.frontier() else {
            return (ready, None);
        };
        let within = |key: &[u8]| frontier.as_deref().is_none_or(|f| key <= f);
        for (i, q) in self.queues.iter_mut().enumerate() {
            while q.offers.front().is_some_and(|(k, _)| within(k)) {
                let Some((key, offer)) = q.offers.pop_front() else {
                    break;
                };
                ready.entry(key).or_default().push((i, offer));
            }
        }
        (ready, frontier)
    }

    /// True when every source finished and every offer was taken.
    pub fn done(&self) -> bool {
        self.queues
            .iter()
            .all(|q| q.finished && q.offers.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn version(ts: u64) -> Offer {
        Offer::Version(Stamped {
            ts,
            value: Some(vec![1]),
            deadline_ms: None,
        })
    }

    fn applied(source: usize, ts: u64) -> Option<Take> {
        let Offer::Version(version) = version(ts) else {
            unreachable!()
        };
        Some(Take::ApplyUnlessHeld { source, version })
    }

    /// The version is applied unless a digest is newer; the newest digest
    /// is fetched from the first source offering it; an equal timestamp is
    /// the same write; nothing offered, nothing taken.
    #[test]
    fn the_newest_offer_wins() {
        assert_eq!(take(vec![]), None);
        assert_eq!(take(vec![(0, version(5))]), applied(0, 5));
        let equal = vec![(1, Offer::Digest { ts: 5 }), (0, version(5))];
        assert_eq!(take(equal), applied(0, 5));
        let older = vec![(0, version(5)), (2, Offer::Digest { ts: 4 })];
        assert_eq!(take(older), applied(0, 5));
        let newer = vec![
            (0, version(5)),
            (1, Offer::Digest { ts: 6 }),
            (2, Offer::Digest { ts: 6 }),
        ];
        assert_eq!(
            take(newer),
            Some(Take::FetchUnlessHeld { source: 1, ts: 6 })
        );
        // The first old replica missed the key (or is dead): digests alone.
        let missed = vec![(2, Offer::Digest { ts: 3 }), (1, Offer::Digest { ts: 7 })];
        assert_eq!(
            take(missed),
            Some(Take::FetchUnlessHeld { source: 1, ts: 7 })
        );
    }

    proptest! {
        /// Sources holding random key sets, each cut into random pages:
        /// whatever order the pages come in (every used-up source asked,
        /// one of them answering first), every key comes out ready once,
        /// with exactly the offers of the sources holding it, in key order
        /// over the whole merge.
        #[test]
        fn every_key_comes_out_once_with_every_offer(
            held in proptest::collection::vec(
                proptest::collection::btree_set(0u16..400, 0..60), 1..4),
            cuts in proptest::collection::vec(1usize..9, 1..40),
            order in proptest::collection::vec(0usize..3, 1..200),
        ) {
            let key = |k: u16| k.to_be_bytes().to_vec();
            let sources = held.len();
            // Each source's pages: `cuts` entries at a time.
            type Page = (Vec<(Vec<u8>, Offer)>, Option<Vec<u8>>);
            let mut pages: Vec<VecDeque<Page>> = held
                .iter()
                .enumerate()
                .map(|(i, keys)| {
                    let keys: Vec<u16> = keys.iter().copied().collect();
                    let mut out = VecDeque::new();
                    let mut at = 0;
                    let mut c = i;
                    while at < keys.len() {
                        let n = cuts[c % cuts.len()];
                        c += 1;
                        let end = (at + n).min(keys.len());
                        let page = keys[at..end]
                            .iter()
                            .map(|&k| (key(k), Offer::Digest { ts: u64::from(k) * 10 + i as u64 }))
                            .collect();
                        // The page reaches its last key, or further (a scan
                        // that examined keys outside the scope).
                        let next = (end < keys.len()).then(|| {
                            match n % 2 == 0 && keys[end] > keys[end - 1] + 1 {
                                true => key(keys[end] - 1),
                                false => key(keys[end - 1]),
                            }
                        });
                        out.push_back((page, next));
                        at = end;
                    }
                    if out.is_empty() {
                        out.push_back((Vec::new(), None));
                    }
                    out
                })
                .collect();
            let mut merger = Merger::new(sources, None);
            let mut seen: Vec<(Vec<u8>, Vec<usize>)> = Vec::new();
            let mut step = 0;
            while !merger.done() {
                // Answer the asked sources in a shuffled order.
                let mut asked = merger.used_up();
                let turn = order[step % order.len()] % asked.len().max(1);
                asked.rotate_left(turn);
                step += 1;
                for i in asked {
                    let (page, next) = pages[i].pop_front().expect("a page left");
                    merger.push(i, page, next);
                }
                let (ready, _) = merger.ready();
                for (k, offers) in ready {
                    seen.push((k, offers.iter().map(|(i, _)| *i).collect()));
                }
                prop_assert!(step < 10_000, "the merge does not end");
            }
            let mut want: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
            for (i, keys) in held.iter().enumerate() {
                for &k in keys {
                    want.entry(key(k)).or_default().push(i);
                }
            }
            let want: Vec<(Vec<u8>, Vec<usize>)> = want.into_iter().collect();
            prop_assert_eq!(seen, want);
        }
    }
}
