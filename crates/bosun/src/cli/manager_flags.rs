//! The flags of operator-sdk's helm-operator and ansible-operator `run` (controller-runtime's
//! manager and zap's logger) that `bosun run` takes too, so a Deployment written for those
//! images starts bosun unchanged: `--metrics-require-rbac` from the scaffold's
//! config/default patch, and the `--zap-*` logging flags users add to config/manager.
//! The ones naming the same setting as a bosun flag are visible aliases in run.rs
//! (`--metrics-bind-address`, `--health-probe-bind-address`, `--leader-election-id`, …).
use bosun_runtime::telemetry::LogFormat;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct ManagerFlags {
    /// operator-sdk's name for what --metrics-secure does here: only a bearer token allowed to
    /// `get /metrics` (TokenReview + SubjectAccessReview) reads the metrics.
    #[arg(long, default_value_t = false)]
    pub metrics_require_rbac: bool,
    /// zap's development mode: text logs at debug level (unless --zap-encoder or
    /// --zap-log-level say otherwise).
    #[arg(long, default_value_t = false)]
    pub zap_devel: bool,
    /// zap's encoder: `json` (--log-format json) or `console` (--log-format text).
    #[arg(long, value_parser = ["json", "console"])]
    pub zap_encoder: Option<String>,
    /// zap's level: debug, info, error, panic, or a verbosity n > 0 (debug; trace from 2).
    /// RUST_LOG, when set, still decides.
    #[arg(long, value_parser = parse_zap_level)]
    pub zap_log_level: Option<String>,
    /// Accepted for zap's compatibility: bosun's logs carry no stack traces (a Rust error
    /// carries its chain of causes in the message instead).
    #[arg(long, value_parser = parse_zap_level)]
    pub zap_stacktrace_level: Option<String>,
    /// Accepted for zap's compatibility: bosun's log lines always carry RFC 3339 times.
    #[arg(long, value_parser = ["epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"])]
    pub zap_time_encoding: Option<String>,
    /// Accepted for controller-runtime's compatibility: bosun's metrics and probe servers
    /// answer HTTP/1.1 only, whatever this says (so HTTP/2's rapid-reset attacks, the
    /// reason controller-runtime turns HTTP/2 off by default, do not apply).
    #[arg(long, default_value_t = false)]
    pub enable_http2: bool,
}

impl ManagerFlags {
    /// The log format: --zap-encoder, else --zap-devel's text, else `format` (--log-format).
    pub fn log_format(&self, format: LogFormat) -> LogFormat {
        match self.zap_encoder.as_deref() {
            Some("json") => LogFormat::Json,
            Some(_) => LogFormat::Text,
            None if self.zap_devel => LogFormat::Text,
            None => format,
        }
    }

    /// The default log filter (RUST_LOG overrides it): --zap-log-level, else debug with
    /// --zap-devel, else info.
    pub fn log_filter(&self) -> &'static str {
        match self.zap_log_level.as_deref() {
            Some("debug") | Some("1") => "debug",
            Some("error") | Some("panic") => "error",
            Some("info") => "info",
            Some(_) => "trace",
            None if self.zap_devel => "debug",
            None => "info",
        }
    }
}

fn parse_zap_level(s: &str) -> Result<String, String> {
    match s {
        "debug" | "info" | "error" | "panic" => Ok(s.to_string()),
        n if n.parse::<u8>().is_ok_and(|n| n > 0) => Ok(n.to_string()),
        _ => Err(format!(
            "{s:?} is not a zap level: use debug, info, error, panic or a verbosity n > 0"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: ManagerFlags,
    }

    fn parse(args: &[&str]) -> Result<ManagerFlags, clap::Error> {
        Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|c| c.flags)
    }

    #[test]
    fn zap_flags_choose_the_format_and_the_level() {
        let f = parse(&["--zap-encoder=json", "--zap-log-level=debug"]).expect("parses");
        assert!(matches!(f.log_format(LogFormat::Text), LogFormat::Json));
        assert_eq!(f.log_filter(), "debug");
        let f = parse(&["--zap-devel"]).expect("parses");
        assert!(matches!(f.log_format(LogFormat::Json), LogFormat::Text));
        assert_eq!(f.log_filter(), "debug");
        let f = parse(&["--zap-log-level=3"]).expect("parses");
        assert_eq!(f.log_filter(), "trace");
        let f = parse(&[]).expect("parses");
        assert!(matches!(f.log_format(LogFormat::Json), LogFormat::Json));
        assert_eq!(f.log_filter(), "info");
    }

    #[test]
    fn a_bad_zap_value_is_refused_naming_the_choices() {
        let e = parse(&["--zap-log-level=loud"]).expect_err("refused");
        assert!(e.to_string().contains("not a zap level"), "{e}");
        assert!(parse(&["--zap-log-level=0"]).is_err());
        assert!(parse(&["--zap-encoder=xml"]).is_err());
        assert!(parse(&["--zap-time-encoding=never"]).is_err());
    }
}
