//! The Prometheus registry. Names follow controller-runtime's so existing dashboards work:
//! `controller_runtime_reconcile_total{controller,result}`,
//! `controller_runtime_reconcile_errors_total{controller}`,
//! `bosun_reconcile_errors_total{controller,category}` (the same failures by category: a
//! spec to fix, a conflict, the API, transient),
//! `controller_runtime_reconcile_time_seconds{controller}` (histogram),
//! `controller_runtime_active_workers{controller}` (reconciles in flight),
//! `bosun_cached_objects{controller}` (objects in the controller's cache),
//! `leader_election_master_status{name}` (client-go's name; 1 while this replica leads), the
//! work queue's families under client-go's names, `name` being the controller and `priority`
//! controller-runtime's number (0 for a user's change, -100 for lists, timers and retries; see
//! [`crate::queue`]): `workqueue_depth{name,priority}`, `workqueue_adds_total{name,priority}`,
//! `workqueue_queue_duration_seconds{name,priority}` (histogram),
//! `workqueue_work_duration_seconds{name}` (histogram), `workqueue_retries_total{name}`,
//! `workqueue_longest_running_processor_seconds{name}` and
//! `workqueue_unfinished_work_seconds{name}` (both computed when scraped), and
//! for webhooks `controller_runtime_webhook_requests_total{webhook,code}`,
//! `controller_runtime_webhook_latency_seconds{webhook}` (histogram) and
//! `controller_runtime_webhook_requests_in_flight{webhook}` — `webhook` is the path served, as
//! in controller-runtime; requests to paths not served are not counted (a client choosing
//! label values would grow the registry without bound).
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
struct QueueLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueuePriorityLabels {
    name: String,
    priority: &'static str,
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

fn queue_histogram() -> Histogram {
    // client-go's workqueue buckets: 10 ns .. 1000 s, a factor of ten apart.
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// Start times of the reconciles in flight, per controller name, for the two families
/// computed when scraped.
#[derive(Default)]
struct InFlight {
    next: AtomicU64,
    started: Mutex<BTreeMap<String, HashMap<u64, Instant>>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, HashMap<u64, Instant>>> {
        self.started.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The work queue's families.
#[derive(Clone)]
struct Workqueue {
    depth: Family<QueuePriorityLabels, Gauge>,
    adds: Family<QueuePriorityLabels, Counter>,
    queue_duration: Family<QueuePriorityLabels, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    retries: Family<QueueLabels, Counter>,
    longest: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    unfinished: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    in_flight: Arc<InFlight>,
}

impl Workqueue {
    fn register(registry: &mut Registry) -> Self {
        let q = Workqueue {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            retries: Family::default(),
            longest: Family::default(),
            unfinished: Family::default(),
            in_flight: Arc::default(),
        };
        registry.register(
            "workqueue_depth",
            "Keys waiting in a controller's queue, per priority",
            q.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Keys added to a controller's queue (not counting keys already queued)",
            q.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long a key waited in the queue before its reconcile started",
            q.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long a key's reconcile took",
            q.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Keys queued again after a failed reconcile",
            q.retries.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How long the longest reconcile in flight has been running",
            q.longest.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in flight not yet finished (the sum over reconciles in flight)",
            q.unfinished.clone(),
        );
        q
    }

    /// Sets the two families computed from the reconciles in flight.
    fn refresh(&self) {
        let now = Instant::now();
        for (name, started) in self.in_flight.lock().iter() {
            let ages = started.values().map(|s| now.saturating_duration_since(*s));
            let (sum, max) = ages.fold((Duration::ZERO, Duration::ZERO), |(sum, max), a| {
                (sum + a, max.max(a))
            });
            let labels = QueueLabels { name: name.clone() };
            self.unfinished
                .get_or_create(&labels)
                .set(sum.as_secs_f64());
            self.longest.get_or_create(&labels).set(max.as_secs_f64());
        }
    }
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
    workqueue: Workqueue,
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
        let workqueue = Workqueue::register(&mut registry);
        Metrics {
            registry: Arc::new(registry),
            workqueue,
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
        self.workqueue.refresh();
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
        let q = &m.metrics.workqueue;
        for p in crate::queue::Priority::ALL {
            let _ = q.depth.get_or_create(&m.priority_labels(p));
            let _ = q.adds.get_or_create(&m.priority_labels(p));
        }
        let _ = q.retries.get_or_create(&m.queue_labels());
        let _ = q.longest.get_or_create(&m.queue_labels());
        let _ = q.unfinished.get_or_create(&m.queue_labels());
        q.in_flight.lock().entry(m.name.clone()).or_default();
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

    fn queue_labels(&self) -> QueueLabels {
        QueueLabels {
            name: self.name.clone(),
        }
    }

    fn priority_labels(&self, priority: crate::queue::Priority) -> QueuePriorityLabels {
        QueuePriorityLabels {
            name: self.name.clone(),
            priority: priority.label(),
        }
    }

    /// A key newly queued at `priority`.
    pub fn queue_added(&self, priority: crate::queue::Priority) {
        self.metrics
            .workqueue
            .adds
            .get_or_create(&self.priority_labels(priority))
            .inc();
    }

    /// Moves the depth at `priority` by `delta` (several queues may share a name: one per
    /// watched namespace).
    pub fn queue_depth_moved(&self, priority: crate::queue::Priority, delta: i64) {
        if delta != 0 {
            self.metrics
                .workqueue
                .depth
                .get_or_create(&self.priority_labels(priority))
                .inc_by(delta);
        }
    }

    /// A key queued again after a failed reconcile.
    pub fn queue_retried(&self) {
        self.metrics
            .workqueue
            .retries
            .get_or_create(&self.queue_labels())
            .inc();
    }

    /// A key taken from the queue after waiting `waited`; the guard records its work when
    /// dropped.
    pub fn work_started(&self, priority: crate::queue::Priority, waited: Duration) -> WorkGuard {
        let q = &self.metrics.workqueue;
        q.queue_duration
            .get_or_create(&self.priority_labels(priority))
            .observe(waited.as_secs_f64());
        let token = q.in_flight.next.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        q.in_flight
            .lock()
            .entry(self.name.clone())
            .or_default()
            .insert(token, start);
        WorkGuard {
            metrics: self.clone(),
            token,
            start,
        }
    }

    pub fn set_cached_objects(&self, n: usize) {
        self.metrics
            .cached
            .get_or_create(&self.labels())
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// One key's work, recorded when dropped.
pub struct WorkGuard {
    metrics: ControllerMetrics,
    token: u64,
    start: Instant,
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        let m = &self.metrics;
        let q = &m.metrics.workqueue;
        q.work_duration
            .get_or_create(&m.queue_labels())
            .observe(self.start.elapsed().as_secs_f64());
        if let Some(started) = q.in_flight.lock().get_mut(&m.name) {
            started.remove(&self.token);
        }
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
    fn workqueue_families_carry_the_controller_and_priority() {
        use crate::queue::Priority;
        let metrics = Metrics::new();
        let c = metrics.controller("bookstore");
        let text = metrics.encode();
        for zero in [
            r#"workqueue_depth{name="bookstore",priority="0"} 0"#,
            r#"workqueue_depth{name="bookstore",priority="-100"} 0"#,
            r#"workqueue_adds_total{name="bookstore",priority="-100"} 0"#,
            r#"workqueue_retries_total{name="bookstore"} 0"#,
            r#"workqueue_longest_running_processor_seconds{name="bookstore"} 0"#,
            r#"workqueue_unfinished_work_seconds{name="bookstore"} 0"#,
        ] {
            assert!(text.contains(zero), "{zero} in {text}");
        }
        c.queue_added(Priority::Background);
        c.queue_added(Priority::Background);
        c.queue_added(Priority::User);
        c.queue_depth_moved(Priority::Background, 2);
        c.queue_depth_moved(Priority::Background, -1);
        c.queue_retried();
        let work = c.work_started(Priority::User, Duration::from_millis(3));
        let text = metrics.encode();
        for line in [
            r#"workqueue_adds_total{name="bookstore",priority="-100"} 2"#,
            r#"workqueue_adds_total{name="bookstore",priority="0"} 1"#,
            r#"workqueue_depth{name="bookstore",priority="-100"} 1"#,
            r#"workqueue_retries_total{name="bookstore"} 1"#,
            r#"workqueue_queue_duration_seconds_count{name="bookstore",priority="0"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{le="0.01",name="bookstore",priority="0"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{le="0.001",name="bookstore",priority="0"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        let in_flight = |text: &str, family: &str| -> f64 {
            let prefix = format!("{family}{{name=\"bookstore\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1.0)
        };
        assert!(
            in_flight(&text, "workqueue_unfinished_work_seconds") > 0.0,
            "one reconcile in flight: {text}"
        );
        assert!(in_flight(&text, "workqueue_longest_running_processor_seconds") > 0.0);
        drop(work);
        let text = metrics.encode();
        assert!(text.contains(r#"workqueue_work_duration_seconds_count{name="bookstore"} 1"#));
        assert_eq!(in_flight(&text, "workqueue_unfinished_work_seconds"), 0.0);
        assert_eq!(
            in_flight(&text, "workqueue_longest_running_processor_seconds"),
            0.0
        );
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
