//! What the manager does with its operators when a term as leader ends, on the real API
//! server: the leader's Lease requests are cut off (a partition between it and the API
//! server, its operators' connections untouched) until its renew deadline passes, then let
//! through again. An operator keeps running across the lost term — started once — unless it
//! asks for the cold restart (`Operator::restarts_on_lost_term`): that one is aborted and
//! started again as a standby. Both work again once the replica wins the lease back.
//!
//! A child cache an operator starts at run time (`DynamicChildren`, what the Helm and
//! Ansible flavours use) lives inside the operator's task: it is kept across the lost term
//! too — no LIST of its kind when the replica leads again.
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_runtime::fence::Fence;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{
    ControllerContext, Manager, ManagerConfig, ManagerError, Operator, OperatorError,
};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::Scope;
use common::*;
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::Client;

const LEASE: &str = "terms";

/// The widget operator under another name, counting how often the manager starts it.
struct Counted {
    name: &'static str,
    cold: bool,
    starts: Arc<AtomicUsize>,
    inner: WidgetOperator,
}

impl Operator for Counted {
    fn name(&self) -> &str {
        self.name
    }
    fn crds(&self) -> Vec<CustomResourceDefinition> {
        Vec::new()
    }
    fn rbac(&self) -> Rbac {
        Rbac::default()
    }
    fn restarts_on_lost_term(&self) -> bool {
        self.cold
    }
    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        self.inner.run(ctx)
    }
}

/// Starts replica a in this process: its operators on `client` (fenced by `fence`), its
/// Lease written through `partition`, its readiness on `probe`; returns its stop switch and
/// its task.
fn start_a(
    config: kube::Config,
    client: Client,
    fence: Fence,
    partition: &layers::Partition,
    ns: &str,
    probe: SocketAddr,
    operators: Vec<Arc<dyn Operator>>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ManagerError>>,
) {
    let leader_client = kube::client::ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(partition)
        .build();
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.into()]),
        leader: Some(LeaderConfig::new(LEASE, ns, "a")),
        probe_addr: Some(probe),
        ..Default::default()
    };
    let m = operators.into_iter().fold(
        Manager::new(client, cfg)
            .with_leader_client(leader_client)
            .with_fence(fence),
        |m, op| m.with_operator(op),
    );
    run_until_stopped(m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_outlives_a_lost_term_unless_it_asks_for_the_cold_restart() {
    let WidgetEnv { cp, admin, ns } = widget_env("le-terms").await;
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    widgets
        .create(&PostParams::default(), &widget(&ns, "w1", "x", 0))
        .await
        .expect("create");

    let config = cp.config().await.expect("config");
    let fence = Fence::new();
    let client = fenced_client(config.clone(), &fence, &layers::Observe::new(|_, _| {}));
    let partition = layers::Partition::default();
    let warm = Arc::new(AtomicUsize::new(0));
    let cold = Arc::new(AtomicUsize::new(0));
    let probe = free_addr();
    let (stop, run) = start_a(
        config,
        client,
        fence,
        &partition,
        &ns,
        probe,
        vec![
            Arc::new(Counted {
                name: "warm-widgets",
                cold: false,
                starts: warm.clone(),
                inner: WidgetOperator {
                    identity: "a".into(),
                },
            }),
            Arc::new(Counted {
                name: "cold-widgets",
                cold: true,
                starts: cold.clone(),
                inner: WidgetOperator {
                    identity: "a".into(),
                },
            }),
        ],
    );
    eventually(30, || reconciled_by_is(&admin, &ns, "w1", "a"))
        .await
        .expect("a leads and reconciles");
    assert_eq!(lease_holder(&admin, &ns, LEASE).await.as_deref(), Some("a"));
    assert_eq!(
        (warm.load(Ordering::SeqCst), cold.load(Ordering::SeqCst)),
        (1, 1)
    );

    // The Lease out of reach: past its renew deadline a steps down.
    partition.set(true);
    eventually(30, || in_role(probe, true))
        .await
        .expect("a went back to standby");
    eventually(30, || async {
        (cold.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await
    .expect("the operator that asked for it was started again");
    assert_eq!(warm.load(Ordering::SeqCst), 1, "the other one kept running");

    // The Lease in reach again: a wins it back, both operators work.
    partition.set(false);
    eventually(30, || in_role(probe, false))
        .await
        .expect("a leads again");
    widgets
        .create(&PostParams::default(), &widget(&ns, "w2", "y", 0))
        .await
        .expect("create");
    eventually(30, || reconciled_by_is(&admin, &ns, "w2", "a"))
        .await
        .expect("a reconciles again");
    assert_eq!(
        (warm.load(Ordering::SeqCst), cold.load(Ordering::SeqCst)),
        (1, 2),
        "started once and twice"
    );
    let _ = stop.send(());
    run.await.expect("join").expect("a stopped cleanly");
}

const DYN_LABEL: &str = "bosun-test/dyn-terms";

/// Writes each widget's ConfigMap, read from a child cache the reconcile starts.
fn run_time_configmaps(identity: &str) -> Arc<dyn Operator> {
    run_time_children(
        "run-time-children",
        DYN_LABEL,
        "bosun-test-dyn-terms",
        identity,
        |w, ctx| async move {
            ctx.apply_configmap(&w).await?;
            Ok(Action::await_change())
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_child_cache_started_at_run_time_outlives_a_lost_term() {
    let WidgetEnv { cp, admin, ns } = widget_env("le-terms-dyn").await;
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    widgets
        .create(&PostParams::default(), &widget(&ns, "d1", "x", 0))
        .await
        .expect("create");

    let config = cp.config().await.expect("config");
    let fence = Fence::new();
    let lists = Arc::new(AtomicUsize::new(0));
    let observe = layers::Observe::counting_lists(&["configmaps"], &lists);
    let client = fenced_client(config.clone(), &fence, &observe);
    let partition = layers::Partition::default();
    let probe = free_addr();
    let (stop, run) = start_a(
        config,
        client,
        fence,
        &partition,
        &ns,
        probe,
        vec![run_time_configmaps("a")],
    );
    eventually(30, || reconciled_by_is(&admin, &ns, "d1", "a"))
        .await
        .expect("a leads and reconciles, its reconcile starting the ConfigMap cache");
    let listed = lists.load(Ordering::SeqCst);
    assert!(listed >= 1, "the run-time cache listed ConfigMaps");

    partition.set(true);
    eventually(30, || in_role(probe, true))
        .await
        .expect("a went back to standby");
    partition.set(false);
    eventually(30, || in_role(probe, false))
        .await
        .expect("a leads again");
    widgets
        .create(&PostParams::default(), &widget(&ns, "d2", "y", 0))
        .await
        .expect("create");
    eventually(30, || reconciled_by_is(&admin, &ns, "d2", "a"))
        .await
        .expect("a reconciles again");
    assert_eq!(
        lists.load(Ordering::SeqCst),
        listed,
        "the ConfigMaps were listed again: the run-time child cache was started anew"
    );
    let _ = stop.send(());
    run.await.expect("join").expect("a stopped cleanly");
}
