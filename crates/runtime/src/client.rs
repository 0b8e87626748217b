//! The API client an operator runs with: kube's own request stack (base URI, credentials
//! and their refresh, extra headers, rustls with the kubeconfig's roots and timeouts) over
//! a connection pool that lets go of idle connections.
//!
//! kube's default client keeps every connection it ever opened, idle, for good (its pool
//! has no timer, so idle connections are only dropped when next looked at). Each one keeps
//! its read buffer at the size of the largest response it carried, and the initial LISTs
//! of an operator's caches are its largest. At 300 custom resources the Ansible flavour held
//! ≈1.8 MB in such buffers once converged (massif). Here at most [`MAX_IDLE`] connections
//! stay idle, for at most [`IDLE`]: a burst opens what it needs, and once the operator is
//! quiet its memory goes back to what its caches hold. Watches hold their connections
//! while they run, so they are not affected.
use std::time::Duration;

use hyper_util::client::legacy::Client as Http;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ClientBuilder, ConfigExt};
use tower::{BoxError, ServiceBuilder};

use crate::ratelimit::RateLimitLayer;

/// How long an idle connection is kept for the next request.
pub const IDLE: Duration = Duration::from_secs(20);

/// How many idle connections are kept at most.
pub const MAX_IDLE: usize = 8;

/// A client for `config`, with a client-side rate limit when `rate` is given.
pub fn client(config: kube::Config, rate: Option<RateLimitLayer>) -> Result<kube::Client, kube::Error> {
    let default_ns = config.default_namespace.clone();
    let mut connector = hyper_timeout::TimeoutConnector::new(config.rustls_https_connector()?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: Http<_, Body> = Http::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE)
        .pool_max_idle_per_host(MAX_IDLE)
        .pool_timer(TokioTimer::new())
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    let builder = ClientBuilder::new(service, default_ns);
    Ok(match rate {
        Some(r) => builder.with_layer(&r).build(),
        None => builder.build(),
    })
}
