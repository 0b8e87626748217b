//! MyOwnShell on the real API server with kube-controller-manager and the node agent.
use bosun_testenv::eventually;
use std::sync::Arc;
use std::time::Duration;

use bosun_myownshell::api::MyOwnShellSpec;
use bosun_myownshell::controller::FINALIZER;
use bosun_myownshell::{MyOwnShell, MyOwnShellOperator};
use bosun_runtime::manager::{Manager, ManagerConfig, Scope};
use bosun_testenv::{shared, test_namespace, NodeAgent, NodeAgentConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResourceExt, ResourceExt};

#[tokio::test]
async fn size_drives_the_shell_deployment_and_the_finalizer_runs_on_delete() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = MyOwnShell::crd();
    crds.patch(
        &crd.name_any(),
        &PatchParams::apply("test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("crd");
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, &crd.name_any(), conditions::is_crd_established()),
    )
    .await
    .expect("established")
    .expect("crd wait");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ns = test_namespace(&client, "mos").await.expect("ns");
    let _agent = NodeAgent::start(
        client.clone(),
        NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart: false,
        },
    );
    let m = Manager::new(
        client.clone(),
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.clone()]),
            ..Default::default()
        },
    )
    .with_operator(Arc::new(MyOwnShellOperator));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(m.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));

    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let mut shell = MyOwnShell::new("myownshell-sample", MyOwnShellSpec { size: 3 });
    shell.metadata.namespace = Some(ns.clone());
    let created = shells
        .create(&PostParams::default(), &shell)
        .await
        .expect("create");

    let ready = eventually(60, || async {
        let s = shells.get("myownshell-sample").await.ok()?;
        (s.status.as_ref()?.ready_replicas == 3).then_some(s)
    })
    .await
    .expect("3 shell pods ready");
    assert!(
        ready.finalizers().iter().any(|f| f == FINALIZER),
        "seed's finalizer added"
    );
    let dep = deps.get("myownshell-sample").await.expect("deployment");
    assert_eq!(dep.owner_references()[0].uid, created.uid().expect("uid"));
    let c = &dep
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod")
        .containers[0];
    assert_eq!(c.image.as_deref(), Some("busybox:latest"));
    assert_eq!(
        c.command.as_ref().expect("cmd")[2],
        bosun_myownshell::build::COMMAND
    );

    // Size change reaches the Deployment and the status.
    shells
        .patch(
            "myownshell-sample",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"size": 1}})),
        )
        .await
        .expect("resize");
    let s = eventually(60, || async {
        let s = shells.get("myownshell-sample").await.ok()?;
        let st = s.status.clone()?;
        (st.ready_replicas == 1 && st.observed_generation == s.metadata.generation).then_some(s)
    })
    .await;
    assert!(s.is_some(), "status follows the new size");
    assert_eq!(
        deps.get("myownshell-sample")
            .await
            .expect("dep")
            .spec
            .and_then(|s| s.replicas),
        Some(1)
    );

    // Delete: the finalizer runs (and is removed), the Deployment is garbage collected.
    shells
        .delete("myownshell-sample", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = eventually(60, || async {
        let s = shells.get_opt("myownshell-sample").await.ok()?;
        let d = deps.get_opt("myownshell-sample").await.ok()?;
        (s.is_none() && d.is_none()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "finalized and cleaned up");
    let _ = tx.send(());
    run.await.expect("join").expect("clean");
}
