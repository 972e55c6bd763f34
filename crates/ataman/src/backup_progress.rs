//! The progress bar of `ataman backup create` and `restore`: drawn on
//! stderr only when it is a terminal (a pipe or a file gets none), every
//! [`REDRAW_MS`], until the work says it finished. The same figures are on
//! the nodes' `/metrics` (docs/BACKUP.md, "Metrics").

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the bar is redrawn, milliseconds.
pub const REDRAW_MS: u64 = 200;
/// The bar's width in characters.
const WIDTH: usize = 30;

/// One line of the bar for `done` of `total` `unit`s.
pub fn line(done: u64, total: u64, unit: &str) -> String {
    let filled = (done.min(total) as u128 * WIDTH as u128)
        .checked_div(total as u128)
        .unwrap_or(WIDTH as u128) as usize;
    let percent = (done.min(total) as u128 * 100)
        .checked_div(total as u128)
        .unwrap_or(100);
    format!(
        "[{}{}] {percent:>3}% {done}/{total} {unit}",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled)
    )
}

/// Draws the bar for `done` of `total` bytes until `finished` is set
/// (nothing when stderr is not a terminal).
pub fn bar(done: &AtomicU64, total: u64, finished: &AtomicU64) {
    bar_of(done, total, "bytes", finished);
}

/// [`bar`] counting `unit`s.
pub fn bar_of(done: &AtomicU64, total: u64, unit: &str, finished: &AtomicU64) {
    let mut err = std::io::stderr();
    if !err.is_terminal() {
        return;
    }
    while finished.load(Ordering::Acquire) == 0 {
        let _ = write!(err, "\r{}", line(done.load(Ordering::Relaxed), total, unit));
        std::thread::sleep(Duration::from_millis(REDRAW_MS));
    }
    let _ = writeln!(err, "\r{}", line(done.load(Ordering::Relaxed), total, unit));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_fills_in_proportion_and_bounds_the_ends() {
        assert_eq!(
            line(0, 10, "bytes"),
            format!("[{}]   0% 0/10 bytes", " ".repeat(30))
        );
        assert_eq!(
            line(5, 10, "b"),
            format!("[{}{}]  50% 5/10 b", "#".repeat(15), " ".repeat(15))
        );
        assert!(line(20, 10, "b").starts_with(&format!("[{}] 100%", "#".repeat(30))));
        assert!(line(0, 0, "b").contains("100%"));
    }
}
