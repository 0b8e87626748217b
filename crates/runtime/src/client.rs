//! The API client an operator runs with: kube's own request stack (base URI, server-side
//! retries, credentials and their refresh, extra headers, rustls with the kubeconfig's roots
//! and timeouts) over a connection pool that lets go of idle connections.
//!
//! kube's default client keeps every connection it ever opened, idle, for good (its pool
//! has no timer, so an idle connection is only dropped when it is next looked at). Each one
//! keeps its read buffer at the size of the largest response it carried, and the initial
//! LISTs of an operator's caches are its largest. At 300 custom resources the Ansible flavour
//! held ≈1.8 MB in such buffers once converged (massif). Here at most [`Pool::max_idle`]
//! connections stay idle, for at most [`Pool::idle`]: a burst opens what it needs, and once
//! the operator is quiet its memory goes back to what its caches hold. Watches hold their
//! connections while they run, so they are not affected.
//!
//! Two configurations keep kube's own stack: credentials from an exec plugin (kube rebuilds
//! its client when the plugin's client certificate expires, which only its own builder
//! knows) and a proxy (kube's builder refuses it with the feature to enable).
//!
//! Every request either client sends is counted in `rest_client_requests_total` (see
//! [`crate::metrics::rest_request`]), each retry too, as client-go counts them.
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::{Request, Response};

use hyper_util::client::legacy::Client as Http;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt};
use tower::retry::RetryLayer;
use tower::{BoxError, Layer, Service, ServiceBuilder};

use crate::fence::{Fence, FencedBody, WireFenceLayer};
use crate::ratelimit::RateLimitLayer;

/// How the client keeps connections between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    /// How long an idle connection is kept for the next request.
    pub idle: Duration,
    /// How many idle connections are kept at most.
    pub max_idle: usize,
}

impl Default for Pool {
    /// 20 s and 8: reconciles that come in bursts (a resync, a requeue wave) reuse their
    /// connections; an operator quiet for 20 s holds none but its watches'.
    fn default() -> Self {
        Pool {
            idle: Duration::from_secs(20),
            max_idle: 8,
        }
    }
}

/// A client for `config` with the default [`Pool`], rate-limited when `rate` is given.
pub fn client(
    config: kube::Config,
    rate: Option<RateLimitLayer>,
) -> Result<kube::Client, kube::Error> {
    client_with(config, rate, Pool::default())
}

/// Whether `config` needs kube's own stack (see the module's documentation).
fn needs_kube_stack(config: &kube::Config) -> bool {
    config.auth_info.exec.is_some() || config.proxy_url.is_some()
}

/// A client for `config` keeping connections as `pool` says.
pub fn client_with(
    config: kube::Config,
    rate: Option<RateLimitLayer>,
    pool: Pool,
) -> Result<kube::Client, kube::Error> {
    client_fenced(config, rate, pool, None)
}

/// [`client_with`], its mutating requests checked against `fence` right before they leave
/// (see [`crate::fence`]): the client of the operators of a replica with leader election.
pub fn client_fenced(
    mut config: kube::Config,
    rate: Option<RateLimitLayer>,
    pool: Pool,
    fence: Option<&Fence>,
) -> Result<kube::Client, kube::Error> {
    with_user_agent(&mut config);
    let counted = CountLayer {
        host: config
            .cluster_url
            .authority()
            .map_or_else(String::new, ToString::to_string)
            .into(),
    };
    if needs_kube_stack(&config) {
        let builder = ClientBuilder::try_from(config)?
            .with_layer(&tower::util::option_layer(fence.map(Fence::layer)))
            .with_layer(&counted);
        return Ok(match rate {
            Some(r) => builder.with_layer(&r).build(),
            None => builder.build(),
        });
    }
    let default_ns = config.default_namespace.clone();
    let mut connector = hyper_timeout::TimeoutConnector::new(config.rustls_https_connector()?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: Http<_, FencedBody<Body>> = Http::builder(TokioExecutor::new())
        .pool_idle_timeout(pool.idle)
        .pool_max_idle_per_host(pool.max_idle)
        .pool_timer(TokioTimer::new())
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(WireFenceLayer(fence.cloned()))
        .layer(counted)
        .map_err(BoxError::from)
        .service(http);
    let builder = ClientBuilder::new(service, default_ns);
    Ok(match rate {
        Some(r) => builder.with_layer(&r).build(),
        None => builder.build(),
    })
}

/// client-go's form, `<program>/<version> (<os>/<arch>)`: the API server records a write
/// that names no field manager under the part before the first `/` (`bosun`), where kube's
/// client, which sends none, leaves `unknown`.
fn user_agent() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!(
        "bosun/{} ({}/{arch})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS
    )
}

/// Adds bosun's User-Agent to `config`'s headers unless they carry one already.
fn with_user_agent(config: &mut kube::Config) {
    let agent = hyper::header::USER_AGENT;
    if config.headers.iter().any(|(name, _)| *name == agent) {
        return;
    }
    if let Ok(value) = hyper::header::HeaderValue::from_str(&user_agent()) {
        config.headers.push((agent, value));
    }
}

/// Counts each request in `rest_client_requests_total` once its response (or error) came.
#[derive(Clone)]
struct CountLayer {
    /// The API server's `host:port`, client-go's `host` label.
    host: Arc<str>,
}

impl<S> Layer<S> for CountLayer {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            host: self.host.clone(),
        }
    }
}

#[derive(Clone)]
struct Counted<S> {
    inner: S,
    host: Arc<str>,
}

impl<S, B, R> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().clone();
        let host = self.host.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let r = response.await;
            let code = r.as_ref().ok().map(|r| r.status().as_u16());
            crate::metrics::rest_request(code, method.as_str(), &host);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bosun_names_itself_unless_the_config_names_an_agent() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        with_user_agent(&mut config);
        let agents: Vec<_> = config
            .headers
            .iter()
            .filter(|(n, _)| *n == hyper::header::USER_AGENT)
            .map(|(_, v)| v.to_str().expect("ascii").to_string())
            .collect();
        assert_eq!(agents.len(), 1);
        assert!(agents[0].starts_with("bosun/"), "{agents:?}");
        assert!(agents[0].contains(&format!("({}/", std::env::consts::OS)));

        let mut named = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        named.headers.push((
            hyper::header::USER_AGENT,
            hyper::header::HeaderValue::from_static("my-operator/1.0"),
        ));
        with_user_agent(&mut named);
        assert_eq!(named.headers.len(), 1);
        assert_eq!(named.headers[0].1, "my-operator/1.0");
    }
}
