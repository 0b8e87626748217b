//! The manager's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process
//! runs) and `/readyz` (every controller's cache has synced, or this replica is a standby
//! waiting for the lease — a standby that never became ready would stall rollouts; it says
//! whether its caches have synced).
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::auth::{Decision, MetricsAuth};
use crate::metrics::Metrics;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Starting,
    Standby,
    Leading,
}

/// Readiness as the probes see it.
#[derive(Clone)]
pub struct Health {
    inner: Arc<Mutex<HealthState>>,
}

struct HealthState {
    role: Role,
    synced: BTreeMap<String, bool>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            inner: Arc::new(Mutex::new(HealthState {
                role: Role::Starting,
                synced: BTreeMap::new(),
            })),
        }
    }
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn set_role(&self, role: Role) {
        self.lock().role = role;
    }
    pub fn register(&self, controller: &str) {
        self.lock().synced.insert(controller.to_string(), false);
    }
    pub fn mark_synced(&self, controller: &str) {
        self.lock().synced.insert(controller.to_string(), true);
    }
    /// Ok with a reason, or Err naming what is not ready.
    pub fn readiness(&self) -> Result<String, String> {
        let s = self.lock();
        match s.role {
            Role::Starting => Err("starting".into()),
            // Ready either way: a standby that is never ready would stall a rollout; what
            // its caches do is said for whoever looks (and for the warm-standby tests).
            Role::Standby if s.synced.values().all(|ok| *ok) => {
                Ok("standby: caches synced, waiting for the leader lease".into())
            }
            Role::Standby => Ok("standby: waiting for the leader lease, caches syncing".into()),
            Role::Leading => {
                let waiting: Vec<&str> = s
                    .synced
                    .iter()
                    .filter(|(_, ok)| !**ok)
                    .map(|(n, _)| n.as_str())
                    .collect();
                if waiting.is_empty() {
                    Ok("caches synced".into())
                } else {
                    Err(format!("caches not synced: {}", waiting.join(", ")))
                }
            }
        }
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    health: Health,
    auth: Option<MetricsAuth>,
}

async fn metrics(State(s): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(auth) = &s.auth {
        let header = headers.get("authorization").and_then(|v| v.to_str().ok());
        let text = [("content-type", "text/plain")];
        match auth.check(header, "/metrics").await {
            Decision::Allowed => {}
            Decision::Unauthenticated => {
                return (StatusCode::UNAUTHORIZED, text, "Unauthorized\n").into_response()
            }
            Decision::Forbidden => {
                return (StatusCode::FORBIDDEN, text, "Forbidden\n").into_response()
            }
            Decision::Unavailable => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("content-type", "text/plain"), ("retry-after", "1")],
                    "Authentication unavailable, retry later\n",
                )
                    .into_response()
            }
        }
    }
    (
        StatusCode::OK,
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<AppState>) -> (StatusCode, String) {
    match s.health.readiness() {
        Ok(m) => (StatusCode::OK, m),
        Err(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
    }
}

/// Binds the listeners now (so a bad address fails at start-up) and returns the servers to
/// spawn. When both addresses are equal, one server serves all three paths.
pub async fn bind(
    metrics_addr: Option<SocketAddr>,
    probe_addr: Option<SocketAddr>,
    m: Metrics,
    health: Health,
    auth: Option<MetricsAuth>,
) -> std::io::Result<(
    Vec<SocketAddr>,
    Vec<futures::future::BoxFuture<'static, std::io::Result<()>>>,
)> {
    let state = AppState {
        metrics: m,
        health,
        auth,
    };
    let probes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    let metric = Router::new().route("/metrics", get(metrics));
    let mut plan: Vec<(SocketAddr, Router<AppState>)> = Vec::new();
    match (metrics_addr, probe_addr) {
        (Some(a), Some(b)) if a == b => plan.push((a, probes.merge(metric))),
        (a, b) => {
            if let Some(a) = a {
                plan.push((a, metric));
            }
            if let Some(b) = b {
                plan.push((b, probes));
            }
        }
    }
    let mut addrs = Vec::new();
    let mut servers: Vec<futures::future::BoxFuture<'static, std::io::Result<()>>> = Vec::new();
    for (addr, router) in plan {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        addrs.push(listener.local_addr()?);
        let app = router.with_state(state.clone());
        servers.push(Box::pin(async move { axum::serve(listener, app).await }));
    }
    Ok((addrs, servers))
}
