//! ataman node (being written)
