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
use std::time::Duration;

use hyper_util::client::legacy::Client as Http;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt};
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

use crate::fence::Fence;
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
    config: kube::Config,
    rate: Option<RateLimitLayer>,
    pool: Pool,
    fence: Option<&Fence>,
) -> Result<kube::Client, kube::Error> {
    let fence = fence.map(Fence::layer);
    if needs_kube_stack(&config) {
        let builder =
            ClientBuilder::try_from(config)?.with_layer(&tower::util::option_layer(fence));
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
    let http: Http<_, Body> = Http::builder(TokioExecutor::new())
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
        .option_layer(fence)
        .map_err(BoxError::from)
        .service(http);
    let builder = ClientBuilder::new(service, default_ns);
    Ok(match rate {
        Some(r) => builder.with_layer(&r).build(),
        None => builder.build(),
    })
}
