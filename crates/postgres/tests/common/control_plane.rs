//! The test control plane (the real API server), the process-mode node agent running every
//! pod as real processes (PostgreSQL included), and the operator in this process under its
//! own RBAC: what each operator end-to-end test starts with.
use std::sync::Arc;
use std::time::Duration;

use bosun_postgres::api::PostgresCluster;
use bosun_postgres::PostgresOperator;
use bosun_runtime::manager::{Manager, ManagerConfig, Operator, Scope};
use bosun_testenv::{procmode, shared, test_namespace, ImageMap, NodeAgent, ProcessConfig};
use kube::{Client, CustomResourceExt};
use tokio::sync::OnceCell;

/// The operator's identity: its ServiceAccount, as the install manifests name it.
pub const USER: &str = "system:serviceaccount:bosun-system:bosun-postgres";

/// Serves the CRD and grants the operator's RBAC (its rules and the runtime's) to [`USER`],
/// once per test process. `role` names the ClusterRole: each binary its own, so that two
/// binaries running at once never write the same one.
async fn install(client: &Client, role: &'static str) {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_init(|| async {
        let need = PostgresOperator
            .rbac()
            .merge(bosun_runtime::rbac::runtime_rules(false));
        let mut rules = need.namespaced;
        rules.extend(need.cluster);
        bosun_testenv::kit::install(client, [PostgresCluster::crd()], role, rules, USER)
            .await
            .expect("the CRD served and the operator's RBAC granted");
    })
    .await;
}

/// A test's own namespace on the shared control plane, with a process-mode node agent for
/// it.
pub struct Base {
    pub ns: String,
    pub agent: NodeAgent,
    /// The administrator's client.
    pub admin: Client,
    /// A client as [`USER`], for the operator.
    pub operator: Client,
}

/// Needs root, PostgreSQL 15 (`scripts/setup-postgres.sh`) and the `bosun` binary built
/// beside the tests (`cargo build -p bosun`): the pods run it.
pub async fn base(prefix: &str, role: &'static str) -> Base {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    install(&admin, role).await;
    let ns = test_namespace(&admin, prefix).await.expect("namespace");
    let bosun =
        procmode::built_bosun().expect("the bosun binary: run `cargo build -p bosun` first");
    let agent = NodeAgent::process_mode(
        admin.clone(),
        ProcessConfig {
            namespace: Some(ns.clone()),
            images: ImageMap::standard(Some(bosun)),
            restart_backoff: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .expect("process-mode agent (root and scripts/setup-postgres.sh needed)");
    let operator = cp
        .client_as(USER, &["system:serviceaccounts", "system:authenticated"])
        .await
        .expect("operator client");
    Base {
        ns,
        agent,
        admin,
        operator,
    }
}

/// The operator in this process, watching `ns`, as its own task (abort it to stop it as
/// `kill -9` would).
pub fn start_operator(
    client: Client,
    ns: &str,
) -> (bosun_runtime::metrics::Metrics, tokio::task::JoinHandle<()>) {
    let manager = Manager::new(
        client,
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.to_string()]),
            ..Default::default()
        },
    )
    .with_operator(Arc::new(PostgresOperator));
    let metrics = manager.metrics();
    let task = tokio::spawn(async move {
        let _ = manager.run(std::future::pending::<()>(), |_| {}).await;
    });
    (metrics, task)
}
