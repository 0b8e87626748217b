//! i. PostgresCluster on real PostgreSQL (process-mode node agent, `bosun run --operators
//! postgres` as a child process): the time from `create` to a Healthy 3-instance cluster;
//! failovers (the primary's pod deleted → another instance accepts a write), each followed by
//! the old primary's return as a replica; switchovers on request (→ the target accepts a
//! write); then the operator's RSS with M more one-instance clusters (PostgreSQL's own
//! processes are not the operator's and are not counted). Through every failover and
//! switchover each pod's instance API is polled: two ready primaries at once fail the case.
use std::path::Path;
use std::time::{Duration, Instant};

use bosun_bench::pg::{connect, ip_of, list, median, until_writable, PgEnv, PrimaryWatch};
use serde_json::json;

use crate::Row;

const NS: &str = "bench-pg";
/// A bound on a run gone wrong, not a target.
const LIMIT: Duration = Duration::from_secs(300);

fn row(case: &str, n: usize, seconds: f64, note: String) -> Row {
    Row {
        case: case.into(),
        n,
        seconds,
        note,
        ..Default::default()
    }
}

/// The primary's name and the names of the other instances, from a healthy status.
fn roles(s: &bosun_postgres::api::PostgresClusterStatus) -> anyhow::Result<(String, Vec<String>)> {
    let primary = s
        .current_primary
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no primary in {s:?}"))?;
    let others = s
        .instances
        .iter()
        .filter(|i| i.name != primary)
        .map(|i| i.name.clone())
        .collect();
    Ok((primary, others))
}

pub async fn case_postgres(
    bosun: &Path,
    rounds: usize,
    clusters: usize,
) -> anyhow::Result<Vec<Row>> {
    let env = PgEnv::start(bosun, NS).await?;
    let t0 = Instant::now();
    env.create("pg", 3, 0).await?;
    let s = env.healthy("pg", 3, LIMIT).await?;
    let ready = t0.elapsed().as_secs_f64();
    let pw = env.password("pg").await?;
    let (primary, _) = roles(&s)?;
    let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
    connect(&ip, &pw)
        .await?
        .batch_execute("CREATE TABLE t (v text)")
        .await?;
    let mut rows = vec![row(
        "postgres ready, 3 instances (bosun)",
        3,
        ready,
        "create → Healthy, 3 ready: initdb, then 2 replicas by pg_basebackup, one at a time".into(),
    )];

    let mut failovers = Vec::new();
    let mut rejoins = Vec::new();
    let mut most = 0;
    for _ in 0..rounds {
        let s = env.healthy("pg", 3, LIMIT).await?;
        let (old, _) = roles(&s)?;
        let watch = PrimaryWatch::start(env.pods.clone(), "pg");
        let t0 = Instant::now();
        env.delete_pod(&old).await?;
        let took = until_writable(&env, "pg", &pw, &old, t0, LIMIT).await?;
        failovers.push(took.as_secs_f64());
        env.healthy("pg", 3, LIMIT).await?;
        rejoins.push(t0.elapsed().as_secs_f64());
        most = most.max(watch.stop().await);
    }
    anyhow::ensure!(
        most <= 1,
        "{most} ready primaries at once during a failover"
    );
    rows.push(row(
        "postgres failover (bosun)",
        rounds,
        median(&failovers),
        format!(
            "primary pod deleted → another instance accepts a write, 1 s probes, failoverDelaySeconds 0: {} s; back to 3 ready (old primary rejoined): {} s; most ready primaries at once: {most}",
            list(&failovers),
            list(&rejoins)
        ),
    ));

    let mut switchovers = Vec::new();
    let mut most = 0;
    for _ in 0..rounds {
        let s = env.healthy("pg", 3, LIMIT).await?;
        let (old, others) = roles(&s)?;
        let target = others
            .first()
            .ok_or_else(|| anyhow::anyhow!("no replica"))?
            .clone();
        let watch = PrimaryWatch::start(env.pods.clone(), "pg");
        let t0 = Instant::now();
        env.patch("pg", json!({"switchoverTo": target})).await?;
        let took = until_writable(&env, "pg", &pw, &old, t0, LIMIT).await?;
        switchovers.push(took.as_secs_f64());
        loop {
            let s = env.healthy("pg", 3, LIMIT).await?;
            if s.current_primary.as_deref() == Some(target.as_str()) {
                break;
            }
            anyhow::ensure!(t0.elapsed() < LIMIT, "{target} never became the primary");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        most = most.max(watch.stop().await);
    }
    anyhow::ensure!(
        most <= 1,
        "{most} ready primaries at once during a switchover"
    );
    rows.push(row(
        "postgres switchover (bosun)",
        rounds,
        median(&switchovers),
        format!(
            "switchoverTo set → the target accepts a write: {} s; most ready primaries at once: {most}",
            list(&switchovers)
        ),
    ));

    let t0 = Instant::now();
    for i in 0..clusters {
        env.create(&format!("many-{i}"), 1, 0).await?;
    }
    for i in 0..clusters {
        env.healthy(&format!("many-{i}"), 1, LIMIT * 4).await?;
    }
    let all_ready = t0.elapsed().as_secs_f64();
    // A settling window (a measurement, not a synchronisation): caches and the periodic
    // instance polls in their steady state.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (anon, file) = env.op.rss_split_mb();
    let mut r = row(
        "postgres operator RSS (bosun)",
        clusters + 1,
        all_ready,
        format!(
            "{} clusters ({} instances), PostgreSQL's processes not counted; seconds: the {clusters} one-instance clusters created → all Healthy; {anon:.1} MB anonymous + {file:.1} MB of the binary's pages",
            clusters + 1,
            clusters + 3
        ),
    );
    r.peak_rss_mb = env.op.rss_mb();
    r.cpu_seconds = env.op.cpu_seconds();
    rows.push(r);
    env.op.stop().await;
    Ok(rows)
}
