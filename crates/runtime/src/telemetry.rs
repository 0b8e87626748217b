//! Logging setup: text for people, JSON for log pipelines.
use tracing_subscriber::{fmt, EnvFilter};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "unknown log format {other:?} (expected text or json)"
            )),
        }
    }
}

/// Installs the global subscriber. `RUST_LOG` overrides the default `info` filter.
pub fn init(format: LogFormat) {
    init_with(format, "info")
}

/// Like [`init`] with another default filter (used by `bosun dev` to keep the screen quiet).
pub fn init_with(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
}
