//! MyOwnShell on the real API server with kube-controller-manager and the node agent. The
//! operator runs as a ServiceAccount holding exactly its generated RBAC rules.
use bosun_testenv::eventually;
use std::sync::Arc;

use bosun_myownshell::api::MyOwnShellSpec;
use bosun_myownshell::controller::FINALIZER;
use bosun_myownshell::{MyOwnShell, MyOwnShellOperator};
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Operator, Scope};
use bosun_testenv::{shared, test_namespace, NodeAgent, NodeAgentConfig};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use tokio::sync::OnceCell;

const SA_USER: &str = "system:serviceaccount:bosun-system:bosun";

/// The CRD and the operator's ClusterRole (its rules and the runtime's), once per binary.
async fn cluster_setup(client: &Client) {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_init(|| async {
        bosun_testenv::kit::install_crds(client, [MyOwnShell::crd()])
            .await
            .expect("crd served");
        let need = MyOwnShellOperator
            .rbac()
            .merge(bosun_runtime::rbac::runtime_rules(false));
        let mut rules = need.namespaced;
        rules.extend(need.cluster);
        bosun_testenv::kit::grant(client, "bosun-test", rules, SA_USER)
            .await
            .expect("rbac");
    })
    .await;
}

struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ManagerError>>,
}

/// A namespace with a node agent, and the operator watching it as its ServiceAccount.
async fn start(prefix: &str) -> (Client, String, NodeAgent, Running) {
    if std::env::var_os("RUST_LOG").is_some() {
        bosun_runtime::telemetry::init(Default::default());
    }
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    cluster_setup(&client).await;
    let ns = test_namespace(&client, prefix).await.expect("ns");
    let agent = NodeAgent::start(
        client.clone(),
        NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart: false,
        },
    );
    let sa = cp
        .client_as(SA_USER, &["system:serviceaccounts", "system:authenticated"])
        .await
        .expect("client");
    let m = Manager::new(
        sa,
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.clone()]),
            ..Default::default()
        },
    )
    .with_operator(Arc::new(MyOwnShellOperator));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(m.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));
    (client, ns, agent, Running { stop: tx, task })
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("join").expect("clean");
    }
}

#[tokio::test]
async fn size_drives_the_shell_deployment_and_the_finalizer_runs_on_delete() {
    let (client, ns, _agent, run) = start("mos").await;
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
    run.stop().await;
}

/// A Deployment of the same name the operator did not create is never written: neither one
/// its cache cannot see (no labels) nor one it sees (its labels).
#[tokio::test]
async fn a_deployment_it_did_not_create_is_never_taken_over() {
    let (client, ns, _agent, run) = start("mos-foreign").await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let foreign = |name: &str, labels: serde_json::Value| -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1,
                "selector": {"matchLabels": {"mine": name}},
                "template": {"metadata": {"labels": {"mine": name}},
                    "spec": {"containers": [{"name": "c", "image": "mine:1"}]}}}
        }))
        .expect("deployment")
    };
    deps.create(
        &PostParams::default(),
        &foreign("shell-a", serde_json::json!({})),
    )
    .await
    .expect("foreign a");
    // shell-b: what MyOwnShell itself would build, made by someone else (no owner).
    let mut twin = MyOwnShell::new("shell-b", MyOwnShellSpec { size: 1 });
    twin.metadata.namespace = Some(ns.clone());
    let mut b = bosun_myownshell::build::deployment(&twin);
    b.metadata.owner_references = None;
    deps.create(&PostParams::default(), &b)
        .await
        .expect("foreign b");
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    for name in ["shell-a", "shell-b"] {
        let mut s = MyOwnShell::new(name, MyOwnShellSpec { size: 3 });
        s.metadata.namespace = Some(ns.clone());
        shells
            .create(&PostParams::default(), &s)
            .await
            .expect("create");
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let mut wrong = Vec::new();
    for name in ["shell-a", "shell-b"] {
        // Either outcome ends the wait; only one is right.
        let seen = eventually(30, || async {
            let d = deps.get(name).await.ok()?;
            let taken = !d.owner_references().is_empty();
            let reported = events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("NameConflict")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                });
            (taken || reported).then_some((taken, reported))
        })
        .await;
        let d = deps.get(name).await.expect("deployment");
        let replicas = d.spec.as_ref().and_then(|s| s.replicas);
        if seen != Some((false, true)) || replicas != Some(1) {
            wrong.push(format!(
                "{name}: (taken over, NameConflict event) = {seen:?}, owners {:?}, replicas {replicas:?}",
                d.owner_references().iter().map(|o| &o.name).collect::<Vec<_>>()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    run.stop().await;
}
