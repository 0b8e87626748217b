//! The host's cache standing in for `k8s`'s read before a create ([`ObjectCache`]): an object
//! the cache says is absent is created without a read, and when the cache was behind (the
//! object is there after all) the task ends as kubernetes.core's would have — the object read
//! and patched to the definition, not reported as a conflicting create.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_ansible::{Discovery, LoadOptions, ObjectCache, Owner, Role, RunContext};
use common::diff::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

/// A cache that has seen nothing at all: every object is "absent".
#[derive(Default)]
struct Behind(AtomicUsize);

impl ObjectCache for Behind {
    fn known_absent<'a>(
        &'a self,
        _api_version: &'a str,
        _kind: &'a str,
        _namespace: Option<&'a str>,
        _name: &'a str,
    ) -> futures::future::BoxFuture<'a, bool> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { true })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_the_cache_was_wrong_about_reads_and_patches() {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    ensure_crd(&client, "test.bosun.dev", "Widget").await;
    let ns = bosun_testenv::test_namespace(&client, "cache")
        .await
        .expect("ns");
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "cached",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({}),
        watch_vars: None,
        kinds: vec![],
    };
    let cr = create_cr(&client, &case, &ns).await;
    let role = Role::load(
        "cached",
        &LoadOptions {
            roles_path: vec![case.roles_dir.clone()],
            collections_paths: vec![],
            cwd: case.roles_dir.clone(),
        },
    )
    .expect("load");
    let cache = Arc::new(Behind::default());
    let mut ctx = RunContext::new(
        Some(client.clone()),
        Arc::new(Discovery::new()),
        Owner::from_object(&cr),
    );
    ctx.cache = Some(cache.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // Absent indeed: created (and owned) without a read.
    let o = role.run(&ctx, &extra_vars(&case, &cr)).await;
    assert!(o.succeeded(), "{:?}", o.failures);
    assert_eq!(cache.0.load(Ordering::SeqCst), 1, "the cache was asked");
    let first = &bosun_tasks(&o)[0].1;
    assert_eq!(
        (&first["changed"], &first["method"]),
        (&json!(true), &json!("create"))
    );
    let created = cms.get("cached").await.expect("created");
    assert_eq!(created.metadata.owner_references.expect("owned").len(), 1);

    // There after all, with other data: the 409 leads to the read and a patch.
    cms.delete("cached", &Default::default())
        .await
        .expect("delete");
    let other: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "cached", "namespace": ns}, "data": {"a": "0"}}),
    )
    .expect("configmap");
    cms.create(&PostParams::default(), &other)
        .await
        .expect("create");
    let o = role.run(&ctx, &extra_vars(&case, &cr)).await;
    assert!(o.succeeded(), "{:?}", o.failures);
    let second = &bosun_tasks(&o)[0].1;
    assert_eq!(
        (
            &second["changed"],
            &second["method"],
            second.get("warnings")
        ),
        (&json!(true), &json!("update"), None),
        "{second}"
    );
    assert_eq!(second["result"]["data"]["a"], "1");
    let patched = cms.get("cached").await.expect("there");
    assert_eq!(
        patched.data.expect("data").get("a").map(String::as_str),
        Some("1")
    );
    // Nothing to change: no write, as without a cache.
    let o = role.run(&ctx, &extra_vars(&case, &cr)).await;
    assert_eq!(bosun_tasks(&o)[0].1["changed"], json!(false));
}
