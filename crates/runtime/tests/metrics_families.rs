//! The families of controller-runtime's `/metrics` a dashboard reads besides the reconcile
//! counts, served by a manager on the real API server: the API requests its client sent, the
//! configured concurrency, a panicking reconcile counted as a panic and as an error, the
//! terminal errors bosun never has, and the process collector.
mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bosun_runtime::cache::scoped_api;
use bosun_runtime::manager::{ControllerContext, Manager, ManagerConfig, Operator, Scope};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::Primary;
use bosun_runtime::Wiring;
use bosun_testenv::{shared, test_namespace};
use common::*;
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::CustomResourceExt;
use tokio::sync::oneshot;

/// Reconciles Widgets by doing nothing, but panics on one whose value is "panic".
struct Panicky;

async fn reconcile(w: Arc<Widget>, _: Arc<()>) -> Result<Action, WidgetError> {
    assert_ne!(w.spec.value, "panic", "this widget's reconcile panics");
    Ok(Action::await_change())
}

impl Operator for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![Widget::crd()]
    }

    fn rbac(&self) -> Rbac {
        Rbac::default()
    }

    fn run(
        &self,
        ctx: ControllerContext,
    ) -> BoxFuture<'static, Result<(), bosun_runtime::manager::OperatorError>> {
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(
                |ns| {
                    let primary =
                        Primary::watch(scoped_api(client.clone(), ns), (), Default::default());
                    Wiring::new(primary, Arc::new(()))
                },
                reconcile,
            )
            .await;
            Ok(())
        })
    }
}

#[tokio::test]
async fn requests_concurrency_panics_and_the_process_are_on_metrics() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    install_crd(&admin).await.expect("crd");
    let ns = test_namespace(&admin, "metrics-families")
        .await
        .expect("ns");
    // The manager runs on the runtime's own client, the one that counts its requests.
    let config = cp.config().await.expect("config");
    let host = config
        .cluster_url
        .authority()
        .expect("the API server's host:port")
        .to_string();
    let client = bosun_runtime::client::client(config, None).expect("client");
    let addr: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.clone()]),
        concurrency: 3,
        metrics_addr: Some(addr),
        probe_addr: Some(addr),
        ..Default::default()
    };
    let m = Manager::new(client, cfg).with_operator(Arc::new(Panicky));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let run = tokio::spawn(m.run(
        async move {
            let _ = stop_rx.await;
        },
        |_| {},
    ));
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    for (name, value) in [("calm", "v"), ("boom", "panic")] {
        widgets
            .create(&PostParams::default(), &widget(&ns, name, value, 0))
            .await
            .expect("create");
    }
    let panics = r#"controller_runtime_reconcile_panics_total{controller="panicky"}"#;
    let success = r#"controller_runtime_reconcile_total{controller="panicky",result="success"}"#;
    // The panic and the calm widget's reconcile both counted: the state asserted below.
    let body = eventually(30, || async {
        let (_, body) = http_get(addr, "/metrics").await.ok()?;
        (series_value(&body, panics)? >= 1.0 && series_value(&body, success)? >= 1.0)
            .then_some(body)
    })
    .await
    .expect("one panic and one successful reconcile counted");
    let value = |series: &str| {
        series_value(&body, series).unwrap_or_else(|| panic!("{series} in:\n{body}"))
    };
    // controller-runtime counts a panic as an error too.
    assert!(
        value(r#"controller_runtime_reconcile_errors_total{controller="panicky"}"#)
            >= value(panics)
    );
    assert_eq!(
        value(r#"controller_runtime_max_concurrent_reconciles{controller="panicky"}"#),
        3.0
    );
    assert_eq!(
        value(r#"controller_runtime_terminal_reconcile_errors_total{controller="panicky"}"#),
        0.0
    );
    // The manager's client listed and watched Widgets on this API server.
    assert!(
        value(&format!(
            r#"rest_client_requests_total{{code="200",host="{host}",method="GET"}}"#
        )) >= 1.0
    );
    for family in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(value(family) > 0.0, "{family}");
    }
    assert!(body.ends_with("# EOF\n"));
    let _ = stop_tx.send(());
    run.await.expect("join").expect("clean");
}
