//! The node agent's **process mode** — test support, opt-in ([`crate::NodeAgent::process_mode`]):
//! pods run for real, as local processes, so that an operator's tests talk to real programs
//! (real PostgreSQL first of all, issue 21) instead of pods merely marked Running.
//!
//! * **Images** map to local programs ([`ImageMap`]): `postgres:<N>` to Debian's
//!   `/usr/lib/postgresql/<N>/bin` (on `PATH`, with the official image's `PGDATA` and
//!   writable `/var/run/postgresql` and `/var/lib/postgresql`, but not its entrypoint script:
//!   `initdb` is the pod's business), bosun's image to the built `bosun` binary at `/bosun`
//!   (the Dockerfile's entrypoint). Any other image is refused: the container waits with
//!   reason `ErrImageNeverPull` and a Warning Event says which images are mapped.
//!   `command`/`args` replace the image's entrypoint/cmd as in Kubernetes, with `$(VAR)`
//!   expansion.
//! * **Containers** get a root and a hostname (the pod's) of their own: the host's `/usr`,
//!   `/etc`, `/opt`, `/dev`, `/proc`, `/sys` (shared, read as the image), fresh `/tmp`,
//!   `/run`, `/var` on each start, and the pod's volumes at their `mountPath`s — bind
//!   mounts in a mount namespace private to the process (see `sandbox.rs`). Mount paths inside the shared host directories are
//!   refused. Processes run as an unprivileged user ([`ProcessConfig::user`], `bosun-pg`,
//!   created by `scripts/setup-postgres.sh`): PostgreSQL refuses root. The agent itself
//!   must run as root (namespaces, `chroot`, the user switch). `securityContext` is ignored.
//! * **Network**: each pod gets a unique loopback IP (`127.<n>.x.y`, Linux routes all of
//!   127/8 to `lo`) in `status.podIP`; `hostIP` is 127.0.0.1. There is no network namespace:
//!   a program must listen on its pod IP (`$(POD_IP)` from the downward API), not on
//!   `0.0.0.0`, or two pods would share its port. Kubernetes refuses loopback Endpoints and
//!   nothing resolves Service names here, so clients find pods by the IPs in their status —
//!   a real cluster would use Services and DNS.
//! * **Volumes**: a claim is a directory under `<root>/claims/<claim uid>` (the PV's
//!   `hostPath` points at it): it keeps its data across pods and is removed when the claim is
//!   deleted; an `emptyDir` is a directory per pod; Secret and ConfigMap volumes are written
//!   out; `hostPath` is used as is. Claims are bound as in simulated mode.
//! * **Environment**: the image's, `HOSTNAME`, `envFrom`, literal values, the downward API's
//!   `fieldRef` (`metadata.name`/`namespace`/`uid`/labels/annotations, `status.podIP`,
//!   `status.hostIP`, `spec.nodeName`, `spec.serviceAccountName`), `secretKeyRef` and
//!   `configMapKeyRef` read from the API server. A missing object or key leaves the container
//!   waiting with `CreateContainerConfigError` (retried), naming the key, never a value.
//! * **Probes** run for real (`exec` inside the container, `httpGet`, `tcpSocket`) with
//!   their timing and thresholds; readiness sets the containers' `ready` and the pod's
//!   `Ready` condition, liveness and startup failures kill the container. Init containers
//!   run one after another before the others.
//! * **restartPolicy** is honoured, with `restartCount`, `lastState` and a `CrashLoopBackOff`
//!   wait doubling from [`ProcessConfig::restart_backoff`] up to
//!   [`ProcessConfig::max_restart_backoff`] (short, for tests). Output goes to
//!   `<root>/pods/<ns>/<pod>-<uid>/<container>.log` ([`crate::NodeAgent::logs`]).
//! * **Deletion**: SIGTERM to each container's process, SIGKILL to its process group after
//!   the pod's grace period, the final container states written, then the pod object deleted
//!   (grace 0, UID precondition) as a kubelet finalizes it. A pod object deleted outright
//!   (grace 0 by someone else) has its processes killed at once.
//! * **Exec**: `pods/exec` through the API server reaches the containers (`kubectl exec`'s
//!   path, as Ansible's `k8s_exec`/`k8s_cp` and the Python client take it): the agent serves
//!   the kubelet's `/exec` endpoint over TLS and publishes its port in the node's
//!   `daemonEndpoints` (see `kubelet.rs`). WebSocket `v4.channel.k8s.io` only: SPDY, and
//!   `v5.channel.k8s.io` (which the API server turns into SPDY; recent kubectl asks for it),
//!   are refused with a message saying so; no `tty`, no resize, no attach or port-forward.
//!   [`crate::NodeAgent::exec`] runs a command directly, without the API server.
//! * **Chaos**: [`crate::NodeAgent::node_loss`] SIGKILLs a pod's process groups as a lost
//!   node would: nothing is restarted, the pod's `Ready` turns False (reason `NodeLost`, as
//!   the node controller would mark it), and deleting it finalizes it at once (as pod garbage
//!   collection does for a deleted node). [`crate::NodeAgent::kill_containers`] is a crash
//!   instead: the processes die by SIGKILL and `restartPolicy` applies.
//!
//! Processes die with the test binary (parent-death signal) and when the agent is dropped.
//! Pods are bound to the node `bosun-process-node` (created and kept Ready by the agent), as
//! the API server deletes unscheduled pods at once, with no grace period. Run one agent per
//! namespace: two would both run its pods.
//!
//! ```text
//! use bosun_testenv::{procmode, shared, test_namespace, ImageMap, NodeAgent, ProcessConfig};
//! let cp = shared().await?;
//! let client = cp.client().await?;
//! let ns = test_namespace(&client, "pg").await?;
//! let agent = NodeAgent::process_mode(client.clone(), ProcessConfig {
//!     namespace: Some(ns.clone()),
//!     // postgres:<N>, and ghcr.io/bosun-dev/bosun:* as the bosun binary cargo built.
//!     images: ImageMap::standard(procmode::built_bosun()),
//!     ..Default::default()
//! })?;
//! // … create the operator's objects; pods get `status.podIP` (127.x.y.z) and really run.
//! agent.node_loss(&ns, "pg-1")?;              // chaos: SIGKILL, no restart
//! println!("{}", agent.logs(&ns, "pg-1", "postgres")?);
//! ```
mod container;
mod env;
mod images;
mod kubelet;
mod node;
mod pod;
mod podip;
mod probe;
mod reason;
mod sandbox;
mod volumes;
mod watch;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;

pub use images::{Image, ImageMap, BOSUN_REPOSITORY, DEFAULT_PATH};

pub use node::NODE_NAME;
pub use podip::network as loopback_network;
pub(crate) use reason::Reason;
use sandbox::User;
pub(crate) use watch::start;

/// The `bosun` binary cargo built next to the running test (`target/<profile>/bosun`), or
/// `BOSUN_BIN` when set; None when neither exists (build it first: `cargo build -p bosun`).
pub fn built_bosun() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BOSUN_BIN") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    // A test runs as target/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    Some(profile_dir.join("bosun")).filter(|p| p.is_file())
}

/// How the process-mode agent runs pods.
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    /// Only this namespace; all namespaces when None.
    pub namespace: Option<String>,
    /// Images to local programs.
    pub images: ImageMap,
    /// The system user processes run as (`scripts/setup-postgres.sh` creates `bosun-pg`).
    pub user: String,
    /// Where claims, pods' directories and logs go; a fresh directory under the system's
    /// temporary directory, removed with the agent, when None.
    pub root: Option<PathBuf>,
    /// The first wait before a container is started again (it doubles at each restart).
    pub restart_backoff: Duration,
    pub max_restart_backoff: Duration,
}

impl Default for ProcessConfig {
    fn default() -> ProcessConfig {
        ProcessConfig {
            namespace: None,
            images: ImageMap::standard(None),
            user: "bosun-pg".into(),
            root: None,
            restart_backoff: Duration::from_millis(500),
            max_restart_backoff: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(
        "the process-mode node agent must run as root (it gives each container a mount \
         namespace and root directory of its own, then switches to the user {user:?})"
    )]
    NotRoot { user: String },
    #[error(
        "no system user {0:?} to run pods' processes as: run `bash scripts/setup-postgres.sh`"
    )]
    NoUser(String),
    #[error("process-mode node agent: {0}")]
    Io(#[from] std::io::Error),
    #[error("no pod {0} known to the process-mode node agent")]
    NoPod(String),
    #[error("pod {pod}: no running container {container:?}")]
    NoContainer { pod: String, container: String },
    #[error("the node agent runs in simulated mode: no processes")]
    Simulated,
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
}

pub(crate) fn now() -> String {
    Timestamp::now().to_string()
}

pub(crate) enum PodMsg {
    Update(Box<Pod>),
    Lost,
    Gone,
}

/// What the agent and a pod's tasks share about one pod.
pub(crate) struct PodShared {
    pub ns: String,
    pub name: String,
    pub uid: String,
    pub dir: PathBuf,
    pub lost: AtomicBool,
    groups: Mutex<HashSet<i32>>,
    tx: mpsc::UnboundedSender<PodMsg>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
    /// Running containers: their root and environment, for `exec`.
    running: Mutex<HashMap<String, Running>>,
}

type Running = (Arc<sandbox::Sandbox>, Arc<Vec<(String, String)>>);

/// What a command run in a container ([`crate::NodeAgent::exec`]) ended with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOutput {
    /// The exit code (128 + the signal when killed).
    pub code: i32,
    /// Its standard output and error, interleaved.
    pub output: String,
}

impl PodShared {
    pub fn set_running(&self, container: &str, r: Option<Running>) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        match r {
            Some(r) => running.insert(container.to_string(), r),
            None => running.remove(container),
        };
    }

    pub fn log_path(&self, container: &str) -> PathBuf {
        self.dir.join(format!("{container}.log"))
    }

    pub fn add_group(&self, pgid: i32) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pgid);
    }

    pub fn remove_group(&self, pgid: i32) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pgid);
    }

    fn kill_all(&self) {
        for g in self.groups.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            sandbox::kill_group(*g);
        }
    }

    /// Removes the containers' roots and the pod's own volumes; the logs stay.
    pub fn cleanup(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            if e.path().is_dir() {
                if let Err(err) = sandbox::remove_tree(&e.path()) {
                    tracing::warn!(error = %err, "process-mode cleanup");
                }
            }
        }
    }
}

pub(crate) struct Ctx {
    pub client: Client,
    pub cfg: ProcessConfig,
    pub user: User,
    pub root: PathBuf,
    owns_root: bool,
    pods: Mutex<HashMap<String, Arc<PodShared>>>,
    /// The directory of the latest pod of each namespace/name, kept after the pod is gone.
    dirs: Mutex<HashMap<(String, String), PathBuf>>,
    /// UIDs of pods whose processes outlive their pod object ([`Ctx::linger`]).
    linger: Mutex<HashSet<String>>,
    /// Those pods, once their object is gone: killed by [`Ctx::kill_lingering`] or shutdown.
    lingering: Mutex<Vec<Arc<PodShared>>>,
}

impl Ctx {
    fn pods(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<PodShared>>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn forget(&self, uid: &str) {
        self.pods().remove(uid);
    }

    /// A real kubelet kills the processes of a force-deleted pod only at its next sync (or
    /// never, on a lost node), while the object is gone at once; this pod's processes are
    /// left running when its object disappears, until [`Ctx::kill_lingering`].
    pub fn linger(&self, ns: &str, pod: &str) -> Result<(), ProcessError> {
        let p = self
            .find(ns, pod)
            .ok_or_else(|| ProcessError::NoPod(format!("{ns}/{pod}")))?;
        self.linger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.uid.clone());
        Ok(())
    }

    pub fn lingers(&self, uid: &str) -> bool {
        self.linger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(uid)
    }

    pub fn keep_lingering(&self, p: Arc<PodShared>) {
        self.lingering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }

    /// SIGKILL to the process groups of pods left running by [`Ctx::linger`].
    pub fn kill_lingering(&self) {
        for p in self
            .lingering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            p.kill_all();
            p.cleanup();
        }
    }

    fn find(&self, ns: &str, name: &str) -> Option<Arc<PodShared>> {
        self.pods()
            .values()
            .find(|p| p.ns == ns && p.name == name)
            .cloned()
    }

    pub async fn warn(&self, pod: &Pod, reason: Reason, message: &str) {
        self.event(pod, "Warning", reason, message).await;
    }

    pub async fn normal(&self, pod: &Pod, reason: Reason, message: &str) {
        self.event(pod, "Normal", reason, message).await;
    }

    async fn event(&self, pod: &Pod, type_: &str, reason: Reason, message: &str) {
        let ns = pod.namespace().unwrap_or_default();
        let t = now();
        let ev: Result<Event, _> = serde_json::from_value(json!({
            "metadata": {"generateName": format!("{}.", pod.name_any()), "namespace": ns},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": ns,
                               "name": pod.name_any(), "uid": pod.uid()},
            "type": type_, "reason": reason.as_str(), "message": message,
            "source": {"component": "kubelet", "host": "bosun-process-node"},
            "firstTimestamp": t, "lastTimestamp": t, "count": 1,
        }));
        if let Ok(ev) = ev {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::debug!(error = %e, "recording an event");
            }
        }
    }

    /// Kills every process and, when the agent made it, removes its directory.
    pub fn shutdown(&self) {
        for p in self.pods().values() {
            if let Some(t) = p.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.abort();
            }
            p.kill_all();
        }
        self.kill_lingering();
        if self.owns_root {
            let _ = sandbox::remove_tree(&self.root);
            crate::process::unregister_dir(&self.root);
        }
    }

    pub fn logs(&self, ns: &str, pod: &str, container: &str) -> Result<String, ProcessError> {
        let dir = self
            .dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ns.to_string(), pod.to_string()))
            .cloned()
            .ok_or_else(|| ProcessError::NoPod(format!("{ns}/{pod}")))?;
        Ok(std::fs::read_to_string(
            dir.join(format!("{container}.log")),
        )?)
    }

    pub fn node_loss(&self, ns: &str, pod: &str) -> Result<(), ProcessError> {
        let p = self
            .find(ns, pod)
            .ok_or_else(|| ProcessError::NoPod(format!("{ns}/{pod}")))?;
        p.lost.store(true, Ordering::SeqCst);
        p.kill_all();
        let _ = p.tx.send(PodMsg::Lost);
        Ok(())
    }

    pub async fn exec(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        argv: &[String],
    ) -> Result<ExecOutput, ProcessError> {
        let p = self
            .find(ns, pod)
            .ok_or_else(|| ProcessError::NoPod(format!("{ns}/{pod}")))?;
        let running = p
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(container)
            .cloned();
        let (sandbox, env) = running.ok_or_else(|| ProcessError::NoContainer {
            pod: format!("{ns}/{pod}"),
            container: container.to_string(),
        })?;
        let mut out = tempfile::tempfile()?;
        let mut proc = sandbox::Proc::spawn(sandbox.command(argv, &env, Some(&out))?)?;
        p.add_group(proc.pgid);
        let status = proc.wait().await;
        sandbox::kill_group(proc.pgid);
        p.remove_group(proc.pgid);
        let (code, _) = sandbox::exit_code(&status?);
        use std::io::{Read, Seek};
        let mut output = String::new();
        out.seek(std::io::SeekFrom::Start(0))?;
        out.read_to_string(&mut output)?;
        Ok(ExecOutput { code, output })
    }

    pub fn kill_containers(&self, ns: &str, pod: &str) -> Result<(), ProcessError> {
        let p = self
            .find(ns, pod)
            .ok_or_else(|| ProcessError::NoPod(format!("{ns}/{pod}")))?;
        p.kill_all();
        Ok(())
    }
}

/// Used by the public API to name a claim's directory.
pub(crate) fn claim_dir(root: &Path, uid: &str) -> PathBuf {
    volumes::claim_dir(root, uid)
}
