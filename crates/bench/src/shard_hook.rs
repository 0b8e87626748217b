//! l. Sharding with a latency-bound workload (issue 37): N releases of the bench's own chart
//! (`crates/bench/fixtures/shard-hook`: a ConfigMap and a post-install hook Job), worked by
//! one `bosun run --watches` vs three `bosun run --sharding` replicas, each on a fresh control
//! plane. Helm deploys a release only once its hook Job has completed, so a reconcile spends
//! its time waiting, not computing: a replica keeps `--concurrency` such waits open at once,
//! and three replicas three times as many, whatever the cores.
//!
//! The bench's control plane runs no Job controller and no kubelet, so the bench plays the
//! Job controller: it completes each hook Job `--hook-seconds` after it first sees it, with
//! the status a Job controller writes (start and completion times, one success,
//! SuccessCriteriaMet and Complete). A status it cannot write ends the case with that error.
//!
//! Why a Helm hook and not an Ansible fallback role: a fallback reconcile is an
//! ansible-runner + `ansible-playbook` process tree (about 100 MB, Python start-up CPU each
//! time, at most `BOSUN_ANSIBLE_MAX_RUNS` = 4 at once per replica), so on two shared cores
//! 10,000 of them would be bound by the interpreter's CPU and the run limit, not by the wait;
//! a hook Job's wait costs one GET every 500 ms and holds one of the `--concurrency` workers.
//!
//! Figures: the time from the first process start to every release deployed (revision 1,
//! Deployed), the CPU the replicas, the API server with etcd, and this harness used meanwhile,
//! and from them what replicas on separate nodes would do (printed with the rows).
//!
//! Run only when named: `--only shard-hook` (N from `--n`, the delay from `--hook-seconds`).
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_bench::measure::{install_crd, proc_cpu_seconds, server_cpu};
use bosun_testenv::{ControlPlane, Options};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;

use crate::shard::{memberships_lost, Replica};
use crate::{Args, Row, NS};

fn watches() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/shard-hook/watches.yaml")
}

fn flags() -> Vec<String> {
    vec![format!("--watches={}", watches().display())]
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.bosun.dev", "v1", "HookedApp"),
        "hookedapps",
    )
}

/// Installed: revision 1 deployed and the Deployed condition true (only after the hook).
fn is_deployed(o: &DynamicObject) -> bool {
    o.data["status"]["deployedRelease"]["revision"] == 1
        && o.data["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Deployed" && c["status"] == "True")
        })
}

/// A control plane with the chart's CRD and N HookedApps (not yet reconciled).
async fn populate(args: &Args, n: usize) -> anyhow::Result<(ControlPlane, Client)> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    crate::namespace(&client).await?;
    let file = bosun_watches::WatchesFile::load(&watches())?;
    let entry = file
        .entries
        .first()
        .ok_or_else(|| anyhow::anyhow!("{}: no entry", watches().display()))?;
    let flavor = bosun_helm_operator::HelmFlavor::load(entry, &Default::default())?;
    use bosun_watches::Flavor;
    install_crd(&client, &flavor.crd()).await?;
    crate::create_many(&client, &resource(), n, args.concurrency, |i| {
        json!({"apiVersion": "bench.bosun.dev/v1", "kind": "HookedApp",
               "metadata": {"name": format!("app-{i}")}, "spec": {}})
    })
    .await?;
    Ok((cp, client))
}

/// The Job controller's part, for the hook Jobs: each Job of [`NS`] seen unfinished is
/// completed `delay` later. Errors other than the Job being gone come out of `errors`.
struct JobPlayer {
    task: tokio::task::JoinHandle<()>,
    completed: Arc<AtomicUsize>,
    errors: mpsc::UnboundedReceiver<String>,
}

fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// What the Job controller writes when a one-pod Job's pod has succeeded.
fn succeeded(started: Timestamp) -> JobStatus {
    let now = Timestamp::now();
    let condition = |type_: &str| JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some("CompletionsReached".into()),
        message: Some("Reached expected number of succeeded pods".into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    JobStatus {
        start_time: Some(Time(started)),
        completion_time: Some(Time(now)),
        succeeded: Some(1),
        conditions: Some(vec![condition("SuccessCriteriaMet"), condition("Complete")]),
        ..Default::default()
    }
}

/// The answer to a write that named a Job's UID when a successor holds its name.
fn replaced(s: &kube::core::Status) -> bool {
    s.code == 422
        && s.details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid"))
}

fn play_job_controller(client: &Client, delay: Duration) -> JobPlayer {
    let api: Api<Job> = Api::namespaced(client.clone(), NS);
    let completed = Arc::new(AtomicUsize::new(0));
    let (tx, errors) = mpsc::unbounded_channel();
    let done = completed.clone();
    let task = tokio::spawn(async move {
        // By UID: a hook re-run creates a new Job under the same name.
        let mut seen = HashSet::new();
        let jobs = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        futures::pin_mut!(jobs);
        while let Some(job) = jobs.next().await {
            let Ok(job) = job else { continue };
            let Some(uid) = job.uid() else { continue };
            if finished(&job) || !seen.insert(uid.clone()) {
                continue;
            }
            let (api, done, tx) = (api.clone(), done.clone(), tx.clone());
            tokio::spawn(async move {
                let started = Timestamp::now();
                tokio::time::sleep(delay).await;
                let name = job.name_any();
                // With the UID, a successor under the same name is refused, not completed.
                let patch = json!({"metadata": {"uid": uid}, "status": succeeded(started)});
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    // Gone, or replaced: a reconcile cut short (its replica lost its
                    // membership) runs the hook again, deleting this Job and creating a
                    // successor under its name, which the API server tells by the UID.
                    Err(kube::Error::Api(s)) if s.code == 404 || replaced(&s) => {}
                    Err(e) => {
                        let _ = tx.send(format!("Job {name}: {e}"));
                    }
                }
            });
        }
    });
    JobPlayer {
        task,
        completed,
        errors,
    }
}

/// The seconds since `t0` at which each release was first seen deployed, in order, once all
/// `n` are; or the Job player's first error.
async fn converge(
    client: &Client,
    n: usize,
    t0: Instant,
    player: &mut JobPlayer,
) -> anyhow::Result<Vec<f64>> {
    const LIMIT: Duration = Duration::from_secs(7200);
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource());
    let timeline = async {
        let mut met = HashSet::new();
        let mut times = Vec::with_capacity(n);
        let events = watcher(apps, watcher::Config::default())
            .default_backoff()
            .applied_objects();
        futures::pin_mut!(events);
        while let Some(o) = events.next().await {
            // The watcher relists after an error on its own.
            let Ok(o) = o else { continue };
            if is_deployed(&o) && met.insert(o.name_any()) {
                times.push(t0.elapsed().as_secs_f64());
                if met.len() >= n {
                    return Ok(times);
                }
            }
        }
        anyhow::bail!("the watch of the releases ended")
    };
    tokio::select! {
        r = tokio::time::timeout(LIMIT, timeline) => {
            r.map_err(|_| anyhow::anyhow!("not every release was deployed within {LIMIT:?}"))?
        }
        Some(e) = player.errors.recv() => {
            anyhow::bail!("the bench, playing the Job controller, could not complete a hook: {e}")
        }
    }
}

/// The 1-minute load average: the machine is shared, and the runnable processes of others
/// (a build) take cores the figures assume are this run's.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Adds each replica's busy workers to `sums` (total, samples), and the load average to
/// `load`, every 500 ms, until dropped.
async fn sample_workers(live: &[Replica], sums: &mut [(f64, u32)], load: &mut (f64, u32)) {
    loop {
        for (r, s) in live.iter().zip(sums.iter_mut()) {
            if let Some(busy) = r.metric("controller_runtime_active_workers{", "").await {
                s.0 += busy;
                s.1 += 1;
            }
        }
        if let Some(l) = load_average() {
            load.0 += l;
            load.1 += 1;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What one run cost: wall seconds, and CPU seconds of the replicas, of the API server with
/// etcd, and of this harness (its watches and the Job player).
struct Cost {
    seconds: f64,
    /// The first release deployed: start-up (cache sync; sharded, membership and placement).
    first: f64,
    /// Releases deployed per second between the 10th and the 90th percentile: the rate once
    /// started, which start-up does not dilute at small N.
    rate: f64,
    replicas_cpu: f64,
    server_cpu: f64,
    harness_cpu: f64,
    /// Each replica's mean busy workers over the run: how much of its `--concurrency` the
    /// waits filled.
    busy_workers: Vec<f64>,
    /// Reconciles the replicas ended, how many of them in an error, and their mean time (the
    /// hook's wait and everything around it).
    reconciles: f64,
    errors: f64,
    mean_reconcile: f64,
    /// Work started (reconciles and hand-offs) by queue priority: from a watch event (a
    /// user's change, a placement, a child's event) and from a list, a requeue timer or a
    /// retry; and the sharder's label writes. Why the reconciles started.
    started_user: f64,
    started_background: f64,
    label_writes: f64,
    /// The sharder's placement rounds: decided (every object examined) and skipped (nothing
    /// new since the last decided one), summed over the replicas that held the sharder Lease.
    rounds: (f64, f64),
    /// Each replica's CPU seconds and label writes: the one that placed the objects (the
    /// sharder) writes them all.
    per_replica: Vec<(f64, f64)>,
    /// The machine's mean 1-minute load average over the run, everyone's processes counted.
    load: f64,
}

impl Cost {
    /// The share of the machine's cores kept busy.
    fn busy(&self, cores: f64) -> f64 {
        (self.replicas_cpu + self.server_cpu + self.harness_cpu) / (self.seconds * cores)
    }
}

/// One run: its cost, the releases per replica, and whether a replica lost its membership.
async fn run(args: &Args, n: usize, replicas: usize) -> anyhow::Result<(Cost, Vec<usize>, String)> {
    let delay = Duration::try_from_secs_f64(args.hook_seconds).map_err(|_| {
        anyhow::anyhow!(
            "--hook-seconds {}: give a number of seconds, 0 or more",
            args.hook_seconds
        )
    })?;
    let (cp, client) = populate(args, n).await?;
    let mut player = play_job_controller(&client, delay);
    let me = std::process::id();
    let (server0, harness0) = (server_cpu(&cp), proc_cpu_seconds(me));
    let t0 = Instant::now();
    let mut live = Vec::new();
    if replicas == 1 {
        live.push(Replica::start(
            args,
            cp.kubeconfig(),
            "single",
            false,
            &flags(),
        )?);
    } else {
        for i in 0..replicas {
            live.push(Replica::start(
                args,
                cp.kubeconfig(),
                &format!("h{i}"),
                true,
                &flags(),
            )?);
        }
    }
    let mut sums = vec![(0.0, 0u32); live.len()];
    let mut load = (0.0, 0u32);
    let times = tokio::select! {
        r = converge(&client, n, t0, &mut player) => r?,
        () = sample_workers(&live, &mut sums, &mut load) => {
            anyhow::bail!("the worker sampler ended")
        }
    };
    let at = |q: f64| {
        let i = (times.len().saturating_sub(1) as f64 * q).round() as usize;
        times.get(i).copied().unwrap_or_default()
    };
    let mut cost = Cost {
        seconds: t0.elapsed().as_secs_f64(),
        first: at(0.0),
        rate: 0.8 * n as f64 / (at(0.9) - at(0.1)).max(f64::EPSILON),
        replicas_cpu: live.iter().map(|r| proc_cpu_seconds(r.pid)).sum(),
        server_cpu: server_cpu(&cp) - server0,
        harness_cpu: proc_cpu_seconds(me) - harness0,
        busy_workers: sums
            .iter()
            .map(|(total, k)| total / f64::from((*k).max(1)))
            .collect(),
        reconciles: 0.0,
        errors: 0.0,
        mean_reconcile: 0.0,
        started_user: 0.0,
        started_background: 0.0,
        label_writes: 0.0,
        rounds: (0.0, 0.0),
        per_replica: Vec::new(),
        load: load.0 / f64::from(load.1.max(1)),
    };
    let (mut reconciles, mut errors, mut timed, mut seconds) = (0.0, 0.0, 0.0, 0.0);
    for r in &live {
        let count = |with| r.metric("controller_runtime_reconcile_total{", with);
        reconciles += count("").await.unwrap_or_default();
        errors += count("result=\"error\"").await.unwrap_or_default();
        let time = |series| r.metric(series, "");
        timed += time("controller_runtime_reconcile_time_seconds_count{")
            .await
            .unwrap_or_default();
        seconds += time("controller_runtime_reconcile_time_seconds_sum{")
            .await
            .unwrap_or_default();
    }
    cost.reconciles = reconciles;
    cost.errors = errors;
    cost.mean_reconcile = seconds / timed.max(1.0);
    for r in &live {
        let started = |priority| r.metric("workqueue_queue_duration_seconds_count{", priority);
        cost.started_user += started("priority=\"0\"").await.unwrap_or_default();
        cost.started_background += started("priority=\"-100\"").await.unwrap_or_default();
        let writes = r
            .metric("bosun_shard_label_writes_total{", "")
            .await
            .unwrap_or_default();
        cost.label_writes += writes;
        let rounds = |work| r.metric("bosun_shard_rounds_total{", work);
        cost.rounds.0 += rounds("work=\"decided\"").await.unwrap_or_default();
        cost.rounds.1 += rounds("work=\"skipped\"").await.unwrap_or_default();
        cost.per_replica.push((proc_cpu_seconds(r.pid), writes));
    }
    let completed = player.completed.load(Ordering::Relaxed);
    player.task.abort();
    anyhow::ensure!(
        completed >= n,
        "{n} releases deployed but only {completed} hook Jobs completed: a release was \
         deployed without waiting for its hook"
    );
    // Which replica holds each release (one LIST, after the timing).
    let mut by_member: BTreeMap<String, usize> = BTreeMap::new();
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource());
    for o in apps.list_metadata(&ListParams::default()).await?.items {
        let member = o
            .labels()
            .iter()
            .find(|(k, _)| k.starts_with("shard.bosun.dev/"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        *by_member.entry(member).or_default() += 1;
    }
    let names: Vec<String> = live.iter().map(|r| r.name.clone()).collect();
    for r in live {
        r.stop().await;
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Ok((
        cost,
        by_member.into_values().collect(),
        memberships_lost(&names),
    ))
}

fn cost_note(c: &Cost, cores: f64) -> String {
    format!(
        "first release at {:.1} s, {:.1} releases/s from 10 % to 90 %; workers busy on \
         average {:.1?}; {:.0} reconciles ({:.0} errors) of {:.2} s on average; work started \
         {:.0} from watch events, {:.0} from lists, timers and retries; {:.0} sharder label \
         writes; sharder rounds {:.0} decided, {:.0} skipped; CPU s (each replica's, with its label writes: {:.1?}): replicas {:.1}, API server + etcd {:.1}, harness {:.1}; {:.0} % of {cores} cores busy; machine load average {:.1}",
        c.first,
        c.rate,
        c.busy_workers,
        c.reconciles,
        c.errors,
        c.mean_reconcile,
        c.started_user,
        c.started_background,
        c.label_writes,
        c.rounds.0,
        c.rounds.1,
        c.per_replica,
        c.replicas_cpu,
        c.server_cpu,
        c.harness_cpu,
        c.busy(cores) * 100.0,
        c.load
    )
}

/// One replica, then three sharded, at N.
pub async fn case_shard_hook(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    anyhow::ensure!(n > 0, "shard-hook: --n must be at least 1");
    let cores = std::thread::available_parallelism()
        .map(|c| c.get() as f64)
        .unwrap_or(1.0);
    let (d, c) = (args.hook_seconds, args.concurrency as f64);
    // The runtime keeps one worker of two or more for user changes; these releases all come
    // from the initial list, so they get the others.
    let listed = if c >= 2.0 { c - 1.0 } else { c };
    // The wait alone, with every worker they get always busy.
    let ideal = |replicas: f64| n as f64 * d / (listed * replicas);
    eprintln!("[bench]   one replica (hook Jobs complete {d} s after they appear)");
    let (one, _, _) = run(args, n, 1).await?;
    eprintln!("[bench]   three replicas --sharding");
    let (three, placement, lost) = run(args, n, 3).await?;
    let speedup = one.seconds / three.seconds;

    // Replicas on separate nodes: each replica's CPU is its node's, the API server's stays
    // shared. The work per release is what the one-replica run cost (its CPU over N).
    let per_release_replica_ms = one.replicas_cpu / n as f64 * 1000.0;
    let per_release_server_ms = three.server_cpu / n as f64 * 1000.0;
    let three_rate = n as f64 / (one.seconds / 3.0);
    let replica_cores = per_release_replica_ms / 1000.0 * three_rate / 3.0;
    let server_cores = per_release_server_ms / 1000.0 * three_rate;
    let prediction = format!(
        "on separate nodes: three replicas keep 3 × {listed} hook waits open, so they converge in \
         ≈ {:.1} s (one replica's {:.1} s / 3, wait floor {:.1} s), a 3× speed-up, provided \
         each replica has {replica_cores:.2} of its own core ({per_release_replica_ms:.1} ms of \
         CPU per release) and the API server + etcd {server_cores:.2} cores \
         ({per_release_server_ms:.1} ms per release); this machine cannot show it: the three \
         replicas, the API server, etcd and this harness share {cores} cores (three replicas \
         kept {:.0} % of them busy, one replica {:.0} %), so the measured speed-up ({speedup:.2}×) \
         is a floor for separate nodes while their API server keeps up, not their figure",
        one.seconds / 3.0,
        one.seconds,
        ideal(3.0),
        three.busy(cores) * 100.0,
        one.busy(cores) * 100.0,
    );
    let rows = vec![
        Row {
            case: "shard-hook: converge, 1 replica (Helm, hook Job)".into(),
            n,
            seconds: one.seconds,
            cpu_seconds: one.replicas_cpu,
            note: format!(
                "from process start to every release deployed; hook Job {d} s, concurrency {c} \
                 ({listed} for listed objects): wait floor {:.1} s; {}",
                ideal(1.0),
                cost_note(&one, cores)
            ),
            ..Default::default()
        },
        Row {
            case: "shard-hook: converge, 3 replicas --sharding (Helm, hook Job)".into(),
            n,
            seconds: three.seconds,
            cpu_seconds: three.replicas_cpu,
            note: format!(
                "{speedup:.2}× faster than one replica (target ≥ 2.5×), {:.2}× its rate once \
                 started; placement {placement:?}; \
                 wait floor {:.1} s; {}; {lost}",
                three.rate / one.rate,
                ideal(3.0),
                cost_note(&three, cores)
            ),
            ..Default::default()
        },
        Row {
            case: "shard-hook: separate nodes (prediction)".into(),
            n,
            seconds: one.seconds / 3.0,
            note: prediction,
            ..Default::default()
        },
    ];
    for r in &rows {
        eprintln!("[bench]   {}: {:.2} s; {}", r.case, r.seconds, r.note);
    }
    Ok(rows)
}
