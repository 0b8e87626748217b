//! The record of child kinds on the leader Lease, on the real API server. Replica a leads
//! and meets a child kind only while reconciling (a `DynamicChildren` cache started by the
//! reconcile, as the Helm and Ansible flavours start theirs); a writes it on the Lease with
//! its next renewal. Replica b, a standby of another identity, reads it from the Lease it
//! campaigns for and lists that kind before it leads: after a stops, b's first reconcile
//! lists nothing. A record someone edited into garbage is ignored with a warning — the
//! replicas go on, and the leader's next renewal writes its record over it.
//!
//! Sharded, the same operator on two members, each a process of its own (this test binary
//! started again on an ignored test): the member that reconciles the one widget is the only
//! one to start its child kinds; it is then killed (`kill -9`: no Lease released). The
//! sharder relabels the widget's children of the kinds the dead member recorded — the
//! ConfigMap, and a ClusterRole linked to the widget by operator-sdk's annotations only —
//! before it writes the widget's new label (so the survivor finds them in place), and the
//! survivor reconciles the widget. Without the record the children are relabelled only after
//! the widget, once the survivor's own reconcile (refused, 409) has started their kinds.
mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_runtime::fence::Fence;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Operator};
use bosun_runtime::shard::record::{self, CHILD_KINDS_ANNOTATION};
use bosun_runtime::Scope;
use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};

const LEASE: &str = "record";
const OPERATOR: &str = "meets-its-kind-late";
const KIND_LABEL: &str = "bosun-test/record";
/// The field manager of the operator's writes.
const MANAGER: &str = "bosun-test-record";
/// What a member process prints when it starts a reconcile: `<member> <ns>/<widget>`.
const SAID: &str = "RECORD-RECONCILED ";
/// The variable that makes this test binary a member process (see [`record_member_process`]).
const MEMBER: &str = "BOSUN_TEST_RECORD_MEMBER";

/// An operator whose child kinds are met by its reconcile: each widget's ClusterRole, naming
/// the widget by operator-sdk's annotations, then its ConfigMap (naming the replica: written
/// only once the ClusterRole is in place), against caches the first reconcile starts.
fn meets_its_kind_late(identity: &str) -> Arc<dyn Operator> {
    run_time_children(OPERATOR, KIND_LABEL, MANAGER, identity, reconcile)
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<RunTimeCtx>) -> Result<Action, RunTimeError> {
    let ns = w.namespace().unwrap_or_default();
    // Read by the takeover test from its member processes.
    println!("{SAID}{} {ns}/{}", ctx.identity, w.name_any());
    let roles = ctx
        .children
        .cache(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
        ))
        .await?;
    // Created once, never applied over (as a Helm hook that persists, or an Ansible task
    // that writes once): a ClusterRole the cache does not show is created, and one that
    // exists unseen (labelled with another member) fails the reconcile with 409.
    let name = format!("{ns}-{}", w.name_any());
    if roles.meta("", &name).is_none() {
        let role = ClusterRole {
            metadata: annotation_linked(&w, name, None, KIND_LABEL),
            ..Default::default()
        };
        create_as(&Api::all(ctx.client.clone()), MANAGER, &role).await?;
    }
    ctx.apply_configmap(&w).await?;
    Ok(Action::await_change())
}

/// A replica in this process under `identity`, its ConfigMap LISTs counted in `lists`.
fn replica(
    config: &kube::Config,
    ns: &str,
    identity: &str,
    lists: &Arc<AtomicUsize>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ManagerError>>,
) {
    let fence = Fence::new();
    let observe = layers::Observe::counting_lists(&["configmaps"], lists);
    let client = fenced_client(config.clone(), &fence, &observe);
    let leader_client = Client::try_from(config.clone()).expect("leader client");
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.into()]),
        leader: Some(LeaderConfig::new(LEASE, ns, identity)),
        ..Default::default()
    };
    run_until_stopped(
        Manager::new(client, cfg)
            .with_leader_client(leader_client)
            .with_fence(fence)
            .with_operator(meets_its_kind_late(identity)),
    )
}

/// The record of child kinds on the Lease `lease`, once there is one.
async fn lease_record(client: &Client, ns: &str, lease: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(lease)
        .await
        .ok()
        .flatten()?
        .metadata
        .annotations?
        .get(CHILD_KINDS_ANNOTATION)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_warms_the_kinds_the_leader_met_at_run_time() {
    let WidgetEnv { cp, admin, ns } = widget_env("record-failover").await;
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    widgets
        .create(&PostParams::default(), &widget(&ns, "r1", "x", 0))
        .await
        .expect("create");
    let config = cp.config().await.expect("config");

    let a_lists = Arc::new(AtomicUsize::new(0));
    let (stop_a, run_a) = replica(&config, &ns, "a", &a_lists);
    eventually(30, || reconciled_by_is(&admin, &ns, "r1", "a"))
        .await
        .expect("a leads, its reconcile starting the ConfigMap cache");
    let text = eventually(30, || lease_record(&admin, &ns, LEASE))
        .await
        .expect("a's renewals carry the kinds it met");
    let kinds = record::parse(&text).expect("a valid record");
    assert!(
        kinds
            .get("meets-its-kind-late")
            .is_some_and(|k| k.contains("v1/ConfigMap")),
        "{text}"
    );

    let b_lists = Arc::new(AtomicUsize::new(0));
    let (stop_b, run_b) = replica(&config, &ns, "b", &b_lists);
    eventually(30, || async { (b_lists.load(Ordering::SeqCst) >= 1).then_some(()) })
        .await
        .expect("standby b lists the ConfigMaps the leader met, before it leads (a cold standby never does)");
    assert_eq!(
        lease_holder(&admin, &ns, LEASE).await.as_deref(),
        Some("a"),
        "b warmed as a standby"
    );
    let warmed = b_lists.load(Ordering::SeqCst);

    // Someone edits the record into garbage, then into too much: both ignored, with a
    // warning; a's next renewal writes its record over it, and nobody stops.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns);
    let oversized = serde_json::json!({
        "meets-its-kind-late": (0..=record::MAX_KINDS).map(|i| format!("v1/K{i}")).collect::<Vec<_>>()
    })
    .to_string();
    for bad in ["{not json", oversized.as_str()] {
        let patch = serde_json::json!({
            "metadata": { "annotations": BTreeMap::from([(CHILD_KINDS_ANNOTATION, bad)]) }
        });
        leases
            .patch(LEASE, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("edit the lease");
        eventually(30, || async {
            let t = lease_record(&admin, &ns, LEASE).await?;
            record::parse(&t).is_ok().then_some(())
        })
        .await
        .expect("the leader writes a valid record over the edited one");
    }
    assert!(
        !run_a.is_finished() && !run_b.is_finished(),
        "nobody crashed"
    );

    // a stops (it releases the Lease): b leads, and its first reconcile lists nothing.
    let _ = stop_a.send(());
    run_a.await.expect("join").expect("a stopped cleanly");
    widgets
        .create(&PostParams::default(), &widget(&ns, "r2", "y", 0))
        .await
        .expect("create");
    eventually(30, || reconciled_by_is(&admin, &ns, "r2", "b"))
        .await
        .expect("b leads and reconciles");
    assert_eq!(
        b_lists.load(Ordering::SeqCst),
        warmed,
        "the new leader listed ConfigMaps once it led: its cache was cold"
    );
    let _ = stop_b.send(());
    run_b.await.expect("join").expect("b stopped cleanly");
}

/// A sharded member, as `bosun run --sharding` builds one.
fn member_manager(config: &kube::Config, ns: &str, identity: &str) -> Manager {
    ShardedMember::new(config, LEASE, ns, identity)
        .manager()
        .expect("member")
        .with_operator(meets_its_kind_late(identity))
}

/// A sharded member in this process.
fn member(
    config: &kube::Config,
    ns: &str,
    identity: &str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ManagerError>>,
) {
    run_until_stopped(member_manager(config, ns, identity))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "not a test on its own: a member that the takeover test starts and kills"]
async fn record_member_process() {
    let (config, ns, identity, _) = replica_spec(MEMBER).await;
    member_manager(&config, &ns, &identity)
        .run(bosun_runtime::manager::shutdown_signal(), |_| {})
        .await
        .expect("manager");
}

/// A sharded member in a process of its own, and the reconciles it reported.
fn member_process(kubeconfig: &std::path::Path, ns: &str, identity: &str) -> Reporting {
    Reporting::start(
        "record_member_process",
        MEMBER,
        kubeconfig,
        ns,
        identity,
        SAID,
    )
}

const SHARD: &str = "shard.bosun.dev/meets-its-kind-late";

fn shard_of(labels: Option<&BTreeMap<String, String>>) -> Option<String> {
    labels?.get(SHARD).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sharder_relabels_the_kinds_only_a_dead_member_started() {
    let WidgetEnv { cp, admin, ns } = widget_env("record-takeover").await;
    // Members as processes, killed with `kill -9`: a manager aborted in this process is not a
    // dead replica — the sharder task it spawned outlives it, and when that member held the
    // sharder Lease it went on renewing it, so the survivor never placed the widget.
    let kubeconfig = cp.kubeconfig().to_path_buf();
    let mut members = BTreeMap::from([
        ("m1".to_string(), member_process(&kubeconfig, &ns, "m1")),
        ("m2".to_string(), member_process(&kubeconfig, &ns, "m2")),
    ]);
    // Both members live before the widget exists: it is placed once, on one of them.
    for m in ["m1", "m2"] {
        let lease = format!("{LEASE}-member-{m}");
        eventually(60, || async {
            (lease_holder(&admin, &ns, &lease).await? == m).then_some(())
        })
        .await
        .expect("both members hold their Lease");
    }
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    widgets
        .create(&PostParams::default(), &widget(&ns, "t1", "x", 0))
        .await
        .expect("create");
    // The widget's member reconciles it: only it starts the ConfigMap and ClusterRole kinds.
    let first = eventually(60, || async {
        let placed = shard_of(widgets.get("t1").await.ok()?.metadata.labels.as_ref())?;
        (reconciled_by(&admin, &ns, "t1").await? == placed).then_some(placed)
    })
    .await
    .expect("the widget placed and reconciled by its member");
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role = format!("{ns}-t1");
    let labelled = |who: String| {
        let roles = roles.clone();
        let role = role.clone();
        let admin = admin.clone();
        let ns = ns.clone();
        async move {
            let r = shard_of(roles.get(&role).await.ok()?.metadata.labels.as_ref())?;
            let cm: Api<ConfigMap> = Api::namespaced(admin, &ns);
            let c = shard_of(cm.get("t1-w").await.ok()?.metadata.labels.as_ref())?;
            (r == who && c == who).then_some(())
        }
    };
    eventually(30, || labelled(first.clone()))
        .await
        .expect("both children carry their owner's member");
    let record = eventually(30, || async {
        let text = lease_record(&admin, &ns, &format!("{LEASE}-member-{first}")).await?;
        let kinds = record::parse(&text).ok()?;
        let mine = kinds.get("meets-its-kind-late")?;
        (mine.contains("v1/ConfigMap") && mine.contains("rbac.authorization.k8s.io/v1/ClusterRole"))
            .then_some(text)
    })
    .await
    .expect("the widget's member records the kinds it started on its Lease");

    // Where the widget and its children first carry the survivor's name, watched from before
    // the kill.
    let survivor = members
        .keys()
        .find(|m| **m != first)
        .expect("a survivor")
        .clone();
    let on_survivor = format!("{SHARD}={survivor}");
    let widget_moved = first_labelled(widgets.clone(), "t1", &on_survivor);
    let cm_moved = first_labelled(
        Api::<ConfigMap>::namespaced(admin.clone(), &ns),
        "t1-w",
        &on_survivor,
    );
    let role_moved = first_labelled(roles.clone(), &role, &on_survivor);

    // Killed: nothing released, its Lease expires and the sharder takes it over (the
    // survivor, or, when the dead member held the sharder Lease, the survivor once that
    // Lease expired too: the widget's hash decides which, both are covered over runs).
    let sharder = lease_holder(&admin, &ns, &format!("{LEASE}-sharder")).await;
    eprintln!("killing {first}, the widget's member; the sharder Lease held by {sharder:?}");
    let mut dead = members.remove(&first).expect("member");
    signal(dead.child.id().expect("pid"), "-9");
    let _ = dead.child.wait().await;
    let alive = members.get(&survivor).expect("the survivor");
    let moved_early = alive.said.position(&format!("{survivor} {ns}/t1"));
    assert!(
        moved_early.is_none(),
        "the widget moved before the test could stop its only member: inconclusive"
    );
    eventually(90, || async {
        (reconciled_by(&admin, &ns, "t1").await? == survivor).then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!("the survivor reconciles the widget (its applier refused, 409, a child still labelled with the dead member; {first} recorded {record})")
    });
    eventually(30, || labelled(survivor.clone())).await.expect(
        "the ConfigMap and the annotation-linked ClusterRole follow their owner to the survivor",
    );
    // Children first, from the dead member's record: relabelled after their owner, they were
    // found only once the survivor's refused reconcile had started their kinds itself.
    let mut at = Vec::new();
    for moved in [widget_moved, cm_moved, role_moved] {
        let rv = tokio::time::timeout(std::time::Duration::from_secs(30), moved)
            .await
            .expect("each write seen by its watch")
            .expect("watch task");
        at.push(rv.expect("a numeric resourceVersion"));
    }
    let [widget_at, cm_at, role_at] = at[..] else {
        unreachable!()
    };
    assert!(
        cm_at < widget_at && role_at < widget_at,
        "the ConfigMap (at {cm_at}) and the ClusterRole (at {role_at}) relabelled before the \
         widget (at {widget_at}), from the kinds {first} recorded: {record}"
    );
    let _ = roles.delete(&role, &Default::default()).await;
    for (_, mut m) in members {
        signal(m.child.id().expect("pid"), "-TERM");
        let status = m.child.wait().await.expect("wait");
        assert!(status.success(), "the survivor stopped cleanly: {status}");
    }
}

/// [`followed`], each widget's annotation-linked child its ClusterRole `<ns>-<widget>`.
async fn roles_followed(
    admin: &Client,
    ns: &str,
    names: &[String],
) -> Option<BTreeMap<String, String>> {
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    followed(admin, ns, SHARD, names, &roles, |n| format!("{ns}-{n}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_annotation_linked_child_follows_its_owner_on_a_hand_off() {
    let WidgetEnv { cp, admin, ns } = widget_env("record-handoff").await;
    let config = cp.config().await.expect("config");
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    // At least one widget of each member once m2 joins.
    let names = create_widgets_spread(
        &widgets,
        10,
        &["m1", "m2"],
        |n| widget(&ns, &n, "x", 0),
        "h",
    )
    .await;
    let m1 = member(&config, &ns, "m1");
    eventually(90, || roles_followed(&admin, &ns, &names))
        .await
        .expect("m1 alone reconciles every widget");

    // m2 joins: about half the widgets are handed over by m1, their children relabelled
    // first — the ClusterRole too, which no owner reference links to its widget.
    let m2 = member(&config, &ns, "m2");
    let on = eventually(120, || async {
        let on = roles_followed(&admin, &ns, &names).await?;
        on.values().any(|m| m == "m2").then_some(on)
    })
    .await
    .expect("widgets handed over to m2 are reconciled by it, their ConfigMap and ClusterRole relabelled (m2's applier refused, 409, a ClusterRole still labelled m1)");
    assert!(on.values().any(|m| m == "m1"), "{on:?}");
    // Relabelled under the field manager that owned the label: it stays the operator's.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    for n in on.iter().filter(|(_, m)| *m == "m2").map(|(n, _)| n) {
        let role = roles.get(&format!("{ns}-{n}")).await.expect("role");
        let owner = role
            .metadata
            .managed_fields
            .as_deref()
            .and_then(|e| bosun_runtime::owned::label_owner(e, SHARD))
            .map(str::to_string);
        assert_eq!(
            owner.as_deref(),
            Some(MANAGER),
            "{n}'s ClusterRole: its shard label's manager after the hand-off"
        );
    }
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    for n in &names {
        let _ = roles
            .delete(&format!("{ns}-{n}"), &Default::default())
            .await;
    }
    for (stop, run) in [m1, m2] {
        let _ = stop.send(());
        run.await.expect("join").expect("stopped cleanly");
    }
}

/// A sharded manager aborted in this process (its `run` future dropped, as a test's abort or a
/// caller's `select!` does) leaves no task behind that renews the sharder Lease: another member
/// takes that Lease once it expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_aborted_member_leaves_no_sharder_behind() {
    let WidgetEnv { cp, admin, ns } = widget_env("record-abort").await;
    let config = cp.config().await.expect("config");
    let sharder = format!("{LEASE}-sharder");
    let (_stop, run) = member(&config, &ns, "m1");
    eventually(60, || async {
        (lease_holder(&admin, &ns, &sharder).await? == "m1").then_some(())
    })
    .await
    .expect("m1 holds the sharder Lease");
    run.abort();
    let _ = run.await;
    let (stop, run) = member(&config, &ns, "m2");
    eventually(90, || async {
        (lease_holder(&admin, &ns, &sharder).await? == "m2").then_some(())
    })
    .await
    .expect("m2 takes the sharder Lease once m1's expires (still renewed by the sharder task the aborted m1 spawned)");
    let _ = stop.send(());
    run.await.expect("join").expect("stopped cleanly");
}
