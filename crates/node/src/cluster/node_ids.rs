//! Node ids: which id each member of a layout holds, and which id a
//! change gives the nodes it adds (pure rules, used by
//! [`super::layout::Layout::apply`]).
//!
//! A node id is the low bits of every timestamp the member issues
//! (`hlc`), so two members must never issue under one id: two
//! writes of one key through them in the same millisecond would carry one
//! timestamp with two values, and replicas could keep different ones
//! forever. The id is part of the layout, agreed with it, so every node
//! knows every member's id and a member keeps its id across versions and
//! restarts (its `LAYOUT` holds it). A node that holds no id (joining, not
//! added yet, or removed) stamps nothing.
//!
//! # Rules
//! - A bootstrap layout gives the `--cluster` list ids `0..n` in list order
//!   (`Layout::bootstrap`).
//! - A change keeps the id of every member it keeps.
//! - The ids of the members it removes go to the end of the layout's
//!   `retired` list (oldest first).
//! - Each node it adds (in URL order, so the result does not depend on the
//!   order the request named them in) gets the smallest id that no member
//!   holds and that is not retired. When every such id is taken, it gets
//!   the id retired longest ago (the first of `retired`), which leaves the
//!   list; never an id removed by the same change.
//!
//! # Why reuse is sound (the clock's reuse horizon)
//! A removed member `A` may go on stamping with its id `X` after the
//! change: it is partitioned and has not learned it, or its clock ran
//! ahead. `X` is given again only when
//! 1. `A` is in no live layout: changes are admitted only when no
//!    transition is under way (`super::admission`), and the same change
//!    never gives an id it removes, so the transition that removed `A`
//!    has settled. By then every member of the newer version has raised
//!    its `ack`, which it does only once its fence refuses coordinators on
//!    older versions (`net::fence`): no write `A` stamps after that
//!    can be stored by a member, and `A`'s own copies are read by no one.
//! 2. and every one of the other [`NODE_IDS`] ids is held or retired more
//!    recently: least recently retired first, so the horizon is as long as
//!    the id space allows (a cluster that never has all 256 ids in use or
//!    retired never reuses one).
//!
//! So a reused id meets `A`'s timestamps only through writes `A` had
//! acknowledged before the transition settled; those lie in the past of
//! the new holder's clock unless `A`'s clock ran more than the time the
//! reuse took ahead of the new holder's (bounded by
//! `hlc::PEER_CLOCK_AHEAD_MS_MAX` for anything a replica accepts).

use super::layout::{NODE_IDS, NodeId};

/// Members as (URL, node id).
pub type Members = Vec<(String, NodeId)>;

/// Checks that `ids` are one distinct id below [`NODE_IDS`] for each of
/// `members` members, and that `retired` is distinct, below [`NODE_IDS`]
/// and held by no member; `Err` says what is wrong.
pub fn check(members: usize, ids: &[NodeId], retired: &[NodeId]) -> Result<(), String> {
    if ids.len() != members {
        return Err(format!("{} ids for {members} members", ids.len()));
    }
    let mut seen = [false; NODE_IDS];
    for &id in ids.iter().chain(retired) {
        let Some(slot) = seen.get_mut(usize::from(id)) else {
            return Err(format!("id {id} is not below {NODE_IDS}"));
        };
        if *slot {
            return Err(format!("id {id} is held or retired twice"));
        }
        *slot = true;
    }
    Ok(())
}

/// The smallest id neither in `held` nor in `retired`, `None` when every
/// id is one of them.
pub fn smallest_free(held: &[NodeId], retired: &[NodeId]) -> Option<NodeId> {
    (0..NODE_IDS as NodeId).find(|id| !held.contains(id) && !retired.contains(id))
}

/// The members and retired ids after a change: `current` (URL and id)
/// without `remove`, with `add` (the `# Rules` paragraph); `retired` is the
/// current retired list, oldest first. `Err` when an added node finds no
/// id (every id held, or removed by this very change).
pub fn assign(
    current: &[(String, NodeId)],
    retired: &[NodeId],
    remove: &[String],
    add: &[String],
) -> Result<(Members, Vec<NodeId>), String> {
    let mut members: Members = Vec::with_capacity(current.len() + add.len());
    let mut removed: Vec<NodeId> = Vec::new();
    for (url, id) in current {
        if remove.contains(url) {
            removed.push(*id);
        } else {
            members.push((url.clone(), *id));
        }
    }
    let mut retired = retired.to_vec();
    let mut added: Vec<&String> = add.iter().collect();
    added.sort();
    for url in added {
        let held: Vec<NodeId> = members
            .iter()
            .map(|(_, id)| *id)
            .chain(removed.iter().copied())
            .collect();
        let id = match smallest_free(&held, &retired) {
            Some(id) => id,
            None if !retired.is_empty() => retired.remove(0),
            None => {
                return Err(format!(
                    "no node id left for {url}: all {NODE_IDS} are held or removed by this change"
                ));
            }
        };
        members.push((url.clone(), id));
    }
    retired.extend(removed);
    Ok((members, retired))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(i: u16) -> String {
        format!("http://n{i}")
    }

    fn members(pairs: &[(u16, NodeId)]) -> Vec<(String, NodeId)> {
        pairs.iter().map(|&(u, id)| (url(u), id)).collect()
    }

    /// Distinct ids below the bound, one per member, retired ones held by no member.
    #[test]
    fn check_refuses_bad_ids() {
        assert_eq!(check(3, &[0, 1, 2], &[3, 4]), Ok(()));
        assert!(check(3, &[0, 1], &[]).unwrap_err().contains("2 ids for 3"));
        assert!(check(2, &[1, 1], &[]).unwrap_err().contains("id 1"));
        assert!(check(2, &[0, 1], &[1]).unwrap_err().contains("id 1"));
        assert!(check(1, &[0], &[5, 5]).unwrap_err().contains("id 5"));
        assert!(check(1, &[256], &[]).unwrap_err().contains("256"));
        assert!(check(1, &[0], &[256]).unwrap_err().contains("256"));
        // At the bound (negative control).
        assert_eq!(check(1, &[255], &[]), Ok(()));
    }

    /// Regression (joined node takes id 0): an added node gets the smallest
    /// id no member holds, never a member's; kept members keep theirs.
    #[test]
    fn added_node_gets_the_smallest_unheld_id() {
        let (m, r) = assign(&members(&[(1, 0), (2, 1), (3, 2)]), &[], &[], &[url(9)]).unwrap();
        assert_eq!(m, members(&[(1, 0), (2, 1), (3, 2), (9, 3)]));
        assert!(r.is_empty());
        // A gap below is filled first.
        let (m, _) = assign(&members(&[(1, 0), (3, 2)]), &[], &[], &[url(9)]).unwrap();
        assert_eq!(m, members(&[(1, 0), (3, 2), (9, 1)]));
    }

    /// A removed member's id is retired, not given to a node added by the
    /// same change nor by a later one while another id is free.
    #[test]
    fn removed_ids_are_retired_not_reused() {
        let (m, r) = assign(
            &members(&[(1, 0), (2, 1), (3, 2)]),
            &[],
            &[url(1)],
            &[url(9)],
        )
        .unwrap();
        assert_eq!(m, members(&[(2, 1), (3, 2), (9, 3)]));
        assert_eq!(r, vec![0]);
        let (m, r) = assign(&m, &r, &[url(2)], &[url(8)]).unwrap();
        assert_eq!(m, members(&[(3, 2), (9, 3), (8, 4)]));
        assert_eq!(r, vec![0, 1]);
    }

    /// Added nodes get ids in URL order whatever order the change names them.
    #[test]
    fn added_in_url_order() {
        let base = members(&[(1, 0)]);
        let a = assign(&base, &[], &[], &[url(5), url(3)]).unwrap();
        let b = assign(&base, &[], &[], &[url(3), url(5)]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.0, members(&[(1, 0), (3, 1), (5, 2)]));
    }

    /// With every id held or retired, the one retired longest ago is
    /// reused (and leaves the list); with none retired, a clear error.
    #[test]
    fn exhausted_ids_reuse_the_oldest_retired() {
        let current: Vec<(String, NodeId)> = (0..254).map(|i| (url(i), i)).collect();
        let (m, r) = assign(&current, &[255, 254], &[], &[url(900)]).unwrap();
        assert_eq!(m.last(), Some(&(url(900), 255)));
        assert_eq!(r, vec![254]);
        let full: Vec<(String, NodeId)> = (0..256).map(|i| (url(i), i)).collect();
        // Removing one and adding one in the same change: the removed id is not free.
        let err = assign(&full, &[], &[url(0)], &[url(900)]).unwrap_err();
        assert!(err.contains("no node id left for http://n900"), "{err}");
        // The next change may reuse it (the transition settled in between).
        let (after, retired) = assign(&full, &[], &[url(0)], &[]).unwrap();
        let (m, r) = assign(&after, &retired, &[], &[url(900)]).unwrap();
        assert_eq!(m.last(), Some(&(url(900), 0)));
        assert!(r.is_empty());
    }
}
