//! One `bosun run` process of the chaos suite: started with an identity (its kubeconfig and
//! POD_NAME), watched, killed with -9 or stopped with SIGTERM — by `bosun verify`'s operator
//! process, the same kill and stop as its scenarios.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bosun_verify::operator::Process;

use super::cluster::Env;

pub struct Bosun {
    process: Process,
    pub pid: u32,
    pub identity: String,
    pub metrics: u16,
    pub probe: u16,
}

/// What a bosun of the suite runs with, besides its identity.
#[derive(Clone, Default)]
pub struct Flags {
    /// Elect a leader on this Lease (in the watched namespace).
    pub lease: Option<String>,
    pub metrics_secure: bool,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn log_path(dir: &Path, identity: &str) -> PathBuf {
    dir.join(format!("bosun-{identity}.log"))
}

impl Bosun {
    /// Starts `bosun run` for the namespace `ns` acting as `identity`.
    pub async fn start(
        env: &Env,
        identity: &str,
        ns: &str,
        flags: &Flags,
    ) -> anyhow::Result<Bosun> {
        let kubeconfig = env.kubeconfig_as(identity)?;
        let (metrics, probe) = (free_port()?, free_port()?);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path(env.cp.dir(), identity))?;
        let mut cmd = tokio::process::Command::new(&env.args.bosun);
        cmd.arg("run")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespaces={ns}"))
            .arg(format!("--metrics-addr=127.0.0.1:{metrics}"))
            .arg(format!("--probe-addr=127.0.0.1:{probe}"))
            .env("POD_NAME", identity)
            .env(
                "RUST_LOG",
                std::env::var("BOSUN_CHAOS_LOG")
                    .unwrap_or_else(|_| "warn,bosun_runtime=info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        if let Some(lease) = &flags.lease {
            cmd.args([
                "--leader-elect",
                "--lease-name",
                lease,
                "--lease-namespace",
                ns,
            ]);
        }
        if flags.metrics_secure {
            cmd.arg("--metrics-secure");
        }
        let process = Process::spawn(cmd)?;
        Ok(Bosun {
            pid: process.pid(),
            process,
            identity: identity.to_string(),
            metrics,
            probe,
        })
    }

    /// `kill -9`: no shutdown, no lease release, requests cut mid-flight.
    pub async fn kill9(self) {
        self.process.kill9().await;
    }

    /// SIGTERM, and the wait for a graceful stop (in-flight reconciles drain, the lease is
    /// released).
    pub async fn stop(self) -> anyhow::Result<()> {
        match self.process.stop(Duration::from_secs(45)).await {
            Some(status) => {
                anyhow::ensure!(
                    status.success(),
                    "bosun {} exited with {status}",
                    self.identity
                );
                Ok(())
            }
            None => anyhow::bail!(
                "bosun {} did not stop within 45 s of SIGTERM",
                self.identity
            ),
        }
    }

    /// Still running (never exited since it was started)?
    pub fn alive(&mut self) -> bool {
        self.process.exited().is_none()
    }

    /// Peak RSS (VmHWM), MB.
    pub fn peak_rss_mb(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<f64>().ok())
            })
            .unwrap_or(0.0)
            / 1024.0
    }

    async fn get(&self, port: u16, path: &str) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        Some(buf)
    }

    /// A metric's value summed over its series (`--metrics-secure` off only).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let body = self.get(self.metrics, "/metrics").await?;
        Some(
            body.lines()
                .filter(|l| l.starts_with(series))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// Waits until the reconcile count has been still for `quiet` with nothing in flight.
    pub async fn wait_idle(&self, quiet: Duration, limit: Duration) -> anyhow::Result<()> {
        let t0 = tokio::time::Instant::now();
        let mut last = -1.0;
        let mut since = tokio::time::Instant::now();
        loop {
            let n = self
                .metric("controller_runtime_reconcile_total{")
                .await
                .unwrap_or(-1.0);
            let active = self
                .metric("controller_runtime_active_workers{")
                .await
                .unwrap_or(1.0);
            if n != last || active > 0.0 || n <= 0.0 {
                last = n;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= quiet {
                return Ok(());
            }
            anyhow::ensure!(t0.elapsed() < limit, "bosun {} never idle", self.identity);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits for `/readyz` 200 (caches synced, or a standby waiting).
    pub async fn wait_ready(&self, limit: Duration) -> anyhow::Result<()> {
        let t0 = tokio::time::Instant::now();
        loop {
            if let Some(r) = self.get(self.probe, "/readyz").await {
                if r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200") {
                    return Ok(());
                }
            }
            anyhow::ensure!(t0.elapsed() < limit, "bosun {} never ready", self.identity);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
