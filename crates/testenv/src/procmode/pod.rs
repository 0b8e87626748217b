//! One pod's task: volumes, the pod IP, init containers one after another, then the
//! containers; it gathers their reports into the pod's status (the only writer of it), and on
//! deletion stops them with the grace period and finalizes the pod object as a kubelet does.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::Api;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::container::{Phase, Policy, Report, Spec, Stop};
use super::{now, podip, volumes, Ctx, PodMsg, PodShared, Reason};

struct Model {
    init: Vec<(Value, Phase)>,
    main: Vec<(Value, Phase, bool)>,
    conditions: BTreeMap<&'static str, (bool, String, Option<&'static str>)>,
    last_written: Value,
    pod_ip: Option<String>,
    start_time: String,
    lost: bool,
}

pub async fn run(
    ctx: Arc<Ctx>,
    shared: Arc<PodShared>,
    pod: Pod,
    mut rx: mpsc::UnboundedReceiver<PodMsg>,
) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &shared.ns);
    let pod = Arc::new(pod);
    let spec = pod.spec.clone().unwrap_or_default();
    let waiting = |reason: &str| json!({"waiting": {"reason": reason}});
    let status_of = |c: &k8s_openapi::api::core::v1::Container, reason: &str| {
        json!({"name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
               "ready": false, "started": false, "restartCount": 0, "state": waiting(reason)})
    };
    let inits = spec.init_containers.clone().unwrap_or_default();
    let mut m = Model {
        init: inits
            .iter()
            .map(|c| (status_of(c, "PodInitializing"), Phase::Waiting))
            .collect(),
        main: spec
            .containers
            .iter()
            .map(|c| {
                let r = if inits.is_empty() {
                    "ContainerCreating"
                } else {
                    "PodInitializing"
                };
                (status_of(c, r), Phase::Waiting, false)
            })
            .collect(),
        conditions: BTreeMap::new(),
        last_written: Value::Null,
        pod_ip: None,
        start_time: now(),
        lost: false,
    };
    let t0 = now();
    for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        m.conditions.insert(
            c,
            (c == "PodScheduled" || inits.is_empty(), t0.clone(), None),
        );
    }
    let (stop_tx, stop_rx) = watch::channel::<Option<Stop>>(None);
    let (rep_tx, mut rep_rx) = mpsc::unbounded_channel::<Report>();
    let mut tasks: JoinSet<Option<i32>> = JoinSet::new();
    let mut deleting = false;
    let mut gone = false;
    let mut started = false;
    let mut volumes: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut mount_failure: Option<String> = None;
    let mut next_init = 0usize;
    let mut retry = tokio::time::interval(Duration::from_millis(500));

    loop {
        // Volumes first: the pod waits (Pending) until each one can be provided.
        if !started && !deleting {
            match volumes::prepare(&ctx, &pod, &shared.dir).await {
                Ok(v) => {
                    volumes = v;
                    started = true;
                    match podip::next() {
                        Ok(ip) => m.pod_ip = Some(ip.to_string()),
                        Err(e) => {
                            ctx.warn(&pod, Reason::FailedCreatePodSandBox, &e.to_string())
                                .await;
                            started = false;
                        }
                    }
                    if started {
                        write(&api, &shared, &mut m).await;
                        start_next(
                            &ctx,
                            &shared,
                            &pod,
                            &m,
                            &volumes,
                            &rep_tx,
                            &stop_rx,
                            &mut tasks,
                            &mut next_init,
                        );
                    }
                }
                Err(msg) => {
                    // Pending, its containers "ContainerCreating", as a kubelet shows it —
                    // written before the Event, which then implies it.
                    write(&api, &shared, &mut m).await;
                    if mount_failure.as_deref() != Some(msg.as_str()) {
                        ctx.warn(&pod, Reason::FailedMount, &msg).await;
                        mount_failure = Some(msg);
                    }
                }
            }
        }
        if deleting && tasks.is_empty() {
            break;
        }
        tokio::select! {
            Some(r) = rep_rx.recv() => {
                let done_init = r.init && matches!(r.phase, Phase::Done(0));
                if r.init {
                    m.init[r.idx] = (r.status, r.phase);
                } else {
                    m.main[r.idx] = (r.status, r.phase, r.ready);
                }
                if done_init && !deleting {
                    start_next(&ctx, &shared, &pod, &m, &volumes, &rep_tx, &stop_rx, &mut tasks, &mut next_init);
                }
                write(&api, &shared, &mut m).await;
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            msg = rx.recv() => match msg {
                Some(PodMsg::Update(p)) => {
                    let forced = p.metadata.deletion_grace_period_seconds == Some(0);
                    if p.metadata.deletion_timestamp.is_some() && forced && ctx.lingers(&shared.uid) {
                        // The object goes at once; the processes run on, unwatched, as
                        // under a kubelet that has not synced yet.
                        finalize(&api, &shared).await;
                        ctx.keep_lingering(shared.clone());
                        ctx.forget(&shared.uid);
                        return;
                    }
                    if p.metadata.deletion_timestamp.is_some() {
                        let grace = if m.lost { 0 } else {
                            p.metadata.deletion_grace_period_seconds.unwrap_or(30).max(0)
                        };
                        let grace = Duration::from_secs(grace as u64);
                        // A second deletion may shorten the grace period, never lengthen it.
                        let shorter = match *stop_tx.borrow() {
                            Some(Stop::Grace(g)) => grace < g,
                            None => true,
                        };
                        deleting = true;
                        if shorter {
                            let _ = stop_tx.send(Some(Stop::Grace(grace)));
                        }
                    }
                }
                Some(PodMsg::Lost) => {
                    m.lost = true;
                    let t = now();
                    for c in ["ContainersReady", "Ready"] {
                        m.conditions.insert(c, (false, t.clone(), Some(Reason::NodeLost.as_str())));
                    }
                    write(&api, &shared, &mut m).await;
                }
                Some(PodMsg::Gone) if ctx.lingers(&shared.uid) => {
                    // Its processes run on, unwatched, as under a kubelet that has not
                    // synced yet: nothing stops them and nothing reports them.
                    ctx.keep_lingering(shared.clone());
                    ctx.forget(&shared.uid);
                    return;
                }
                Some(PodMsg::Gone) | None => {
                    deleting = true;
                    gone = true;
                    let _ = stop_tx.send(Some(Stop::Grace(Duration::ZERO)));
                }
            },
            _ = retry.tick(), if !started && !deleting => {}
        }
    }
    if !gone {
        write(&api, &shared, &mut m).await;
        finalize(&api, &shared).await;
    }
    shared.cleanup();
    ctx.forget(&shared.uid);
}

/// Removes this very pod's object (its UID), as a kubelet does once nothing of it runs.
async fn finalize(api: &Api<Pod>, shared: &PodShared) {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(shared.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    if let Err(e) = api.delete(&shared.name, &dp).await {
        tracing::debug!(pod = %shared.name, error = %e, "finalizing the pod");
    }
}

#[allow(clippy::too_many_arguments)]
fn start_next(
    ctx: &Arc<Ctx>,
    shared: &Arc<PodShared>,
    pod: &Arc<Pod>,
    m: &Model,
    volumes: &BTreeMap<String, PathBuf>,
    report: &mpsc::UnboundedSender<Report>,
    stop: &watch::Receiver<Option<Stop>>,
    tasks: &mut JoinSet<Option<i32>>,
    next_init: &mut usize,
) {
    let spec = pod.spec.clone().unwrap_or_default();
    let inits = spec.init_containers.unwrap_or_default();
    let policy = Policy::of(pod);
    let mut launch = |c: &k8s_openapi::api::core::v1::Container, init: bool, idx: usize| {
        let spec = Spec {
            ctx: ctx.clone(),
            shared: shared.clone(),
            pod: pod.clone(),
            container: Arc::new(c.clone()),
            init,
            idx,
            policy: if init && policy == Policy::Always {
                Policy::OnFailure
            } else {
                policy
            },
            pod_ip: m.pod_ip.clone().unwrap_or_default(),
            mounts: Vec::new(),
            report: report.clone(),
            stop: stop.clone(),
        };
        match volumes::mounts(c, volumes, ctx.user) {
            Ok(mounts) => {
                tasks.spawn(Spec { mounts, ..spec }.run());
            }
            Err(msg) => {
                let state = json!({"waiting": {"reason": Reason::CreateContainerConfigError.as_str(), "message": msg}});
                let _ = report.send(Report {
                    init,
                    idx,
                    status: json!({"name": c.name, "image": c.image, "imageID": "", "ready": false,
                                   "started": false, "restartCount": 0, "state": state}),
                    ready: false,
                    phase: Phase::Waiting,
                });
            }
        }
    };
    if *next_init < inits.len() {
        let i = *next_init;
        *next_init += 1;
        launch(&inits[i], true, i);
    } else if *next_init == inits.len() {
        *next_init += 1;
        for (i, c) in spec.containers.iter().enumerate() {
            launch(c, false, i);
        }
    }
}

/// The pod's phase from its containers' (the kubelet's rules).
fn phase(m: &Model) -> &'static str {
    if let Some((_, p)) = m.init.iter().find(|(_, p)| *p != Phase::Done(0)) {
        return if matches!(p, Phase::Done(_)) {
            "Failed"
        } else {
            "Pending"
        };
    }
    let phases: Vec<Phase> = m.main.iter().map(|(_, p, _)| *p).collect();
    if phases.iter().all(|p| matches!(p, Phase::Done(_))) && !phases.is_empty() {
        return if phases.iter().all(|p| *p == Phase::Done(0)) {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    if phases
        .iter()
        .any(|p| matches!(p, Phase::Running | Phase::BackOff | Phase::Done(_)))
    {
        "Running"
    } else {
        "Pending"
    }
}

async fn write(api: &Api<Pod>, shared: &PodShared, m: &mut Model) {
    if !m.lost {
        let t = now();
        let inits_done = m.init.iter().all(|(_, p)| *p == Phase::Done(0));
        let all_ready = !m.main.is_empty() && m.main.iter().all(|(_, _, r)| *r);
        for (c, v) in [
            ("Initialized", inits_done),
            ("ContainersReady", all_ready),
            ("Ready", all_ready),
        ] {
            let e = m.conditions.entry(c).or_insert((v, t.clone(), None));
            if e.0 != v {
                *e = (v, t.clone(), None);
            }
        }
    }
    let conditions: Vec<Value> = m
        .conditions
        .iter()
        .map(|(ty, (ok, t, reason))| {
            json!({"type": ty, "status": if *ok { "True" } else { "False" },
                   "lastTransitionTime": t, "reason": reason})
        })
        .collect();
    let mut status = json!({
        "phase": phase(m), "hostIP": "127.0.0.1",
        "startTime": m.start_time, "conditions": conditions,
        "containerStatuses": m.main.iter().map(|(s, _, _)| s.clone()).collect::<Vec<_>>(),
        "initContainerStatuses": m.init.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>(),
    });
    if let Some(ip) = &m.pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{ "ip": ip }]);
    }
    if status == m.last_written {
        return;
    }
    // The UID makes the patch fail rather than touch a new pod of the same name.
    let patch = json!({ "metadata": {"uid": shared.uid}, "status": status });
    match api
        .patch_status(&shared.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => m.last_written = status,
        Err(e) => tracing::debug!(pod = %shared.name, error = %e, "writing pod status"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(init: &[Phase], main: &[Phase]) -> Model {
        Model {
            init: init.iter().map(|p| (Value::Null, *p)).collect(),
            main: main.iter().map(|p| (Value::Null, *p, false)).collect(),
            conditions: BTreeMap::new(),
            last_written: Value::Null,
            pod_ip: None,
            start_time: String::new(),
            lost: false,
        }
    }

    #[test]
    fn the_pods_phase_follows_its_containers() {
        use Phase::*;
        assert_eq!(phase(&model(&[], &[Waiting])), "Pending");
        assert_eq!(phase(&model(&[Running], &[Waiting])), "Pending");
        assert_eq!(phase(&model(&[Done(1)], &[Waiting])), "Failed");
        assert_eq!(phase(&model(&[Done(0)], &[Running, Waiting])), "Running");
        assert_eq!(phase(&model(&[], &[BackOff])), "Running");
        assert_eq!(phase(&model(&[], &[Done(0), Running])), "Running");
        assert_eq!(phase(&model(&[], &[Done(0), Done(0)])), "Succeeded");
        assert_eq!(phase(&model(&[], &[Done(0), Done(2)])), "Failed");
    }
}
