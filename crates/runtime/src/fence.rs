//! The write fence: the last check before a mutating request leaves the process.
//!
//! Stopping the controllers when the lease is lost is not enough to keep a replica from
//! writing after a standby took over. A process paused past its renew deadline (SIGSTOP, a
//! stalled VM, a long GC-like stall of the node) wakes with every timer expired at once: its
//! reconciles and the task that would notice the lost lease become runnable together, and on a
//! multi-threaded runtime a reconcile may send its write before the controllers are aborted.
//! Requests already handed to the connection pool go out even after their task is aborted.
//!
//! So the operators' client carries this fence at the bottom of its stack, right above the
//! connection pool: every mutating request compares the monotonic clock with the instant the
//! leader elector last proved leadership until (`renew_deadline` after the start of its last
//! successful renewal) and fails, unsent, past it. The elector's own client is not fenced.
//!
//! The check is made twice: when the request enters the fence's layer, and again as the
//! connection's task writes the request's body to the socket ([`FencedBody`]). The first alone
//! left the wait for a connection and for that task between the check and the socket: a
//! SIGSTOP landing there released the write after the pause, past the takeover.
//! What the fence cannot close: a process paused between the second check and the kernel
//! taking the request's bytes (within one poll of the connection's task). Only a server-side fencing token
//! would close that, and Kubernetes has none for ordinary writes.
//!
//! Token and access reviews (the `/metrics` authentication) persist nothing and are served by
//! standbys too, so they pass.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use axum::http;
use futures::future::{ready, Either, Ready};
use tower::{Layer, Service};

/// Writes allowed without a deadline (no leader election, or before it begins).
const OPEN: u64 = u64::MAX;
/// No writes.
const CLOSED: u64 = 0;

/// Shared between the leader elector (which moves it) and the operators' client (which reads
/// it on every mutating request).
#[derive(Clone, Debug)]
pub struct Fence(Arc<AtomicU64>);

impl Default for Fence {
    fn default() -> Self {
        Fence::new()
    }
}

fn epoch() -> std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Nanoseconds since the process's epoch, never 0 or `OPEN`.
fn stamp(t: std::time::Instant) -> u64 {
    let n = t.saturating_duration_since(epoch()).as_nanos();
    u64::try_from(n).unwrap_or(OPEN - 1).clamp(1, OPEN - 1)
}

impl Fence {
    /// An open fence: writes pass until the elector first closes it.
    pub fn new() -> Self {
        epoch();
        Fence(Arc::new(AtomicU64::new(OPEN)))
    }

    /// Writes pass until `until` (monotonic).
    pub fn open_until(&self, until: tokio::time::Instant) {
        self.0.store(stamp(until.into_std()), Ordering::SeqCst);
    }

    /// No write passes until the next `open_until`.
    pub fn close(&self) {
        self.0.store(CLOSED, Ordering::SeqCst);
    }

    /// Whether a mutating request may be sent now.
    pub fn allows_writes(&self) -> bool {
        match self.0.load(Ordering::SeqCst) {
            OPEN => true,
            CLOSED => false,
            until => stamp(std::time::Instant::now()) < until,
        }
    }

    /// The tower layer for the operators' client.
    pub fn layer(&self) -> FenceLayer {
        FenceLayer(self.clone())
    }
}

/// A mutating request refused because this replica is not sure it leads.
#[derive(Debug, thiserror::Error)]
#[error("write refused: this replica is not sure it holds the leader lease ({method} {path})")]
pub struct Fenced {
    method: http::Method,
    path: String,
}

/// Whether a request changes what the API server stores.
fn mutates(method: &http::Method, path: &str) -> bool {
    let reads = matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    let review = path.contains("/apis/authentication.k8s.io/")
        || path.contains("/apis/authorization.k8s.io/");
    !reads && !review
}

#[derive(Clone, Debug)]
pub struct FenceLayer(Fence);

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;
    fn layer(&self, inner: S) -> FenceService<S> {
        FenceService {
            inner,
            fence: self.0.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct FenceService<S> {
    inner: S,
    fence: Fence,
}

impl<S, B> Service<http::Request<B>> for FenceService<S>
where
    S: Service<http::Request<B>>,
    S::Error: From<Fenced>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if mutates(req.method(), req.uri().path()) && !self.fence.allows_writes() {
            let refused = Fenced {
                method: req.method().clone(),
                path: req.uri().path().to_string(),
            };
            return Either::Right(ready(Err(refused.into())));
        }
        Either::Left(self.inner.call(req))
    }
}

/// The check made again where the request's bytes are written: the body of a mutating
/// request, polled by the connection's task as it writes the request to the socket. Between
/// [`FenceService::call`] and that moment the request waits for a pooled connection (a new
/// one: a TCP connect and a TLS handshake) and for the connection's task to be scheduled —
/// milliseconds on a loaded node, enough for a SIGSTOP to land in between and release the
/// write seconds later, after another replica took over. A body refused here ends the
/// connection before its request is complete, so the API server never acts on it.
pub struct FencedBody<B> {
    inner: B,
    /// The fence and the refusal it would give; `None`: not a mutating request, no fence, or
    /// already checked.
    armed: Option<(Fence, Fenced)>,
}

impl<B> hyper::body::Body for FencedBody<B>
where
    B: hyper::body::Body + Unpin,
    B::Error: Into<tower::BoxError>,
{
    type Data = B::Data;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, tower::BoxError>>> {
        // Checked once, on the first frame: the rest goes out with it.
        if let Some((fence, refused)) = self.armed.take() {
            if !fence.allows_writes() {
                return Poll::Ready(Some(Err(Box::new(refused))));
            }
        }
        std::pin::Pin::new(&mut self.inner)
            .poll_frame(cx)
            .map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        // An armed body is never empty to hyper: it must be polled, or the check is skipped.
        self.armed.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        let hint = self.inner.size_hint();
        // An empty armed body: no exact length 0, which hyper would write without polling it.
        if self.armed.is_some() && hint.exact() == Some(0) {
            return hyper::body::SizeHint::default();
        }
        hint
    }
}

/// The fence for a client whose bottom is hyper's: checks at `call` as [`FenceLayer`] does,
/// and again as the body is written ([`FencedBody`]). `None`: no fence, bodies pass as they are.
#[derive(Clone, Debug)]
pub struct WireFenceLayer(pub Option<Fence>);

impl<S> Layer<S> for WireFenceLayer {
    type Service = WireFenceService<S>;
    fn layer(&self, inner: S) -> WireFenceService<S> {
        WireFenceService {
            inner,
            fence: self.0.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct WireFenceService<S> {
    inner: S,
    fence: Option<Fence>,
}

impl<S, B> Service<http::Request<B>> for WireFenceService<S>
where
    S: Service<http::Request<FencedBody<B>>>,
    S::Error: From<Fenced>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let Some(fence) = self
            .fence
            .as_ref()
            .filter(|_| mutates(req.method(), req.uri().path()))
        else {
            return Either::Left(
                self.inner
                    .call(req.map(|inner| FencedBody { inner, armed: None })),
            );
        };
        let refused = Fenced {
            method: req.method().clone(),
            path: req.uri().path().to_string(),
        };
        if !fence.allows_writes() {
            return Either::Right(ready(Err(refused.into())));
        }
        let armed = Some((fence.clone(), refused));
        Either::Left(
            self.inner
                .call(req.map(|inner| FencedBody { inner, armed })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn open_closed_and_timed() {
        let f = Fence::new();
        assert!(f.allows_writes(), "open before leader election");
        f.close();
        assert!(!f.allows_writes());
        f.open_until(tokio::time::Instant::now() + Duration::from_secs(60));
        assert!(f.allows_writes());
        f.open_until(tokio::time::Instant::now() - Duration::from_millis(1));
        assert!(!f.allows_writes(), "past the deadline");
    }

    /// A write that passed the check at `call` and then waited — for a connection, as a
    /// process paused there does — until the fence closed, through hyper's own client: the
    /// server must never receive its body.
    #[tokio::test]
    async fn a_write_held_up_after_its_check_does_not_leave_once_the_fence_closed() {
        use tokio::io::AsyncReadExt;
        const MARKER: &str = "written-after-the-fence-closed";
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        // What the server received: up to the marker, or all until the client hung up.
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.expect("accept");
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if String::from_utf8_lossy(&got).contains(MARKER) {
                    break;
                }
            }
            String::from_utf8_lossy(&got).into_owned()
        });
        let fence = Fence::new();
        // The connection is ready only once the fence has closed: the request passes the
        // check at `call` and is held between it and the socket.
        let closed = fence.clone();
        let connector = tower::service_fn(move |_: http::Uri| {
            let closed = closed.clone();
            Box::pin(async move {
                while closed.allows_writes() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                tokio::net::TcpStream::connect(addr)
                    .await
                    .map(hyper_util::rt::TokioIo::new)
            })
        });
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build::<_, FencedBody<kube::client::Body>>(connector);
        let mut client = tower::ServiceBuilder::new()
            .layer(WireFenceLayer(Some(fence.clone())))
            .map_err(tower::BoxError::from)
            .service(http);
        let req = http::Request::patch(format!("http://{addr}/api/v1/namespaces/n/configmaps/c"))
            .body(kube::client::Body::from(
                format!("{{\"m\":\"{MARKER}\"}}").into_bytes(),
            ))
            .expect("request");
        let sent = client.call(req);
        fence.close();
        let sent = tokio::spawn(sent);
        let got = server.await.expect("server");
        sent.abort();
        assert!(
            !got.contains(MARKER),
            "the write passed the fence while it was open and reached the server after it closed: {got:?}"
        );
    }

    #[test]
    fn reads_and_reviews_are_not_writes() {
        assert!(!mutates(&http::Method::GET, "/api/v1/pods"));
        assert!(mutates(&http::Method::PATCH, "/api/v1/namespaces/a/pods/p"));
        assert!(mutates(&http::Method::DELETE, "/apis/apps/v1/x"));
        assert!(!mutates(
            &http::Method::POST,
            "/apis/authentication.k8s.io/v1/tokenreviews"
        ));
        assert!(!mutates(
            &http::Method::POST,
            "/prefix/apis/authorization.k8s.io/v1/subjectaccessreviews"
        ));
    }
}
