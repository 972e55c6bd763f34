//! `<data-dir>/LAST-SEEN`: when this node was last up, and the refusal to
//! start on data older than the tombstone grace (`docs/FORMAT.md`,
//! "LAST-SEEN"; the procedure in `docs/CLUSTER.md`, "Rejoining after a
//! long absence").
//!
//! Replicas drop a tombstone once it is older than the grace
//! (`--tombstone-grace-ms`). A node that was down longer than that may
//! have missed deletes whose tombstones its peers no longer have; its old
//! values would then look newer than nothing, and anti-entropy, read repair
//! or its hints would bring the deleted keys back. So a node of a cluster
//! that finds its data directory older than the grace refuses to start and
//! says how to rejoin: wipe the directory, start, `ataman ctl repair`.
//!
//! The file is one line, the wall-clock time in Unix milliseconds in
//! decimal, written to `LAST-SEEN.tmp`, fsynced, renamed over `LAST-SEEN`,
//! and the directory fsynced: a reader sees the old time or the new one,
//! never a torn one.

use std::fs::File;
use std::io::Write;
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
/// Longest file accepted, bytes (a decimal u64 and a newline).
const FILE_BYTES_MAX: usize = 32;

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
    let temp = dir.join(TEMP_NAME);
    let mut file = File::create(&temp)?;
    file.write_all(format!("{ms}\n").as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join(FILE_NAME))?;
    File::open(dir)?.sync_all()
}

/// The recorded time, `None` when there is no file.
pub fn read(dir: &Path) -> Result<Option<u64>, String> {
    let path = dir.join(FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let text = std::str::from_utf8(&bytes[..bytes.len().min(FILE_BYTES_MAX)])
        .ok()
        .filter(|_| bytes.len() <= FILE_BYTES_MAX);
    text.and_then(|t| t.strip_suffix('\n'))
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            format!(
                "{} is not one line of decimal milliseconds: {:?}",
                path.display(),
                String::from_utf8_lossy(&bytes[..bytes.len().min(FILE_BYTES_MAX)])
            )
        })
}

/// True when the directory holds a node's data: the engine's `MANIFEST`
/// or the hint store. A missing or empty directory does not.
pub fn holds_data(dir: &Path) -> bool {
    dir.join("MANIFEST").exists() || dir.join("hints").exists()
}

/// Refuses a start on data last up more than `grace` before `now_ms`.
///
/// Passes for a directory without data, and for data without the file (a
/// directory from before the file existed: the node starts and writes it).
pub fn check(dir: &Path, grace: Duration, now_ms: u64) -> Result<(), String> {
    if !holds_data(dir) {
        return Ok(());
    }
    let Some(last) = read(dir)? else {
        return Ok(());
    };
    let grace_ms = grace.as_millis() as u64;
    let away_ms = now_ms.saturating_sub(last);
    if away_ms <= grace_ms {
        return Ok(());
    }
    let dir = dir.display();
    Err(format!(
        "refusing to start: the data directory {dir} was last up at {} (unix ms {last}), \
         {} ago, longer than the tombstone grace of {grace_ms} ms (--tombstone-grace-ms). \
         While it was away its peers may have dropped the tombstones of deletes it missed, \
         and its old values would bring those keys back. To rejoin the cluster: remove the \
         directory ({dir}), start the node again (it starts empty), then run \
         `ataman ctl repair --url <this node's URL>` to refill it from its peers \
         (docs/CLUSTER.md, \"Rejoining after a long absence\").",
        utc(last),
        human(away_ms),
    ))
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
        // Data but no file: a directory from before the file existed.
        assert!(check(dir.path(), grace, 10_000_000).is_ok());
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
