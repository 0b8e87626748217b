//! What the PostgresCluster benchmarks and chaos scenario share: a fresh control plane, the
//! process-mode node agent (every instance a real PostgreSQL process on its own loopback pod
//! IP), `bosun run --operators postgres` (the binary under test, as a child process whose RSS
//! is read), and clients on the pod IPs: the primary found from the status, a write tried
//! there, the role each instance reports on its instance API.
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bosun_postgres::api::{Phase, PostgresCluster, PostgresClusterStatus};
use bosun_postgres::controller::build::{secret_name, KEY_SUPERUSER};
use bosun_postgres::instance::client::InstanceClient;
use bosun_postgres::instance::StateRole;
use bosun_testenv::{ControlPlane, ImageMap, NodeAgent, Options, ProcessConfig};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::json;

use crate::measure::{install_crd, Operator};

/// The instance manager's HTTP port (the operator's and the probes').
const INSTANCE_PORT: u16 = 8000;

pub struct PgEnv {
    pub cp: ControlPlane,
    pub admin: Client,
    pub ns: String,
    pub agent: NodeAgent,
    pub op: Operator,
    pub clusters: Api<PostgresCluster>,
    pub pods: Api<Pod>,
}

impl PgEnv {
    /// A control plane of its own, the CRD, namespace `ns`, the process-mode agent for it, and
    /// `bosun run --operators postgres` (the pods' instance manager is the same binary).
    pub async fn start(bosun: &Path, ns: &str) -> anyhow::Result<PgEnv> {
        Self::start_in(bosun, ns, None).await
    }

    /// As [`PgEnv::start`], the pods' directories (logs, claims) under `root`, kept after
    /// the run (None: a temporary directory removed with the agent).
    pub async fn start_in(
        bosun: &Path,
        ns: &str,
        root: Option<std::path::PathBuf>,
    ) -> anyhow::Result<PgEnv> {
        let cp = ControlPlane::start(Options::default()).await?;
        let admin = cp.client().await?;
        install_crd(&admin, &PostgresCluster::crd()).await?;
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        let agent = NodeAgent::process_mode(
            admin.clone(),
            ProcessConfig {
                namespace: Some(ns.to_string()),
                images: ImageMap::standard(Some(bosun.to_path_buf())),
                restart_backoff: Duration::from_millis(200),
                root,
                ..Default::default()
            },
        )
        .context("the process-mode node agent (root and scripts/setup-postgres.sh needed)")?;
        let op = Operator::bosun(bosun, cp.kubeconfig(), "postgres", 16).await?;
        Ok(PgEnv {
            clusters: Api::namespaced(admin.clone(), ns),
            pods: Api::namespaced(admin.clone(), ns),
            ns: ns.to_string(),
            cp,
            admin,
            agent,
            op,
        })
    }

    pub async fn create(&self, name: &str, size: i32, synchronous: i32) -> anyhow::Result<()> {
        let pc: PostgresCluster = serde_json::from_value(json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": name},
            "spec": {"size": size, "replication": {"synchronous": synchronous}},
        }))?;
        self.clusters.create(&PostParams::default(), &pc).await?;
        Ok(())
    }

    pub async fn patch(&self, name: &str, spec: serde_json::Value) -> anyhow::Result<()> {
        self.clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await?;
        Ok(())
    }

    pub async fn status(&self, name: &str) -> Option<PostgresClusterStatus> {
        self.clusters.get(name).await.ok()?.status
    }

    /// Waits (polling every 100 ms, up to `limit`) for Healthy with `size` ready instances and
    /// exactly one primary.
    pub async fn healthy(
        &self,
        name: &str,
        size: i32,
        limit: Duration,
    ) -> anyhow::Result<PostgresClusterStatus> {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.status(name).await {
                let primaries = s.instances.iter().filter(|i| i.role == "primary").count();
                if s.phase == Some(Phase::Healthy)
                    && s.ready_instances == size
                    && s.size == size
                    && primaries == 1
                {
                    return Ok(s);
                }
                anyhow::ensure!(
                    t0.elapsed() < limit,
                    "{name} not healthy with {size} instances within {limit:?}: {s:?}"
                );
            }
            anyhow::ensure!(t0.elapsed() < limit, "{name} has no status");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn password(&self, name: &str) -> anyhow::Result<String> {
        let s = Api::<Secret>::namespaced(self.admin.clone(), &self.ns)
            .get(&secret_name(name))
            .await?;
        let v = s
            .data
            .as_ref()
            .and_then(|d| d.get(KEY_SUPERUSER))
            .context("no superuser password")?;
        Ok(String::from_utf8(v.0.clone())?)
    }

    pub async fn delete_pod(&self, pod: &str) -> anyhow::Result<()> {
        self.pods.delete(pod, &DeleteParams::default()).await?;
        Ok(())
    }

    /// The pod IPs of the namespace's pods.
    pub async fn pod_ips(&self) -> Vec<IpAddr> {
        match self.pods.list(&Default::default()).await {
            Ok(list) => list
                .into_iter()
                .filter_map(|p| p.status?.pod_ip?.parse().ok())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// The pod IP of `instance` in `s`.
pub fn ip_of(s: &PostgresClusterStatus, instance: &str) -> Option<String> {
    s.instances
        .iter()
        .find(|i| i.name == instance)
        .and_then(|i| i.pod_ip.clone())
}

pub async fn connect(ip: &str, password: &str) -> anyhow::Result<tokio_postgres::Client> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(ip)
        .port(5432)
        .user("postgres")
        .password(password)
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(2));
    let (client, conn) = cfg.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// Whether the server at `ip` accepts a write now (a fresh connection, one INSERT into `t`,
/// which must exist).
pub async fn accepts_write(ip: &str, password: &str) -> bool {
    let Ok(c) = connect(ip, password).await else {
        return false;
    };
    tokio::time::timeout(
        Duration::from_secs(2),
        c.execute("INSERT INTO t (v) VALUES ('probe')", &[]),
    )
    .await
    .is_ok_and(|r| r.is_ok())
}

/// Polls every instance named in the status (other than `except`) every 50 ms until one
/// accepts a write; the time from `t0`.
pub async fn until_writable(
    env: &PgEnv,
    name: &str,
    password: &str,
    except: &str,
    t0: Instant,
    limit: Duration,
) -> anyhow::Result<Duration> {
    loop {
        if let Some(s) = env.status(name).await {
            for i in s.instances.iter().filter(|i| i.name != except) {
                if let Some(ip) = &i.pod_ip {
                    if accepts_write(ip, password).await {
                        return Ok(t0.elapsed());
                    }
                }
            }
        }
        anyhow::ensure!(
            t0.elapsed() < limit,
            "no instance but {except} accepted a write within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Watches, until stopped, the instance API of every pod of one cluster at once every 100 ms
/// and keeps the largest number of its instances that reported themselves a ready primary
/// at one moment.
pub struct PrimaryWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl PrimaryWatch {
    pub fn start(pods: Api<Pod>, cluster: &str) -> PrimaryWatch {
        let lp = kube::api::ListParams::default()
            .labels(&bosun_postgres::controller::build::selector(cluster));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut most = 0;
            let mut seen = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let ips: Vec<IpAddr> = match pods.list(&lp).await {
                    Ok(list) => list
                        .into_iter()
                        .filter_map(|p| p.status?.pod_ip?.parse().ok())
                        .collect(),
                    Err(_) => Vec::new(),
                };
                let states = futures::future::join_all(ips.into_iter().map(|ip| async move {
                    InstanceClient::new(SocketAddr::new(ip, INSTANCE_PORT), None)
                        .state()
                        .await
                        .ok()
                }))
                .await;
                let n = states
                    .iter()
                    .flatten()
                    .filter(|s| s.role == StateRole::Primary && s.ready)
                    .count();
                if n > 1 {
                    let who: Vec<String> = states
                        .iter()
                        .flatten()
                        .map(|s| {
                            format!(
                                "{} {:?} ready={} tl={:?}",
                                s.name, s.role, s.ready, s.timeline
                            )
                        })
                        .collect();
                    seen.push(format!(
                        "{:?}: {}",
                        std::time::SystemTime::now(),
                        who.join("; ")
                    ));
                }
                most = most.max(n);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (most, seen)
        });
        PrimaryWatch { stop, task }
    }

    /// The most primaries seen at once.
    pub async fn stop(self) -> usize {
        self.stop_with().await.0
    }

    /// The most primaries seen at once, and each moment more than one was seen.
    pub async fn stop_with(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or((usize::MAX, Vec::new()))
    }
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `[a, b, c]` with two decimals.
pub fn list(xs: &[f64]) -> String {
    let each: Vec<String> = xs.iter().map(|x| format!("{x:.2}")).collect();
    format!("[{}]", each.join(", "))
}
