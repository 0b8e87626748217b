//! Shared set-up for the BookStore end-to-end tests: one control plane per test binary (with
//! kube-controller-manager), the CRD, storage classes, the operator's RBAC, and per test a
//! namespace, a node agent and a manager that runs the operator **as its ServiceAccount**
//! (impersonated), so every test also proves the generated RBAC rules suffice.
#![allow(dead_code)]
pub use bosun_testenv::eventually;
pub use bosun_testenv::perturb;
use std::sync::Arc;
use std::time::Duration;

use bosun_bookstore::{BookStore, BookStoreOperator};
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Operator, Scope};
use bosun_runtime::metrics::Metrics;
use bosun_testenv::{shared, test_namespace, ControlPlane, NodeAgent, NodeAgentConfig};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use tokio::sync::{oneshot, OnceCell};

pub const SA_USER: &str = "system:serviceaccount:bosun-system:bosun";
pub const SA_GROUPS: [&str; 2] = ["system:serviceaccounts", "system:authenticated"];

pub struct Env {
    pub cp: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
    pub agent: NodeAgent,
}

pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), ManagerError>>,
    pub metrics: Metrics,
}

impl Running {
    /// Stops the manager gracefully; fails the test if it does not stop within 30 s or
    /// returns an error.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match tokio::time::timeout(Duration::from_secs(30), &mut self.task).await {
            Err(_) => {
                self.task.abort();
                panic!("the manager did not stop within 30 s of the shutdown signal");
            }
            Ok(Err(join)) => panic!("the manager task failed: {join}"),
            Ok(Ok(Err(e))) => panic!("the manager stopped with an error: {e}"),
            Ok(Ok(Ok(()))) => {}
        }
    }
    pub fn kill(self) {
        self.task.abort();
    }

    /// Reconciles finished so far (successful or not).
    pub fn reconciles(&self) -> f64 {
        let text = self.metrics.encode();
        bosun_testenv::sum_series(&text, "controller_runtime_reconcile_total", &[])
    }

    /// Waits until at least `n` reconciles have finished.
    pub async fn wait_reconciles(&self, n: f64, secs: u64) {
        let done = eventually(secs, || async { (self.reconciles() >= n).then_some(()) }).await;
        assert!(
            done.is_some(),
            "fewer than {n} reconciles within {secs} s: {}",
            self.metrics.encode()
        );
    }
}

async fn cluster_setup(client: &Client) -> anyhow::Result<()> {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_try_init(|| async {
        let pp = PatchParams::apply("bosun-test").force();
        bosun_testenv::kit::install_crds(client, [bosun_bookstore::api::crd()]).await?;
        let classes: Api<StorageClass> = Api::all(client.clone());
        for (name, expand, default) in [("standard", true, true), ("fixed", false, false)] {
            let sc: StorageClass = serde_json::from_value(serde_json::json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}},
                "provisioner": "bosun.dev/simulated", "allowVolumeExpansion": expand,
                "volumeBindingMode": "Immediate",
            }))?;
            classes.patch(name, &pp, &Patch::Apply(&sc)).await?;
        }
        // The operator's ClusterRole, exactly as generated (the operator's rules and the
        // runtime's), bound to its ServiceAccount user.
        let need = BookStoreOperator.rbac().merge(bosun_runtime::rbac::runtime_rules(false));
        let mut rules = need.namespaced;
        rules.extend(need.cluster);
        bosun_testenv::kit::grant(client, "bosun-test", rules, SA_USER).await?;
        anyhow::Ok(())
    })
    .await?;
    Ok(())
}

/// A fresh namespace with a node agent in it.
pub async fn env(prefix: &str, resize_needs_restart: bool) -> Env {
    if std::env::var_os("RUST_LOG").is_some() {
        bosun_runtime::telemetry::init(Default::default());
    }
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    cluster_setup(&admin).await.expect("cluster setup");
    let ns = test_namespace(&admin, prefix).await.expect("namespace");
    let agent = NodeAgent::start(
        admin.clone(),
        NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart,
        },
    );
    Env {
        cp,
        admin,
        ns,
        agent,
    }
}

impl Env {
    /// Runs the BookStore operator, scoped to this namespace, as the ServiceAccount.
    pub async fn start_operator(&self) -> Running {
        let client = self
            .cp
            .client_as(SA_USER, &SA_GROUPS)
            .await
            .expect("client");
        self.run_operator(client)
    }

    /// [`Env::start_operator`] with a client whose view of the cluster `perturb` controls.
    pub async fn start_operator_with(&self, perturb: &perturb::Perturb) -> Running {
        let client = perturb
            .client_as(self.cp, SA_USER, &SA_GROUPS)
            .await
            .expect("client");
        self.run_operator(client)
    }

    fn run_operator(&self, client: Client) -> Running {
        let cfg = ManagerConfig {
            scope: Scope::Namespaces(vec![self.ns.clone()]),
            ..Default::default()
        };
        let m = Manager::new(client, cfg).with_operator(Arc::new(BookStoreOperator));
        let metrics = m.metrics();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(m.run(
            async move {
                let _ = rx.await;
            },
            |_| {},
        ));
        Running {
            stop: Some(tx),
            task,
            metrics,
        }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + serde::de::DeserializeOwned
            + Clone
            + std::fmt::Debug,
    {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    pub async fn create(&self, yaml: &str) -> BookStore {
        let mut bs: BookStore = serde_yaml::from_str(yaml).expect("yaml");
        bs.metadata.namespace = Some(self.ns.clone());
        self.api::<BookStore>()
            .create(&PostParams::default(), &bs)
            .await
            .expect("create bookstore")
    }

    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        let patch = serde_json::json!({ "spec": spec });
        self.api::<BookStore>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch spec");
    }

    pub async fn bookstore(&self, name: &str) -> BookStore {
        self.api::<BookStore>()
            .get(name)
            .await
            .expect("get bookstore")
    }

    /// Waits until the BookStore's condition `type_` has `status` (and, if given, `reason`).
    pub async fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        reason: Option<&str>,
        secs: u64,
    ) -> BookStore {
        let api = self.api::<BookStore>();
        let got = eventually(secs, || async {
            let bs = api.get(name).await.ok()?;
            let st = bs.status.as_ref()?;
            let c = st.conditions.iter().find(|c| c.type_ == type_)?;
            let gen_ok = st.observed_generation == bs.metadata.generation;
            (gen_ok && c.status == status && reason.is_none_or(|r| c.reason == r)).then_some(bs)
        })
        .await;
        match got {
            Some(bs) => bs,
            None => {
                let bs = api.get(name).await.ok();
                panic!(
                    "{name}: condition {type_}={status} {reason:?} not reached; status: {:#?}",
                    bs.and_then(|b| b.status)
                )
            }
        }
    }

    /// Waits until the BookStore's status is final for what the cluster shows: Ready, and
    /// the data volumes' capacity in it (a claim is bound, and its capacity reported, after
    /// the MongoDB pod can already be Ready, so a status with Ready=True may still be followed
    /// by one more write).
    pub async fn wait_converged(&self, name: &str, secs: u64) -> BookStore {
        self.wait_condition(name, "Ready", "True", None, secs).await;
        let api = self.api::<BookStore>();
        let got = eventually(secs, || async {
            let bs = api.get(name).await.ok()?;
            let st = bs.status.as_ref()?;
            let ready = st
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (ready && st.volume_size.is_some()).then_some(bs)
        })
        .await;
        match got {
            Some(bs) => bs,
            None => panic!(
                "{name}: not converged (Ready with the volume size); status: {:#?}",
                api.get(name).await.ok().and_then(|b| b.status)
            ),
        }
    }

    /// Warning/Normal events about an object, as (reason, note).
    pub async fn events_for(&self, name: &str) -> Vec<(String, String)> {
        let api: Api<k8s_openapi::api::events::v1::Event> = self.api();
        api.list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }
}

/// The seed's sample CR (000, Go-based section), with its `metadata:name:` typo fixed.
pub const SEED_SAMPLE: &str = include_str!("../../../../deploy/samples/bookstore.yaml");

pub fn minimal(name: &str) -> String {
    format!("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: {name}\nspec: {{}}\n")
}
