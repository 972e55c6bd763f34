//! SVG plots of `ataman bench http` runs, written by hand (a few hundred
//! lines of text beat a plotting crate's build time): latency by
//! percentile on HdrHistogram's log "nines" axis (corrected solid,
//! uncorrected dashed), and responses per second over time. Several runs
//! overlay on one chart (`ataman bench plot A.json B.json --out X.svg`).

use super::report::{HttpReport, SpectrumPoint};
use crate::error::{BenchError, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Picture width, px.
const WIDTH_PX: f64 = 960.0;
/// Left margin (y labels), px.
const MARGIN_LEFT_PX: f64 = 80.0;
/// Right margin, px.
const MARGIN_RIGHT_PX: f64 = 30.0;
/// Top of the latency panel, px (title and legend above it).
const LATENCY_TOP_PX: f64 = 60.0;
/// Height of the latency panel, px.
const LATENCY_HEIGHT_PX: f64 = 380.0;
/// Top of the throughput panel, px.
const RATE_TOP_PX: f64 = LATENCY_TOP_PX + LATENCY_HEIGHT_PX + 90.0;
/// Height of the throughput panel, px.
const RATE_HEIGHT_PX: f64 = 220.0;
/// Height of one legend line, px.
const LEGEND_LINE_PX: f64 = 18.0;
/// Most nines on the x axis (99.9999%).
const NINES_MAX: f64 = 6.0;
/// Line colours, one per run, cycled.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// `ataman bench plot` options.
#[derive(Debug, Clone, clap::Args)]
pub struct PlotArgs {
    /// JSON reports written by `ataman bench http --json`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The SVG to write.
    #[arg(long)]
    pub out: PathBuf,
}

/// `ataman bench plot`: overlays the runs in one SVG.
pub fn main(args: &PlotArgs) -> Result<()> {
    let mut reports = Vec::with_capacity(args.files.len());
    for file in &args.files {
        let text = std::fs::read_to_string(file).map_err(|e| BenchError::io(file, e))?;
        let mut report: HttpReport = serde_json::from_str(&text)?;
        if reports.iter().any(|r: &HttpReport| r.label == report.label) {
            let stem = file.file_stem().map(|s| s.to_string_lossy().to_string());
            report.label = format!("{} ({})", report.label, stem.unwrap_or_default());
        }
        reports.push(report);
    }
    write(&args.out, &reports)
}

/// Writes the chart of `reports` to `path`.
pub fn write(path: &Path, reports: &[HttpReport]) -> Result<()> {
    std::fs::write(path, render(reports)).map_err(|e| BenchError::io(path, e))
}

/// Where a quantile sits on the nines axis: 0 for 0%, 1 for 90%, 2 for 99%, …
fn nines(quantile: f64) -> f64 {
    if quantile >= 1.0 {
        NINES_MAX
    } else {
        (-(1.0 - quantile).log10()).min(NINES_MAX)
    }
}

/// The SVG text.
pub fn render(reports: &[HttpReport]) -> String {
    let legend_px = LEGEND_LINE_PX * (reports.len() as f64 + 1.0);
    let height = RATE_TOP_PX + RATE_HEIGHT_PX + 60.0 + legend_px;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{height}" viewBox="0 0 {WIDTH_PX} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    latency_panel(&mut s, reports);
    rate_panel(&mut s, reports);
    legend(&mut s, reports, RATE_TOP_PX + RATE_HEIGHT_PX + 60.0);
    s.push_str("</svg>\n");
    s
}

fn plot_width() -> f64 {
    WIDTH_PX - MARGIN_LEFT_PX - MARGIN_RIGHT_PX
}

fn latency_panel(s: &mut String, reports: &[HttpReport]) {
    let all = || {
        reports
            .iter()
            .flat_map(|r| r.spectrum.corrected.iter().chain(&r.spectrum.uncorrected))
            .map(|p| p.latency_ms)
            .filter(|v| *v > 0.0)
    };
    let low = all().fold(f64::INFINITY, f64::min);
    let high = all().fold(0.0, f64::max);
    let (low_exp, high_exp) = if low.is_finite() && high > 0.0 {
        (
            low.log10().floor(),
            high.log10().ceil().max(low.log10().floor() + 1.0),
        )
    } else {
        (-1.0, 1.0)
    };
    let x_max = reports
        .iter()
        .flat_map(|r| r.spectrum.corrected.iter())
        .filter(|p| p.quantile < 1.0)
        .map(|p| nines(p.quantile).ceil())
        .fold(2.0f64, f64::max)
        .min(NINES_MAX);
    let x = |q: f64| MARGIN_LEFT_PX + nines(q).min(x_max) / x_max * plot_width();
    let y = |ms: f64| {
        let v = ms.max(10f64.powf(low_exp)).log10();
        LATENCY_TOP_PX + LATENCY_HEIGHT_PX
            - (v - low_exp) / (high_exp - low_exp) * LATENCY_HEIGHT_PX
    };
    title(
        s,
        LATENCY_TOP_PX - 40.0,
        "Latency by percentile (solid: corrected, from the planned send time; dashed: uncorrected)",
    );
    frame(s, LATENCY_TOP_PX, LATENCY_HEIGHT_PX);
    for n in 0..=(x_max as u32) {
        let q = 1.0 - 10f64.powi(-(n as i32));
        let px = x(q);
        grid_v(s, px, LATENCY_TOP_PX, LATENCY_HEIGHT_PX);
        let _ = writeln!(
            s,
            r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LATENCY_TOP_PX + LATENCY_HEIGHT_PX + 16.0,
            percent_label(n)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        MARGIN_LEFT_PX + plot_width() / 2.0,
        LATENCY_TOP_PX + LATENCY_HEIGHT_PX + 34.0
    );
    let mut e = low_exp;
    while e <= high_exp + 1e-9 {
        let ms = 10f64.powf(e);
        let py = y(ms);
        grid_h(s, py);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            MARGIN_LEFT_PX - 6.0,
            py + 4.0,
            ms_label(ms)
        );
        e += 1.0;
    }
    axis_title_y(
        s,
        LATENCY_TOP_PX + LATENCY_HEIGHT_PX / 2.0,
        "latency, ms (log)",
    );
    for (i, r) in reports.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        polyline(s, &steps(&r.spectrum.corrected, &x, &y), colour, 2.0, None);
        polyline(
            s,
            &steps(&r.spectrum.uncorrected, &x, &y),
            colour,
            1.2,
            Some("6,4"),
        );
    }
}

/// Points of a spectrum as a step curve: each latency holds up to its quantile
/// (exact for a histogram, where lines between points would interpolate).
fn steps(
    points: &[SpectrumPoint],
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    let mut last_x = x(0.0);
    for p in points {
        let py = y(p.latency_ms);
        out.push((last_x, py));
        last_x = x(p.quantile);
        out.push((last_x, py));
    }
    out
}

fn rate_panel(s: &mut String, reports: &[HttpReport]) {
    let seconds = reports
        .iter()
        .map(|r| r.duration_sec.ceil())
        .fold(1.0, f64::max);
    let peak = reports
        .iter()
        .flat_map(|r| r.series.iter().map(|p| p.requests as f64))
        .chain(reports.iter().map(|r| r.offered_rps))
        .fold(0.0, f64::max)
        .max(1.0);
    let step = nice_step(peak / 4.0);
    let top = (peak / step).ceil() * step;
    let x = |sec: f64| MARGIN_LEFT_PX + sec / seconds * plot_width();
    let y = |rps: f64| RATE_TOP_PX + RATE_HEIGHT_PX - rps / top * RATE_HEIGHT_PX;
    title(
        s,
        RATE_TOP_PX - 14.0,
        "Responses per second (offered rate dotted; the drain after the end not shown)",
    );
    frame(s, RATE_TOP_PX, RATE_HEIGHT_PX);
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let py = y(v);
        grid_h(s, py);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            MARGIN_LEFT_PX - 6.0,
            py + 4.0,
            count_label(v)
        );
        v += step;
    }
    let sec_step = nice_step(seconds / 10.0).max(1.0);
    let mut t = 0.0;
    while t <= seconds + 1e-9 {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{t}</text>"#,
            x(t),
            RATE_TOP_PX + RATE_HEIGHT_PX + 16.0
        );
        t += sec_step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since measuring started</text>"#,
        MARGIN_LEFT_PX + plot_width() / 2.0,
        RATE_TOP_PX + RATE_HEIGHT_PX + 34.0
    );
    axis_title_y(s, RATE_TOP_PX + RATE_HEIGHT_PX / 2.0, "responses/s");
    for (i, r) in reports.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut points = Vec::with_capacity(r.series.len() * 2);
        for p in r
            .series
            .iter()
            .filter(|p| (p.second as f64) < r.duration_sec.ceil())
        {
            let sec = p.second as f64;
            points.push((x(sec), y(p.requests as f64)));
            points.push((x(sec + 1.0), y(p.requests as f64)));
        }
        polyline(s, &points, colour, 2.0, None);
        if !r.closed_loop {
            let py = y(r.offered_rps);
            polyline(
                s,
                &[(x(0.0), py), (x(seconds), py)],
                colour,
                1.0,
                Some("2,3"),
            );
        }
    }
}

fn legend(s: &mut String, reports: &[HttpReport], top: f64) {
    for (i, r) in reports.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let py = top + LEGEND_LINE_PX * i as f64;
        polyline(
            s,
            &[
                (MARGIN_LEFT_PX, py - 4.0),
                (MARGIN_LEFT_PX + 30.0, py - 4.0),
            ],
            colour,
            3.0,
            None,
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{py:.1}">{} — p99 {:.2} ms, p99.9 {:.2} ms (uncorrected p99.9 {:.2} ms), {:.0} req/s achieved{}</text>"#,
            MARGIN_LEFT_PX + 38.0,
            escape(&r.label),
            r.latency_ms.p99,
            r.latency_ms.p99_9,
            r.uncorrected_latency_ms.p99_9,
            r.achieved_rps,
            if r.errors + r.non_2xx > 0 {
                format!(", {} errors, {} non-2xx", r.errors, r.non_2xx)
            } else {
                String::new()
            }
        );
    }
}

fn title(s: &mut String, y: f64, text: &str) {
    let _ = writeln!(
        s,
        r#"<text x="{MARGIN_LEFT_PX}" y="{y:.1}" font-size="14" font-weight="bold">{}</text>"#,
        escape(text)
    );
}

fn frame(s: &mut String, top: f64, height: f64) {
    let _ = writeln!(
        s,
        r##"<rect x="{MARGIN_LEFT_PX}" y="{top}" width="{:.1}" height="{height}" fill="none" stroke="#444"/>"##,
        plot_width()
    );
}

fn grid_v(s: &mut String, x: f64, top: f64, height: f64) {
    let _ = writeln!(
        s,
        r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/>"##,
        top + height
    );
}

fn grid_h(s: &mut String, y: f64) {
    let _ = writeln!(
        s,
        r##"<line x1="{MARGIN_LEFT_PX}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
        MARGIN_LEFT_PX + plot_width()
    );
}

fn axis_title_y(s: &mut String, y: f64, text: &str) {
    let _ = writeln!(
        s,
        r#"<text x="16" y="{y:.1}" text-anchor="middle" transform="rotate(-90 16 {y:.1})">{text}</text>"#
    );
}

fn polyline(s: &mut String, points: &[(f64, f64)], colour: &str, width: f64, dash: Option<&str>) {
    if points.is_empty() {
        return;
    }
    let mut coords = String::with_capacity(points.len() * 14);
    for (x, y) in points {
        let _ = write!(coords, "{x:.1},{y:.1} ");
    }
    let dash = dash
        .map(|d| format!(r#" stroke-dasharray="{d}""#))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>"#,
        coords.trim_end()
    );
}

/// `0%`, `90%`, `99%`, `99.9%`, … for n nines.
fn percent_label(n: u32) -> String {
    match n {
        0 => "0%".into(),
        1 => "90%".into(),
        _ => format!("99.{}%", "9".repeat(n as usize - 2)).replace("99.%", "99%"),
    }
}

fn ms_label(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.0}")
    } else {
        let digits = (-ms.log10()).ceil() as usize;
        format!("{ms:.digits$}")
    }
}

fn count_label(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{}k", v / 1e3)
    } else {
        format!("{v}")
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nines axis puts 90% at 1, 99.9% at 3, and labels them so.
    #[test]
    fn nines_axis() {
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(nines(1.0), NINES_MAX);
        assert_eq!(percent_label(0), "0%");
        assert_eq!(percent_label(2), "99%");
        assert_eq!(percent_label(4), "99.99%");
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(120.0), 200.0);
        assert_eq!(escape("a<b&"), "a&lt;b&amp;");
    }
}
