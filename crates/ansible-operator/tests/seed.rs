//! Seed 000's Ansible-based BookStore: its `watches.yaml`, its role (with the defaults
//! examples/ansible-bookstore adds, which the sample's spec overrides) and its sample CR
//! (which names the `default` namespace, in its metadata and in its spec) — the four objects
//! created and owned as ansible-operator owns them, updated on a spec change, a deleted child
//! repaired, the status conditions, and a restart over the converged CR that sends no write
//! at all.
mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::ResourceExt;
use serde_json::json;
use support::*;

/// The body `/metrics` serves, over HTTP from the runtime's own server, as Prometheus reads it.
async fn scrape(op: &Running) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = "127.0.0.1:0".parse().expect("address");
    let (addrs, mut servers) = bosun_runtime::http::bind(
        Some(addr),
        None,
        op.metrics.clone(),
        op.health.clone(),
        None,
    )
    .await
    .expect("bind /metrics");
    let server = tokio::spawn(servers.remove(0));
    let mut s = tokio::net::TcpStream::connect(addrs[0])
        .await
        .expect("connect");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .expect("request");
    let mut reply = String::new();
    s.read_to_string(&mut reply).await.expect("reply");
    server.abort();
    assert!(reply.starts_with("HTTP/1.0 200"), "{reply}");
    reply
}

/// ansible-operator's `ansible_operator_reconciles`: a histogram by `GVK` with Prometheus'
/// default buckets, which counted the reconcile that converged the sample.
async fn reconciles_histogram_on_metrics(op: &Running) {
    let text = scrape(op).await;
    assert!(
        text.contains("# TYPE ansible_operator_reconciles histogram\n"),
        "{text}"
    );
    let series = r#"{GVK="charts.example.com/v1alpha1, Kind=BookStore""#;
    let value = |name: &str, le: Option<&str>| -> f64 {
        let key = match le {
            Some(le) => format!("ansible_operator_reconciles_{name}{series},le=\"{le}\"}} "),
            None => format!("ansible_operator_reconciles_{name}{series}}} "),
        };
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    let count = value("count", None);
    assert!(count >= 1.0, "{text}");
    assert_eq!(value("bucket", Some("+Inf")), count);
    assert!(value("sum", None) > 0.0, "{text}");
    let mut last = 0.0;
    for le in [
        "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
    ] {
        let n = value("bucket", Some(le));
        assert!(n >= last && n <= count, "le={le}: {text}");
        last = n;
    }
}

fn sample() -> DynamicObject {
    let text = std::fs::read_to_string(
        repo().join("examples/ansible-bookstore/config/samples/charts_v1alpha1_bookstore.yaml"),
    )
    .expect("sample CR");
    let json = bosun_yaml::goyaml::yaml_to_json(&text).expect("yaml");
    serde_json::from_str(&json).expect("object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_role_creates_updates_repairs_and_restarts_without_writes() {
    let cr = sample();
    let env = env_in(
        cr.namespace()
            .as_deref()
            .expect("the sample names its namespace"),
    )
    .await;
    let watches = repo().join("examples/ansible-bookstore/watches.yaml");
    let (op, ar) = start_bookstore(&env).await;
    let bs = api(&env, &ar)
        .create(&PostParams::default(), &cr)
        .await
        .expect("create the sample");

    let done = wait_for(&env, &ar, "bookstore-sample", 60, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    let running = condition(&done, "Running").expect("Running");
    assert_eq!(running["status"], "True");
    assert_eq!(running["reason"], "Successful");
    assert_eq!(running["message"], "Awaiting next reconciliation");
    assert_eq!(
        (
            &running["ansibleResult"]["ok"],
            &running["ansibleResult"]["changed"],
            &running["ansibleResult"]["failures"]
        ),
        (&json!(4), &json!(4), &json!(0)),
        "{running}"
    );
    assert!(has(&done, "Failure", "False", Some("")));
    reconciles_histogram_on_metrics(&op).await;
    assert_eq!(
        condition(&done, "Successful").expect("Successful")["message"],
        "Last reconciliation succeeded"
    );

    // The four objects, owned as ansible-operator's proxy owns them: no `controller`.
    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &env.ns);
    let svcs: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    let uid = bs.uid().expect("uid");
    for name in ["mongodb-deployment", "book-store"] {
        let d = deps.get(name).await.expect("deployment");
        let refs = serde_json::to_value(d.owner_references()).expect("json");
        assert_eq!(
            refs,
            json!([{"apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore", "name": "bookstore-sample", "uid": uid}])
        );
    }
    let app = deps.get("book-store").await.expect("deployment");
    let c = &app
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod")
        .containers[0];
    assert_eq!(c.image.as_deref(), Some("akash125/pyapp:latest"));
    assert_eq!(
        c.image_pull_policy.as_deref(),
        Some("Always"),
        "pullPolicy, snake-cased"
    );
    for name in ["mongodb-service", "book-store"] {
        let s = svcs.get(name).await.expect("service");
        assert_eq!(s.spec.and_then(|s| s.type_).as_deref(), Some("ClusterIP"));
    }

    // A spec change is applied.
    api(&env, &ar)
        .patch(
            "bookstore-sample",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": {"app": {"tag": "v2"}}, "service": {"app": {"type": "NodePort"}}}})),
        )
        .await
        .expect("patch");
    let updated = eventually(60, || async {
        let d = deps.get("book-store").await.ok()?;
        let s = svcs.get("book-store").await.ok()?;
        let image = d.spec?.template.spec?.containers[0].image.clone()?;
        (image == "akash125/pyapp:v2" && s.spec?.type_.as_deref() == Some("NodePort")).then_some(())
    })
    .await;
    assert!(updated.is_some(), "the spec change reached the objects");
    let after = wait_for(
        &env,
        &ar,
        "bookstore-sample",
        30,
        "the change recorded",
        |o| condition(o, "Running").is_some_and(|c| c["ansibleResult"]["changed"] == 2),
    )
    .await;
    assert!(has(&after, "Successful", "True", None));

    // A deleted child comes back (its dependent watch triggers the owner).
    svcs.delete("mongodb-service", &Default::default())
        .await
        .expect("delete");
    let repaired = eventually(60, || async {
        let s = svcs.get_opt("mongodb-service").await.ok()??;
        (s.metadata.deletion_timestamp.is_none() && s.metadata.uid.is_some()).then_some(s)
    })
    .await
    .expect("mongodb-service repaired");
    assert_eq!(repaired.owner_references()[0].uid, uid);
    // The repair is recorded, then nothing moves.
    wait_for(
        &env,
        &ar,
        "bookstore-sample",
        30,
        "the repair recorded",
        |o| condition(o, "Running").is_some_and(|c| c["ansibleResult"]["changed"] == 1),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    op.stop().await;

    // A restart over the converged CR: reconciled, and not a single write.
    let before = api(&env, &ar)
        .get("bookstore-sample")
        .await
        .expect("cr")
        .data["status"]
        .clone();
    let op = start(&env, operators(&watches), USER).await;
    op.ready().await;
    let reconciled = eventually(60, || async {
        (op.reconciles("success") >= 1.0).then_some(())
    })
    .await;
    assert!(
        reconciled.is_some(),
        "the restarted operator reconciled the CR"
    );
    // Let the child watches it sets up deliver their first events (they trigger again).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        op.writes.get(),
        0,
        "a restart over a converged CR sent writes"
    );
    assert_eq!(
        api(&env, &ar)
            .get("bookstore-sample")
            .await
            .expect("cr")
            .data["status"],
        before
    );

    // Deleting the CR lets the garbage collector take its objects.
    api(&env, &ar)
        .delete("bookstore-sample", &Default::default())
        .await
        .expect("delete");
    let gone = eventually(60, || async {
        let d = deps.get_opt("book-store").await.ok()?;
        let s = svcs.get_opt("mongodb-service").await.ok()?;
        (d.is_none() && s.is_none()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "children collected with their owner");
    op.stop().await;
}
