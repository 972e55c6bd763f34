//! Compaction (being written)
