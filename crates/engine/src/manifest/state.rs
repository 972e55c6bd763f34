//! The state all version edits add up to: the live files and three counters.

use super::edit::{FileMeta, VersionEdit};

/// The state all edits add up to.
///
/// # Invariants
/// - `files` is sorted by `(level, number)` and holds each file number once.
/// - `next_file_number` and `last_seq` never decrease under [`apply`](Self::apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestState {
    /// Live files, sorted by `(level, number)`; each number appears once.
    pub files: Vec<FileMeta>,
    /// WAL segments below this number are obsolete.
    pub wal_segment_min: u64,
    /// Next unused file number.
    pub next_file_number: u64,
    /// Highest sequence number in the SSTables.
    pub last_seq: u64,
}

impl ManifestState {
    /// Applies an edit; an error if it removes a file that is not live or adds one twice.
    ///
    /// Removals are applied before additions, so one edit may move a file
    /// to another level by removing and re-adding its number. Scalars that
    /// are present replace the state's, except that `next_file_number` and
    /// `last_seq` take the maximum of old and new (they never move back).
    /// `wal_segment_min` is taken as given.
    ///
    /// On error the state is unchanged: the edit is checked in full first.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), String> {
        edit.validate()?;
        let mut files = self.files.clone();
        for &(level, number) in &edit.removed {
            match files.binary_search_by_key(&(level, number), |f| (f.level, f.number)) {
                Ok(at) => {
                    files.remove(at);
                }
                Err(_) => {
                    return Err(format!(
                        "edit removes file {number} at level {level}, which is not live"
                    ));
                }
            }
        }
        for file in &edit.added {
            if files.iter().any(|f| f.number == file.number) {
                return Err(format!(
                    "edit adds file {} at level {}, but that number is already live",
                    file.number, file.level
                ));
            }
            let at = files
                .binary_search_by_key(&(file.level, file.number), |f| (f.level, f.number))
                .unwrap_or_else(|at| at);
            files.insert(at, file.clone());
        }
        self.files = files;
        if let Some(v) = edit.wal_segment_min {
            self.wal_segment_min = v;
        }
        if let Some(v) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(v);
        }
        if let Some(v) = edit.last_seq {
            self.last_seq = self.last_seq.max(v);
        }
        Ok(())
    }

    /// One edit that recreates this state from nothing.
    pub fn snapshot_edit(&self) -> VersionEdit {
        VersionEdit {
            added: self.files.clone(),
            removed: Vec::new(),
            wal_segment_min: Some(self.wal_segment_min),
            next_file_number: Some(self.next_file_number),
            last_seq: Some(self.last_seq),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::test_support::{arb_edit, meta};
    use proptest::prelude::*;

    /// Adding, moving and removing files works, and the counters follow the documented rules.
    #[test]
    fn apply_semantics() {
        let mut state = ManifestState::default();
        let edit = VersionEdit {
            added: vec![meta(7, 1), meta(3, 0), meta(5, 0)],
            wal_segment_min: Some(4),
            next_file_number: Some(8),
            last_seq: Some(100),
            ..VersionEdit::default()
        };
        state.apply(&edit).unwrap();
        let numbers: Vec<_> = state.files.iter().map(|f| (f.level, f.number)).collect();
        assert_eq!(numbers, vec![(0, 3), (0, 5), (1, 7)]);
        assert_eq!(
            (
                state.wal_segment_min,
                state.next_file_number,
                state.last_seq
            ),
            (4, 8, 100)
        );

        // Move file 3 to level 2 (remove then re-add its number); counters never go back.
        let mut moved = meta(3, 2);
        moved.file_bytes = 1;
        let edit = VersionEdit {
            added: vec![moved.clone()],
            removed: vec![(0, 3)],
            next_file_number: Some(2),
            last_seq: Some(50),
            ..VersionEdit::default()
        };
        state.apply(&edit).unwrap();
        let numbers: Vec<_> = state.files.iter().map(|f| (f.level, f.number)).collect();
        assert_eq!(numbers, vec![(0, 5), (1, 7), (2, 3)]);
        assert_eq!(state.files[2], moved);
        assert_eq!((state.next_file_number, state.last_seq), (8, 100));

        // An edit without scalars leaves them alone.
        state
            .apply(&VersionEdit {
                removed: vec![(1, 7)],
                ..VersionEdit::default()
            })
            .unwrap();
        assert_eq!(
            (
                state.wal_segment_min,
                state.next_file_number,
                state.last_seq
            ),
            (4, 8, 100)
        );
        assert_eq!(state.files.len(), 2);
    }

    /// Removing a file that is not live (wrong number or wrong level) or adding a live
    /// number fails and leaves the state untouched.
    #[test]
    fn apply_rejects_and_is_atomic() {
        let mut state = ManifestState::default();
        state
            .apply(&VersionEdit {
                added: vec![meta(1, 0)],
                ..VersionEdit::default()
            })
            .unwrap();
        let before = state.clone();
        let bad = [
            VersionEdit {
                removed: vec![(0, 2)],
                ..VersionEdit::default()
            },
            VersionEdit {
                removed: vec![(1, 1)],
                ..VersionEdit::default()
            },
            VersionEdit {
                removed: vec![(0, 1), (0, 1)],
                ..VersionEdit::default()
            },
            VersionEdit {
                added: vec![meta(1, 3)],
                ..VersionEdit::default()
            },
            VersionEdit {
                added: vec![meta(9, 0), meta(9, 1)],
                last_seq: Some(1000),
                ..VersionEdit::default()
            },
        ];
        for edit in bad {
            assert!(state.apply(&edit).is_err(), "{edit:?}");
            assert_eq!(state, before);
        }
    }

    proptest! {
        /// Applying a state's snapshot edit to an empty state rebuilds exactly that state.
        #[test]
        fn snapshot_rebuilds_state(edits in proptest::collection::vec(arb_edit(), 1..6)) {
            let mut state = ManifestState::default();
            for edit in &edits {
                let _ = state.apply(edit);
            }
            let mut rebuilt = ManifestState::default();
            rebuilt.apply(&state.snapshot_edit()).unwrap();
            prop_assert_eq!(rebuilt, state);
        }
    }
}
