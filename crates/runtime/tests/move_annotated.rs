//! A namespaced child linked to its owner by operator-sdk's annotations only, in another
//! namespace than its owner (a Helm or Ansible role's Secret or RoleBinding in a shared
//! namespace), follows its owner on a move, on the real API server.
//!
//! The operator creates each widget's Secret once, in a namespace of its own, annotated with
//! `operator-sdk/primary-resource` (no owner reference can name an owner in another
//! namespace), then applies the widget's ConfigMap (naming the replica) beside it. Its child
//! caches watch every namespace. A Secret that exists unseen (still labelled with the member
//! the widget left) fails the reconcile with 409, as the Helm applier does.
//! * A hand-off (m2 joins, m1 hands about half the widgets over): the Secrets of the widgets
//!   handed over carry m2's label, and m2 reconciles those widgets.
//! * A takeover (the widget's member killed with `kill -9`, the survivor never having started
//!   the Secret kind): the sharder relabels the Secret, from the dead member's record of child
//!   kinds, before it writes the widget's new label.
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_runtime::apply::Applier;
use bosun_runtime::dynamic::{ChildCacheError, Discovery, DynamicChildren};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::manager::{ControllerContext, Manager, Operator, OperatorError};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::{Primary, Wiring};
use bosun_testenv::{shared, test_namespace};
use common::*;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};

const LEASE: &str = "annotated";
const KIND_LABEL: &str = "bosun-test/annotated";
const OPERATOR: &str = "follows-annotations";
const SHARD: &str = "shard.bosun.dev/follows-annotations";
/// The field manager of the operator's writes.
const MANAGER: &str = "bosun-test-annotated";
/// What a member process prints when it starts a reconcile: `<member> <ns>/<widget>`.
const SAID: &str = "ANNOTATED-RECONCILED ";
/// The variable that makes this test binary a member process.
const MEMBER: &str = "BOSUN_TEST_ANNOTATED_MEMBER";
/// The annotation on each widget naming the namespace its Secret goes to.
const SHARED_NS: &str = "bosun-test/shared-namespace";

struct FollowsAnnotations {
    identity: String,
}

struct Ctx {
    client: Client,
    identity: String,
    applier: Applier,
    children: DynamicChildren<Widget>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("api: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Children(#[from] ChildCacheError),
    #[error("the widget names no shared namespace")]
    NoSharedNamespace,
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Api
    }
}

fn secret_name(ns: &str, widget: &str) -> String {
    format!("{ns}-{widget}")
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = w.namespace().unwrap_or_default();
    println!("{SAID}{} {ns}/{}", ctx.identity, w.name_any());
    let shared_ns = w
        .annotations()
        .get(SHARED_NS)
        .cloned()
        .ok_or(Error::NoSharedNamespace)?;
    let secrets = ctx
        .children
        .cache(&GroupVersionKind::gvk("", "v1", "Secret"))
        .await?;
    // Created once, never applied over (a Helm hook that persists, an Ansible task that
    // writes once): one that exists unseen fails the reconcile with 409.
    let name = secret_name(&ns, &w.name_any());
    if secrets.meta(&shared_ns, &name).is_none() {
        let secret = Secret {
            metadata: annotation_linked(&w, name, Some(shared_ns.clone()), KIND_LABEL),
            string_data: Some([("owner".to_string(), w.name_any())].into()),
            ..Default::default()
        };
        create_as(
            &Api::namespaced(ctx.client.clone(), &shared_ns),
            MANAGER,
            &secret,
        )
        .await?;
    }
    let cache = ctx
        .children
        .cache(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await?;
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-w", w.name_any())),
            namespace: Some(ns.clone()),
            labels: Some([(KIND_LABEL.to_string(), "yes".to_string())].into()),
            owner_references: w.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some([("reconciledBy".to_string(), ctx.identity.clone())].into()),
        ..Default::default()
    };
    ctx.applier
        .apply(
            &Api::namespaced(ctx.client.clone(), &ns),
            &cm,
            cache.meta(&ns, &cm.name_any()).as_ref(),
        )
        .await?;
    Ok(Action::await_change())
}

impl Operator for FollowsAnnotations {
    fn name(&self) -> &str {
        OPERATOR
    }
    fn crds(&self) -> Vec<CustomResourceDefinition> {
        Vec::new()
    }
    fn rbac(&self) -> Rbac {
        Rbac::default()
    }
    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let identity = self.identity.clone();
        Box::pin(async move {
            let client = ctx.client.clone();
            let discovery = Discovery::new(client.clone());
            ctx.run_controller(
                |ns| {
                    // The child caches watch every namespace: a child may be in another
                    // namespace than its owner.
                    let (children, trigger) = DynamicChildren::new(
                        client.clone(),
                        discovery.clone(),
                        None,
                        &format!("{KIND_LABEL}=yes"),
                        (),
                    );
                    let late = children.wired();
                    let context = Arc::new(Ctx {
                        client: client.clone(),
                        identity: identity.clone(),
                        applier: Applier::new(MANAGER),
                        children,
                    });
                    let api = bosun_runtime::cache::scoped_api(client.clone(), ns);
                    Wiring::new(Primary::watch(api, (), Default::default()), context)
                        .trigger(trigger)
                        .late_children(late)
                },
                reconcile,
            )
            .await;
            Ok(())
        })
    }
}

/// A sharded member, as `bosun run --sharding` builds one.
fn member_manager(config: &kube::Config, ns: &str, identity: &str) -> Manager {
    ShardedMember::new(config, LEASE, ns, identity)
        .manager()
        .expect("member")
        .with_operator(Arc::new(FollowsAnnotations {
            identity: identity.into(),
        }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "not a test on its own: a member that the tests start and stop"]
async fn annotated_member_process() {
    let (config, ns, identity, _) = replica_spec(MEMBER).await;
    member_manager(&config, &ns, &identity)
        .run(bosun_runtime::manager::shutdown_signal(), |_| {})
        .await
        .expect("manager");
}

/// A sharded member in a process of its own, and the reconciles it reported.
fn member_process(kubeconfig: &std::path::Path, ns: &str, identity: &str) -> Reporting {
    Reporting::start(
        "annotated_member_process",
        MEMBER,
        kubeconfig,
        ns,
        identity,
        SAID,
    )
}

/// Two namespaces: the widgets', and the one their Secrets go to.
async fn namespaces(admin: &Client, name: &str) -> (String, String) {
    install_crd(admin).await.expect("crd");
    let ns = test_namespace(admin, name).await.expect("ns");
    let shared = test_namespace(admin, &format!("{name}-shared"))
        .await
        .expect("shared ns");
    (ns, shared)
}

/// A widget whose Secret goes to the `shared` namespace.
fn shared_widget(ns: &str, shared: &str, name: &str) -> Widget {
    let mut w = widget(ns, name, "x", 0);
    w.metadata.annotations = Some([(SHARED_NS.to_string(), shared.to_string())].into());
    w
}

async fn create_widgets(admin: &Client, ns: &str, shared: &str, names: &[String]) {
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), ns);
    for n in names {
        widgets
            .create(&PostParams::default(), &shared_widget(ns, shared, n))
            .await
            .expect("create");
    }
}

/// [`followed`], each widget's annotation-linked child its Secret in the shared namespace.
async fn secrets_followed(
    admin: &Client,
    (ns, shared): (&str, &str),
    names: &[String],
) -> Option<BTreeMap<String, String>> {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), shared);
    followed(admin, ns, SHARD, names, &secrets, |n| secret_name(ns, n)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_child_in_another_namespace_follows_its_owner_on_a_hand_off() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let (ns, shared_ns) = namespaces(&admin, "annotated-handoff").await;
    // At least one widget of each member once m2 joins.
    let names = create_widgets_spread(
        &Api::namespaced(admin.clone(), &ns),
        10,
        &["m1", "m2"],
        |n| shared_widget(&ns, &shared_ns, &n),
        "h",
    )
    .await;
    let kubeconfig = cp.kubeconfig().to_path_buf();
    let m1 = member_process(&kubeconfig, &ns, "m1");
    eventually(90, || secrets_followed(&admin, (&ns, &shared_ns), &names))
        .await
        .expect("m1 alone reconciles every widget");

    // m2 joins: about half the widgets are handed over by m1, their children relabelled
    // first — the Secret too, which m1's Secret cache holds and no owner reference links.
    let m2 = member_process(&kubeconfig, &ns, "m2");
    let on = eventually(120, || async {
        let on = secrets_followed(&admin, (&ns, &shared_ns), &names).await?;
        on.values().any(|m| m == "m2").then_some(on)
    })
    .await
    .expect("widgets handed over to m2 are reconciled by it, their ConfigMap and their Secret in the shared namespace relabelled (m2's reconcile refused, 409: a Secret still labelled m1)");
    assert!(on.values().any(|m| m == "m1"), "{on:?}");
    // Relabelled under the field manager that owned the label: it stays the operator's.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &shared_ns);
    for n in on.iter().filter(|(_, m)| *m == "m2").map(|(n, _)| n) {
        let s = secrets.get(&secret_name(&ns, n)).await.expect("secret");
        let owner = s
            .metadata
            .managed_fields
            .as_deref()
            .and_then(|e| bosun_runtime::owned::label_owner(e, SHARD))
            .map(str::to_string);
        assert_eq!(
            owner.as_deref(),
            Some(MANAGER),
            "{n}'s Secret: its shard label's manager after the hand-off"
        );
    }
    m1.stop().await;
    m2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_child_in_another_namespace_follows_its_owner_on_a_takeover() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let (ns, shared_ns) = namespaces(&admin, "annotated-takeover").await;
    let kubeconfig = cp.kubeconfig().to_path_buf();
    let mut members = BTreeMap::from([
        ("m1".to_string(), member_process(&kubeconfig, &ns, "m1")),
        ("m2".to_string(), member_process(&kubeconfig, &ns, "m2")),
    ]);
    // Both members live before the widget exists: it is placed once, on one of them, and
    // only that one starts the Secret kind.
    for m in ["m1", "m2"] {
        let lease = format!("{LEASE}-member-{m}");
        eventually(60, || async {
            (lease_holder(&admin, &ns, &lease).await? == m).then_some(())
        })
        .await
        .expect("both members hold their Lease");
    }
    let names = vec!["t1".to_string()];
    create_widgets(&admin, &ns, &shared_ns, &names).await;
    let first = eventually(90, || secrets_followed(&admin, (&ns, &shared_ns), &names))
        .await
        .expect("the widget placed and reconciled by its member, its children labelled with it")
        .remove("t1")
        .expect("t1");
    let survivor = members
        .keys()
        .find(|m| **m != first)
        .expect("a survivor")
        .clone();
    // The dead member's record names the Secret kind (written with its next renewal).
    eventually(30, || async {
        let lease = format!("{LEASE}-member-{first}");
        let text = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(admin.clone(), &ns)
            .get_opt(&lease)
            .await
            .ok()
            .flatten()?
            .metadata
            .annotations?
            .get(bosun_runtime::shard::record::CHILD_KINDS_ANNOTATION)
            .cloned()?;
        text.contains("v1/Secret").then_some(())
    })
    .await
    .expect("the widget's member records the Secret kind on its Lease");

    let on_survivor = format!("{SHARD}={survivor}");
    let widget_moved = first_labelled(
        Api::<Widget>::namespaced(admin.clone(), &ns),
        "t1",
        &on_survivor,
    );
    let secret_moved = first_labelled(
        Api::<Secret>::namespaced(admin.clone(), &shared_ns),
        &secret_name(&ns, "t1"),
        &on_survivor,
    );
    let mut dead = members.remove(&first).expect("member");
    signal(dead.child.id().expect("pid"), "-9");
    let _ = dead.child.wait().await;
    let alive = members.remove(&survivor).expect("the survivor");
    assert!(
        alive
            .said
            .position(&format!("{survivor} {ns}/t1"))
            .is_none(),
        "the widget moved before the test could stop its only member: inconclusive"
    );
    eventually(120, || async {
        let on = secrets_followed(&admin, (&ns, &shared_ns), &names).await?;
        (on.get("t1")? == &survivor).then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!("the survivor reconciles the widget, its Secret in the shared namespace relabelled (its reconcile refused, 409: the Secret still labelled {first})")
    });
    let mut at = Vec::new();
    for moved in [widget_moved, secret_moved] {
        let rv = tokio::time::timeout(std::time::Duration::from_secs(30), moved)
            .await
            .expect("each write seen by its watch")
            .expect("watch task");
        at.push(rv.expect("a numeric resourceVersion"));
    }
    assert!(
        at[1] < at[0],
        "the Secret (at {}) relabelled before the widget (at {})",
        at[1],
        at[0]
    );
    alive.stop().await;
}
