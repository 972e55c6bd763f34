//! The process's log subscriber: installed once by the binary, it prints
//! the `tracing` events of the node (and of the `cluster` and
//! `test-cluster` supervisors) on stderr, one line each, at the chosen
//! level and in the chosen format (docs/API.md "Logs").
//!
//! A command's own result text (what `ctl`, `cluster status`, `bench` or
//! `test-cluster` report to the person who ran it) is printed directly and
//! is not a log event.

pub use ataman_node::log_options::LogFormat;
use tracing::Level;

/// Installs the subscriber for the rest of the process. Only the first call
/// of a process takes effect; later ones keep the first subscriber.
pub fn init(level: Level, format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => tracing::subscriber::set_global_default(builder.finish()),
        LogFormat::Json => tracing::subscriber::set_global_default(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .finish(),
        ),
    };
    // Already set: the first subscriber stays, as documented.
    let _ = installed;
}
