//! Expiring writes: `PUT /v0/entity?id=K&ttl_ms=N`.
//!
//! The coordinator (or the single node) turns the relative `ttl_ms` into
//! one absolute deadline, once, when it stamps the write: the millisecond
//! part of the version's hybrid-logical-clock timestamp plus `ttl_ms`.
//! Replicas, hints, read repair and anti-entropy carry that deadline
//! unchanged ([`crate::peer::frame::Stamped::deadline_ms`]); no replica ever
//! computes one. A deadline past [`DEADLINE_MS_MAX`] is refused (400),
//! never wrapped or clamped.

pub use ataman_engine::expiry::DEADLINE_MS_MAX;

/// When a write's value expires, as the client asked; the coordinator (or
/// the single node) turns it into one absolute deadline when it stamps the
/// write ([`Expiry::deadline_ms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiry {
    /// Never (a plain value; a delete).
    #[default]
    Never,
    /// This many milliseconds after the write's stamp (`ttl_ms`, `SET EX|PX`).
    AfterMs(u64),
    /// At this absolute Unix time in milliseconds (`SET EXAT|PXAT`).
    AtMs(u64),
}

impl Expiry {
    /// `ttl_ms` as HTTP parses it: relative, or never.
    pub fn from_ttl_ms(ttl_ms: Option<u64>) -> Self {
        ttl_ms.map_or(Expiry::Never, Expiry::AfterMs)
    }

    /// The expiry a coordinator stamps for this one under `planted` (a
    /// negative control's planted bug, `planted-bugs` feature): itself, or
    /// a TTL a thousand times longer (`expired-value-served`) or a quarter
    /// as long (`expires-early`). The node's dispatch and the simulation's
    /// coordinator both stamp through this.
    pub fn as_planted(self, planted: Option<crate::config::PlantedBug>) -> Self {
        use crate::config::PlantedBug;
        match (planted, self) {
            (Some(PlantedBug::ExpiredValueServed), Expiry::AfterMs(ms)) => {
                Expiry::AfterMs(ms.saturating_mul(1_000))
            }
            (Some(PlantedBug::ExpiresEarly), Expiry::AfterMs(ms)) => {
                Expiry::AfterMs((ms / 4).max(1))
            }
            (_, expiry) => expiry,
        }
    }

    /// The absolute deadline of a write stamped `ts` (`None`: it never
    /// expires). The error (past [`DEADLINE_MS_MAX`]) is the client's 400.
    pub fn deadline_ms(self, ts: u64) -> Result<Option<u64>, String> {
        match self {
            Expiry::Never => Ok(None),
            Expiry::AfterMs(ttl_ms) => deadline_ms(ts, ttl_ms).map(Some),
            Expiry::AtMs(at) if at <= DEADLINE_MS_MAX => Ok(Some(at)),
            Expiry::AtMs(at) => Err(format!(
                "deadline {at} ms is past the maximum of {DEADLINE_MS_MAX} ms since the Unix epoch"
            )),
        }
    }
}

/// The query parameter.
pub const TTL_PARAM: &str = "ttl_ms";

/// Parses the value of `ttl_ms`: a positive decimal integer of
/// milliseconds, at most [`DEADLINE_MS_MAX`]. The error is the client's
/// 400 message.
pub fn parse_ttl_ms(raw: &[u8]) -> Result<u64, String> {
    let bad = || {
        format!("{TTL_PARAM} must be a positive integer of milliseconds, at most {DEADLINE_MS_MAX}")
    };
    let text = std::str::from_utf8(raw).map_err(|_| bad())?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u64>() {
        Ok(ttl) if (1..=DEADLINE_MS_MAX).contains(&ttl) => Ok(ttl),
        _ => Err(bad()),
    }
}

/// The absolute deadline of a write stamped `ts` that lives `ttl_ms`: the
/// timestamp's milliseconds plus `ttl_ms`. The error (a deadline past
/// [`DEADLINE_MS_MAX`]) is the client's 400 message.
pub fn deadline_ms(ts: u64, ttl_ms: u64) -> Result<u64, String> {
    crate::hlc::millis(ts)
        .checked_add(ttl_ms)
        .filter(|d| *d <= DEADLINE_MS_MAX)
        .ok_or_else(|| {
            format!(
                "{TTL_PARAM}={ttl_ms} puts the deadline past the maximum of {DEADLINE_MS_MAX} ms since the Unix epoch"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_engine::key::timestamp_from_millis;

    /// Positive integers up to the maximum parse; anything else is refused.
    #[test]
    fn parse_bounds() {
        assert_eq!(parse_ttl_ms(b"500"), Ok(500));
        assert_eq!(parse_ttl_ms(b"1"), Ok(1));
        assert_eq!(
            parse_ttl_ms(DEADLINE_MS_MAX.to_string().as_bytes()),
            Ok(DEADLINE_MS_MAX)
        );
        for bad in [
            &b""[..],
            b"0",
            b"-5",
            b"+5",
            b"1.5",
            b"5ms",
            b"99999999999999999999999",
        ] {
            assert!(parse_ttl_ms(bad).is_err(), "{bad:?}");
        }
        assert!(parse_ttl_ms((DEADLINE_MS_MAX + 1).to_string().as_bytes()).is_err());
    }

    /// The deadline is the timestamp's milliseconds plus the TTL; past the
    /// maximum it is refused, never wrapped.
    #[test]
    fn deadline_from_the_stamp() {
        let ts = timestamp_from_millis(1_000, 7);
        assert_eq!(deadline_ms(ts, 500), Ok(1_500));
        assert_eq!(
            deadline_ms(ts, DEADLINE_MS_MAX - 1_000),
            Ok(DEADLINE_MS_MAX)
        );
        assert!(deadline_ms(ts, DEADLINE_MS_MAX - 999).is_err());
        assert!(deadline_ms(u64::MAX, DEADLINE_MS_MAX).is_err());
    }

    /// Relative expiry counts from the stamp, absolute is taken as is,
    /// both bounded by the maximum; never has no deadline.
    #[test]
    fn expiry_kinds_stamp_their_deadline() {
        let ts = timestamp_from_millis(1_000, 7);
        assert_eq!(Expiry::Never.deadline_ms(ts), Ok(None));
        assert_eq!(Expiry::AfterMs(500).deadline_ms(ts), Ok(Some(1_500)));
        assert_eq!(Expiry::AtMs(42).deadline_ms(ts), Ok(Some(42)));
        assert_eq!(
            Expiry::AtMs(DEADLINE_MS_MAX).deadline_ms(ts),
            Ok(Some(DEADLINE_MS_MAX))
        );
        assert!(Expiry::AtMs(DEADLINE_MS_MAX + 1).deadline_ms(ts).is_err());
        assert!(Expiry::AfterMs(DEADLINE_MS_MAX).deadline_ms(ts).is_err());
        assert_eq!(Expiry::from_ttl_ms(None), Expiry::Never);
        assert_eq!(Expiry::from_ttl_ms(Some(9)), Expiry::AfterMs(9));
    }

    /// Unplanted, the expiry is itself; the two planted bugs stretch or
    /// shorten only a relative TTL (an absolute deadline is the client's).
    #[test]
    fn planted_expiry_changes_only_relative_ttls() {
        use crate::config::PlantedBug;
        let ttl = Expiry::AfterMs(1_000);
        assert_eq!(ttl.as_planted(None), ttl);
        assert_eq!(
            ttl.as_planted(Some(PlantedBug::ExpiresEarly)),
            Expiry::AfterMs(250)
        );
        assert_eq!(
            Expiry::AfterMs(3).as_planted(Some(PlantedBug::ExpiresEarly)),
            Expiry::AfterMs(1)
        );
        assert_eq!(
            ttl.as_planted(Some(PlantedBug::ExpiredValueServed)),
            Expiry::AfterMs(1_000_000)
        );
        let at = Expiry::AtMs(5);
        assert_eq!(at.as_planted(Some(PlantedBug::ExpiresEarly)), at);
        assert_eq!(ttl.as_planted(Some(PlantedBug::AckBeforeWal)), ttl);
    }
}
