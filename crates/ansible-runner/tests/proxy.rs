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

/// A run of a CR placed on `member` (its children's labels as the runtime decides them).
fn on(owner: &Owner, member: &str) -> Owner {
    owner
        .clone()
        .labelling(bosun_runtime::shard::child_labels(Some(
            &[("shard.bosun.dev/owners".to_string(), member.to_string())].into(),
        )))
}

fn shard(cm: &ConfigMap) -> Option<String> {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("shard.bosun.dev/owners").cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_through_the_proxy_moves_a_child_to_its_owners_shard() {
    use kube::api::{Patch, PatchParams};
    let cp = bosun_testenv::shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = bosun_testenv::test_namespace(&admin, "runner-relabel")
        .await
        .expect("namespace");
    let proxy = Proxy::start(admin.clone()).await.expect("proxy");
    let owner_cm: ConfigMap = Api::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"),
        )
        .await
        .expect("owner");
    let mut owner_json = serde_json::to_value(&owner_cm).expect("json");
    owner_json["apiVersion"] = json!("v1");
    owner_json["kind"] = json!("ConfigMap");
    let owner = Owner::from_object(&owner_json).expect("owner");
    let admin_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    admin_cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "unowned"}})).expect("cm"),
        )
        .await
        .expect("unowned");

    // Created on member a: one child per kind of update the role may send later.
    let names = ["merged", "strategic", "applied", "replaced", "json-patched"];
    let on_a = proxy.register(Some(on(&owner, "a"))).expect("register");
    let api: Api<ConfigMap> = Api::namespaced(through(&proxy, on_a.token(), &ns), &ns);
    for n in names {
        let made = api
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": n}})).expect("cm"),
            )
            .await
            .expect("create through the proxy");
        assert_eq!(shard(&made).as_deref(), Some("a"), "{n}");
    }
    drop(on_a);

    // The CR moved to b: each update through the proxy carries b.
    let on_b = proxy.register(Some(on(&owner, "b"))).expect("register");
    let api: Api<ConfigMap> = Api::namespaced(through(&proxy, on_b.token(), &ns), &ns);
    let pp = PatchParams::default();
    let data = json!({"data": {"k": "v"}});
    api.patch("merged", &pp, &Patch::Merge(&data))
        .await
        .expect("merge");
    api.patch("strategic", &pp, &Patch::Strategic(&data))
        .await
        .expect("strategic");
    api.patch(
        "applied",
        &PatchParams::apply("role").force(),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied"}, "data": {"k": "v"}})),
    )
    .await
    .expect("apply");
    let mut current = api.get("replaced").await.expect("get");
    current.data = Some([("k".to_string(), "v".to_string())].into());
    if let Some(l) = current.metadata.labels.as_mut() {
        // The role replaces with what it renders: no shard label of its own.
        l.clear();
    }
    api.replace("replaced", &PostParams::default(), &current)
        .await
        .expect("replace");
    let ops = json!([{"op": "add", "path": "/data", "value": {"k": "v"}}]);
    let req = http::Request::patch(format!("/api/v1/namespaces/{ns}/configmaps/json-patched"))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(serde_json::to_vec(&ops).expect("ops"))
        .expect("request");
    through(&proxy, on_b.token(), &ns)
        .request::<ConfigMap>(req)
        .await
        .expect("json patch");
    api.patch("unowned", &pp, &Patch::Merge(&data))
        .await
        .expect("unowned");
    for n in names {
        let cm = admin_cms.get(n).await.expect("get");
        assert_eq!(
            shard(&cm).as_deref(),
            Some("b"),
            "{n} keeps the label of the member that created it"
        );
        assert_eq!(
            cm.data.unwrap_or_default().get("k").map(String::as_str),
            Some("v"),
            "{n}"
        );
    }
    let unowned = admin_cms.get("unowned").await.expect("get");
    assert_eq!(shard(&unowned), None, "not the CR's child");
}
