//! i. PostgresCluster on real PostgreSQL (process-mode node agent, `bosun run --operators
//! postgres` as a child process): the time from `create` to a Healthy 3-instance cluster;
//! failovers (the primary's pod deleted → another instance accepts a write), each followed by
//! the old primary's return as a replica; the primary's container killed (→ an instance
//! accepts a write again); switchovers on request (→ the target accepts a write); then the
//! operator's RSS with M more one-instance clusters (PostgreSQL's own processes are not the
//! operator's and are not counted). Through every failover, kill and switchover each pod's
//! instance API is polled: two ready primaries at once fail the case. Also a rolling update
//! of a synchronous 3-instance cluster under writes ([`rolling_update`]): any acknowledged
//! commit lost fails the case.
//!
//! Then, on a fresh control plane, for a stated data size (a table filled by
//! `generate_series`, its size measured): a cluster bootstrapped from a base backup of it
//! (`bootstrap.recovery` from a volume store) until Healthy, and a replica added to it
//! (`pg_basebackup`) until Healthy with both ([`case_restore`]).
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bosun_bench::pg::{connect, ip_of, list, median, until_writable, PgEnv, PrimaryWatch};
use kube::api::Api;
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

    // kill -9 of the primary's container (postgres and its manager, as an OOM kill or a
    // crash would): the kubelet restarts it on its data; writes are back once any instance
    // (the old primary after its crash recovery, or a promoted replica) accepts one.
    let mut kills = Vec::new();
    let mut most = 0;
    for _ in 0..rounds {
        let s = env.healthy("pg", 3, LIMIT).await?;
        let (old, _) = roles(&s)?;
        let watch = PrimaryWatch::start(env.pods.clone(), "pg");
        let t0 = Instant::now();
        env.agent.kill_containers(NS, &old)?;
        let took = until_writable(&env, "pg", &pw, "", t0, LIMIT).await?;
        kills.push(took.as_secs_f64());
        env.healthy("pg", 3, LIMIT).await?;
        most = most.max(watch.stop().await);
    }
    anyhow::ensure!(
        most <= 1,
        "{most} ready primaries at once after a primary's container was killed"
    );
    rows.push(row(
        "postgres primary killed (bosun)",
        rounds,
        median(&kills),
        format!(
            "the primary's container killed (SIGKILL) → an instance accepts a write: {} s; most ready primaries at once: {most}",
            list(&kills)
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

    rows.push(rolling_update(&env, rounds).await?);

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
    // The instances, then the control plane, go before the restore case starts its own.
    drop(env.agent);
    drop(env.cp);
    rows.extend(case_restore(bosun, rounds, DATA_MB).await?);
    rows.extend(case_restore_s3(bosun, rounds, DATA_MB).await?);
    Ok(rows)
}

/// Commits one row at a time on the instance the status names the primary, until `stop`;
/// the ids whose commit was acknowledged (a failed attempt's outcome is unknown: not counted).
fn write_stream(
    clusters: Api<bosun_postgres::api::PostgresCluster>,
    name: &'static str,
    password: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<i64>> {
    tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut id: i64 = 0;
        let mut conn: Option<tokio_postgres::Client> = None;
        while !stop.load(Ordering::Relaxed) {
            let c = match conn.take() {
                Some(c) => c,
                None => {
                    let ip = clusters.get(name).await.ok().and_then(|c| {
                        let s = c.status?;
                        ip_of(&s, s.current_primary.as_deref()?)
                    });
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
            id += 1;
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                c.execute("INSERT INTO w (id) VALUES ($1)", &[&id]),
            )
            .await;
            if let Ok(Ok(_)) = r {
                acked.push(id);
                conn = Some(c);
            }
        }
        acked
    })
}

/// The pods of cluster `name` (by name prefix) and their UIDs, Terminating ones marked.
async fn pods_of(env: &PgEnv, name: &str) -> anyhow::Result<Vec<(String, String, bool)>> {
    let prefix = format!("{name}-");
    Ok(env
        .pods
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| {
            let n = p.metadata.name?;
            n.starts_with(&prefix).then(|| {
                (
                    n,
                    p.metadata.uid.unwrap_or_default(),
                    p.metadata.deletion_timestamp.is_some(),
                )
            })
        })
        .collect())
}

/// A rolling update of a 3-instance cluster with `synchronous: 1` under a stream of
/// single-row commits, `rounds` times: a pod-template change (a pod annotation, which takes
/// the path an image change takes: the replicas replaced one at a time, a switchover to an
/// updated replica, the old primary last) → every pod replaced, `PodsUpToDate` and Healthy
/// with 3 ready. The case fails if an acknowledged commit is missing at the end or two
/// instances answer as ready primaries at once.
async fn rolling_update(env: &PgEnv, rounds: usize) -> anyhow::Result<Row> {
    const NAME: &str = "roll";
    env.create(NAME, 3, 1).await?;
    let s = env.healthy(NAME, 3, LIMIT).await?;
    let pw = env.password(NAME).await?;
    let (primary, _) = roles(&s)?;
    let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
    connect(&ip, &pw)
        .await?
        .batch_execute("CREATE TABLE w (id bigint)")
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_stream(env.clusters.clone(), NAME, pw.clone(), stop.clone());
    let mut took = Vec::new();
    let mut most = 0;
    for round in 0..rounds {
        env.healthy(NAME, 3, LIMIT).await?;
        let before: Vec<String> = pods_of(env, NAME)
            .await?
            .into_iter()
            .map(|(_, uid, _)| uid)
            .collect();
        let watch = PrimaryWatch::start(env.pods.clone(), NAME);
        let t0 = Instant::now();
        env.patch(
            NAME,
            json!({"pod": {"annotations": {"bench.bosun.dev/round": round.to_string()}}}),
        )
        .await?;
        loop {
            let pods = pods_of(env, NAME).await?;
            let replaced = pods.len() == 3
                && pods
                    .iter()
                    .all(|(_, uid, terminating)| !terminating && !before.contains(uid));
            let done = replaced
                && env.status(NAME).await.is_some_and(|s| {
                    s.phase == Some(bosun_postgres::api::Phase::Healthy)
                        && s.ready_instances == 3
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "PodsUpToDate" && c.status == "True")
                });
            if done {
                break;
            }
            anyhow::ensure!(
                t0.elapsed() < LIMIT * 2,
                "round {round}: the rolling update did not finish"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        took.push(t0.elapsed().as_secs_f64());
        most = most.max(watch.stop().await);
    }
    // Commits on the updated cluster too, then the stream stops.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = writer.await?;
    let s = env.healthy(NAME, 3, LIMIT).await?;
    let (primary, _) = roles(&s)?;
    let ip = ip_of(&s, &primary).ok_or_else(|| anyhow::anyhow!("no IP for {primary}"))?;
    let present: std::collections::HashSet<i64> = connect(&ip, &pw)
        .await?
        .query("SELECT id FROM w", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lost = acked.iter().filter(|id| !present.contains(id)).count();
    anyhow::ensure!(
        !acked.is_empty(),
        "no commit acknowledged during the rolling updates"
    );
    anyhow::ensure!(
        lost == 0,
        "{lost} of {} acknowledged commits lost in rolling updates",
        acked.len()
    );
    anyhow::ensure!(
        most <= 1,
        "{most} ready primaries at once during a rolling update"
    );
    // The RSS figure that follows counts its own clusters only.
    env.clusters.delete(NAME, &Default::default()).await?;
    Ok(row(
        "postgres rolling update, 3 instances under writes (bosun)",
        rounds,
        median(&took),
        format!(
            "synchronous 1, a pod annotation changed → every pod replaced (replicas, a switchover, the old primary last), PodsUpToDate, Healthy: {} s; commits acknowledged {}, lost {lost}; most ready primaries at once: {most}",
            list(&took),
            acked.len()
        ),
    ))
}

/// The data size of the restore and replica figures.
const DATA_MB: u64 = 100;
const NS_RESTORE: &str = "bench-pg-restore";

/// Restore from a base backup, and a replica added, each for a `mb` MB table; `rounds` of
/// each. Every restored cluster is checked for the table's row count, then removed.
pub async fn case_restore(bosun: &Path, rounds: usize, mb: u64) -> anyhow::Result<Vec<Row>> {
    // BOSUN_BENCH_PG_KEEP=<dir> keeps the pods' logs and claims there for reading after.
    let keep = std::env::var_os("BOSUN_BENCH_PG_KEEP").map(std::path::PathBuf::from);
    let env = PgEnv::start_in(bosun, NS_RESTORE, keep).await?;
    let pc: bosun_postgres::PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
        "metadata": {"name": "data"},
        "spec": {"size": 1, "storage": {"size": "4Gi"},
                 "backup": {"store": {"volume": {"size": "8Gi"}}}},
    }))?;
    env.clusters
        .create(&kube::api::PostParams::default(), &pc)
        .await?;
    let filled = fill_and_back_up(&env, mb).await?;
    let store = json!({"volume": {"size": "8Gi"}});
    let mut restores = Vec::new();
    for i in 0..rounds {
        restores.push(restore_once(&env, &format!("restored-{i}"), &store, filled.rows).await?);
    }

    let mut replicas = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        env.patch("data", json!({"size": 2})).await?;
        env.healthy("data", 2, LIMIT).await?;
        replicas.push(t0.elapsed().as_secs_f64());
        env.patch("data", json!({"size": 1})).await?;
        env.healthy("data", 1, LIMIT).await?;
    }
    let Filled {
        rows: n,
        table_mb,
        db_mb,
        backup_secs,
    } = filled;
    let what =
        format!("a {table_mb:.0} MB table ({n} rows; database {db_mb:.0} MB) on a volume store");
    let rows = vec![
        row(
            "postgres restore from backup (bosun)",
            rounds,
            median(&restores),
            format!(
                "{what}: bootstrap.recovery create → Healthy (base backup copied, archived WAL replayed, promoted), every row checked: {} s; the base backup itself took {backup_secs:.1} s",
                list(&restores)
            ),
        ),
        row(
            "postgres replica added (bosun)",
            rounds,
            median(&replicas),
            format!(
                "{what}: size 1 → 2 → Healthy with 2 ready (pg_basebackup from the primary, streaming): {} s",
                list(&replicas)
            ),
        ),
    ];
    env.op.stop().await;
    Ok(rows)
}

/// The source cluster's table and its base backup.
struct Filled {
    rows: i64,
    table_mb: f64,
    db_mb: f64,
    backup_secs: f64,
}

/// Waits for the one-instance cluster `data` to be Healthy, fills its table with about `mb`
/// MB, then requests a base backup and waits for it.
async fn fill_and_back_up(env: &PgEnv, mb: u64) -> anyhow::Result<Filled> {
    let s = env.healthy("data", 1, LIMIT).await?;
    let pw = env.password("data").await?;
    let ip = ip_of(&s, "data-1").ok_or_else(|| anyhow::anyhow!("no IP for data-1"))?;
    let c = connect(&ip, &pw).await.context("connecting to data-1")?;
    // About 130 bytes a row on disk (three md5 texts and an integer, plus the tuple header).
    let n = i64::try_from(mb * 1_000_000 / 130)?;
    c.batch_execute(&format!(
        "CREATE TABLE big AS SELECT g AS id, repeat(md5(g::text), 3) AS pad FROM generate_series(1, {n}) g"
    ))
    .await
    .context("filling data-1's table")?;
    let size: i64 = c
        .query_one("SELECT pg_total_relation_size('big')", &[])
        .await
        .context("data-1's table size")?
        .get(0);
    let db: i64 = c
        .query_one("SELECT pg_database_size(current_database())", &[])
        .await
        .context("data-1's database size")?
        .get(0);
    // The table's WAL archived before any backup is awaited: the backup that completes next
    // may be one that started before the fill (a new cluster's first), and a restore replays
    // the archive to its end, so the rows must be there whichever backup it starts from. The
    // fill's commit record sits in the segment being written, which nothing else would switch.
    let seg: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .context("switching data-1's WAL")?
        .get(0);
    let t0 = Instant::now();
    loop {
        let last: Option<String> = c
            .query_one("SELECT last_archived_wal FROM pg_stat_archiver", &[])
            .await
            .context("data-1's archiver")?
            .get(0);
        if last.as_deref().is_some_and(|l| l >= seg.as_str()) {
            break;
        }
        anyhow::ensure!(t0.elapsed() < LIMIT, "data-1 never archived {seg}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A base backup holding the table: requested, then waited for.
    let before = env
        .status("data")
        .await
        .and_then(|s| s.backup)
        .and_then(|b| b.last_successful_backup);
    env.clusters
        .patch(
            "data",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {
                bosun_postgres::controller::backup::REQUEST_ANNOTATION: "bench-restore"}}})),
        )
        .await?;
    let t0 = Instant::now();
    loop {
        let now = env
            .status("data")
            .await
            .and_then(|s| s.backup)
            .and_then(|b| b.last_successful_backup);
        if now.is_some() && now != before {
            break;
        }
        anyhow::ensure!(t0.elapsed() < LIMIT, "the base backup never completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Filled {
        rows: n,
        table_mb: size as f64 / 1e6,
        db_mb: db as f64 / 1e6,
        backup_secs: t0.elapsed().as_secs_f64(),
    })
}

/// Creates cluster `name` from `data`'s backup in `store` and times create → Healthy; checks
/// every row is there (`want`), then removes the cluster, its pod and claim.
async fn restore_once(
    env: &PgEnv,
    name: &str,
    store: &serde_json::Value,
    want: i64,
) -> anyhow::Result<f64> {
    let pc: bosun_postgres::PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
        "metadata": {"name": name},
        "spec": {"size": 1, "storage": {"size": "4Gi"}, "bootstrap": {"recovery": {
            "store": store, "clusterName": "data"}}},
    }))?;
    let t0 = Instant::now();
    env.clusters
        .create(&kube::api::PostParams::default(), &pc)
        .await?;
    let s = env.healthy(name, 1, LIMIT).await?;
    let took = t0.elapsed().as_secs_f64();
    let instance = format!("{name}-1");
    let ip = ip_of(&s, &instance).ok_or_else(|| anyhow::anyhow!("no IP for {instance}"))?;
    let rpw = env.password(name).await?;
    let got: i64 = connect(&ip, &rpw)
        .await
        .with_context(|| format!("connecting to {instance}"))?
        .query_one("SELECT count(*) FROM big", &[])
        .await
        .with_context(|| format!("counting {instance}'s rows"))?
        .get(0);
    anyhow::ensure!(got == want, "{name} restored {got} rows of {want}");
    // No garbage collector runs here: the cluster's pod and claim go by hand.
    env.clusters
        .delete(name, &kube::api::DeleteParams::default())
        .await?;
    env.delete_pod(&instance).await?;
    Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        env.admin.clone(),
        &env.ns,
    )
    .delete(&instance, &kube::api::DeleteParams::default())
    .await?;
    Ok(took)
}

const NS_RESTORE_S3: &str = "bench-pg-restore-s3";
const S3_BUCKET: &str = "bench-pg";

/// An S3-compatible server of its own: moto (`bash scripts/setup-moto.sh`), killed on drop.
struct Moto {
    endpoint: String,
    child: std::process::Child,
}

impl Moto {
    /// None when moto is not installed (the row is then left out, and said so).
    async fn start() -> anyhow::Result<Option<Moto>> {
        let venv = std::env::var("BOSUN_MOTO_VENV").unwrap_or_else(|_| {
            format!(
                "{}/.cache/bosun/moto-venv",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let program = format!("{venv}/bin/moto_server");
        if !Path::new(&program).is_file() {
            eprintln!("[bench] postgres restore from S3 left out: {program} not found (bash scripts/setup-moto.sh)");
            return Ok(None);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = std::process::Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        let moto = Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        };
        let t0 = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            anyhow::ensure!(t0.elapsed() < LIMIT, "moto_server did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // moto takes unsigned requests: the bucket made with a bare PUT.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        c.write_all(
            format!(
                "PUT /{S3_BUCKET} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await?;
        let mut answer = String::new();
        c.read_to_string(&mut answer).await?;
        anyhow::ensure!(
            answer.starts_with("HTTP/1.1 200"),
            "creating the bucket: {}",
            answer.lines().next().unwrap_or_default()
        );
        Ok(Some(moto))
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The restore of [`case_restore`] from an S3 store (moto on this machine) instead of a
/// volume: the same table, backed up with `pg_basebackup -Z 1` streamed up in parts, and
/// restored by streaming the GET body through gunzip and tar (issue 32, H10), so that the two
/// rows sit side by side.
pub async fn case_restore_s3(bosun: &Path, rounds: usize, mb: u64) -> anyhow::Result<Vec<Row>> {
    let Some(moto) = Moto::start().await? else {
        return Ok(Vec::new());
    };
    let keep = std::env::var_os("BOSUN_BENCH_PG_KEEP").map(std::path::PathBuf::from);
    let env = PgEnv::start_in(bosun, NS_RESTORE_S3, keep).await?;
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s3-creds"},
        "stringData": {"accessKeyId": "bench", "secretAccessKey": "bench-secret"},
    }))?;
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(env.admin.clone(), &env.ns)
        .create(&kube::api::PostParams::default(), &secret)
        .await?;
    let store = json!({"s3": {"endpoint": moto.endpoint, "bucket": S3_BUCKET,
                              "prefix": "bench/", "credentialsSecret": "s3-creds"}});
    let pc: bosun_postgres::PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
        "metadata": {"name": "data"},
        "spec": {"size": 1, "storage": {"size": "4Gi"}, "backup": {"store": store}},
    }))?;
    env.clusters
        .create(&kube::api::PostParams::default(), &pc)
        .await?;
    let Filled {
        rows: n,
        table_mb,
        db_mb,
        backup_secs,
    } = fill_and_back_up(&env, mb).await?;
    let mut restores = Vec::new();
    for i in 0..rounds {
        restores.push(restore_once(&env, &format!("restored-s3-{i}"), &store, n).await?);
    }
    env.op.stop().await;
    // The instances (their archive_command) go before the store does.
    drop(env.agent);
    drop(env.cp);
    drop(moto);
    Ok(vec![row(
        "postgres restore from an S3 backup (bosun)",
        rounds,
        median(&restores),
        format!(
            "a {table_mb:.0} MB table ({n} rows; database {db_mb:.0} MB) on an S3 store (moto on this machine, 64 MiB parts): bootstrap.recovery create → Healthy (base.tar.gz streamed from the GET through gunzip and tar, archived WAL replayed, promoted), every row checked: {} s; the base backup itself took {backup_secs:.1} s",
            list(&restores)
        ),
    )])
}
