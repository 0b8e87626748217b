//! The instance's HTTP API, bound to the pod IP only.
//!
//! - `GET /healthz`: the manager is up. `GET /readyz`: 200 when ready (primary accepting
//!   writes, replica streaming), else 503 — for the pod's probes.
//! - `GET /state`: the [`InstanceState`] as JSON (no secret in it).
//! - `POST /promote`, `POST /demote` (`{"primary": "host:port"}`, and `"reclone": true` for
//!   a fresh clone whatever the data), `POST /fence`,
//!   `POST /unfence`: only with `Authorization: Bearer <token>` — 401 without a bearer
//!   credential, 403 with a wrong one. Answers 200 when done, 409 when refused in the
//!   current state, 400 for a bad body, 500 when the request failed.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::{host_port, Config, Role};
use super::error::Error;
use super::manager::{Command, Phase, Request, Shared};
use super::sql;
use super::state::{InstanceState, StateRole};

pub struct Ctx {
    name: String,
    addr: SocketAddr,
    run_dir: PathBuf,
    port: u16,
    shared: Arc<Mutex<Shared>>,
    tx: mpsc::Sender<Request>,
    /// The token's digest: compared in constant time, and the token itself is not kept here.
    token: [u8; 32],
    backups: Option<Arc<super::backup::Backups>>,
}

impl Ctx {
    pub(crate) fn new(
        cfg: &Config,
        run_dir: PathBuf,
        shared: Arc<Mutex<Shared>>,
        tx: mpsc::Sender<Request>,
        backups: Option<Arc<super::backup::Backups>>,
    ) -> Ctx {
        Ctx {
            name: cfg.name.clone(),
            addr: SocketAddr::new(cfg.pod_ip, cfg.http_port),
            run_dir,
            port: cfg.port,
            shared,
            tx,
            token: Sha256::digest(cfg.credentials.api_token.as_bytes()).into(),
            backups,
        }
    }
}

/// Binds the API (an error if the address is taken) and serves it until `stop`.
pub(crate) async fn serve(ctx: Ctx, stop: CancellationToken) -> Result<JoinHandle<()>, Error> {
    let addr = ctx.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Http {
            addr: addr.to_string(),
            source,
        })?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/state", get(state))
        .route("/promote", post(promote))
        .route("/demote", post(demote))
        .route("/fence", post(fence))
        .route("/unfence", post(unfence))
        .route("/backup", post(backup))
        .with_state(Arc::new(ctx));
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    }))
}

/// `POST /backup`: starts a base backup of this primary into the store (202), unless one
/// runs (409); 409 too when this instance is not a running primary or has no store.
async fn backup(State(ctx): State<Arc<Ctx>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&ctx, &headers) {
        return r;
    }
    let Some(b) = &ctx.backups else {
        return error(StatusCode::CONFLICT, "this instance has no backup store");
    };
    let primary = {
        let s = ctx.shared.lock().unwrap_or_else(|p| p.into_inner());
        s.phase == Phase::Running && s.role == Role::Primary
    };
    if !primary {
        return error(
            StatusCode::CONFLICT,
            "base backups are taken on the running primary only",
        );
    }
    if b.start() {
        json(StatusCode::ACCEPTED, &serde_json::json!({"started": true}))
    } else {
        error(StatusCode::CONFLICT, "a base backup is already running")
    }
}

async fn readyz(State(ctx): State<Arc<Ctx>>) -> StatusCode {
    if current(&ctx, false).await.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// Anyone may read the state; a poll with the API token is the operator's, and counts as
/// contact for the primary's isolation check.
async fn state(State(ctx): State<Arc<Ctx>>, headers: HeaderMap) -> Response {
    if headers.contains_key(header::AUTHORIZATION) && authorize(&ctx, &headers).is_ok() {
        let mut s = ctx.shared.lock().unwrap_or_else(|p| p.into_inner());
        s.operator_contact = Some(std::time::Instant::now());
    }
    json(StatusCode::OK, &current(&ctx, true).await)
}

/// The shared state, completed by asking PostgreSQL when it runs.
async fn current(ctx: &Ctx, with_backups: bool) -> InstanceState {
    let s = ctx.shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut st = InstanceState {
        name: ctx.name.clone(),
        role: match s.phase {
            Phase::Starting => StateRole::Starting,
            Phase::Fenced => StateRole::Fenced,
            Phase::Stopped => StateRole::Stopped,
            Phase::Running => match s.role {
                Role::Primary => StateRole::Primary,
                Role::Replica => StateRole::Replica,
            },
        },
        ready: false,
        timeline: None,
        lsn: None,
        received_lsn: None,
        primary: s.primary.clone(),
        last_rejoin: s.last_rejoin,
        rewind_failure: s.rewind_failure.clone(),
        error: s.error.clone(),
        restore_failure: s.restore_failure.clone(),
        diverged: None,
        synchronous: None,
        isolation_armed: s.isolation_armed,
        stopped_cleanly: s.stopped_cleanly,
        cannot_catch_up: s.cannot_catch_up.clone(),
        archive_read_failure: s.archive_read_failure.clone(),
        backup: None,
        parameters: None,
    };
    if s.phase != Phase::Running {
        if let (true, Some(b)) = (with_backups, &ctx.backups) {
            st.backup = Some(b.state(None).await);
        }
        return st;
    }
    let observed = tokio::time::timeout(Duration::from_secs(5), async {
        let client = sql::connect_local(&ctx.run_dir, ctx.port).await?;
        let o = sql::observe(&client).await?;
        let backup = match (with_backups, &ctx.backups) {
            (true, Some(b)) => Some(b.state((!o.in_recovery).then_some(&client)).await),
            _ => None,
        };
        Ok::<_, Error>((o, backup))
    })
    .await;
    if let Ok(Ok((o, backup))) = observed {
        st.backup = backup;
        st.role = if o.in_recovery {
            StateRole::Replica
        } else {
            StateRole::Primary
        };
        // A diverged replica's receiver is refused at every attempt, yet PostgreSQL 15
        // shows each attempt as `streaming`: never ready.
        // One that cannot catch up shows `streaming` for a moment at each refused attempt.
        st.ready =
            !o.in_recovery || (o.streaming && o.diverged.is_none() && s.cannot_catch_up.is_none());
        st.diverged = o.diverged;
        st.synchronous = o.synchronous;
        st.parameters = o.parameters;
        st.timeline = o.timeline;
        st.lsn = o.lsn;
        st.received_lsn = o.received_lsn;
    } else if let (true, Some(b)) = (with_backups, &ctx.backups) {
        // PostgreSQL did not answer: the store's side still reports (never "no store").
        st.backup = Some(b.state(None).await);
    }
    st
}

async fn promote(State(ctx): State<Arc<Ctx>>, headers: HeaderMap) -> Response {
    mutate(&ctx, &headers, || Ok(Command::Promote)).await
}

async fn fence(State(ctx): State<Arc<Ctx>>, headers: HeaderMap) -> Response {
    mutate(&ctx, &headers, || Ok(Command::Fence)).await
}

async fn unfence(State(ctx): State<Arc<Ctx>>, headers: HeaderMap) -> Response {
    mutate(&ctx, &headers, || Ok(Command::Unfence)).await
}

#[derive(serde::Deserialize)]
struct DemoteBody {
    primary: String,
    /// A fresh clone whatever the data (a replica that can no longer catch up).
    #[serde(default)]
    reclone: bool,
}

async fn demote(State(ctx): State<Arc<Ctx>>, headers: HeaderMap, body: Bytes) -> Response {
    mutate(&ctx, &headers, || {
        let b: DemoteBody = serde_json::from_slice(&body)
            .map_err(|e| format!("the body must be {{\"primary\": \"host:port\"}}: {e}"))?;
        host_port(&b.primary).map_err(|e| e.to_string())?;
        Ok(Command::Demote {
            primary: b.primary,
            reclone: b.reclone,
        })
    })
    .await
}

/// Authorises, parses, hands the request to the manager and answers with its outcome.
async fn mutate(
    ctx: &Ctx,
    headers: &HeaderMap,
    parse: impl FnOnce() -> Result<Command, String>,
) -> Response {
    if let Err(r) = authorize(ctx, headers) {
        return r;
    }
    let command = match parse() {
        Ok(c) => c,
        Err(msg) => return error(StatusCode::BAD_REQUEST, &msg),
    };
    let (reply, rx) = oneshot::channel();
    if ctx.tx.send(Request { command, reply }).await.is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the manager is stopping");
    }
    match rx.await {
        Ok(Ok(())) => json(StatusCode::OK, &serde_json::json!({"ok": true})),
        Ok(Err(Error::Refused(msg))) => error(StatusCode::CONFLICT, &msg),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the manager is stopping"),
    }
}

/// 401 without a bearer credential, 403 with a wrong one.
#[allow(clippy::result_large_err)] // a Response, returned once per refused request
fn authorize(ctx: &Ctx, headers: &HeaderMap) -> Result<(), Response> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(given) = given else {
        let mut r = error(StatusCode::UNAUTHORIZED, "a bearer token is required");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return Err(r);
    };
    let digest: [u8; 32] = Sha256::digest(given.as_bytes()).into();
    // Constant time: every byte is compared whatever the first difference.
    let diff = digest
        .iter()
        .zip(ctx.token.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if diff != 0 {
        return Err(error(
            StatusCode::FORBIDDEN,
            "the bearer token is not valid",
        ));
    }
    Ok(())
}

fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    json(status, &serde_json::json!({ "error": message }))
}
