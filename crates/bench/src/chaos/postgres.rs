//! PostgresCluster under kills: a 3-instance cluster of real PostgreSQL (the process-mode node
//! agent, on a control plane of its own) takes a steady stream of single-row commits while
//! instances are killed one after another, chosen by the seed: the primary's pod deleted, the
//! primary's processes killed (`-9`, restarted on the same data), a replica's pod deleted or
//! its processes killed. After each kill the cluster must be Healthy again before the next.
//! Invariants: never two ready primaries at once (every instance API polled every 100 ms);
//! with `replication.synchronous: 1`, no acknowledged commit missing on the final primary.
//! With asynchronous replication the commits lost are counted, not failed (full run only).
//!
//! Two more faults, each on a synchronous cluster of its own under the same write stream:
//! - `restart`: a switchover, and the ex-primary's container killed (`-9`, same pod, same
//!   data) the moment the status names the new primary: it must come back read-only and
//!   stream from the new primary;
//! - `stall`: the primary's instance manager stopped (SIGSTOP, postgres itself runs on)
//!   for a few seconds, shorter and longer than the failover delay, then resumed.
//!
//! Both check, besides the instance API's view, what a client sees: every instance's
//! PostgreSQL polled every 100 ms (`pg_is_in_recovery()`, `transaction_read_only`), never
//! more than one accepting writes at once.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::pg::{connect, ip_of, PgEnv, PrimaryWatch};

use super::{Args, Report};

const NS: &str = "chaos-pg";
const LIMIT: Duration = Duration::from_secs(300);

/// What the writer saw: commits acknowledged, and attempts that failed (unknown outcome).
#[derive(Default)]
struct Writes {
    acked: Vec<i64>,
    failed: u64,
}

/// Commits one row at a time on whichever instance the status names the primary, until
/// `stop`; a failed attempt drops the connection and looks the primary up again.
fn writer(
    env: Arc<PgEnv>,
    name: String,
    password: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Writes> {
    tokio::spawn(async move {
        let out = Arc::new(Mutex::new(Writes::default()));
        let mut next: i64 = 0;
        let mut conn: Option<tokio_postgres::Client> = None;
        while !stop.load(Ordering::Relaxed) {
            let c = match conn.take() {
                Some(c) => c,
                None => {
                    let ip = env
                        .status(&name)
                        .await
                        .and_then(|s| ip_of(&s, s.current_primary.as_deref()?));
                    match ip {
                        Some(ip) => match connect(&ip, &password).await {
                            Ok(c) => c,
                            Err(_) => {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            }
                        },
                        None => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    }
                }
            };
            next += 1;
            let id = next;
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                c.execute("INSERT INTO w (id) VALUES ($1)", &[&id]),
            )
            .await;
            let mut w = out.lock().unwrap_or_else(|p| p.into_inner());
            match r {
                Ok(Ok(_)) => {
                    w.acked.push(id);
                    conn = Some(c);
                }
                _ => w.failed += 1,
            }
        }
        let mut w = out.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *w)
    })
}

/// Healthy in the status, and the status speaks of the pods as they are now: each of the
/// cluster's pods Ready, with the IP the status gives its instance (a status written before
/// a kill still says Healthy for a moment).
async fn settled(
    env: &PgEnv,
    name: &str,
) -> anyhow::Result<bosun_postgres::api::PostgresClusterStatus> {
    let t0 = Instant::now();
    loop {
        let s = env.healthy(name, 3, LIMIT).await?;
        let pods = env.pods.list(&Default::default()).await?;
        let prefix = format!("{name}-");
        let current = pods
            .items
            .iter()
            .filter(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .filter(|p| {
                let st = p.status.as_ref();
                let ready = st
                    .and_then(|st| st.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                let ip = st.and_then(|st| st.pod_ip.clone());
                let name = p.metadata.name.as_deref().unwrap_or("");
                ready
                    && p.metadata.deletion_timestamp.is_none()
                    && ip.is_some()
                    && ip == ip_of(&s, name)
            })
            .count();
        if current == 3 {
            return Ok(s);
        }
        anyhow::ensure!(t0.elapsed() < LIMIT, "{name}'s pods never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A pod's UID and its containers' restarts: either changes when the kill has taken effect.
async fn pod_mark(env: &PgEnv, pod: &str) -> Option<(String, i32)> {
    let p = env.pods.get_opt(pod).await.ok()??;
    let restarts = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    Some((p.metadata.uid.unwrap_or_default(), restarts))
}

/// A small deterministic generator (the seed decides the kills, to replay a run).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

async fn one(
    env: &Arc<PgEnv>,
    r: &mut Report,
    name: &str,
    synchronous: i32,
    kills: usize,
    rng: &mut Lcg,
) -> anyhow::Result<()> {
    env.create(name, 3, synchronous).await?;
    let s = env.healthy(name, 3, LIMIT).await?;
    let pw = env.password(name).await?;
    let primary = s.current_primary.clone().unwrap_or_default();
    let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
    connect(&ip, &pw)
        .await?
        .batch_execute("CREATE TABLE w (id bigint PRIMARY KEY)")
        .await?;
    let watch = PrimaryWatch::start(env.pods.clone(), name);
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(env.clone(), name.to_string(), pw.clone(), stop.clone());
    let t0 = Instant::now();
    let mut done = Vec::new();
    for _ in 0..kills {
        let s = settled(env, name).await?;
        let primary = s.current_primary.clone().unwrap_or_default();
        let replicas: Vec<String> = s
            .instances
            .iter()
            .filter(|i| i.name != primary)
            .map(|i| i.name.clone())
            .collect();
        let kind = rng.next(4);
        let victim = if kind < 2 {
            primary
        } else {
            replicas[rng.next(replicas.len() as u64) as usize].clone()
        };
        let before = pod_mark(env, &victim).await;
        if kind.is_multiple_of(2) {
            env.delete_pod(&victim).await?;
            done.push(format!("delete pod {victim}"));
        } else {
            env.agent.kill_containers(&env.ns, &victim)?;
            done.push(format!("kill -9 {victim}"));
        }
        // The kill seen (a new pod, or a container restarted) before waiting for Healthy,
        // which the cluster still reports for a moment after the kill.
        let seen = Instant::now();
        while pod_mark(env, &victim).await == before {
            anyhow::ensure!(
                seen.elapsed() < LIMIT,
                "the kill of {victim} was never seen"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        settled(env, name).await?;
    }
    stop.store(true, Ordering::Relaxed);
    let writes = w.await?;
    let (most, moments) = watch.stop_with().await;
    for m in &moments {
        eprintln!("[chaos]   {name}: more than one ready primary at {m}");
    }
    let s = settled(env, name).await?;
    let primary = s.current_primary.clone().unwrap_or_default();
    let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
    let rows = connect(&ip, &pw)
        .await?
        .query("SELECT id FROM w", &[])
        .await?;
    let present: std::collections::HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
    let lost = writes
        .acked
        .iter()
        .filter(|id| !present.contains(id))
        .count();
    let mode = if synchronous > 0 {
        "synchronous 1"
    } else {
        "asynchronous"
    };
    r.figure(&format!("{mode}: kills"), done.join(", "));
    r.figure(
        &format!("{mode}: commits acknowledged / failed"),
        format!(
            "{} / {} in {:.0} s",
            writes.acked.len(),
            writes.failed,
            t0.elapsed().as_secs_f64()
        ),
    );
    r.figure(&format!("{mode}: acknowledged commits lost"), lost);
    r.figure(&format!("{mode}: most ready primaries at once"), most);
    r.check(most <= 1, format!("{mode}: {most} ready primaries at once"));
    r.check(
        !writes.acked.is_empty(),
        format!("{mode}: no commit was acknowledged"),
    );
    if synchronous > 0 {
        r.check(
            lost == 0,
            format!("{mode}: {lost} acknowledged commits missing on the final primary"),
        );
    }
    Ok(())
}

/// Polls, until stopped, the PostgreSQL of every pod of one cluster every 100 ms: whether it
/// would take a write (out of recovery and not read-only), stamped with the server's own
/// clock (the pods are processes on this host: one clock). The samples of one round are not
/// simultaneous, so two instances count as writable at once only when one was writable at a
/// moment lying between two consecutive writable samples of the other. The instance API can
/// be wrong or silent (a stopped manager); this is what a client connecting to the pod sees.
struct WritableWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<std::collections::HashMap<String, Vec<(f64, bool)>>>,
}

fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl WritableWatch {
    fn start(env: &PgEnv, cluster: &str, password: &str) -> WritableWatch {
        let pods = env.pods.clone();
        let lp = kube::api::ListParams::default()
            .labels(&bosun_postgres::controller::build::selector(cluster));
        let password = password.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples: std::collections::HashMap<String, Vec<(f64, bool)>> =
                Default::default();
            // Every address a pod ever had stays polled: a pod object gone proves nothing
            // by itself, and a PostgreSQL left running there must still be counted.
            let mut known: std::collections::BTreeSet<(String, String)> = Default::default();
            while !flag.load(Ordering::Relaxed) {
                if let Ok(list) = pods.list(&lp).await {
                    known.extend(
                        list.into_iter()
                            .filter_map(|p| Some((p.metadata.name?, p.status?.pod_ip?))),
                    );
                }
                let targets: Vec<(String, String)> = known
                    .iter()
                    .map(|(name, ip)| (format!("{name}@{ip}"), ip.clone()))
                    .collect();
                let pw = &password;
                let round =
                    futures::future::join_all(targets.into_iter().map(|(name, ip)| async move {
                        let seen = tokio::time::timeout(Duration::from_secs(2), async {
                            let c = connect(&ip, pw).await.ok()?;
                            let row = c
                                .query_one(
                                    "SELECT pg_is_in_recovery(), \
                                     current_setting('transaction_read_only'), \
                                     extract(epoch FROM clock_timestamp())::float8",
                                    &[],
                                )
                                .await
                                .ok()?;
                            let recovery: bool = row.get(0);
                            let read_only: String = row.get(1);
                            Some((row.get::<_, f64>(2), !recovery && read_only == "off"))
                        })
                        .await
                        .ok()
                        .flatten()
                        .unwrap_or_else(|| (epoch_now(), false));
                        (name, seen)
                    }))
                    .await;
                for (name, seen) in round {
                    samples.entry(name).or_default().push(seen);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            samples
        });
        WritableWatch { stop, task }
    }

    /// The most instances writable at one moment, and each such moment (server time).
    async fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let Ok(samples) = self.task.await else {
            return (usize::MAX, Vec::new());
        };
        let mut most = 0;
        let mut moments = Vec::new();
        for (b, bs) in &samples {
            for &(t, writable) in bs {
                if !writable {
                    continue;
                }
                let with: Vec<&str> = samples
                    .iter()
                    .filter(|(a, _)| *a != b)
                    .filter(|(_, xs)| {
                        xs.windows(2)
                            .any(|w| w[0].1 && w[1].1 && w[0].0 <= t && t <= w[1].0)
                    })
                    .map(|(a, _)| a.as_str())
                    .collect();
                most = most.max(1 + with.len());
                if !with.is_empty() {
                    moments.push(format!("{t:.3}: {b} and {}", with.join(", ")));
                }
            }
        }
        (most, moments)
    }
}

/// A synchronous 3-instance cluster with table `w`, the write stream and both watches on it.
struct Run {
    name: String,
    pw: String,
    stop: Arc<AtomicBool>,
    writer: tokio::task::JoinHandle<Writes>,
    primaries: PrimaryWatch,
    writable: WritableWatch,
    t0: Instant,
}

impl Run {
    async fn start(env: &Arc<PgEnv>, name: &str) -> anyhow::Result<Run> {
        env.create(name, 3, 1).await?;
        let s = env.healthy(name, 3, LIMIT).await?;
        let pw = env.password(name).await?;
        let primary = s.current_primary.clone().unwrap_or_default();
        let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
        connect(&ip, &pw)
            .await?
            .batch_execute("CREATE TABLE w (id bigint PRIMARY KEY)")
            .await?;
        let stop = Arc::new(AtomicBool::new(false));
        Ok(Run {
            name: name.to_string(),
            primaries: PrimaryWatch::start(env.pods.clone(), name),
            writable: WritableWatch::start(env, name, &pw),
            writer: writer(env.clone(), name.to_string(), pw.clone(), stop.clone()),
            pw,
            stop,
            t0: Instant::now(),
        })
    }

    /// Stops the stream and the watches; the invariants into `r` under `label`.
    async fn finish(self, env: &PgEnv, r: &mut Report, label: &str) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let writes = self.writer.await?;
        let (ready, moments) = self.primaries.stop_with().await;
        for m in &moments {
            eprintln!(
                "[chaos]   {}: more than one ready primary at {m}",
                self.name
            );
        }
        let (writable, moments) = self.writable.stop().await;
        for m in &moments {
            eprintln!("[chaos]   {}: more than one writable at {m}", self.name);
        }
        let s = settled(env, &self.name).await?;
        let primary = s.current_primary.clone().unwrap_or_default();
        let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
        let rows = connect(&ip, &self.pw)
            .await?
            .query("SELECT id FROM w", &[])
            .await?;
        let present: std::collections::HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
        let lost = writes
            .acked
            .iter()
            .filter(|id| !present.contains(id))
            .count();
        r.figure(
            &format!("{label}: commits acknowledged / failed"),
            format!(
                "{} / {} in {:.0} s",
                writes.acked.len(),
                writes.failed,
                self.t0.elapsed().as_secs_f64()
            ),
        );
        r.figure(&format!("{label}: acknowledged commits lost"), lost);
        r.figure(&format!("{label}: most ready primaries at once"), ready);
        r.figure(
            &format!("{label}: most writable instances at once"),
            writable,
        );
        r.check(
            ready <= 1,
            format!("{label}: {ready} ready primaries at once"),
        );
        r.check(
            writable <= 1,
            format!("{label}: {writable} instances accepting writes at once"),
        );
        r.check(
            !writes.acked.is_empty(),
            format!("{label}: no commit was acknowledged"),
        );
        r.check(
            lost == 0,
            format!("{label}: {lost} acknowledged commits missing on the final primary"),
        );
        Ok(())
    }
}

/// Waits until `f` holds for the status (up to LIMIT).
async fn status_until(
    env: &PgEnv,
    name: &str,
    what: &str,
    f: impl Fn(&bosun_postgres::api::PostgresClusterStatus) -> bool,
) -> anyhow::Result<bosun_postgres::api::PostgresClusterStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = env.status(name).await {
            if f(&s) {
                return Ok(s);
            }
        }
        anyhow::ensure!(t0.elapsed() < LIMIT, "{name}: never {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A switchover, then the ex-primary's container killed the moment the status names the new
/// primary (its manager may still be demoting it): it must come back on the same data as a
/// read-only replica of the new primary.
async fn restart_after_switchover(
    env: &Arc<PgEnv>,
    r: &mut Report,
    rounds: usize,
    rng: &mut Lcg,
) -> anyhow::Result<()> {
    let run = Run::start(env, "restart").await?;
    let name = run.name.clone();
    let mut back = Vec::new();
    for round in 1..=rounds {
        let s = settled(env, &name).await?;
        let old = s.current_primary.clone().unwrap_or_default();
        let replicas: Vec<String> = s
            .instances
            .iter()
            .filter(|i| i.name != old)
            .map(|i| i.name.clone())
            .collect();
        let target = replicas[rng.next(replicas.len() as u64) as usize].clone();
        env.patch(&name, serde_json::json!({ "switchoverTo": target }))
            .await?;
        status_until(env, &name, &format!("{target} primary"), |s| {
            s.current_primary.as_deref() == Some(target.as_str())
        })
        .await?;
        let before = pod_mark(env, &old).await;
        env.agent.kill_containers(&env.ns, &old)?;
        let killed = Instant::now();
        while pod_mark(env, &old).await == before {
            anyhow::ensure!(killed.elapsed() < LIMIT, "the kill of {old} was never seen");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let s = settled(env, &name).await?;
        let primary = s.current_primary.clone().unwrap_or_default();
        r.check(
            primary == target,
            format!("restart: round {round}: {primary} is the primary, not {target}"),
        );
        let role = s
            .instances
            .iter()
            .find(|i| i.name == old)
            .map(|i| i.role.clone())
            .unwrap_or_default();
        r.check(
            role == "replica",
            format!("restart: round {round}: {old} came back as {role:?}, not a replica"),
        );
        // Streaming from the new primary: a row written there after the restart shows up.
        let old_ip = ip_of(&s, &old).ok_or_else(|| anyhow::anyhow!("no IP for {old}"))?;
        let new_ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
        let marker = -(round as i64);
        connect(&new_ip, &run.pw)
            .await?
            .execute("INSERT INTO w (id) VALUES ($1)", &[&marker])
            .await?;
        let c = connect(&old_ip, &run.pw).await?;
        let recovery: bool = c.query_one("SELECT pg_is_in_recovery()", &[]).await?.get(0);
        r.check(
            recovery,
            format!("restart: round {round}: {old} is out of recovery"),
        );
        let waited = Instant::now();
        loop {
            let n = c
                .query("SELECT 1 FROM w WHERE id = $1", &[&marker])
                .await?
                .len();
            if n == 1 {
                break;
            }
            anyhow::ensure!(
                waited.elapsed() < LIMIT,
                "restart: {old} never received a row written on {primary}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        back.push(format!(
            "{old} -> {target}: {:.1} s",
            killed.elapsed().as_secs_f64()
        ));
    }
    r.figure(
        "restart: ex-primary killed, streaming again after",
        back.join(", "),
    );
    run.finish(env, r, "restart").await
}

/// The PID of the instance manager of the pod with UID `uid` (the node agent runs it as a
/// host process; its PostgreSQL children share its environment, not its arguments).
fn manager_pid(uid: &str) -> anyhow::Result<u32> {
    let want = format!("BOSUN_PG_POD_UID={uid}");
    for e in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let (Ok(cmd), Ok(environ)) = (
            std::fs::read(e.path().join("cmdline")),
            std::fs::read(e.path().join("environ")),
        ) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let is_manager = args.len() >= 3 && args[1] == b"pg" && args[2] == b"instance";
        if is_manager && environ.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            return Ok(pid);
        }
    }
    anyhow::bail!("no instance manager process for pod UID {uid}")
}

fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let st = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()?;
    anyhow::ensure!(st.success(), "kill -{sig} {pid}: {st}");
    Ok(())
}

/// The primary's instance manager stopped (SIGSTOP) for each of `stalls` (seconds; with
/// `true`, the moment a switchover away from it was asked for, the audit's H2), then resumed
/// (SIGCONT); its PostgreSQL keeps running and taking connections meanwhile. What the status
/// said during the stall is kept (phases, primaries), to tell a wait from a failover.
async fn stalled_manager(
    env: &Arc<PgEnv>,
    r: &mut Report,
    stalls: &[(u64, bool)],
    rng: &mut Lcg,
) -> anyhow::Result<()> {
    let run = Run::start(env, "stall").await?;
    let name = run.name.clone();
    let mut out = Vec::new();
    for (secs, switchover) in stalls {
        let s = settled(env, &name).await?;
        let primary = s.current_primary.clone().unwrap_or_default();
        let uid = env
            .pods
            .get(&primary)
            .await?
            .metadata
            .uid
            .unwrap_or_default();
        let pid = manager_pid(&uid)?;
        let mut how = String::new();
        if *switchover {
            let replicas: Vec<String> = s
                .instances
                .iter()
                .filter(|i| i.name != primary)
                .map(|i| i.name.clone())
                .collect();
            let target = replicas[rng.next(replicas.len() as u64) as usize].clone();
            env.patch(&name, serde_json::json!({ "switchoverTo": target }))
                .await?;
            how = format!(" after switchoverTo {target}");
        }
        signal(pid, "STOP")?;
        let stopped = Instant::now();
        let mut phases: Vec<(f64, String)> = Vec::new();
        while stopped.elapsed() < Duration::from_secs(*secs) {
            if let Some(s) = env.status(&name).await {
                // The Ready condition's reason tells a wait (PrimaryTerminating: the old
                // pod must go first) from a failover under way.
                let reason = s
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.reason.clone())
                    .unwrap_or_default();
                let seen = format!(
                    "{:?}/{}/{reason}",
                    s.phase,
                    s.current_primary.as_deref().unwrap_or("-")
                );
                if phases.last().map(|(_, p)| p) != Some(&seen) {
                    phases.push((stopped.elapsed().as_secs_f64(), seen));
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Resumed whatever happened meanwhile (the pod may be gone: then so is the process).
        let _ = signal(pid, "CONT");
        let resumed = Instant::now();
        let s = settled(env, &name).await?;
        let now = s.current_primary.clone().unwrap_or_default();
        out.push(format!(
            "{secs} s{how}: {}, healthy {:.1} s after resuming; status during (s since the stop, phase/primary/reason): {}",
            if now == primary {
                format!("{primary} stayed the primary")
            } else {
                format!("{primary} -> {now}")
            },
            resumed.elapsed().as_secs_f64(),
            phases
                .iter()
                .map(|(t, p)| format!("{t:.1}s {p}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    r.figure("stall: primary's manager stopped", out.join("; "));
    run.finish(env, r, "stall").await
}

pub async fn run(args: &Args, seed: u64) -> anyhow::Result<Report> {
    let kills = if args.quick { 3 } else { 10 };
    eprintln!(
        "[chaos] postgres: {kills} kills under a write stream, synchronous then asynchronous"
    );
    let mut r = Report::new("postgres");
    // The pods' logs stay for a look after a failure.
    let root = std::env::temp_dir().join("bosun-chaos-pg");
    let _ = std::fs::remove_dir_all(&root);
    eprintln!("[chaos]   pods' logs: {}", root.display());
    let env = Arc::new(PgEnv::start_in(&args.bosun, NS, Some(root)).await?);
    let mut rng = Lcg(seed);
    one(&env, &mut r, "sync", 1, kills, &mut rng).await?;
    // Shorter than the failover delay (10 s), and longer: the failover must fence first.
    // Stalls shorter and longer than the failover delay (10 s), one past the liveness probe
    // (6 x 5 s), and one the moment a switchover away from the stalled primary is asked for.
    let (restarts, stalls): (usize, &[(u64, bool)]) = if args.quick {
        (1, &[(15, false), (8, true)])
    } else {
        (
            3,
            &[(4, false), (15, false), (45, false), (8, true), (20, true)],
        )
    };
    restart_after_switchover(&env, &mut r, restarts, &mut rng).await?;
    stalled_manager(&env, &mut r, stalls, &mut rng).await?;
    if !args.quick {
        one(&env, &mut r, "async", 0, kills, &mut rng).await?;
    }
    Ok(r)
}
