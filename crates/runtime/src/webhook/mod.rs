//! Admission and conversion webhooks for any operator.
//!
//! An operator registers typed handlers per path on [`Webhooks`] — validating
//! ([`Webhooks::validate`]), mutating/defaulting ([`Webhooks::mutate`]), conversion
//! ([`Webhooks::convert`]) — and [`serve`]s them over HTTPS: `admission.k8s.io/v1`
//! AdmissionReview and `apiextensions.k8s.io/v1` ConversionReview ([`review`]).
//! The serving certificate comes from files (a cert-manager Secret mounted in the pod) or is
//! generated with its CA, and is renewed without a restart ([`certs`]). [`config`] builds the
//! webhook configurations and a CRD's conversion stanza, with the CA injected by bosun or by
//! cert-manager. An operator hands the manager a [`Plan`] to have them served on every
//! replica. Hostile requests are refused, never a crash ([`server`]).
pub mod certs;
pub mod config;
pub mod handler;
pub mod plan;
pub mod review;
pub mod server;
pub mod settings;
pub mod shared;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub use certs::{CertError, CertSource, Certificates};
pub use handler::{Admission, Verdict};
pub use plan::{Configurations, Plan};
pub use review::Operation;
pub use server::{serve, Serving, WebhookError};
pub use settings::{Settings, SettingsError};

use handler::{AdmissionFn, ConversionFn};

/// The largest review read. The API server stores objects of up to 1.5 MiB (etcd's request
/// limit); an UPDATE review carries two of them, in JSON, plus the envelope.
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;

/// The handlers, by path.
#[derive(Clone)]
pub struct Webhooks {
    admission: BTreeMap<String, AdmissionFn>,
    conversion: BTreeMap<String, ConversionFn>,
    max_body: usize,
    limits: server::Limits,
    /// Where requests are measured (the manager's registry).
    metrics: Option<crate::metrics::Metrics>,
}

impl Default for Webhooks {
    fn default() -> Self {
        Webhooks {
            admission: BTreeMap::new(),
            conversion: BTreeMap::new(),
            max_body: DEFAULT_MAX_BODY,
            limits: server::Limits::default(),
            metrics: None,
        }
    }
}

impl Webhooks {
    pub fn new() -> Self {
        Self::default()
    }

    /// A validating webhook for kind `K` at `path`.
    pub fn validate<K, F>(mut self, path: &str, f: F) -> Self
    where
        K: DeserializeOwned + 'static,
        F: Fn(Admission<K>) -> Verdict + Send + Sync + 'static,
    {
        self.admission
            .insert(path.into(), handler::validating::<K, F>(f));
        self
    }

    /// A mutating (defaulting) webhook for kind `K` at `path`: `f` returns the object as it
    /// should be stored (None: unchanged), or a message refusing it. The API server gets the
    /// JSON Patch between the two.
    pub fn mutate<K, F>(mut self, path: &str, f: F) -> Self
    where
        K: DeserializeOwned + Serialize + Clone + 'static,
        F: Fn(Admission<K>) -> Result<Option<K>, String> + Send + Sync + 'static,
    {
        self.admission
            .insert(path.into(), handler::mutating::<K, F>(f));
        self
    }

    /// A conversion webhook at `path`: `f` turns one object into `desired_api_version`.
    pub fn convert<F>(mut self, path: &str, f: F) -> Self
    where
        F: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.conversion.insert(path.into(), handler::converting(f));
        self
    }

    /// The largest body read ([`DEFAULT_MAX_BODY`] unless set); larger ones get 413.
    pub fn max_body_bytes(mut self, max: usize) -> Self {
        self.max_body = max;
        self
    }

    /// At most `n` reviews read or answered at once; more get 503 at once
    /// ([`server::DEFAULT_MAX_IN_FLIGHT`] unless set).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.limits.in_flight = n.max(1);
        self
    }

    /// At most `bytes` of review bodies buffered by all reviews together; a review that would
    /// pass it gets 503 (twice the body limit unless set; never less than the body limit).
    pub fn buffer_budget_bytes(mut self, bytes: usize) -> Self {
        self.limits.buffer_budget = Some(bytes);
        self
    }

    /// A handler that has not answered after `timeout` gets its review answered 503
    /// ([`server::DEFAULT_REQUEST_TIMEOUT`] unless set).
    pub fn request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.request_timeout = timeout;
        self
    }

    /// At most `n` connections open at once; more are closed before the TLS handshake
    /// ([`server::DEFAULT_MAX_CONNECTIONS`] unless set).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.limits.connections = n.max(1);
        self
    }

    /// Requests measured in `metrics` (the manager does this for every operator's plan).
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The HTTP routes, without TLS (what [`serve`] runs; tests drive it directly).
    pub fn router(&self) -> axum::Router {
        server::router(self.clone())
    }
}

#[cfg(test)]
mod tests;
