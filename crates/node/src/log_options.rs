//! The log options, `--log-level` and `--log-format`: which events the
//! node's log keeps and how each is printed on stderr. The node emits its
//! events with `tracing` macros; the binary installs the one subscriber
//! that prints them (`ataman` `serve`, docs/API.md "Logs").

/// Default `--log-level`.
pub const LOG_LEVEL_DEFAULT: &str = "info";
/// Default `--log-format`.
pub const LOG_FORMAT_DEFAULT: &str = "text";

/// How each log event is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One line for a person: time, level, target, message, `name=value` fields.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message`
    /// and each field under its own name.
    Json,
}

/// Parses `--log-level`: the least severe level kept.
pub fn parse_log_level(s: &str) -> Result<tracing::Level, String> {
    match s {
        "error" => Ok(tracing::Level::ERROR),
        "warn" => Ok(tracing::Level::WARN),
        "info" => Ok(tracing::Level::INFO),
        "debug" => Ok(tracing::Level::DEBUG),
        "trace" => Ok(tracing::Level::TRACE),
        other => Err(format!(
            "log-level must be error, warn, info, debug or trace, not {other:?}"
        )),
    }
}

/// Parses `--log-format`.
pub fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("log-format must be text or json, not {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeConfig, ServeArgs};

    /// Every level and format parses; anything else is an error naming the
    /// option, the accepted values and what was given.
    #[test]
    fn parse_levels_and_formats() {
        for (text, level) in [
            ("error", tracing::Level::ERROR),
            ("warn", tracing::Level::WARN),
            ("info", tracing::Level::INFO),
            ("debug", tracing::Level::DEBUG),
            ("trace", tracing::Level::TRACE),
        ] {
            assert_eq!(parse_log_level(text), Ok(level));
        }
        assert_eq!(parse_log_format("text"), Ok(LogFormat::Text));
        assert_eq!(parse_log_format("json"), Ok(LogFormat::Json));
        let e = parse_log_level("loud").unwrap_err();
        assert_eq!(
            e,
            "log-level must be error, warn, info, debug or trace, not \"loud\""
        );
        assert!(parse_log_level("INFO").is_err(), "levels are lower case");
        let e = parse_log_format("xml").unwrap_err();
        assert_eq!(e, "log-format must be text or json, not \"xml\"");
    }

    /// Like every `serve` option: the default, then the TOML file, then
    /// the flag (or its environment variable, merged by clap) wins; a bad
    /// value from either is refused by `NodeConfig::resolve`.
    #[test]
    fn resolved_like_every_option() {
        let c = NodeConfig::resolve(&ServeArgs::default()).unwrap();
        assert_eq!(
            (c.log_level, c.log_format),
            (tracing::Level::INFO, LogFormat::Text)
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ataman.toml");
        std::fs::write(&path, "log_level = \"debug\"\nlog_format = \"json\"\n").unwrap();
        let from_file = ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        };
        let c = NodeConfig::resolve(&from_file).unwrap();
        assert_eq!(
            (c.log_level, c.log_format),
            (tracing::Level::DEBUG, LogFormat::Json)
        );
        let flag_wins = ServeArgs {
            log_level: Some("warn".into()),
            log_format: Some("text".into()),
            ..from_file
        };
        let c = NodeConfig::resolve(&flag_wins).unwrap();
        assert_eq!(
            (c.log_level, c.log_format),
            (tracing::Level::WARN, LogFormat::Text)
        );
        let bad_flag = ServeArgs {
            log_level: Some("verbose".into()),
            ..ServeArgs::default()
        };
        let e = NodeConfig::resolve(&bad_flag).unwrap_err();
        assert!(e.contains("log-level must be error, warn"), "{e}");
        std::fs::write(&path, "log_format = \"yaml\"\n").unwrap();
        let bad_file = ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        };
        let e = NodeConfig::resolve(&bad_file).unwrap_err();
        assert!(e.contains("log-format must be text or json"), "{e}");
    }
}
