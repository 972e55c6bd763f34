//! Which keys two nodes both keep, and so compare.
//!
//! Anti-entropy keeps every key on its top `R` replicas (`--replication-factor`,
//! placement of `crate::cluster::placement`). Nodes `a` and `b` compare
//! exactly the keys both of them are among the top `R` of; a key outside
//! that set is none of their business together. Both sides of a session
//! filter with the same function, so their trees cover the same keys.

use crate::cluster::placement;

/// True when nodes `a` and `b` (indexes in the cluster list) are both among
/// the top `replicas` nodes of `key`'s placement.
pub fn shared(seeds: &[u64], key: &[u8], replicas: usize, a: usize, b: usize) -> bool {
    let top = placement::rank_with_seeds(seeds, key, replicas);
    top.contains(&a) && top.contains(&b)
}

/// The top `replicas` nodes of `key`, as a bit set over node indexes (a
/// cluster has at most `crate::hlc::NODES_MAX` = 256 nodes). A scan that
/// builds one tree per peer ranks each key once with this and tests the
/// bits of `self` and each peer.
pub fn holders(seeds: &[u64], key: &[u8], replicas: usize) -> NodeSet {
    let mut set = NodeSet::default();
    for i in placement::rank_with_seeds(seeds, key, replicas) {
        set.insert(i);
    }
    set
}

/// A set of node indexes below 256.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSet([u64; 4]);

impl NodeSet {
    /// Adds node `i`.
    pub fn insert(&mut self, i: usize) {
        assert!(i < crate::hlc::NODES_MAX, "node index {i}");
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// True when node `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        i < crate::hlc::NODES_MAX && self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds(n: usize) -> Vec<u64> {
        let urls: Vec<String> = (0..n)
            .map(|i| format!("http://127.0.0.1:{}", 9000 + i))
            .collect();
        placement::seeds(&urls)
    }

    /// With R = cluster size every pair shares every key; with R = 1 no
    /// pair of distinct nodes shares any; `holders` agrees with `shared`.
    #[test]
    fn shared_follows_placement() {
        let s = seeds(5);
        for k in 0..500u32 {
            let key = k.to_string();
            let key = key.as_bytes();
            for a in 0..5 {
                for b in 0..5 {
                    assert!(shared(&s, key, 5, a, b));
                    assert_eq!(
                        shared(&s, key, 1, a, b),
                        a == b && placement::rank_with_seeds(&s, key, 1)[0] == a
                    );
                    let h = holders(&s, key, 3);
                    assert_eq!(shared(&s, key, 3, a, b), h.contains(a) && h.contains(b));
                }
            }
        }
    }

    /// With R = 2 of 3 nodes, a pair shares about a third of the keys
    /// (each key's top two is one of three pairs).
    #[test]
    fn pairs_share_a_third_at_r2_of_3() {
        let s = seeds(3);
        let n = 30_000u32;
        let c = (0..n)
            .filter(|k| shared(&s, k.to_string().as_bytes(), 2, 0, 1))
            .count();
        let share = c as f64 / f64::from(n);
        assert!((0.30..0.37).contains(&share), "{share}");
    }
}
