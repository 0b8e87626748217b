//! The instance manager's HTTP API seen from the caller (the operator, the tests).
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use super::state::InstanceState;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("instance API {addr}: {message}")]
    Transport { addr: SocketAddr, message: String },
    #[error("instance API {addr} answered {status}: {message}")]
    Status {
        addr: SocketAddr,
        status: u16,
        message: String,
    },
}

impl ClientError {
    /// The HTTP status, when the instance answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            ClientError::Transport { .. } => None,
        }
    }
}

/// A client for one instance.
#[derive(Clone)]
pub struct InstanceClient {
    http: Client<HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
    token: Option<String>,
}

impl std::fmt::Debug for InstanceClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InstanceClient({})", self.addr)
    }
}

/// Reads answer at once; a demotion may copy a whole database.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const CHANGE_TIMEOUT: Duration = Duration::from_secs(1800);

impl InstanceClient {
    /// `token`: the API token, needed for requests that change the instance.
    pub fn new(addr: SocketAddr, token: Option<String>) -> InstanceClient {
        InstanceClient {
            http: Client::builder(TokioExecutor::new()).build_http(),
            addr,
            token,
        }
    }

    pub async fn state(&self) -> Result<InstanceState, ClientError> {
        let body = self.send("GET", "/state", None, READ_TIMEOUT).await?;
        serde_json::from_slice(&body).map_err(|e| self.transport(format!("bad state: {e}")))
    }

    pub async fn promote(&self) -> Result<(), ClientError> {
        self.change("/promote", None).await
    }

    /// Become a replica of the primary at `host:port`.
    pub async fn demote(&self, primary: &str) -> Result<(), ClientError> {
        let body = serde_json::json!({ "primary": primary }).to_string();
        self.change("/demote", Some(body)).await
    }

    pub async fn fence(&self) -> Result<(), ClientError> {
        self.change("/fence", None).await
    }

    /// Starts a base backup of this primary into its store.
    pub async fn backup(&self) -> Result<(), ClientError> {
        self.change("/backup", None).await
    }

    pub async fn unfence(&self) -> Result<(), ClientError> {
        self.change("/unfence", None).await
    }

    async fn change(&self, path: &str, body: Option<String>) -> Result<(), ClientError> {
        self.send("POST", path, body, CHANGE_TIMEOUT)
            .await
            .map(|_| ())
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.addr));
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| self.transport(e.to_string()))?;
        let resp = tokio::time::timeout(timeout, self.http.request(req))
            .await
            .map_err(|_| self.transport("timed out".into()))?
            .map_err(|e| self.transport(e.to_string()))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| self.transport(e.to_string()))?
            .to_bytes();
        if !(200..300).contains(&status) {
            let message = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            return Err(ClientError::Status {
                addr: self.addr,
                status,
                message,
            });
        }
        Ok(bytes)
    }

    fn transport(&self, message: String) -> ClientError {
        ClientError::Transport {
            addr: self.addr,
            message,
        }
    }
}
