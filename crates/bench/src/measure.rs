//! Process and API server measurements: RSS and CPU from /proc, request counts from the
//! API server's own `apiserver_request_total`.
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bosun_testenv::ControlPlane;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::{Client, ResourceExt};

/// `apiserver_request_total` by (verb, resource, subresource).
pub struct Counts(BTreeMap<(String, String, String), f64>);

fn label<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("{key}=\"");
    line.find(&pat)
        .map(|i| &line[i + pat.len()..])
        .and_then(|rest| rest.find('"').map(|j| &rest[..j]))
        .unwrap_or("")
}

impl Counts {
    pub async fn read(cp: &ControlPlane, client: &Client) -> anyhow::Result<Counts> {
        let text = cp.apiserver_metrics(client).await?;
        let mut map = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
        {
            let v: f64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            let key = (
                label(line, "verb").to_string(),
                label(line, "resource").to_string(),
                label(line, "subresource").to_string(),
            );
            *map.entry(key).or_insert(0.0) += v;
        }
        Ok(Counts(map))
    }
}

impl Counts {
    pub fn get(&self, verb: &str, resource: &str, subresource: &str) -> f64 {
        self.0
            .get(&(
                verb.to_string(),
                resource.to_string(),
                subresource.to_string(),
            ))
            .copied()
            .unwrap_or(0.0)
    }
}

/// Mutating requests between two readings on the given resources, as "VERB resource[/sub]".
pub fn mutating(before: &Counts, after: &Counts, resources: &[&str]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for ((verb, res, sub), v) in &after.0 {
        if !["POST", "PUT", "PATCH", "APPLY", "DELETE"].contains(&verb.as_str())
            || !resources.contains(&res.as_str())
        {
            continue;
        }
        let d = v - before
            .0
            .get(&(verb.clone(), res.clone(), sub.clone()))
            .copied()
            .unwrap_or(0.0);
        if d > 0.0 {
            let name = if sub.is_empty() {
                format!("{verb} {res}")
            } else {
                format!("{verb} {res}/{sub}")
            };
            *out.entry(name).or_insert(0.0) += d;
        }
    }
    out
}

/// Requests other than writes between two readings, by verb, as "GET 12, LIST 3, WATCH 5":
/// what a converge costs the API server beyond the writes the floor also sends.
pub fn reads(before: &Counts, after: &Counts) -> String {
    let mut by_verb: BTreeMap<&str, f64> = BTreeMap::new();
    for ((verb, res, sub), v) in &after.0 {
        if !["GET", "LIST", "WATCH"].contains(&verb.as_str()) {
            continue;
        }
        let d = v - before.get(verb, res, sub);
        if d > 0.0 {
            *by_verb.entry(verb.as_str()).or_insert(0.0) += d;
        }
    }
    let parts: Vec<String> = by_verb.iter().map(|(v, n)| format!("{v} {n:.0}")).collect();
    if parts.is_empty() {
        "no reads".into()
    } else {
        parts.join(", ")
    }
}

/// CPU seconds (user + system) a process has used so far; 0 when it is gone.
pub fn proc_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0);
    ticks / 100.0
}

/// CPU seconds of the children a process has waited for (cutime + cstime, fields 16 and 17):
/// where an operator that runs each reconcile as a child process (ansible-operator's
/// ansible-runner) spends most of its CPU, which its own utime + stime leave out.
pub fn proc_children_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(13).copied().unwrap_or(0.0) + f.get(14).copied().unwrap_or(0.0)) / 100.0
}

/// VmRSS in KiB of a process and every process descending from it, now.
pub fn tree_rss_kb(root: u32) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    // (pid, ppid) of every process, read once: a tree is found from the parent links.
    let procs: Vec<(u32, u32)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            procs
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    tree.iter().map(|pid| proc_status(*pid, "VmRSS:")).sum()
}

/// The largest [`tree_rss_kb`] seen while it runs, sampled every 100 ms: the peak memory of an
/// operator whose work runs in short-lived child processes (VmHWM counts one process only).
pub struct TreePeak {
    peak_kb: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl TreePeak {
    pub fn start(root: u32) -> TreePeak {
        let peak_kb = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = peak_kb.clone();
        let task = tokio::spawn(async move {
            loop {
                let kb = tokio::task::spawn_blocking(move || tree_rss_kb(root))
                    .await
                    .unwrap_or(0.0);
                seen.fetch_max(kb as u64, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        TreePeak { peak_kb, task }
    }

    /// Stops sampling; the peak in MB.
    pub fn stop(self) -> f64 {
        self.task.abort();
        self.peak_kb.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0
    }
}

/// CPU seconds the control plane's API server and etcd have used so far: the other side of a
/// converge's time on a machine they share with the operator.
pub fn server_cpu(cp: &ControlPlane) -> f64 {
    ["kube-apiserver", "etcd"]
        .iter()
        .filter_map(|name| cp.pid(name))
        .map(proc_cpu_seconds)
        .sum()
}

/// An operator process under measurement.
pub struct Operator {
    child: tokio::process::Child,
    pid: u32,
    probe: Option<u16>,
    started: Instant,
}

/// A figure of `/proc/PID/status` (kB there), as a number.
pub fn proc_status(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

impl Operator {
    pub async fn bosun(
        bin: &Path,
        kubeconfig: &Path,
        operator: &str,
        concurrency: usize,
    ) -> anyhow::Result<Operator> {
        Self::bosun_with(
            bin,
            kubeconfig,
            &[format!("--operators={operator}")],
            operator,
            concurrency,
        )
        .await
    }

    /// `bosun run` with these flags (`--watches FILE`, say); `name` names its log file.
    pub async fn bosun_with(
        bin: &Path,
        kubeconfig: &Path,
        flags: &[String],
        name: &str,
        concurrency: usize,
    ) -> anyhow::Result<Operator> {
        let operator = name;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = tokio::process::Command::new(bin)
            .arg("run")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(flags)
            .arg(format!("--concurrency={concurrency}"))
            .arg(format!("--metrics-addr=127.0.0.1:{port}"))
            .arg(format!("--probe-addr=127.0.0.1:{port}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            // Its warnings, kept for a look when a figure is odd.
            .stderr(
                std::fs::File::create(
                    std::env::temp_dir().join(format!("bosun-bench-{operator}.log")),
                )
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
            )
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        Ok(Operator {
            child,
            pid,
            probe: Some(port),
            started: Instant::now(),
        })
    }

    pub async fn sample_controller(bin: &Path, kubeconfig: &Path) -> anyhow::Result<Operator> {
        let child = tokio::process::Command::new(bin)
            .arg(format!("-kubeconfig={}", kubeconfig.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        // It syncs its informers before working; give it the same head start bosun needs.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        Ok(Operator {
            child,
            pid,
            probe: None,
            started: Instant::now(),
        })
    }

    pub fn peak_rss_mb(&self) -> f64 {
        proc_status(self.pid, "VmHWM:") / 1024.0
    }

    pub fn rss_mb(&self) -> f64 {
        proc_status(self.pid, "VmRSS:") / 1024.0
    }

    /// The resident set split: (anonymous — heap, stacks —, file-backed — the binary's
    /// pages) in MB.
    pub fn rss_split_mb(&self) -> (f64, f64) {
        (
            proc_status(self.pid, "RssAnon:") / 1024.0,
            proc_status(self.pid, "RssFile:") / 1024.0,
        )
    }

    pub fn uptime(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// utime + stime of the process, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        proc_cpu_seconds(self.pid)
    }

    /// The sum of the operator's metric lines that start with `series`.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let port = self.probe?;
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .await
            .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        Some(
            buf.lines()
                .filter(|l| l.starts_with(series))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// Waits for `/readyz` (caches synced); returns the seconds since the process started.
    pub async fn wait_ready(&self) -> f64 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Some(port) = self.probe else { return 0.0 };
        for _ in 0..3000 {
            if let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                let mut buf = String::new();
                if s.write_all(b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n")
                    .await
                    .is_ok()
                    && s.read_to_string(&mut buf).await.is_ok()
                    && buf.starts_with("HTTP/1.0 200")
                {
                    return self.uptime();
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.uptime()
    }

    /// Waits until the operator's reconcile count has not moved for `quiet`, for at most two
    /// minutes: an operator with a periodic resync (the Helm flavour's is one minute) whose
    /// first reconciles were spread over more than a minute (a converge slowed by a loaded
    /// machine) never pauses, and its resyncs are then its steady state.
    pub async fn wait_idle(&self, quiet: Duration) {
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

    /// SIGTERM, then wait for the process to end.
    pub async fn stop(mut self) {
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

/// Server-side applies `crd` and waits until its kind is served (the test kit's wait).
pub async fn install_crd(client: &Client, crd: &CustomResourceDefinition) -> anyhow::Result<()> {
    bosun_testenv::kit::install_crds(client, [crd.clone()]).await?;
    Ok(())
}

/// Waits (polling every 250 ms, at most `limit`) until `done` says so.
pub async fn wait_until<F, Fut>(limit: Duration, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let start = Instant::now();
    loop {
        if done().await? {
            return Ok(());
        }
        anyhow::ensure!(start.elapsed() < limit, "did not converge within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until `n` objects of `api` satisfy `done`, watching them: one LIST, then the events
/// as they come. Polling with a LIST of every object four times a second loaded the API
/// server a converge shares two cores with (≈2.5 quorum LISTs of 1000 custom resources a
/// second), a load the write floor it is compared with never carries, and saw the end up
/// to 250 ms late.
pub async fn wait_watched<K>(
    api: Api<K>,
    n: usize,
    limit: Duration,
    done: impl Fn(&K) -> bool,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt;
    use kube::runtime::watcher;
    let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
    let mut met = std::collections::HashSet::new();
    let mut listing: Option<std::collections::HashSet<(String, String)>> = None;
    let mut listed = false;
    let events = watcher(api, watcher::Config::default());
    futures::pin_mut!(events);
    let watch = async {
        while let Some(ev) = events.next().await {
            match ev? {
                watcher::Event::Init => listing = Some(Default::default()),
                watcher::Event::InitApply(o) => {
                    if done(&o) {
                        listing.get_or_insert_with(Default::default).insert(key(&o));
                    }
                }
                watcher::Event::InitDone => {
                    met = listing.take().unwrap_or_default();
                    listed = true;
                }
                watcher::Event::Apply(o) => {
                    if done(&o) {
                        met.insert(key(&o));
                    } else {
                        met.remove(&key(&o));
                    }
                }
                watcher::Event::Delete(o) => {
                    met.remove(&key(&o));
                }
            }
            if listed && met.len() >= n {
                return anyhow::Ok(());
            }
        }
        anyhow::bail!("the watch ended")
    };
    tokio::time::timeout(limit, watch)
        .await
        .map_err(|_| anyhow::anyhow!("did not converge within {limit:?}"))?
}

/// How many of these BookStores carry a status for their current generation.
pub fn converged(items: &[bosun_bookstore::BookStore]) -> usize {
    items.iter().filter(|b| is_converged(b)).count()
}

/// A BookStore whose status reports its current generation.
pub fn is_converged(b: &bosun_bookstore::BookStore) -> bool {
    b.status
        .as_ref()
        .is_some_and(|s| s.observed_generation == b.metadata.generation)
}
