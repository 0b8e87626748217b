//! Probes executed for real, as the kubelet does: `exec` runs the command inside the
//! container (exit 0 passes), `httpGet` sends a GET to the pod IP (a status from 200 to 399
//! passes), `tcpSocket` opens a connection. Each attempt is bounded by `timeoutSeconds`.
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use std::sync::Arc;

use tokio::sync::mpsc;

use super::sandbox::{kill_group, Proc, Sandbox};

/// The kubelet's defaults for a probe's timing.
pub struct Timing {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

pub fn timing(p: &Probe) -> Timing {
    let secs = |v: Option<i32>, d: i32| Duration::from_secs(v.unwrap_or(d).max(0) as u64);
    Timing {
        initial_delay: secs(p.initial_delay_seconds, 0),
        period: secs(p.period_seconds, 10).max(Duration::from_millis(100)),
        timeout: secs(p.timeout_seconds, 1).max(Duration::from_millis(100)),
        success_threshold: p.success_threshold.unwrap_or(1).max(1) as u32,
        failure_threshold: p.failure_threshold.unwrap_or(3).max(1) as u32,
    }
}

/// Where a probe runs: the container's sandbox and environment, and the pod IP.
pub struct Target<'a> {
    pub sandbox: &'a Sandbox,
    pub env: &'a [(String, String)],
    pub pod_ip: &'a str,
    pub container: &'a Container,
}

/// One attempt: Ok, or why it failed (an Event's message).
pub async fn run(p: &Probe, t: &Target<'_>, timeout: Duration) -> Result<(), String> {
    let attempt = async {
        if let Some(e) = &p.exec {
            exec(t, e.command.as_deref().unwrap_or_default()).await
        } else if let Some(h) = &p.http_get {
            let host = h.host.clone().unwrap_or_else(|| t.pod_ip.to_string());
            let port = port(&h.port, t.container)?;
            if h.scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"))
            {
                return Err("HTTPS probes are not supported by the process-mode node agent".into());
            }
            let path = h.path.clone().unwrap_or_else(|| "/".into());
            http_get(&host, port, &path).await
        } else if let Some(s) = &p.tcp_socket {
            let host = s.host.clone().unwrap_or_else(|| t.pod_ip.to_string());
            let port = port(&s.port, t.container)?;
            TcpStream::connect((host.as_str(), port))
                .await
                .map(drop)
                .map_err(|e| format!("dial tcp {host}:{port}: {e}"))
        } else {
            Err("probe has no handler the process-mode node agent supports (exec, httpGet, tcpSocket)".into())
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!("probe timed out after {timeout:?}")),
    }
}

fn port(p: &IntOrString, c: &Container) -> Result<u16, String> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("bad port {n}")),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok())
            .ok_or_else(|| format!("container has no port named {name:?}")),
    }
}

async fn exec(t: &Target<'_>, command: &[String]) -> Result<(), String> {
    let cmd = t
        .sandbox
        .command(command, t.env, None)
        .map_err(|e| e.to_string())?;
    let mut proc = Proc::spawn(cmd).map_err(|e| format!("exec {command:?}: {e}"))?;
    // Dropped on timeout: the probe's process group goes with it.
    struct Reap(i32);
    impl Drop for Reap {
        fn drop(&mut self) {
            kill_group(self.0);
        }
    }
    let _reap = Reap(proc.pgid);
    let status = proc.wait().await.map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("command {command:?} exited with {status}"))
    }
}

async fn http_get(host: &str, port: u16, path: &str) -> Result<(), String> {
    let mut s = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("Get \"http://{host}:{port}{path}\": {e}"))?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = s.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {:?}", line.lines().next()))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {code}"))
    }
}

/// Probe outcomes, sent on transitions only.
pub enum ProbeMsg {
    Started,
    Ready(bool, String),
    Dead(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Startup,
    Readiness,
    Liveness,
}

pub async fn probe_loop(
    kind: Kind,
    p: Probe,
    sandbox: Arc<Sandbox>,
    envs: Arc<Vec<(String, String)>>,
    pod_ip: String,
    container: Arc<Container>,
    tx: mpsc::UnboundedSender<ProbeMsg>,
) {
    let t = timing(&p);
    tokio::time::sleep(t.initial_delay).await;
    let target = Target {
        sandbox: &sandbox,
        env: &envs,
        pod_ip: &pod_ip,
        container: &container,
    };
    let (mut ok, mut failed) = (0u32, 0u32);
    let mut state: Option<bool> = None;
    let mut last_why: Option<String> = None;
    loop {
        match run(&p, &target, t.timeout).await {
            Ok(()) => {
                ok += 1;
                failed = 0;
                if ok >= t.success_threshold && state != Some(true) {
                    state = Some(true);
                    last_why = None;
                    match kind {
                        Kind::Startup => {
                            let _ = tx.send(ProbeMsg::Started);
                            return;
                        }
                        Kind::Readiness => {
                            let _ = tx.send(ProbeMsg::Ready(true, String::new()));
                        }
                        // A passing liveness probe changes nothing.
                        Kind::Liveness => {}
                    }
                }
            }
            Err(why) => {
                ok = 0;
                failed += 1;
                // Every new reason is reported (the kubelet reports every failure).
                if failed >= t.failure_threshold
                    && (state != Some(false) || last_why.as_deref() != Some(why.as_str()))
                {
                    state = Some(false);
                    last_why = Some(why.clone());
                    let _ = tx.send(match kind {
                        Kind::Readiness => ProbeMsg::Ready(false, why),
                        Kind::Liveness => ProbeMsg::Dead(format!("Liveness probe failed: {why}")),
                        Kind::Startup => ProbeMsg::Dead(format!("Startup probe failed: {why}")),
                    });
                }
            }
        }
        tokio::time::sleep(t.period).await;
    }
}
