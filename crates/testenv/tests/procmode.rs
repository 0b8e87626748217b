//! The node agent's process mode on the real API server: pods run as real local processes
//! (PostgreSQL 15 first of all). Needs root and `scripts/setup-postgres.sh`.
#![allow(clippy::unwrap_used)]
use std::time::Duration;

use bosun_testenv::{
    eventually, procmode::DEFAULT_PATH, shared, test_namespace, Image, ImageMap, NodeAgent,
    ProcessConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, Event, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

const PSQL: &str = "/usr/lib/postgresql/15/bin/psql";

struct Env {
    client: Client,
    ns: String,
    agent: NodeAgent,
    pods: Api<Pod>,
}

async fn env(prefix: &str) -> Env {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = test_namespace(&client, prefix).await.expect("namespace");
    // These tests of the node agent itself mount host paths (the node's directories), which
    // Pod Security baseline forbids; no operator under test does, so only here is the
    // namespace privileged.
    let privileged = serde_json::json!({
        "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}
    });
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            &ns,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&privileged),
        )
        .await
        .expect("namespace label");
    // `debian:*` is the host's own system, for small programs (sh, python3).
    let debian = Image {
        env: vec![("PATH".into(), DEFAULT_PATH.into())],
        cmd: vec!["sh".into()],
        ..Default::default()
    };
    let agent = NodeAgent::process_mode(
        client.clone(),
        ProcessConfig {
            namespace: Some(ns.clone()),
            // bosun's image stands for a small program of the host here (the mapping is the
            // same for the real binary: one file placed at /bosun, the entrypoint).
            images: ImageMap::standard(Some("/usr/bin/printenv".into()))
                .repository("debian", debian),
            restart_backoff: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .expect("process-mode agent (root and scripts/setup-postgres.sh needed)");
    let pods = Api::namespaced(client.clone(), &ns);
    Env {
        client,
        ns,
        agent,
        pods,
    }
}

impl Env {
    async fn create<K>(&self, v: Value) -> K
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + k8s_openapi::serde::de::DeserializeOwned
            + k8s_openapi::serde::Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let obj: K = serde_json::from_value(v).expect("object");
        Api::<K>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &obj)
            .await
            .expect("create")
    }

    /// Waits (up to `secs`) for the pod `name` to satisfy `f`.
    async fn wait(&self, name: &str, secs: u64, what: &str, f: impl Fn(&Pod) -> bool) -> Pod {
        let got = eventually(secs, || async {
            self.pods
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .filter(|p| f(p))
        })
        .await;
        match got {
            Some(p) => p,
            None => {
                let p = self.pods.get_opt(name).await.ok().flatten();
                let logs: Vec<String> = p
                    .iter()
                    .flat_map(|p| p.spec.iter().flat_map(|s| s.containers.iter()))
                    .map(|c| {
                        let log = self.agent.logs(&self.ns, name, &c.name).unwrap_or_default();
                        let tail: Vec<&str> = log.lines().rev().take(20).collect();
                        format!(
                            "--- {}:\n{}",
                            c.name,
                            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                        )
                    })
                    .collect();
                let status = p
                    .and_then(|p| p.status)
                    .map(|s| serde_json::to_string_pretty(&s).unwrap_or_default());
                panic!(
                    "pod {name}: not {what} within {secs} s; status: {status:?}\n{}",
                    logs.join("\n")
                );
            }
        }
    }

    async fn gone(&self, name: &str, secs: u64) {
        let gone = eventually(secs, || async {
            matches!(self.pods.get_opt(name).await, Ok(None)).then_some(())
        })
        .await;
        assert!(gone.is_some(), "pod {name} still exists after {secs} s");
    }

    async fn events(&self, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }
}

fn ready(p: &Pod) -> bool {
    condition(p, "Ready") == Some(true)
}

fn condition(p: &Pod, ty: &str) -> Option<bool> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| c.status == "True")
}

fn pod_ip(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("pod IP")
}

/// The first container's status (null before there is one).
fn container(p: &Pod) -> Value {
    let s = p.status.as_ref().and_then(|s| s.container_statuses.clone());
    s.and_then(|s| s.into_iter().next())
        .map(|c| serde_json::to_value(c).expect("json"))
        .unwrap_or(Value::Null)
}

/// A process that exists and is not a zombie (an orphan may wait for a reaper a while).
fn pid_alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next());
    matches!(state, Some(s) if s != "Z" && s != "X")
}

/// A pid a container printed as `pid=<n>` in its log.
fn logged_pid(log: &str) -> i32 {
    log.lines()
        .rev()
        .find_map(|l| l.strip_prefix("pid=")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in the log: {log}"))
}

fn psql(ip: &str, password: &str, sql: &str) -> Result<String, String> {
    let out = std::process::Command::new(PSQL)
        .args(["-h", ip, "-U", "postgres", "-d", "postgres", "-tAc", sql])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

impl Env {
    /// The Secret `pg` (password `s3cret-pw`), the claim `pgdata` and PostgreSQL's pod on it.
    async fn postgres_on_a_claim(&self, pod: &str) {
        let _: Secret = self
            .create(json!({"metadata": {"name": "pg"}, "stringData": {"password": "s3cret-pw"}}))
            .await;
        let _: PersistentVolumeClaim = self
            .create(json!({"metadata": {"name": "pgdata"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
            .await;
        let _: Pod = self.create(postgres_pod(pod)).await;
    }
}

fn postgres_pod(name: &str) -> Value {
    postgres_pod_on(
        name,
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "pgdata"}}),
    )
}

fn postgres_pod_on(name: &str, volume: Value) -> Value {
    // The official image's entrypoint is not emulated: the pod initialises its own data, in
    // a side directory renamed into place when complete, so a container killed during
    // initdb (a crash, a liveness kill on a slow machine) starts over instead of serving a
    // half-made cluster.
    let script = r#"set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  rm -rf "$PGDATA.init"
  printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pw
  initdb -D "$PGDATA.init" -U postgres --auth=scram-sha-256 --pwfile=/tmp/pw --no-sync >/dev/null
  rm /tmp/pw
  echo "host all all 127.0.0.0/8 scram-sha-256" >> "$PGDATA.init/pg_hba.conf"
  rm -rf "$PGDATA"
  mv "$PGDATA.init" "$PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses="$POD_IP" -c fsync=off"#;
    json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 20,
            "volumes": [volume],
            "containers": [{
                "name": "postgres", "image": "postgres:15",
                "command": ["sh", "-c", script],
                "env": [
                    {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "pg", "key": "password"}}},
                ],
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
                "readinessProbe": {"exec": {"command": ["sh", "-c", "pg_isready -q -h \"$POD_IP\""]},
                                   "periodSeconds": 1, "failureThreshold": 1},
                // Liveness only once started: initdb may take longer than 5 s under load.
                "startupProbe": {"tcpSocket": {"port": 5432}, "periodSeconds": 1, "failureThreshold": 120},
                "livenessProbe": {"tcpSocket": {"port": 5432}, "periodSeconds": 1, "failureThreshold": 5},
            }],
        }
    })
}

/// A container killed while initdb runs (what a liveness probe did on a loaded machine, in
/// CI) starts over: the restarted PostgreSQL has its `postgres` database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_during_initdb_starts_over_on_restart() {
    let e = env("pm-pg-init").await;
    e.postgres_on_a_claim("pg-0").await;
    // As soon as initdb has begun writing (PG_VERSION comes first, the databases last).
    let claim = eventually(60, || async {
        e.agent.claim_dir(&e.ns, "pgdata").await.ok()
    })
    .await
    .expect("claim dir");
    eventually(60, || async {
        let begun = ["pgdata/PG_VERSION", "pgdata.init/PG_VERSION"]
            .iter()
            .any(|f| claim.join(f).exists());
        begun.then_some(())
    })
    .await
    .expect("initdb begins");
    e.agent.kill_containers(&e.ns, "pg-0").expect("kill");
    let p = e
        .wait("pg-0", 90, "Ready after a restart", |p| {
            ready(p) && container(p)["restartCount"].as_i64().unwrap_or(0) >= 1
        })
        .await;
    let ip = pod_ip(&p);
    assert_eq!(
        psql(
            &ip,
            "s3cret-pw",
            "select datname from pg_database where datname = 'postgres'"
        ),
        Ok("postgres".to_string())
    );
}

/// The main case: `postgres:15` runs real PostgreSQL as an unprivileged user, initialised on
/// its claim, listening on its pod IP with the password from a Secret, Ready once it accepts
/// connections; its data outlives the pod on the claim, and the claim's directory goes with
/// the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_runs_on_its_claim_and_pod_ip_and_its_data_outlives_the_pod() {
    let e = env("pm-pg").await;
    e.postgres_on_a_claim("pg-0").await;
    let p = e.wait("pg-0", 90, "Ready", ready).await;
    let ip = pod_ip(&p);
    assert!(ip.starts_with("127.") && ip != "127.0.0.1", "{ip}");
    assert_eq!(container(&p)["started"], true);

    // Real PostgreSQL on the pod IP, with the Secret's password and not running as root.
    psql(
        &ip,
        "s3cret-pw",
        "create table t (v text); insert into t values ('kept')",
    )
    .expect("psql on the pod IP");
    assert!(
        psql(&ip, "wrong", "select 1").is_err(),
        "a wrong password is refused"
    );
    let dir = psql(&ip, "s3cret-pw", "select current_setting('data_directory')").unwrap();
    assert_eq!(dir, "/var/lib/postgresql/data/pgdata");
    // Inside the pod (as `kubectl exec`): its environment, and its own /var/run/postgresql.
    let inside = e
        .agent
        .exec(
            &e.ns,
            "pg-0",
            "postgres",
            &[
                "sh",
                "-c",
                "PGPASSWORD=\"$POSTGRES_PASSWORD\" psql -U postgres -tAc 'select v from t'; id -un",
            ],
        )
        .await
        .expect("exec");
    assert_eq!(inside.code, 0, "{}", inside.output);
    assert_eq!(inside.output, "kept\nbosun-pg\n");
    let claim = e.agent.claim_dir(&e.ns, "pgdata").await.expect("claim dir");
    let meta = std::fs::metadata(claim.join("pgdata/PG_VERSION")).expect("data on the claim");
    use std::os::unix::fs::MetadataExt;
    assert_ne!(
        meta.uid(),
        0,
        "PostgreSQL's files belong to the unprivileged user"
    );

    // Deleted: SIGTERM (PostgreSQL shuts down cleanly), then the object is finalized.
    e.pods
        .delete("pg-0", &DeleteParams::default())
        .await
        .expect("delete");
    e.gone("pg-0", 60).await;
    assert!(
        psql(&ip, "s3cret-pw", "select 1").is_err(),
        "nothing listens any more"
    );
    let log = e.agent.logs(&e.ns, "pg-0", "postgres").unwrap_or_default();
    assert!(log.contains("database system is shut down"), "{log}");
    assert!(
        claim.join("pgdata/PG_VERSION").is_file(),
        "the claim keeps its data"
    );

    // A new pod on the same claim: same rows, a new pod IP.
    let _: Pod = e.create(postgres_pod("pg-1")).await;
    let p = e.wait("pg-1", 90, "Ready", ready).await;
    let ip1 = pod_ip(&p);
    assert_ne!(ip1, ip, "pod IPs are never reused");
    assert_eq!(psql(&ip1, "s3cret-pw", "select v from t").unwrap(), "kept");
    e.pods
        .delete("pg-1", &DeleteParams::default())
        .await
        .expect("delete");
    e.gone("pg-1", 60).await;

    // The claim deleted: its directory goes.
    Api::<PersistentVolumeClaim>::namespaced(e.client.clone(), &e.ns)
        .delete("pgdata", &DeleteParams::default())
        .await
        .expect("delete claim");
    let removed = eventually(60, || async { (!claim.exists()).then_some(()) }).await;
    assert!(removed.is_some(), "{} still exists", claim.display());
}

/// Two PostgreSQL pods at once, both on port 5432 — each on its own pod IP, each with its own
/// Unix socket directory — hold different data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_postgres_pods_listen_on_the_same_port_of_their_own_ips() {
    let e = env("pm-pg2").await;
    let _: Secret = e
        .create(json!({"metadata": {"name": "pg"}, "stringData": {"password": "pw2"}}))
        .await;
    for name in ["a", "b"] {
        let _: Pod = e
            .create(postgres_pod_on(
                name,
                json!({"name": "data", "emptyDir": {}}),
            ))
            .await;
    }
    let mut ips = Vec::new();
    for name in ["a", "b"] {
        let ip = pod_ip(&e.wait(name, 90, "Ready", ready).await);
        psql(
            &ip,
            "pw2",
            &format!("create table who as select '{name}' as n"),
        )
        .expect("psql");
        ips.push(ip);
    }
    assert_ne!(ips[0], ips[1]);
    assert_eq!(psql(&ips[0], "pw2", "select n from who").unwrap(), "a");
    assert_eq!(psql(&ips[1], "pw2", "select n from who").unwrap(), "b");
}

/// Readiness is the probe's: not Ready while an httpGet probe fails, Ready once it passes,
/// not Ready again when it fails again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_readiness_probe_gates_ready() {
    let e = env("pm-ready").await;
    let web = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        web.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let _: Pod = e
        .create(json!({"metadata": {"name": "web"}, "spec": {
        "volumes": [{"name": "www", "hostPath": {"path": web.path()}}],
        "containers": [{
            "name": "web", "image": "debian:bookworm", "workingDir": "/www",
            "command": ["python3", "-m", "http.server", "--bind", "$(POD_IP)", "8080"],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "ports": [{"name": "http", "containerPort": 8080}],
            "volumeMounts": [{"name": "www", "mountPath": "/www"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"},
                               "periodSeconds": 1, "failureThreshold": 1},
        }]}}))
        .await;
    // The probe has failed against the running server (an Event says so): not Ready.
    let unhealthy = eventually(60, || async {
        let evs = e.events("Unhealthy").await;
        evs.into_iter()
            .filter_map(|e| e.message)
            .find(|m| m.contains("404"))
    })
    .await;
    assert!(unhealthy.is_some(), "a readiness failure with status 404");
    let p = e
        .wait("web", 30, "Running", |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await;
    assert!(!ready(&p), "not Ready while the probe fails");

    std::fs::write(web.path().join("ready"), "ok").expect("write");
    e.wait("web", 60, "Ready", ready).await;
    std::fs::remove_file(web.path().join("ready")).expect("remove");
    e.wait("web", 60, "not Ready", |p| {
        condition(p, "Ready") == Some(false)
    })
    .await;
}

/// A container that crashes is started again (restartPolicy Always): the restart count and
/// the last state say so, and the log holds both runs. An exec liveness probe that fails
/// restarts it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_container_restarts_with_its_count_and_last_state() {
    let e = env("pm-crash").await;
    let _: Pod = e
        .create(json!({"metadata": {"name": "crash"}, "spec": {
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [{
                "name": "main", "image": "debian:bookworm",
                "command": ["sh", "-c", "if [ -e /scratch/once ]; then echo second run; exec sleep 1000; fi; touch /scratch/once; echo first run; exit 3"],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            }]}}))
        .await;
    let p = e
        .wait("crash", 60, "restarted and running", |p| {
            let c = container(p);
            c["restartCount"] == 1 && c["state"]["running"].is_object()
        })
        .await;
    let c = container(&p);
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 3, "{c}");
    assert_eq!(c["lastState"]["terminated"]["reason"], "Error", "{c}");
    assert!(ready(&p));
    let log = e.agent.logs(&e.ns, "crash", "main").expect("log");
    assert!(
        log.contains("first run") && log.contains("second run"),
        "{log}"
    );

    // restartPolicy Never: a failed container stays down and the pod fails.
    let _: Pod = e
        .create(json!({"metadata": {"name": "once"}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "debian:bookworm", "command": ["sh", "-c", "exit 4"]}]}}))
        .await;
    let p = e
        .wait("once", 60, "Failed", |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
        })
        .await;
    let c = container(&p);
    assert_eq!(c["state"]["terminated"]["exitCode"], 4, "{c}");
    assert_eq!(c["restartCount"], 0, "{c}");

    // A liveness probe that fails kills the container; it is started again.
    let _: Pod = e
        .create(json!({"metadata": {"name": "live"}, "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "debian:bookworm",
                "command": ["sh", "-c", "touch /tmp/alive; exec sleep 1000"],
                "livenessProbe": {"exec": {"command": ["sh", "-c", "test -e /tmp/alive && rm /tmp/alive"]},
                                  "periodSeconds": 1, "failureThreshold": 1}}]}}))
        .await;
    e.wait("live", 60, "restarted by its liveness probe", |p| {
        container(p)["restartCount"].as_i64() >= Some(1)
    })
    .await;
    let killing = e.events("Killing").await;
    assert!(
        !killing.is_empty(),
        "a Killing event for the liveness failure"
    );
}

/// Init containers run one after another, to completion, before the containers start; a
/// crash (every process of the pod killed) restarts the container, reporting the signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_first_and_a_killed_container_restarts() {
    let e = env("pm-init").await;
    let step = |n: &str| {
        json!({"name": format!("init-{n}"), "image": "debian:bookworm",
               "command": ["sh", "-c", format!("echo {n} >> /work/steps")],
               "volumeMounts": [{"name": "work", "mountPath": "/work"}]})
    };
    let _: Pod = e
        .create(json!({"metadata": {"name": "steps"}, "spec": {
            "volumes": [{"name": "work", "emptyDir": {}}],
            "initContainers": [step("one"), step("two")],
            "containers": [{"name": "main", "image": "debian:bookworm",
                "command": ["sh", "-c", "cat /work/steps; exec sleep 1000"],
                "volumeMounts": [{"name": "work", "mountPath": "/work"}]}]}}))
        .await;
    let p = e.wait("steps", 60, "Ready", ready).await;
    assert_eq!(condition(&p, "Initialized"), Some(true));
    let inits = p
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default();
    assert_eq!(inits.len(), 2);
    for s in &inits {
        let t = s.state.as_ref().and_then(|s| s.terminated.as_ref());
        assert_eq!(t.map(|t| t.exit_code), Some(0), "{s:?}");
    }
    let log = eventually(30, || async {
        e.agent
            .logs(&e.ns, "steps", "main")
            .ok()
            .filter(|l| l.contains("two"))
    })
    .await
    .expect("main's log");
    assert_eq!(log.trim(), "one\ntwo");

    e.agent.kill_containers(&e.ns, "steps").expect("kill");
    let p = e
        .wait("steps", 60, "restarted", |p| {
            container(p)["restartCount"] == 1 && ready(p)
        })
        .await;
    let last = &container(&p)["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 137, "{last}");
    assert_eq!(last["signal"], 9, "{last}");
}

/// Deletion: SIGTERM first (a program that handles it exits cleanly), SIGKILL of the group
/// once the grace period is over (a program that ignores it), then the pod object is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_sends_sigterm_then_sigkill_after_the_grace_period() {
    let e = env("pm-delete").await;
    let polite = "trap 'echo got TERM; exit 0' TERM; echo pid=$$$$; while :; do sleep 0.1; done";
    let stubborn = "trap '' TERM; echo pid=$$$$; while :; do sleep 0.1; done";
    for (name, script) in [("polite", polite), ("stubborn", stubborn)] {
        let _: Pod = e
            .create(json!({"metadata": {"name": name}, "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "main", "image": "debian:bookworm", "command": ["sh", "-c", script]}]}}))
            .await;
    }
    let mut pids = Vec::new();
    for name in ["polite", "stubborn"] {
        e.wait(name, 60, "Ready", ready).await;
        let pid = eventually(30, || async {
            let log = e.agent.logs(&e.ns, name, "main").ok()?;
            log.contains("pid=").then(|| logged_pid(&log))
        })
        .await
        .expect("the pid in the log");
        assert!(pid_alive(pid));
        pids.push(pid);
        e.pods
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    e.gone("polite", 30).await;
    e.gone("stubborn", 30).await;
    let log = e.agent.logs(&e.ns, "polite", "main").expect("log");
    assert!(log.contains("got TERM"), "{log}");
    let log = e.agent.logs(&e.ns, "stubborn", "main").expect("log");
    assert!(!log.contains("got TERM"), "{log}");
    for pid in pids {
        assert!(!pid_alive(pid), "process {pid} outlived its pod");
    }

    // A forced deletion (grace 0) during a long grace period kills at once.
    let _: Pod = e
        .create(json!({"metadata": {"name": "forced"}, "spec": {
            "terminationGracePeriodSeconds": 300,
            "containers": [{"name": "main", "image": "debian:bookworm", "command": ["sh", "-c", stubborn]}]}}))
        .await;
    e.wait("forced", 60, "Ready", ready).await;
    e.pods
        .delete("forced", &DeleteParams::default())
        .await
        .expect("delete");
    e.wait("forced", 30, "terminating", |p| {
        p.metadata.deletion_timestamp.is_some()
    })
    .await;
    let _ = e
        .pods
        .delete(
            "forced",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await;
    // Well within the 300 s grace period.
    e.gone("forced", 60).await;
    let log = e.agent.logs(&e.ns, "forced", "main").expect("log");
    let pid = logged_pid(&log);
    let dead = eventually(30, || async { (!pid_alive(pid)).then_some(()) }).await;
    assert!(dead.is_some(), "process {pid} outlived its forced deletion");
}

/// Environment from the downward API, a ConfigMap and a Secret; a Secret that does not exist
/// yet holds the container in CreateContainerConfigError until it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_comes_from_the_downward_api_configmaps_and_secrets() {
    let e = env("pm-env").await;
    let _: ConfigMap = e
        .create(json!({"metadata": {"name": "cm"}, "data": {"mode": "fast"}}))
        .await;
    let _: Pod = e
        .create(json!({"metadata": {"name": "env", "labels": {"app": "demo"}}, "spec": {
            "containers": [{"name": "main", "image": "debian:bookworm",
                "command": ["sh", "-c", "echo \"name=$NAME ns=$NS ip=$IP app=$APP mode=$MODE token=$TOKEN greeting=$GREETING\"; id -un; echo \"uname=`uname -n`\"; exec sleep 1000"],
                "env": [
                    {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}},
                    {"name": "GREETING", "value": "hi-$(NAME)"},
                ]}]}}))
        .await;
    let p = e
        .wait("env", 60, "waiting for its Secret", |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some()
                && container(p)["state"]["waiting"]["reason"] == "CreateContainerConfigError"
        })
        .await;
    let msg = container(&p)["state"]["waiting"]["message"].to_string();
    assert!(msg.contains("token") && msg.contains("later"), "{msg}");
    let _: Secret = e
        .create(json!({"metadata": {"name": "later"}, "stringData": {"token": "t0k"}}))
        .await;
    let p = e.wait("env", 60, "Ready", ready).await;
    let ip = pod_ip(&p);
    let log = eventually(30, || async {
        e.agent
            .logs(&e.ns, "env", "main")
            .ok()
            .filter(|l| l.contains("name="))
    })
    .await
    .expect("log");
    let want = format!(
        "name=env ns={} ip={ip} app=demo mode=fast token=t0k greeting=hi-env",
        e.ns
    );
    assert!(log.contains(&want), "{log}\nwanted: {want}");
    assert!(
        log.contains("bosun-pg"),
        "runs as the unprivileged user: {log}"
    );
}

/// bosun's image runs the program it is mapped to, at `/bosun`, with the container's args;
/// a pod that runs to completion (restartPolicy Never) ends Succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bosun_image_runs_its_mapped_program_with_the_args() {
    let e = env("pm-bosun").await;
    let _: Pod = e
        .create(
            json!({"metadata": {"name": "tool"}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "bosun", "image": "ghcr.io/bosun-dev/bosun:0.1.0",
                "args": ["HOSTNAME", "GREETING"],
                "env": [{"name": "GREETING", "value": "hello"}]}]}}),
        )
        .await;
    let p = e
        .wait("tool", 60, "Succeeded", |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
        })
        .await;
    assert_eq!(container(&p)["state"]["terminated"]["reason"], "Completed");
    let log = e.agent.logs(&e.ns, "tool", "bosun").expect("log");
    assert_eq!(log, "tool\nhello\n");
}

/// A pod whose claim does not exist yet waits, Pending with a FailedMount Event, and starts
/// once the claim is there (and bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waits_for_its_claim() {
    let e = env("pm-claim").await;
    let _: Pod = e
        .create(json!({"metadata": {"name": "waiter"}, "spec": {
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "later"}}],
            "containers": [{"name": "main", "image": "debian:bookworm",
                "command": ["sh", "-c", "echo hi > /data/file; exec sleep 1000"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}))
        .await;
    let failed = eventually(30, || async {
        let evs = e.events("FailedMount").await;
        (!evs.is_empty()).then_some(evs)
    })
    .await
    .expect("a FailedMount event");
    let msg = failed[0].message.clone().unwrap_or_default();
    assert!(msg.contains("\"later\" not found"), "{msg}");
    let p = e.pods.get("waiter").await.expect("pod");
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert_eq!(
        container(&p)["state"]["waiting"]["reason"],
        "ContainerCreating"
    );

    let _: PersistentVolumeClaim = e
        .create(json!({"metadata": {"name": "later"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    e.wait("waiter", 60, "Ready", ready).await;
    let claim = e.agent.claim_dir(&e.ns, "later").await.expect("claim dir");
    let written = eventually(30, || async {
        std::fs::read_to_string(claim.join("file")).ok()
    })
    .await;
    assert_eq!(written.as_deref(), Some("hi\n"));
}

/// An image no local program stands for is refused with the kubelet's reason and an Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmapped_image_is_refused_with_a_reason() {
    let e = env("pm-image").await;
    let _: Pod = e
        .create(json!({"metadata": {"name": "nginx"}, "spec": {
            "containers": [{"name": "web", "image": "nginx:1.25"}]}}))
        .await;
    let p = e
        .wait("nginx", 60, "refused", |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some()
                && container(p)["state"]["waiting"]["reason"] == "ErrImageNeverPull"
        })
        .await;
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let msg = container(&p)["state"]["waiting"]["message"].to_string();
    assert!(
        msg.contains("nginx:1.25") && msg.contains("postgres:<major>"),
        "{msg}"
    );
    let evs = eventually(30, || async {
        let evs = e.events("ErrImageNeverPull").await;
        (!evs.is_empty()).then_some(evs)
    })
    .await;
    assert!(evs.is_some(), "a Warning event");
    e.pods
        .delete("nginx", &DeleteParams::default())
        .await
        .expect("delete");
    e.gone("nginx", 30).await;
}

/// A node loss kills the pod's processes and nothing restarts them: the pod turns not Ready
/// with reason NodeLost; deleting it then finalizes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_loss_kills_the_process_group_and_nothing_restarts() {
    let e = env("pm-loss").await;
    let _: Pod = e
        .create(json!({"metadata": {"name": "victim"}, "spec": {
            "containers": [{"name": "main", "image": "debian:bookworm",
                "command": ["sh", "-c", "sleep 1000 & echo pid=$!; wait"]}]}}))
        .await;
    e.wait("victim", 60, "Ready", ready).await;
    let child = eventually(30, || async {
        let log = e.agent.logs(&e.ns, "victim", "main").ok()?;
        log.contains("pid=").then(|| logged_pid(&log))
    })
    .await
    .expect("the child's pid");
    assert!(pid_alive(child));
    e.agent.node_loss(&e.ns, "victim").expect("node loss");
    let p = e
        .wait("victim", 30, "marked lost", |p| {
            condition(p, "Ready") == Some(false)
        })
        .await;
    let reason = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "Ready")
                .and_then(|c| c.reason.clone())
        });
    assert_eq!(reason.as_deref(), Some("NodeLost"));
    let dead = eventually(30, || async { (!pid_alive(child)).then_some(()) }).await;
    assert!(
        dead.is_some(),
        "the whole process group is killed, children included"
    );
    assert_eq!(container(&p)["restartCount"], 0);
    e.pods
        .delete("victim", &DeleteParams::default())
        .await
        .expect("delete");
    e.gone("victim", 30).await;
}
