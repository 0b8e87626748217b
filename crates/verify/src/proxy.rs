//! The operator's only way to the API server: a plain-HTTP proxy on loopback, forwarding
//! through an admin client that impersonates the operator's identity and carries
//! [`Perturb`]. Putting the operator behind it gives the verifier, for an operator of any
//! language, what the chaos suite had only for bosun in-process:
//! - the identity is the project's ServiceAccount (RBAC applies as it would in the cluster),
//!   and the operator needs no credentials of its own;
//! - every mutating request is recorded with its outcome and the object it named (the write
//!   counter, per scenario, with no audit log to parse);
//! - its watch events can be held back and released in order (Sieve's stale view), and one
//!   kind of write can be made to fail;
//! - a restarted operator's first read of a kind can be answered from an old snapshot
//!   ([`Proxy::old_view`], Sieve's time travel: a restarted controller meeting an API server
//!   that lags behind). A LIST gets the snapshot's items and its resourceVersion, so the watch
//!   that follows resumes from there and replays what happened since (held back while the
//!   kind is stale); a watch with no resourceVersion to resume from (or asking for its
//!   initial events) gets the snapshot as ADDED events and a BOOKMARK at its resourceVersion,
//!   then ends, so that the client's next watch resumes from there. Answers are JSON; a client
//!   that accepts only protobuf gets the present;
//! - a crash can land at a point of the operator's own work ([`Proxy::crash_after`]): right
//!   after its n-th create is committed by the API server, before the operator has
//!   its answer. From then on its requests are held and never sent (it is as good as dead)
//!   until the scenario has killed it. A crash point found by its state, not by a clock, is
//!   hit whatever the machine's load: a kill after a sleep lands in a window only when the
//!   operator happens to be in it;
//! - a fault can land mid-convergence at a point of the operator's own work
//!   ([`Proxy::pause_after`]): right after its k-th write is committed, the operator is
//!   paused (the write's answer and whatever it sends next are held, not refused) until the
//!   scenario has injected the fault (an API server restart, a second spec) and resumes it.
//!   The operator has then done exactly k writes, whatever the load or its start time.
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body as AxumBody;
use bosun_testenv::perturb::Perturb;
use bosun_testenv::ControlPlane;
use bytes::Bytes;
use http::{HeaderName, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;

/// One mutating request the operator sent.
#[derive(Clone, Debug)]
pub struct Write {
    pub at: Instant,
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    pub status: u16,
    /// The object the answer named: (kind, namespace, name), when it named one.
    pub object: Option<(String, String, String)>,
}

impl Write {
    /// Leases renew whatever the operator does; they are not its work.
    pub fn counts(&self) -> bool {
        !self.path.contains("/leases")
    }
    /// A request that created an object (201).
    pub fn created(&self) -> bool {
        self.status == 201
    }
    pub fn describe(&self) -> String {
        let what = match &self.object {
            Some((kind, _, name)) => format!("{kind}/{name}"),
            None => self.path.clone(),
        };
        format!("{} {what} ({})", self.method, self.status)
    }
}

#[derive(Default)]
struct Log {
    writes: Vec<Write>,
    last_request: Option<Instant>,
    requests: usize,
    /// Requests sent and not answered yet (watches left out: they stay open).
    in_flight: usize,
    /// When the last of those was answered.
    last_answer: Option<Instant>,
    /// The collections the operator has opened a watch on (plurals).
    watched: std::collections::BTreeSet<String>,
    /// When an old view was last served.
    old_view_served: Option<Instant>,
}

struct PausePoint {
    /// Writes still to come before the pause.
    left: usize,
    hit: tokio::sync::oneshot::Sender<Write>,
}

struct CrashPoint {
    /// Creates still to come before the crash.
    left: usize,
    hit: tokio::sync::oneshot::Sender<Write>,
}

/// An old snapshot of a kind, served once to the next read of it.
#[derive(Clone, Debug)]
struct OldView {
    plural: String,
    api_version: String,
    kind: String,
    resource_version: String,
    items: Vec<serde_json::Value>,
}

struct Shared {
    client: kube::Client,
    old_views: Mutex<Vec<OldView>>,
    log: Mutex<Log>,
    /// Set when the scenario ends: a helper of its operator still running is refused.
    closed: std::sync::atomic::AtomicBool,
    crash: Mutex<Option<CrashPoint>>,
    /// True from a crash point's hit until [`Proxy::thaw`]: the operator is being killed, and
    /// nothing it sends reaches the API server any more.
    frozen: tokio::sync::watch::Sender<bool>,
    pause: Mutex<Option<PausePoint>>,
    /// True from a pause point's hit until [`Proxy::resume`]: requests wait, then go on.
    paused: tokio::sync::watch::Sender<bool>,
}

/// A running proxy; dropping it stops serving.
pub struct Proxy {
    pub perturb: Perturb,
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.task.abort();
    }
}

const HOP_BY_HOP: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "authorization",
];

impl Proxy {
    /// Serves on a free loopback port, acting as `user` in `groups`.
    pub async fn start(cp: &ControlPlane, user: &str, groups: &[&str]) -> anyhow::Result<Proxy> {
        let perturb = Perturb::default();
        let client = perturb.client_as(cp, user, groups).await?;
        let shared = Arc::new(Shared {
            client,
            log: Mutex::new(Log::default()),
            old_views: Mutex::new(Vec::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
            crash: Mutex::new(None),
            frozen: tokio::sync::watch::channel(false).0,
            pause: Mutex::new(None),
            paused: tokio::sync::watch::channel(false).0,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = shared.clone();
        let app = axum::Router::new().fallback(move |req: Request<AxumBody>| {
            let state = state.clone();
            async move { forward(state, req).await }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Proxy {
            perturb,
            shared,
            addr,
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig that points at the proxy (no credentials: the proxy has them).
    pub fn kubeconfig(&self, ns: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: verify\n  cluster:\n    server: {}\ncontexts:\n- name: verify\n  context:\n    cluster: verify\n    user: verify\n    namespace: {ns}\ncurrent-context: verify\nusers:\n- name: verify\n  user: {{}}\n",
            self.url()
        )
    }

    /// The operator's mutating requests so far (leases included; see [`Write::counts`]).
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    /// The writes that count, sent at or after `since`.
    pub fn writes_since(&self, since: Instant) -> Vec<Write> {
        self.lock()
            .writes
            .iter()
            .filter(|w| w.at >= since && w.counts())
            .cloned()
            .collect()
    }

    /// The next read (LIST or a watch with nothing to resume from) of `plural` is answered
    /// with `items` as they were at `resource_version`: an old view of the kind.
    pub fn old_view(
        &self,
        plural: &str,
        api_version: &str,
        kind: &str,
        resource_version: &str,
        items: Vec<serde_json::Value>,
    ) {
        self.shared
            .old_views
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(OldView {
                plural: plural.to_string(),
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                resource_version: resource_version.to_string(),
                items,
            });
    }

    /// Old views armed and not served yet.
    pub fn old_views_pending(&self) -> usize {
        self.shared
            .old_views
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Whether the operator has opened a watch on this collection (a plural) through the proxy.
    pub fn watches(&self, plural: &str) -> bool {
        self.lock().watched.contains(plural)
    }

    /// When the operator last sent any request, and how many it sent.
    pub fn activity(&self) -> (Option<Instant>, usize) {
        let log = self.lock();
        (log.last_request, log.requests)
    }

    /// Since when the operator has had no request in flight and sent none (watches aside):
    /// None while one is in flight or before its first.
    pub fn quiet_since(&self) -> Option<Instant> {
        let log = self.lock();
        if log.in_flight > 0 {
            return None;
        }
        match (log.last_request, log.last_answer) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// When an old view was last served to a read, if one was.
    pub fn old_view_served(&self) -> Option<Instant> {
        self.lock().old_view_served
    }

    /// Arms a crash point: the `n`-th create (201, n ≥ 1) the operator has committed from
    /// now on freezes it (see [`Proxy::thaw`]) before its answer is returned, and the receiver
    /// gets that write. Replaces a point armed before.
    pub fn crash_after(&self, n: usize) -> tokio::sync::oneshot::Receiver<Write> {
        let (hit, rx) = tokio::sync::oneshot::channel();
        *self.shared.crash.lock().unwrap_or_else(|e| e.into_inner()) = Some(CrashPoint {
            left: n.max(1),
            hit,
        });
        rx
    }

    /// Disarms the crash point and, once the frozen operator has been killed, refuses what it
    /// had sent in the meantime (it never reaches the API server) and lets the next one through.
    pub fn thaw(&self) {
        *self.shared.crash.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.shared.frozen.send_replace(false);
    }

    /// Arms a pause point: the `k`-th write (k ≥ 1) the operator has committed from now on
    /// (2xx, events and leases aside: its work) pauses it before its answer is returned, and
    /// the receiver gets that write. Nothing it sends is lost: it waits for [`Proxy::resume`].
    /// Replaces a point armed before.
    pub fn pause_after(&self, k: usize) -> tokio::sync::oneshot::Receiver<Write> {
        let (hit, rx) = tokio::sync::oneshot::channel();
        *self.shared.pause.lock().unwrap_or_else(|e| e.into_inner()) = Some(PausePoint {
            left: k.max(1),
            hit,
        });
        rx
    }

    /// Disarms the pause point and lets the paused operator's requests go on.
    pub fn resume(&self) {
        *self.shared.pause.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.shared.paused.send_replace(false);
    }

    /// The operator's writes of its work so far: what [`Proxy::pause_after`] counts.
    pub fn work_writes(&self) -> usize {
        self.lock().writes.iter().filter(|w| is_work(w)).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.shared.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn status(code: StatusCode, msg: String) -> Response<AxumBody> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": msg, "code": code.as_u16(),
    });
    let mut r = Response::new(AxumBody::from(body.to_string()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

async fn forward(shared: Arc<Shared>, req: Request<AxumBody>) -> Response<AxumBody> {
    if shared.closed.load(std::sync::atomic::Ordering::SeqCst) {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "bosun verify: this scenario has ended".into(),
        );
    }
    if *shared.frozen.borrow() {
        return frozen(&shared).await;
    }
    wait_resumed(&shared).await;
    let (parts, body) = req.into_parts();
    let watch = parts.method == Method::GET
        && matches!(
            parts.uri.query().and_then(|q| query_value(q, "watch")),
            Some("true" | "1")
        );
    {
        let mut log = shared.log.lock().unwrap_or_else(|e| e.into_inner());
        log.last_request = Some(Instant::now());
        log.requests += 1;
        if watch {
            if let Some(plural) = collection_plural(parts.uri.path()) {
                log.watched.insert(plural.to_string());
            }
        }
    }
    let _in_flight = (!watch).then(|| InFlight::new(&shared));
    if parts.method == Method::GET {
        if let Some(r) = serve_old_view(&shared, &parts) {
            return r;
        }
    }
    // Requests are small; answers (watches) are streamed.
    let body = match axum::body::to_bytes(body, 256 << 20).await {
        Ok(b) => b,
        Err(e) => return status(StatusCode::BAD_REQUEST, format!("request body: {e}")),
    };
    let path_q = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut out = Request::builder().method(parts.method.clone()).uri(&path_q);
    for (k, v) in &parts.headers {
        if !HOP_BY_HOP.contains(&k.as_str()) {
            out = out.header(k, v);
        }
    }
    let out = match out.body(kube::client::Body::from(body.to_vec())) {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_REQUEST, format!("request: {e}")),
    };
    let mutating =
        [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(&parts.method);
    let at = Instant::now();
    let resp = match shared.client.send(out).await {
        Ok(r) => r,
        Err(e) => {
            if mutating {
                record(
                    &shared,
                    at,
                    &parts.method,
                    parts.uri.path(),
                    502,
                    &Bytes::new(),
                );
            }
            return status(StatusCode::BAD_GATEWAY, format!("verify proxy: {e}"));
        }
    };
    let (rparts, rbody) = resp.into_parts();
    let mut builder = Response::builder().status(rparts.status);
    for (k, v) in &rparts.headers {
        if !HOP_BY_HOP.contains(&k.as_str()) && k != HeaderName::from_static("content-length") {
            builder = builder.header(k, v);
        }
    }
    let body = if mutating {
        let bytes = match rbody.collect().await {
            Ok(c) => c.to_bytes(),
            Err(e) => return status(StatusCode::BAD_GATEWAY, format!("verify proxy: {e}")),
        };
        let w = record(
            &shared,
            at,
            &parts.method,
            parts.uri.path(),
            rparts.status.as_u16(),
            &bytes,
        );
        crash_point(&shared, w.clone());
        pause_point(&shared, w);
        AxumBody::from(bytes)
    } else {
        AxumBody::new(rbody)
    };
    // Committed, but the operator is dead from here on: it never learns the outcome.
    if *shared.frozen.borrow() {
        return frozen(&shared).await;
    }
    // Committed, and the operator learns the outcome only once the fault has landed.
    wait_resumed(&shared).await;
    builder
        .body(body)
        .unwrap_or_else(|e| status(StatusCode::BAD_GATEWAY, format!("verify proxy: {e}")))
}

/// Counts one request as in flight while it lives (a dropped handler included).
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn new(shared: &'a Shared) -> InFlight<'a> {
        shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .in_flight += 1;
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut log = self.0.log.lock().unwrap_or_else(|e| e.into_inner());
        log.in_flight = log.in_flight.saturating_sub(1);
        log.last_answer = Some(Instant::now());
    }
}

/// Counts `w` against the armed crash point; on its hit, freezes the operator and tells the
/// scenario.
fn crash_point(shared: &Shared, w: Write) {
    let mut crash = shared.crash.lock().unwrap_or_else(|e| e.into_inner());
    let Some(point) = crash.as_mut() else {
        return;
    };
    // Events are the operator's diary, not its work: a crash after one finds nothing.
    if !(w.created() && w.counts() && collection_plural(&w.path) != Some("events")) {
        return;
    }
    point.left -= 1;
    if point.left > 0 {
        return;
    }
    if let Some(point) = crash.take() {
        shared.frozen.send_replace(true);
        let _ = point.hit.send(w);
    }
}

/// A write of the operator's work: committed (2xx), not an event (its diary) nor a lease.
fn is_work(w: &Write) -> bool {
    (200..300).contains(&w.status) && w.counts() && collection_plural(&w.path) != Some("events")
}

/// Counts `w` against the armed pause point; on its hit, pauses the operator and tells the
/// scenario.
fn pause_point(shared: &Shared, w: Write) {
    let mut pause = shared.pause.lock().unwrap_or_else(|e| e.into_inner());
    let Some(point) = pause.as_mut() else {
        return;
    };
    if !is_work(&w) {
        return;
    }
    point.left -= 1;
    if point.left > 0 {
        return;
    }
    if let Some(point) = pause.take() {
        shared.paused.send_replace(true);
        let _ = point.hit.send(w);
    }
}

async fn wait_resumed(shared: &Shared) {
    if *shared.paused.borrow() {
        let mut rx = shared.paused.subscribe();
        let _ = rx.wait_for(|p| !*p).await;
    }
}

/// The answer to a request of an operator being killed: none until it is dead, then a refusal
/// nobody reads.
async fn frozen(shared: &Shared) -> Response<AxumBody> {
    let mut rx = shared.frozen.subscribe();
    let _ = rx.wait_for(|f| !*f).await;
    status(
        StatusCode::SERVICE_UNAVAILABLE,
        "bosun verify: the operator was killed before this answer".into(),
    )
}

fn record(
    shared: &Shared,
    at: Instant,
    method: &Method,
    path: &str,
    code: u16,
    body: &Bytes,
) -> Write {
    let object = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .filter(|v| v["kind"] != "Status")
        .and_then(|v| {
            let kind = v["kind"].as_str()?.to_string();
            let name = v["metadata"]["name"].as_str()?.to_string();
            let ns = v["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            Some((kind, ns, name))
        });
    let w = Write {
        at,
        method: method.clone(),
        path: path.to_string(),
        status: code,
        object,
    };
    let mut log = shared.log.lock().unwrap_or_else(|e| e.into_inner());
    log.writes.push(w.clone());
    w
}

/// The query's value of `key`.
fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// The collection a read path names: its plural, when the path is `.../<plural>` (a LIST or
/// watch of a kind, namespaced or not) and not one object.
fn collection_plural(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..)?,
        Some(&"apis") => parts.get(3..)?,
        _ => return None,
    };
    match rest {
        [plural] => Some(plural),
        ["namespaces", _, plural] => Some(plural),
        _ => None,
    }
}

/// Answers the read with an armed old view of its kind (and disarms it), if there is one and
/// the client accepts JSON.
fn serve_old_view(shared: &Shared, parts: &http::request::Parts) -> Option<Response<AxumBody>> {
    let plural = collection_plural(parts.uri.path())?;
    let query = parts.uri.query().unwrap_or("");
    let watch = matches!(query_value(query, "watch"), Some("true" | "1"));
    let resume = query_value(query, "resourceVersion").filter(|v| !v.is_empty() && *v != "0");
    let initial = query_value(query, "sendInitialEvents") == Some("true");
    // A watch resuming from a version already has its view: the old one is for a fresh read.
    if watch && resume.is_some() && !initial {
        return None;
    }
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("*/*");
    if !(accept.contains("json") || accept.contains("*/*")) {
        return None;
    }
    let view = {
        let mut views = shared.old_views.lock().unwrap_or_else(|e| e.into_inner());
        let i = views.iter().position(|v| v.plural == plural)?;
        views.remove(i)
    };
    shared
        .log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .old_view_served = Some(Instant::now());
    let items: Vec<serde_json::Value> = view
        .items
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o["apiVersion"] = view.api_version.clone().into();
            o["kind"] = view.kind.clone().into();
            o
        })
        .collect();
    let body = if watch {
        let mut lines = String::new();
        for o in items {
            lines.push_str(&serde_json::json!({"type": "ADDED", "object": o}).to_string());
            lines.push('\n');
        }
        let bookmark = serde_json::json!({"type": "BOOKMARK", "object": {
            "apiVersion": view.api_version, "kind": view.kind,
            "metadata": {"resourceVersion": view.resource_version,
                "annotations": {"k8s.io/initial-events-end": "true"}}}});
        lines.push_str(&bookmark.to_string());
        lines.push('\n');
        lines
    } else {
        serde_json::json!({
            "apiVersion": view.api_version, "kind": format!("{}List", view.kind),
            "metadata": {"resourceVersion": view.resource_version}, "items": items,
        })
        .to_string()
    };
    let mut r = Response::new(AxumBody::from(body));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Some(r)
}

/// The namespace a request path names (`/api/v1/namespaces/ns/...`), if any.
pub fn namespace_of(path: &str) -> Option<&str> {
    let mut it = path.split('/');
    while let Some(seg) = it.next() {
        if seg == "namespaces" {
            return it.next();
        }
    }
    None
}
