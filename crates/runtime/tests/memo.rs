//! The applier's and the status writer's memos forget deleted objects: with churn they would
//! otherwise grow for the life of the process (issue 12, finding 11).
mod common;

use std::sync::Arc;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{scoped_api, ChildCache};
use bosun_runtime::manager::{
    ControllerContext, Manager, ManagerConfig, Operator, OperatorError, Scope,
};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use bosun_testenv::{test_namespace, ControlPlane, Options};
use common::*;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::{CustomResourceExt, ResourceExt};

struct Ctx {
    client: kube::Client,
    applier: Applier,
    status: StatusWriter,
    cms: ChildCache<ConfigMap>,
}

/// Widgets, each with a ConfigMap and a status; the test keeps the applier and the status
/// writer to look at their memos.
struct Memos {
    applier: Applier,
    status: StatusWriter,
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let ns = w.namespace().unwrap_or_default();
    let cm = desired_configmap(&w, "memo");
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.applier
        .apply(&api, &cm, ctx.cms.meta(&ns, &cm.name_any()).as_ref())
        .await?;
    let status = WidgetStatus {
        observed_generation: w.metadata.generation,
        value: w.spec.value.clone(),
    };
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.status
        .write_if_changed(&widgets, w.as_ref(), w.status.as_ref(), &status)
        .await?;
    Ok(Action::await_change())
}

impl Operator for Memos {
    fn name(&self) -> &str {
        "memos"
    }
    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![Widget::crd()]
    }
    fn rbac(&self) -> Rbac {
        Rbac::default()
    }
    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let (applier, status) = (self.applier.clone(), self.status.clone());
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(
                |ns| {
                    let (cms, stream) = ChildCache::<ConfigMap>::watch_owned(
                        client.clone(),
                        ns,
                        LABEL,
                        |c| c.data = None,
                        &applier,
                    );
                    let primary =
                        Primary::watch(scoped_api(client.clone(), ns), (), Default::default())
                            .forgetting(&status);
                    let context = Arc::new(Ctx {
                        client: client.clone(),
                        applier: applier.clone(),
                        status: status.clone(),
                        cms: cms.clone(),
                    });
                    Wiring::new(primary, context).owns(stream, cms.synced())
                },
                reconcile,
            )
            .await;
            Ok(())
        })
    }
}

#[tokio::test]
async fn memos_forget_deleted_objects() {
    let cp = ControlPlane::start(Options::default())
        .await
        .expect("control plane");
    let client = cp.client().await.expect("client");
    install_crd(&client).await.expect("crd");
    let ns = test_namespace(&client, "memo").await.expect("namespace");
    let applier = Applier::new(MANAGER);
    let status = StatusWriter::new(MANAGER);
    let op = Memos {
        applier: applier.clone(),
        status: status.clone(),
    };
    let m = Manager::new(
        client.clone(),
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.clone()]),
            ..Default::default()
        },
    )
    .with_operator(Arc::new(op));
    let (tx, run) = run_until_stopped(m);

    let widgets: Api<Widget> = Api::namespaced(client.clone(), &ns);
    create_widgets(&widgets, "w", "v", 3).await;
    eventually(30, || async {
        (applier.remembered() == 3 && status.remembered() == 3).then_some(())
    })
    .await
    .expect("three ConfigMaps and three statuses written");

    // The widgets go, and their ConfigMaps (no garbage collector runs here).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for i in 0..3 {
        widgets
            .delete(&format!("w{i}"), &DeleteParams::default())
            .await
            .expect("delete widget");
        cms.delete(&format!("w{i}-w"), &DeleteParams::default())
            .await
            .expect("delete configmap");
    }
    let forgotten = eventually(30, || async {
        (applier.remembered() == 0 && status.remembered() == 0).then_some(())
    })
    .await;
    assert!(
        forgotten.is_some(),
        "still remembered after deletion: applier {}, status writer {}",
        applier.remembered(),
        status.remembered()
    );
    let _ = tx.send(());
    let _ = run.await;
}
