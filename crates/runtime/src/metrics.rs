//! The Prometheus registry. Names follow controller-runtime's so existing dashboards work:
//! `controller_runtime_reconcile_total{controller,result}`,
//! `controller_runtime_reconcile_errors_total{controller}`,
//! `bosun_reconcile_errors_total{controller,category}` (the same failures by category: a
//! spec to fix, a conflict, the API, transient),
//! `controller_runtime_reconcile_time_seconds{controller}` (histogram),
//! `controller_runtime_active_workers{controller}` (reconciles in flight),
//! `bosun_cached_objects{controller}` (objects in the controller's cache),
//! `leader_election_master_status{name}` (client-go's name; 1 while this replica leads), and
//! for webhooks `controller_runtime_webhook_requests_total{webhook,code}`,
//! `controller_runtime_webhook_latency_seconds{webhook}` (histogram) and
//! `controller_runtime_webhook_requests_in_flight{webhook}` — `webhook` is the path served, as
//! in controller-runtime; requests to paths not served are not counted (a client choosing
//! label values would grow the registry without bound).
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::error::ErrorCategory;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    controller: String,
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookCodeLabels {
    webhook: String,
    code: String,
}

fn webhook_histogram() -> Histogram {
    // 100 µs .. ~1.6 s: an admission answered in process is well under a millisecond.
    Histogram::new(exponential_buckets(0.0001, 2.0, 15))
}

fn duration_histogram() -> Histogram {
    // 1 ms .. ~16 s
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Shared by every controller of a manager; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    categorized: Family<ErrorLabels, Counter>,
    duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    active: Family<ControllerLabels, Gauge>,
    cached: Family<ControllerLabels, Gauge>,
    leader: Family<LeaseLabels, Gauge>,
    webhook_requests: Family<WebhookCodeLabels, Counter>,
    webhook_latency: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    webhook_in_flight: Family<WebhookLabels, Gauge>,
    /// Families written by someone else (a role's `osdk_metric`s, vCenter call counts), by a
    /// key so that each source is served once however many controllers register it.
    texts: Arc<Mutex<BTreeMap<&'static str, TextFn>>>,
}

/// Writes OpenMetrics text families (no `# EOF`) for [`Metrics::add_text_source`].
pub type TextSource = fn() -> String;
/// The same, with state (see [`Metrics::add_text_fn`]).
pub type TextFn = Arc<dyn Fn() -> String + Send + Sync>;

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ResultLabels, Counter>::default();
        let errors = Family::<ControllerLabels, Counter>::default();
        let categorized = Family::<ErrorLabels, Counter>::default();
        let duration =
            Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        let active = Family::<ControllerLabels, Gauge>::default();
        let cached = Family::<ControllerLabels, Gauge>::default();
        let leader = Family::<LeaseLabels, Gauge>::default();
        let webhook_requests = Family::<WebhookCodeLabels, Counter>::default();
        let webhook_latency =
            Family::<WebhookLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                webhook_histogram,
            );
        let webhook_in_flight = Family::<WebhookLabels, Gauge>::default();
        registry.register(
            "controller_runtime_webhook_requests",
            "Admission and conversion requests per webhook path and HTTP status code",
            webhook_requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Time to answer one webhook request",
            webhook_latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Webhook requests being answered",
            webhook_in_flight.clone(),
        );
        registry.register(
            "controller_runtime_reconcile",
            "Reconciliations per controller and result",
            reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Failed reconciliations per controller",
            errors.clone(),
        );
        registry.register(
            "bosun_reconcile_errors",
            "Failed reconciliations per controller and error category",
            categorized.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Time spent in one reconciliation",
            duration.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Reconciliations currently in flight",
            active.clone(),
        );
        registry.register(
            "bosun_cached_objects",
            "Objects in the controller's cache",
            cached.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "1 while this replica holds the named lease",
            leader.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            reconciles,
            errors,
            categorized,
            duration,
            active,
            cached,
            leader,
            webhook_requests,
            webhook_latency,
            webhook_in_flight,
            texts: Arc::default(),
        }
    }

    /// Serves the families `source` writes with every scrape, once per `key`.
    pub fn add_text_source(&self, key: &'static str, source: TextSource) {
        self.add_text_fn(key, source);
    }

    /// [`Self::add_text_source`] for a closure (counters kept elsewhere, e.g. a client's).
    pub fn add_text_fn(
        &self,
        key: &'static str,
        source: impl Fn() -> String + Send + Sync + 'static,
    ) {
        self.texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, Arc::new(source));
    }

    /// Starts timing one request to the webhook at `path` (a path served); the guard records
    /// it when [`WebhookRequest::done`] gives the status code (or, dropped unfinished — the
    /// connection went away — as code 500).
    pub fn webhook_request(&self, path: &str) -> WebhookRequest {
        let labels = WebhookLabels {
            webhook: path.to_string(),
        };
        self.webhook_in_flight.get_or_create(&labels).inc();
        WebhookRequest {
            metrics: self.clone(),
            labels,
            start: Instant::now(),
            code: None,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        let texts = self.texts.lock().unwrap_or_else(|e| e.into_inner());
        if !texts.is_empty() {
            // The exposition ends with "# EOF": the other families go before it.
            if let Some(body) = out.strip_suffix("# EOF\n") {
                out.truncate(body.len());
            }
            for source in texts.values() {
                out.push_str(&source());
            }
            out.push_str("# EOF\n");
        }
        out
    }

    pub fn controller(&self, name: &str) -> ControllerMetrics {
        let m = ControllerMetrics {
            metrics: self.clone(),
            name: name.to_string(),
        };
        // Make every series visible from the start, at zero.
        let _ = m.metrics.active.get_or_create(&m.labels());
        let _ = m.metrics.cached.get_or_create(&m.labels());
        let _ = m.metrics.errors.get_or_create(&m.labels());
        for result in ["success", "error"] {
            let _ = m.metrics.reconciles.get_or_create(&ResultLabels {
                controller: m.name.clone(),
                result,
            });
        }
        m
    }

    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                name: lease.to_string(),
            })
            .set(i64::from(leading));
    }
}

/// One webhook request being answered (see [`Metrics::webhook_request`]).
pub struct WebhookRequest {
    metrics: Metrics,
    labels: WebhookLabels,
    start: Instant,
    code: Option<u16>,
}

impl WebhookRequest {
    pub fn done(mut self, code: u16) {
        self.code = Some(code);
    }
}

impl Drop for WebhookRequest {
    fn drop(&mut self) {
        let m = &self.metrics;
        m.webhook_in_flight.get_or_create(&self.labels).dec();
        m.webhook_latency
            .get_or_create(&self.labels)
            .observe(self.start.elapsed().as_secs_f64());
        m.webhook_requests
            .get_or_create(&WebhookCodeLabels {
                webhook: self.labels.webhook.clone(),
                code: self.code.unwrap_or(500).to_string(),
            })
            .inc();
    }
}

/// One controller's view of the registry.
#[derive(Clone)]
pub struct ControllerMetrics {
    metrics: Metrics,
    name: String,
}

impl ControllerMetrics {
    /// [`Metrics::add_text_source`] on the manager's metrics.
    pub fn add_text_source(&self, key: &'static str, source: TextSource) {
        self.metrics.add_text_source(key, source);
    }

    /// [`Metrics::add_text_fn`] on the manager's metrics.
    pub fn add_text_fn(
        &self,
        key: &'static str,
        source: impl Fn() -> String + Send + Sync + 'static,
    ) {
        self.metrics.add_text_fn(key, source);
    }

    fn labels(&self) -> ControllerLabels {
        ControllerLabels {
            controller: self.name.clone(),
        }
    }

    /// Starts timing one reconcile; the guard records duration and in-flight count on drop.
    pub fn reconcile_started(&self) -> ReconcileGuard {
        self.metrics.active.get_or_create(&self.labels()).inc();
        ReconcileGuard {
            metrics: self.clone(),
            start: Instant::now(),
            outcome: None,
        }
    }

    pub fn set_cached_objects(&self, n: usize) {
        self.metrics
            .cached
            .get_or_create(&self.labels())
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// Records a reconcile's outcome when dropped. An unfinished guard (a cancelled or panicking
/// reconcile) counts as a transient failure.
pub struct ReconcileGuard {
    metrics: ControllerMetrics,
    start: Instant,
    outcome: Option<Option<ErrorCategory>>,
}

impl ReconcileGuard {
    pub fn success(mut self) {
        self.outcome = Some(None);
    }
    pub fn failure(mut self, category: ErrorCategory) {
        self.outcome = Some(Some(category));
    }
}

impl Drop for ReconcileGuard {
    fn drop(&mut self) {
        let m = &self.metrics;
        let labels = m.labels();
        m.metrics.active.get_or_create(&labels).dec();
        m.metrics
            .duration
            .get_or_create(&labels)
            .observe(self.start.elapsed().as_secs_f64());
        let failed = match self.outcome {
            Some(None) => None,
            Some(Some(c)) => Some(c),
            None => Some(ErrorCategory::Transient),
        };
        let result = if failed.is_some() { "error" } else { "success" };
        m.metrics
            .reconciles
            .get_or_create(&ResultLabels {
                controller: m.name.clone(),
                result,
            })
            .inc();
        if let Some(category) = failed {
            m.metrics.errors.get_or_create(&labels).inc();
            m.metrics
                .categorized
                .get_or_create(&ErrorLabels {
                    controller: m.name.clone(),
                    category: category.as_str(),
                })
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles_metrics() -> String {
        "# HELP my_jobs Jobs seen.\n# TYPE my_jobs gauge\nmy_jobs 3\n".into()
    }

    #[test]
    fn other_families_are_served_before_the_end_once_per_key() {
        let m = Metrics::new();
        assert!(!m.encode().contains("my_jobs"));
        m.add_text_source("roles", roles_metrics);
        m.controller("a").add_text_source("roles", roles_metrics);
        let text = m.encode();
        assert_eq!(text.matches("# TYPE my_jobs gauge").count(), 1, "{text}");
        assert!(text.ends_with("my_jobs 3\n# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.contains("controller_runtime_reconcile_total"));
    }

    #[test]
    fn text_functions_serve_state_kept_elsewhere() {
        let m = Metrics::new();
        let n = Arc::new(std::sync::atomic::AtomicU64::new(1));
        let seen = n.clone();
        m.controller("a").add_text_fn("calls", move || {
            format!(
                "# TYPE calls counter\ncalls_total {}\n",
                seen.load(std::sync::atomic::Ordering::Relaxed)
            )
        });
        assert!(m.encode().contains("calls_total 1\n"));
        n.store(7, std::sync::atomic::Ordering::Relaxed);
        let text = m.encode();
        assert!(text.ends_with("calls_total 7\n# EOF\n"), "{text}");
    }

    #[test]
    fn guard_records_outcomes_by_category() {
        let metrics = Metrics::new();
        let c = metrics.controller("bookstore");
        c.reconcile_started().success();
        c.reconcile_started().failure(ErrorCategory::InvalidSpec);
        drop(c.reconcile_started());
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_total{controller="bookstore",result="success"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_total{controller="bookstore",result="error"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"controller_runtime_reconcile_errors_total{controller="bookstore"} 2"#)
        );
        assert!(text.contains(
            r#"bosun_reconcile_errors_total{controller="bookstore",category="invalid_spec"} 1"#
        ));
        assert!(text.contains(
            r#"bosun_reconcile_errors_total{controller="bookstore",category="transient"} 1"#
        ));
        assert!(text.contains(r#"controller_runtime_active_workers{controller="bookstore"} 0"#));
        assert!(text.contains(
            r#"controller_runtime_reconcile_time_seconds_count{controller="bookstore"} 3"#
        ));
    }
}
