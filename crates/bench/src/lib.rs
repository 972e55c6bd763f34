//! ataman benchmarks (being written)
