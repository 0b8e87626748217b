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
//! What the fence cannot close: a process paused between this check and the kernel taking the
//! request's bytes (microseconds on a pooled connection). Only a server-side fencing token
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
