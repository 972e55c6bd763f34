//! The WAL thread (being written)
