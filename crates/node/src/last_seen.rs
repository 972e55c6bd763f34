//! `<data-dir>/LAST-SEEN`: when this node was last up, and the refusal to
//! start on data older than the tombstone grace (`docs/FORMAT.md`,
//! "LAST-SEEN"; the procedure in `docs/CLUSTER.md`, "Rejoining after a
//! long absence").
//!
//! Replicas drop a tombstone once anti-entropy covered its key with every
//! replica (repair-based collection, `antientropy::horizon`), so a node
//! that was down keeps its peers' tombstones of the keys it shares; this
//! check is the second line, for when that does not hold (the planted
//! `collect-on-grace-alone`, the grace rule). A node that was down longer
//! than the grace (`--tombstone-grace-ms`) may then
//! have missed deletes whose tombstones its peers no longer have; its old
//! values would then look newer than nothing, and anti-entropy, read repair
//! or its hints would bring the deleted keys back. So a node of a cluster
//! that finds its data directory older than the grace refuses to start and
//! says how to rejoin: wipe the directory, start with `--refill`, `ataman ctl repair`.
//!
//! The file is one line, the wall-clock time in Unix milliseconds in
//! decimal, written to `LAST-SEEN.tmp`, fsynced, renamed over `LAST-SEEN`,
//! and the directory fsynced: a reader sees the old time or the new one,
//! never a torn one.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file's name in the data directory ("LAST-SEEN").
pub const FILE_NAME: &str = "LAST-SEEN";
/// The temporary file a new time is written to before the rename ("LAST-SEEN").
pub const TEMP_NAME: &str = "LAST-SEEN.tmp";
/// Longest time between two writes of the file while the node runs.
pub const WRITE_INTERVAL_MAX: Duration = Duration::from_secs(10);
/// Shortest time between two writes (a tiny grace must not make it spin).
pub const WRITE_INTERVAL_MIN: Duration = Duration::from_millis(10);
/// How far in the future the recorded time may be before the start is
/// refused: more means the clock went back (an RTC reset, a bad NTP step),
/// and then neither the time away nor new timestamps can be trusted.
pub const CLOCK_BACK_TOLERANCE: Duration = Duration::from_secs(300);

/// How often a running node rewrites the file: a tenth of the grace, at
/// most [`WRITE_INTERVAL_MAX`], so the time it records is never more than
/// that behind when the node stops without a clean shutdown.
pub fn write_interval(grace: Duration) -> Duration {
    (grace / 10).clamp(WRITE_INTERVAL_MIN, WRITE_INTERVAL_MAX)
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Records `ms` as the time the node was last up, atomically and durably.
pub fn write(dir: &Path, ms: u64) -> std::io::Result<()> {
    crate::decimal_file::write(dir, FILE_NAME, TEMP_NAME, ms)
}

/// The recorded time, `None` when there is no file.
pub fn read(dir: &Path) -> Result<Option<u64>, String> {
    crate::decimal_file::read(dir, FILE_NAME, "decimal milliseconds")
}

/// True when the directory holds a node's data: the engine's `MANIFEST`
/// or the hint store. A missing or empty directory does not.
pub fn holds_data(dir: &Path) -> bool {
    dir.join("MANIFEST").exists() || dir.join("hints").exists()
}

/// When the directory's data was last written, from the modification times
/// of its files (the engine's and the hint store's), in Unix milliseconds;
/// `None` when no time can be read.
fn newest_mtime_ms(dir: &Path) -> Option<u64> {
    let mut newest: Option<u64> = None;
    for sub in [dir.to_path_buf(), dir.join("hints")] {
        let Ok(entries) = std::fs::read_dir(&sub) else {
            continue;
        };
        for entry in entries.flatten() {
            let ms = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64);
            newest = newest.max(ms);
        }
    }
    newest
}

/// Refuses a start on data last up more than `grace` before `now_ms`.
///
/// Passes for a directory without data. Data without the file (a directory
/// from before the file existed, or a file removed by hand) is judged by
/// the newest modification time of its files, which is never later than
/// the node was last up: the check can only err towards refusing. A
/// recorded time more than [`CLOCK_BACK_TOLERANCE`] in the future is
/// refused too: the clock went back.
pub fn check(dir: &Path, grace: Duration, now_ms: u64) -> Result<(), String> {
    if !holds_data(dir) {
        return Ok(());
    }
    let (last, source) = match read(dir)? {
        Some(last) => (last, format!("{FILE_NAME} says")),
        None => match newest_mtime_ms(dir) {
            Some(last) => (
                last,
                format!("{FILE_NAME} is missing; its newest file was written"),
            ),
            None => return Ok(()),
        },
    };
    let dir = dir.display();
    let rejoin = format!(
        "To rejoin the cluster: remove the directory ({dir}), start the node again with \
         --refill (it starts empty and serves no reads until anti-entropy has refilled it \
         from its peers; `ataman ctl repair --url <this node's URL>` waits for that) \
         (docs/CLUSTER.md, \"Rejoining after a long absence\")."
    );
    let tolerance_ms = CLOCK_BACK_TOLERANCE.as_millis() as u64;
    if last > now_ms.saturating_add(tolerance_ms) {
        return Err(format!(
            "refusing to start: {source} the data directory {dir} was last up at {} \
             (unix ms {last}), {} after the clock's time now ({}). The system clock went \
             back, so how long the node was away cannot be told and its new timestamps \
             would lose to its old ones. Fix the clock; if the clock is right, the data \
             directory cannot be trusted. {rejoin}",
            utc(last),
            human(last - now_ms),
            utc(now_ms),
        ));
    }
    let grace_ms = grace.as_millis() as u64;
    let away_ms = now_ms.saturating_sub(last);
    if away_ms <= grace_ms {
        return Ok(());
    }
    Err(format!(
        "refusing to start: {source} the data directory {dir} was last up at {} \
         (unix ms {last}), {} ago, longer than the tombstone grace of {grace_ms} ms \
         (--tombstone-grace-ms). While it was away its peers may have dropped the \
         tombstones of deletes it missed, and its old values would bring those keys back. \
         {rejoin}",
        utc(last),
        human(away_ms),
    ))
}

/// [`check`] for a node of `config` now, when it is one of several
/// members (a single node has no peers to have missed deletes from).
pub fn check_member(config: &crate::config::NodeConfig) -> Result<(), String> {
    if config.cluster.len() > 1 {
        return check(&config.data_dir, config.tombstone_grace, now_ms());
    }
    Ok(())
}

/// `ms` as a duration people read: `3d 4h`, `5h 2m`, `12m 3s`, `4.2s`.
fn human(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian).
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written times read back; a torn or foreign file is an error, not a guess.
    #[test]
    fn write_read_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Ok(None));
        write(dir.path(), 1_700_000_000_123).unwrap();
        assert_eq!(read(dir.path()), Ok(Some(1_700_000_000_123)));
        assert!(!dir.path().join(TEMP_NAME).exists());
        for bad in ["", "12", "x\n", "12 \n", "99999999999999999999999\n"] {
            std::fs::write(dir.path().join(FILE_NAME), bad).unwrap();
            assert!(read(dir.path()).is_err(), "{bad:?}");
        }
    }

    /// Fresh or empty directories start; data within the grace starts; data
    /// older than the grace is refused with the directory, the time, the
    /// grace, the reason and the procedure in the message.
    #[test]
    fn stale_data_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let grace = Duration::from_millis(2000);
        let missing = dir.path().join("nothing-here");
        assert!(check(&missing, grace, 10_000_000).is_ok());
        assert!(check(dir.path(), grace, 10_000_000).is_ok());
        std::fs::write(dir.path().join("MANIFEST"), b"x").unwrap();
        write(dir.path(), 1_000_000).unwrap();
        assert!(check(dir.path(), grace, 1_002_000).is_ok());
        let e = check(dir.path(), grace, 1_002_001).unwrap_err();
        for part in [
            &dir.path().display().to_string()[..],
            "1970-01-01 00:16:40 UTC",
            "2000 ms",
            "tombstones",
            "remove the directory",
            "ataman ctl repair",
        ] {
            assert!(e.contains(part), "{part:?} missing from {e}");
        }
    }

    /// Data without the file is judged by its files' newest modification
    /// time: just written passes, the same files judged a grace later are
    /// refused with the reason naming the missing file.
    #[test]
    fn missing_file_falls_back_to_file_times() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MANIFEST"), b"x").unwrap();
        let written = newest_mtime_ms(dir.path()).unwrap();
        let grace = Duration::from_millis(2000);
        assert!(check(dir.path(), grace, written + 2000).is_ok());
        let e = check(dir.path(), grace, written + 2001).unwrap_err();
        assert!(e.contains("LAST-SEEN is missing"), "{e}");
        assert!(e.contains("remove the directory"), "{e}");
        // A newer file in the hint store counts too.
        std::fs::create_dir(dir.path().join("hints")).unwrap();
        std::fs::write(dir.path().join("hints").join("000001.log"), b"x").unwrap();
        assert!(newest_mtime_ms(dir.path()).unwrap() >= written);
    }

    /// A recorded time far in the future (the clock went back) is refused;
    /// within the tolerance it passes.
    #[test]
    fn clock_gone_back_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MANIFEST"), b"x").unwrap();
        let grace = Duration::from_secs(3600);
        let tolerance = CLOCK_BACK_TOLERANCE.as_millis() as u64;
        write(dir.path(), 10_000_000 + tolerance).unwrap();
        assert!(check(dir.path(), grace, 10_000_000).is_ok());
        write(dir.path(), 10_000_001 + tolerance).unwrap();
        let e = check(dir.path(), grace, 10_000_000).unwrap_err();
        assert!(e.contains("clock went back"), "{e}");
        assert!(e.contains("Fix the clock"), "{e}");
    }

    /// The interval is a tenth of the grace, clamped.
    #[test]
    fn interval() {
        assert_eq!(
            write_interval(Duration::from_secs(864_000)),
            WRITE_INTERVAL_MAX
        );
        assert_eq!(
            write_interval(Duration::from_millis(2000)),
            Duration::from_millis(200)
        );
        assert_eq!(write_interval(Duration::from_millis(5)), WRITE_INTERVAL_MIN);
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(human(90_061_000), "1d 1h");
    }
}
