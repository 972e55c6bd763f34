//! Latency percentiles and the JSON / text output every benchmark shares.

use crate::error::{BenchError, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::path::Path;

/// Largest latency a histogram records exactly; larger values are clamped
/// (one minute is far beyond any sane commit or read).
pub const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// Significant decimal digits the histograms keep (0.1% resolution).
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// Nanoseconds per microsecond.
const NS_PER_US: f64 = 1000.0;

/// A new latency histogram in nanoseconds (reported in microseconds, so
/// sub-microsecond acknowledgements are not rounded to zero or one).
pub fn latency_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, LATENCY_SIGNIFICANT_DIGITS)
        .map_err(|e| BenchError::InvalidArgument(format!("latency histogram: {e}")))
}

/// Adds `part` into `total`.
pub fn merge(total: &mut Histogram<u64>, part: &Histogram<u64>) -> Result<()> {
    total
        .add(part)
        .map_err(|e| BenchError::Check(format!("merging latency histograms: {e}")))
}

/// Records one latency, clamped into the histogram's range.
pub fn record_latency(h: &mut Histogram<u64>, latency: std::time::Duration) {
    let ns = u64::try_from(latency.as_nanos()).unwrap_or(LATENCY_NS_MAX);
    h.saturating_record(ns.clamp(1, LATENCY_NS_MAX));
}

/// Latency percentiles in microseconds (from a nanosecond histogram).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    /// Largest value seen.
    pub max: f64,
}

impl Percentiles {
    /// The percentiles of a nanosecond histogram, in microseconds (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles {
                p50: 0.0,
                p99: 0.0,
                p99_9: 0.0,
                max: 0.0,
            };
        }
        let us = |ns: u64| (ns as f64 / NS_PER_US * 10.0).round() / 10.0;
        Percentiles {
            p50: us(h.value_at_quantile(0.50)),
            p99: us(h.value_at_quantile(0.99)),
            p99_9: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us",
            self.p50, self.p99, self.p99_9, self.max
        )
    }
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| BenchError::io(path, e))
}

/// `count / seconds`, 0 for an empty interval.
pub fn per_sec(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Percentiles come out in order and the JSON names the 99.9th "p99.9".
    #[test]
    fn percentiles_shape() {
        let mut h = latency_histogram().unwrap();
        for us in 1..=1000u64 {
            record_latency(&mut h, std::time::Duration::from_micros(us));
        }
        let p = Percentiles::of(&h);
        assert!(p.p50 <= p.p99 && p.p99 <= p.p99_9 && p.p99_9 <= p.max);
        assert!((p.p50 - 500.0).abs() < 1.0, "p50 {} us", p.p50);
        let json = serde_json::to_value(p).unwrap();
        for key in ["p50", "p99", "p99.9", "max"] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
    }
}
