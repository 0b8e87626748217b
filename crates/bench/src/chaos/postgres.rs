//! PostgresCluster under kills: a 3-instance cluster of real PostgreSQL (the process-mode node
//! agent, on a control plane of its own) takes a steady stream of single-row commits while
//! instances are killed one after another, chosen by the seed: the primary's pod deleted, the
//! primary's processes killed (`-9`, restarted on the same data), a replica's pod deleted or
//! its processes killed. After each kill the cluster must be Healthy again before the next.
//! Invariants: never two ready primaries at once (every instance API polled every 100 ms);
//! with `replication.synchronous: 1`, no acknowledged commit missing on the final primary.
//! With asynchronous replication the commits lost are counted, not failed (full run only).
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
    if !args.quick {
        one(&env, &mut r, "async", 0, kills, &mut rng).await?;
    }
    Ok(r)
}
