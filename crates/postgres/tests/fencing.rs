//! Fencing an old primary that its own instance manager cannot fence (issue 32, M4), end to
//! end: the real API server, the process-mode node agent running every pod as real processes
//! (PostgreSQL included), the operator under its own RBAC, and every server polled with a
//! real client (tokio-postgres) on the pod IPs.
//!
//! Needs root, PostgreSQL 15 (`scripts/setup-postgres.sh`) and the `bosun` binary built
//! beside the tests (`cargo build -p bosun`). Every wait is for a state, with a deadline.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bosun_postgres::api::{PostgresCluster, PostgresClusterStatus, SqlFenceState};
use bosun_postgres::instance::record::RoleRecord;
use bosun_postgres::instance::Role;
use bosun_testenv::{eventually, NodeAgent};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};

mod common;

const DEADLINE: u64 = 180;

struct Env {
    ns: String,
    agent: NodeAgent,
    clusters: Api<PostgresCluster>,
    pods: Api<Pod>,
    admin: Client,
    operator: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.operator.abort();
    }
}

async fn env(prefix: &str) -> Env {
    let b = common::control_plane::base(prefix, "bosun-postgres-fencing-test").await;
    let (_, operator) = common::control_plane::start_operator(b.operator, &b.ns);
    Env {
        clusters: Api::namespaced(b.admin.clone(), &b.ns),
        pods: Api::namespaced(b.admin.clone(), &b.ns),
        admin: b.admin,
        ns: b.ns,
        agent: b.agent,
        operator,
    }
}

impl Env {
    async fn create(&self, name: &str, spec: serde_json::Value) {
        let pc: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": name}, "spec": spec,
        }))
        .expect("cluster");
        self.clusters
            .create(&PostParams::default(), &pc)
            .await
            .expect("create");
    }

    async fn status_until(
        &self,
        name: &str,
        what: &str,
        secs: u64,
        ok: impl Fn(&PostgresClusterStatus) -> bool,
    ) -> PostgresClusterStatus {
        let got = eventually(secs, || async {
            let s = self.clusters.get(name).await.ok()?.status?;
            ok(&s).then_some(s)
        })
        .await;
        match got {
            Some(s) => s,
            None => panic!(
                "{name}: {what} never came: {:#?}\n{}",
                self.clusters.get(name).await.ok().and_then(|c| c.status),
                self.logs(name).await
            ),
        }
    }

    async fn logs(&self, cluster: &str) -> String {
        let mut out = String::new();
        for p in self.pods.list(&Default::default()).await.expect("pods") {
            if p.name_any().starts_with(cluster) {
                let log = self
                    .agent
                    .logs(&self.ns, &p.name_any(), "postgres")
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(60).collect();
                out.push_str(&format!("--- {}\n", p.name_any()));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }

    async fn password(&self, cluster: &str) -> String {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.admin.clone(), &self.ns);
        let s = secrets
            .get(&format!("{cluster}-credentials"))
            .await
            .expect("credentials secret");
        let v = s.data.expect("data")["superuserPassword"].0.clone();
        String::from_utf8(v).expect("utf-8")
    }
}

async fn connect(
    ip: &str,
    password: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(ip)
        .port(5432)
        .user("postgres")
        .password(password)
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(3));
    let (client, conn) = cfg.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

fn ip_of(s: &PostgresClusterStatus, instance: &str) -> String {
    s.instances
        .iter()
        .find(|i| i.name == instance)
        .and_then(|i| i.pod_ip.clone())
        .unwrap_or_else(|| panic!("no pod IP for {instance}: {s:#?}"))
}

/// Polls every address ever seen on a pod of the namespace (a pod object gone proves nothing
/// of what still listens at its address), all at once, every 100 ms: the most servers that,
/// in one poll, both answered `pg_is_in_recovery() = false` and acknowledged a commit (a
/// row in `probe`, within 3 s), and the addresses of such a poll.
fn watch_writable(
    pods: Api<Pod>,
    password: String,
    stop: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let mut addresses: BTreeSet<String> = BTreeSet::new();
        let mut most = (0, Vec::new());
        while stop.load(Ordering::Relaxed) == 0 {
            if let Ok(list) = pods.list(&Default::default()).await {
                addresses.extend(list.into_iter().filter_map(|p| p.status?.pod_ip));
            }
            let writable = futures::future::join_all(addresses.iter().map(|ip| {
                let password = password.clone();
                async move {
                    let c = connect(ip, &password).await.ok()?;
                    let row = c.query_one("SELECT pg_is_in_recovery()", &[]).await.ok()?;
                    if row.get::<_, bool>(0) {
                        return None;
                    }
                    let commit = tokio::time::timeout(
                        Duration::from_secs(3),
                        c.execute("INSERT INTO probe VALUES (now())", &[]),
                    )
                    .await;
                    matches!(commit, Ok(Ok(_))).then(|| ip.clone())
                }
            }))
            .await;
            let now: Vec<String> = writable.into_iter().flatten().collect();
            if now.len() > 1 {
                eprintln!("writable and committing at once: {now:?}");
            }
            if now.len() > most.0 {
                most = (now.len(), now);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        most
    })
}

/// Writes rows `w0`, `w1`, … to whichever instance the status names the primary, one commit
/// at a time, until `stop`; the rows whose commit was acknowledged.
fn write_stream(
    clusters: Api<PostgresCluster>,
    name: &'static str,
    password: String,
    stop: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Vec<String>> {
    tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut n = 0u64;
        let mut conn: Option<(String, tokio_postgres::Client)> = None;
        while stop.load(Ordering::Relaxed) == 0 {
            let primary_ip = clusters.get(name).await.ok().and_then(|c| {
                let s = c.status?;
                let p = s.current_primary.clone()?;
                s.instances.iter().find(|i| i.name == p)?.pod_ip.clone()
            });
            let Some(ip) = primary_ip else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            if conn.as_ref().is_none_or(|(at, _)| *at != ip) {
                conn = connect(&ip, &password).await.ok().map(|c| (ip.clone(), c));
            }
            let Some((_, c)) = &conn else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let row = format!("w{n}");
            n += 1;
            let insert = tokio::time::timeout(
                Duration::from_secs(10),
                c.execute("INSERT INTO t VALUES ($1)", &[&row]),
            )
            .await;
            if matches!(insert, Ok(Ok(_))) {
                acked.push(row);
            } else {
                // Not acknowledged: it may or may not be there; a new row is tried.
                conn = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        acked
    })
}

/// The PID of the instance manager of the pod with UID `uid` (a host process in process
/// mode; its PostgreSQL children share its environment, not its arguments).
fn manager_pid(uid: &str) -> Option<u32> {
    let want = format!("BOSUN_PG_POD_UID={uid}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let environ = std::fs::read(e.path().join("environ")).ok()?;
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let is_manager = args.len() >= 3 && args[1] == b"pg" && args[2] == b"instance";
        (is_manager && environ.split(|b| *b == 0).any(|v| v == want.as_bytes())).then_some(pid)
    })
}

/// The state letter of `/proc/<pid>/stat` (R, S, T stopped, Z zombie); None: no process.
fn proc_state(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().next().map(str::to_string)
}

fn signal(pid: u32, sig: i32) {
    let pid = i32::try_from(pid).expect("pid");
    // SAFETY: kill(2) with a PID this test found for the process it means to signal.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// The role records (`<PGDATA>.bosun-role`) under a claim's directory.
fn role_records(dir: &std::path::Path) -> Vec<RoleRecord> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.to_string_lossy().ends_with(".bosun-role") {
                if let Some(r) = std::fs::read(&p)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                {
                    found.push(r);
                }
            } else if e.file_type().is_ok_and(|t| t.is_dir()) && d == dir {
                stack.push(p);
            }
        }
    }
    found
}

/// Issue 32, M4 beyond the kubelet: the primary's instance manager stopped (SIGSTOP; its
/// PostgreSQL runs on and takes writes) and its pod force-deleted (grace 0: the object is
/// gone at once), its processes left running as a kubelet that has not synced yet leaves
/// them. The operator reaches that PostgreSQL at its last address, stops it, records it,
/// and only then promotes a replica. Every address polled throughout: never two servers
/// both out of recovery and acknowledging a commit in one poll; with `synchronous: 1`, no
/// acknowledged commit lost. The old instance comes back on a new pod as a replica (its role
/// record says so, for that pod) on the new primary's timeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_deleted_primary_whose_manager_is_stopped_is_fenced_through_postgres() {
    let e = env("pg-fence").await;
    e.create(
        "pgf",
        serde_json::json!({"size": 3, "replication": {"synchronous": 1}}),
    )
    .await;
    let s = e
        .status_until("pgf", "Healthy with 3 ready instances", DEADLINE, |s| {
            s.phase == Some(bosun_postgres::api::Phase::Healthy)
                && s.ready_instances == 3
                && s.synchronous.as_ref().and_then(|y| y.effective) == Some(1)
        })
        .await;
    let pw = e.password("pgf").await;
    let first = s.current_primary.clone().expect("a primary");
    let first_ip = ip_of(&s, &first);
    let c = connect(&first_ip, &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); CREATE TABLE probe (at timestamptz)")
        .await
        .expect("tables");
    let postmaster: i32 = c
        .query_one(
            "SELECT split_part(pg_read_file('postmaster.pid'), E'\\n', 1)::int",
            &[],
        )
        .await
        .expect("postmaster pid")
        .get(0);
    let postmaster = u32::try_from(postmaster).expect("pid");
    drop(c);
    let old_uid = e
        .pods
        .get(&first)
        .await
        .expect("primary pod")
        .uid()
        .expect("uid");
    let manager = manager_pid(&old_uid).expect("the primary's instance manager process");
    e.agent
        .linger_after_deletion(&e.ns, &first)
        .expect("linger");

    // Every status the operator writes, in order: the fence must be recorded stopped before
    // another primary is.
    let history: Arc<Mutex<Vec<PostgresClusterStatus>>> = Arc::default();
    let stop = Arc::new(AtomicUsize::new(0));
    let recorder = {
        let (clusters, history, stop) = (e.clusters.clone(), history.clone(), stop.clone());
        tokio::spawn(async move {
            while stop.load(Ordering::Relaxed) == 0 {
                if let Some(s) = clusters.get("pgf").await.ok().and_then(|c| c.status) {
                    let mut h = history.lock().unwrap_or_else(|p| p.into_inner());
                    if h.last() != Some(&s) {
                        h.push(s);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let monitor = watch_writable(e.pods.clone(), pw.clone(), stop.clone());
    let writer = write_stream(e.clusters.clone(), "pgf", pw.clone(), stop.clone());
    let count = |ip: String| {
        let pw = pw.clone();
        async move {
            let c = connect(&ip, &pw).await.ok()?;
            let n: i64 = c
                .query_one("SELECT count(*) FROM t", &[])
                .await
                .ok()?
                .get(0);
            Some(n)
        }
    };
    eventually(DEADLINE, || async {
        (count(first_ip.clone()).await? >= 20).then_some(())
    })
    .await
    .expect("the write stream commits");

    signal(manager, libc::SIGSTOP);
    let stopped = eventually(10, || async {
        (proc_state(manager).as_deref() == Some("T")).then_some(())
    })
    .await;
    assert!(
        stopped.is_some(),
        "the manager {manager} did not stop: {:?}\n{}",
        proc_state(manager),
        String::from_utf8_lossy(
            &std::process::Command::new("ps")
                .args(["-eo", "pid,ppid,pgid,stat,args"])
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default()
        )
        .lines()
        .filter(|l| l.contains("bosun") || l.contains("postgres"))
        .collect::<Vec<_>>()
        .join("\n")
    );
    e.pods
        .delete(
            &first,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("force delete");
    // The object is gone at once; the processes run on.
    eventually(30, || async {
        let p = e.pods.get_opt(&first).await.ok()?;
        p.is_none_or(|p| p.uid().as_deref() != Some(old_uid.as_str()))
            .then_some(())
    })
    .await
    .expect("the old pod object removed");
    assert_eq!(proc_state(manager).as_deref(), Some("T"), "manager stopped");
    assert!(
        proc_state(postmaster).is_some_and(|s| s != "Z"),
        "the old postmaster {postmaster} died with its pod object: the test needs it running"
    );

    let s = e
        .status_until("pgf", "a new primary, Healthy, 3 ready", 300, |s| {
            s.phase == Some(bosun_postgres::api::Phase::Healthy)
                && s.ready_instances == 3
                && s.current_primary.as_deref().is_some_and(|p| p != first)
        })
        .await;
    let last = s.current_primary.clone().expect("a primary");
    // Stopped by the fence, not by a kubelet: its manager is still stopped.
    let state = proc_state(postmaster);
    assert!(
        state.is_none() || state.as_deref() == Some("Z"),
        "the old postmaster {postmaster} still runs ({state:?})"
    );
    assert_eq!(proc_state(manager).as_deref(), Some("T"), "manager stopped");
    {
        let h = history.lock().unwrap_or_else(|p| p.into_inner());
        let promoted = h
            .iter()
            .position(|s| s.current_primary.as_deref() != Some(first.as_str()))
            .expect("the promotion recorded");
        let fenced = h.iter().position(|s| {
            s.last_primary.as_ref().is_some_and(|l| {
                l.instance == first
                    && l.address == format!("{first_ip}:5432")
                    && l.sql_fence == Some(SqlFenceState::Stopped)
            })
        });
        let fencing = h.iter().position(|s| {
            s.last_primary
                .as_ref()
                .is_some_and(|l| l.sql_fence == Some(SqlFenceState::Fencing))
        });
        assert!(
            matches!((fencing, fenced), (Some(a), Some(b)) if a < b && b < promoted),
            "the fence was not recorded (Fencing, then Stopped) before the promotion: fencing \
             {fencing:?}, stopped {fenced:?}, promoted {promoted}: {:#?}",
            h.iter()
                .map(|s| (s.current_primary.clone(), s.last_primary.clone()))
                .collect::<Vec<_>>()
        );
    }

    // The old instance, on a new pod on its claim, is a replica of the new primary.
    let pod = e
        .pods
        .get(&first)
        .await
        .expect("the old instance's new pod");
    let new_uid = pod.uid().expect("uid");
    assert_ne!(new_uid, old_uid);
    let dir = e
        .agent
        .claim_dir(&e.ns, &first)
        .await
        .expect("the old primary's claim");
    let records = role_records(&dir);
    assert!(
        records
            .iter()
            .any(|r| r.pod.as_deref() == Some(new_uid.as_str()) && r.role == Role::Replica),
        "no role record of the new pod as a replica under {}: {records:?}",
        dir.display()
    );
    let rejoined = ip_of(&s, &first);
    let c = connect(&rejoined, &pw).await.expect("the old instance");
    let in_recovery: bool = c
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("in recovery")
        .get(0);
    assert!(in_recovery, "the old primary came back out of recovery");
    // The status that first showed three ready instances may still carry the old instance's
    // report from before it replayed the timeline switch (a replica follows the new timeline
    // as it streams): wait for the report, which never comes if it stayed on the old one.
    let s = e
        .status_until(
            "pgf",
            "the old primary on the new primary's timeline",
            120,
            |s| {
                let timelines: BTreeMap<&str, Option<u32>> = s
                    .instances
                    .iter()
                    .map(|i| (i.name.as_str(), i.timeline))
                    .collect();
                timelines.get(first.as_str()).copied().flatten().is_some()
                    && timelines.get(first.as_str()) == timelines.get(last.as_str())
            },
        )
        .await;

    let now = count(ip_of(&s, &last)).await.expect("count");
    eventually(DEADLINE, || async {
        (count(ip_of(&s, &last)).await? >= now + 20).then_some(())
    })
    .await
    .expect("the stream commits on the new primary");
    stop.store(1, Ordering::Relaxed);
    let acked = writer.await.expect("writer");
    let (most, at) = monitor.await.expect("monitor");
    recorder.await.expect("recorder");
    e.agent.kill_lingering().expect("kill the stopped manager");

    let c = connect(&ip_of(&s, &last), &pw).await.expect("new primary");
    let rows: BTreeSet<String> = c
        .query("SELECT v FROM t", &[])
        .await
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|r| !rows.contains(*r)).collect();
    eprintln!(
        "force-deleted primary, manager stopped: acknowledged commits {}, lost {}",
        acked.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged commits lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    assert_eq!(
        most, 1,
        "two servers writable and committing at once: {at:?}"
    );
}
