//! A move costs one write per child: the relabel. Each widget has one child ConfigMap, applied
//! through the applier from a fingerprinting child cache; replicas run as processes of their
//! own (this test binary started again on an ignored test) so that one can be `kill -9`ed.
//! A watch of the namespace's ConfigMaps records every write to each child, in the order the
//! API server stored them. Member a starts alone; b joins (some widgets are handed over by a:
//! the drain hand-off); b is killed (its widgets are taken over by the sharder). After each
//! move every moved child was written exactly once (its relabel), unmoved children not at
//! all, and the new member's reconcile found each moved child in place (`Unchanged`). Then,
//! with a alone: a child a user unlabelled, relabelled elsewhere, or edited is written back,
//! and a child that predates sharding (no label) was labelled by a's first apply.
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bosun_runtime::manager::Operator;
use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

const CHILD: &str = "BOSUN_TEST_MOVE_REPLICA";
const LEASE: &str = "movetest";
const OPERATOR: &str = "mover";
const SHARD: &str = "shard.bosun.dev/mover";
const DRAIN: &str = "drain.bosun.dev/mover";
const CHILD_LABEL: &str = "bosun-test/move-child";
const CHILD_MANAGER: &str = "mover-child";
const WIDGETS: usize = 6;
/// What a replica prints after each reconcile: `<replica> <widget> <outcome>`.
const SAID: &str = "MOVE-OUTCOME ";

struct MoveCtx {
    identity: String,
    children: OwnedConfigMaps,
}

/// A widget's child: `<widget>-child`, controlled by the widget.
fn child_of(w: &Widget) -> ConfigMap {
    owned_configmap(w, "-child", CHILD_LABEL, &[("widget", &w.name_any())])
}

/// Applies the child once per change and says what the applier did.
async fn reconcile(w: Arc<Widget>, ctx: Arc<MoveCtx>) -> Result<Action, WidgetError> {
    let outcome = ctx.children.apply(&child_of(&w)).await?;
    println!("{SAID}{} {} {outcome:?}", ctx.identity, w.name_any());
    Ok(Action::await_change())
}

fn mover(identity: &str) -> Arc<dyn Operator> {
    let identity = identity.to_string();
    widget_controller(
        OPERATOR,
        move |client, ns| {
            owning_configmaps(client, ns, CHILD_LABEL, CHILD_MANAGER, |children| MoveCtx {
                identity: identity.clone(),
                children,
            })
        },
        reconcile,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "not a test on its own: a replica that a_move_writes_each_child_once starts and kills"]
async fn move_replica_process() {
    let (config, ns, identity, metrics) = replica_spec(CHILD).await;
    ShardedMember::new(&config, LEASE, &ns, &identity)
        .concurrency(4)
        .metrics(metrics)
        .manager()
        .expect("member")
        .with_operator(mover(&identity))
        .run(bosun_runtime::manager::shutdown_signal(), |_| {})
        .await
        .expect("manager");
}

fn start(kubeconfig: &std::path::Path, ns: &str, name: &str) -> Reporting {
    let cmd = replica_command(
        "move_replica_process",
        CHILD,
        kubeconfig,
        ns,
        name,
        free_addr(),
    );
    Reporting::spawn(cmd, SAID)
}

/// What `replica`'s reconciles of `widget` reported since its line `from`.
fn outcomes(replica: &Reporting, from: usize, widget: &str) -> Vec<String> {
    replica
        .said
        .lines()
        .iter()
        .skip(from)
        .filter_map(|l| {
            let mut p = l.split(' ');
            let (_, w, o) = (p.next()?, p.next()?, p.next()?);
            (w == widget).then(|| o.to_string())
        })
        .collect()
}

/// One stored write of a ConfigMap of the namespace.
#[derive(Clone, Debug)]
enum Seen {
    /// The watch listed (again): writes may have been missed.
    List,
    Write {
        name: String,
        rv: String,
    },
}

/// Every ConfigMap write of the namespace, in the order the API server stored them.
#[derive(Clone, Default)]
struct Writes(Arc<Mutex<Vec<Seen>>>);

impl Writes {
    fn watch(&self, client: &Client, ns: &str) -> tokio::task::JoinHandle<()> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let seen = self.0.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = events.next().await {
                let s = match ev {
                    Ok(watcher::Event::Apply(cm)) => {
                        if cm.name_any().ends_with("-child") {
                            let managers: Vec<_> = cm
                                .managed_fields()
                                .iter()
                                .map(|e| {
                                    format!(
                                        "{}/{}@{} {}",
                                        e.manager.as_deref().unwrap_or(""),
                                        e.operation.as_deref().unwrap_or(""),
                                        e.time
                                            .as_ref()
                                            .map(|t| t.0.to_string())
                                            .unwrap_or_default(),
                                        e.fields_v1
                                            .as_ref()
                                            .map(|f| f.0.to_string())
                                            .unwrap_or_default()
                                    )
                                })
                                .collect();
                            println!(
                                "WRITE {} rv {} label {:?} {managers:?}",
                                cm.name_any(),
                                cm.resource_version().unwrap_or_default(),
                                cm.labels().get(SHARD)
                            );
                        }
                        Seen::Write {
                            name: cm.name_any(),
                            rv: cm.resource_version().unwrap_or_default(),
                        }
                    }
                    // A list (again) shows objects, not writes: marked, and the sentinel
                    // found there still ends a sync (which then refuses to count).
                    Ok(watcher::Event::Init) => Seen::List,
                    Ok(watcher::Event::InitApply(cm)) if cm.name_any() == "sentinel" => {
                        Seen::Write {
                            name: cm.name_any(),
                            rv: cm.resource_version().unwrap_or_default(),
                        }
                    }
                    _ => continue,
                };
                seen.lock().expect("lock").push(s);
            }
        })
    }

    fn snapshot(&self) -> Vec<Seen> {
        self.0.lock().expect("lock").clone()
    }

    /// A write of its own, once the watch shows it: every write stored before it is then in
    /// the record. Returns the record's length at that point.
    async fn sync(&self, cms: &Api<ConfigMap>, n: &mut u32) -> usize {
        *n += 1;
        let body = serde_json::json!({ "data": { "n": n.to_string() } });
        let written = cms
            .patch(
                "sentinel",
                &PatchParams::apply("move-test").force(),
                &Patch::Apply(serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": "sentinel" }, "data": body["data"],
                })),
            )
            .await
            .expect("sentinel");
        let rv = written.resource_version().unwrap_or_default();
        eventually(60, || async {
            self.snapshot()
                .iter()
                .position(
                    |s| matches!(s, Seen::Write { name, rv: r } if name == "sentinel" && *r == rv),
                )
                .map(|i| i + 1)
        })
        .await
        .unwrap_or_else(|| {
            let seen = self.snapshot();
            let tail = &seen[seen.len().saturating_sub(10)..];
            panic!(
                "the watch did not show the sentinel at {rv} in 60 s; its last records: {tail:?}"
            )
        })
    }

    /// Writes per child ConfigMap between record positions `from` and `to`; panics if the
    /// watch listed again in between (writes could be missing).
    fn per_child(&self, from: usize, to: usize) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for s in self.snapshot().iter().take(to).skip(from) {
            match s {
                Seen::List => panic!("the watch listed again: writes could have been missed"),
                Seen::Write { name, .. } if name.ends_with("-child") => {
                    *out.entry(name.clone()).or_insert(0) += 1
                }
                Seen::Write { .. } => {}
            }
        }
        out
    }
}

/// Widgets by name → the member their shard label names, once none drains and every one
/// and its child carry one of `live`'s labels, the same.
async fn placed(
    widgets: &Api<Widget>,
    cms: &Api<ConfigMap>,
    live: &[&str],
) -> Option<BTreeMap<String, String>> {
    let ws = widgets.list(&ListParams::default()).await.ok()?;
    let children = cms
        .list(&ListParams::default().labels(&format!("{CHILD_LABEL}=yes")))
        .await
        .ok()?;
    let mut out = BTreeMap::new();
    for w in &ws.items {
        if w.labels().contains_key(DRAIN) {
            return None;
        }
        let m = w
            .labels()
            .get(SHARD)
            .filter(|m| live.contains(&m.as_str()))?;
        let child = children
            .items
            .iter()
            .find(|c| c.name_any() == format!("{}-child", w.name_any()))?;
        if child.labels().get(SHARD) != Some(m) {
            return None;
        }
        out.insert(w.name_any(), m.clone());
    }
    Some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_writes_each_child_once() {
    let WidgetEnv { cp, admin, ns } = widget_env("move").await;
    let kubeconfig = cp.kubeconfig().to_path_buf();
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let writes = Writes::default();
    let watch = writes.watch(&admin, &ns);
    let mut n = 0;
    writes.sync(&cms, &mut n).await;
    // At least one widget of each member once b joins: else b takes nothing over.
    let made = create_widgets_spread(
        &widgets,
        WIDGETS,
        &["a", "b"],
        |name| widget(&ns, &name, "x", 0),
        "w",
    )
    .await;
    // A child from before sharding: no shard label, no field of the applier's.
    let w0 = widgets.get("w0").await.expect("w0");
    cms.create(&PostParams::default(), &child_of(&w0))
        .await
        .expect("an unlabelled child");

    // a alone: every widget and child labelled a, each child applied by a.
    let a = start(&kubeconfig, &ns, "a");
    let all = eventually(120, || async {
        let p = placed(&widgets, &cms, &["a"]).await?;
        p.keys()
            .all(|w| !outcomes(&a, 0, w).is_empty())
            .then_some(p)
    })
    .await
    .expect("a placed and reconciled every widget");
    assert_eq!(all.len(), made.len());

    // b joins: a hands some widgets over, children first.
    let mark = writes.sync(&cms, &mut n).await;
    let a_said = a.said.lines().len();
    let mut b = start(&kubeconfig, &ns, "b");
    let joined = eventually(120, || async {
        let p = placed(&widgets, &cms, &["a", "b"]).await?;
        let to_b: Vec<_> = p
            .iter()
            .filter(|(_, m)| *m == "b")
            .map(|(w, _)| w)
            .collect();
        (!to_b.is_empty() && to_b.iter().all(|w| !outcomes(&b, 0, w).is_empty())).then_some(p)
    })
    .await
    .expect("b took some widgets over and reconciled them");
    let end = writes.sync(&cms, &mut n).await;
    let counted = writes.per_child(mark, end);
    for (w, m) in &joined {
        let child = format!("{w}-child");
        let want = usize::from(m == "b");
        assert_eq!(
            counted.get(&child).copied().unwrap_or(0),
            want,
            "{child} (its widget now on {m}) written {counted:?} times across the hand-off; one write (the relabel) per moved child"
        );
        if m == "b" {
            let said = outcomes(&b, 0, w);
            assert!(
                said.iter().all(|o| o == "Unchanged"),
                "b's reconciles of {w}, handed over from a: {said:?}"
            );
        } else {
            assert!(
                outcomes(&a, a_said, w).iter().all(|o| o == "Unchanged"),
                "a wrote {w}'s child though it stayed"
            );
        }
    }

    // b is killed: the sharder takes its widgets over, children first.
    let mark = writes.sync(&cms, &mut n).await;
    let a_said = a.said.lines().len();
    signal(b.child.id().expect("b's pid"), "-9");
    let _ = b.child.wait().await;
    let moved: Vec<&String> = joined
        .iter()
        .filter(|(_, m)| *m == "b")
        .map(|(w, _)| w)
        .collect();
    eventually(120, || async {
        placed(&widgets, &cms, &["a"]).await?;
        moved
            .iter()
            .all(|w| !outcomes(&a, a_said, w).is_empty())
            .then_some(())
    })
    .await
    .expect("a took b's widgets over and reconciled them");
    let end = writes.sync(&cms, &mut n).await;
    let counted = writes.per_child(mark, end);
    for w in joined.keys() {
        let child = format!("{w}-child");
        let was_b = moved.contains(&w);
        assert_eq!(
            counted.get(&child).copied().unwrap_or(0),
            usize::from(was_b),
            "{child} written {counted:?} times across b's takeover; one write (the relabel) per moved child"
        );
        if was_b {
            let said = outcomes(&a, a_said, w);
            assert!(
                said.iter().all(|o| o == "Unchanged"),
                "a's reconciles of {w}, taken over from b: {said:?}"
            );
        }
    }
    // The relabel left the label with the applier's manager: its fields cover it.
    let child = cms
        .get(&format!("{}-child", moved[0]))
        .await
        .expect("child");
    assert!(
        label_owned_by(&child, CHILD_MANAGER),
        "{CHILD_MANAGER} does not own the moved child's label: {:?}",
        child.managed_fields()
    );

    // Users: a label removed, a label changed, a value changed: each written back by a.
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    let edits = [
        (
            "w1-child",
            serde_json::json!({ "metadata": { "labels": { SHARD: null } } }),
        ),
        (
            "w2-child",
            serde_json::json!({ "metadata": { "labels": { SHARD: "elsewhere" } } }),
        ),
        (
            "w3-child",
            serde_json::json!({ "data": { "widget": "edited" } }),
        ),
    ];
    for (name, body) in &edits {
        cms.patch(name, &edit, &Patch::Merge(body))
            .await
            .expect("a user's edit");
    }
    let written_back = eventually(120, || async {
        for (name, _) in &edits {
            let c = cms.get(name).await.ok()?;
            let w = name.strip_suffix("-child")?;
            let data = c.data.as_ref()?.get("widget")?;
            if c.labels().get(SHARD).map(String::as_str) != Some("a") || data != w {
                return None;
            }
        }
        Some(())
    })
    .await;
    if written_back.is_none() {
        let now = cms
            .list(&ListParams::default().labels(&format!("{CHILD_LABEL}=yes")))
            .await
            .expect("list the children");
        let now: Vec<_> = now
            .items
            .iter()
            .map(|c| (c.name_any(), c.labels().get(SHARD).cloned(), c.data.clone()))
            .collect();
        panic!("a user's edits were not written back: {now:?}");
    }
    // The applier's next write took the label back into its Apply entry.
    let edited = cms.get("w3-child").await.expect("w3-child");
    assert!(
        edited
            .managed_fields()
            .iter()
            .any(|e| e.manager.as_deref() == Some(CHILD_MANAGER)
                && e.operation.as_deref() == Some("Apply")
                && owns_label(e)),
        "after its re-apply, {CHILD_MANAGER}'s Apply entry owns the label: {:?}",
        edited.managed_fields()
    );
    watch.abort();
    drop(a);
}

fn owns_label(e: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry) -> bool {
    e.fields_v1
        .as_ref()
        .and_then(|f| {
            f.0.get("f:metadata")?
                .get("f:labels")?
                .get(format!("f:{SHARD}"))
        })
        .is_some()
}

fn label_owned_by(c: &ConfigMap, manager: &str) -> bool {
    c.managed_fields()
        .iter()
        .any(|e| e.manager.as_deref() == Some(manager) && owns_label(e))
}
