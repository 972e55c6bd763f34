//! Tests of the SSTable module as a whole: model-based round trips,
//! corruption, and decoding of arbitrary bytes.
