//! Memtable (being written)
