//! A kind known only at run time (`DynamicObject` + discovery) goes through the same apply,
//! status, caches and controller builder as a typed one, on the real API server.
mod common;

use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::apply::{Applier, Outcome};
use bosun_runtime::dynamic::{
    Discovery, DynamicChildren, PRIMARY_RESOURCE_ANNOTATION, PRIMARY_RESOURCE_TYPE_ANNOTATION,
};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::manager::{
    ControllerContext, Manager, ManagerConfig, Operator, OperatorError, Scope,
};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use bosun_testenv::{shared, test_namespace};
use common::*;
use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

fn widget_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("test.bosun.dev", "v1", "Widget")
}

fn configmap_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "ConfigMap")
}

async fn setup() -> (Client, String, Discovery, ApiResource) {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    install_crd(&client).await.expect("crd");
    let ns = test_namespace(&client, "dyn").await.expect("namespace");
    let discovery = Discovery::new(client.clone());
    let resolved = discovery.resolve(&widget_gvk()).await.expect("discovered");
    assert!(resolved.namespaced);
    assert_eq!(resolved.resource.plural, "widgets");
    (client, ns, discovery, resolved.resource)
}

fn dynamic_widget(ar: &ApiResource, ns: &str, name: &str, value: &str) -> DynamicObject {
    let mut o = DynamicObject::new(name, ar).within(ns);
    o.data = json!({"spec": {"value": value}});
    o
}

/// The Widgets of `ns`, and a Widget "owner" created there.
async fn owner_widget(
    client: &Client,
    ns: &str,
    ar: &ApiResource,
) -> (Api<DynamicObject>, DynamicObject) {
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let owner = widgets
        .create(
            &PostParams::default(),
            &dynamic_widget(ar, ns, "owner", "x"),
        )
        .await
        .expect("owner");
    (widgets, owner)
}

#[tokio::test]
async fn apply_and_status_skip_no_op_writes_for_a_dynamic_kind() {
    let (client, ns, _, ar) = setup().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let applier = Applier::new("bosun-dyn-test");
    let desired = dynamic_widget(&ar, &ns, "w1", "a");
    assert_eq!(
        applier
            .apply_with(&api, &ar, &desired, None)
            .await
            .expect("apply"),
        Outcome::Applied
    );
    let live = api.get("w1").await.expect("created");
    assert_eq!(live.data["spec"]["value"], "a");
    assert_eq!(
        applier
            .apply_with(&api, &ar, &desired, Some(live.meta()))
            .await
            .expect("apply"),
        Outcome::Unchanged,
        "the live object holds the desired state: no request"
    );
    let changed = dynamic_widget(&ar, &ns, "w1", "b");
    assert_eq!(
        applier
            .apply_with(&api, &ar, &changed, Some(live.meta()))
            .await
            .expect("apply"),
        Outcome::Applied
    );
    assert_eq!(api.get("w1").await.expect("get").data["spec"]["value"], "b");

    let writer = StatusWriter::new("bosun-dyn-test");
    let live = api.get("w1").await.expect("get");
    let status = json!({"observedGeneration": live.metadata.generation, "value": "b"});
    assert!(writer
        .write_if_changed_with(&api, &ar, &live, None, &status)
        .await
        .expect("status"));
    let live = api.get("w1").await.expect("get");
    assert_eq!(live.data["status"], status);
    assert!(
        !writer
            .write_if_changed_with(&api, &ar, &live, live.data.get("status"), &status)
            .await
            .expect("status"),
        "unchanged status: no request"
    );
}

/// A cluster-scoped owner (here a ClusterRole standing for a cluster-scoped custom resource)
/// of a namespaced child: the child's change must name the owner without the child's
/// namespace, or the request names no object and nothing is reconciled (review M2).
#[tokio::test]
async fn a_namespaced_child_triggers_its_cluster_scoped_owner() {
    let (client, ns, discovery, _) = setup().await;
    let role_gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let resolved = discovery.resolve(&role_gvk).await.expect("served");
    assert!(!resolved.namespaced);
    let ar = resolved.resource;
    let roles: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut role = DynamicObject::new(&format!("{ns}-boss"), &ar);
    role.data = json!({"rules": []});
    let owner = roles
        .create(&PostParams::default(), &role)
        .await
        .expect("owner");
    let (children, mut trigger) = DynamicChildren::<DynamicObject>::new(
        client.clone(),
        discovery.clone(),
        Some(&ns),
        "app.kubernetes.io/managed-by=bosun-dyn-cluster",
        ar.clone(),
    );
    children.set_primary_namespaced(false);
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "child", "namespace": ns,
                     "labels": {"app.kubernetes.io/managed-by": "bosun-dyn-cluster"},
                     "ownerReferences": [{"apiVersion": "rbac.authorization.k8s.io/v1",
                                          "kind": "ClusterRole", "name": owner.name_any(),
                                          "uid": owner.uid().expect("uid")}]},
        "data": {"k": "v"}
    }))
    .expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("child");
    children.cache(&configmap_gvk()).await.expect("cache");
    let got = tokio::time::timeout(Duration::from_secs(20), next_ref(&mut trigger))
        .await
        .expect("a trigger")
        .expect("stream open");
    assert_eq!(
        (got.name.as_str(), got.namespace.as_deref()),
        (owner.name_any().as_str(), None),
        "the owner is named as the cluster-scoped object it is"
    );
    roles
        .delete(&owner.name_any(), &Default::default())
        .await
        .expect("cleanup");
}

/// One controller for a cluster-scoped primary watched in a list of namespaces (review M3)
/// sees its children in each of them, and nothing from a namespace not in the list.
#[tokio::test]
async fn children_are_watched_in_each_listed_namespace_and_no_other() {
    let (client, ns, discovery, _) = setup().await;
    let second = test_namespace(&client, "dyn2").await.expect("namespace");
    let unwatched = test_namespace(&client, "dyn3").await.expect("namespace");
    let role_gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let ar = discovery.resolve(&role_gvk).await.expect("served").resource;
    let label = "app.kubernetes.io/managed-by=bosun-dyn-several";
    let (children, mut trigger) = DynamicChildren::<DynamicObject>::new_with(
        client.clone(),
        discovery.clone(),
        &[ns.clone(), second.clone()],
        label,
        ar.clone(),
        None,
        None,
    );
    children.set_primary_namespaced(false);
    // Real owners: the garbage collector deletes children whose owner does not exist.
    let roles: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    for (i, n) in [&ns, &second, &unwatched].into_iter().enumerate() {
        let mut role = DynamicObject::new(&format!("{ns}-owner{i}"), &ar);
        role.data = json!({"rules": []});
        let owner = roles
            .create(&PostParams::default(), &role)
            .await
            .expect("owner");
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), n);
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "child", "namespace": n,
                         "labels": {"app.kubernetes.io/managed-by": "bosun-dyn-several"},
                         "ownerReferences": [{"apiVersion": "rbac.authorization.k8s.io/v1",
                                              "kind": "ClusterRole", "name": owner.name_any(),
                                              "uid": owner.uid().expect("uid")}]},
        }))
        .expect("configmap");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("child");
    }
    let cache = children.cache(&configmap_gvk()).await.expect("cache");
    assert!(cache.meta(&ns, "child").is_some());
    assert!(cache.meta(&second, "child").is_some());
    assert!(cache.meta(&unwatched, "child").is_none());
    assert_eq!(cache.len(), 2);
    let mut owners = Vec::new();
    while owners.len() < 2 {
        let got = tokio::time::timeout(Duration::from_secs(20), next_ref(&mut trigger))
            .await
            .expect("a trigger")
            .expect("stream open");
        owners.push(got.name);
    }
    owners.sort();
    assert_eq!(owners, [format!("{ns}-owner0"), format!("{ns}-owner1")]);
    for i in 0..3 {
        roles
            .delete(&format!("{ns}-owner{i}"), &Default::default())
            .await
            .expect("cleanup");
    }
}

#[tokio::test]
async fn dynamic_children_are_cached_and_trigger_their_owner() {
    let (client, ns, discovery, ar) = setup().await;
    let (_, owner) = owner_widget(&client, &ns, &ar).await;
    let (children, mut trigger) = DynamicChildren::<DynamicObject>::new(
        client.clone(),
        discovery.clone(),
        Some(&ns),
        "app.kubernetes.io/managed-by=bosun-dyn-test",
        ar.clone(),
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner_ref = owner.controller_owner_ref(&ar).expect("owner ref");
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "child", "namespace": ns,
                     "labels": {"app.kubernetes.io/managed-by": "bosun-dyn-test"},
                     "ownerReferences": [owner_ref]},
        "data": {"k": "v"}
    }))
    .expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("child");

    let cache = children.cache(&configmap_gvk()).await.expect("cache");
    assert!(
        cache.meta(&ns, "child").is_some(),
        "synced cache holds the child"
    );
    let got = tokio::time::timeout(Duration::from_secs(20), next_ref(&mut trigger))
        .await
        .expect("a trigger")
        .expect("stream open");
    assert_eq!(
        (got.name.as_str(), got.namespace.as_deref()),
        ("owner", Some(ns.as_str()))
    );

    // A cluster-scoped child names its primary by annotation.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    let role_name = format!("{ns}-child");
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": role_name,
                     "labels": {"app.kubernetes.io/managed-by": "bosun-dyn-test"},
                     "annotations": {PRIMARY_RESOURCE_ANNOTATION: format!("{ns}/owner"),
                                     PRIMARY_RESOURCE_TYPE_ANNOTATION: "Widget.test.bosun.dev"}},
        "rules": []
    }))
    .expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let role_gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let role_cache = children.cache(&role_gvk).await.expect("cache");
    assert!(role_cache.meta("", &role_name).is_some());
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match next_ref(&mut trigger).await {
                Some(r) if r.name == "owner" && r.namespace.as_deref() == Some(ns.as_str()) => {
                    return r
                }
                Some(_) => continue,
                None => panic!("trigger stream ended"),
            }
        }
    })
    .await
    .expect("the annotated cluster-scoped child triggered its owner");
    assert_eq!(got.name, "owner");
    let mut kinds = children.kinds().await;
    kinds.sort_by(|a, b| a.kind.cmp(&b.kind));
    assert_eq!(kinds, vec![role_gvk, configmap_gvk()]);
    roles
        .delete(&role_name, &Default::default())
        .await
        .expect("cleanup");
}

/// Children cached with slimmed metadata (labels dropped, as the Helm flavour keeps them):
/// another manager's edit of a label the operator wrote changes nothing the cache keeps
/// (a custom resource's generation ignores metadata), yet it is drift the owner must repair,
/// so it must trigger the owner (through the owned-field fingerprint).
#[tokio::test]
async fn an_edit_of_a_slimmed_owned_label_still_triggers_the_owner() {
    let (client, ns, discovery, ar) = setup().await;
    let (widgets, owner) = owner_widget(&client, &ns, &ar).await;
    let applier = Applier::new("bosun-dyn-slim");
    let (children, mut trigger) = DynamicChildren::<DynamicObject>::new_with(
        client.clone(),
        discovery.clone(),
        std::slice::from_ref(&ns),
        "app.kubernetes.io/managed-by=bosun-dyn-slim",
        ar.clone(),
        None,
        Some(applier.clone()),
    );
    children.set_creates_trigger(false);
    children.set_slim_meta(|m| {
        m.labels = None;
        m.annotations = None;
    });
    let mut child = dynamic_widget(&ar, &ns, "child", "y");
    child.metadata.labels = Some(
        [
            (
                "app.kubernetes.io/managed-by".to_string(),
                "bosun-dyn-slim".to_string(),
            ),
            ("tier".to_string(), "a".to_string()),
        ]
        .into(),
    );
    child.metadata.owner_references = Some(vec![owner.controller_owner_ref(&ar).expect("ref")]);
    applier
        .apply_with(&widgets, &ar, &child, None)
        .await
        .expect("child");
    let cache = children.cache(&widget_gvk()).await.expect("cache");
    let cached = cache.meta(&ns, "child").expect("cached");
    assert_eq!(cached.labels, None, "the cache keeps the slimmed metadata");
    let generation = cached.generation;

    widgets
        .patch(
            "child",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "b"}}})),
        )
        .await
        .expect("someone else's edit");
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match next_ref(&mut trigger).await {
                Some(r) if r.name == "owner" => return r,
                Some(_) => continue,
                None => panic!("trigger stream ended"),
            }
        }
    })
    .await
    .expect("the edit of an owned label triggered the owner");
    assert_eq!(got.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(
        cache.meta(&ns, "child").and_then(|m| m.generation),
        generation,
        "nothing the cache keeps moved"
    );
}

// --- a whole operator over a DynamicObject kind ---

struct DynCtx {
    client: Client,
    ar: ApiResource,
    applier: Applier,
    status: StatusWriter,
    children: DynamicChildren<DynamicObject>,
}

#[derive(Debug, thiserror::Error)]
enum DynError {
    #[error("api: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Children(#[from] bosun_runtime::dynamic::ChildCacheError),
}

impl Categorized for DynError {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Api
    }
}

async fn reconcile_dynamic(w: Arc<DynamicObject>, ctx: Arc<DynCtx>) -> Result<Action, DynError> {
    let ns = w.namespace().unwrap_or_default();
    let cm_ar = ApiResource::from_gvk(&configmap_gvk());
    let cache = ctx.children.cache(&configmap_gvk()).await?;
    let mut cm = DynamicObject::new(&format!("{}-w", w.name_any()), &cm_ar).within(&ns);
    cm.metadata.labels = Some(
        [(
            "app.kubernetes.io/managed-by".to_string(),
            "bosun-dyn-op".to_string(),
        )]
        .into(),
    );
    cm.metadata.owner_references = w.controller_owner_ref(&ctx.ar).map(|o| vec![o]);
    cm.data = json!({"data": {"value": w.data["spec"]["value"]}});
    let cms: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &cm_ar);
    ctx.applier
        .apply_with(&cms, &cm_ar, &cm, cache.meta(&ns, &cm.name_any()).as_ref())
        .await?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ctx.ar);
    let status =
        json!({"observedGeneration": w.metadata.generation, "value": w.data["spec"]["value"]});
    ctx.status
        .write_if_changed_with(&api, &ctx.ar, w.as_ref(), w.data.get("status"), &status)
        .await?;
    Ok(Action::await_change())
}

struct DynOperator {
    ar: ApiResource,
    discovery: Discovery,
    /// Wire the child caches into the controller ([`DynamicChildren::wired`]), and show
    /// them to the test.
    wired: Option<Arc<std::sync::Mutex<Option<DynamicChildren<DynamicObject>>>>>,
}

impl Operator for DynOperator {
    fn name(&self) -> &str {
        "dynamic-widget"
    }
    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![]
    }
    fn rbac(&self) -> Rbac {
        Rbac::default()
    }
    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let ar = self.ar.clone();
        let discovery = self.discovery.clone();
        let wired = self.wired.clone();
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(
                |ns| {
                    let api: Api<DynamicObject> = match ns {
                        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                        None => Api::all_with(client.clone(), &ar),
                    };
                    let (children, trigger) = DynamicChildren::new(
                        client.clone(),
                        discovery.clone(),
                        ns,
                        "app.kubernetes.io/managed-by=bosun-dyn-op",
                        ar.clone(),
                    );
                    let late = wired.as_ref().map(|slot| {
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(children.clone());
                        children.wired()
                    });
                    let context = Arc::new(DynCtx {
                        client: client.clone(),
                        ar: ar.clone(),
                        applier: Applier::new("bosun-dyn-op"),
                        status: StatusWriter::new("bosun-dyn-op"),
                        children,
                    });
                    let wiring =
                        Wiring::new(Primary::watch(api, ar.clone(), Default::default()), context)
                            .trigger(trigger);
                    match late {
                        Some(late) => wiring.late_children(late),
                        None => wiring,
                    }
                },
                reconcile_dynamic,
            )
            .await;
            Ok(())
        })
    }
}

#[tokio::test]
async fn a_dynamic_operator_converges_and_repairs_a_deleted_child() {
    let (client, ns, discovery, ar) = setup().await;
    let manager = Manager::new(
        client.clone(),
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.clone()]),
            ..Default::default()
        },
    )
    .with_operator(Arc::new(DynOperator {
        ar: ar.clone(),
        discovery,
        wired: None,
    }));
    let (tx, task) = run_until_stopped(manager);
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    widgets
        .create(
            &PostParams::default(),
            &dynamic_widget(&ar, &ns, "d1", "hello"),
        )
        .await
        .expect("widget");
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let value = |cms: Api<k8s_openapi::api::core::v1::ConfigMap>| async move {
        cms.get_opt("d1-w")
            .await
            .ok()
            .flatten()
            .and_then(|c| c.data?.get("value").cloned())
    };
    assert_eq!(
        eventually(30, || async { value(cms.clone()).await })
            .await
            .as_deref(),
        Some("hello")
    );
    let st = eventually(30, || async {
        let w = widgets.get("d1").await.ok()?;
        (w.data["status"]["value"] == "hello").then_some(w)
    })
    .await;
    assert!(st.is_some(), "status written through the dynamic type");

    // A spec change reaches the child; a deleted child comes back.
    widgets
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "again"}})),
        )
        .await
        .expect("patch");
    assert_eq!(
        eventually(30, || async {
            value(cms.clone()).await.filter(|v| v == "again")
        })
        .await
        .as_deref(),
        Some("again")
    );
    cms.delete("d1-w", &Default::default())
        .await
        .expect("delete child");
    assert_eq!(
        eventually(30, || async {
            let c = cms.get_opt("d1-w").await.ok().flatten()?;
            c.metadata.deletion_timestamp.is_none().then_some(())?;
            c.data?.get("value").cloned()
        })
        .await
        .as_deref(),
        Some("again"),
        "the child's deletion triggered its owner"
    );
    let _ = tx.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("manager stops")
        .expect("task");
    assert!(stopped.is_ok(), "manager stopped cleanly: {stopped:?}");
}

/// Sharded, a kind whose cache starts on a reconcile's first use (after the controller
/// started) watches this member's children and the unlabelled ones, and is counted: the
/// applier sees an unlabelled child it must not create again, never another member's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_started_by_a_sharded_reconcile_caches_its_members_share() {
    use bosun_runtime::client::{client_fenced, client_with, Pool};
    use bosun_runtime::fence::Fence;
    use bosun_runtime::leader::LeaderConfig;
    use bosun_runtime::shard::{Labels, ShardConfig};
    let (client, ns, discovery, ar) = setup().await;
    let cp = shared().await.expect("control plane");
    let config = cp.config().await.expect("config");
    const MANAGED: &str = "app.kubernetes.io/managed-by";
    let shard = Labels::for_operator("dynamic-widget").shard;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    // Before the replica starts: a child of another member, an unlabelled one (made before
    // sharding), and the child d1's reconcile writes, unlabelled (it must be seen, else the
    // applier refuses to create it again).
    for (name, member) in [("theirs", Some("other")), ("bare", None), ("d1-w", None)] {
        let mut labels =
            std::collections::BTreeMap::from([(MANAGED.to_string(), "bosun-dyn-op".to_string())]);
        if let Some(m) = member {
            labels.insert(shard.clone(), m.to_string());
        }
        let cm = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::core::ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("child");
    }
    let fence = Fence::new();
    let operators =
        client_fenced(config.clone(), None, Pool::default(), Some(&fence)).expect("client");
    let sharder_fence = Fence::new();
    let sharder =
        client_fenced(config.clone(), None, Pool::default(), Some(&sharder_fence)).expect("client");
    let slot = Arc::new(std::sync::Mutex::new(None));
    let manager = Manager::new(
        operators,
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.clone()]),
            ..Default::default()
        },
    )
    .with_leader_client(client_with(config, None, Pool::default()).expect("client"))
    .with_fence(fence)
    .with_sharding(
        ShardConfig::new(LeaderConfig::new("dynshard", &ns, "m1")).expect("shard"),
        sharder,
        sharder_fence,
    )
    .with_operator(Arc::new(DynOperator {
        ar: ar.clone(),
        discovery,
        wired: Some(slot.clone()),
    }));
    let (tx, task) = run_until_stopped(manager);
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    widgets
        .create(&PostParams::default(), &dynamic_widget(&ar, &ns, "d1", "v"))
        .await
        .expect("widget");
    // Reconciled by m1: its status is written, its child carries m1's label.
    let labelled = eventually(60, || async {
        let w = widgets.get("d1").await.ok()?;
        (w.data["status"]["value"] == "v").then_some(())?;
        let c = cms.get("d1-w").await.ok()?;
        (c.labels().get(&shard).map(String::as_str) == Some("m1")).then_some(())
    })
    .await;
    assert!(
        labelled.is_some(),
        "d1 reconciled by m1, its child labelled m1"
    );
    let children = slot
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .expect("the operator's child caches");
    assert_eq!(
        children.kinds().await,
        [configmap_gvk()],
        "started by the reconcile"
    );
    let cache = children.cache(&configmap_gvk()).await.expect("cache");
    // The cache reads the state it shows: wait for m1's write of d1-w to reach it.
    let seen = eventually(30, || async {
        let m = cache.meta(&ns, "d1-w")?;
        let mine = m.labels.as_ref()?.get(&shard).map(String::as_str) == Some("m1");
        (mine && cache.len() == 2).then_some(())
    })
    .await;
    assert!(
        seen.is_some(),
        "m1's child in m1's cache, {} cached",
        cache.len()
    );
    assert!(
        cache.meta(&ns, "bare").is_some(),
        "an unlabelled child is cached"
    );
    assert!(
        cache.meta(&ns, "theirs").is_none(),
        "another member's child is not cached"
    );
    assert_eq!(cache.len(), 2, "its share and the unlabelled ones, no more");
    let _ = tx.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("manager stops")
        .expect("task");
    assert!(stopped.is_ok(), "manager stopped cleanly: {stopped:?}");
}

/// The next trigger's object (where it came from aside).
async fn next_ref(
    trigger: &mut bosun_runtime::controller::Trigger<DynamicObject>,
) -> Option<kube::runtime::reflector::ObjectRef<DynamicObject>> {
    trigger.next().await.map(|(r, _)| r)
}
