//! Simulated file system (stub: being written)
