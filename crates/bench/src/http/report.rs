//! The report of `ataman bench http`: the JSON contract for scripts and
//! the text in wrk2's shape (thread stats, latency distribution, detailed
//! percentile spectrum, totals), plus the per-second series and the
//! generator's own CPU cost.

use super::stats::{Counts, Second, Totals};
use super::target::Target;
use crate::error::Result;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1e6;

/// Spectrum resolution: hdrhistogram's "ticks per half distance", as wrk2 prints it.
const SPECTRUM_TICKS_PER_HALF_DISTANCE: u32 = 5;

/// Quantiles of the summary distribution wrk2 prints.
const SUMMARY_QUANTILES: [f64; 8] = [0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 0.99999, 1.0];

/// Latency summary, milliseconds (the JSON contract's `latency_ms` shape).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Largest.
    pub max: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    /// 99.99th percentile.
    #[serde(rename = "p99.99")]
    pub p99_99: f64,
}

impl LatencyMs {
    /// Summary of a nanosecond histogram (zeros when empty).
    pub fn of(h: &Histogram<u64>) -> LatencyMs {
        if h.is_empty() {
            return LatencyMs::default();
        }
        let q = |q: f64| ms(h.value_at_quantile(q));
        LatencyMs {
            mean: round3(h.mean() / NS_PER_MS),
            stdev: round3(h.stdev() / NS_PER_MS),
            max: ms(h.max()),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
        }
    }
}

/// One point of a percentile spectrum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpectrumPoint {
    /// Quantile in [0, 1].
    pub quantile: f64,
    /// Latency at that quantile, ms.
    pub latency_ms: f64,
    /// Requests at or below it.
    pub count: u64,
}

/// Percentile spectra for plotting.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Spectra {
    /// From the planned send time.
    pub corrected: Vec<SpectrumPoint>,
    /// From the actual send time.
    pub uncorrected: Vec<SpectrumPoint>,
}

/// One second of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SecondPoint {
    /// Seconds since measuring started.
    pub second: u64,
    /// Responses completed in it.
    pub requests: u64,
    /// Of which not 2xx.
    pub non_2xx: u64,
    /// Requests that failed in it.
    pub errors: u64,
    /// Corrected p99 of what completed in it, ms.
    pub p99_ms: f64,
}

/// Requests per second of one thread in one second (wrk's `Req/Sec` row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadRps {
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Largest.
    pub max: f64,
    /// Share of samples within one stdev of the mean, %.
    pub within_stdev_pct: f64,
}

/// The bench process's own CPU cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorCpu {
    /// User + system CPU seconds of the whole bench process during the run.
    pub cpu_sec: f64,
    /// CPU microseconds per request sent (responses plus failures).
    pub cpu_us_per_request: f64,
    /// Cores kept busy on average (cpu_sec / elapsed).
    pub cores: f64,
}

/// One target of the run and what it answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    /// The target's URL.
    pub url: String,
    /// Connections to it (connection `i` goes to target `i % targets`).
    pub connections: usize,
    /// Responses it sent (any status).
    pub requests: u64,
    /// Requests to it without a response: connect + I/O errors + timeouts.
    pub errors: u64,
    /// Its responses whose status is not 2xx.
    pub non_2xx: u64,
}

/// The report's list of targets from the per-target counts.
pub fn target_reports(
    targets: &[Target],
    counts: &[Counts],
    connections: usize,
) -> Vec<TargetReport> {
    let n = targets.len().max(1);
    targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let c = counts.get(i).copied().unwrap_or_default();
            TargetReport {
                url: t.url.clone(),
                // Connections i, i + n, i + 2n, ... below `connections`.
                connections: connections.saturating_sub(i).div_ceil(n),
                requests: c.requests,
                errors: c.errors(),
                non_2xx: c.non_2xx,
            }
        })
        .collect()
}

/// The `--fill` phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FillReport {
    /// Ids loaded (1..=keys).
    pub keys: u64,
    /// Wall seconds.
    pub elapsed_sec: f64,
    /// PUTs per second.
    pub rps: f64,
}

/// What `ataman bench http` reports and writes with `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpReport {
    /// Always "http".
    pub bench: String,
    /// Name of the run (plots' legend).
    pub label: String,
    /// `--url` as given: one URL, or several separated by commas.
    pub url: String,
    /// Each target and its share (empty in reports written before targets were listed).
    #[serde(default)]
    pub targets: Vec<TargetReport>,
    /// Workload spelling.
    pub workload: String,
    /// Id distribution spelling.
    pub distribution: String,
    /// Ids are 1..=keys.
    pub keys: u64,
    /// PUT body size spelling (`S` or `MIN-MAX`).
    pub value_size: String,
    /// Client threads.
    pub threads: usize,
    /// Connections.
    pub connections: usize,
    /// Measured seconds asked for.
    pub duration_sec: f64,
    /// Warm-up seconds before measuring.
    pub warmup_sec: f64,
    /// True for `--rate 0`.
    pub closed_loop: bool,
    /// Requests/s asked for (0 in a closed loop).
    pub offered_rps: f64,
    /// Responses per second actually received.
    pub achieved_rps: f64,
    /// Responses received (any status).
    pub requests: u64,
    /// Requests without a response: connect + I/O errors + timeouts.
    pub errors: u64,
    /// Connections refused or failed to open.
    pub errors_connect: u64,
    /// Read/write errors and unframeable responses.
    pub errors_io: u64,
    /// Requests unanswered within `--timeout`.
    pub timeouts: u64,
    /// Responses whose status is not 2xx.
    pub non_2xx: u64,
    /// Requests planned before the end but never sent (the server held the connection past the drain limit).
    pub unsent: u64,
    /// Bytes received.
    pub bytes_read: u64,
    /// Bytes received per second.
    pub transfer_bytes_per_sec: f64,
    /// Seconds from the start of measuring to the last response (at least the duration).
    pub elapsed_sec: f64,
    /// Latency from the planned send time (wrk2's), ms.
    pub latency_ms: LatencyMs,
    /// Latency from the actual send time (wrk's, hides stalls), ms.
    pub uncorrected_latency_ms: LatencyMs,
    /// `--send-slack`, microseconds: how late a planned send may wait for
    /// a response's wake-up (0 in reports written before it existed).
    #[serde(default)]
    pub send_slack_us: u64,
    /// Whether the slack was used: only when each thread plans at least
    /// one send per slack (`wake::slack_in_use_ns`); else wake-ups are exact.
    #[serde(default)]
    pub send_slack_in_use: bool,
    /// From the planned to the actual send time, ms, already inside
    /// `latency_ms`: waiting for the connection's previous response (the
    /// server's share), the send slack and the generator's own delays.
    #[serde(default)]
    pub send_lag_ms: LatencyMs,
    /// Requests sent before their planned time: always 0.
    #[serde(default)]
    pub sent_early: u64,
    /// Per-thread per-second request rates.
    pub thread_rps: ThreadRps,
    /// The generator's CPU.
    pub generator: GeneratorCpu,
    /// The fill phase, if any.
    pub fill: Option<FillReport>,
    /// Per-second throughput and p99.
    pub series: Vec<SecondPoint>,
    /// Full percentile spectra.
    pub spectrum: Spectra,
}

/// Milliseconds from nanoseconds, rounded to the microsecond.
fn ms(ns: u64) -> f64 {
    round3(ns as f64 / NS_PER_MS)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The spectrum of a nanosecond histogram.
pub fn spectrum(h: &Histogram<u64>) -> Vec<SpectrumPoint> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points: Vec<SpectrumPoint> = h
        .iter_quantiles(SPECTRUM_TICKS_PER_HALF_DISTANCE)
        .map(|v| SpectrumPoint {
            quantile: v.quantile_iterated_to(),
            latency_ms: ms(h.highest_equivalent(v.value_iterated_to())),
            count: v.count_since_last_iteration(),
        })
        .collect();
    // Running totals, as wrk2's TotalCount column.
    let mut total = 0;
    for p in &mut points {
        total += p.count;
        p.count = total;
    }
    points
}

/// The per-second series from the threads' messages (every second from 0
/// to the last one appears, empty seconds as zeros: a stall must show).
pub fn series(seconds: &[Second]) -> Result<Vec<SecondPoint>> {
    let Some(last) = seconds.iter().map(|s| s.index).max() else {
        return Ok(Vec::new());
    };
    let mut merged: Vec<(Counts, Option<Histogram<u64>>)> =
        (0..=last).map(|_| (Counts::default(), None)).collect();
    for s in seconds {
        let Some(slot) = usize::try_from(s.index)
            .ok()
            .and_then(|i| merged.get_mut(i))
        else {
            continue;
        };
        slot.0.add(&s.counts);
        match &mut slot.1 {
            Some(h) => crate::report::merge(h, &s.latency_us)?,
            None => slot.1 = Some(s.latency_us.clone()),
        }
    }
    Ok(merged
        .into_iter()
        .enumerate()
        .map(|(second, (counts, h))| SecondPoint {
            second: second as u64,
            requests: counts.requests,
            non_2xx: counts.non_2xx,
            errors: counts.errors(),
            p99_ms: h
                .filter(|h| !h.is_empty())
                .map(|h| round3(h.value_at_quantile(0.99) as f64 / 1000.0))
                .unwrap_or(0.0),
        })
        .collect())
}

/// wrk's `Req/Sec` row: one sample per thread and whole second.
pub fn thread_rps(seconds: &[Second], threads: usize, whole_seconds: u64) -> ThreadRps {
    let mut samples = vec![0.0f64; threads * whole_seconds as usize];
    for s in seconds {
        if s.index < whole_seconds && s.thread < threads {
            samples[s.thread * whole_seconds as usize + s.index as usize] +=
                s.counts.requests as f64;
        }
    }
    if samples.is_empty() {
        return ThreadRps::default();
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let stdev = (samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let max = samples.iter().copied().fold(0.0, f64::max);
    let within = samples
        .iter()
        .filter(|x| (*x - mean).abs() <= stdev)
        .count() as f64;
    ThreadRps {
        mean,
        stdev,
        max,
        within_stdev_pct: within / n * 100.0,
    }
}

/// Share of values within one stdev of the mean, % (wrk's `+/- Stdev` for latency).
fn within_stdev_pct(h: &Histogram<u64>) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    let mean = h.mean();
    let stdev = h.stdev();
    let low = (mean - stdev).max(0.0) as u64;
    let high = (mean + stdev) as u64;
    let inside: u64 = h
        .iter_recorded()
        .filter(|v| (low..=high).contains(&v.value_iterated_to()))
        .map(|v| v.count_at_value())
        .sum();
    inside as f64 / h.len() as f64 * 100.0
}

/// `1.23ms`, `456.00us`, `2.10s`, as wrk prints latencies.
fn pretty_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.2}us", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

/// `12.34k` for counts.
fn pretty_count(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.2}k", x / 1e3)
    } else {
        format!("{x:.2}")
    }
}

/// `344.93MB`, as wrk prints byte counts.
fn pretty_bytes(x: f64) -> String {
    const KIB: f64 = 1024.0;
    if x >= KIB * KIB * KIB {
        format!("{:.2}GB", x / (KIB * KIB * KIB))
    } else if x >= KIB * KIB {
        format!("{:.2}MB", x / (KIB * KIB))
    } else if x >= KIB {
        format!("{:.2}KB", x / KIB)
    } else {
        format!("{x:.2}B")
    }
}

/// Prints the report in wrk2's shape, then what wrk2 does not show.
pub fn print(r: &HttpReport, totals: &Totals, with_spectrum: bool) {
    let mode = if r.closed_loop {
        "closed loop, as fast as possible".to_string()
    } else {
        format!("{} requests/s offered", r.offered_rps)
    };
    println!(
        "Running {} test @ {} ({}, {} workload, {} ids {}, values {} B)",
        pretty_duration(r.duration_sec),
        r.url,
        mode,
        r.workload,
        r.distribution,
        r.keys,
        r.value_size
    );
    println!("  {} threads and {} connections", r.threads, r.connections);
    if r.targets.len() > 1 {
        println!(
            "  {} targets (connection i to target i mod {}):",
            r.targets.len(),
            r.targets.len()
        );
        for t in &r.targets {
            println!(
                "    {}  {} connections, {} requests, {} errors, {} non-2xx",
                t.url, t.connections, t.requests, t.errors, t.non_2xx
            );
        }
    }
    println!("  Thread Stats   Avg      Stdev     Max   +/- Stdev");
    println!(
        "    Latency   {:>8}  {:>8}  {:>8}  {:>7.2}%",
        pretty_ms(r.latency_ms.mean),
        pretty_ms(r.latency_ms.stdev),
        pretty_ms(r.latency_ms.max),
        within_stdev_pct(&totals.corrected_ns)
    );
    println!(
        "    Req/Sec   {:>8}  {:>8}  {:>8}  {:>7.2}%",
        pretty_count(r.thread_rps.mean),
        pretty_count(r.thread_rps.stdev),
        pretty_count(r.thread_rps.max),
        r.thread_rps.within_stdev_pct
    );
    println!("  Latency Distribution (HdrHistogram - Recorded Latency)");
    print_distribution(&totals.corrected_ns);
    println!("  Uncorrected Latency (measured from the actual send time)");
    print_distribution(&totals.uncorrected_ns);
    if with_spectrum {
        print_spectrum(&r.spectrum.corrected, &totals.corrected_ns);
    }
    println!("----------------------------------------------------------");
    println!(
        "  {} requests in {}, {} read",
        r.requests,
        pretty_duration(r.elapsed_sec),
        pretty_bytes(r.bytes_read as f64)
    );
    if r.errors > 0 {
        println!(
            "  Socket errors: connect {}, read/write {}, timeout {}",
            r.errors_connect, r.errors_io, r.timeouts
        );
    }
    if r.non_2xx > 0 {
        println!("  Non-2xx responses: {}", r.non_2xx);
    }
    if r.unsent > 0 {
        println!(
            "  Planned but never sent (server held the connections past the drain limit): {}",
            r.unsent
        );
    }
    println!("Requests/sec: {:>10.2}", r.achieved_rps);
    println!(
        "Transfer/sec: {:>10}",
        pretty_bytes(r.transfer_bytes_per_sec)
    );
    if !r.closed_loop {
        println!(
            "Offered/sec:  {:>10.2}  (achieved {:.1}% of offered)",
            r.offered_rps,
            r.achieved_rps / r.offered_rps * 100.0
        );
    }
    println!("Per second (completions; p99 corrected):");
    println!(
        "  {:>6} {:>10} {:>8} {:>8} {:>10}",
        "second", "requests", "non-2xx", "errors", "p99"
    );
    for s in &r.series {
        println!(
            "  {:>6} {:>10} {:>8} {:>8} {:>10}",
            s.second,
            s.requests,
            s.non_2xx,
            s.errors,
            pretty_ms(s.p99_ms)
        );
    }
    println!(
        "Generator CPU: {:.2} us per request ({:.3} s user+system, {:.2} cores on average)",
        r.generator.cpu_us_per_request, r.generator.cpu_sec, r.generator.cores
    );
    println!(
        "Send lag (planned -> sent: connection busy, slack, generator; inside the corrected latency): p50 {}, p99 {}, max {}; --send-slack {}us ({}), {} sent early",
        pretty_ms(r.send_lag_ms.p50),
        pretty_ms(r.send_lag_ms.p99),
        pretty_ms(r.send_lag_ms.max),
        r.send_slack_us,
        if r.send_slack_in_use {
            "in use"
        } else {
            "not in use: under one planned send per slack per thread"
        },
        r.sent_early
    );
    if let Some(fill) = &r.fill {
        println!(
            "Fill: {} ids in {:.2} s ({:.0} PUT/s, closed loop)",
            fill.keys, fill.elapsed_sec, fill.rps
        );
    }
}

fn print_distribution(h: &Histogram<u64>) {
    for q in SUMMARY_QUANTILES {
        let value = if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        };
        println!(" {:>7.3}%  {:>9}", q * 100.0, pretty_ms(ms(value)));
    }
}

fn print_spectrum(points: &[SpectrumPoint], h: &Histogram<u64>) {
    println!();
    println!("  Detailed Percentile spectrum:");
    println!("       Value   Percentile   TotalCount 1/(1-Percentile)");
    println!();
    for p in points {
        let inverse = if p.quantile < 1.0 {
            format!("{:>12.2}", 1.0 / (1.0 - p.quantile))
        } else {
            format!("{:>12}", "inf")
        };
        println!(
            "{:>12.3} {:>12.6} {:>12} {}",
            p.latency_ms, p.quantile, p.count, inverse
        );
    }
    if !h.is_empty() {
        println!(
            "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
            h.mean() / NS_PER_MS,
            h.stdev() / NS_PER_MS
        );
        println!(
            "#[Max     = {:>12.3}, Total count    = {:>12}]",
            h.max() as f64 / NS_PER_MS,
            h.len()
        );
        println!(
            "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
            h.buckets(),
            h.distinct_values()
        );
    }
}

fn pretty_duration(sec: f64) -> String {
    if sec >= 60.0 {
        format!("{:.2}m", sec / 60.0)
    } else {
        format!("{sec:.2}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{latency_histogram, record_latency};
    use std::time::Duration;

    /// The summary is ordered, and the spectrum's counts run up to the total.
    #[test]
    fn summary_and_spectrum() {
        let mut h = latency_histogram().unwrap();
        for us in 1..=10_000u64 {
            record_latency(&mut h, Duration::from_micros(us));
        }
        let s = LatencyMs::of(&h);
        assert!(s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.p99_9 && s.p99_9 <= s.max);
        assert!((s.p50 - 5.0).abs() < 0.01, "p50 {}", s.p50);
        let points = spectrum(&h);
        assert_eq!(points.last().unwrap().count, 10_000);
        assert!(points.windows(2).all(|w| w[0].quantile <= w[1].quantile));
        let json = serde_json::to_value(s).unwrap();
        for key in ["mean", "max", "p50", "p90", "p99", "p99.9", "p99.99"] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
    }

    /// Seconds nobody reported appear as zeros in the series.
    #[test]
    fn series_fills_gaps() {
        let mut latency_us = super::super::stats::second_histogram().unwrap();
        latency_us.record(1000).unwrap();
        let counts = Counts {
            requests: 1,
            ..Counts::default()
        };
        let seconds = vec![
            Second {
                thread: 0,
                index: 0,
                counts,
                latency_us: latency_us.clone(),
            },
            Second {
                thread: 1,
                index: 2,
                counts,
                latency_us,
            },
        ];
        let s = series(&seconds).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].requests, 0);
        assert!((s[2].p99_ms - 1.0).abs() < 0.05);
        let t = thread_rps(&seconds, 2, 3);
        assert!(t.max >= 1.0);
    }
}
