//! Where and how to connect, and the bounds on waiting.
use std::sync::Arc;
use std::time::Duration;

use crate::counter::CallCounts;
use crate::tls::Tls;

/// Where and how to connect. `Debug` never shows the password.
#[derive(Clone)]
pub struct Config {
    /// `https://host[:port]/sdk`
    pub url: String,
    pub user: String,
    pub password: String,
    pub tls: Tls,
    /// Bound on one SOAP request.
    pub request_timeout: Duration,
    /// Bound on waiting for one task (clone, power, destroy).
    pub task_timeout: Duration,
    /// Where the client counts its calls: a fresh counter by default; share one between
    /// clients to have a total that survives a client being replaced (a metric).
    pub counts: Arc<CallCounts>,
}

impl Config {
    pub fn new(url: &str, user: &str, password: &str, tls: Tls) -> Self {
        Self {
            url: url.to_string(),
            user: user.to_string(),
            password: password.to_string(),
            tls,
            request_timeout: Duration::from_secs(60),
            task_timeout: Duration::from_secs(600),
            counts: Arc::default(),
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.url)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field(
                "tls",
                &matches!(self.tls, Tls::Insecure).then_some("insecure"),
            )
            .finish()
    }
}
