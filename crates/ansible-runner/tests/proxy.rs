//! The loopback proxy on the real API server: a run's token opens it, and only while the
//! run lasts; a create through it gets the owner reference; what the run wrote is recorded.
use bosun_ansible::Owner;
use bosun_ansible_runner::proxy::Proxy;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::{Client, Config};
use serde_json::json;

/// A client as the role's kubeconfig makes it: the proxy's URL and a bearer token.
fn through(proxy: &Proxy, token: &str, ns: &str) -> Client {
    let mut c = Config::new(proxy.url().parse().expect("url"));
    c.default_namespace = ns.to_string();
    c.auth_info.token = Some(token.to_string().into());
    Client::try_from(c).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_token_opens_the_proxy_only_while_the_run_lasts() {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = bosun_testenv::test_namespace(&admin, "runner-proxy")
        .await
        .expect("namespace");
    let proxy = Proxy::start(admin.clone()).await.expect("proxy");
    assert!(
        proxy.url().starts_with("http://127.0.0.1:"),
        "{}",
        proxy.url()
    );
    let owner_cm: ConfigMap = Api::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"),
        )
        .await
        .expect("owner");
    let owner = Owner::from_object(
        &serde_json::to_value(&owner_cm)
            .map(|mut v| {
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("ConfigMap");
                v
            })
            .expect("json"),
    )
    .expect("owner");

    // No token, a made-up token: refused.
    let forged = "0".repeat(64);
    let api: Api<ConfigMap> = Api::namespaced(through(&proxy, &forged, &ns), &ns);
    match api.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401, "{s:?}"),
        other => panic!("a forged token was let through: {other:?}"),
    }

    let scope = proxy.register(Some(owner.clone())).expect("register");
    let token = scope.token().to_string();
    let api: Api<ConfigMap> = Api::namespaced(through(&proxy, &token, &ns), &ns);
    let made = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "child"}, "data": {"a": "b"}}))
                .expect("cm"),
        )
        .await
        .expect("create through the proxy");
    let refs = made.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!(
        (
            refs[0].kind.as_str(),
            refs[0].name.as_str(),
            refs[0].uid.as_str()
        ),
        ("ConfigMap", "owner", owner.uid.as_str())
    );
    assert!(api.get("child").await.is_ok());
    // The ConfigMap was created by the run (kind read from the body the client sent).
    assert!(
        scope
            .touched()
            .contains(&("v1".to_string(), "ConfigMap".to_string())),
        "{:?}",
        scope.touched()
    );

    // Watches stream through (kubernetes.core's `wait` and `k8s_info` with `wait` use them).
    let rv = made.metadata.resource_version.clone().unwrap_or_default();
    let mut stream = api
        .watch(
            &kube::api::WatchParams::default().fields("metadata.name=child"),
            &rv,
        )
        .await
        .expect("watch through the proxy")
        .boxed();
    api.patch(
        "child",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"data": {"a": "c"}})),
    )
    .await
    .expect("patch through the proxy");
    let seen = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(ev) = stream.next().await {
            if let Ok(kube::api::WatchEvent::Modified(cm)) = ev {
                return cm.data.and_then(|d| d.get("a").cloned());
            }
        }
        None
    })
    .await
    .expect("the watch delivered the change in time");
    assert_eq!(seen.as_deref(), Some("c"));
    // A patch is not a create: nothing is injected, and the owner reference stays one.
    let after = api.get("child").await.expect("child");
    assert_eq!(after.metadata.owner_references.unwrap_or_default().len(), 1);

    // The run is over: its token no longer works.
    drop(scope);
    match api.get("child").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401, "{s:?}"),
        other => panic!("an expired token was let through: {other:?}"),
    }
}
