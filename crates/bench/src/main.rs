//! bosun's benchmarks, each case on a fresh test control plane (real kube-apiserver of the lane
//! `BOSUN_KUBE_VERSION` selects, current by default):
//! a. MyOwnShell (bosun) vs client-go's sample-controller and, named, vs a controller-runtime
//!    program of the project's own ([`peers`]): N objects → N Deployments + status;
//! b. BookStore convergence vs the raw write floor (the same server-side applies from a bare
//!    client at the same concurrency);
//! c. restart over converged BookStores: mutating requests until idle;
//! d. steady RSS of `bosun run` with N BookStores and their children cached;
//! e.–f. the Helm flavour ([`helm`]); g.–h. VmGroup on vcsim and webhook latency ([`vmgroup`]);
//! i. PostgresCluster on real PostgreSQL: ready, failover, switchover, RSS ([`postgres`]);
//! j. a new object during a restart's re-list, three flavours ([`scale`], only when named);
//! k. one replica vs three with `--sharding`: converge, RSS per replica, kill -9 → rebalanced
//!    ([`shard`], only when named);
//! l. the same with a latency-bound workload, a Helm chart whose install waits for a hook Job
//!    ([`shard_hook`], only when named).
//! Figures go to stdout as a table and, with --json, to a file. Nothing here asserts a timing.
mod ansible;
mod helm;
mod peers;
mod postgres;
mod scale;
mod shard;
mod shard_hook;
mod steady;
mod vmgroup;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bosun_bench::measure::{
    install_crd, is_converged, mutating, wait_until, wait_watched, Counts, Operator,
};
use bosun_bookstore::BookStore;
use bosun_myownshell::MyOwnShell;
use bosun_testenv::{ControlPlane, Options};
use clap::Parser;
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::{json, Value};

#[derive(Parser, Debug)]
#[command(about = "bosun benchmarks against the real API server")]
pub(crate) struct Args {
    /// A short run (N = 100 only), under two minutes.
    #[arg(long)]
    quick: bool,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The bosun binary to measure (build it with --release); by default the one beside this
    /// harness, where cargo builds both.
    #[arg(long, default_value_os_t = sibling_bosun())]
    bosun: PathBuf,
    /// Only these cases (myownshell, sample-controller, bookstore, helm, ansible, render,
    /// vmgroup, webhook, postgres); all when empty. helm-peer and ansible-peer (operator-sdk's
    /// operators) and myownshell-cr (MyOwnShell on controller-runtime), all built by
    /// scripts/setup-peers.sh, run only when named; so do scale (a new object during a
    /// restart's re-list, three flavours, or one: scale-coded|scale-helm|scale-ansible), shard (one replica vs three sharded ones) and
    /// shard-hook (the same, Helm releases waiting for a hook Job).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Override the object counts (comma-separated).
    #[arg(long, value_delimiter = ',')]
    n: Vec<usize>,
    /// Concurrency of bosun's reconciles, of the floor's client and of object creation.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Runs of each case (each on fresh control planes); the table shows the median with the
    /// minimum and maximum, so one slow or fast run does not decide a verdict. Default 3
    /// (1 with --quick, which only shows CI that the cases run).
    #[arg(long)]
    runs: Option<usize>,
    /// shard-hook: seconds from the bench first seeing a hook Job to its marking it complete.
    #[arg(long, default_value_t = 2.0)]
    hook_seconds: f64,
}

const NS: &str = "bench";

/// `bosun` in this executable's directory: cargo puts both binaries of one build there,
/// wherever CARGO_TARGET_DIR points.
fn sibling_bosun() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("bosun")))
        .unwrap_or_else(|| PathBuf::from("bosun"))
}

async fn namespace(client: &Client) -> anyhow::Result<()> {
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// Creates `n` objects of `ar` from `make(i)`, `conc` at a time.
async fn create_many(
    client: &Client,
    ar: &ApiResource,
    n: usize,
    conc: usize,
    make: impl Fn(usize) -> Value,
) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, ar);
    let objs: Vec<DynamicObject> = (0..n)
        .map(|i| serde_json::from_value(make(i)))
        .collect::<Result<_, _>>()?;
    stream::iter(objs)
        .map(|o| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &o).await.map(|_| ()) }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

async fn deployments(client: &Client) -> anyhow::Result<usize> {
    Ok(Api::<Deployment>::namespaced(client.clone(), NS)
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len())
}

/// One case's figures from one run.
#[derive(Default, Clone, serde::Serialize)]
pub(crate) struct Row {
    case: String,
    n: usize,
    seconds: f64,
    peak_rss_mb: f64,
    cpu_seconds: f64,
    writes: BTreeMap<String, f64>,
    /// bosun's time over this floor's, in the same run (floor rows only).
    ratio: Option<f64>,
    note: String,
}

/// Median, minimum and maximum of one figure over the runs.
#[derive(Default, Clone, Copy, serde::Serialize)]
pub(crate) struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

impl Stat {
    fn of(mut xs: Vec<f64>) -> Stat {
        xs.sort_by(f64::total_cmp);
        match xs.len() {
            0 => Stat::default(),
            n => Stat {
                median: if n % 2 == 1 {
                    xs[n / 2]
                } else {
                    (xs[n / 2 - 1] + xs[n / 2]) / 2.0
                },
                min: xs[0],
                max: xs[n - 1],
            },
        }
    }

    fn show(&self, runs: usize) -> String {
        if runs > 1 && self.max > 0.0 {
            format!("{:.2} ({:.2}-{:.2})", self.median, self.min, self.max)
        } else {
            format!("{:.2}", self.median)
        }
    }
}

/// One case over every run: medians with their ranges; writes are the most any run made;
/// the note is the median run's.
#[derive(serde::Serialize)]
pub(crate) struct Summary {
    case: String,
    n: usize,
    runs: usize,
    seconds: Stat,
    peak_rss_mb: Stat,
    cpu_seconds: Stat,
    ratio: Option<Stat>,
    writes: BTreeMap<String, f64>,
    note: String,
}

impl Summary {
    fn of(runs: &[Row]) -> Summary {
        let stat = |f: fn(&Row) -> f64| Stat::of(runs.iter().map(f).collect());
        let seconds = stat(|r| r.seconds);
        let median_run = runs
            .iter()
            .min_by(|a, b| {
                (a.seconds - seconds.median)
                    .abs()
                    .total_cmp(&(b.seconds - seconds.median).abs())
            })
            .cloned()
            .unwrap_or_default();
        let mut writes = BTreeMap::new();
        for r in runs {
            for (k, v) in &r.writes {
                let w = writes.entry(k.clone()).or_insert(0.0_f64);
                *w = w.max(*v);
            }
        }
        let ratios: Vec<f64> = runs.iter().filter_map(|r| r.ratio).collect();
        Summary {
            case: median_run.case.clone(),
            n: median_run.n,
            runs: runs.len(),
            seconds,
            peak_rss_mb: stat(|r| r.peak_rss_mb),
            cpu_seconds: stat(|r| r.cpu_seconds),
            ratio: (!ratios.is_empty()).then(|| Stat::of(ratios)),
            writes,
            note: median_run.note,
        }
    }
}

/// Runs `case` `runs` times and summarises each of its rows over the runs.
async fn repeated<F, Fut>(runs: usize, mut case: F) -> anyhow::Result<Vec<Summary>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Vec<Row>>>,
{
    let mut all: Vec<Vec<Row>> = Vec::new();
    for run in 0..runs.max(1) {
        if runs > 1 {
            eprintln!("[bench]   run {} of {runs}", run + 1);
        }
        for (i, row) in case().await?.into_iter().enumerate() {
            if all.len() <= i {
                all.push(Vec::new());
            }
            all[i].push(row);
        }
    }
    Ok(all.iter().map(|rows| Summary::of(rows)).collect())
}

/// Waits until the N MyOwnShells of [`NS`] each have their Deployment and a status that names
/// the generation it describes (whichever operator wrote them).
async fn shells_converged(client: &Client, n: usize, limit: Duration) -> anyhow::Result<()> {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), NS);
    wait_until(limit, || async {
        if deployments(client).await? < n {
            return Ok(false);
        }
        let list = shells.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter(|s| {
                s.status
                    .as_ref()
                    .is_some_and(|st| st.observed_generation.is_some())
            })
            .count()
            == n)
    })
    .await
}

async fn case_myownshell(args: &Args, n: usize) -> anyhow::Result<Row> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    namespace(&client).await?;
    install_crd(&client, &MyOwnShell::crd()).await?;
    let op = Operator::bosun(&args.bosun, cp.kubeconfig(), "myownshell", args.concurrency).await?;
    let before = Counts::read(&cp, &client).await?;
    let t0 = Instant::now();
    let ar = ApiResource::erase::<MyOwnShell>(&());
    create_many(&client, &ar, n, args.concurrency, |i| {
        json!({"apiVersion": "my-first-operator.jgato.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": format!("shell-{i}")}, "spec": {"size": 1}})
    })
    .await?;
    shells_converged(&client, n, Duration::from_secs(600)).await?;
    let seconds = t0.elapsed().as_secs_f64();
    let after = Counts::read(&cp, &client).await?;
    let (peak, cpu) = (op.peak_rss_mb(), op.cpu_seconds());
    let (anon, file) = op.rss_split_mb();
    op.stop().await;
    Ok(Row {
        ratio: None,
        case: "myownshell (bosun)".into(),
        n,
        seconds,
        peak_rss_mb: peak,
        cpu_seconds: cpu,
        writes: mutating(&before, &after, &["deployments", "myownshells"]),
        note: format!(
            "concurrency {}, no client rate limit; now {anon:.1} MB anonymous + {file:.1} MB of the binary's pages",
            args.concurrency
        ),
    })
}

async fn case_sample_controller(args: &Args, n: usize) -> anyhow::Result<Row> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    namespace(&client).await?;
    let assets = bosun_testenv::assets_dir();
    let crd_yaml = std::fs::read_to_string(assets.join("sample-controller-crd.yaml"))
        .context("sample-controller CRD (run scripts/setup-assets.sh)")?;
    // apiextensions.k8s.io/v1, as sample-controller ships it since 1.22.
    let crd: CustomResourceDefinition = serde_yaml::from_str(&crd_yaml)?;
    bosun_testenv::kit::install_crds(&client, [crd]).await?;
    let op =
        Operator::sample_controller(&assets.join("sample-controller"), cp.kubeconfig()).await?;
    let before = Counts::read(&cp, &client).await?;
    let t0 = Instant::now();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"),
        "foos",
    );
    create_many(&client, &ar, n, args.concurrency, |i| {
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": format!("foo-{i}")},
               "spec": {"deploymentName": format!("foo-{i}"), "replicas": 1}})
    })
    .await?;
    // sample-controller writes each Foo's status with UpdateStatus (a PUT on foos/status);
    // count those writes as sent requests (a plain PUT too, as older releases sent).
    let puts = |c: &Counts| c.get("PUT", "foos", "") + c.get("PUT", "foos", "status");
    let puts_before = puts(&before);
    wait_until(Duration::from_secs(1200), || async {
        if deployments(&client).await? < n {
            return Ok(false);
        }
        Ok(puts(&Counts::read(&cp, &client).await?) - puts_before >= n as f64)
    })
    .await?;
    let seconds = t0.elapsed().as_secs_f64();
    let after = Counts::read(&cp, &client).await?;
    let (peak, cpu) = (op.peak_rss_mb(), op.cpu_seconds());
    let (anon, file) = op.rss_split_mb();
    op.stop().await;
    Ok(Row {
        ratio: None,
        case: "sample-controller (client-go)".into(),
        n,
        seconds,
        peak_rss_mb: peak,
        cpu_seconds: cpu,
        writes: mutating(&before, &after, &["deployments", "foos"]),
        note: format!("client-go defaults: 5 QPS, burst 10, 2 workers; status = its Foo Update sent; now {anon:.1} MB anonymous + {file:.1} MB of the binary's pages"),
    })
}

fn bookstore(i: usize) -> Value {
    json!({"apiVersion": "charts.example.com/v1", "kind": "BookStore", "metadata": {"name": format!("store-{i}")}, "spec": {}})
}

/// b, c and d for one N: convergence, restart writes, steady RSS.
async fn case_bookstore(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    namespace(&client).await?;
    install_crd(&client, &bosun_bookstore::api::crd()).await?;
    let ar = ApiResource::erase::<BookStore>(&());
    create_many(&client, &ar, n, args.concurrency, bookstore).await?;
    let bss: Api<BookStore> = Api::namespaced(client.clone(), NS);
    let before = Counts::read(&cp, &client).await?;
    let t0 = Instant::now();
    let op = Operator::bosun(&args.bosun, cp.kubeconfig(), "bookstore", args.concurrency).await?;
    let ready_after = op.wait_ready().await;
    // Seen through a watch, as the Helm and Ansible cases: no LIST load on the API server
    // while bosun works, and the end seen when it happens.
    wait_watched(bss, n, Duration::from_secs(900), is_converged).await?;
    let from_start = t0.elapsed().as_secs_f64();
    // Convergence work proper: from caches synced (/readyz) to the last status.
    let seconds = from_start - ready_after;
    let after = Counts::read(&cp, &client).await?;
    let resources = [
        "deployments",
        "statefulsets",
        "services",
        "bookstores",
        "persistentvolumeclaims",
        "pods",
    ];
    let converge = Row {
        ratio: None,
        case: "bookstore converge (bosun)".into(),
        n,
        seconds,
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        writes: mutating(&before, &after, &resources),
        note: format!(
            "from caches synced; {from_start:.2} s from process start; 5 children + status each"
        ),
    };
    // d. steady RSS with everything cached: idle, then past bosun's 10 s heap trim.
    op.wait_idle(Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (anon, file) = op.rss_split_mb();
    let steady = Row {
        case: "bookstore steady RSS (bosun)".into(),
        n,
        peak_rss_mb: op.rss_mb(),
        note: format!(
            "VmRSS idle after convergence, {} children cached: {anon:.1} MB anonymous (heap, stacks) + {file:.1} MB of the binary's pages",
            n * 5
        ),
        ..Default::default()
    };
    // c. restart over converged objects.
    op.stop().await;
    let before = Counts::read(&cp, &client).await?;
    let op = Operator::bosun(&args.bosun, cp.kubeconfig(), "bookstore", args.concurrency).await?;
    op.wait_idle(Duration::from_secs(3)).await;
    let after = Counts::read(&cp, &client).await?;
    let writes = mutating(&before, &after, &resources);
    let restart = Row {
        ratio: None,
        case: "bookstore restart (bosun)".into(),
        n,
        seconds: op.uptime(),
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        note: format!(
            "{:.0} mutating requests until idle",
            writes.values().copied().fold(0.0, |a, b| a + b)
        ),
        writes,
    };
    op.stop().await;
    drop(cp);

    // The raw write floor, on a fresh control plane: the same applies from a bare client.
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    namespace(&client).await?;
    install_crd(&client, &bosun_bookstore::api::crd()).await?;
    create_many(&client, &ar, n, args.concurrency, bookstore).await?;
    let stores = bss_list(&client).await?;
    let mut writes: Vec<(ApiResource, String, Value, bool)> = Vec::new();
    for bs in &stores {
        writes.extend(floor_requests(bs)?);
    }
    let before = Counts::read(&cp, &client).await?;
    let t0 = Instant::now();
    let pp = PatchParams::apply("bench-floor").force();
    stream::iter(writes)
        .map(|(ar, name, body, status)| {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
            let pp = pp.clone();
            async move {
                if status {
                    api.patch_status(&name, &pp, &Patch::Apply(&body))
                        .await
                        .map(|_| ())
                } else {
                    api.patch(&name, &pp, &Patch::Apply(&body))
                        .await
                        .map(|_| ())
                }
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let floor_s = t0.elapsed().as_secs_f64();
    let after = Counts::read(&cp, &client).await?;
    let floor = Row {
        case: "bookstore raw write floor".into(),
        n,
        seconds: floor_s,
        writes: mutating(&before, &after, &resources),
        ratio: Some(seconds / floor_s),
        note: format!(
            "bare client, concurrency {}; bosun/floor = {:.2}",
            args.concurrency,
            seconds / floor_s
        ),
        ..Default::default()
    };
    Ok(vec![converge, floor, restart, steady])
}

async fn bss_list(client: &Client) -> anyhow::Result<Vec<BookStore>> {
    Ok(Api::<BookStore>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items)
}

/// What bosun writes for one BookStore: its five children and its status.
fn floor_requests(bs: &BookStore) -> anyhow::Result<Vec<(ApiResource, String, Value, bool)>> {
    use bosun_bookstore::build::Children;
    let plan = bosun_bookstore::validate::validate(bs)
        .map_err(|p| anyhow::anyhow!("{}: {}", p.reason, p.message))?;
    let children = Children::build(&plan);
    let mut out = Vec::new();
    let mut push = |ar: ApiResource, v: Value| {
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        out.push((ar, name, v, false));
    };
    let with_kind = |mut v: Value, api_version: &str, kind: &str| {
        v["apiVersion"] = json!(api_version);
        v["kind"] = json!(kind);
        v
    };
    let dep = ApiResource::erase::<Deployment>(&());
    let svc = ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&());
    let sts = ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&());
    push(
        dep,
        with_kind(
            serde_json::to_value(&children.deployment)?,
            "apps/v1",
            "Deployment",
        ),
    );
    for s in children.services() {
        push(
            svc.clone(),
            with_kind(serde_json::to_value(s)?, "v1", "Service"),
        );
    }
    push(
        sts,
        with_kind(
            serde_json::to_value(&children.statefulset)?,
            "apps/v1",
            "StatefulSet",
        ),
    );
    let status = json!({"apiVersion": "charts.example.com/v1", "kind": "BookStore",
        "status": {"observedGeneration": bs.metadata.generation, "app": "0/1", "db": "0/1"}});
    out.push((
        ApiResource::erase::<BookStore>(&()),
        bs.name_any(),
        status,
        true,
    ));
    Ok(out)
}

fn print(rows: &[Summary]) {
    println!(
        "{:<32} {:>6} {:>4} {:>22} {:>22} {:>8}  {:<40} note",
        "case",
        "N",
        "runs",
        "seconds (min-max)",
        "RSS MB (min-max)",
        "CPU s",
        "writes by verb (most of any run)"
    );
    for r in rows {
        let writes = r
            .writes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let ratio = r
            .ratio
            .map(|s| format!("bosun/floor median {} | ", s.show(r.runs)))
            .unwrap_or_default();
        println!(
            "{:<32} {:>6} {:>4} {:>22} {:>22} {:>8.2}  {:<40} {ratio}{}",
            r.case,
            r.n,
            r.runs,
            r.seconds.show(r.runs),
            r.peak_rss_mb.show(r.runs),
            r.cpu_seconds.median,
            writes,
            r.note
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    args.runs = Some(args.runs.unwrap_or(if args.quick { 1 } else { 3 }).max(1));
    anyhow::ensure!(
        args.bosun.exists(),
        "{} not found: build it with `cargo build --release -p bosun` (bench/run does)",
        args.bosun.display()
    );
    let (mut shell_ns, mut store_ns): (Vec<usize>, Vec<usize>) = if args.quick {
        (vec![100], vec![100])
    } else {
        (vec![100, 300, 1000], vec![100, 1000])
    };
    if !args.n.is_empty() {
        shell_ns = args.n.clone();
        store_ns = args.n.clone();
    }
    let runs = args.runs.unwrap_or(1);
    let run = |case: &str| args.only.is_empty() || args.only.iter().any(|o| o == case);
    let mut rows: Vec<Summary> = Vec::new();
    // The controller-runtime peer only when named: it needs scripts/setup-peers.sh's build.
    let cr_peer = args.only.iter().any(|o| o == "myownshell-cr");
    for &n in shell_ns
        .iter()
        .filter(|_| run("myownshell") || run("sample-controller") || cr_peer)
    {
        eprintln!("[bench] myownshell vs its peers, N = {n}");
        // All are run in turn within each run, so a slow spell of the machine hits each.
        let mut shells = Vec::new();
        let mut peers_rows: Vec<Vec<Row>> = vec![Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..runs {
            if run("myownshell") {
                let r = case_myownshell(&args, n).await?;
                eprintln!(
                    "[bench]   bosun {:.2} s / {:.1} MB",
                    r.seconds, r.peak_rss_mb
                );
                shells.push(r);
            }
            if run("sample-controller") {
                peers_rows[0].push(case_sample_controller(&args, n).await?);
            }
            if cr_peer {
                peers_rows[1].push(peers::case_myownshell_cr(&args, n, false).await?);
                peers_rows[2].push(peers::case_myownshell_cr(&args, n, true).await?);
            }
            for r in peers_rows.iter().filter_map(|rows| rows.last()) {
                eprintln!(
                    "[bench]   {} {:.2} s / {:.1} MB",
                    r.case, r.seconds, r.peak_rss_mb
                );
            }
        }
        for samples in peers_rows.iter_mut() {
            if shells.is_empty() || samples.is_empty() {
                continue;
            }
            // bosun's share of the peer's peak RSS and its speed-up, run by run.
            let share: Vec<f64> = shells
                .iter()
                .zip(samples.iter())
                .map(|(b, s)| b.peak_rss_mb / s.peak_rss_mb)
                .collect();
            let speed: Vec<f64> = shells
                .iter()
                .zip(samples.iter())
                .map(|(b, s)| s.seconds / b.seconds)
                .collect();
            let (share, speed) = (Stat::of(share), Stat::of(speed));
            for r in samples.iter_mut() {
                r.note = format!(
                    "{}; bosun's peak RSS / this one's: median {}; speed-up: median {}",
                    r.note,
                    share.show(runs),
                    speed.show(runs)
                );
            }
        }
        for rows_of_case in std::iter::once(shells).chain(peers_rows) {
            if !rows_of_case.is_empty() {
                rows.push(Summary::of(&rows_of_case));
            }
        }
    }
    for &n in store_ns.iter().filter(|_| run("bookstore")) {
        eprintln!("[bench] bookstore, N = {n}");
        rows.extend(repeated(runs, || case_bookstore(&args, n)).await?);
    }
    for &n in store_ns.iter().filter(|_| run("helm")) {
        eprintln!("[bench] helm chart operator, N = {n}");
        rows.extend(repeated(runs, || helm::case_helm(&args, n)).await?);
    }
    for &n in store_ns.iter().filter(|_| run("ansible")) {
        eprintln!("[bench] ansible role operator, N = {n}");
        rows.extend(repeated(runs, || ansible::case_ansible(&args, n)).await?);
    }
    // operator-sdk's operators beside bosun's flavours: only when named, as they need
    // scripts/setup-peers.sh's build first.
    let named = |case: &str| args.only.iter().any(|o| o == case);
    for &n in store_ns.iter().filter(|_| named("helm-peer")) {
        eprintln!("[bench] helm-operator vs bosun, N = {n}");
        rows.extend(repeated(runs, || peers::case_helm_peer(&args, n)).await?);
    }
    for &n in store_ns.iter().filter(|_| named("ansible-peer")) {
        eprintln!("[bench] ansible-operator vs bosun, N = {n}");
        rows.extend(repeated(runs, || peers::case_ansible_peer(&args, n)).await?);
    }
    for &n in store_ns.iter().filter(|_| scale::named(&args)) {
        eprintln!("[bench] a new object during a restart's re-list, N = {n}");
        rows.extend(repeated(runs, || scale::case_scale(&args, n)).await?);
    }
    for &n in store_ns.iter().filter(|_| named("shard")) {
        eprintln!("[bench] sharding: one replica vs three, N = {n}");
        rows.extend(repeated(runs, || shard::case_shard(&args, n)).await?);
    }
    for &n in store_ns.iter().filter(|_| named("shard-hook")) {
        eprintln!(
            "[bench] sharding, latency-bound (Helm hook Jobs): one replica vs three, N = {n}"
        );
        rows.extend(repeated(runs, || shard_hook::case_shard_hook(&args, n)).await?);
    }
    if run("render") {
        eprintln!("[bench] helm render");
        rows.extend(
            helm::case_render(&args.bosun, args.quick)?
                .iter()
                .map(|r| Summary::of(std::slice::from_ref(r))),
        );
    }
    if run("vmgroup") {
        // 20 VMs in --quick too: vcsim clones in milliseconds, the case takes seconds.
        for delays in [false, true] {
            eprintln!("[bench] vmgroup on vcsim, 0 → 20 VMs → 0, task delays: {delays}");
            rows.extend(repeated(runs, || vmgroup::case_vmgroup(20, 4, delays)).await?);
        }
    }
    if run("webhook") {
        let secs = if args.quick { 2 } else { 10 };
        eprintln!("[bench] webhook latency, 200 reviews/s for {secs} s");
        rows.extend(repeated(runs, || vmgroup::case_webhook(200, secs)).await?);
    }
    if run("postgres") {
        let (rounds, clusters) = if args.quick { (1, 3) } else { (5, 50) };
        eprintln!("[bench] postgres on real PostgreSQL: {rounds} failovers and switchovers, then {clusters} more clusters");
        rows.extend(
            repeated(runs, || {
                postgres::case_postgres(&args.bosun, rounds, clusters)
            })
            .await?,
        );
    }
    println!();
    print(&rows);
    if let Some(path) = &args.json {
        let machine = json!({"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), "apiserver": bosun_testenv::selected_version()?});
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json!({"machine": machine, "rows": rows}))?,
        )?;
        eprintln!("[bench] wrote {}", path.display());
    }
    Ok(())
}
