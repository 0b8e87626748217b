//! j. bosun against operator-sdk's own operators (issue 35), built by `scripts/setup-peers.sh`:
//! helm-operator against the Helm flavour on seed 000's book-store chart (`--only helm-peer`),
//! ansible-operator against the Ansible flavour on seed 000's role (`--only ansible-peer`).
//! Each pair runs in turn within a run, each side on a fresh control plane with the same CRs,
//! measured alike: convergence from ready, operator CPU, peak and steady RSS, API writes, CPU
//! while idle, and the writes of a restart over the converged CRs.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bosun_bench::ansible_flavour::{self as bench, BenchConfig};
use bosun_bench::measure::{
    mutating, proc_children_cpu_seconds, proc_cpu_seconds, proc_status, reads, server_cpu,
    wait_watched, Counts, TreePeak,
};
use bosun_testenv::{ControlPlane, Options};
use kube::api::{Api, DynamicObject};
use kube::ResourceExt;

use crate::{helm, Args, Row};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where `scripts/setup-peers.sh` installs the peers: `$BOSUN_PEERS`, else the cache directory
/// named after the operator-sdk release pinned in scripts/peers/go.mod.
fn peers() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("BOSUN_PEERS") {
        return Ok(PathBuf::from(dir));
    }
    let gomod = std::fs::read_to_string(repo().join("scripts/peers/go.mod"))?;
    let version = gomod
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("github.com/operator-framework/operator-sdk ")
        })
        .find_map(|rest| rest.split_whitespace().next())
        .context("scripts/peers/go.mod requires no github.com/operator-framework/operator-sdk")?;
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(Path::new(&home).join(".cache/bosun/peers").join(version))
}

fn peer(name: &str) -> anyhow::Result<PathBuf> {
    let p = peers()?.join(name);
    anyhow::ensure!(
        p.is_file(),
        "{} is missing: run `bash scripts/setup-peers.sh` first",
        p.display()
    );
    Ok(p)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A controller-runtime manager under measurement: readiness on its probe port, reconciles
/// counted on its metrics port (two listeners, where bosun serves both on one).
struct Peer {
    child: tokio::process::Child,
    pid: u32,
    probe: u16,
    metrics: u16,
    started: Instant,
    /// ansible-operator's machine-wide lock (see [`ansible_operator`]), held until it stops.
    _lock: Option<std::fs::File>,
}

impl Peer {
    fn start(
        mut cmd: tokio::process::Command,
        probe: u16,
        metrics: u16,
        name: &str,
    ) -> anyhow::Result<Peer> {
        let log = std::env::temp_dir().join(format!("bosun-bench-{name}.log"));
        let child = cmd
            .stdout(Stdio::null())
            // Its log, kept for a look when a figure is odd.
            .stderr(std::fs::File::create(&log).map(Stdio::from)?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Peer {
            pid: child.id().unwrap_or(0),
            child,
            probe,
            metrics,
            started: Instant::now(),
            _lock: None,
        })
    }

    async fn get(port: u16, path: &str) -> Option<String> {
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

    /// Waits for `/readyz`; the seconds since the process started. A peer that exited (its
    /// port taken — ansible-operator's role proxy is always localhost:8888 —, a bad flag) is an
    /// error naming its log, not a convergence that never comes.
    async fn wait_ready(&mut self, name: &str) -> anyhow::Result<f64> {
        for _ in 0..3000 {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!(
                    "{name} exited ({status}) before it was ready: see {}",
                    std::env::temp_dir()
                        .join(format!("bosun-bench-{name}.log"))
                        .display()
                );
            }
            if Self::get(self.probe, "/readyz")
                .await
                .is_some_and(|b| b.starts_with("HTTP/1.0 200"))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(self.uptime())
    }

    async fn metric(&self, series: &str) -> Option<f64> {
        let body = Self::get(self.metrics, "/metrics").await?;
        Some(
            body.lines()
                .filter(|l| l.starts_with(series))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// As `Operator::wait_idle`: the reconcile count still for `quiet`, at most two minutes.
    async fn wait_idle(&self, quiet: Duration) {
        let mut last = -1.0;
        let mut since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            let now = self
                .metric("controller_runtime_reconcile_total{")
                .await
                .unwrap_or(-1.0);
            let active = self
                .metric("controller_runtime_active_workers{")
                .await
                .unwrap_or(1.0);
            if now != last || active > 0.0 || now <= 0.0 {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn uptime(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
    fn cpu_seconds(&self) -> f64 {
        proc_cpu_seconds(self.pid)
    }
    fn peak_rss_mb(&self) -> f64 {
        proc_status(self.pid, "VmHWM:") / 1024.0
    }
    fn rss_mb(&self) -> f64 {
        proc_status(self.pid, "VmRSS:") / 1024.0
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// helm-operator as its image runs it: chart paths of watches.yaml relative to its working
/// directory, every namespace watched, the same reconcile concurrency as bosun's.
fn helm_operator(args: &Args, kubeconfig: &Path) -> anyhow::Result<Peer> {
    let (probe, metrics) = (free_port()?, free_port()?);
    let mut cmd = tokio::process::Command::new(peer("helm-operator")?);
    cmd.arg("run")
        .arg("--watches-file=watches.yaml")
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{probe}"))
        .arg(format!("--max-concurrent-reconciles={}", args.concurrency))
        .current_dir(repo().join("examples/helm-bookstore"))
        .env("KUBECONFIG", kubeconfig);
    Peer::start(cmd, probe, metrics, "helm-operator")
}

/// What a peer's run measured, as the rows bosun's case prints.
struct Measured {
    converge: Row,
    /// The peer's process tree (it and the children it runs) at its largest while converging.
    tree_peak_mb: f64,
    /// The peer's CPU while converging with its waited-for children's.
    tree_cpu_seconds: f64,
    restart: Row,
    steady: Row,
}

/// Runs `start` over N converged-to-be CRs: convergence, idle CPU and steady RSS, then a
/// restart's writes until idle.
#[allow(clippy::too_many_arguments)]
async fn measure_peer(
    cp: &ControlPlane,
    client: &kube::Client,
    n: usize,
    name: &str,
    what: &str,
    resources: &[&str],
    crs: Api<DynamicObject>,
    done: impl Fn(&DynamicObject) -> bool + Clone,
    start: impl Fn() -> anyhow::Result<Peer>,
) -> anyhow::Result<Measured> {
    let before = Counts::read(cp, client).await?;
    let server0 = server_cpu(cp);
    let t0 = Instant::now();
    let mut op = start()?;
    let tree = TreePeak::start(op.pid);
    let ready_after = op.wait_ready(name).await?;
    wait_watched(crs, n, Duration::from_secs(3600), done).await?;
    let from_start = t0.elapsed().as_secs_f64();
    let tree_peak_mb = tree.stop();
    let tree_cpu_seconds = op.cpu_seconds() + proc_children_cpu_seconds(op.pid);
    let server_s = server_cpu(cp) - server0;
    let after = Counts::read(cp, client).await?;
    let converge = Row {
        case: format!("{what} converge ({name})"),
        n,
        seconds: from_start - ready_after,
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        writes: mutating(&before, &after, resources),
        note: format!(
            "from /readyz (a ping: before its caches sync); {from_start:.2} s from start; \
             reads: {}; API server + etcd CPU from start {server_s:.2} s; with its child \
             processes: peak RSS {tree_peak_mb:.1} MB (sampled every 100 ms), CPU \
             {tree_cpu_seconds:.2} s",
            reads(&before, &after)
        ),
        ..Default::default()
    };
    op.wait_idle(Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_secs(11)).await;
    let cpu0 = op.cpu_seconds();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle_cpu = op.cpu_seconds() - cpu0;
    let steady = Row {
        case: format!("{what} steady RSS and idle CPU ({name})"),
        n,
        peak_rss_mb: op.rss_mb(),
        cpu_seconds: idle_cpu,
        note: format!(
            "VmRSS idle, of the {name} process alone; CPU seconds over 30 s idle ({:.1} % of a \
             core)",
            idle_cpu / 30.0 * 100.0
        ),
        ..Default::default()
    };
    op.stop().await;
    let before = Counts::read(cp, client).await?;
    let mut op = start()?;
    op.wait_ready(name).await?;
    op.wait_idle(Duration::from_secs(3)).await;
    let after = Counts::read(cp, client).await?;
    let writes = mutating(&before, &after, resources);
    let restart = Row {
        case: format!("{what} restart ({name})"),
        n,
        seconds: op.uptime(),
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        note: format!(
            "{:.0} mutating requests until idle",
            writes.values().copied().fold(0.0, |a, b| a + b)
        ),
        writes,
        ..Default::default()
    };
    op.stop().await;
    Ok(Measured {
        converge,
        tree_peak_mb,
        tree_cpu_seconds,
        restart,
        steady,
    })
}

/// The pair's verdict row: the peer's convergence time over bosun's, bosun's share of the
/// peer's steady RSS.
fn verdict(what: &str, n: usize, ours: &[Row], theirs: &Measured, peer: &str) -> Row {
    let find = |prefix: &str| {
        ours.iter()
            .find(|r| r.case.starts_with(prefix))
            .cloned()
            .unwrap_or_default()
    };
    let converge = find(&format!("{what} "));
    let steady = ours
        .iter()
        .find(|r| r.case.contains("steady"))
        .cloned()
        .unwrap_or_default();
    let speed = theirs.converge.seconds / converge.seconds;
    let rss = steady.peak_rss_mb / theirs.steady.peak_rss_mb;
    Row {
        case: format!("{what}: {peer} / bosun"),
        n,
        // The ratios stand in the figure columns; `ratio` is the floor rows' bosun/floor.
        seconds: speed,
        peak_rss_mb: rss,
        cpu_seconds: theirs.converge.cpu_seconds / converge.cpu_seconds,
        note: format!(
            "convergence {speed:.2}x faster; steady RSS {:.1} MB vs {:.1} MB (bosun's share \
             {rss:.2}); converge CPU {:.2} s vs {:.2} s ({:.2} s with its child processes); \
             peak RSS while converging {:.1} MB vs {:.1} MB with its child processes (bosun's \
             share {:.2})",
            steady.peak_rss_mb,
            theirs.steady.peak_rss_mb,
            converge.cpu_seconds,
            theirs.converge.cpu_seconds,
            theirs.tree_cpu_seconds,
            converge.peak_rss_mb,
            theirs.tree_peak_mb,
            converge.peak_rss_mb / theirs.tree_peak_mb
        ),
        ..Default::default()
    }
}

/// Installed, as helm-operator reports it: the Deployed condition true (its
/// `status.deployedRelease` carries the manifest, not bosun's revision).
fn deployed(o: &DynamicObject) -> bool {
    o.data["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Deployed" && c["status"] == "True")
    })
}

/// `--only helm-peer`: bosun's Helm case, then helm-operator on the same CRs.
pub async fn case_helm_peer(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    peer("helm-operator")?;
    let mut rows = helm::case_helm(args, n).await?;
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    helm::populate(&client, n, args.concurrency).await?;
    let crs = Api::<DynamicObject>::all_with(client.clone(), &helm::resource());
    let theirs = measure_peer(
        &cp,
        &client,
        n,
        "helm-operator",
        "helm chart",
        &helm::RESOURCES,
        crs,
        deployed,
        || helm_operator(args, cp.kubeconfig()),
    )
    .await?;
    let verdict = verdict("helm chart converge", n, &rows, &theirs, "helm-operator");
    rows.extend([theirs.converge, theirs.restart, theirs.steady, verdict]);
    Ok(rows)
}

const ANSIBLE_RESOURCES: [&str; 3] = ["deployments", "services", "bookstores"];

/// ansible-operator as its image runs it: the watches file's role paths, ansible-runner and
/// Ansible from the peer's venv (setup-peers.sh), the project's `operator_sdk.util` stand-in
/// among the collections.
fn ansible_operator(args: &Args, kubeconfig: &Path, watches: &Path) -> anyhow::Result<Peer> {
    let (probe, metrics) = (free_port()?, free_port()?);
    let venv = peers()?.join("venv/bin");
    let path = std::env::join_paths(std::iter::once(venv).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    // Its proxy for the roles listens on localhost:8888 whatever `--proxy-port` says (v1.42.2):
    // one ansible-operator at a time on the machine, under the lock the peer tests take too
    // (crates/bosun/tests/peers), or a bench beside a test run makes one of them exit.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("bosun-ansible-operator-8888.lock"))?;
    lock.lock()?;
    let mut cmd = tokio::process::Command::new(peer("ansible-operator")?);
    cmd.arg("run")
        .arg(format!("--watches-file={}", watches.display()))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{probe}"))
        .arg(format!("--max-concurrent-reconciles={}", args.concurrency))
        .current_dir(watches.parent().unwrap_or(Path::new(".")))
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .env("ANSIBLE_COLLECTIONS_PATH", ansible_collections())
        .env(
            "ANSIBLE_LOCAL_TEMP",
            std::env::temp_dir().join("bosun-bench-ansible-operator"),
        );
    let mut op = Peer::start(cmd, probe, metrics, "ansible-operator")?;
    op._lock = Some(lock);
    Ok(op)
}

/// The project's own `operator_sdk.util` collection (Galaxy is not reachable from here).
fn ansible_collections() -> PathBuf {
    repo().join("crates/ansible-runner/collection")
}

/// `--only ansible-peer`: bosun's Ansible case, then ansible-operator on the same CRs.
pub async fn case_ansible_peer(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    peer("ansible-operator")?;
    let mut rows = crate::ansible::case_ansible(args, n).await?;
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    let mut cfg = BenchConfig::seed(&repo(), n);
    cfg.concurrency = u16::try_from(args.concurrency).unwrap_or(u16::MAX);
    let ops = bench::operators(&cfg)?;
    let (ar, names) = bench::populate(&client, &cfg, &ops).await?;
    drop(ops);
    let crs = Api::<DynamicObject>::all_with(client.clone(), &ar);
    let names = std::sync::Arc::new(names);
    let done = {
        let names = names.clone();
        move |o: &DynamicObject| {
            bench::successful(o) && o.namespace().is_some_and(|ns| names.contains(&ns))
        }
    };
    let watches = cfg.watches.clone();
    let theirs = measure_peer(
        &cp,
        &client,
        n,
        "ansible-operator",
        "ansible role",
        &ANSIBLE_RESOURCES,
        crs,
        done,
        || ansible_operator(args, cp.kubeconfig(), &watches),
    )
    .await?;
    let verdict = verdict(
        "ansible role converge",
        n,
        &rows,
        &theirs,
        "ansible-operator",
    );
    rows.extend([theirs.converge, theirs.restart, theirs.steady, verdict]);
    Ok(rows)
}

/// k. seed 004's MyOwnShell as a controller-runtime program (`scripts/peers/controller-runtime`,
/// built by setup-peers.sh) over the same N CRs as bosun's MyOwnShell case: at controller-
/// runtime's defaults (no client-side rate limit — it leaves throttling to the server's priority
/// and fairness — and one worker), or with bosun's reconcile concurrency as its workers, so the
/// comparison is not only the worker count's.
pub async fn case_myownshell_cr(args: &Args, n: usize, workers: bool) -> anyhow::Result<Row> {
    use bosun_myownshell::MyOwnShell;
    use kube::CustomResourceExt;
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    crate::namespace(&client).await?;
    bosun_bench::measure::install_crd(&client, &MyOwnShell::crd()).await?;
    let (probe, metrics) = (free_port()?, free_port()?);
    let mut cmd = tokio::process::Command::new(peer("myownshell-controller-runtime")?);
    cmd.arg(format!("--kubeconfig={}", cp.kubeconfig().display()))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{probe}"));
    if workers {
        cmd.arg(format!("--workers={}", args.concurrency));
    }
    let mut op = Peer::start(cmd, probe, metrics, "myownshell-controller-runtime")?;
    op.wait_ready("myownshell-controller-runtime").await?;
    let before = Counts::read(&cp, &client).await?;
    let t0 = Instant::now();
    let ar = kube::core::ApiResource::erase::<MyOwnShell>(&());
    crate::create_many(&client, &ar, n, args.concurrency, |i| {
        serde_json::json!({"apiVersion": "my-first-operator.jgato.io/v1alpha1", "kind": "MyOwnShell",
                           "metadata": {"name": format!("shell-{i}")}, "spec": {"size": 1}})
    })
    .await?;
    crate::shells_converged(&client, n, Duration::from_secs(1200)).await?;
    let seconds = t0.elapsed().as_secs_f64();
    let after = Counts::read(&cp, &client).await?;
    let (peak, cpu) = (op.peak_rss_mb(), op.cpu_seconds());
    op.stop().await;
    let how = if workers {
        format!(
            "no client rate limit (its default), {} workers (MaxConcurrentReconciles)",
            args.concurrency
        )
    } else {
        "controller-runtime's defaults: no client rate limit, 1 worker".to_string()
    };
    Ok(Row {
        ratio: None,
        case: format!(
            "myownshell (controller-runtime{})",
            if workers { ", bosun's concurrency" } else { "" }
        ),
        n,
        seconds,
        peak_rss_mb: peak,
        cpu_seconds: cpu,
        writes: mutating(&before, &after, &["deployments", "myownshells"]),
        note: how,
    })
}
