//! Which answers a connection owes are to a HEAD (pure rule; RFC 9110
//! 9.3.2, docs/API.md "HEAD").
//!
//! A HEAD is routed and executed as the GET of the same target; its
//! answer is rendered as the GET's would be and then cut to its head
//! (`crate::http::response::strip_body`), so its status and headers,
//! `Content-Length`, `ETag` and `X-Ataman-Version` included, are the GET's.
//! A connection notes each HEAD by the id of the answer it is owed (ids
//! grow by one per request, `Conn::base_slot`), and every place that
//! writes an HTTP answer asks [`HeadIds::is_head`] of its id.
//!
//! # Rules
//! 1. A request parsed as a HEAD, or a head refused before it parsed
//!    whose bytes name HEAD, is noted under the id its answer will have.
//! 2. Noting the same id again (a head parsed again after a wait) notes
//!    it once.
//! 3. Ids below the first one still owed are forgotten when one is noted:
//!    the list holds at most [`HEADS_OWED_MAX`] ids.

use std::collections::VecDeque;

/// Ids a connection keeps at most: one per answer it may owe (its slots
/// and the request being executed).
pub const HEADS_OWED_MAX: usize = super::SLOTS_MAX + 1;

/// The ids of the answers owed to HEAD requests, in ascending order.
#[derive(Debug, Default)]
pub(super) struct HeadIds {
    ids: VecDeque<u64>,
}

impl HeadIds {
    /// Notes that answer `id` is owed to a HEAD; `owed_from` is the id of
    /// the first answer still owed (those below are out).
    pub(super) fn note(&mut self, id: u64, owed_from: u64) {
        while self.ids.front().is_some_and(|&first| first < owed_from) {
            self.ids.pop_front();
        }
        if self.ids.back() != Some(&id) {
            self.ids.push_back(id);
        }
        debug_assert!(
            self.ids.len() <= HEADS_OWED_MAX,
            "more HEADs than answers owed"
        );
    }

    /// True when answer `id` is owed to a HEAD.
    pub(super) fn is_head(&self, id: u64) -> bool {
        !self.ids.is_empty() && self.ids.contains(&id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ids.len()
    }
}

impl super::Conn {
    /// Notes that the request being parsed is a HEAD: its answer is the
    /// next one owed (ids grow by one per request; answering the ones
    /// before it does not change which id it gets).
    pub(super) fn note_head(&mut self) {
        let id = self.base_slot + self.slots.len() as u64;
        self.heads.note(id, self.base_slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a noted id is a HEAD and its neighbours are not, and noting it twice keeps one.
    #[test]
    fn noted_ids_are_heads_and_noted_once() {
        let mut heads = HeadIds::default();
        assert!(!heads.is_head(0));
        heads.note(3, 0);
        heads.note(3, 0);
        assert_eq!(heads.len(), 1);
        assert!(heads.is_head(3));
        assert!(!heads.is_head(2) && !heads.is_head(4));
    }

    // Proves answered ids are forgotten, so the list stays at the bound however long the connection lives.
    #[test]
    fn answered_ids_are_forgotten_at_the_bound() {
        let mut heads = HeadIds::default();
        // Every request a HEAD, with SLOTS_MAX answers owed: at the bound.
        for id in 0..HEADS_OWED_MAX as u64 {
            heads.note(id, 0);
        }
        assert_eq!(heads.len(), HEADS_OWED_MAX);
        // A million more, each noted as the oldest owed one goes out.
        for id in HEADS_OWED_MAX as u64..1_000_000 {
            heads.note(id, id + 1 - HEADS_OWED_MAX as u64);
            assert!(heads.len() <= HEADS_OWED_MAX);
        }
        assert!(heads.is_head(999_999));
        assert!(!heads.is_head(0));
    }
}
