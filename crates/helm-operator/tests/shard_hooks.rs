//! Sharded (issue 37), a release's hooks are on the same member as its other objects: a hook
//! is created directly, not through the applier that labels the release's objects, so it
//! needs the custom resource's shard label of its own.
mod support;

use std::collections::BTreeMap;

use bosun_helm_operator::Storage;
use bosun_runtime::client::{client_fenced, client_with, Pool};
use bosun_runtime::fence::Fence;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{Manager, ManagerConfig, Scope};
use bosun_runtime::shard::{ShardConfig, SHARD_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::ResourceExt;
use support::*;
use tokio::sync::oneshot;

const MEMBER: &str = "member-1";

fn shard_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| k.starts_with(SHARD_LABEL))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_carry_the_shard_label_of_the_releases_other_objects() {
    let env = env("helm-shard-hooks").await;
    let watches =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/watches.yaml");
    let ops = operators(&watches, Storage::Secrets);
    install_crds(&env.admin, &ops).await;

    // One sharded replica: it places the custom resource on itself and reconciles it.
    let config = env.cp.config().await.expect("config");
    let fence = Fence::new();
    let client =
        client_fenced(config.clone(), None, Pool::default(), Some(&fence)).expect("client");
    let sharder_fence = Fence::new();
    let sharder = client_fenced(config.clone(), None, Pool::default(), Some(&sharder_fence))
        .expect("sharder client");
    let shard =
        ShardConfig::new(LeaderConfig::new("bosun-helm-hooks", &env.ns, MEMBER)).expect("shard");
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![env.ns.clone()]),
        ..Default::default()
    };
    let mut m = Manager::new(client, cfg)
        .with_leader_client(client_with(config, None, Pool::default()).expect("leader client"))
        .with_fence(fence)
        .with_sharding(shard, sharder, sharder_fence);
    for op in ops {
        m = m.with_operator(op);
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(m.run(
        async move {
            let _ = stopped.await;
        },
        |_| {},
    ));

    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    create(
        &env,
        &lc,
        "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: lc\nspec:\n  greeting: hi\n",
    )
    .await;
    let done = wait_for(&env, &lc, "lc", 120, "Deployed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
    })
    .await;
    let placed = shard_labels(done.labels());
    assert_eq!(
        placed.values().map(String::as_str).collect::<Vec<_>>(),
        vec![MEMBER],
        "the custom resource placed on the one member: {:?}",
        done.labels()
    );

    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let labels_of = |name: &'static str| {
        let cms = cms.clone();
        async move { shard_labels(cms.get(name).await.expect(name).labels()) }
    };
    assert_eq!(
        labels_of("lc-config").await,
        placed,
        "a release object (the applier's)"
    );
    assert_eq!(
        labels_of("lc-pre-early").await,
        placed,
        "the pre-install hook ConfigMap"
    );
    let job = Api::<Job>::namespaced(env.admin.clone(), &env.ns)
        .get("lc-post")
        .await
        .expect("the post-install Job hook");
    assert_eq!(
        shard_labels(job.labels()),
        placed,
        "the post-install Job hook"
    );

    let _ = stop.send(());
    task.await
        .expect("join")
        .expect("the manager stopped cleanly");
}
