//! k. Sharding (issue 37): N coded BookStores worked by one `bosun run` vs by three `bosun run
//! --sharding` replicas (separate processes on one control plane each, the same kind of
//! control plane for both). Figures: the time to converge (every BookStore's status for its
//! generation, from the first process start), the steady RSS per replica (VmRSS idle after
//! convergence, past the at-rest heap trim; the median over the replicas), and, sharded, the
//! time from a `kill -9` of one replica to every object labelled with a live replica, each
//! survivor caching exactly its share and having reconciled at least as many times more as it
//! gained objects (the runtime's success counter: a moved object is new in its shard, so it
//! is reconciled there). The replica killed is one that does not place objects (the sharder's
//! own death adds its Lease's expiry); the note names it.
//!
//! Run only when named: `--only shard` (N from `--n`).
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bosun_bench::measure::{install_crd, is_converged, proc_status, wait_watched};
use bosun_bookstore::BookStore;
use bosun_testenv::{ControlPlane, Options};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::core::{ApiResource, PartialObjectMeta};
use kube::runtime::watcher::{self, watcher};
use kube::{Client, CustomResourceExt, ResourceExt};

use crate::{Args, Row, NS};

const SHARD_LABEL: &str = "shard.bosun.dev/bookstore";
pub(crate) const LEASE: &str = "bosun-bench-leader";

fn bookstore_flags() -> Vec<String> {
    vec!["--operators=bookstore".into()]
}

/// Where a replica's warnings go.
fn log_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("bosun-bench-shard-{name}.log"))
}

/// "h0 lost its membership 2 times, …" for the replicas whose log says they fell back to
/// standby (a lease renewal that missed its deadline), or that none did. Said with the
/// figures: a replica that stops and rejoins works less of the run.
pub(crate) fn memberships_lost(names: &[&str]) -> String {
    let lost: Vec<String> = names
        .iter()
        .filter_map(|name| {
            let log = std::fs::read_to_string(log_path(name)).unwrap_or_default();
            let times = log.matches("lost leadership").count();
            (times > 0).then(|| format!("{name} {times}×"))
        })
        .collect();
    if lost.is_empty() {
        "no replica lost its membership".into()
    } else {
        format!(
            "memberships lost (lease renewals past their deadline, back to standby): {}",
            lost.join(", ")
        )
    }
}

/// One `bosun run` process, named for its membership (`POD_NAME`).
pub(crate) struct Replica {
    pub(crate) name: String,
    child: tokio::process::Child,
    pub(crate) pid: u32,
    metrics: u16,
}

impl Replica {
    /// `bosun run` with the operator `flags` (`--operators=…`, `--watches=…`), sharded or not.
    pub(crate) fn start(
        args: &Args,
        kubeconfig: &std::path::Path,
        name: &str,
        sharded: bool,
        flags: &[String],
    ) -> anyhow::Result<Replica> {
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = log_path(name);
        let mut cmd = tokio::process::Command::new(&args.bosun);
        cmd.arg("run")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(flags)
            .arg(format!("--concurrency={}", args.concurrency))
            .arg(format!("--metrics-addr=127.0.0.1:{metrics}"))
            .arg("--probe-addr=off");
        if sharded {
            cmd.arg("--sharding")
                .arg(format!("--lease-name={LEASE}"))
                .arg(format!("--lease-namespace={NS}"));
        }
        let child = cmd
            .env("POD_NAME", name)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            // Its warnings, kept for a look when a figure is odd.
            .stderr(
                std::fs::File::create(log)
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .kill_on_drop(true)
            .spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow::anyhow!("bosun run {name} exited at once"))?;
        Ok(Replica {
            name: name.into(),
            child,
            pid,
            metrics,
        })
    }

    async fn metrics(&self) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics))
            .await
            .ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .await
            .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        Some(buf)
    }

    /// The sum of the series whose lines start with `prefix` and contain `with`.
    pub(crate) async fn metric(&self, prefix: &str, with: &str) -> Option<f64> {
        let text = self.metrics().await?;
        Some(
            text.lines()
                .filter(|l| l.starts_with(prefix) && l.contains(with))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// Objects in its child caches (`bosun_cached_children`, every controller and kind).
    async fn cached_children(&self) -> Option<f64> {
        self.metric("bosun_cached_children{", "").await
    }

    async fn successes(&self) -> Option<f64> {
        self.metric("controller_runtime_reconcile_total{", "result=\"success\"")
            .await
    }

    /// VmRSS, and its anonymous (heap, stacks) and file-backed (the binary's pages) parts,
    /// in MB.
    fn rss_mb(&self) -> (f64, f64, f64) {
        let kb = |k| proc_status(self.pid, k) / 1024.0;
        (kb("VmRSS:"), kb("RssAnon:"), kb("RssFile:"))
    }

    /// Waits until the reconcile count has not moved and no worker is busy for `quiet`
    /// (at most two minutes, as the other cases' idle wait).
    async fn wait_idle(&self, quiet: Duration) {
        let mut last = -1.0;
        let mut since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            let now = self
                .metric("controller_runtime_reconcile_total{", "")
                .await
                .unwrap_or(-1.0);
            let active = self
                .metric("controller_runtime_active_workers{", "")
                .await
                .unwrap_or(1.0);
            if now != last || active > 0.0 {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub(crate) async fn stop(mut self) {
        // SAFETY: signalling our own child process.
        unsafe {
            kill(self.pid as i32, 15);
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

fn split(rss: &[(f64, f64, f64)]) -> String {
    rss.iter()
        .map(|(all, anon, file)| format!("{all:.1} MB = {anon:.1} anonymous + {file:.1} file"))
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Object name → the member its shard label names (absent: not placed), kept current by a
/// metadata watch so that waiting on placement puts no LIST of N objects on the server.
type Placement = Arc<Mutex<BTreeMap<String, Option<String>>>>;

fn watch_placement(client: &Client) -> (Placement, tokio::task::JoinHandle<()>) {
    let map: Placement = Arc::default();
    let api: Api<PartialObjectMeta<BookStore>> = Api::namespaced(client.clone(), NS);
    let m = map.clone();
    let task = tokio::spawn(async move {
        let mut listing: Option<BTreeMap<String, Option<String>>> = None;
        let events = watcher(api, watcher::Config::default());
        futures::pin_mut!(events);
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { continue };
            let owner = |o: &PartialObjectMeta<BookStore>| o.labels().get(SHARD_LABEL).cloned();
            match ev {
                watcher::Event::Init => listing = Some(BTreeMap::new()),
                watcher::Event::InitApply(o) => {
                    listing
                        .get_or_insert_with(BTreeMap::new)
                        .insert(o.name_any(), owner(&o));
                }
                watcher::Event::InitDone => {
                    if let (Some(l), Ok(mut g)) = (listing.take(), m.lock()) {
                        *g = l;
                    }
                }
                watcher::Event::Apply(o) => {
                    if let Ok(mut g) = m.lock() {
                        g.insert(o.name_any(), owner(&o));
                    }
                }
                watcher::Event::Delete(o) => {
                    if let Ok(mut g) = m.lock() {
                        g.remove(&o.name_any());
                    }
                }
            }
        }
    });
    (map, task)
}

/// Each live replica's share when all `n` objects are labelled with live replicas; else None.
fn shares(p: &Placement, n: usize, live: &[&Replica]) -> Option<Vec<usize>> {
    let g = p.lock().ok()?;
    if g.len() != n {
        return None;
    }
    let mut counts = vec![0usize; live.len()];
    for owner in g.values() {
        let i = live
            .iter()
            .position(|r| owner.as_deref() == Some(r.name.as_str()))?;
        counts[i] += 1;
    }
    Some(counts)
}

/// Waits until every object is placed on `live`, each replica caches exactly its share and
/// has at least `min_ok[i]` successful reconciles; returns the shares and success counts.
async fn settled(
    p: &Placement,
    n: usize,
    live: &[&Replica],
    min_ok: &[f64],
    limit: Duration,
) -> anyhow::Result<(Vec<usize>, Vec<f64>)> {
    let start = Instant::now();
    loop {
        if let Some(share) = shares(p, n, live) {
            let mut oks = Vec::new();
            for (i, r) in live.iter().enumerate() {
                let cached = r.metric("bosun_cached_objects{", "").await;
                let ok = r.successes().await;
                match (cached, ok) {
                    (Some(c), Some(ok)) if c == share[i] as f64 && ok >= min_ok[i] => oks.push(ok),
                    _ => break,
                }
            }
            if oks.len() == live.len() {
                return Ok((share, oks));
            }
        }
        anyhow::ensure!(
            start.elapsed() < limit,
            "placement on {:?} did not settle within {limit:?} (logs: {}/bosun-bench-shard-*.log)",
            live.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            std::env::temp_dir().display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A control plane with N BookStores (not yet reconciled).
async fn populate(args: &Args, n: usize) -> anyhow::Result<(ControlPlane, Client)> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    crate::namespace(&client).await?;
    install_crd(&client, &BookStore::crd()).await?;
    let ar = ApiResource::erase::<BookStore>(&());
    crate::create_many(&client, &ar, n, args.concurrency, crate::bookstore).await?;
    Ok((cp, client))
}

/// Idle, then past bosun's at-rest heap trim (every 5 s once quiet), as the bookstore case:
/// each replica's RSS and the children its caches hold then.
async fn steady(replicas: &[&Replica]) -> (Vec<(f64, f64, f64)>, Vec<f64>) {
    for r in replicas {
        r.wait_idle(Duration::from_secs(3)).await;
    }
    tokio::time::sleep(Duration::from_secs(11)).await;
    let rss = replicas.iter().map(|r| r.rss_mb()).collect();
    let mut children = Vec::new();
    for r in replicas {
        children.push(r.cached_children().await.unwrap_or(-1.0));
    }
    (rss, children)
}

/// "17000, 16500 and 16500" (a replica that did not answer: -1).
fn counts(children: &[f64]) -> String {
    children
        .iter()
        .map(|c| format!("{c:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn one_replica(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    let (cp, client) = populate(args, n).await?;
    let t0 = Instant::now();
    let r = Replica::start(args, cp.kubeconfig(), "single", false, &bookstore_flags())?;
    let bss: Api<BookStore> = Api::namespaced(client.clone(), NS);
    wait_watched(bss, n, Duration::from_secs(3600), is_converged).await?;
    let seconds = t0.elapsed().as_secs_f64();
    let (rss, children) = steady(&[&r]).await;
    r.stop().await;
    Ok(vec![
        Row {
            case: "shard: converge, 1 replica (coded BookStore)".into(),
            n,
            seconds,
            note: format!(
                "bosun run without --sharding; from process start to every status; concurrency {}",
                args.concurrency
            ),
            ..Default::default()
        },
        Row {
            case: "shard: steady RSS, 1 replica".into(),
            n,
            peak_rss_mb: median(rss.iter().map(|r| r.0).collect()),
            note: format!(
                "VmRSS idle after convergence, {n} BookStores + {} children cached \
                 (bosun_cached_children; {} made): {}",
                counts(&children),
                n * 5,
                split(&rss)
            ),
            ..Default::default()
        },
    ])
}

async fn three_replicas(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    let (cp, client) = populate(args, n).await?;
    let (placement, watch) = watch_placement(&client);
    let t0 = Instant::now();
    let mut replicas = Vec::new();
    for name in ["r0", "r1", "r2"] {
        replicas.push(Replica::start(
            args,
            cp.kubeconfig(),
            name,
            true,
            &bookstore_flags(),
        )?);
    }
    let bss: Api<BookStore> = Api::namespaced(client.clone(), NS);
    wait_watched(bss, n, Duration::from_secs(3600), is_converged).await?;
    let seconds = t0.elapsed().as_secs_f64();
    let all: Vec<&Replica> = replicas.iter().collect();
    let limit = Duration::from_secs(1800);
    settled(&placement, n, &all, &[0.0; 3], limit).await?;
    let (rss, children) = steady(&all).await;
    // Counted after the idle wait, so only the reconciles the kill causes come after.
    let (share, before) = settled(&placement, n, &all, &[0.0; 3], limit).await?;

    // The replica to kill: one that does not hold the sharder Lease.
    let sharder = Api::<Lease>::namespaced(client.clone(), NS)
        .get_opt(&format!("{LEASE}-sharder"))
        .await?
        .and_then(|l| l.spec?.holder_identity)
        .unwrap_or_default();
    let victim = replicas
        .iter()
        .position(|r| r.name != sharder)
        .ok_or_else(|| anyhow::anyhow!("no replica other than the sharder {sharder:?}"))?;
    let mut dead = replicas.remove(victim);
    let gone = share[victim];
    let mut survivors_before = Vec::new();
    let mut min_ok = Vec::new();
    for (i, b) in before.iter().enumerate().filter(|(i, _)| *i != victim) {
        survivors_before.push(share[i]);
        min_ok.push(*b);
    }
    let killed = Instant::now();
    dead.child.start_kill()?;
    let _ = dead.child.wait().await;
    let live: Vec<&Replica> = replicas.iter().collect();
    // Each survivor must have reconciled at least the objects it gained; the gains are known
    // only from the placement, so wait for it first, then for the counts.
    let (after, _) = settled(&placement, n, &live, &min_ok, limit).await?;
    let min_ok: Vec<f64> = min_ok
        .iter()
        .zip(after.iter().zip(&survivors_before))
        .map(|(b, (a, s))| b + a.saturating_sub(*s) as f64)
        .collect();
    let (after, _) = settled(&placement, n, &live, &min_ok, limit).await?;
    let rebalance = killed.elapsed().as_secs_f64();
    watch.abort();
    for r in replicas {
        r.stop().await;
    }
    let lost = memberships_lost(&["r0", "r1", "r2"]);
    Ok(vec![
        Row {
            case: "shard: converge, 3 replicas --sharding (coded BookStore)".into(),
            n,
            seconds,
            note: format!(
                "from the first process start to every status; placement {share:?}; \
                 concurrency {} each; over the whole run, {lost}",
                args.concurrency
            ),
            ..Default::default()
        },
        Row {
            case: "shard: steady RSS per replica, 3 replicas".into(),
            n,
            peak_rss_mb: median(rss.iter().map(|r| r.0).collect()),
            note: format!(
                "median of the replicas' VmRSS idle after convergence ({}); each caches its \
                 share of {n} BookStores ({share:?}) and of the {} children (bosun_cached_children: \
                 {}); the sharder ({sharder}) also keeps every object's metadata to place them",
                split(&rss),
                n * 5,
                counts(&children)
            ),
            ..Default::default()
        },
        Row {
            case: "shard: kill -9 → rebalanced".into(),
            n,
            seconds: rebalance,
            note: format!(
                "{} killed ({gone} objects; {sharder} placed objects and lived): every object \
                 labelled with a survivor, each caching its share and with a success count up \
                 by at least its gain; shares {survivors_before:?} → {after:?}; lease 4 s, \
                 retry 500 ms (defaults)",
                dead.name
            ),
            ..Default::default()
        },
    ])
}

/// One replica, then three sharded, at N.
pub async fn case_shard(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    eprintln!("[bench]   one replica");
    let mut rows = one_replica(args, n).await?;
    eprintln!("[bench]   three replicas --sharding");
    rows.extend(three_replicas(args, n).await?);
    for r in &rows {
        eprintln!(
            "[bench]   {}: {:.2} s / {:.1} MB; {}",
            r.case, r.seconds, r.peak_rss_mb, r.note
        );
    }
    Ok(rows)
}
