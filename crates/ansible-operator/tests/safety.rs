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
