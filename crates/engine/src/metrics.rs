//! Metrics (being written)
