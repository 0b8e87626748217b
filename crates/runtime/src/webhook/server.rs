//! The HTTPS server: TLS with the swappable certificate of [`super::certs`], HTTP/1.1, one
//! task per connection, bounded memory, and every hostile input answered — never a panic:
//!
//! * more than [`DEFAULT_MAX_CONNECTIONS`] connections open → the next closed before any TLS
//!   work (each connection's buffers are capped too, headers included);
//! * more than [`DEFAULT_MAX_IN_FLIGHT`] reviews being read or answered → 503 at once,
//!   before the body is read: no queue grows with an attack, and the API server applies the
//!   hook's failure policy;
//! * a body over the limit → 413, without reading past the limit; bodies buffered by all
//!   reviews together past the byte budget → 503 (so memory is bounded by
//!   in-flight × body limit and by the budget, whichever is less, not by the attacker);
//! * not JSON, or not a review → 400 (an AdmissionReview whose `request.uid` could be read
//!   gets a denial naming the problem instead, which the API server shows to the user);
//! * an object of the wrong shape → a denial (see [`super::handler`]);
//! * a TLS handshake or request headers that do not arrive within 10 s → the connection closed;
//! * a body that does not arrive whole within 10 s (a client trickling a large declared
//!   body to hold a connection and its task) → 408;
//! * a handler that has not answered within [`DEFAULT_REQUEST_TIMEOUT`] → 503. Handlers run
//!   on the blocking pool, holding their slot until they return, so a stuck handler
//!   neither blocks the server's threads nor lets more work in than the cap; one that panics
//!   → 500.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::certs::{CertError, Certificates};
use super::handler::{AdmissionFn, ConversionFn};
use super::review::{
    AdmissionResponse, AdmissionReviewIn, AdmissionReviewOut, ConversionReviewIn,
    ConversionReviewOut,
};
use super::Webhooks;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// What one connection buffers before its body is handed on: request heads are small.
const MAX_CONNECTION_BUFFER: usize = 64 * 1024;
/// The API server sends a review at once (its own webhook timeout is at most 30 s).
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reviews in flight at once. The API server sends one review per admitted write and keeps
/// its webhook calls short; 8 at once with 8 MiB of bodies is what a 128 MiB pod can hold
/// while parsing them.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;
/// The API server's own default `timeoutSeconds` for a webhook: it stops waiting then anyway.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Open connections at once (the API server keeps a few per webhook, reused).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

#[derive(Clone, Debug)]
pub(crate) struct Limits {
    pub(crate) in_flight: usize,
    /// None: twice the body limit.
    pub(crate) buffer_budget: Option<usize>,
    pub(crate) request_timeout: Duration,
    pub(crate) connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            in_flight: DEFAULT_MAX_IN_FLIGHT,
            buffer_budget: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("serving certificate: {0}")]
    Cert(#[from] CertError),
    #[error("writing the webhook configurations: {0}")]
    Register(kube::Error),
    #[error(transparent)]
    Settings(#[from] super::settings::SettingsError),
    #[error(transparent)]
    SharedCa(#[from] super::shared::SharedCaError),
}

fn json<T: serde::Serialize>(body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => ([(CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn refuse(code: StatusCode, message: String) -> Response {
    (code, message).into_response()
}

/// What a running router shares between its requests.
pub(crate) struct Served {
    hooks: Webhooks,
    in_flight: Arc<Semaphore>,
    /// One permit per buffered body byte.
    budget: Arc<Semaphore>,
    budget_bytes: usize,
}

impl Served {
    fn new(hooks: Webhooks) -> Served {
        let budget_bytes = hooks
            .limits
            .buffer_budget
            .unwrap_or(hooks.max_body.saturating_mul(2))
            // One review at the body limit always fits.
            .max(hooks.max_body)
            .min(Semaphore::MAX_PERMITS);
        Served {
            in_flight: Arc::new(Semaphore::new(hooks.limits.in_flight)),
            budget: Arc::new(Semaphore::new(budget_bytes)),
            budget_bytes,
            hooks,
        }
    }
}

fn busy(message: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, "1")],
        message,
    )
        .into_response()
}

/// The body, at most `max` bytes, each byte charged to the shared budget while the review is
/// answered (the permits returned).
async fn read_limited(
    body: Body,
    max: usize,
    served: &Served,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Response> {
    let read = async {
        let mut body = Limited::new(body, max);
        let mut buf = Vec::new();
        let mut charged: Option<OwnedSemaphorePermit> = None;
        while let Some(frame) = body.frame().await {
            let frame = match frame {
                Ok(f) => f,
                Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                    return Err(refuse(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("the review is larger than {max} bytes"),
                    ))
                }
                Err(e) => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        format!("the body could not be read: {e}"),
                    ))
                }
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let n = u32::try_from(data.len()).unwrap_or(u32::MAX);
            match served.budget.clone().try_acquire_many_owned(n) {
                Ok(p) => match charged.as_mut() {
                    Some(c) => c.merge(p),
                    None => charged = Some(p),
                },
                Err(_) => {
                    return Err(busy(format!(
                        "the reviews being answered hold {} bytes, the most this webhook \
                         buffers at once; retry",
                        served.budget_bytes
                    )))
                }
            }
            buf.extend_from_slice(&data);
        }
        Ok((Bytes::from(buf), charged))
    };
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(r) => r,
        Err(_) => Err(refuse(
            StatusCode::REQUEST_TIMEOUT,
            format!("the review did not arrive within {BODY_TIMEOUT:?}"),
        )),
    }
}

/// The `request.uid` of a body that is JSON but not a valid review, to answer it in kind.
fn uid_of(bytes: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    v.get("request")?.get("uid")?.as_str().map(str::to_string)
}

pub(crate) async fn handle(State(served): State<Arc<Served>>, req: Request) -> Response {
    let hooks = &served.hooks;
    let path = req.uri().path().to_string();
    let is_served = hooks.admission.contains_key(&path) || hooks.conversion.contains_key(&path);
    // Only paths served are measured: label values chosen by any client would be unbounded.
    let timer = hooks
        .metrics
        .as_ref()
        .filter(|_| is_served)
        .map(|m| m.webhook_request(&path));
    let response = answer(&served, path, req).await;
    if let Some(t) = timer {
        t.done(response.status().as_u16());
    }
    response
}

async fn answer(served: &Served, path: String, req: Request) -> Response {
    let hooks = &served.hooks;
    if req.method() != Method::POST {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "POST a review".into());
    }
    let (admission, conversion) = (
        hooks.admission.get(&path).cloned(),
        hooks.conversion.get(&path).cloned(),
    );
    if admission.is_none() && conversion.is_none() {
        return refuse(StatusCode::NOT_FOUND, format!("no webhook at {path}"));
    }
    let Ok(slot) = served.in_flight.clone().try_acquire_owned() else {
        return busy(format!(
            "{} reviews in flight, the most this webhook answers at once; retry",
            hooks.limits.in_flight
        ));
    };
    let (bytes, charged) = match read_limited(req.into_body(), hooks.max_body, served).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let work = tokio::task::spawn_blocking(move || {
        // Held until the handler returns, even after its review was answered for it.
        let _held = (slot, charged);
        decide(admission, conversion, &bytes)
    });
    let limit = hooks.limits.request_timeout;
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            if e.is_panic() {
                crate::metrics::webhook_panicked();
            }
            tracing::error!(%path, error = %e, "webhook handler failed");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the webhook failed while answering".into(),
            )
        }
        Err(_) => {
            tracing::warn!(%path, ?limit, "webhook handler did not answer in time");
            busy(format!("the webhook did not answer within {limit:?}"))
        }
    }
}

fn decide(
    admission: Option<AdmissionFn>,
    conversion: Option<ConversionFn>,
    bytes: &[u8],
) -> Response {
    if let Some(f) = admission {
        let review: AdmissionReviewIn = match serde_json::from_slice(bytes) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("the AdmissionReview could not be read: {e}");
                return match uid_of(bytes) {
                    Some(uid) => json(&AdmissionReviewOut::from(AdmissionResponse::deny(
                        &uid, 400, message,
                    ))),
                    None => refuse(StatusCode::BAD_REQUEST, message),
                };
            }
        };
        let Some(request) = review.request else {
            return refuse(StatusCode::BAD_REQUEST, "the review has no request".into());
        };
        if review.api_version != super::review::ADMISSION_API_VERSION {
            tracing::debug!(api_version = %review.api_version, "admission review version");
        }
        return json(&AdmissionReviewOut::from(f(request)));
    }
    let Some(f) = conversion else {
        return refuse(StatusCode::NOT_FOUND, "no webhook here".into());
    };
    match serde_json::from_slice::<ConversionReviewIn>(bytes) {
        Ok(ConversionReviewIn {
            request: Some(request),
        }) => json(&ConversionReviewOut::from(f(request))),
        Ok(_) => refuse(StatusCode::BAD_REQUEST, "the review has no request".into()),
        Err(e) => refuse(
            StatusCode::BAD_REQUEST,
            format!("the ConversionReview could not be read: {e}"),
        ),
    }
}

/// A running webhook server. It stops when the token given to [`serve`] is cancelled.
pub struct Serving {
    pub local_addr: SocketAddr,
    pub certificates: Arc<Certificates>,
    task: tokio::task::JoinHandle<()>,
}

impl Serving {
    /// Waits until the server has stopped (after its token was cancelled).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}

/// Listens on `addr` (port 0: a free port, see [`Serving::local_addr`]) and serves `hooks`
/// over HTTPS with `certificates`, rotating them on schedule, until `shutdown`.
pub async fn serve(
    hooks: Webhooks,
    addr: SocketAddr,
    certificates: Arc<Certificates>,
    shutdown: CancellationToken,
) -> Result<Serving, WebhookError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| WebhookError::Bind { addr, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| WebhookError::Bind { addr, source })?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(certificates.server_config()?));
    let connections = Arc::new(Semaphore::new(hooks.limits.connections));
    let router = hooks.router();
    tokio::spawn(rotate(certificates.clone(), shutdown.clone()));
    let task = tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook accept");
                        continue;
                    }
                },
            };
            // Refused before the handshake, the cheapest point: a TLS session costs memory.
            let Ok(slot) = connections.clone().try_acquire_owned() else {
                tracing::debug!(%peer, "webhook connection closed: too many open");
                drop(tcp);
                continue;
            };
            let (acceptor, router, shutdown) = (acceptor.clone(), router.clone(), shutdown.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HANDSHAKE_TIMEOUT)
                    .max_buf_size(MAX_CONNECTION_BUFFER)
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(router));
                tokio::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => if let Err(e) = r {
                        tracing::debug!(%peer, error = %e, "webhook connection");
                    },
                    _ = shutdown.cancelled() => {
                        // Idle keep-alive connections close now; a request in flight finishes.
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
            });
        }
    });
    Ok(Serving {
        local_addr,
        certificates,
        task,
    })
}

/// Renews the certificate every [`Certificates::rotate_every`] until `shutdown`.
pub(crate) async fn rotate(certificates: Arc<Certificates>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(certificates.rotate_every()) => {}
        }
        match certificates.rotate() {
            Ok(true) => tracing::info!("webhook serving certificate renewed"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "webhook certificate not renewed; the current one is still served")
            }
        }
    }
}

/// The routes of `hooks`, with their own limits (each router counts its own requests).
pub(crate) fn router(hooks: Webhooks) -> Router {
    Router::new()
        .fallback(handle)
        .with_state(Arc::new(Served::new(hooks)))
}
