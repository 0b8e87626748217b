//! The Prometheus registry. Names follow controller-runtime's so existing dashboards work:
//! `controller_runtime_reconcile_total{controller,result}`,
//! `controller_runtime_reconcile_errors_total{controller}`,
//! `bosun_reconcile_errors_total{controller,category}` (the same failures by category: a
//! spec to fix, a conflict, the API, transient),
//! `controller_runtime_reconcile_time_seconds{controller}` (histogram),
//! `controller_runtime_active_workers{controller}` (reconciles in flight),
//! `controller_runtime_max_concurrent_reconciles{controller}` (the configured concurrency),
//! `controller_runtime_reconcile_panics_total{controller}` (a panic is also counted as an
//! error, as in controller-runtime),
//! `controller_runtime_terminal_reconcile_errors_total{controller}` (always 0: bosun has no
//! counterpart of `reconcile.TerminalError`, every failure is retried; served so that a
//! dashboard's query finds its series),
//! `bosun_cached_objects{controller}` (objects in the controller's cache),
//! `bosun_term_checks_total{controller,check}` (sharded: what a term's start cost and caught,
//! see [`crate::runner`] — `share_read` a LIST of the member's share, `object_read` a GET of
//! one object whose version did not compare, `moved` a key not started, its cache older than
//! the read),
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
//!
//! `controller_runtime_webhook_panics_total` counts webhook handlers that panicked (answered
//! 500), process-wide as in controller-runtime, served at 0 from start.
//!
//! Two process-wide sets, as client_golang registers them by default: client-go's
//! `rest_client_requests_total{code,host,method}` (every request this process sent to an API
//! server, counted by [`crate::client`]; `code` is `<error>` when no response came) and, on
//! Linux, the process collector's `process_*` families read from `/proc/self`.
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
struct CheckLabels {
    controller: String,
    check: &'static str,
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
    max_concurrent: Family<ControllerLabels, Gauge>,
    panics: Family<ControllerLabels, Counter>,
    terminal: Family<ControllerLabels, Counter>,
    cached: Family<ControllerLabels, Gauge>,
    term_checks: Family<CheckLabels, Counter>,
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
        let max_concurrent = Family::<ControllerLabels, Gauge>::default();
        let panics = Family::<ControllerLabels, Counter>::default();
        let terminal = Family::<ControllerLabels, Counter>::default();
        let cached = Family::<ControllerLabels, Gauge>::default();
        let term_checks = Family::<CheckLabels, Counter>::default();
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
            "controller_runtime_max_concurrent_reconciles",
            "Reconciliations a controller runs at most at once",
            max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Reconciliations that panicked (also counted as errors)",
            panics.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Reconciliations failed for good, not retried (bosun retries every failure: 0)",
            terminal.clone(),
        );
        registry.register(
            "bosun_cached_objects",
            "Objects in the controller's cache",
            cached.clone(),
        );
        registry.register(
            "bosun_term_checks",
            "Sharded: reads of the member's share and of single objects as terms start, and keys not started because they moved away before",
            term_checks.clone(),
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
            max_concurrent,
            panics,
            terminal,
            cached,
            term_checks,
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
        // The exposition ends with "# EOF": the other families go before it.
        if let Some(body) = out.strip_suffix("# EOF\n") {
            out.truncate(body.len());
        }
        out.push_str(&process::families());
        out.push_str(&rest_requests_text());
        out.push_str(&webhook_panics_text());
        for source in self
            .texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            out.push_str(&source());
        }
        out.push_str("# EOF\n");
        out
    }

    pub fn controller(&self, name: &str) -> ControllerMetrics {
        let m = ControllerMetrics {
            metrics: self.clone(),
            name: name.to_string(),
        };
        // Make every series visible from the start, at zero.
        let _ = m.metrics.active.get_or_create(&m.labels());
        let _ = m.metrics.max_concurrent.get_or_create(&m.labels());
        let _ = m.metrics.panics.get_or_create(&m.labels());
        let _ = m.metrics.terminal.get_or_create(&m.labels());
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

    /// The most reconciles this controller runs at once.
    pub fn set_max_concurrent_reconciles(&self, n: usize) {
        self.metrics
            .max_concurrent
            .get_or_create(&self.labels())
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// A reconcile panicked (its [`ReconcileGuard`], dropped unfinished, counts the error).
    pub fn reconcile_panicked(&self) {
        self.metrics.panics.get_or_create(&self.labels()).inc();
    }

    pub fn set_cached_objects(&self, n: usize) {
        self.metrics
            .cached
            .get_or_create(&self.labels())
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// A sharded term's start read the share, read one object, or left a moved key.
    pub(crate) fn term_checked(&self, check: TermCheck) {
        let labels = CheckLabels {
            controller: self.name.clone(),
            check: check.label(),
        };
        self.metrics.term_checks.get_or_create(&labels).inc();
    }
}

/// See [`ControllerMetrics::term_checked`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum TermCheck {
    ShareRead,
    ObjectRead,
    Moved,
}

impl TermCheck {
    fn label(self) -> &'static str {
        match self {
            TermCheck::ShareRead => "share_read",
            TermCheck::ObjectRead => "object_read",
            TermCheck::Moved => "moved",
        }
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

/// Webhook handlers that panicked in this process (each was answered 500): controller-runtime's
/// `controller_runtime_webhook_panics_total`, process-wide and without labels as there.
static WEBHOOK_PANICS: AtomicU64 = AtomicU64::new(0);

/// Counts a webhook handler's panic.
pub fn webhook_panicked() {
    WEBHOOK_PANICS.fetch_add(1, Ordering::Relaxed);
}

/// The panics counted so far.
pub fn webhook_panics() -> u64 {
    WEBHOOK_PANICS.load(Ordering::Relaxed)
}

/// Served from start, at 0 too, as controller-runtime registers it: a dashboard's query finds
/// its series whether or not the operator serves webhooks.
fn webhook_panics_text() -> String {
    format!(
        "# HELP controller_runtime_webhook_panics Total number of webhook panics.\n\
         # TYPE controller_runtime_webhook_panics counter\n\
         controller_runtime_webhook_panics_total {}\n",
        webhook_panics()
    )
}

/// Requests sent to API servers by this process, by (code, method, host): client-go's
/// counter is process-wide too, whichever client sent them.
static REST_REQUESTS: Mutex<BTreeMap<(String, String, String), u64>> = Mutex::new(BTreeMap::new());

/// Counts one request to the API server at `host` (`host:port`); `code` None: no response
/// came (connection refused, timeout), counted as client-go does, `<error>`.
pub fn rest_request(code: Option<u16>, method: &str, host: &str) {
    let code = code.map_or_else(|| "<error>".to_string(), |c| c.to_string());
    *REST_REQUESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry((code, method.to_string(), host.to_string()))
        .or_default() += 1;
}

/// Label values go between double quotes: `\`, `"` and newlines are escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn rest_requests_text() -> String {
    let counts = REST_REQUESTS.lock().unwrap_or_else(|e| e.into_inner());
    if counts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# HELP rest_client_requests Requests sent to the API server, by status code, method and host.\n\
         # TYPE rest_client_requests counter\n",
    );
    for ((code, method, host), n) in counts.iter() {
        out.push_str(&format!(
            "rest_client_requests_total{{code=\"{}\",host=\"{}\",method=\"{}\"}} {n}\n",
            label_value(code),
            label_value(host),
            label_value(method)
        ));
    }
    out
}

/// client_golang's process collector, from `/proc/self` (nothing elsewhere, nothing a file
/// could not be read for).
mod process {
    /// The kernel reports CPU times and the start time in ticks of USER_HZ, 100 on every
    /// architecture Linux runs on (the ABI fixes it, whatever the kernel's own HZ).
    const USER_HZ: f64 = 100.0;

    /// The families' text, empty off Linux.
    pub(super) fn families() -> String {
        if cfg!(target_os = "linux") {
            let mut out = String::new();
            write(&mut out, "/proc");
            out
        } else {
            String::new()
        }
    }

    fn family(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
        let sample = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.to_string()
        };
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{sample} {value}\n"
        ));
    }

    /// A limit of `/proc/<pid>/limits` (its soft value; "unlimited" is u64::MAX, as Go's
    /// procfs reads it).
    fn limit(limits: &str, name: &str) -> Option<f64> {
        let rest = limits.lines().find_map(|l| l.strip_prefix(name))?;
        let soft = rest.split_whitespace().next()?;
        if soft == "unlimited" {
            // Exactly what Go's procfs reports for no limit.
            #[allow(clippy::cast_precision_loss)]
            return Some(u64::MAX as f64);
        }
        soft.parse().ok()
    }

    /// The sum of received and sent bytes over every interface of `/proc/<pid>/net/dev`.
    fn network(dev: &str) -> Option<(f64, f64)> {
        let mut rx = 0.0;
        let mut tx = 0.0;
        for line in dev.lines().skip(2) {
            let (_, counters) = line.split_once(':')?;
            let fields: Vec<f64> = counters
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            rx += fields.first()?;
            tx += fields.get(8)?;
        }
        Some((rx, tx))
    }

    /// A value of `/proc/<pid>/status` given in kB, in bytes.
    fn status_kb(status: &str, name: &str) -> Option<f64> {
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(kb * 1024.0)
    }

    pub(super) fn write(out: &mut String, proc: &str) {
        let read = |p: &str| std::fs::read_to_string(format!("{proc}/{p}")).ok();
        // The fields after the command name, which may hold spaces and parentheses.
        let stat = read("self/stat");
        let fields: Vec<&str> = stat
            .as_deref()
            .and_then(|s| s.rsplit_once(')'))
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // `fields[0]` is field 3 of proc(5)'s stat: field n is at n - 3.
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
        if let (Some(user), Some(system)) = (field(14), field(15)) {
            family(
                out,
                "process_cpu_seconds",
                "counter",
                "Total user and system CPU time spent in seconds.",
                (user + system) / USER_HZ,
            );
        }
        if let Ok(fds) = std::fs::read_dir(format!("{proc}/self/fd")) {
            #[allow(clippy::cast_precision_loss)]
            let n = fds.count() as f64;
            family(
                out,
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                n,
            );
        }
        let limits = read("self/limits").unwrap_or_default();
        if let Some(n) = limit(&limits, "Max open files") {
            family(
                out,
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                n,
            );
        }
        if let Some((rx, tx)) = read("self/net/dev").as_deref().and_then(network) {
            family(
                out,
                "process_network_receive_bytes",
                "counter",
                "Number of bytes received by the process over the network.",
                rx,
            );
            family(
                out,
                "process_network_transmit_bytes",
                "counter",
                "Number of bytes sent by the process over the network.",
                tx,
            );
        }
        let status = read("self/status").unwrap_or_default();
        if let Some(rss) = status_kb(&status, "VmRSS:") {
            family(
                out,
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                rss,
            );
        }
        let boot = read("stat").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        if let (Some(boot), Some(start)) = (boot, field(22)) {
            family(
                out,
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                boot + start / USER_HZ,
            );
        }
        if let Some(vsize) = field(23) {
            family(
                out,
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                vsize,
            );
        }
        if let Some(n) = limit(&limits, "Max address space") {
            family(
                out,
                "process_virtual_memory_max_bytes",
                "gauge",
                "Maximum amount of virtual memory available in bytes.",
                n,
            );
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn limits_and_network_parse_as_procfs_writes_them() {
            let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                          Max open files            1024                 524288               files     \n\
                          Max address space         unlimited            unlimited            bytes     \n";
            assert_eq!(limit(limits, "Max open files"), Some(1024.0));
            assert_eq!(
                limit(limits, "Max address space"),
                Some(1.8446744073709552e19)
            );
            assert_eq!(limit(limits, "Max locked memory"), None);
            let dev = "Inter-|   Receive                                                |  Transmit\n \
                       face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                       lo:  100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0\n  \
                       eth0: 5000      7    0    0    0     0          0         0      300       3    0    0    0     0       0          0\n";
            assert_eq!(network(dev), Some((5100.0, 400.0)));
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
    fn controller_runtime_families_every_controller_serves() {
        let metrics = Metrics::new();
        let c = metrics.controller("bookstore");
        let text = metrics.encode();
        for zero in [
            r#"controller_runtime_max_concurrent_reconciles{controller="bookstore"} 0"#,
            r#"controller_runtime_reconcile_panics_total{controller="bookstore"} 0"#,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="bookstore"} 0"#,
        ] {
            assert!(text.contains(zero), "{zero} in {text}");
        }
        c.set_max_concurrent_reconciles(16);
        c.reconcile_panicked();
        let text = metrics.encode();
        for line in [
            "# TYPE controller_runtime_max_concurrent_reconciles gauge",
            r#"controller_runtime_max_concurrent_reconciles{controller="bookstore"} 16"#,
            "# TYPE controller_runtime_reconcile_panics counter",
            r#"controller_runtime_reconcile_panics_total{controller="bookstore"} 1"#,
            "# TYPE controller_runtime_terminal_reconcile_errors counter",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn rest_requests_are_counted_by_code_method_and_host() {
        let host = "counted.example:6443";
        rest_request(Some(200), "GET", host);
        rest_request(Some(200), "GET", host);
        rest_request(Some(409), "PATCH", host);
        rest_request(None, "GET", host);
        let text = Metrics::new().encode();
        for line in [
            "# TYPE rest_client_requests counter",
            r#"rest_client_requests_total{code="200",host="counted.example:6443",method="GET"} 2"#,
            r#"rest_client_requests_total{code="409",host="counted.example:6443",method="PATCH"} 1"#,
            r#"rest_client_requests_total{code="<error>",host="counted.example:6443",method="GET"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert_eq!(text.matches("# TYPE rest_client_requests ").count(), 1);
        assert!(text.ends_with("# EOF\n"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_collector_reads_this_process() {
        let text = Metrics::new().encode();
        let value = |name: &str| -> f64 {
            let prefix = format!("{name} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {text}"))
        };
        assert!(value("process_cpu_seconds_total") >= 0.0);
        // stdin, stdout, stderr at least.
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        let rss = value("process_resident_memory_bytes");
        assert!(rss > 0.0 && rss <= value("process_virtual_memory_bytes"));
        assert!(value("process_virtual_memory_max_bytes") > 0.0);
        assert!(value("process_network_receive_bytes_total") >= 0.0);
        assert!(value("process_network_transmit_bytes_total") >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        let started = value("process_start_time_seconds");
        // This test's process started before now and after the year 2020.
        assert!(
            started > 1.5e9 && started <= now + 2.0,
            "{started} vs {now}"
        );
        assert!(text.contains("# TYPE process_cpu_seconds counter"));
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

    #[test]
    fn a_term_s_checks_are_counted_by_kind() {
        let metrics = Metrics::new();
        let c = metrics.controller("bookstore");
        c.term_checked(TermCheck::ShareRead);
        c.term_checked(TermCheck::Moved);
        c.term_checked(TermCheck::Moved);
        let text = metrics.encode();
        for line in [
            "# TYPE bosun_term_checks counter",
            r#"bosun_term_checks_total{controller="bookstore",check="share_read"} 1"#,
            r#"bosun_term_checks_total{controller="bookstore",check="moved"} 2"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains(r#"check="object_read""#), "{text}");
    }
}
