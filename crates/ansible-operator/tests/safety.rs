//! What the operator must never do, on the real API server: publish what a `no_log` task
//! hides (status, Events), fail a create that lost a race, keep memory for objects that
//! are gone, or overwrite another writer's status.
mod support;

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;
use support::*;

const TOKEN: &str = "tok-5ecret-value";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_log_failure_reaches_neither_status_nor_events() {
    let env = env("ao-nolog").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: no_log}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    widget(&env, "secret", json!({"token": TOKEN})).await;
    let failed = wait_for(&env, &widgets(), "secret", 60, "Failure", |o| {
        has(o, "Failure", "True", Some("Failed"))
    })
    .await;
    let failure = condition(&failed, "Failure").expect("Failure");
    assert_eq!(failure["message"], bosun_ansible::CENSORED, "{failure}");
    let status = failed.data["status"].to_string();
    assert!(
        !status.contains(TOKEN),
        "the status holds the token: {status}"
    );

    let events: Api<DynamicObject> = Api::namespaced_with(
        env.admin.clone(),
        &env.ns,
        &resource("events.k8s.io", "v1", "Event"),
    );
    let warned = eventually(30, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.data["regarding"]["name"] == "secret" && e.data["reason"] == "Failed")
    })
    .await
    .expect("a Failed event");
    assert_eq!(warned.data["note"], bosun_ansible::CENSORED);
    let all = serde_json::to_string(&events.list(&ListParams::default()).await.expect("list"))
        .expect("json");
    assert!(!all.contains(TOKEN), "an Event holds the token");
    op.stop().await;
}

/// A client layer that makes a create lose a race, for real: just before it forwards the
/// first POST of a ConfigMap, another client creates that ConfigMap on the API server, which
/// then answers the forwarded POST with a real 409.
#[derive(Clone)]
struct Race {
    admin: kube::Client,
    ns: String,
    name: String,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// The inner service is shared: the other writer's create is awaited before the request
/// is handed on.
struct RaceService<S> {
    inner: std::sync::Arc<tokio::sync::Mutex<S>>,
    race: Race,
}

impl<S> tower::Layer<S> for Race {
    type Service = RaceService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RaceService {
            inner: std::sync::Arc::new(tokio::sync::Mutex::new(inner)),
            race: self.clone(),
        }
    }
}

impl<S, B> tower::Service<http::Request<B>> for RaceService<S>
where
    S: tower::Service<http::Request<B>> + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let race = self.race.clone();
        let first = req.method() == http::Method::POST
            && req.uri().path().ends_with("/configmaps")
            && !race.done.swap(true, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            if first {
                let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": race.name}, "data": {"by": "the other writer"}}),
                )
                .expect("config map");
                Api::namespaced(race.admin.clone(), &race.ns)
                    .create(&Default::default(), &cm)
                    .await
                    .expect("the other writer's create");
            }
            let call = {
                let mut s = inner.lock().await;
                futures::future::poll_fn(|cx| s.poll_ready(cx)).await?;
                s.call(req)
            };
            call.await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_that_loses_a_race_is_reported_as_kubernetes_core_does() {
    let env = env("ao-race").await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("racer/tasks")).expect("role dir");
    std::fs::write(
        dir.path().join("racer/tasks/main.yml"),
        format!(
            "- name: create\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      \
             metadata: {{name: raced, namespace: {}}}\n      data: {{by: the role}}\n  register: made\n",
            env.ns
        ),
    )
    .expect("tasks");
    let role = bosun_ansible::Role::load(
        "racer",
        &bosun_ansible::LoadOptions {
            roles_path: vec![dir.path().to_path_buf()],
            collections_paths: vec![],
            cwd: dir.path().to_path_buf(),
        },
    )
    .expect("role");
    let race = Race {
        admin: env.admin.clone(),
        ns: env.ns.clone(),
        name: "raced".into(),
        done: Default::default(),
    };
    let config = env.cp.config().await.expect("config");
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&race)
        .build();
    let ctx = bosun_ansible::RunContext::new(
        Some(client),
        std::sync::Arc::new(bosun_ansible::Discovery::new()),
        None,
    );
    let outcome = role.run(&ctx, &Default::default()).await;
    assert!(
        race.done.load(std::sync::atomic::Ordering::SeqCst),
        "the race ran"
    );
    // kubernetes.core 5.4 (`service.py` `create`, `runner.py` `perform_action`): a 409 on
    // create is a warning, the task is changed with an empty result.
    assert!(outcome.succeeded(), "{:?}", outcome.failures);
    let r = &outcome.tasks[0].result;
    assert_eq!(
        (&r["changed"], &r["method"], &r["result"]),
        (&json!(true), &json!("create"), &json!({})),
        "{r}"
    );
    assert!(r["warnings"][0]
        .as_str()
        .is_some_and(|w| w
            .starts_with("raced was not found, but creating it returned a 409 Conflict error.")));
    let cm = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(env.admin.clone(), &env.ns)
        .get("raced")
        .await
        .expect("config map");
    assert_eq!(
        cm.data.expect("data")["by"],
        "the other writer",
        "the other writer's object is left as it is"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_from_a_stale_read_keeps_another_writers_update() {
    use bosun_ansible_operator::latest::View;
    use bosun_ansible_operator::reconcile::update_status;
    use kube::api::{Patch, PatchParams};
    let env = env("ao-status").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: features}\n",
    );
    install_crds(&env.admin, &operators(&w)).await;
    widget(&env, "shared", json!({})).await;
    let api = api(&env, &widgets());
    let fresh = api.get("shared").await.expect("get");
    update_status(
        &api,
        &fresh,
        &View::of(&fresh),
        |_| json!({"phase": "A", "runs": 1}),
    )
    .await
    .expect("first write")
    .expect("written");
    // The operator's read, then another writer's update it does not see.
    let stale = api.get("shared").await.expect("get");
    api.patch_status(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "B"}})),
    )
    .await
    .expect("the other writer");
    // The operator's next write, computed from its stale read.
    let bump = |current: Option<&serde_json::Value>| {
        let mut s = current.cloned().unwrap_or_else(|| json!({}));
        s["runs"] = json!(s["runs"].as_i64().unwrap_or(0) + 1);
        s
    };
    update_status(&api, &stale, &View::of(&stale), bump)
        .await
        .expect("second write")
        .expect("written");
    let after = api.get("shared").await.expect("get");
    assert_eq!(
        after.data["status"],
        json!({"phase": "B", "runs": 2}),
        "the other writer's phase is kept and the write is recomputed from it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_writes_map_empties_after_create_delete_churn() {
    use bosun_ansible_operator::{AnsibleFlavor, AnsibleOptions};
    use bosun_runtime::manager::Operator;
    use bosun_watches::WatchOperator;
    use std::sync::Arc;
    let env = env("ao-churn").await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("roles/churn/tasks")).expect("role");
    std::fs::write(
        dir.path().join("roles/churn/tasks/main.yml"),
        "- name: requeue when asked\n  requeue_after:\n    time: \"{{ requeue | default('0s') }}\"\n",
    )
    .expect("tasks");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: churn}\n",
    );
    let file = bosun_watches::WatchesFile::load(&w).expect("watches");
    let opts = AnsibleOptions {
        watches_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let typed: Vec<Arc<WatchOperator<AnsibleFlavor>>> =
        bosun_ansible_operator::operators(&file.entries, &opts)
            .expect("load")
            .into_iter()
            .map(Arc::new)
            .collect();
    let op = typed[0].clone();
    let ops: Vec<Arc<dyn Operator>> = typed.into_iter().map(|o| o as Arc<dyn Operator>).collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let running = start(&env, ops, USER).await;
    let widgets_api = api(&env, &widgets());
    // Objects created, reconciled (each a status write) and deleted without a finalizer:
    // no reconcile sees them again.
    const N: usize = 40;
    let mut peak = 0;
    for round in 0..4 {
        for i in 0..N / 4 {
            widget(&env, &format!("c{round}-{i}"), json!({})).await;
        }
        for i in 0..N / 4 {
            wait_successful(&env, &format!("c{round}-{i}")).await;
        }
        peak = peak.max(op.flavor().latest.len());
        for i in 0..N / 4 {
            widgets_api
                .delete(&format!("c{round}-{i}"), &Default::default())
                .await
                .expect("delete");
        }
    }
    let gone = eventually(60, || async {
        let left = widgets_api.list(&ListParams::default()).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    assert!(gone.is_some(), "all deleted");
    // Any later activity in the namespace shows the cache past those writes: one object
    // that asks to be run again (its second run sees its own write in the cache).
    widget(&env, "later", json!({"requeue": "1s"})).await;
    let emptied = eventually(60, || async { op.flavor().latest.is_empty().then_some(()) }).await;
    assert!(
        emptied.is_some(),
        "{} entries left after {N} objects came and went (peak {peak})",
        op.flavor().latest.len()
    );
    running.stop().await;
}

/// Review M3: a cluster-scoped kind watched with a list of namespaces is reconciled by one
/// controller, not one per namespace (which ran every CR's role N times at once). The CR
/// exists before the operator starts, so each controller wired would list it and run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_scoped_kind_in_two_watched_namespaces_runs_once_per_change() {
    use kube::api::PostParams;

    let env = env("ao-m3a").await;
    let other = bosun_testenv::test_namespace(&env.admin, "ao-m3b")
        .await
        .expect("second namespace");
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Tally, role: tally}\n",
    );
    let ops = operators(&w);
    install_crds_with(&env.admin, &ops, |crd| crd.spec.scope = "Cluster".into()).await;
    grant(&env, &ops, USER).await;
    let tallies = resource("test.bosun.dev", "v1alpha1", "Tally");
    let all: Api<DynamicObject> = Api::all_with(env.admin.clone(), &tallies);
    let name = format!("tally-{}", env.ns);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.bosun.dev/v1alpha1", "kind": "Tally",
        "metadata": {"name": name}, "spec": {"value": "one"}
    }))
    .expect("object");
    all.create(&PostParams::default(), &obj)
        .await
        .expect("create");

    let scope = bosun_runtime::manager::Scope::Namespaces(vec![env.ns.clone(), other.clone()]);
    let op = start_scoped(&env, ops, USER, scope).await;
    eventually(60, || async {
        let o = all.get(&name).await.ok()?;
        (o.data["status"]["seen"] == "one").then_some(())
    })
    .await
    .expect("the role ran");
    // Whatever run was in flight finishes before the manager stops.
    let metrics = op.metrics.clone();
    op.stop().await;
    let runs = bosun_testenv::sum_series(
        &metrics.encode(),
        "controller_runtime_reconcile_total",
        &[("controller", "tally-controller"), ("result", "success")],
    );
    assert_eq!(
        runs, 1.0,
        "one run for one CR, whatever the namespaces watched, counted under operator-sdk's \
         controller name"
    );
    all.delete(&name, &Default::default())
        .await
        .expect("delete");
}
