//! A layer for the operators' client that records every request it sends, so that a test
//! can tell which kinds a replica listed (and when) and that a standby wrote nothing.
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tower::{Layer, Service};

/// Every request the client sent, as `METHOD path?query`.
#[derive(Clone, Default)]
pub struct Requests(Arc<Mutex<Vec<String>>>);

impl Requests {
    pub fn all(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The lists (GETs of `path` that do not watch) sent so far.
    pub fn lists(&self, path: &str) -> usize {
        self.all()
            .iter()
            .filter(|r| {
                let Some(uri) = r.strip_prefix("GET ") else {
                    return false;
                };
                let (p, query) = uri.split_once('?').unwrap_or((uri, ""));
                p == path && !query.contains("watch=")
            })
            .count()
    }

    /// Every request that is not a GET.
    pub fn writes(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter(|r| !r.starts_with("GET "))
            .collect()
    }
}

impl<S> Layer<S> for Requests {
    type Service = Recording<S>;
    fn layer(&self, inner: S) -> Recording<S> {
        Recording {
            inner,
            seen: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Recording<S> {
    inner: S,
    seen: Requests,
}

impl<S, B> Service<http::Request<B>> for Recording<S>
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
        let line = format!("{} {}", req.method(), req.uri());
        if let Ok(mut l) = self.seen.0.lock() {
            l.push(line);
        }
        self.inner.call(req)
    }
}
