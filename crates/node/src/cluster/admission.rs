//! What `POST /v0/layout?version=N&…` does before any agreement: pure
//! rules from the node's layout history and the request to a decision
//! (docs/API.md, "Layout").
//!
//! # Rules (in this order)
//! 1. `N` names the transition under way (`N` is the current version, two
//!    versions are live) and the change applied to the old version gives
//!    exactly the current one: the request continues the same plan, 200
//!    with the current layout ([`Admission::Continues`]).
//! 2. `N` is not current + 1: 409 with the current layout
//!    ([`Admission::Conflict`]).
//! 3. A transition is under way: 409 ([`Admission::Conflict`]).
//! 4. The change does not apply (a URL added that is a member, removed
//!    that is not, `R` the nodes cannot hold, nothing changed): 400 naming
//!    it ([`Admission::Invalid`]).
//! 5. Otherwise the layout `N` is proposed to the members of the current
//!    version ([`Admission::Propose`]); whether added nodes answer is the
//!    caller's check (400), and the agreement's outcome decides 200, 409
//!    or 503 (`super::agreement`).

use super::history::History;
use super::layout::{Change, Layout, LayoutError};

/// The decision on a layout change request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Propose this layout (version current + 1) to these voters.
    Propose {
        /// The proposed layout.
        layout: Layout,
        /// The members of the current version.
        voters: Vec<String>,
    },
    /// 200: the request repeats the transition under way.
    Continues(Layout),
    /// 409 with the current layout, and why.
    Conflict {
        /// The current layout.
        current: Layout,
        /// Why.
        why: String,
    },
    /// 400: the change cannot apply.
    Invalid(LayoutError),
}

/// Decides a request for version `version` with `change`, under `history`.
pub fn admit(history: &History, version: u64, change: &Change) -> Admission {
    let current = history.current();
    if let [old, new] = history.live()
        && version == new.version
        && old.apply(change).as_ref() == Ok(new)
    {
        return Admission::Continues(new.clone());
    }
    if version != current.version + 1 {
        return Admission::Conflict {
            current: current.clone(),
            why: format!(
                "version {version} is not the next one: the current version is {}",
                current.version
            ),
        };
    }
    if history.in_transition() {
        return Admission::Conflict {
            current: current.clone(),
            why: format!("the transition to version {} is under way", current.version),
        };
    }
    match current.apply(change) {
        Ok(layout) => Admission::Propose {
            layout,
            voters: current.nodes.clone(),
        },
        Err(e) => Admission::Invalid(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(p: u16) -> String {
        format!("http://127.0.0.1:{p}")
    }

    fn add(p: u16) -> Change {
        Change {
            add: vec![url(p)],
            ..Change::default()
        }
    }

    fn settled() -> History {
        History::settled(Layout::new(1, vec![url(1), url(2), url(3)], 3).unwrap())
    }

    /// The next version with a valid change is proposed to the current members.
    #[test]
    fn next_version_is_proposed() {
        match admit(&settled(), 2, &add(4)) {
            Admission::Propose { layout, voters } => {
                assert_eq!(layout.version, 2);
                assert_eq!(layout.nodes.len(), 4);
                assert_eq!(voters, vec![url(1), url(2), url(3)]);
            }
            other => panic!("{other:?}"),
        }
    }

    /// A stale or future version is 409; an invalid change is 400 naming the URL.
    #[test]
    fn conflicts_and_invalid() {
        for v in [0, 1, 3] {
            assert!(
                matches!(admit(&settled(), v, &add(4)), Admission::Conflict { .. }),
                "version {v}"
            );
        }
        assert_eq!(
            admit(&settled(), 2, &add(2)),
            Admission::Invalid(LayoutError::AlreadyMember(url(2)))
        );
        let remove = Change {
            remove: vec![url(9)],
            ..Change::default()
        };
        assert_eq!(
            admit(&settled(), 2, &remove),
            Admission::Invalid(LayoutError::UnknownMember(url(9)))
        );
    }

    /// During a transition: the same plan again is 200, another change 409.
    #[test]
    fn one_transition_at_a_time() {
        let mut h = settled();
        let next = h.current().apply(&add(4)).unwrap();
        h.begin(next.clone()).unwrap();
        assert_eq!(admit(&h, 2, &add(4)), Admission::Continues(next));
        assert!(matches!(admit(&h, 2, &add(5)), Admission::Conflict { .. }));
        match admit(&h, 3, &add(5)) {
            Admission::Conflict { why, .. } => assert!(why.contains("under way"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
