//! Counting the writes a client sends (every request but GET), for the benchmark and the
//! tests that prove a converged reconcile writes nothing: a tower layer for
//! `kube::client::ClientBuilder::with_layer`.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many writes went through the layer (shared by its clones).
#[derive(Clone, Debug, Default)]
pub struct Writes(Arc<AtomicU64>);

impl Writes {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// The layer that counts into this.
    pub fn layer(&self) -> CountLayer {
        CountLayer(self.clone())
    }

    /// A client for `config` whose writes are counted here.
    pub fn client(&self, config: kube::Config) -> Result<kube::Client, kube::Error> {
        Ok(kube::client::ClientBuilder::try_from(config)?
            .with_layer(&self.layer())
            .build())
    }
}

#[derive(Clone, Debug)]
pub struct CountLayer(Writes);

impl<S> tower::Layer<S> for CountLayer {
    type Service = CountService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountService {
            inner,
            writes: self.0.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct CountService<S> {
    inner: S,
    writes: Writes,
}

impl<S, B> tower::Service<http::Request<B>> for CountService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.method() != http::Method::GET {
            self.writes.0.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.call(req)
    }
}
