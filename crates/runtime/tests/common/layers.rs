//! Tower layers for `kube::Client`s in tests: count the API calls a component makes, and make
//! the API server look slow or unreachable to one client, as a network would.
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Counts requests whose path contains `matching`: in total and at most at once.
#[derive(Clone)]
pub struct ApiCalls(Arc<CallsInner>);

struct CallsInner {
    matching: String,
    total: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl ApiCalls {
    pub fn matching(path_part: &str) -> Self {
        ApiCalls(Arc::new(CallsInner {
            matching: path_part.into(),
            total: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        }))
    }
    /// A client for the control plane whose requests this counts.
    pub async fn client(&self, cp: &bosun_testenv::ControlPlane) -> kube::Client {
        let cfg = cp.config().await.expect("config");
        kube::client::ClientBuilder::try_from(cfg)
            .expect("client builder")
            .with_layer(self)
            .build()
    }
    pub fn total(&self) -> usize {
        self.0.total.load(Ordering::SeqCst)
    }
    pub fn max_in_flight(&self) -> usize {
        self.0.max_in_flight.load(Ordering::SeqCst)
    }
}

impl<S> Layer<S> for ApiCalls {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            calls: self.clone(),
        }
    }
}

pub struct Counted<S> {
    inner: S,
    calls: ApiCalls,
}

impl<S, B> Service<http::Request<B>> for Counted<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFut<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let counted = req.uri().path().contains(&self.calls.0.matching);
        let calls = self.calls.clone();
        if counted {
            calls.0.total.fetch_add(1, Ordering::SeqCst);
            let now = calls.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            calls.0.max_in_flight.fetch_max(now, Ordering::SeqCst);
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            if counted {
                calls.0.in_flight.fetch_sub(1, Ordering::SeqCst);
            }
            res
        })
    }
}

/// Once armed, the next `PUT` of a path containing `matching` reaches the API server but its
/// answer is held back for `delay`; every request sent after that one never gets an answer
/// (a partition). Records when the slow request was sent.
#[derive(Clone)]
pub struct SlowThenPartition(Arc<SlowInner>);

struct SlowInner {
    matching: String,
    delay: Duration,
    armed: AtomicBool,
    partitioned: AtomicBool,
    slow_sent_at: Mutex<Option<Instant>>,
}

impl SlowThenPartition {
    pub fn new(matching: &str, delay: Duration) -> Self {
        SlowThenPartition(Arc::new(SlowInner {
            matching: matching.into(),
            delay,
            armed: AtomicBool::new(false),
            partitioned: AtomicBool::new(false),
            slow_sent_at: Mutex::new(None),
        }))
    }
    /// A client for the control plane that this slows down once armed.
    pub async fn client(&self, cp: &bosun_testenv::ControlPlane) -> kube::Client {
        let cfg = cp.config().await.expect("config");
        kube::client::ClientBuilder::try_from(cfg)
            .expect("client builder")
            .with_layer(self)
            .build()
    }
    pub fn arm(&self) {
        self.0.armed.store(true, Ordering::SeqCst);
    }
    pub fn slow_sent_at(&self) -> Option<Instant> {
        *self
            .0
            .slow_sent_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl<S> Layer<S> for SlowThenPartition {
    type Service = Slowed<S>;
    fn layer(&self, inner: S) -> Slowed<S> {
        Slowed {
            inner,
            state: self.clone(),
        }
    }
}

pub struct Slowed<S> {
    inner: S,
    state: SlowThenPartition,
}

impl<S, B> Service<http::Request<B>> for Slowed<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFut<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let s = &self.state.0;
        if s.partitioned.load(Ordering::SeqCst) {
            return Box::pin(std::future::pending());
        }
        let slow = s.armed.load(Ordering::SeqCst)
            && req.method() == http::Method::PUT
            && req.uri().path().contains(&s.matching);
        if slow {
            s.armed.store(false, Ordering::SeqCst);
            s.partitioned.store(true, Ordering::SeqCst);
            *s.slow_sent_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        let delay = s.delay;
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            if slow {
                tokio::time::sleep(delay).await;
            }
            res
        })
    }
}

/// Holds back every answer for `delay`, as a slow or overloaded API server would.
#[derive(Clone)]
pub struct Slow(pub Duration);

impl Slow {
    pub async fn client(&self, cp: &bosun_testenv::ControlPlane) -> kube::Client {
        let cfg = cp.config().await.expect("config");
        kube::client::ClientBuilder::try_from(cfg)
            .expect("client builder")
            .with_layer(self)
            .build()
    }
}

impl<S> Layer<S> for Slow {
    type Service = SlowAll<S>;
    fn layer(&self, inner: S) -> SlowAll<S> {
        SlowAll {
            inner,
            delay: self.0,
        }
    }
}

pub struct SlowAll<S> {
    inner: S,
    delay: Duration,
}

impl<S, B> Service<http::Request<B>> for SlowAll<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFut<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let delay = self.delay;
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            tokio::time::sleep(delay).await;
            res
        })
    }
}

/// While on, every request through it waits forever (a client's timeout drops it): a partition
/// between one client and the API server, the other clients of the process untouched.
#[derive(Clone, Default)]
pub struct Partition(Arc<AtomicBool>);

impl Partition {
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::SeqCst);
    }
}

impl<S> Layer<S> for Partition {
    type Service = Cut<S>;
    fn layer(&self, inner: S) -> Cut<S> {
        Cut {
            inner,
            on: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Cut<S> {
    inner: S,
    on: Partition,
}

impl<S, B> Service<http::Request<B>> for Cut<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFut<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.on.0.load(Ordering::SeqCst) {
            return Box::pin(std::future::pending());
        }
        Box::pin(self.inner.call(req))
    }
}

/// Shows each request's method and URI to a function before passing it on, so that a test
/// can count or report the calls it cares about.
#[derive(Clone)]
pub struct Observe(See);

type See = Arc<dyn Fn(&http::Method, &http::Uri) + Send + Sync>;

impl Observe {
    pub fn new(see: impl Fn(&http::Method, &http::Uri) + Send + Sync + 'static) -> Self {
        Observe(Arc::new(see))
    }

    /// Calls `on_list` with the resource of each LIST of one of `resources`.
    pub fn lists(
        resources: &'static [&'static str],
        on_list: impl Fn(&str) + Send + Sync + 'static,
    ) -> Self {
        Observe::new(move |method, uri| {
            for r in resources {
                if is_list(method, uri, r) {
                    on_list(r);
                }
            }
        })
    }

    /// Adds one to `lists` for each LIST of one of `resources`.
    pub fn counting_lists(resources: &'static [&'static str], lists: &Arc<AtomicUsize>) -> Self {
        let lists = lists.clone();
        Observe::lists(resources, move |_| {
            lists.fetch_add(1, Ordering::SeqCst);
        })
    }
}

/// Whether a request LISTs `resource` (a GET of the collection, not a watch).
pub fn is_list(method: &http::Method, uri: &http::Uri, resource: &str) -> bool {
    let watch = uri.query().unwrap_or("").contains("watch=");
    method == http::Method::GET
        && !watch
        && uri
            .path()
            .strip_suffix(resource)
            .is_some_and(|p| p.ends_with('/'))
}

impl<S> Layer<S> for Observe {
    type Service = Observed<S>;
    fn layer(&self, inner: S) -> Observed<S> {
        Observed {
            inner,
            see: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Observed<S> {
    inner: S,
    see: See,
}

impl<S, B> Service<http::Request<B>> for Observed<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        (self.see)(req.method(), req.uri());
        self.inner.call(req)
    }
}

/// Holds back every watch of `resource` until released: a cache behind it then shows what
/// its initial list showed, as a cache whose watch lags does. Other requests pass.
#[derive(Clone)]
pub struct HeldWatch {
    resource: &'static str,
    held: Arc<tokio::sync::watch::Sender<bool>>,
}

impl HeldWatch {
    pub fn held(resource: &'static str) -> Self {
        HeldWatch {
            resource,
            held: Arc::new(tokio::sync::watch::channel(true).0),
        }
    }

    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

impl<S> Layer<S> for HeldWatch {
    type Service = Holding<S>;
    fn layer(&self, inner: S) -> Holding<S> {
        Holding {
            inner,
            held: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Holding<S> {
    inner: S,
    held: HeldWatch,
}

impl<S, B> Service<http::Request<B>> for Holding<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFut<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let uri = req.uri();
        let watch = uri.query().unwrap_or("").contains("watch=")
            && uri
                .path()
                .strip_suffix(self.held.resource)
                .is_some_and(|p| p.ends_with('/'));
        if !watch {
            return Box::pin(self.inner.call(req));
        }
        // Not polled, the watch is not sent: it starts once released, from the version its
        // list was read at, and brings what changed since.
        let watching = self.inner.call(req);
        let mut released = self.held.held.subscribe();
        Box::pin(async move {
            let _ = released.wait_for(|held| !*held).await;
            watching.await
        })
    }
}
