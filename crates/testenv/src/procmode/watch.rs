//! The agent's loop: it watches pods (a task per pod, [`super::pod`]) and claims (bound as
//! in simulated mode; a deleted claim's directory removed), and keeps its node alive.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::mpsc;

use super::{node, pod, sandbox, volumes, Ctx, PodMsg, PodShared, ProcessConfig, ProcessError};

/// Checks the machine, then starts watching; the returned task runs the agent.
pub(crate) fn start(
    client: Client,
    cfg: ProcessConfig,
) -> Result<(tokio::task::JoinHandle<()>, Arc<Ctx>), ProcessError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(ProcessError::NotRoot { user: cfg.user });
    }
    let user =
        sandbox::lookup_user(&cfg.user)?.ok_or_else(|| ProcessError::NoUser(cfg.user.clone()))?;
    let (root, owns_root) = match &cfg.root {
        Some(r) => (r.clone(), false),
        None => {
            use std::sync::atomic::AtomicU32;
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "bosun-procmode-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            crate::process::register_dir(dir.clone());
            (dir, true)
        }
    };
    for d in [root.clone(), root.join("claims"), root.join("pods")] {
        std::fs::create_dir_all(&d)?;
        // The unprivileged user walks through to its volumes.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))?;
    }
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        cfg,
        user,
        root,
        owns_root,
        pods: Mutex::default(),
        dirs: Mutex::default(),
        linger: Mutex::default(),
        lingering: Mutex::default(),
    });
    // Before the first heartbeat, which publishes the endpoint's port on the node.
    super::kubelet::register(&ctx);
    let task = tokio::spawn(run(ctx.clone()));
    Ok((task, ctx))
}

enum Ev {
    Pod(Box<Result<watcher::Event<Pod>, watcher::Error>>),
    Pvc(Box<Result<watcher::Event<PersistentVolumeClaim>, watcher::Error>>),
}

async fn run(ctx: Arc<Ctx>) {
    let client = ctx.client.clone();
    let (pods, pvcs): (Api<Pod>, Api<PersistentVolumeClaim>) = match &ctx.cfg.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    use kube::runtime::WatchStreamExt;
    let pod_events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .map(|e| Ev::Pod(Box::new(e)))
        .boxed();
    let pvc_events = watcher(pvcs, watcher::Config::default())
        .default_backoff()
        .map(|e| Ev::Pvc(Box::new(e)))
        .boxed();
    let sim = crate::NodeAgentConfig {
        namespace: ctx.cfg.namespace.clone(),
        resize_needs_restart: false,
    };
    let mut events = futures::stream::select(pod_events, pvc_events);
    if let Err(e) = node::heartbeat(&client).await {
        tracing::warn!(error = %e, "process-mode node");
    }
    let mut heartbeat = tokio::time::interval(Duration::from_secs(10));
    heartbeat.tick().await;
    loop {
        let ev = tokio::select! {
            ev = events.next() => match ev {
                Some(ev) => ev,
                None => break,
            },
            _ = heartbeat.tick() => {
                if let Err(e) = node::heartbeat(&client).await {
                    tracing::debug!(error = %e, "process-mode node heartbeat");
                }
                continue;
            }
        };
        match ev {
            Ev::Pod(e) => match *e {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                    on_pod(&ctx, p).await
                }
                Ok(watcher::Event::Delete(p)) => {
                    let known = ctx.pods().get(&p.uid().unwrap_or_default()).cloned();
                    if let Some(s) = known {
                        let _ = s.tx.send(PodMsg::Gone);
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "process-mode pod watch"),
            },
            Ev::Pvc(e) => match *e {
                Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                    if let Err(e) =
                        crate::nodeagent::on_pvc(&client, &sim, c, Some(&ctx.root)).await
                    {
                        tracing::debug!(error = %e, "process-mode claim binding");
                    }
                }
                Ok(watcher::Event::Delete(c)) => {
                    let dir = volumes::claim_dir(&ctx.root, &c.uid().unwrap_or_default());
                    if let Err(e) = sandbox::remove_tree(&dir) {
                        tracing::warn!(error = %e, "removing a deleted claim's directory");
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "process-mode claim watch"),
            },
        }
    }
}

async fn on_pod(ctx: &Arc<Ctx>, mut p: Pod) {
    let uid = p.uid().unwrap_or_default();
    let known = ctx.pods().get(&uid).cloned();
    if let Some(s) = known {
        let _ = s.tx.send(PodMsg::Update(Box::new(p)));
        return;
    }
    let ns = p.namespace().unwrap_or_default();
    let name = p.name_any();
    // A pod bound to another node is that node's kubelet's to run and to finalize: a test
    // stands in for a lost node by binding a pod to a node no agent serves.
    let elsewhere = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| n != node::NODE_NAME);
    if elsewhere {
        return;
    }
    if p.metadata.deletion_timestamp.is_some() {
        // Nothing of it runs here: finalize it at once.
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        crate::nodeagent::finalize(&api, &p).await;
        return;
    }
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return;
    }
    if p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none()
    {
        // What the scheduler would do: bind it to this node.
        if let Err(e) = node::bind(&ctx.client, &ns, &name).await {
            tracing::debug!(pod = %name, error = %e, "binding the pod to the node");
            return;
        }
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = Some(node::NODE_NAME.into());
        }
    }
    let short: String = uid.chars().take(8).collect();
    let dir = ctx
        .root
        .join("pods")
        .join(&ns)
        .join(format!("{name}-{short}"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tracing::warn!(error = %e, "process-mode pod directory");
        return;
    }
    ctx.dirs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((ns.clone(), name.clone()), dir.clone());
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(PodShared {
        ns,
        name,
        uid: uid.clone(),
        dir,
        lost: AtomicBool::new(false),
        groups: Mutex::default(),
        tx,
        task: Mutex::default(),
        running: Mutex::default(),
    });
    ctx.pods().insert(uid, shared.clone());
    let handle = tokio::spawn(pod::run(ctx.clone(), shared.clone(), p, rx));
    *shared.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle.abort_handle());
}
