//! A tower layer for an operator's client that perturbs its view of the cluster the way a
//! slow or flaky network would, deterministically — in the spirit of Sieve, which found bugs
//! in production operators by perturbing exactly this: delay the LIST of one resource (its
//! cache then syncs late), hold back the events of its watches (a stale view, released in
//! order), make one kind of request fail, and count the mutating requests the operator sends
//! per resource. Test support, like the rest of this crate.
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::watch;
use tower::{Layer, Service};

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

#[derive(Clone, Default)]
pub struct Perturb(Arc<Inner>);

#[derive(Default)]
struct Inner {
    list_delays: Mutex<Vec<(String, Duration)>>,
    /// Resources whose watch events are held while the flag is true.
    stale: Mutex<BTreeMap<String, watch::Sender<bool>>>,
    writes: Mutex<BTreeMap<String, usize>>,
    /// (method, resource) of requests the API server answers with 404 (sent to a path it
    /// does not serve).
    failing: Mutex<Vec<(http::Method, String)>>,
}

/// The resource (plural) a request path names: `/api/v1/namespaces/ns/services/x` → services.
fn resource(path: &str) -> String {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // /api/v1/... or /apis/group/version/...
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..).unwrap_or_default(),
        _ => parts.get(3..).unwrap_or_default(),
    };
    let rest = match rest.first() {
        Some(&"namespaces") if rest.len() > 2 => &rest[2..],
        _ => rest,
    };
    rest.first().map(|s| s.to_string()).unwrap_or_default()
}

impl Perturb {
    /// A client for the control plane acting as `user`, with this layer.
    pub async fn client_as(
        &self,
        cp: &crate::ControlPlane,
        user: &str,
        groups: &[&str],
    ) -> Result<kube::Client, crate::TestEnvError> {
        let mut cfg = cp.config().await?;
        cfg.auth_info.impersonate = Some(user.to_string());
        cfg.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Ok(kube::client::ClientBuilder::try_from(cfg)?
            .with_layer(self)
            .build())
    }

    /// An admin client for the control plane, with this layer.
    pub async fn client(
        &self,
        cp: &crate::ControlPlane,
    ) -> Result<kube::Client, crate::TestEnvError> {
        let cfg = cp.config().await?;
        Ok(kube::client::ClientBuilder::try_from(cfg)?
            .with_layer(self)
            .build())
    }

    /// Answers to LISTs of `resource` (plural) arrive `delay` late: its cache syncs late.
    pub fn delay_lists(&self, resource: &str, delay: Duration) {
        self.0
            .list_delays
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((resource.to_string(), delay));
    }

    /// Holds back every watch event of `resource` (`true`) or releases them in order
    /// (`false`): the operator's view of that kind goes stale, then catches up.
    pub fn stale(&self, resource: &str, on: bool) {
        let mut stale = self.0.stale.lock().unwrap_or_else(|e| e.into_inner());
        let tx = stale
            .entry(resource.to_string())
            .or_insert_with(|| watch::channel(false).0);
        tx.send_replace(on);
    }

    fn stale_rx(&self, resource: &str) -> watch::Receiver<bool> {
        let mut stale = self.0.stale.lock().unwrap_or_else(|e| e.into_inner());
        stale
            .entry(resource.to_string())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe()
    }

    /// From now on, `method` requests on `resource` fail: the API server answers 404.
    pub fn fail(&self, method: http::Method, resource: &str) {
        self.0
            .failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((method, resource.to_string()));
    }

    /// Mutating requests (POST, PUT, PATCH, DELETE) sent so far on `resource` (plural; a
    /// subresource counts as `resource/sub`).
    pub fn writes(&self, resource: &str) -> usize {
        self.0
            .writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(resource)
            .copied()
            .unwrap_or(0)
    }

    /// Every mutating request sent so far, by resource.
    pub fn all_writes(&self) -> BTreeMap<String, usize> {
        self.0
            .writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl<S> Layer<S> for Perturb {
    type Service = Perturbed<S>;
    fn layer(&self, inner: S) -> Perturbed<S> {
        Perturbed {
            inner,
            state: self.clone(),
        }
    }
}

pub struct Perturbed<S> {
    inner: S,
    state: Perturb,
}

impl<S, ReqB, ResB> Service<http::Request<ReqB>> for Perturbed<S>
where
    S: Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResB: Body<Data = Bytes> + Send + Unpin + 'static,
{
    type Response = http::Response<StaleBody<ResB>>;
    type Error = S::Error;
    type Future = BoxFut<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqB>) -> Self::Future {
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let is_watch = query.contains("watch=true") || query.contains("watch=1");
        let mut res = resource(&path);
        let method = req.method().clone();
        let failing = self
            .state
            .0
            .failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|(m, r)| *m == method && *r == res);
        if failing {
            let bad =
                req.uri()
                    .to_string()
                    .replacen(&format!("/{res}"), &format!("/{res}-unserved"), 1);
            if let Ok(uri) = bad.parse() {
                *req.uri_mut() = uri;
            }
        }
        let mutating = [
            http::Method::POST,
            http::Method::PUT,
            http::Method::PATCH,
            http::Method::DELETE,
        ]
        .contains(&method);
        if mutating {
            let segs: Vec<&str> = path.rsplit('/').collect();
            if let Some(sub) = segs.first().filter(|s| ["status", "scale"].contains(s)) {
                res = format!("{res}/{sub}");
            }
            *self
                .state
                .0
                .writes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(res.clone())
                .or_insert(0) += 1;
        }
        // A LIST is a GET on the collection: its path ends with the resource.
        let is_list =
            method == http::Method::GET && !is_watch && path.ends_with(&format!("/{res}"));
        let delay = if is_list {
            self.state
                .0
                .list_delays
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|(r, _)| *r == res)
                .map(|(_, d)| *d)
        } else {
            None
        };
        let stale = is_watch.then(|| self.state.stale_rx(&res));
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            Ok(resp.map(|body| StaleBody { inner: body, stale }))
        })
    }
}

/// A response body that stops yielding while its resource is held stale.
pub struct StaleBody<B> {
    inner: B,
    stale: Option<watch::Receiver<bool>>,
}

impl<B> Body for StaleBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(rx) = self.stale.as_mut() {
            if *rx.borrow_and_update() {
                // Wake when the flag changes; until then the events stay on the wire.
                let mut rx = rx.clone();
                let waker = cx.waker().clone();
                tokio::spawn(async move {
                    let _ = rx.changed().await;
                    waker.wake();
                });
                return Poll::Pending;
            }
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
