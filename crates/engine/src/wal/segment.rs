//! WAL segment file names: `NNNNNN.wal`, numbered in the engine's file-number space.

/// File name of WAL segment number `n`.
pub fn segment_file_name(n: u64) -> String {
    format!("{n:06}.wal")
}

/// The number of a WAL segment file name, if it is one.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
