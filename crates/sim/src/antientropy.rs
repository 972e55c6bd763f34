//! Anti-entropy rounds between two simulated nodes (to come: the pure core
//! `ataman_node::antientropy` is being built on branch `ae`).
