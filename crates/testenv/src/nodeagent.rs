//! A simulated node agent — **test support only**, standing in for the kubelet and a CSI
//! driver that do not run here (as kwok does):
//! * Pods are marked Running and Ready (all containers ready); terminating pods are removed.
//!   A pod can be held unready ([`NodeAgent::hold_unready`]), as a crash-looping container
//!   would keep it; its successor (a new UID) is treated normally again.
//!   Pods that run to completion (`restartPolicy` Never or OnFailure, as Jobs' pods) end
//!   Succeeded — or Failed when annotated `bosun.dev/test-exit-code` with a non-zero code.
//! * Pending PVCs are bound: a PV is created for each (pre-bound via `claimRef`) and the claim
//!   gets `volumeName`, phase Bound and its capacity.
//! * A resize (requested storage above the capacity) grows the PV; then either the claim's
//!   capacity follows at once (online expansion), or — `resize_needs_restart` — the claim
//!   reports `FileSystemResizePending` until a new pod using it becomes ready, as the seed
//!   describes for a real cluster.
//!
//! That is the default. [`NodeAgent::process_mode`] runs pods for real instead, as local
//! processes (real PostgreSQL in tests): see [`crate::procmode`] for what it honours.
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::procmode::{ProcessConfig, ProcessError};

#[derive(Clone, Debug, Default)]
pub struct NodeAgentConfig {
    /// Only this namespace; all namespaces when None.
    pub namespace: Option<String>,
    /// Hold resizes in `FileSystemResizePending` until a pod using the claim restarts.
    pub resize_needs_restart: bool,
}

/// Runs until dropped (in process mode, its processes die with it).
pub struct NodeAgent {
    task: tokio::task::JoinHandle<()>,
    client: Client,
    unready: Held,
    procs: Option<Arc<crate::procmode::Ctx>>,
}

/// UIDs of pods held unready.
type Held = Arc<Mutex<HashSet<String>>>;

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(p) = &self.procs {
            p.shutdown();
        }
    }
}

const PENDING: &str = "FileSystemResizePending";

impl NodeAgent {
    /// Runs pods as local processes ([`crate::procmode`]): needs root, and the user of
    /// `cfg.user` (`scripts/setup-postgres.sh`).
    pub fn process_mode(client: Client, cfg: ProcessConfig) -> Result<NodeAgent, ProcessError> {
        let (task, ctx) = crate::procmode::start(client.clone(), cfg)?;
        Ok(NodeAgent {
            task,
            client,
            unready: Held::default(),
            procs: Some(ctx),
        })
    }

    fn procs(&self) -> Result<&crate::procmode::Ctx, ProcessError> {
        self.procs.as_deref().ok_or(ProcessError::Simulated)
    }

    /// Process mode: what a pod's container wrote to stdout and stderr so far (every start).
    pub fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ProcessError> {
        self.procs()?.logs(namespace, pod, container)
    }

    /// Process mode: the pod's node is lost — SIGKILL to its process groups; nothing is
    /// restarted, the pod turns not Ready (reason `NodeLost`), and deleting it finalizes it.
    pub fn node_loss(&self, namespace: &str, pod: &str) -> Result<(), ProcessError> {
        self.procs()?.node_loss(namespace, pod)
    }

    /// Process mode: runs `argv` in a running container of the pod, as `kubectl exec` would
    /// (its root, environment and user), and waits for it.
    pub async fn exec(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        argv: &[&str],
    ) -> Result<crate::procmode::ExecOutput, ProcessError> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        self.procs()?.exec(namespace, pod, container, &argv).await
    }

    /// Process mode: when this pod's object is removed (a forced deletion), its processes
    /// are left running, as a kubelet that has not yet synced (or a lost node's) leaves
    /// them, until [`NodeAgent::kill_lingering`] (or the agent's end).
    pub fn linger_after_deletion(&self, namespace: &str, pod: &str) -> Result<(), ProcessError> {
        self.procs()?.linger(namespace, pod)
    }

    /// Process mode: SIGKILL to the processes of pods left running by
    /// [`NodeAgent::linger_after_deletion`] whose object is gone.
    pub fn kill_lingering(&self) -> Result<(), ProcessError> {
        self.procs()?.kill_lingering();
        Ok(())
    }

    /// Process mode: SIGKILL to the pod's process groups, a crash: `restartPolicy` applies.
    pub fn kill_containers(&self, namespace: &str, pod: &str) -> Result<(), ProcessError> {
        self.procs()?.kill_containers(namespace, pod)
    }

    /// Process mode: the host directory holding the claim `name`'s data.
    pub async fn claim_dir(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<std::path::PathBuf, ProcessError> {
        let root = self.procs()?.root.clone();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let uid = api.get(name).await?.uid().unwrap_or_default();
        Ok(crate::procmode::claim_dir(&root, &uid))
    }

    /// Simulated mode: holds the pod `name` in `namespace` (this very pod, by UID) not
    /// ready, and marks it so at once; returns its UID. (In process mode, readiness is the
    /// probes'.)
    pub async fn hold_unready(&self, namespace: &str, name: &str) -> Result<String, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pod = api.get(name).await?;
        let uid = pod.uid().unwrap_or_default();
        self.unready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.clone());
        mark_unready(&api, &pod).await?;
        Ok(uid)
    }

    pub fn start(client: Client, cfg: NodeAgentConfig) -> NodeAgent {
        let unready: Held = Arc::default();
        let held = unready.clone();
        let agent_client = client.clone();
        let task = tokio::spawn(async move {
            let client = agent_client;
            let (pods, pvcs): (Api<Pod>, Api<PersistentVolumeClaim>) = match &cfg.namespace {
                Some(ns) => (
                    Api::namespaced(client.clone(), ns),
                    Api::namespaced(client.clone(), ns),
                ),
                None => (Api::all(client.clone()), Api::all(client.clone())),
            };
            let pod_events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .map(|e| Ev::Pod(Box::new(e)))
                .boxed();
            let pvc_events = watcher(pvcs, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .map(|e| Ev::Pvc(Box::new(e)))
                .boxed();
            let mut events = futures::stream::select(pod_events, pvc_events);
            while let Some(ev) = events.next().await {
                let res = match ev {
                    Ev::Pod(e) => match *e {
                        Ok(p) => on_pod(&client, &cfg, &held, p).await,
                        Err(e) => watch_error(e),
                    },
                    Ev::Pvc(e) => match *e {
                        Ok(c) => on_pvc(&client, &cfg, c, None).await,
                        Err(e) => watch_error(e),
                    },
                };
                if let Err(e) = res {
                    tracing::debug!(error = %e, "node agent step failed");
                }
            }
        });
        NodeAgent {
            task,
            client,
            unready,
            procs: None,
        }
    }
}

async fn mark_unready(api: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
    let t = now();
    let patch = json!({"metadata": {"uid": pod.uid()}, "status": {
        "phase": "Running",
        "conditions": [
            {"type": "ContainersReady", "status": "False", "lastTransitionTime": t},
            {"type": "Ready", "status": "False", "lastTransitionTime": t},
        ],
    }});
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Removes a terminating pod at once, as the kubelet does when its containers are gone —
/// **that** pod only: the event may be stale, and the name already the StatefulSet's next pod.
pub(crate) async fn finalize(api: &Api<Pod>, pod: &Pod) {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    if let Err(e) = api.delete(&pod.name_any(), &dp).await {
        tracing::debug!(pod = %pod.name_any(), error = %e, "finalizing the pod");
    }
}

fn watch_error(e: watcher::Error) -> Result<(), kube::Error> {
    tracing::debug!(error = %e, "node agent watch error");
    Ok(())
}

enum Ev {
    Pod(Box<Result<Pod, watcher::Error>>),
    Pvc(Box<Result<PersistentVolumeClaim, watcher::Error>>),
}

fn now() -> String {
    Timestamp::now().to_string()
}

async fn on_pod(
    client: &Client,
    cfg: &NodeAgentConfig,
    held: &Held,
    pod: Pod,
) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    if pod.metadata.deletion_timestamp.is_some() {
        finalize(&api, &pod).await;
        return Ok(());
    }
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let is_held = pod
        .uid()
        .is_some_and(|u| held.lock().unwrap_or_else(|e| e.into_inner()).contains(&u));
    if is_held {
        // A pod that never gets ready does not finish a resize either.
        return if ready {
            mark_unready(&api, &pod).await
        } else {
            Ok(())
        };
    }
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if ready || phase == "Succeeded" || phase == "Failed" {
        return Ok(());
    }
    let t = now();
    let batch = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .is_some_and(|p| p == "Never" || p == "OnFailure");
    if batch {
        let code: i32 = pod
            .annotations()
            .get("bosun.dev/test-exit-code")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let containers: Vec<_> = pod
            .spec
            .as_ref()
            .map(|s| s.containers.iter().collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                json!({"name": c.name, "ready": false, "started": false, "restartCount": 0,
                       "image": c.image.clone().unwrap_or_default(), "imageID": "sim://image",
                       "state": {"terminated": {"exitCode": code, "startedAt": t, "finishedAt": t,
                                                "reason": if code == 0 { "Completed" } else { "Error" }}}})
            })
            .collect();
        let patch = json!({"metadata": {"uid": pod.uid()}, "status": {
            "phase": if code == 0 { "Succeeded" } else { "Failed" },
            "hostIP": "127.0.0.1", "podIP": "127.0.0.2", "startTime": t,
            "containerStatuses": containers,
        }});
        api.patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        return Ok(());
    }
    let containers: Vec<_> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            json!({"name": c.name, "ready": true, "started": true, "restartCount": 0,
                   "image": c.image.clone().unwrap_or_default(), "imageID": "sim://image",
                   "state": {"running": {"startedAt": t}}})
        })
        .collect();
    let cond = |ty: &str| json!({"type": ty, "status": "True", "lastTransitionTime": t});
    let patch = json!({"metadata": {"uid": pod.uid()}, "status": {
        "phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.2", "startTime": t,
        "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
        "containerStatuses": containers,
    }});
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;

    // A new pod finishes a file system resize pending on its claims.
    if cfg.resize_needs_restart {
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let claims = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .map(|v| {
                v.iter()
                    .filter_map(|v| {
                        v.persistent_volume_claim
                            .as_ref()
                            .map(|c| c.claim_name.clone())
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for claim in claims {
            if let Some(pvc) = pvcs.get_opt(&claim).await? {
                if has_pending(&pvc) {
                    let want = requested(&pvc);
                    let patch =
                        json!({"status": {"capacity": {"storage": want}, "conditions": null}});
                    pvcs.patch_status(&claim, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
            }
        }
    }
    Ok(())
}

fn requested(pvc: &PersistentVolumeClaim) -> Option<String> {
    pvc.spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

fn capacity(pvc: &PersistentVolumeClaim) -> Option<String> {
    pvc.status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

fn has_pending(pvc: &PersistentVolumeClaim) -> bool {
    pvc.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == PENDING && c.status == "True"))
}

/// Parses the quantities this agent deals with (plain bytes or Ki/Mi/Gi/Ti suffixes).
fn bytes(q: &str) -> Option<u128> {
    let units = [
        ("Ki", 1u128 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ];
    for (suffix, mult) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u128>().ok().map(|n| n * mult);
        }
    }
    q.parse().ok()
}

/// Binds and resizes claims; `process_root` is the process mode's directory (the PV's
/// `hostPath` then names the claim's own directory in it).
pub(crate) async fn on_pvc(
    client: &Client,
    cfg: &NodeAgentConfig,
    pvc: PersistentVolumeClaim,
    process_root: Option<&std::path::Path>,
) -> Result<(), kube::Error> {
    if pvc.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = pvc.namespace().unwrap_or_default();
    let name = pvc.name_any();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let Some(want) = requested(&pvc) else {
        return Ok(());
    };
    let phase = pvc
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    let pv_name = format!("pv-{}", pvc.uid().unwrap_or_default());
    let host_path = match process_root {
        Some(root) => crate::procmode::claim_dir(root, &pvc.uid().unwrap_or_default())
            .display()
            .to_string(),
        None => format!("/tmp/bosun-sim/{pv_name}"),
    };
    let pvs: Api<PersistentVolume> = Api::all(client.clone());

    if phase != "Bound" {
        if pvs.get_opt(&pv_name).await?.is_none() {
            let pv: PersistentVolume = serde_json::from_value(json!({
                "metadata": {"name": pv_name, "labels": {"bosun.dev/simulated": "true"}},
                "spec": {
                    "capacity": {"storage": want},
                    "accessModes": pvc.spec.as_ref().and_then(|s| s.access_modes.clone()).unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default(),
                    "hostPath": {"path": host_path},
                    "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": name, "uid": pvc.uid()},
                }
            }))
            .map_err(kube::Error::SerdeError)?;
            match pvs.create(&PostParams::default(), &pv).await {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .is_none()
        {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"volumeName": pv_name}})),
            )
            .await?;
        }
        let patch = json!({"status": {"phase": "Bound", "capacity": {"storage": want},
            "accessModes": pvc.spec.as_ref().and_then(|s| s.access_modes.clone())}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(());
    }

    // Bound: is a resize requested?
    let have = capacity(&pvc);
    let grow = match (bytes(&want), have.as_deref().and_then(bytes)) {
        (Some(w), Some(h)) => w > h,
        _ => false,
    };
    if !grow || has_pending(&pvc) {
        return Ok(());
    }
    let volume = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or(pv_name);
    let _ = pvs
        .patch(
            &volume,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"capacity": {"storage": want}}})),
        )
        .await;
    // Only if the claim is still as this event shows it: a stale event must not report a
    // resize that a restarted pod has finished since (a newer event follows any change).
    let guard = json!({"resourceVersion": pvc.resource_version()});
    let status = if cfg.resize_needs_restart {
        json!({"metadata": guard, "status": {"conditions": [{"type": PENDING, "status": "True", "lastTransitionTime": now(),
            "message": "Waiting for user to (re-)start a pod to finish file system resize of volume on node."}]}})
    } else {
        json!({"metadata": guard, "status": {"capacity": {"storage": want}}})
    };
    // Give the API a moment so resize ordering resembles a real driver's.
    tokio::time::sleep(Duration::from_millis(50)).await;
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "sim"}]}
        }))
        .expect("pod")
    }

    /// Events reach the agent late. A stale event of a pod that is gone must not act on the
    /// pod that has its name now (a StatefulSet recreates pods under the same name): not
    /// remove it, not mark it ready.
    #[tokio::test]
    async fn a_stale_event_never_acts_on_the_pod_that_took_the_name() {
        let cp = crate::shared().await.expect("control plane");
        let client = cp.client().await.expect("client");
        let ns = crate::test_namespace(&client, "na-stale")
            .await
            .expect("ns");
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let cfg = NodeAgentConfig::default();
        let held = Held::default();

        // The first pod, seen terminating and seen not ready (both stale once it is gone).
        let old = api
            .create(&PostParams::default(), &pod("db-0"))
            .await
            .unwrap();
        let mut terminating = old.clone();
        terminating.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        );
        // Unscheduled, it goes at once.
        api.delete("db-0", &DeleteParams::default()).await.unwrap();
        crate::eventually(30, || async {
            api.get_opt("db-0")
                .await
                .ok()
                .flatten()
                .is_none()
                .then_some(())
        })
        .await
        .expect("the first pod is gone");
        let new = api
            .create(&PostParams::default(), &pod("db-0"))
            .await
            .unwrap();

        on_pod(&client, &cfg, &held, terminating).await.unwrap();
        let still = api
            .get_opt("db-0")
            .await
            .unwrap()
            .expect("the new pod stays");
        assert_eq!(still.uid(), new.uid());
        assert!(still.metadata.deletion_timestamp.is_none());

        // The first pod's not-ready event does not make the new one ready.
        let _ = on_pod(&client, &cfg, &held, old).await;
        let still = api.get("db-0").await.unwrap();
        let phase = still.status.as_ref().and_then(|s| s.phase.clone());
        assert_ne!(phase.as_deref(), Some("Running"), "{:?}", still.status);

        // Its own events do act on it.
        on_pod(&client, &cfg, &held, still.clone()).await.unwrap();
        let running = api.get("db-0").await.unwrap();
        assert_eq!(
            running.status.and_then(|s| s.phase).as_deref(),
            Some("Running")
        );
    }

    /// A stale event of a claim whose resize a restarted pod has finished since does not
    /// report the resize pending again (the claim would wait for a restart forever).
    #[tokio::test]
    async fn a_stale_claim_event_does_not_reopen_a_finished_resize() {
        use k8s_openapi::api::storage::v1::StorageClass;
        let cp = crate::shared().await.expect("control plane");
        let client = cp.client().await.expect("client");
        let ns = crate::test_namespace(&client, "na-pvc").await.expect("ns");
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "na-expandable"},
            "provisioner": "bosun.dev/simulated", "allowVolumeExpansion": true,
        }))
        .unwrap();
        let classes: Api<StorageClass> = Api::all(client.clone());
        let _ = classes.create(&PostParams::default(), &class).await;
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-0"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "na-expandable",
                     "resources": {"requests": {"storage": "1Gi"}}},
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &claim).await.unwrap();
        let cfg = NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart: true,
        };
        on_pvc(&client, &cfg, created, None).await.unwrap();
        let grow = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
        let grown = api
            .patch("data-0", &PatchParams::default(), &Patch::Merge(&grow))
            .await
            .unwrap();
        assert_eq!(capacity(&grown).as_deref(), Some("1Gi"));
        // A pod restart finished it before the agent got to this event.
        let done = json!({"status": {"capacity": {"storage": "2Gi"}}});
        api.patch_status("data-0", &PatchParams::default(), &Patch::Merge(&done))
            .await
            .unwrap();

        let _ = on_pvc(&client, &cfg, grown, None).await;
        let now = api.get("data-0").await.unwrap();
        assert!(!has_pending(&now), "{:?}", now.status);
        assert_eq!(capacity(&now).as_deref(), Some("2Gi"));

        // The current event does report it (the agent still works). Current means the
        // claim as it is now: kube-controller-manager may write it too, and then the agent's
        // next event is the one that acts.
        let grow = json!({"spec": {"resources": {"requests": {"storage": "3Gi"}}}});
        api.patch("data-0", &PatchParams::default(), &Patch::Merge(&grow))
            .await
            .unwrap();
        crate::eventually(30, || async {
            let current = api.get("data-0").await.ok()?;
            let _ = on_pvc(&client, &cfg, current, None).await;
            has_pending(&api.get("data-0").await.ok()?).then_some(())
        })
        .await
        .expect("the current event reports the resize pending");
    }
}
