//! Charts that declare `kubeVersion`, against the test API server: the version comes from
//! the server (`.Capabilities.KubeVersion` is its `gitVersion`), a chart it satisfies installs,
//! and one it does not fails as Helm's install fails, with Helm's message in the status.
mod support;

use bosun_helm_operator::Storage;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-kube-version";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_get_the_servers_version_and_helms_refusal_when_it_does_not_fit() {
    let env = env("helm-kubeversion").await;
    let watches = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charts/kube-version-watches.yaml");
    let ops = operators(&watches, Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let server = env
        .admin
        .apiserver_version()
        .await
        .expect("version")
        .git_version;

    let current = resource("test.bosun.dev", "v1", "Current");
    create(
        &env,
        &current,
        "apiVersion: test.bosun.dev/v1\nkind: Current\nmetadata:\n  name: now\nspec: {}\n",
    )
    .await;
    wait_for(&env, &current, "now", 90, "Deployed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let cm = cms.get("now-caps").await.expect("configmap");
    assert_eq!(
        cm.data.expect("data")["version"],
        server,
        ".Capabilities.KubeVersion is the server's"
    );

    let future = resource("test.bosun.dev", "v1", "Future");
    create(
        &env,
        &future,
        "apiVersion: test.bosun.dev/v1\nkind: Future\nmetadata:\n  name: later\nspec: {}\n",
    )
    .await;
    let o = wait_for(&env, &future, "later", 90, "ReleaseFailed", |o| {
        has(o, "ReleaseFailed", "True", None)
    })
    .await;
    let msg = condition(&o, "ReleaseFailed").expect("condition")["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(
        msg,
        format!(
            "chart requires kubeVersion: >=99.0.0 which is incompatible with Kubernetes {server}"
        )
    );
    assert!(has(&o, "Ready", "False", None));
    assert!(
        cms.get_opt("later-caps").await.expect("get").is_none(),
        "nothing of the refused release is applied"
    );
    assert!(!op.task.is_finished(), "the operator is still running");
    op.stop().await;
}
