//! etcd + kube-apiserver (+ kube-controller-manager) in a temporary directory.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::assets::Assets;
use crate::process;

#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    #[error(
        "test control plane binaries missing in {dir} ({missing}); run `bash scripts/setup-assets.sh` \
         (or set BOSUN_ASSETS to a directory holding etcd, kube-apiserver, kube-controller-manager)"
    )]
    AssetsMissing { dir: PathBuf, missing: String },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("{what} did not become ready within {secs} s; last lines of {log}:\n{tail}")]
    NotReady {
        what: &'static str,
        secs: u64,
        log: PathBuf,
        tail: String,
    },
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("key generation: {0}")]
    Key(String),
    #[error("test cluster set-up: {0}")]
    Setup(String),
}

/// What to start.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Also run kube-controller-manager: garbage collection, Deployment/ReplicaSet and
    /// StatefulSet controllers, PV binding.
    pub controller_manager: bool,
}

struct Proc {
    name: &'static str,
    child: Child,
    /// How it was started, to start it again ([`ControlPlane::restart`]).
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
}

impl Proc {
    fn start(name: &'static str, cmd: Command) -> Result<Proc, TestEnvError> {
        let program = cmd.get_program().to_os_string();
        let args = cmd.get_args().map(|a| a.to_os_string()).collect();
        Ok(Proc {
            name,
            child: process::spawn(cmd)?,
            program,
            args,
        })
    }
}

/// A running control plane. Dropping it kills the processes and deletes the directory.
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    procs: Vec<Proc>,
    audit_log: Option<PathBuf>,
}

const TOKEN: &str = "bosun-test-admin-token";

fn base_dir() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir()
        && std::fs::metadata(&shm)
            .map(|m| !m.permissions().readonly())
            .unwrap_or(false)
    {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// Deletes directories left by test processes that no longer exist.
fn remove_stale_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix("bosun-testenv-") else {
            continue;
        };
        let pid: Option<i32> = rest.split('-').next().and_then(|p| p.parse().ok());
        if let Some(pid) = pid {
            if !process::pid_alive(pid) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn log_file(dir: &Path, name: &str) -> std::io::Result<(Stdio, Stdio)> {
    let f = std::fs::File::create(dir.join(format!("{name}.log")))?;
    Ok((Stdio::from(f.try_clone()?), Stdio::from(f)))
}

impl ControlPlane {
    /// Starts a control plane on free loopback ports.
    pub async fn start(opts: Options) -> Result<ControlPlane, TestEnvError> {
        Self::boot_new(opts, false).await
    }

    /// [`ControlPlane::start`], with the API server writing an audit log of every mutating
    /// request (who, what, when) to [`ControlPlane::audit_log`].
    pub async fn start_audited(opts: Options) -> Result<ControlPlane, TestEnvError> {
        Self::boot_new(opts, true).await
    }

    async fn boot_new(opts: Options, audit: bool) -> Result<ControlPlane, TestEnvError> {
        let assets = Assets::locate(opts.controller_manager)?;
        let base = base_dir();
        remove_stale_dirs(&base);
        let dir = base.join(format!("bosun-testenv-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir)?;
        process::register_dir(dir.clone());
        let mut cp = ControlPlane {
            dir: dir.clone(),
            kubeconfig: dir.join("kubeconfig"),
            server: String::new(),
            procs: Vec::new(),
            audit_log: audit.then(|| dir.join("audit.log")),
        };
        cp.boot(&assets, &opts).await?;
        Ok(cp)
    }

    async fn boot(&mut self, assets: &Assets, opts: &Options) -> Result<(), TestEnvError> {
        let dir = self.dir.clone();
        let ports = process::free_ports(3)?;
        let (etcd_port, peer_port, api_port) = (ports[0], ports[1], ports[2]);

        // etcd
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let (out, err) = log_file(&dir, "etcd")?;
        let mut cmd = Command::new(assets.bin("etcd"));
        cmd.arg("--name=default")
            .arg(format!("--data-dir={}", dir.join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=default={peer_url}"))
            .arg("--log-level=warn")
            .stdout(out)
            .stderr(err)
            .stdin(Stdio::null());
        self.procs.push(Proc::start("etcd", cmd)?);

        // keys and credentials
        let key = rcgen::KeyPair::generate().map_err(|e| TestEnvError::Key(e.to_string()))?;
        std::fs::write(dir.join("sa.key"), key.serialize_pem())?;
        std::fs::write(dir.join("sa.pub"), key.public_key_pem())?;
        std::fs::write(
            dir.join("tokens.csv"),
            format!("{TOKEN},admin,admin,system:masters\n"),
        )?;
        std::fs::create_dir_all(dir.join("certs"))?;

        // kube-apiserver
        let (out, err) = log_file(&dir, "kube-apiserver")?;
        let mut cmd = Command::new(assets.bin("kube-apiserver"));
        cmd.arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--secure-port={api_port}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            // A loopback address may not be the kubernetes Service's endpoint (since 1.2x);
            // nothing in the tests reaches the API server through that Service.
            .arg("--endpoint-reconciler-type=none")
            .arg(format!("--cert-dir={}", dir.join("certs").display()))
            .arg(format!(
                "--token-auth-file={}",
                dir.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=RBAC")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-account-key-file={}",
                dir.join("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                dir.join("sa.key").display()
            ))
            .arg("--service-cluster-ip-range=10.0.0.0/16")
            .arg("--disable-admission-plugins=ServiceAccount")
            .arg("--allow-privileged=true")
            .arg("--event-ttl=15m")
            .stdout(out)
            .stderr(err)
            .stdin(Stdio::null());
        if let Some(log) = &self.audit_log {
            let policy = dir.join("audit-policy.yaml");
            std::fs::write(
                &policy,
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n",
            )?;
            cmd.arg(format!("--audit-policy-file={}", policy.display()))
                .arg(format!("--audit-log-path={}", log.display()))
                .arg("--audit-log-format=json");
        }
        self.procs.push(Proc::start("kube-apiserver", cmd)?);
        self.server = format!("https://127.0.0.1:{api_port}");
        self.write_kubeconfig()?;
        self.wait_ready().await?;

        if opts.controller_manager {
            let (out, err) = log_file(&dir, "kube-controller-manager")?;
            let mut cmd = Command::new(assets.bin("kube-controller-manager"));
            cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
                .arg("--leader-elect=false")
                .arg("--controllers=*,-serviceaccount-token")
                .arg("--secure-port=0")
                .arg("--use-service-account-credentials=false")
                .arg("--concurrent-gc-syncs=20")
                .arg("--kube-api-qps=500")
                .arg("--kube-api-burst=1000")
                .stdout(out)
                .stderr(err)
                .stdin(Stdio::null());
            self.procs
                .push(Proc::start("kube-controller-manager", cmd)?);
        }
        Ok(())
    }

    fn write_kubeconfig(&self) -> std::io::Result<()> {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: bosun-test\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\nusers:\n- name: admin\n  user:\n    token: {TOKEN}\ncontexts:\n- name: bosun-test\n  context:\n    cluster: bosun-test\n    user: admin\n    namespace: default\ncurrent-context: bosun-test\n",
            server = self.server
        );
        std::fs::write(&self.kubeconfig, yaml)
    }

    async fn wait_ready(&mut self) -> Result<(), TestEnvError> {
        let limit = Duration::from_secs(90);
        let start = Instant::now();
        loop {
            for p in &mut self.procs {
                if let Ok(Some(status)) = p.child.try_wait() {
                    let log = self.dir.join(format!("{}.log", p.name));
                    return Err(TestEnvError::NotReady {
                        what: p.name,
                        secs: 0,
                        tail: format!("exited with {status}\n{}", tail(&log, 30)),
                        log,
                    });
                }
            }
            if let Ok(client) = self.client().await {
                let req = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
                if let Ok(body) = client.request_text(req).await {
                    if body.trim() == "ok" {
                        // The default namespace is created by a post-start controller.
                        let ns: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                            kube::Api::all(client);
                        if ns.get_opt("default").await.ok().flatten().is_some() {
                            return Ok(());
                        }
                    }
                }
            }
            if start.elapsed() > limit {
                let log = self.dir.join("kube-apiserver.log");
                return Err(TestEnvError::NotReady {
                    what: "kube-apiserver",
                    secs: limit.as_secs(),
                    tail: tail(&log, 30),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The admin kubeconfig (usable with kubectl).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The directory holding data, logs and the kubeconfig.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The admin client config.
    pub async fn config(&self) -> Result<Config, TestEnvError> {
        let kc = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))
    }

    /// A new admin client, bound to the calling Tokio runtime (make one per test).
    pub async fn client(&self) -> Result<Client, TestEnvError> {
        Ok(Client::try_from(self.config().await?)?)
    }

    /// A client that authenticates as `user` (impersonation), for RBAC tests.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> Result<Client, TestEnvError> {
        let mut cfg = self.config().await?;
        cfg.auth_info.impersonate = Some(user.to_string());
        cfg.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Ok(Client::try_from(cfg)?)
    }

    /// The API server's own Prometheus metrics (e.g. `apiserver_request_total`).
    pub async fn apiserver_metrics(&self, client: &Client) -> Result<String, TestEnvError> {
        let req = http::Request::get("/metrics")
            .body(Vec::new())
            .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
        Ok(client.request_text(req).await?)
    }

    /// Sums `apiserver_request_total` over the series whose labels contain every `label="value"`
    /// pair given.
    pub async fn request_count(
        &self,
        client: &Client,
        labels: &[(&str, &str)],
    ) -> Result<f64, TestEnvError> {
        let text = self.apiserver_metrics(client).await?;
        Ok(sum_series(&text, "apiserver_request_total", labels))
    }

    /// The audit log of a control plane started with [`ControlPlane::start_audited`]: one
    /// JSON event per line for every mutating request.
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Kills the component `name` (an outage), waits `down`, starts it again with the same
    /// arguments (ports and data kept) and, for the API server, waits until it is ready.
    pub async fn restart(
        &mut self,
        name: &str,
        down: std::time::Duration,
    ) -> Result<(), TestEnvError> {
        let Some(i) = self.procs.iter().position(|p| p.name == name) else {
            return Ok(());
        };
        let p = &mut self.procs[i];
        let _ = p.child.kill();
        let _ = p.child.wait();
        tokio::time::sleep(down).await;
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.dir.join(format!("{}.log", p.name)))?;
        let mut cmd = Command::new(&p.program);
        cmd.args(&p.args)
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .stdin(Stdio::null());
        let name = p.name;
        self.procs[i] = Proc::start(name, cmd)?;
        if name == "kube-apiserver" {
            self.wait_ready().await?;
        }
        Ok(())
    }

    /// Process id of a component, for tests that need to signal it.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.procs
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.child.id())
    }
}

/// Sums the values of a metric's series that carry all given labels.
pub fn sum_series(text: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with('{'))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(t) ^ (N.fetch_add(1, Ordering::Relaxed) << 32)
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Reverse order: controller-manager, apiserver, then etcd.
        for p in self.procs.iter_mut().rev() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        process::unregister_dir(&self.dir);
    }
}

/// One control plane (with kube-controller-manager) shared by every test of a test binary;
/// isolate tests by namespace. Its processes die with the test binary.
pub async fn shared() -> Result<&'static ControlPlane, TestEnvError> {
    static CP: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    CP.get_or_try_init(|| {
        ControlPlane::start(Options {
            controller_manager: true,
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_matching_series() {
        let text = "apiserver_request_total{code=\"200\",resource=\"configmaps\",verb=\"APPLY\"} 3\n\
                    apiserver_request_total{code=\"201\",resource=\"configmaps\",verb=\"APPLY\"} 2\n\
                    apiserver_request_total{code=\"200\",resource=\"secrets\",verb=\"APPLY\"} 7\n\
                    apiserver_request_total_other{resource=\"configmaps\"} 100\n";
        assert_eq!(
            sum_series(
                text,
                "apiserver_request_total",
                &[("resource", "configmaps")]
            ),
            5.0
        );
        assert_eq!(
            sum_series(text, "apiserver_request_total", &[("verb", "APPLY")]),
            12.0
        );
        assert_eq!(
            sum_series(text, "apiserver_request_total", &[("verb", "GET")]),
            0.0
        );
    }

    #[test]
    fn missing_assets_name_the_script() {
        let err = TestEnvError::AssetsMissing {
            dir: "/nowhere".into(),
            missing: "etcd".into(),
        };
        assert!(err.to_string().contains("scripts/setup-assets.sh"));
    }
}
