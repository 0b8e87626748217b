//! The HTTPS server: TLS with the swappable certificate of [`super::certs`], HTTP/1.1, one
//! task per connection, a bounded body, and every hostile input answered — never a panic:
//!
//! * a body over the limit → 413, without reading past the limit;
//! * not JSON, or not a review → 400 (an AdmissionReview whose `request.uid` could be read
//!   gets a denial naming the problem instead, which the API server shows to the user);
//! * an object of the wrong shape → a denial (see [`super::handler`]);
//! * a TLS handshake or request headers that do not arrive within 10 s → the connection closed;
//! * a body that does not arrive whole within 10 s (a client trickling a large declared
//!   body to hold a connection and its task) → 408.
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
use tokio_util::sync::CancellationToken;

use super::certs::{CertError, Certificates};
use super::review::{
    AdmissionResponse, AdmissionReviewIn, AdmissionReviewOut, ConversionReviewIn,
    ConversionReviewOut,
};
use super::Webhooks;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The API server sends a review at once (its own webhook timeout is at most 30 s).
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

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

async fn read_limited(body: Body, max: usize) -> Result<Bytes, Response> {
    let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, max).collect());
    match read.await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the review is larger than {max} bytes"),
        )),
        Ok(Err(e)) => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("the body could not be read: {e}"),
        )),
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

pub(crate) async fn handle(State(hooks): State<Arc<Webhooks>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let served = hooks.admission.contains_key(&path) || hooks.conversion.contains_key(&path);
    // Only paths served are measured: label values chosen by any client would be unbounded.
    let timer = hooks
        .metrics
        .as_ref()
        .filter(|_| served)
        .map(|m| m.webhook_request(&path));
    let response = answer(&hooks, path, req).await;
    if let Some(t) = timer {
        t.done(response.status().as_u16());
    }
    response
}

async fn answer(hooks: &Webhooks, path: String, req: Request) -> Response {
    if req.method() != Method::POST {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "POST a review".into());
    }
    let (admission, conversion) = (hooks.admission.get(&path), hooks.conversion.get(&path));
    if admission.is_none() && conversion.is_none() {
        return refuse(StatusCode::NOT_FOUND, format!("no webhook at {path}"));
    }
    let bytes = match read_limited(req.into_body(), hooks.max_body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    if let Some(f) = admission {
        let review: AdmissionReviewIn = match serde_json::from_slice(&bytes) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("the AdmissionReview could not be read: {e}");
                return match uid_of(&bytes) {
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
        return refuse(StatusCode::NOT_FOUND, format!("no webhook at {path}"));
    };
    match serde_json::from_slice::<ConversionReviewIn>(&bytes) {
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
            let (acceptor, router, shutdown) = (acceptor.clone(), router.clone(), shutdown.clone());
            tokio::spawn(async move {
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

pub(crate) fn router(hooks: Arc<Webhooks>) -> Router {
    Router::new().fallback(handle).with_state(hooks)
}
