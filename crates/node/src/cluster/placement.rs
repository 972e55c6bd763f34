//! Rendezvous (highest random weight) hashing.
//!
//! Every node gets a seed from its URL; a key's weight on a node is
//! `xxh3(key, seed)`. The replicas of a key for `from = F` are the `F`
//! nodes of highest weight. So the set for a smaller `F` is a prefix of the
//! set for a larger one, each node holds about `F / N` of the keys, and
//! adding or removing a node moves only the keys it gains or loses.
//!
//! The URLs are hashed as given in `--cluster`: every node must get the
//! same list (order does not matter; spelling does).

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// The per-node seeds of `nodes` (hash of each URL).
pub fn seeds(nodes: &[String]) -> Vec<u64> {
    nodes.iter().map(|u| xxh3_64(u.as_bytes())).collect()
}

/// Indices of the first `from` nodes for `key`, best first; ties (equal
/// weights, in practice never) go to the lower index.
pub fn rank_with_seeds(seeds: &[u64], key: &[u8], from: usize) -> Vec<usize> {
    let mut weighted: Vec<(u64, usize)> = seeds
        .iter()
        .enumerate()
        .map(|(i, &seed)| (xxh3_64_with_seed(key, seed), i))
        .collect();
    weighted.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    weighted.into_iter().take(from).map(|(_, i)| i).collect()
}

/// Indices of the `from` replicas of `key` among `nodes` (URLs), best first.
/// Tests and tools use this to know where a key lives.
pub fn replicas(nodes: &[String], key: &[u8], from: usize) -> Vec<usize> {
    rank_with_seeds(&seeds(nodes), key, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("http://127.0.0.1:{}", 19234 + i))
            .collect()
    }

    /// The set for a smaller `from` is a prefix of the set for a larger one,
    /// and every set has distinct nodes.
    #[test]
    fn smaller_from_is_a_prefix() {
        let nodes = urls(5);
        for k in 0..1000u32 {
            let key = k.to_string();
            let all = replicas(&nodes, key.as_bytes(), 5);
            let mut sorted = all.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4], "{key}");
            for f in 1..=5 {
                assert_eq!(replicas(&nodes, key.as_bytes(), f), all[..f], "{key} {f}");
            }
        }
    }

    /// With from=1, three nodes get about a third of the keys each.
    #[test]
    fn spread_is_even() {
        let nodes = urls(3);
        let mut counts = [0u32; 3];
        let n = 30_000;
        for k in 1..=n {
            counts[replicas(&nodes, k.to_string().as_bytes(), 1)[0]] += 1;
        }
        for c in counts {
            let share = f64::from(c) / f64::from(n);
            assert!((0.30..0.37).contains(&share), "{counts:?}");
        }
    }

    /// The ranking does not depend on the order of the list, only on the URLs;
    /// removing a node moves only the keys it held.
    #[test]
    fn stable_under_reorder_and_removal() {
        let nodes = urls(4);
        let mut reversed = nodes.clone();
        reversed.reverse();
        let fewer: Vec<String> = nodes[..3].to_vec();
        let mut moved = 0;
        for k in 0..2000u32 {
            let key = k.to_string();
            let a = replicas(&nodes, key.as_bytes(), 1)[0];
            let b = replicas(&reversed, key.as_bytes(), 1)[0];
            assert_eq!(nodes[a], reversed[b], "{key}");
            let c = replicas(&fewer, key.as_bytes(), 1)[0];
            if a == 3 {
                moved += 1;
            } else {
                assert_eq!(a, c, "{key} moved although its node stayed");
            }
        }
        assert!(moved > 300, "node 3 held only {moved} of 2000 keys");
    }
}
