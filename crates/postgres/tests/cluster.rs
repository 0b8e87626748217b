//! The PostgresCluster operator end to end: the real API server, the process-mode node agent
//! running every pod as real processes (PostgreSQL included), the operator under its own
//! RBAC, and the data checked with a real client (tokio-postgres) on the pod IPs.
//!
//! Needs root, PostgreSQL 15 (`scripts/setup-postgres.sh`) and the `bosun` binary built
//! beside the tests (`cargo build -p bosun`): the pods run it (`bosun pg install`, `bosun pg
//! instance`). Every wait is for a state, with a generous deadline.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bosun_postgres::api::{PostgresCluster, PostgresClusterStatus};
use bosun_postgres::instance::client::InstanceClient;
use bosun_postgres::instance::StateRole;
use bosun_testenv::{eventually, shared, test_namespace, NodeAgent};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

mod common;

const DEADLINE: u64 = 180;

struct Env {
    ns: String,
    agent: NodeAgent,
    clusters: Api<PostgresCluster>,
    pods: Api<Pod>,
    secrets: Api<Secret>,
    metrics: bosun_runtime::metrics::Metrics,
    /// The operator's identity, to start it again.
    client: Client,
    operator: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.operator.abort();
    }
}

async fn env(prefix: &str) -> Env {
    let b = common::control_plane::base(prefix, "bosun-postgres-test").await;
    let (metrics, operator) = common::control_plane::start_operator(b.operator.clone(), &b.ns);
    Env {
        clusters: Api::namespaced(b.admin.clone(), &b.ns),
        pods: Api::namespaced(b.admin.clone(), &b.ns),
        secrets: Api::namespaced(b.admin.clone(), &b.ns),
        metrics,
        ns: b.ns,
        agent: b.agent,
        client: b.operator,
        operator,
    }
}

impl Env {
    /// Kills the operator (its task aborted wherever it is, as `kill -9` would stop it) and
    /// starts a new one.
    async fn restart_operator(&mut self) {
        self.operator.abort();
        let _ = (&mut self.operator).await;
        let (metrics, operator) =
            common::control_plane::start_operator(self.client.clone(), &self.ns);
        self.metrics = metrics;
        self.operator = operator;
    }

    async fn create(&self, name: &str, size: i32) {
        let pc: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": name},
            "spec": {"size": size},
        }))
        .expect("cluster");
        self.clusters
            .create(&PostParams::default(), &pc)
            .await
            .expect("create");
    }

    /// Waits for Healthy with `size` ready instances and one primary; the status.
    async fn healthy(&self, name: &str, size: i32) -> PostgresClusterStatus {
        let got = eventually(DEADLINE, || async {
            let s = self.clusters.get(name).await.ok()?.status?;
            let primaries = s.instances.iter().filter(|i| i.role == "primary").count();
            (s.phase == Some(bosun_postgres::api::Phase::Healthy)
                && s.ready_instances == size
                && s.size == size
                && primaries == 1)
                .then_some(s)
        })
        .await;
        match got {
            Some(s) => s,
            None => panic!(
                "{name} not healthy with {size} instances: {:#?}\n{}",
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
        let s = self
            .secrets
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
        .connect_timeout(Duration::from_secs(5));
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

/// Waits until the instance at `ip` serves `row` (replicas apply WAL asynchronously).
async fn has_row(ip: &str, password: &str, row: &str) -> bool {
    eventually(60, || async {
        let c = connect(ip, password).await.ok()?;
        let r = c.query("SELECT v FROM t", &[]).await.ok()?;
        r.iter().any(|r| r.get::<_, String>(0) == row).then_some(())
    })
    .await
    .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_then_scale_to_three_then_five_then_two_replicates_a_row_to_every_replica() {
    let e = env("pg-scale").await;
    e.create("pg", 1).await;
    let s = e.healthy("pg", 1).await;
    assert_eq!(s.current_primary.as_deref(), Some("pg-1"));
    let pw = e.password("pg").await;
    let primary = connect(&ip_of(&s, "pg-1"), &pw).await.expect("primary");
    primary
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before scaling')")
        .await
        .expect("write on the primary");

    e.clusters
        .patch(
            "pg",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"size": 3}})),
        )
        .await
        .expect("scale");
    let s = e.healthy("pg", 3).await;
    assert_eq!(s.current_primary.as_deref(), Some("pg-1"));
    assert_eq!(s.latest_instance, 3);
    // The operator's /metrics series follow the status in its cache.
    let at = format!("namespace=\"{}\",cluster=\"pg\"", e.ns);
    let served = eventually(60, || async {
        let text = e.metrics.encode();
        let want = [
            format!("bosun_postgres_instances_ready{{{at}}} 3"),
            format!("bosun_postgres_primary{{{at},instance=\"pg-1\"}} 1"),
        ];
        let lag = format!("bosun_postgres_replication_lag_bytes{{{at},instance=\"pg-3\"}} ");
        (want.iter().all(|w| text.lines().any(|l| l == w))
            && text.lines().any(|l| l.starts_with(&lag)))
        .then_some(())
    })
    .await;
    assert!(served.is_some(), "metrics:\n{}", e.metrics.encode());
    primary
        .execute("INSERT INTO t VALUES ('after scaling')", &[])
        .await
        .expect("write after scaling");
    for replica in ["pg-2", "pg-3"] {
        let ip = ip_of(&s, replica);
        for row in ["before scaling", "after scaling"] {
            assert!(has_row(&ip, &pw, row).await, "{replica} lacks {row:?}");
        }
        let c = connect(&ip, &pw).await.expect("replica");
        let in_recovery: bool = c
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .expect("role")
            .get(0);
        assert!(in_recovery, "{replica} is not a replica");
        let refused = c.execute("INSERT INTO t VALUES ('x')", &[]).await;
        assert!(refused.is_err(), "{replica} accepted a write");
    }

    // Up to 5, one replica at a time; the new ones have every row.
    e.clusters
        .patch(
            "pg",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"size": 5}})),
        )
        .await
        .expect("scale to 5");
    let s = e.healthy("pg", 5).await;
    assert_eq!(s.current_primary.as_deref(), Some("pg-1"));
    for replica in ["pg-4", "pg-5"] {
        for row in ["before scaling", "after scaling"] {
            assert!(
                has_row(&ip_of(&s, replica), &pw, row).await,
                "{replica} lacks {row:?}"
            );
        }
    }

    // Down to 2: the highest replicas go, pods, claims and their slots on the primary.
    e.clusters
        .patch(
            "pg",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"size": 2}})),
        )
        .await
        .expect("scale down");
    let s = e.healthy("pg", 2).await;
    let names: Vec<&str> = s.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["pg-1", "pg-2"]);
    let slots = eventually(60, || async {
        let rows = primary
            .query(
                "SELECT slot_name::text FROM pg_replication_slots ORDER BY 1",
                &[],
            )
            .await
            .ok()?;
        let slots: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        (slots == ["bosun_pg_2"]).then_some(slots)
    })
    .await;
    assert!(slots.is_some(), "pg-3's slot was not dropped");
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(e.clusters.clone().into_client(), &e.ns);
    for claim in ["pg-3", "pg-4", "pg-5"] {
        let gone = eventually(60, || async {
            claims.get_opt(claim).await.ok()?.is_none().then_some(())
        })
        .await;
        assert!(gone.is_some(), "{claim}'s claim is still there");
    }
}

/// Counts, for the whole failover, the largest number of instances that were writable
/// primaries at one moment: every pod's instance API asked at once, a primary counted when it
/// reports itself ready (accepting writes; one shutting down is not).
fn watch_primaries(pods: Api<Pod>, stop: Arc<AtomicUsize>) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut most = 0;
        while stop.load(Ordering::Relaxed) == 0 {
            let ips: Vec<std::net::IpAddr> = match pods.list(&Default::default()).await {
                Ok(list) => list
                    .into_iter()
                    .filter_map(|p| p.status?.pod_ip?.parse().ok())
                    .collect(),
                Err(_) => Vec::new(),
            };
            let states = futures::future::join_all(ips.into_iter().map(|ip| async move {
                InstanceClient::new(SocketAddr::new(ip, 8000), None)
                    .state()
                    .await
                    .ok()
            }))
            .await;
            let n = states
                .iter()
                .flatten()
                .filter(|s| s.role == StateRole::Primary && s.ready)
                .count();
            if n > 1 {
                eprintln!("primaries at once: {states:#?}");
            }
            most = most.max(n);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        most
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_pod_deleted_fails_over_and_the_old_primary_rejoins() {
    let e = env("pg-failover").await;
    e.create("pgf", 2).await;
    let s = e.healthy("pgf", 2).await;
    assert_eq!(s.current_primary.as_deref(), Some("pgf-1"));
    let pw = e.password("pgf").await;
    let old = connect(&ip_of(&s, "pgf-1"), &pw).await.expect("primary");
    old.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before failover')")
        .await
        .expect("write");
    assert!(has_row(&ip_of(&s, "pgf-2"), &pw, "before failover").await);

    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_primaries(e.pods.clone(), stop.clone());
    e.pods
        .delete("pgf-1", &DeleteParams::default())
        .await
        .expect("delete the primary's pod");

    let t0 = std::time::Instant::now();
    // pgf-2 is promoted and accepts writes.
    let promoted = eventually(DEADLINE, || async {
        let s = e.clusters.get("pgf").await.ok()?.status?;
        (s.current_primary.as_deref() == Some("pgf-2")).then_some(s)
    })
    .await
    .unwrap_or_else(|| panic!("no failover to pgf-2"));
    let new = connect(&ip_of(&promoted, "pgf-2"), &pw)
        .await
        .expect("new primary");
    new.execute("INSERT INTO t VALUES ('after failover')", &[])
        .await
        .expect("the new primary accepts writes");

    eprintln!("failover: {:?}", t0.elapsed());
    // The old primary is back, as a replica of the new one, with both rows.
    let s = e.healthy("pgf", 2).await;
    eprintln!("rejoined: {:?}", t0.elapsed());
    assert_eq!(s.current_primary.as_deref(), Some("pgf-2"));
    let back = s
        .instances
        .iter()
        .find(|i| i.name == "pgf-1")
        .expect("pgf-1 in status");
    assert_eq!(back.role, "replica", "{s:#?}");
    let ip = ip_of(&s, "pgf-1");
    for row in ["before failover", "after failover"] {
        if !has_row(&ip, &pw, row).await {
            panic!(
                "pgf-1 lacks {row:?}: {:#?}\n{}",
                e.clusters.get("pgf").await.ok().and_then(|c| c.status),
                e.logs("pgf").await
            );
        }
    }
    let pg1 = connect(&ip, &pw).await.expect("old primary");
    let in_recovery: bool = pg1
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("role")
        .get(0);
    assert!(in_recovery, "the old primary came back writable");

    stop.store(1, Ordering::Relaxed);
    let most = monitor.await.expect("monitor");
    assert_eq!(most, 1, "two instances reported primary at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_spec_says_why_and_touches_nothing() {
    let e = env("pg-refused").await;
    let pc: PostgresCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
        "metadata": {"name": "bad"},
        "spec": {"size": 2, "postgresql": {"parameters": {"listen_addresses": "*"}}},
    }))
    .expect("cluster");
    e.clusters
        .create(&PostParams::default(), &pc)
        .await
        .expect("create");
    let s = eventually(60, || async {
        let s = e.clusters.get("bad").await.ok()?.status?;
        (s.phase == Some(bosun_postgres::api::Phase::Failed)).then_some(s)
    })
    .await;
    let Some(s) = s else {
        let now = e.clusters.get("bad").await.map(|c| c.status);
        panic!("not refused: {now:?}");
    };
    let ready = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(
        ready
            .message
            .contains("listen_addresses is managed by the operator"),
        "{ready:?}"
    );
    assert!(e
        .pods
        .list(&Default::default())
        .await
        .expect("pods")
        .items
        .is_empty());
    assert!(e
        .secrets
        .get_opt("bad-credentials")
        .await
        .expect("secret read")
        .is_none());
}

impl Env {
    async fn patch(&self, name: &str, spec: serde_json::Value) {
        self.clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": spec })),
            )
            .await
            .expect("patch the cluster");
    }

    /// Waits for the status to satisfy `ok`; panics with the status and the logs otherwise.
    async fn status_until(
        &self,
        name: &str,
        what: &str,
        ok: impl Fn(&PostgresClusterStatus) -> bool,
    ) -> PostgresClusterStatus {
        let got = eventually(DEADLINE, || async {
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
}

fn role_of<'a>(s: &'a PostgresClusterStatus, instance: &str) -> &'a str {
    s.instances
        .iter()
        .find(|i| i.name == instance)
        .map(|i| i.role.as_str())
        .unwrap_or("absent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_on_request_never_has_two_primaries() {
    let e = env("pg-switch").await;
    e.create("pgs", 2).await;
    let s = e.healthy("pgs", 2).await;
    let pw = e.password("pgs").await;
    let old = connect(&ip_of(&s, "pgs-1"), &pw).await.expect("primary");
    old.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before switchover')")
        .await
        .expect("write");
    assert!(has_row(&ip_of(&s, "pgs-2"), &pw, "before switchover").await);

    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_primaries(e.pods.clone(), stop.clone());
    e.patch("pgs", serde_json::json!({"switchoverTo": "pgs-2"}))
        .await;
    let s = e
        .status_until("pgs", "pgs-2 primary, pgs-1 replica", |s| {
            s.current_primary.as_deref() == Some("pgs-2")
                && s.ready_instances == 2
                && role_of(s, "pgs-1") == "replica"
                && role_of(s, "pgs-2") == "primary"
        })
        .await;
    let new = connect(&ip_of(&s, "pgs-2"), &pw)
        .await
        .expect("new primary");
    new.execute("INSERT INTO t VALUES ('after switchover')", &[])
        .await
        .expect("the new primary accepts writes");
    let ip = ip_of(&s, "pgs-1");
    assert!(
        has_row(&ip, &pw, "after switchover").await,
        "pgs-1 does not follow pgs-2"
    );
    let c = connect(&ip, &pw).await.expect("old primary");
    assert!(
        c.execute("INSERT INTO t VALUES ('x')", &[]).await.is_err(),
        "pgs-1 still writable"
    );

    stop.store(1, Ordering::Relaxed);
    assert_eq!(monitor.await.expect("monitor"), 1, "two primaries at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_replica_stops_serving_and_rejoins_when_unfenced() {
    let e = env("pg-fence").await;
    e.create("pgx", 2).await;
    let s = e.healthy("pgx", 2).await;
    let pw = e.password("pgx").await;
    let primary = connect(&ip_of(&s, "pgx-1"), &pw).await.expect("primary");
    primary
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before fencing')")
        .await
        .expect("write");

    e.patch("pgx", serde_json::json!({"fencedInstances": ["pgx-2"]}))
        .await;
    let s = e
        .status_until("pgx", "pgx-2 fenced", |s| role_of(s, "pgx-2") == "fenced")
        .await;
    assert_eq!(s.current_primary.as_deref(), Some("pgx-1"));
    assert!(
        connect(&ip_of(&s, "pgx-2"), &pw).await.is_err(),
        "a fenced instance still serves clients"
    );
    primary
        .execute("INSERT INTO t VALUES ('while fenced')", &[])
        .await
        .expect("the primary still accepts writes");

    e.patch("pgx", serde_json::json!({"fencedInstances": []}))
        .await;
    let s = e.healthy("pgx", 2).await;
    assert_eq!(role_of(&s, "pgx-2"), "replica");
    assert!(has_row(&ip_of(&s, "pgx-2"), &pw, "while fenced").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_reconciles_nothing_until_resumed() {
    let e = env("pg-paused").await;
    e.create("pgp", 1).await;
    e.healthy("pgp", 1).await;
    e.patch("pgp", serde_json::json!({"paused": true})).await;
    e.status_until("pgp", "controlPaused", |s| s.control_paused)
        .await;
    e.patch("pgp", serde_json::json!({"size": 2})).await;
    let generation = e
        .clusters
        .get("pgp")
        .await
        .expect("cluster")
        .metadata
        .generation
        .expect("generation");
    // The operator has seen the new size (observedGeneration) and done nothing about it.
    let s = e
        .status_until("pgp", "the size change observed", |s| {
            s.observed_generation == Some(generation)
        })
        .await;
    assert!(s.control_paused);
    assert_eq!(s.phase, Some(bosun_postgres::api::Phase::Paused));
    let pods: Vec<String> = e
        .pods
        .list(&Default::default())
        .await
        .expect("pods")
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(pods, ["pgp-1"], "a paused cluster was reconciled");

    e.patch("pgp", serde_json::json!({"paused": false})).await;
    let s = e.healthy("pgp", 2).await;
    assert!(!s.control_paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_pods_deleted_with_claims_kept_come_back_with_the_same_rows() {
    let e = env("pg-allpods").await;
    e.create("pga", 2).await;
    let s = e.healthy("pga", 2).await;
    let pw = e.password("pga").await;
    let primary = connect(&ip_of(&s, "pga-1"), &pw).await.expect("primary");
    primary
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
        .await
        .expect("write");
    assert!(has_row(&ip_of(&s, "pga-2"), &pw, "kept").await);
    let uids: Vec<String> = e
        .pods
        .list(&Default::default())
        .await
        .expect("pods")
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();

    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_primaries(e.pods.clone(), stop.clone());
    for pod in ["pga-1", "pga-2"] {
        e.pods
            .delete(pod, &DeleteParams::default())
            .await
            .expect("delete a pod");
    }
    // Both pods replaced (new UIDs), then the cluster healthy again on the same claims.
    let replaced = eventually(DEADLINE, || async {
        let list = e.pods.list(&Default::default()).await.ok()?;
        let fresh = list
            .iter()
            .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| !uids.contains(u)))
            .count();
        (fresh == 2).then_some(())
    })
    .await;
    assert!(replaced.is_some(), "the pods were not recreated");
    let s = e.healthy("pga", 2).await;
    let names: Vec<&str> = s.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        ["pga-1", "pga-2"],
        "instances were re-cloned, not restarted"
    );
    for name in ["pga-1", "pga-2"] {
        assert!(
            has_row(&ip_of(&s, name), &pw, "kept").await,
            "{name} lost the row"
        );
    }
    let p = s.current_primary.clone().expect("a primary");
    let c = connect(&ip_of(&s, &p), &pw).await.expect("primary");
    c.execute("INSERT INTO t VALUES ('after restart')", &[])
        .await
        .expect("the primary accepts writes");

    stop.store(1, Ordering::Relaxed);
    assert_eq!(monitor.await.expect("monitor"), 1, "two primaries at once");
}

impl Env {
    async fn create_spec(&self, name: &str, spec: serde_json::Value) {
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

    /// Deletes an instance's pod and claim: all of its data.
    async fn destroy(&self, instance: &str) {
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.pods.clone().into_client(), &self.ns);
        claims
            .delete(instance, &DeleteParams::default())
            .await
            .expect("delete the claim");
        self.pods
            .delete(instance, &DeleteParams::default())
            .await
            .expect("delete the pod");
        let gone = eventually(DEADLINE, || async {
            (claims.get_opt(instance).await.ok()?.is_none()).then_some(())
        })
        .await;
        assert!(gone.is_some(), "claim {instance} never went");
    }
}

/// The server's clock now, RFC 3339 with microseconds.
async fn server_now(c: &tokio_postgres::Client) -> String {
    c.query_one(
        "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
        &[],
    )
    .await
    .expect("clock")
    .get(0)
}

async fn rows(ip: &str, password: &str) -> Vec<String> {
    let c = connect(ip, password).await.expect("connect");
    let mut v: Vec<String> = c
        .query("SELECT v FROM t", &[])
        .await
        .expect("read t")
        .iter()
        .map(|r| r.get(0))
        .collect();
    v.sort();
    v
}

/// One source cluster with a volume backup store serves both restores: a new cluster
/// bootstrapped from its backups to a point in time (the rows after it absent), then the
/// source itself losing every instance's data (pod and claim) and coming back from the
/// latest backup plus the archived WAL with every row. Deleting it keeps its backups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_restore_a_lost_cluster_and_bootstrap_another_to_a_point_in_time() {
    let e = env("pg-backup").await;
    e.create_spec(
        "pgb",
        serde_json::json!({"size": 1, "backup": {"store": {"volume": {"size": "1Gi"}}, "retention": "7d"}}),
    )
    .await;
    e.healthy("pgb", 1).await;
    // The first base backup is taken once the cluster is up.
    let s = e
        .status_until("pgb", "the first base backup", |s| {
            s.backup
                .as_ref()
                .is_some_and(|b| b.last_successful_backup.is_some())
        })
        .await;
    let first = s.backup.and_then(|b| b.last_successful_backup);
    let pw = e.password("pgb").await;
    let ip = ip_of(&e.healthy("pgb", 1).await, "pgb-1");
    let c = connect(&ip, &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('in the backup')")
        .await
        .expect("write");

    // A backup on request (the annotation), taken after the first row.
    e.clusters
        .patch(
            "pgb",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "postgres.lukeb0nd.com/backup-request": "r1"}}})),
        )
        .await
        .expect("annotate");
    e.status_until("pgb", "the requested backup", |s| {
        s.backup.as_ref().is_some_and(|b| {
            b.last_backup_request.as_deref() == Some("r1")
                && b.last_successful_backup.is_some()
                && b.last_successful_backup != first
        })
    })
    .await;

    c.batch_execute("INSERT INTO t VALUES ('before the target')")
        .await
        .expect("write");
    let target = server_now(&c).await;
    c.batch_execute("INSERT INTO t VALUES ('after the target')")
        .await
        .expect("write");
    // Close the segment so that it is archived now, not at archive_timeout.
    let segment: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    let s = e
        .status_until("pgb", "the segment archived", |s| {
            s.backup
                .as_ref()
                .and_then(|b| b.last_archived_wal.as_deref())
                .is_some_and(|w| w >= segment.as_str())
        })
        .await;
    let archiving = s
        .conditions
        .iter()
        .find(|c| c.type_ == "ContinuousArchiving")
        .expect("ContinuousArchiving");
    assert_eq!(archiving.status, "True", "{archiving:?}");
    assert!(s
        .conditions
        .iter()
        .any(|c| c.type_ == "LastBackupSucceeded" && c.status == "True"));
    assert!(s
        .backup
        .as_ref()
        .is_some_and(|b| b.first_recoverability_point.is_some()));

    // A new cluster from pgb's backups, to the point in time.
    e.create_spec(
        "pgr",
        serde_json::json!({"size": 1, "bootstrap": {"recovery": {
            "store": {"volume": {"size": "1Gi"}}, "clusterName": "pgb", "targetTime": target}}}),
    )
    .await;
    let r = e.healthy("pgr", 1).await;
    let pw_r = e.password("pgr").await;
    assert_eq!(
        rows(&ip_of(&r, "pgr-1"), &pw_r).await,
        ["before the target", "in the backup"],
        "the restore did not stop at {target}"
    );

    // Every instance's data of pgb gone: restored from the latest backup plus the WAL.
    e.destroy("pgb-1").await;
    let s = e
        .status_until("pgb", "restored as a new instance", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Healthy)
                && s.current_primary.as_deref() == Some("pgb-2")
                && s.ready_instances == 1
        })
        .await;
    assert_eq!(
        rows(&ip_of(&s, "pgb-2"), &pw).await,
        ["after the target", "before the target", "in the backup"]
    );
    let c = connect(&ip_of(&s, "pgb-2"), &pw)
        .await
        .expect("restored primary");
    c.execute("INSERT INTO t VALUES ('after the restore')", &[])
        .await
        .expect("the restored primary accepts writes");

    // Deleting the cluster keeps its backups.
    e.clusters
        .delete("pgb", &DeleteParams::default())
        .await
        .expect("delete the cluster");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(e.pods.clone().into_client(), &e.ns);
    let gone = eventually(DEADLINE, || async {
        (claims.get_opt("pgb-2").await.ok()?.is_none()).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the cluster's data claim was not removed with it"
    );
    assert!(
        claims.get_opt("pgb-backup").await.expect("get").is_some(),
        "the backups went with the cluster"
    );
}

/// No backup to restore from: the cluster is Failed, with the reason, and nothing is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_backup_lost_data_and_a_missing_source_fail_with_the_reason() {
    let e = env("pg-nobackup").await;
    e.create_spec(
        "pgm",
        serde_json::json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}, "clusterName": "nowhere"}}}),
    )
    .await;
    e.create("pgn", 1).await;
    let s = e
        .status_until("pgm", "Failed", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Failed)
        })
        .await;
    let why = s.phase_reason.unwrap_or_default();
    assert!(why.contains("nowhere-backup"), "{why}");
    assert!(
        e.pods.get_opt("pgm-1").await.expect("get").is_none(),
        "a pod was made without a backup to restore"
    );

    e.healthy("pgn", 1).await;
    e.destroy("pgn-1").await;
    let s = e
        .status_until("pgn", "Failed", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Failed)
        })
        .await;
    let why = s.phase_reason.unwrap_or_default();
    assert!(why.contains("no backup"), "{why}");
}

#[cfg(feature = "s3")]
use common::moto::Moto;

/// The S3 store against a real S3-compatible server: WAL archived and a base backup written
/// as objects, then the cluster's only instance losing its data and coming back from the
/// bucket with the row that was only in the archived WAL.
#[cfg(feature = "s3")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_store_archives_backs_up_and_restores_a_lost_cluster() {
    let moto = Moto::start().await;
    moto.client("").create_bucket().await.expect("bucket");
    let e = env("pg-s3").await;
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s3-creds"},
        "stringData": {"accessKeyId": "test-access", "secretAccessKey": "test-secret"},
    }))
    .expect("secret");
    e.secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the secret");
    // The smallest part size S3 allows: the base backup (over 5 MiB) goes up in parts.
    e.create_spec(
        "pgs",
        serde_json::json!({"size": 1, "backup": {"store": {"s3": {
            "endpoint": moto.endpoint, "bucket": "pg-backups", "prefix": "team",
            "credentialsSecret": "s3-creds", "partSize": "5Mi"}}}}),
    )
    .await;
    e.healthy("pgs", 1).await;
    e.status_until("pgs", "the first base backup", |s| {
        s.backup
            .as_ref()
            .is_some_and(|b| b.last_successful_backup.is_some())
    })
    .await;
    let pw = e.password("pgs").await;
    let ip = ip_of(&e.healthy("pgs", 1).await, "pgs-1");
    let c = connect(&ip, &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('only in the archive')")
        .await
        .expect("write");
    let segment: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    e.status_until("pgs", "the segment archived", |s| {
        s.backup
            .as_ref()
            .and_then(|b| b.last_archived_wal.as_deref())
            .is_some_and(|w| w >= segment.as_str())
    })
    .await;
    let objects = moto.client("team/pgs").list("").await.expect("list");
    assert!(
        objects.contains(&format!("wals/{segment}")),
        "{segment} not in the bucket: {objects:?}"
    );
    assert!(
        objects
            .iter()
            .any(|k| k.starts_with("base/") && k.ends_with("/bosun-backup.json")),
        "no base backup in the bucket: {objects:?}"
    );
    // The base backup is streamed up as a multipart upload: S3 names its number of parts in
    // the ETag. Gzipped, a new cluster's backup fits in one 5 MiB part (tests/s3_stream.rs
    // checks one of many parts).
    let base = objects
        .iter()
        .find(|k| k.starts_with("base/") && k.ends_with("/base.tar.gz"))
        .expect("base.tar.gz in the bucket");
    let etag = moto
        .client("team/pgs")
        .etag(base)
        .await
        .expect("head")
        .expect("base.tar.gz");
    assert!(
        etag.trim_matches('"')
            .rsplit_once('-')
            .is_some_and(|(_, n)| n.parse::<u32>().is_ok_and(|n| n >= 1)),
        "base.tar.gz was not a multipart upload: {etag}"
    );

    e.destroy("pgs-1").await;
    let s = e
        .status_until("pgs", "restored from the bucket", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Healthy)
                && s.current_primary.as_deref() == Some("pgs-2")
                && s.ready_instances == 1
        })
        .await;
    assert_eq!(
        rows(&ip_of(&s, "pgs-2"), &pw).await,
        ["only in the archive"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_killed_mid_failover_a_new_one_finishes_it_with_one_primary() {
    let mut e = env("pg-killed").await;
    e.create("pgk", 3).await;
    let s = e.healthy("pgk", 3).await;
    let pw = e.password("pgk").await;
    connect(&ip_of(&s, "pgk-1"), &pw)
        .await
        .expect("primary")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')")
        .await
        .expect("write");
    for replica in ["pgk-2", "pgk-3"] {
        assert!(has_row(&ip_of(&s, replica), &pw, "before").await);
    }
    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_primaries(e.pods.clone(), stop.clone());
    e.pods
        .delete("pgk-1", &DeleteParams::default())
        .await
        .expect("delete the primary's pod");
    // The failover under way — the loss recorded, or the decision taken — when the operator
    // dies.
    let under_way = eventually(DEADLINE, || async {
        let s = e.clusters.get("pgk").await.ok()?.status?;
        let decided = s.target_primary.as_deref().is_some_and(|t| t != "pgk-1");
        (s.primary_lost_since.is_some() || decided).then_some(())
    })
    .await;
    assert!(under_way.is_some(), "the loss of pgk-1 was never recorded");
    e.restart_operator().await;

    let s = eventually(DEADLINE, || async {
        let s = e.clusters.get("pgk").await.ok()?.status?;
        let healthy = s.phase == Some(bosun_postgres::api::Phase::Healthy)
            && s.ready_instances == 3
            && s.current_primary.as_deref().is_some_and(|p| p != "pgk-1");
        healthy.then_some(s)
    })
    .await
    .unwrap_or_else(|| panic!("the new operator did not finish the failover"));
    let primary = s.current_primary.clone().expect("primary");
    connect(&ip_of(&s, &primary), &pw)
        .await
        .expect("new primary")
        .execute("INSERT INTO t VALUES ('after')", &[])
        .await
        .expect("the new primary accepts writes");
    for i in s.instances.iter().filter(|i| i.name != primary) {
        let ip = ip_of(&s, &i.name);
        for row in ["before", "after"] {
            assert!(has_row(&ip, &pw, row).await, "{} lacks {row:?}", i.name);
        }
    }
    stop.store(1, Ordering::Relaxed);
    let most = monitor.await.expect("monitor");
    assert_eq!(most, 1, "two instances reported primary at once");
}

/// Each antiAffinity mode's pod, as the operator builds it, is accepted by the API server and
/// stored as built (the scheduler reads it from there; nothing schedules here, so where the
/// pods land is not what this proves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_affinity_of_each_mode_is_accepted_and_stored_by_the_api_server() {
    use bosun_postgres::controller::build;
    use bosun_postgres::instance::Role;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "pg-affinity")
        .await
        .expect("namespace");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    for (serial, mode) in [(1, "Required"), (2, "Preferred"), (3, "None")] {
        let pc: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "aa", "namespace": ns, "uid": "u-aa"},
            "spec": {"pod": {"antiAffinity": mode}},
        }))
        .expect("cluster");
        let plan = bosun_postgres::validate::plan(&pc, &Default::default()).expect("a valid plan");
        let mut pod = build::pod(
            &plan,
            serial,
            Role::Primary,
            None,
            &OwnerReference::default(),
        );
        // No owner here: the cluster object was never created.
        pod.metadata.owner_references = None;
        let stored = pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("{mode}: the API server refused the pod: {e}"));
        let affinity = stored.spec.as_ref().and_then(|s| s.affinity.clone());
        assert_eq!(
            affinity,
            pod.spec.as_ref().and_then(|s| s.affinity.clone()),
            "{mode}: stored as built"
        );
        let anti = affinity.and_then(|a| a.pod_anti_affinity);
        match mode {
            "Required" => assert!(anti
                .and_then(|a| a.required_during_scheduling_ignored_during_execution)
                .is_some_and(|t| t.len() == 1)),
            "Preferred" => assert!(anti
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution)
                .is_some_and(|t| t.len() == 1)),
            _ => assert!(anti.is_none()),
        }
    }
}

/// StorageClasses of the storage tests: one that allows expansion, one that does not.
async fn storage_classes(client: &Client) {
    use k8s_openapi::api::storage::v1::StorageClass;
    let classes: Api<StorageClass> = Api::all(client.clone());
    for (name, expand) in [("pg-expandable", true), ("pg-fixed", false)] {
        let sc: StorageClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "bosun.dev/simulated", "allowVolumeExpansion": expand,
            "volumeBindingMode": "Immediate",
        }))
        .expect("class");
        classes
            .patch(
                name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&sc),
            )
            .await
            .expect("storage class");
    }
}

fn claim_size(c: &PersistentVolumeClaim) -> (Option<String>, Option<String>) {
    let req = c
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone());
    let cap = c
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone());
    (req, cap)
}

fn condition<'a>(
    s: &'a PostgresClusterStatus,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    s.conditions.iter().find(|c| c.type_ == type_)
}

/// Whether an Event with `reason` was published about cluster `name`.
async fn has_event(client: &Client, ns: &str, name: &str, reason: &str) -> bool {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    eventually(30, || async {
        let list = events.list(&Default::default()).await.ok()?;
        let found = list.iter().any(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        });
        found.then_some(())
    })
    .await
    .is_some()
}

/// `spec.storage.size` grows every instance's claim when the StorageClass allows it; when it
/// does not, nothing changes but a condition and an Event say why; a shrink is refused.
/// The data is there throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_grows_every_claim_or_says_why_not_and_never_shrinks() {
    let e = env("pg-storage").await;
    let admin = shared()
        .await
        .expect("control plane")
        .client()
        .await
        .expect("client");
    storage_classes(&admin).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), &e.ns);
    for (name, class) in [("grow", "pg-expandable"), ("fixed", "pg-fixed")] {
        e.create_spec(
            name,
            serde_json::json!({"size": 2, "storage": {"size": "1Gi", "storageClassName": class}}),
        )
        .await;
    }
    for name in ["grow", "fixed"] {
        let s = e.healthy(name, 2).await;
        let pw = e.password(name).await;
        let c = connect(&ip_of(&s, &format!("{name}-1")), &pw)
            .await
            .expect("primary");
        c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')")
            .await
            .expect("write");
        e.patch(name, serde_json::json!({"storage": {"size": "2Gi"}}))
            .await;
    }

    // Expandable: both instances' claims ask for and get 2Gi; the condition says so.
    let s = e
        .status_until("grow", "StorageResized", |s| {
            condition(s, "StorageResized").is_some_and(|c| c.status == "True")
        })
        .await;
    assert_eq!(
        condition(&s, "StorageResized").map(|c| c.reason.as_str()),
        Some("VolumesResized")
    );
    for claim in ["grow-1", "grow-2"] {
        let c = claims.get(claim).await.expect("claim");
        assert_eq!(
            claim_size(&c),
            (Some("2Gi".into()), Some("2Gi".into())),
            "{claim}"
        );
    }
    assert!(has_event(&admin, &e.ns, "grow", "GrowingVolumes").await);

    // Not expandable: the reason in a condition and an Event, the claims as they were.
    let s = e
        .status_until("fixed", "ExpansionNotSupported", |s| {
            condition(s, "StorageResized").is_some_and(|c| c.reason == "ExpansionNotSupported")
        })
        .await;
    let c = condition(&s, "StorageResized").expect("condition");
    assert_eq!(c.status, "False");
    assert!(c.message.contains("pg-fixed"), "{}", c.message);
    assert!(has_event(&admin, &e.ns, "fixed", "ExpansionNotSupported").await);
    for claim in ["fixed-1", "fixed-2"] {
        let c = claims.get(claim).await.expect("claim");
        assert_eq!(claim_size(&c).0.as_deref(), Some("1Gi"), "{claim}");
    }

    // A shrink below what the claims ask for is refused, nothing touched; the cluster runs
    // on the last accepted spec meanwhile (issue 32, M1).
    e.patch("grow", serde_json::json!({"storage": {"size": "1Gi"}}))
        .await;
    let s = e
        .status_until("grow", "the shrink refused", |s| {
            condition(s, "SpecAccepted")
                .is_some_and(|c| c.status == "False" && c.reason == "InvalidSpec")
        })
        .await;
    let refused = condition(&s, "SpecAccepted").expect("SpecAccepted");
    assert!(
        refused.message.contains("cannot shrink"),
        "{}",
        refused.message
    );
    assert_eq!(
        claim_size(&claims.get("grow-1").await.expect("claim"))
            .0
            .as_deref(),
        Some("2Gi")
    );

    // Both clusters run on with their data.
    e.patch("grow", serde_json::json!({"storage": {"size": "2Gi"}}))
        .await;
    for name in ["grow", "fixed"] {
        let s = e.healthy(name, 2).await;
        let pw = e.password(name).await;
        for i in [1, 2] {
            let instance = format!("{name}-{i}");
            assert!(
                has_row(&ip_of(&s, &instance), &pw, "before").await,
                "{instance} lost the row"
            );
        }
    }

    // A major-version change of the running cluster is refused: a condition and an Event,
    // the pods keep their image; set back, it is healthy again.
    e.patch("grow", serde_json::json!({"version": 16})).await;
    let s = e
        .status_until("grow", "the major upgrade refused", |s| {
            condition(s, "SpecAccepted").is_some_and(|c| c.reason == "MajorUpgradeUnsupported")
        })
        .await;
    assert_eq!(s.version, Some(15));
    let refused = condition(&s, "SpecAccepted").expect("SpecAccepted");
    assert!(
        refused.message.contains("set spec.version back to 15"),
        "{}",
        refused.message
    );
    assert!(has_event(&admin, &e.ns, "grow", "MajorUpgradeUnsupported").await);
    let pods = e
        .pods
        .list(&kube::api::ListParams::default().labels("postgres.lukeb0nd.com/cluster=grow"))
        .await
        .expect("pods");
    assert_eq!(pods.items.len(), 2);
    for p in &pods.items {
        let images: Vec<_> = p
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| c.image.as_deref())
            .collect();
        assert!(
            images.iter().all(|i| *i == Some("postgres:15")),
            "{}: {images:?}",
            p.name_any()
        );
    }
    e.patch("grow", serde_json::json!({"version": 15})).await;
    e.status_until("grow", "accepted and Ready again once set back", |s| {
        condition(s, "Ready").is_some_and(|c| c.status == "True")
            && condition(s, "SpecAccepted").is_some_and(|c| c.status == "True")
    })
    .await;
}

/// A file above the part size goes up as a multipart upload (S3 gives the object an ETag
/// ending in `-<parts>`) and comes back byte for byte; one at the part size is a single PUT.
#[cfg(feature = "s3")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_upload_above_the_part_size_goes_up_in_parts_and_comes_back_whole() {
    let moto = Moto::start().await;
    let part = 5u64 << 20;
    let store = moto.client("multipart").with_part_size(part);
    store.create_bucket().await.expect("bucket");
    let dir = tempfile::tempdir().expect("temp dir");
    // Two full parts and one byte: three parts. Not a repeating pattern of the part size,
    // so parts sent out of order or twice would not compare equal.
    let big: Vec<u8> = (0..2 * part + 1)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let path = dir.path().join("base.tar");
    std::fs::write(&path, &big).expect("write");
    store
        .put_file("base/b1/base.tar", &path)
        .await
        .expect("multipart upload");
    let etag = store
        .etag("base/b1/base.tar")
        .await
        .expect("head")
        .expect("the object");
    assert!(etag.trim_matches('"').ends_with("-3"), "{etag}");
    let got = store
        .get("base/b1/base.tar")
        .await
        .expect("get")
        .expect("the object");
    assert!(
        got.len() == big.len() && got[..] == big[..],
        "the object differs"
    );

    let small = &big[..part as usize];
    let path = dir.path().join("pg_wal.tar");
    std::fs::write(&path, small).expect("write");
    store
        .put_file("base/b1/pg_wal.tar", &path)
        .await
        .expect("single upload");
    let etag = store
        .etag("base/b1/pg_wal.tar")
        .await
        .expect("head")
        .expect("the object");
    assert!(!etag.contains('-'), "{etag}");
    let got = store
        .get("base/b1/pg_wal.tar")
        .await
        .expect("get")
        .expect("the object");
    assert!(got[..] == small[..], "the object differs");
}

/// Counts the largest number of instances that answered `pg_is_in_recovery() = false` (a
/// server that accepts writes) at one poll, every pod's PostgreSQL asked at once.
fn watch_writable(
    pods: Api<Pod>,
    password: String,
    stop: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<usize> {
    watch_writable_also(pods, password, Vec::new(), stop)
}

/// [`watch_writable`], also asking `also` (addresses whose pod may be gone while something
/// may still listen there) at every poll.
fn watch_writable_also(
    pods: Api<Pod>,
    password: String,
    also: Vec<String>,
    stop: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut most = 0;
        while stop.load(Ordering::Relaxed) == 0 {
            let mut ips: Vec<String> = match pods.list(&Default::default()).await {
                Ok(list) => list.into_iter().filter_map(|p| p.status?.pod_ip).collect(),
                Err(_) => Vec::new(),
            };
            ips.extend(also.iter().cloned());
            ips.sort();
            ips.dedup();
            let writable = futures::future::join_all(ips.iter().map(|ip| {
                let password = password.clone();
                async move {
                    let c = connect(ip, &password).await.ok()?;
                    let row = c.query_one("SELECT pg_is_in_recovery()", &[]).await.ok()?;
                    (!row.get::<_, bool>(0)).then(|| ip.clone())
                }
            }))
            .await;
            let now: Vec<String> = writable.into_iter().flatten().collect();
            if now.len() > 1 {
                eprintln!("writable at once: {now:?}");
            }
            most = most.max(now.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        most
    })
}

/// When the postmaster at `ip` started (a restarted container starts a new one).
async fn postmaster_start(ip: &str, password: &str) -> Option<String> {
    let c = connect(ip, password).await.ok()?;
    let row = c
        .query_one("SELECT pg_postmaster_start_time()::text", &[])
        .await
        .ok()?;
    Some(row.get(0))
}

/// Issue 32, H1: after a switchover the pods keep the env they were created with (pgk-1
/// "primary", pgk-2 "replica of pgk-1"). Their containers are killed (as the OOM killer or a
/// liveness failure would): each comes back in its current role, and no poll ever sees two
/// writable servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_restarted_after_a_switchover_come_back_in_their_current_roles() {
    let e = env("pg-restart").await;
    e.create("pgk", 2).await;
    let s = e.healthy("pgk", 2).await;
    let pw = e.password("pgk").await;
    connect(&ip_of(&s, "pgk-1"), &pw)
        .await
        .expect("primary")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before switchover')")
        .await
        .expect("write");
    e.patch("pgk", serde_json::json!({"switchoverTo": "pgk-2"}))
        .await;
    let s = e
        .status_until("pgk", "pgk-2 primary, pgk-1 its replica", |s| {
            s.current_primary.as_deref() == Some("pgk-2")
                && s.ready_instances == 2
                && role_of(s, "pgk-1") == "replica"
        })
        .await;
    let (ip1, ip2) = (ip_of(&s, "pgk-1"), ip_of(&s, "pgk-2"));
    assert!(has_row(&ip1, &pw, "before switchover").await);

    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_writable(e.pods.clone(), pw.clone(), stop.clone());
    for (instance, ip) in [("pgk-1", &ip1), ("pgk-2", &ip2)] {
        let before = postmaster_start(ip, &pw).await.expect("postmaster start");
        e.agent
            .kill_containers(&e.ns, instance)
            .expect("kill the containers");
        let back = eventually(DEADLINE, || async {
            let now = postmaster_start(ip, &pw).await?;
            (now != before).then_some(())
        })
        .await;
        assert!(
            back.is_some(),
            "{instance} never came back: {}",
            e.logs("pgk").await
        );
        e.status_until("pgk", "healthy again", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Healthy) && s.ready_instances == 2
        })
        .await;
    }
    let c = connect(&ip1, &pw).await.expect("pgk-1");
    let in_recovery: bool = c
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("role")
        .get(0);
    assert!(in_recovery, "pgk-1 came back writable");
    connect(&ip2, &pw)
        .await
        .expect("pgk-2")
        .execute("INSERT INTO t VALUES ('after restarts')", &[])
        .await
        .expect("pgk-2 is still the primary");
    assert!(
        has_row(&ip1, &pw, "after restarts").await,
        "pgk-1 does not follow pgk-2"
    );
    let s = e
        .clusters
        .get("pgk")
        .await
        .expect("cluster")
        .status
        .expect("status");
    assert_eq!(s.current_primary.as_deref(), Some("pgk-2"), "{s:#?}");

    stop.store(1, Ordering::Relaxed);
    assert_eq!(
        monitor.await.expect("monitor"),
        1,
        "two writable servers at once"
    );
}

/// `SHOW synchronous_standby_names` on the instance at `ip`.
async fn synchronous_names(ip: &str, password: &str) -> Option<String> {
    let c = connect(ip, password).await.ok()?;
    let row = c
        .query_one("SHOW synchronous_standby_names", &[])
        .await
        .ok()?;
    Some(row.get(0))
}

/// Issue 32, H3: `replication.synchronous` reaches the running primary (raised: its
/// commits wait for a standby; the status shows it applied), and lowered together with
/// `size` it never leaves the primary waiting for the standby that was removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_is_applied_live_raised_and_lowered_with_size() {
    let e = env("pg-sync").await;
    e.create("pgy", 2).await;
    let s = e.healthy("pgy", 2).await;
    let pw = e.password("pgy").await;
    let ip = ip_of(&s, "pgy-1");
    assert_eq!(synchronous_names(&ip, &pw).await.as_deref(), Some(""));

    e.patch(
        "pgy",
        serde_json::json!({"replication": {"synchronous": 1}}),
    )
    .await;
    e.status_until("pgy", "synchronous 1 applied", |s| {
        s.synchronous
            .as_ref()
            .is_some_and(|y| y.desired == 1 && y.effective == Some(1))
    })
    .await;
    let names = eventually(60, || async {
        let n = synchronous_names(&ip, &pw).await?;
        (n == "ANY 1 (*)").then_some(n)
    })
    .await;
    assert!(names.is_some(), "the primary does not wait for a standby");

    e.patch(
        "pgy",
        serde_json::json!({"size": 1, "replication": {"synchronous": 0}}),
    )
    .await;
    e.healthy("pgy", 1).await;
    let s = e
        .clusters
        .get("pgy")
        .await
        .expect("cluster")
        .status
        .expect("status");
    assert_eq!(
        s.synchronous.as_ref().and_then(|y| y.effective),
        Some(0),
        "{s:#?}"
    );
    let c = connect(&ip, &pw).await.expect("primary");
    c.batch_execute(
        "SET statement_timeout = '5s'; CREATE TABLE t (v text); INSERT INTO t VALUES ('alone')",
    )
    .await
    .expect("a commit on the lone primary waits for a standby that is gone");
}

/// Issue 32, M14: a drain may take one instance at a time (a `policy/v1` budget owned by the
/// cluster), and the kubelet waits out the manager's fast shutdown before SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disruption_budget_guards_the_cluster_and_pods_outlast_the_stop_deadline() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let e = env("pg-pdb").await;
    e.create("pgd", 1).await;
    e.healthy("pgd", 1).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(e.clusters.clone().into_client(), &e.ns);
    let pdb = pdbs
        .get("pgd")
        .await
        .expect("the cluster's PodDisruptionBudget");
    let spec = pdb.spec.expect("spec");
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
    let uid = e.clusters.get("pgd").await.expect("cluster").uid();
    assert!(
        pdb.metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| Some(&o.uid) == uid.as_ref()),
        "not owned by the cluster"
    );
    let selected = spec
        .selector
        .and_then(|s| s.match_labels)
        .expect("a label selector");
    let pod = e.pods.get("pgd-1").await.expect("pod");
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert!(
        selected.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{selected:?} does not select {labels:?}"
    );
    let grace = pod
        .spec
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    assert!(
        grace > bosun_postgres::instance::STOP_DEADLINE_SECS as i64,
        "grace period {grace}s"
    );
}

/// Issue 32, CEL: the API server (v1.37) refuses the cross-field errors before they are
/// stored, with the rule's message; the reconcile's own checks stay for servers without CEL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_cross_field_errors_with_their_message() {
    let e = env("pg-cel").await;
    let cases = [
        (
            serde_json::json!({"size": 2, "replication": {"synchronous": 2}}),
            "must be below spec.size",
        ),
        (
            serde_json::json!({"replication": {"synchronous": 1}}),
            "must be below spec.size",
        ),
        (
            serde_json::json!({"size": 2, "switchoverTo": "c-2", "fencedInstances": ["c-2"]}),
            "names a fenced instance",
        ),
        (
            serde_json::json!({"bootstrap": {"initdb": {}, "recovery": {"store": {"volume": {"size": "1Gi"}}}}}),
            "exactly one of initdb or recovery",
        ),
        (
            serde_json::json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}},
                "targetTime": "2024-05-01T12:00:00Z", "targetLsn": "0/1"}}}),
            "at most one of targetTime or targetLsn",
        ),
        (
            serde_json::json!({"backup": {"store": {}}}),
            "exactly one of volume or s3",
        ),
        (
            serde_json::json!({"startTimeoutSeconds": 0}),
            "spec.startTimeoutSeconds in body should be greater than or equal to 1",
        ),
        (
            serde_json::json!({"startTimeoutSeconds": 604_801}),
            "spec.startTimeoutSeconds in body should be less than or equal to 604800",
        ),
    ];
    for (spec, words) in cases {
        let pc: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "c"},
            "spec": spec,
        }))
        .expect("cluster");
        match e.clusters.create(&PostParams::default(), &pc).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{s:?}");
                assert!(s.message.contains(words), "for {spec}: {}", s.message);
            }
            other => panic!("{spec} was not refused: {other:?}"),
        }
    }
    // A valid cluster passes the same rules.
    e.create("c", 2).await;
}

/// A cluster deleted and created again under its name (a new UID) finds the old one's backup
/// store at its own path (issue 32, H12): the store is refused, with a condition and an Event
/// naming the fix; no base backup of the new cluster goes there, nothing it archives is
/// mixed into the old WAL, and losing its data fails loudly instead of bringing back the
/// old cluster's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_recreated_under_its_name_never_takes_over_the_old_backup_store() {
    let e = env("pg-owner").await;
    let spec = serde_json::json!({"size": 1, "backup": {"store": {"volume": {"size": "1Gi"}}}});
    e.create_spec("pgo", spec.clone()).await;
    e.status_until("pgo", "the first base backup", |s| {
        s.backup
            .as_ref()
            .is_some_and(|b| b.last_successful_backup.is_some())
    })
    .await;
    let pw = e.password("pgo").await;
    let ip = ip_of(&e.healthy("pgo", 1).await, "pgo-1");
    let c = connect(&ip, &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('the old cluster')")
        .await
        .expect("write");
    let segment: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    e.status_until("pgo", "the segment archived", |s| {
        s.backup
            .as_ref()
            .and_then(|b| b.last_archived_wal.as_deref())
            .is_some_and(|w| w >= segment.as_str())
    })
    .await;
    drop(c);
    let old_uid = e.clusters.get("pgo").await.expect("get").uid();

    e.clusters
        .delete("pgo", &DeleteParams::default())
        .await
        .expect("delete the cluster");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(e.pods.clone().into_client(), &e.ns);
    let gone = eventually(DEADLINE, || async {
        let pod = e.pods.get_opt("pgo-1").await.ok()?;
        let claim = claims.get_opt("pgo-1").await.ok()?;
        let cluster = e.clusters.get_opt("pgo").await.ok()?;
        (pod.is_none() && claim.is_none() && cluster.is_none()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the first pgo never went");
    assert!(claims.get_opt("pgo-backup").await.expect("get").is_some());

    // The same name again, with initdb and the same store.
    e.create_spec("pgo", spec).await;
    let s = e
        .status_until("pgo", "the store refused as another cluster's", |s| {
            condition(s, "ContinuousArchiving")
                .is_some_and(|c| c.reason == "StoreOwnedByAnotherCluster" && c.status == "False")
        })
        .await;
    let why = &condition(&s, "ContinuousArchiving")
        .expect("condition")
        .message;
    let old_uid = old_uid.expect("the old cluster's UID");
    assert!(
        why.contains(&old_uid) && why.contains("spec.bootstrap.recovery"),
        "{why}"
    );
    let admin = e.pods.clone().into_client();
    assert!(
        has_event(&admin, &e.ns, "pgo", "StoreOwnedByAnotherCluster").await,
        "no Event says the store is another cluster's"
    );
    let s = e.healthy("pgo", 1).await;
    // Writes and a segment switch: the new cluster's WAL has nowhere to go.
    let c = connect(&ip_of(&s, "pgo-1"), &e.password("pgo").await)
        .await
        .expect("new primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('the new cluster')")
        .await
        .expect("write");
    let failed_wal: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    let refused = eventually(60, || async {
        let r = c
            .query_one(
                "SELECT failed_count, last_archived_wal FROM pg_stat_archiver",
                &[],
            )
            .await
            .ok()?;
        let failed: i64 = r.get(0);
        let archived: Option<String> = r.get(1);
        (failed > 0).then_some(archived)
    })
    .await;
    assert_eq!(
        refused,
        Some(None),
        "the new cluster's WAL ({failed_wal}) went into the old cluster's store"
    );
    let s = e
        .clusters
        .get("pgo")
        .await
        .expect("get")
        .status
        .expect("status");
    assert!(
        s.backup
            .as_ref()
            .is_none_or(|b| b.last_successful_backup.is_none()),
        "the old cluster's backups are shown as this one's: {:?}",
        s.backup
    );

    // Every instance's data lost: no restore of the old cluster's database under this name.
    drop(c);
    e.destroy("pgo-1").await;
    let s = e
        .status_until("pgo", "Failed", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Failed)
        })
        .await;
    let why = s.phase_reason.unwrap_or_default();
    assert!(why.contains("no backup"), "{why}");
    assert!(
        e.pods.get_opt("pgo-2").await.expect("get").is_none(),
        "an instance was made from the old cluster's backup"
    );
}

/// `SHOW <name>` on the instance at `ip`.
async fn show(ip: &str, password: &str, name: &str) -> Option<String> {
    let c = connect(ip, password).await.ok()?;
    let row = c.query_one(&format!("SHOW {name}"), &[]).await.ok()?;
    Some(row.get(0))
}

/// Issue 32: a reloadable `postgresql.parameters` change reaches every running instance
/// without a restart (ALTER SYSTEM and a reload), the status shows it in effect next to the
/// desired value, and a parameter removed from the spec goes back to PostgreSQL's default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloadable_parameters_are_applied_live_without_a_restart() {
    let e = env("pg-params").await;
    e.create("pgp", 2).await;
    let s = e.healthy("pgp", 2).await;
    let pw = e.password("pgp").await;
    let ips = [ip_of(&s, "pgp-1"), ip_of(&s, "pgp-2")];
    let mut started = Vec::new();
    for ip in &ips {
        started.push(postmaster_start(ip, &pw).await.expect("postmaster start"));
    }

    e.patch(
        "pgp",
        serde_json::json!({"postgresql": {"parameters": {"work_mem": "8MB"}}}),
    )
    .await;
    for ip in &ips {
        let got = eventually(DEADLINE, || async {
            (show(ip, &pw, "work_mem").await? == "8MB").then_some(())
        })
        .await;
        assert!(
            got.is_some(),
            "work_mem never reached {ip}: {}",
            e.logs("pgp").await
        );
    }
    for (ip, before) in ips.iter().zip(&started) {
        assert_eq!(
            postmaster_start(ip, &pw).await.as_ref(),
            Some(before),
            "{ip} was restarted for a reloadable parameter"
        );
    }
    e.status_until("pgp", "work_mem in effect everywhere", |s| {
        s.parameters.iter().any(|p| {
            p.name == "work_mem"
                && p.desired.as_deref() == Some("8MB")
                && p.effective.as_deref() == Some("8MB")
                && p.pending_restart.is_empty()
        }) && condition(s, "ParametersApplied").is_some_and(|c| c.status == "True")
    })
    .await;

    e.patch(
        "pgp",
        serde_json::json!({"postgresql": {"parameters": {"work_mem": null}}}),
    )
    .await;
    for ip in &ips {
        let got = eventually(DEADLINE, || async {
            (show(ip, &pw, "work_mem").await? == "4MB").then_some(())
        })
        .await;
        assert!(got.is_some(), "work_mem was never reset on {ip}");
    }
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
            let insert = tokio::time::timeout(
                Duration::from_secs(10),
                c.execute("INSERT INTO t VALUES ($1)", &[&row]),
            )
            .await;
            match insert {
                Ok(Ok(_)) => {
                    acked.push(row);
                    n += 1;
                }
                _ => {
                    // Not acknowledged: it may or may not be there; a new row is tried.
                    n += 1;
                    conn = None;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        acked
    })
}

/// Issue 32: a change to the pod template (here a pod annotation) rolls out one instance at
/// a time, the replicas first, then a switchover to an updated replica and the old primary
/// last, under a write stream with `synchronous: 1`: every acknowledged commit survives,
/// and no poll ever sees two writable servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_template_change_rolls_out_under_writes_without_losing_a_commit() {
    let e = env("pg-roll").await;
    e.create_spec(
        "pgr",
        serde_json::json!({"size": 3, "replication": {"synchronous": 1}}),
    )
    .await;
    let s = e.healthy("pgr", 3).await;
    let pw = e.password("pgr").await;
    let first = s.current_primary.clone().expect("a primary");
    connect(&ip_of(&s, &first), &pw)
        .await
        .expect("primary")
        .batch_execute("CREATE TABLE t (v text)")
        .await
        .expect("table");
    let uids = |pods: Vec<Pod>| -> std::collections::BTreeMap<String, String> {
        pods.into_iter()
            .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
            .collect()
    };
    let before = uids(e.pods.list(&Default::default()).await.expect("pods").items);

    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_writable(e.pods.clone(), pw.clone(), stop.clone());
    let writer = write_stream(e.clusters.clone(), "pgr", pw.clone(), stop.clone());
    // Some commits before the change, so that the stream is under way.
    eventually(DEADLINE, || async {
        let c = connect(&ip_of(&s, &first), &pw).await.ok()?;
        let n: i64 = c
            .query_one("SELECT count(*) FROM t", &[])
            .await
            .ok()?
            .get(0);
        (n >= 20).then_some(())
    })
    .await
    .expect("the write stream commits");

    let patched = std::time::Instant::now();
    e.patch(
        "pgr",
        serde_json::json!({"pod": {"annotations": {"example.com/rolled": "1"}}}),
    )
    .await;
    let done = eventually(300, || async {
        let pods = e.pods.list(&Default::default()).await.ok()?.items;
        let rolled = pods.len() == 3
            && pods.iter().all(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.annotations()
                        .get("example.com/rolled")
                        .map(String::as_str)
                        == Some("1")
            });
        let s = e.clusters.get("pgr").await.ok()?.status?;
        let up = condition(&s, "PodsUpToDate").is_some_and(|c| c.status == "True");
        (rolled
            && up
            && s.phase == Some(bosun_postgres::api::Phase::Healthy)
            && s.ready_instances == 3)
            .then_some(s)
    })
    .await;
    let Some(s) = done else {
        panic!(
            "the rolling update never finished: {:#?}\n{}",
            e.clusters.get("pgr").await.ok().and_then(|c| c.status),
            e.logs("pgr").await
        );
    };
    eprintln!(
        "rolling update of 3 instances under writes: {:.1}s",
        patched.elapsed().as_secs_f64()
    );
    // More commits on the updated cluster, then the stream stops.
    let last = s.current_primary.clone().expect("a primary");
    let count = || async {
        let c = connect(&ip_of(&s, &last), &pw).await.ok()?;
        let n: i64 = c
            .query_one("SELECT count(*) FROM t", &[])
            .await
            .ok()?
            .get(0);
        Some(n)
    };
    let now = count().await.expect("count");
    eventually(DEADLINE, || async {
        (count().await? >= now + 20).then_some(())
    })
    .await
    .expect("the stream commits on the updated primary");
    stop.store(1, Ordering::Relaxed);
    let acked = writer.await.expect("writer");
    let two = monitor.await.expect("monitor");

    let after = uids(e.pods.list(&Default::default()).await.expect("pods").items);
    for (name, uid) in &before {
        assert_ne!(
            after.get(name),
            Some(uid),
            "{name}'s pod was never replaced"
        );
    }
    assert_ne!(
        last, first,
        "the old primary was replaced without a switchover"
    );
    let c = connect(&ip_of(&s, &last), &pw).await.expect("primary");
    let rows: std::collections::BTreeSet<String> = c
        .query("SELECT v FROM t", &[])
        .await
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|r| !rows.contains(*r)).collect();
    eprintln!(
        "acknowledged commits: {}, lost: {}",
        acked.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged commits lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    assert_eq!(two, 1, "two writable servers at once");
}

/// Issue 32, M1: an edit the operator refuses (a parameter name with a space, which the API
/// server stores) is named in `SpecAccepted`, and the cluster goes on being reconciled on the
/// last accepted spec: its primary, deleted then, is failed over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_edit_never_stops_a_failover() {
    let e = env("pg-m1").await;
    e.create("pgm", 2).await;
    e.healthy("pgm", 2).await;
    e.patch(
        "pgm",
        serde_json::json!({"postgresql": {"parameters": {"work mem": "4MB"}}}),
    )
    .await;
    e.status_until("pgm", "the edit refused", |s| {
        condition(s, "SpecAccepted").is_some_and(|c| {
            c.status == "False" && c.reason == "InvalidSpec" && c.message.contains("work mem")
        })
    })
    .await;
    e.pods
        .delete("pgm-1", &DeleteParams::default())
        .await
        .expect("delete the primary's pod");
    let s = e
        .status_until("pgm", "pgm-2 promoted", |s| {
            s.current_primary.as_deref() == Some("pgm-2") && role_of(s, "pgm-2") == "primary"
        })
        .await;
    assert_ne!(s.phase, Some(bosun_postgres::api::Phase::Failed), "{s:#?}");
    assert!(
        condition(&s, "SpecAccepted").is_some_and(|c| c.status == "False"),
        "{s:#?}"
    );
}

/// Issue 32, M13: a replica whose slot on the primary is dropped (while its walsender was
/// away) makes it again and streams; before, its walreceiver failed on the missing slot
/// forever and the replica stayed unready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_slot_is_dropped_makes_it_again_and_streams() {
    let e = env("pg-slot").await;
    e.create("pgl", 2).await;
    let s = e.healthy("pgl", 2).await;
    let pw = e.password("pgl").await;
    let c = connect(&ip_of(&s, "pgl-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text)")
        .await
        .expect("table");
    let dropped = eventually(60, || async {
        c.batch_execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
             WHERE slot_name = 'bosun_pgl_2' AND active_pid IS NOT NULL",
        )
        .await
        .ok()?;
        let n = c
            .execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name = 'bosun_pgl_2' AND NOT active",
                &[],
            )
            .await
            .ok()?;
        (n == 1).then_some(())
    })
    .await;
    assert!(dropped.is_some(), "the slot could not be dropped");
    c.execute("INSERT INTO t VALUES ('after the slot was dropped')", &[])
        .await
        .expect("write");
    assert!(
        has_row(&ip_of(&s, "pgl-2"), &pw, "after the slot was dropped").await,
        "pgl-2 never streamed again: {}",
        e.logs("pgl").await
    );
    let active: bool = c
        .query_one(
            "SELECT active FROM pg_replication_slots WHERE slot_name = 'bosun_pgl_2'",
            &[],
        )
        .await
        .expect("the slot is there again")
        .get(0);
    assert!(active);
    e.healthy("pgl", 2).await;
}

/// Issue 32, M12: every pod gone and the primary's data lost with them: the replicas, whose
/// data is intact, start with no primary to follow (read-only), the most advanced is
/// promoted and the cluster grows back to its size with every committed row; before, the
/// operator retried "can only start as a replica, and no primary runs" forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_pod_and_the_primary_data_gone_a_replica_takes_over() {
    let e = env("pg-m12").await;
    e.create_spec(
        "pgz",
        serde_json::json!({"size": 3, "failoverDelaySeconds": 0}),
    )
    .await;
    let s = e.healthy("pgz", 3).await;
    let pw = e.password("pgz").await;
    let c = connect(&ip_of(&s, "pgz-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
        .await
        .expect("write");
    for r in ["pgz-2", "pgz-3"] {
        assert!(has_row(&ip_of(&s, r), &pw, "kept").await);
    }
    drop(c);
    // Paused, so that nothing is failed over or made again while the pods go.
    e.patch("pgz", serde_json::json!({"paused": true})).await;
    e.status_until("pgz", "paused", |s| s.control_paused).await;
    for r in ["pgz-2", "pgz-3"] {
        e.pods
            .delete(r, &DeleteParams::default())
            .await
            .expect("delete a replica's pod");
    }
    e.destroy("pgz-1").await;
    let gone = eventually(DEADLINE, || async {
        e.pods
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the pods never went");
    e.patch("pgz", serde_json::json!({"paused": false})).await;
    let s = e
        .status_until("pgz", "a replica promoted", |s| {
            s.current_primary
                .as_deref()
                .is_some_and(|p| p == "pgz-2" || p == "pgz-3")
                && s.instances.iter().any(|i| i.role == "primary" && i.ready)
        })
        .await;
    let primary = s.current_primary.clone().expect("primary");
    assert!(has_row(&ip_of(&s, &primary), &pw, "kept").await);
    e.healthy("pgz", 3).await;
}

/// Issue 32: the primary's pod deleted gracefully. Its manager stops postgres and reports
/// the clean shutdown before the pod goes (`status.primaryStoppedCleanly` names that pod);
/// a replica is promoted without the isolation wait, and no poll ever sees the old primary
/// writable beside the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_deleted_gracefully_reports_its_clean_stop_and_is_failed_over() {
    let e = env("pg-clean").await;
    e.create("pgc", 2).await;
    let s = e.healthy("pgc", 2).await;
    let pw = e.password("pgc").await;
    connect(&ip_of(&s, "pgc-1"), &pw)
        .await
        .expect("primary")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')")
        .await
        .expect("write");
    let old_uid = e.pods.get("pgc-1").await.expect("pod").uid().expect("uid");
    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_writable(e.pods.clone(), pw.clone(), stop.clone());
    let deleted = std::time::Instant::now();
    e.pods
        .delete("pgc-1", &DeleteParams::default())
        .await
        .expect("delete the primary's pod");
    let s = e
        .status_until("pgc", "pgc-2 promoted", |s| {
            s.current_primary.as_deref() == Some("pgc-2") && role_of(s, "pgc-2") == "primary"
        })
        .await;
    eprintln!(
        "graceful primary deletion → pgc-2 primary: {:.1}s",
        deleted.elapsed().as_secs_f64()
    );
    assert_eq!(
        s.primary_stopped_cleanly,
        Some(bosun_postgres::api::CleanStop {
            instance: "pgc-1".into(),
            pod_uid: old_uid
        }),
        "promoted without the clean-shutdown record: {s:#?}"
    );
    assert!(has_row(&ip_of(&s, "pgc-2"), &pw, "before").await);
    e.healthy("pgc", 2).await;
    stop.store(1, Ordering::Relaxed);
    assert_eq!(
        monitor.await.expect("monitor"),
        1,
        "two writable servers at once"
    );
}

/// Issue 32: a parameter that needs a restart (`max_connections`, a `postmaster` one) is
/// written live, named in `ParametersApplied` (PendingRestart) and `status.parameters` on
/// each instance that still runs the old value, and the rolling update restarts them: with
/// `primaryUpdateStrategy: supervised` the replica at once, the primary only after the
/// user's `switchoverTo`, which `PodsUpToDate` asks for meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_parameter_is_named_until_the_supervised_rollout_restarts_it() {
    let e = env("pg-restartp").await;
    e.create_spec(
        "pgq",
        serde_json::json!({"size": 2, "primaryUpdateStrategy": "supervised"}),
    )
    .await;
    let s = e.healthy("pgq", 2).await;
    let pw = e.password("pgq").await;
    let ip1 = ip_of(&s, "pgq-1");
    assert_eq!(
        show(&ip1, &pw, "max_connections").await.as_deref(),
        Some("100")
    );

    e.patch(
        "pgq",
        serde_json::json!({"postgresql": {"parameters": {"max_connections": "150"}}}),
    )
    .await;
    let s = e
        .status_until("pgq", "the replica restarted, the primary waiting", |s| {
            let pending = condition(s, "ParametersApplied").is_some_and(|c| {
                c.reason == "PendingRestart" && c.message.contains("max_connections (on pgq-1)")
            });
            let waiting = condition(s, "PodsUpToDate")
                .is_some_and(|c| c.reason == "WaitingForSwitchover" && c.message.contains("pgq-2"));
            pending && waiting && s.ready_instances == 2
        })
        .await;
    let p = s
        .parameters
        .iter()
        .find(|p| p.name == "max_connections")
        .expect("max_connections in the status");
    assert_eq!(p.desired.as_deref(), Some("150"));
    assert_eq!(p.effective.as_deref(), Some("100"), "{s:#?}");
    assert_eq!(p.pending_restart, vec!["pgq-1".to_string()]);
    assert_eq!(
        show(&ip1, &pw, "max_connections").await.as_deref(),
        Some("100")
    );
    let ip2 = ip_of(&s, "pgq-2");
    assert_eq!(
        show(&ip2, &pw, "max_connections").await.as_deref(),
        Some("150")
    );
    assert_eq!(s.current_primary.as_deref(), Some("pgq-1"));

    e.patch("pgq", serde_json::json!({"switchoverTo": "pgq-2"}))
        .await;
    let s = e
        .status_until("pgq", "every instance restarted with it", |s| {
            s.current_primary.as_deref() == Some("pgq-2")
                && s.ready_instances == 2
                && condition(s, "PodsUpToDate").is_some_and(|c| c.status == "True")
                && condition(s, "ParametersApplied").is_some_and(|c| c.status == "True")
        })
        .await;
    for i in ["pgq-1", "pgq-2"] {
        assert_eq!(
            show(&ip_of(&s, i), &pw, "max_connections").await.as_deref(),
            Some("150"),
            "{i}"
        );
    }
}

/// The PID of the instance manager of the pod with UID `uid` (the node agent runs it as a
/// host process; its PostgreSQL children share its environment, not its arguments).
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

/// Fields of `/proc/<pid>/stat` after the command name: state, ppid, pgrp, …
fn proc_stat(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn signal(pid: u32, sig: i32) {
    let pid = i32::try_from(pid).expect("pid");
    // SAFETY: kill(2) with a PID this test found for the manager it means to signal.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// Issue 32, M4 (the chaos `stall` case as a test): the primary's instance manager stopped
/// (SIGSTOP) while its PostgreSQL runs on and takes writes, and never resumed. The fence
/// goes unanswered within its bound, the operator deletes the pod, and the cluster waits,
/// FailingOver with reason PrimaryTerminating and an Event, until the kubelet (the node
/// agent) has killed the pod's process group — PostgreSQL with its manager — and removed the
/// pod; only then is a replica promoted. Never two writable servers (the old address asked
/// throughout, pod or not); with `synchronous: 1`, no acknowledged commit lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_manager_is_stopped_is_failed_over_only_once_its_pod_is_gone() {
    let e = env("pg-stall").await;
    let admin = shared()
        .await
        .expect("control plane")
        .client()
        .await
        .expect("admin");
    e.create_spec(
        "pgs",
        serde_json::json!({"size": 3, "replication": {"synchronous": 1}}),
    )
    .await;
    let s = e.healthy("pgs", 3).await;
    let pw = e.password("pgs").await;
    let first = s.current_primary.clone().expect("a primary");
    let first_ip = ip_of(&s, &first);
    let c = connect(&first_ip, &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text)")
        .await
        .expect("table");
    let uid = e
        .pods
        .get(&first)
        .await
        .expect("primary pod")
        .uid()
        .expect("uid");
    let manager = manager_pid(&uid).expect("the primary's instance manager process");
    // PostgreSQL runs in the manager's process group, the one the kubelet kills at the end
    // of the grace period: that kill is what proves the old primary stopped.
    let backend: i32 = c
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("backend pid")
        .get(0);
    let backend = u32::try_from(backend).expect("pid");
    let postmaster: u32 = proc_stat(backend).expect("backend stat")[1]
        .parse()
        .expect("ppid");
    let group = |pid: u32| proc_stat(pid).map(|f| f[2].clone());
    assert_eq!(
        group(postmaster),
        group(manager),
        "postmaster {postmaster} and manager {manager} are in different process groups"
    );
    drop(c);

    let stop = Arc::new(AtomicUsize::new(0));
    let monitor = watch_writable_also(
        e.pods.clone(),
        pw.clone(),
        vec![first_ip.clone()],
        stop.clone(),
    );
    let writer = write_stream(e.clusters.clone(), "pgs", pw.clone(), stop.clone());
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
    // While its pod exists, nothing is promoted: the status says what it waits for.
    let waiting = e
        .status_until("pgs", "FailingOver waiting for the old pod", |s| {
            s.phase == Some(bosun_postgres::api::Phase::FailingOver)
                && condition(s, "Ready")
                    .is_some_and(|c| c.reason == "PrimaryTerminating" && c.message.contains(&first))
        })
        .await;
    assert_eq!(
        waiting.current_primary.as_deref(),
        Some(first.as_str()),
        "a new primary recorded while the old pod exists"
    );
    assert!(
        e.pods
            .get_opt(&first)
            .await
            .expect("get")
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
        "the old primary's pod is not terminating"
    );
    assert!(has_event(&admin, &e.ns, "pgs", "PrimaryTerminating").await);

    // The kubelet kills the group at the end of the grace period and removes the pod; then
    // a replica is promoted and the old instance rejoins on a new pod.
    let recovered = eventually(300, || async {
        let s = e.clusters.get("pgs").await.ok()?.status?;
        let pod = e.pods.get_opt(&first).await.ok()?;
        (s.phase == Some(bosun_postgres::api::Phase::Healthy)
            && s.ready_instances == 3
            && s.current_primary.as_deref().is_some_and(|p| p != first)
            && pod.is_some_and(|p| p.uid().as_deref() != Some(uid.as_str())))
        .then_some(s)
    })
    .await;
    let Some(s) = recovered else {
        panic!(
            "no failover once the stalled primary's pod was gone: {:#?}\n{}",
            e.clusters.get("pgs").await.ok().and_then(|c| c.status),
            e.logs("pgs").await
        );
    };
    let state = proc_stat(postmaster).map(|f| f[0].clone());
    assert!(
        state.is_none() || state.as_deref() == Some("Z"),
        "the old postmaster {postmaster} still runs ({state:?}) after its pod was removed"
    );
    let last = s.current_primary.clone().expect("a primary");
    let now = count(ip_of(&s, &last)).await.expect("count");
    eventually(DEADLINE, || async {
        (count(ip_of(&s, &last)).await? >= now + 20).then_some(())
    })
    .await
    .expect("the stream commits on the new primary");
    stop.store(1, Ordering::Relaxed);
    let acked = writer.await.expect("writer");
    let most = monitor.await.expect("monitor");

    let c = connect(&ip_of(&s, &last), &pw).await.expect("new primary");
    let rows: std::collections::BTreeSet<String> = c
        .query("SELECT v FROM t", &[])
        .await
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|r| !rows.contains(*r)).collect();
    eprintln!(
        "stalled manager: acknowledged commits {}, lost {}",
        acked.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged commits lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    assert_eq!(most, 1, "two writable servers at once");
}

/// Issue 32, M13 as the audit wrote it: the replica's slot dropped on the primary, then the
/// replica's container restarted (its start's `ensure_slot` is best effort and its receiver
/// fails on the missing slot): it streams again, and the cluster is Healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_after_its_slot_was_dropped_streams_again() {
    let e = env("pg-slotr").await;
    e.create("pgm", 2).await;
    let s = e.healthy("pgm", 2).await;
    let pw = e.password("pgm").await;
    let c = connect(&ip_of(&s, "pgm-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text)")
        .await
        .expect("table");
    e.agent
        .kill_containers(&e.ns, "pgm-2")
        .expect("kill the replica's containers");
    // Dropped while the replica's containers are down (the slot is inactive then).
    let dropped = eventually(60, || async {
        let n = c
            .execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name = 'bosun_pgm_2' AND NOT active",
                &[],
            )
            .await
            .ok()?;
        (n == 1).then_some(())
    })
    .await;
    assert!(dropped.is_some(), "the slot could not be dropped");
    c.execute("INSERT INTO t VALUES ('after the restart')", &[])
        .await
        .expect("write");
    assert!(
        has_row(&ip_of(&s, "pgm-2"), &pw, "after the restart").await,
        "pgm-2 never streamed again: {}",
        e.logs("pgm").await
    );
    let active = eventually(60, || async {
        let r = c
            .query_opt(
                "SELECT active FROM pg_replication_slots WHERE slot_name = 'bosun_pgm_2'",
                &[],
            )
            .await
            .ok()??;
        r.get::<_, bool>(0).then_some(())
    })
    .await;
    assert!(active.is_some(), "the slot is not there and in use again");
    e.healthy("pgm", 2).await;
}

/// Issue 32, M13: a replica whose slot the primary invalidated (`max_slot_wal_keep_size`)
/// while it was stopped, and whose WAL the primary has removed since: it can never catch up
/// by streaming, so it is re-cloned from its live primary (an Event names why), and the
/// cluster is Healthy again with every row on the replica. Before, it stayed unready for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_wal_is_gone_is_recloned_and_has_every_row() {
    let e = env("pg-lost").await;
    e.create_spec(
        "pgw",
        serde_json::json!({"size": 2, "postgresql": {"parameters": {
            "max_slot_wal_keep_size": "32MB", "wal_keep_size": "0"}}}),
    )
    .await;
    let s = e.healthy("pgw", 2).await;
    let pw = e.password("pgw").await;
    let c = connect(&ip_of(&s, "pgw-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before the stop')")
        .await
        .expect("write");
    assert!(has_row(&ip_of(&s, "pgw-2"), &pw, "before the stop").await);
    // Stopped by fencing: its PostgreSQL is down, its slot inactive.
    e.patch("pgw", serde_json::json!({"fencedInstances": ["pgw-2"]}))
        .await;
    e.status_until("pgw", "pgw-2 fenced", |s| role_of(s, "pgw-2") == "fenced")
        .await;
    // WAL written past the slot's allowance, segment by segment, each checkpoint removing
    // what no one keeps: the slot is invalidated and its WAL gone.
    let lost = eventually(120, || async {
        c.batch_execute(
            "INSERT INTO t SELECT 'filler' FROM generate_series(1, 1000); \
             SELECT pg_switch_wal(); CHECKPOINT;",
        )
        .await
        .ok()?;
        let r = c
            .query_one(
                "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'bosun_pgw_2'",
                &[],
            )
            .await
            .ok()?;
        (r.get::<_, Option<String>>(0).as_deref() == Some("lost")).then_some(())
    })
    .await;
    assert!(lost.is_some(), "the slot was never invalidated");
    c.execute("INSERT INTO t VALUES ('while it was stopped')", &[])
        .await
        .expect("write");
    e.patch("pgw", serde_json::json!({"fencedInstances": []}))
        .await;
    let s = e.healthy("pgw", 2).await;
    assert_eq!(role_of(&s, "pgw-2"), "replica");
    assert!(
        has_row(&ip_of(&s, "pgw-2"), &pw, "while it was stopped").await,
        "pgw-2 does not have the rows written while it was stopped: {}",
        e.logs("pgw").await
    );
    let count = |ip: String| {
        let pw = pw.clone();
        async move {
            connect(&ip, &pw)
                .await
                .ok()?
                .query_one("SELECT count(*) FROM t", &[])
                .await
                .ok()
                .map(|r| r.get::<_, i64>(0))
        }
    };
    let want = count(ip_of(&s, "pgw-1"))
        .await
        .expect("the primary's count");
    let same = eventually(60, || async {
        (count(ip_of(&s, "pgw-2")).await? == want).then_some(())
    })
    .await;
    assert!(same.is_some(), "pgw-2 misses rows of the primary's {want}");
    let admin = shared()
        .await
        .expect("control plane")
        .client()
        .await
        .expect("client");
    assert!(
        has_event(&admin, &e.ns, "pgw", "Recloning").await,
        "no Event says the replica was re-cloned"
    );
}

/// Issue 32, M12(c): after a full restart the old primary's pod stays Pending (no node can
/// take it: here a scheduling gate, which the API server refuses to bind, as a zone that is
/// down would leave it). The replicas are started, the most advanced is promoted after the
/// failover delay (the Pending pod deleted first, so that it never starts as a primary), and
/// the old primary comes back as a replica of the new one with every row. Before, the
/// operator waited for that pod forever and started nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_full_restart_a_primary_pod_left_pending_is_failed_over() {
    let e = env("pg-pend").await;
    e.create_spec(
        "pgp",
        serde_json::json!({"size": 3, "failoverDelaySeconds": 0}),
    )
    .await;
    let s = e.healthy("pgp", 3).await;
    let pw = e.password("pgp").await;
    let c = connect(&ip_of(&s, "pgp-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
        .await
        .expect("write");
    for r in ["pgp-2", "pgp-3"] {
        assert!(has_row(&ip_of(&s, r), &pw, "kept").await);
    }
    drop(c);
    let old = e.pods.get("pgp-1").await.expect("the primary's pod");
    e.patch("pgp", serde_json::json!({"paused": true})).await;
    e.status_until("pgp", "paused", |s| s.control_paused).await;
    for p in ["pgp-1", "pgp-2", "pgp-3"] {
        e.pods
            .delete(p, &DeleteParams::default())
            .await
            .expect("delete a pod");
    }
    let gone = eventually(DEADLINE, || async {
        e.pods
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the pods never went");
    // The primary's pod made again as the operator made it, but that no node takes.
    let mut pending: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "pgp-1",
            "labels": old.metadata.labels,
            "annotations": old.metadata.annotations,
            "ownerReferences": old.metadata.owner_references,
        },
        "spec": old.spec,
    }))
    .expect("pod");
    if let Some(spec) = pending.spec.as_mut() {
        spec.node_name = None;
        spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/zone-down".into(),
        }]);
    }
    let pending = e
        .pods
        .create(&PostParams::default(), &pending)
        .await
        .expect("the Pending pod");
    e.patch("pgp", serde_json::json!({"paused": false})).await;
    let s = e
        .status_until("pgp", "a replica promoted", |s| {
            s.current_primary
                .as_deref()
                .is_some_and(|p| p == "pgp-2" || p == "pgp-3")
                && s.instances.iter().any(|i| i.role == "primary" && i.ready)
        })
        .await;
    let primary = s.current_primary.clone().expect("primary");
    assert!(has_row(&ip_of(&s, &primary), &pw, "kept").await);
    let s = e.healthy("pgp", 3).await;
    assert_eq!(role_of(&s, "pgp-1"), "replica");
    let now = e.pods.get("pgp-1").await.expect("pgp-1's pod");
    assert_ne!(
        now.metadata.uid, pending.metadata.uid,
        "the Pending pod, built to start as the primary, is still there"
    );
    assert!(has_row(&ip_of(&s, "pgp-1"), &pw, "kept").await);
}

/// The rows' count and a checksum over all of them, in one query.
async fn count_and_sum(ip: &str, password: &str) -> Option<(i64, String)> {
    let c = connect(ip, password).await.ok()?;
    let r = c
        .query_one(
            "SELECT count(*), md5(string_agg(v, ',' ORDER BY v)) FROM t",
            &[],
        )
        .await
        .ok()?;
    Some((r.get(0), r.get(1)))
}

/// Issue 32, M12 (the e2e of 42d6a89's decision test): every instance's data lost, the
/// disaster-recovery seed restoring from the volume store has its pod deleted mid-restore
/// (its manager stopped while the data directory is marked as being filled, then the pod
/// force-deleted: killed there). The seed is made again as the seed on its claim, fills
/// the directory again, and the cluster comes back with every row (count and checksum of
/// half a million, and the one only in the archived WAL), the replica after it; never two
/// primaries. Before the rule, a replica with no primary was started on the half-restored
/// directory, and the cluster never came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disaster_recovery_seed_deleted_mid_restore_is_made_again_and_restores_every_row() {
    let e = env("pg-drseed").await;
    e.create_spec(
        "pgd",
        serde_json::json!({"size": 2, "backup": {"store": {"volume": {"size": "2Gi"}}}}),
    )
    .await;
    e.healthy("pgd", 2).await;
    let pw = e.password("pgd").await;
    let s = e
        .status_until("pgd", "the first base backup", |s| {
            s.backup
                .as_ref()
                .is_some_and(|b| b.last_successful_backup.is_some())
        })
        .await;
    let first = s.backup.and_then(|b| b.last_successful_backup);
    let primary = e
        .healthy("pgd", 2)
        .await
        .current_primary
        .expect("a primary");
    let ip = ip_of(&e.healthy("pgd", 2).await, &primary);
    let c = connect(&ip, &pw).await.expect("primary");
    // Enough data that filling the directory takes a while: the cut lands inside it.
    c.batch_execute(
        "CREATE TABLE t (v text); \
         INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 500000) g",
    )
    .await
    .expect("rows");
    e.clusters
        .patch(
            "pgd",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "postgres.lukeb0nd.com/backup-request": "with-rows"}}})),
        )
        .await
        .expect("annotate");
    e.status_until("pgd", "the requested backup", |s| {
        s.backup.as_ref().is_some_and(|b| {
            b.last_backup_request.as_deref() == Some("with-rows")
                && b.last_successful_backup.is_some()
                && b.last_successful_backup != first
        })
    })
    .await;
    c.batch_execute("INSERT INTO t VALUES ('only in the archive')")
        .await
        .expect("write");
    let segment: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    e.status_until("pgd", "the segment archived", |s| {
        s.backup
            .as_ref()
            .and_then(|b| b.last_archived_wal.as_deref())
            .is_some_and(|w| w >= segment.as_str())
    })
    .await;
    let want = count_and_sum(&ip, &pw).await.expect("the primary's rows");
    assert_eq!(want.0, 500_001);
    drop(c);

    // Every instance's data gone (paused meanwhile, so that nothing fails over between).
    e.patch("pgd", serde_json::json!({"paused": true})).await;
    e.status_until("pgd", "paused", |s| s.control_paused).await;
    e.destroy("pgd-1").await;
    e.destroy("pgd-2").await;
    let stop = Arc::new(AtomicUsize::new(0));
    let primaries = watch_primaries(e.pods.clone(), stop.clone());
    e.patch("pgd", serde_json::json!({"paused": false})).await;
    let s = e
        .status_until("pgd", "a restoring seed recorded", |s| {
            s.seed.as_ref().is_some_and(|d| d.restore)
        })
        .await;
    let seed = s.seed.expect("the seed").instance;
    // The seed's manager stopped while its directory is marked as being filled.
    let pod = eventually(DEADLINE, || async {
        let p = e.pods.get(&seed).await.ok()?;
        p.status.as_ref()?.pod_ip.as_ref()?;
        Some(p)
    })
    .await
    .expect("the seed's pod running");
    let uid = pod.uid().expect("uid");
    let claim = e.agent.claim_dir(&e.ns, &seed).await.expect("its claim");
    let mark = claim.join("pgdata.bosun-filling");
    let pid = eventually(DEADLINE, || async {
        let pid = manager_pid(&uid)?;
        (mark.exists() && claim.join("pgdata").join("PG_VERSION").exists()).then_some(())?;
        signal(pid, libc::SIGSTOP);
        Some(pid)
    })
    .await;
    let Some(pid) = pid else {
        panic!("{seed} never filled its directory: {}", e.logs("pgd").await);
    };
    // The cut must be inside the restore: still filling (nothing runs on the directory yet).
    assert!(
        mark.exists(),
        "{seed}'s fill ended before its manager ({pid}) was stopped: more rows are needed"
    );
    e.pods
        .delete(
            &seed,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("delete the seed's pod");
    let s = e
        .status_until("pgd", "the cluster back", |s| {
            s.phase == Some(bosun_postgres::api::Phase::Healthy)
                && s.ready_instances == 2
                && s.current_primary.as_deref() == Some(seed.as_str())
        })
        .await;
    let again = e.pods.get(&seed).await.expect("the seed's pod again");
    assert_ne!(again.uid(), Some(uid), "the seed's pod was not made again");
    assert_eq!(s.seed, None, "the seed still recorded once a primary ran");
    let primary_ip = ip_of(&s, &seed);
    assert_eq!(
        count_and_sum(&primary_ip, &pw).await,
        Some(want.clone()),
        "the restored seed misses rows"
    );
    let replica = s
        .instances
        .iter()
        .find(|i| i.name != seed)
        .map(|i| i.name.clone())
        .expect("a replica");
    let same = eventually(DEADLINE, || async {
        (count_and_sum(&ip_of(&s, &replica), &pw).await? == want).then_some(())
    })
    .await;
    assert!(same.is_some(), "{replica} misses rows of the restore");
    stop.store(1, Ordering::Relaxed);
    let most = primaries.await.expect("watch");
    assert!(most <= 1, "{most} primaries answered at once");
}

/// Issue 32, M12(c) on a lost node (the e2e of 91f23c5's decision test): after a full
/// restart of a synchronous cluster, the old primary's pod is bound to a node whose kubelet
/// is gone (a Node whose Ready condition is Unknown, as the node lifecycle controller marks
/// a silent one; no agent serves it, so the pod never starts and its deletion is never
/// finalized). The replicas are started beside it, the pod is fenced (deleted: it stays
/// Terminating there) and the most advanced replica promoted with every row; never two
/// primaries. Once the pod is force-deleted (what an administrator does for a lost node),
/// the old primary comes back as a replica of the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_full_restart_a_primary_pod_on_a_lost_node_is_failed_over_when_synchronous() {
    let e = env("pg-lostn").await;
    e.create_spec(
        "pgn",
        serde_json::json!({"size": 3, "failoverDelaySeconds": 0,
                           "replication": {"synchronous": 1}}),
    )
    .await;
    let s = e.healthy("pgn", 3).await;
    let pw = e.password("pgn").await;
    let c = connect(&ip_of(&s, "pgn-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
        .await
        .expect("write");
    for r in ["pgn-2", "pgn-3"] {
        assert!(has_row(&ip_of(&s, r), &pw, "kept").await);
    }
    drop(c);
    let old = e.pods.get("pgn-1").await.expect("the primary's pod");
    e.patch("pgn", serde_json::json!({"paused": true})).await;
    e.status_until("pgn", "paused", |s| s.control_paused).await;
    for p in ["pgn-1", "pgn-2", "pgn-3"] {
        e.pods
            .delete(p, &DeleteParams::default())
            .await
            .expect("delete a pod");
    }
    let gone = eventually(DEADLINE, || async {
        e.pods
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the pods never went");
    let admin = shared()
        .await
        .expect("control plane")
        .client()
        .await
        .expect("client");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(admin.clone());
    // Lost nodes a failed earlier run of this test left behind (it deletes its own at the
    // end): nothing runs on them, but they would pile up.
    for n in nodes.list(&Default::default()).await.expect("nodes") {
        let name = n.name_any();
        if name.starts_with("pg-lostn") && name.ends_with("-lost") {
            let _ = nodes.delete(&name, &DeleteParams::default()).await;
        }
    }
    let lost = format!("{}-lost", e.ns);
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": lost},
    }))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("the lost node");
    nodes
        .patch_status(
            &lost,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"conditions": [{
                "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status."}]}})),
        )
        .await
        .expect("its Ready condition Unknown");
    // The primary's pod made again as the operator made it, bound to the lost node.
    let mut on_lost: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "pgn-1",
            "labels": old.metadata.labels,
            "annotations": old.metadata.annotations,
            "ownerReferences": old.metadata.owner_references,
        },
        "spec": old.spec,
    }))
    .expect("pod");
    if let Some(spec) = on_lost.spec.as_mut() {
        spec.node_name = Some(lost.clone());
    }
    let on_lost = e
        .pods
        .create(&PostParams::default(), &on_lost)
        .await
        .expect("the pod on the lost node");
    let stop = Arc::new(AtomicUsize::new(0));
    let primaries = watch_primaries(e.pods.clone(), stop.clone());
    e.patch("pgn", serde_json::json!({"paused": false})).await;
    let s = e
        .status_until("pgn", "a replica promoted", |s| {
            s.current_primary
                .as_deref()
                .is_some_and(|p| p == "pgn-2" || p == "pgn-3")
                && s.instances.iter().any(|i| i.role == "primary" && i.ready)
        })
        .await;
    let primary = s.current_primary.clone().expect("primary");
    assert!(has_row(&ip_of(&s, &primary), &pw, "kept").await);
    // The pod on the lost node was fenced (deleted) and never ran.
    let still = e.pods.get("pgn-1").await.expect("pgn-1 on the lost node");
    assert_eq!(still.uid(), on_lost.uid());
    assert!(
        still.metadata.deletion_timestamp.is_some(),
        "the old primary's pod was not fenced"
    );
    assert!(
        still
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_none_or(|c| c.is_empty()),
        "the pod on the lost node ran: {still:?}"
    );
    e.pods
        .delete(
            "pgn-1",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("force-delete the pod on the lost node");
    let s = e.healthy("pgn", 3).await;
    assert_eq!(role_of(&s, "pgn-1"), "replica");
    assert!(has_row(&ip_of(&s, "pgn-1"), &pw, "kept").await);
    stop.store(1, Ordering::Relaxed);
    let most = primaries.await.expect("watch");
    assert!(most <= 1, "{most} primaries answered at once");
    let _ = nodes.delete(&lost, &DeleteParams::default()).await;
}

/// Issue 32, M13 follow-up through the operator: a replica whose WAL is gone from its
/// primary while the backup store cannot give it (the store's `wals` directory replaced by
/// a file: every read an I/O error) makes the cluster's `ArchiveReadable` condition False,
/// reason `ArchiveReadFailing`, naming the replica, with a warning Event, and no re-clone;
/// once the store is back the replica catches up from it with every row, and the condition
/// turns True with an Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_read_the_archive_is_a_condition_until_it_can() {
    let e = env("pg-arch").await;
    e.create_spec(
        "pga",
        serde_json::json!({"size": 2,
            "backup": {"store": {"volume": {"size": "1Gi"}}},
            "postgresql": {"parameters": {
                "max_slot_wal_keep_size": "32MB", "wal_keep_size": "0"}}}),
    )
    .await;
    let s = e.healthy("pga", 2).await;
    let readable = |s: &PostgresClusterStatus| {
        condition(s, "ArchiveReadable").map(|c| (c.status.clone(), c.reason.clone()))
    };
    e.status_until("pga", "ArchiveReadable True", |s| {
        readable(s) == Some(("True".into(), "ArchiveReadable".into()))
    })
    .await;
    let pw = e.password("pga").await;
    let c = connect(&ip_of(&s, "pga-1"), &pw).await.expect("primary");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before the stop')")
        .await
        .expect("write");
    assert!(has_row(&ip_of(&s, "pga-2"), &pw, "before the stop").await);
    e.patch("pga", serde_json::json!({"fencedInstances": ["pga-2"]}))
        .await;
    e.status_until("pga", "pga-2 fenced", |s| role_of(s, "pga-2") == "fenced")
        .await;
    // Past the slot's allowance, segment by segment: archived, then removed from pg_wal.
    let lost = eventually(120, || async {
        c.batch_execute(
            "INSERT INTO t SELECT 'filler' FROM generate_series(1, 1000); \
             SELECT pg_switch_wal(); CHECKPOINT;",
        )
        .await
        .ok()?;
        let r = c
            .query_one(
                "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'bosun_pga_2'",
                &[],
            )
            .await
            .ok()?;
        (r.get::<_, Option<String>>(0).as_deref() == Some("lost")).then_some(())
    })
    .await;
    assert!(lost.is_some(), "the slot was never invalidated");
    let store = e
        .agent
        .claim_dir(
            &e.ns,
            &bosun_postgres::controller::build::backup_claim_name("pga"),
        )
        .await
        .expect("the store's claim")
        .join("pga");
    let wals = store.join("wals");
    let away = store.join("wals.away");
    std::fs::rename(&wals, &away).expect("move the archive away");
    std::fs::write(&wals, b"not a directory").expect("a file in its place");
    e.patch("pga", serde_json::json!({"fencedInstances": []}))
        .await;
    let s = e
        .status_until("pga", "ArchiveReadable False", |s| {
            readable(s) == Some(("False".into(), "ArchiveReadFailing".into()))
        })
        .await;
    let message = condition(&s, "ArchiveReadable")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.starts_with("pga-2: ") && message.contains("backup store"),
        "{message}"
    );
    let admin = shared()
        .await
        .expect("control plane")
        .client()
        .await
        .expect("client");
    assert!(
        has_event(&admin, &e.ns, "pga", "ArchiveReadFailing").await,
        "no Event says the replica cannot read the archive"
    );
    std::fs::remove_file(&wals).expect("the file removed");
    std::fs::rename(&away, &wals).expect("the archive back");
    e.status_until("pga", "ArchiveReadable True again", |s| {
        readable(s) == Some(("True".into(), "ArchiveReadable".into())) && s.ready_instances == 2
    })
    .await;
    assert!(
        has_event(&admin, &e.ns, "pga", "ArchiveReadable").await,
        "no Event says the replicas read the archive again"
    );
    let s = e.healthy("pga", 2).await;
    let count = |ip: String| {
        let pw = pw.clone();
        async move {
            connect(&ip, &pw)
                .await
                .ok()?
                .query_one("SELECT count(*) FROM t", &[])
                .await
                .ok()
                .map(|r| r.get::<_, i64>(0))
        }
    };
    let want = count(ip_of(&s, "pga-1"))
        .await
        .expect("the primary's count");
    let same = eventually(60, || async {
        (count(ip_of(&s, "pga-2")).await? == want).then_some(())
    })
    .await;
    assert!(same.is_some(), "pga-2 misses rows of the primary's {want}");
    assert!(
        !has_event(&admin, &e.ns, "pga", "Recloning").await,
        "the replica was re-cloned instead of reading the archive"
    );
}
