//! A move writes each child once — its relabel — in the Helm and Ansible flavours, through
//! the `bosun` binary: each replica a `bosun run --sharding` process on the real API server.
//!
//! Per flavour: a few custom resources, each with a ConfigMap and a Service (and, from the
//! chart, a hook ConfigMap that persists);
//! r0 and r1 place and reconcile them; r2 joins (the members hand some objects over, children
//! first), then r2 is killed with `kill -9` (the sharder takes its objects over). A watch of
//! the namespace's ConfigMaps and Services records every write to each child in the order the
//! API server stored it; a sentinel of each kind, written by the test, tells when the record
//! holds every write made before it. After each move, once the new member reconciled its
//! share (its successful reconciles counted on `/metrics`), each moved child was written
//! exactly once and every other child not at all: the new member found the moved children in
//! place. Then a child a user edited is written back (the drift check still sees content).
//! That no object is reconciled by two replicas at once is proven elsewhere (`shard.rs`).
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bosun_testenv::{eventually, shared};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use support::sharded::*;

/// At least this many objects; more until r2's join moves two of them (their UIDs decide).
const OBJECTS: usize = 6;
const SHARD_PREFIX: &str = "shard.bosun.dev/";
const DRAIN_PREFIX: &str = "drain.bosun.dev/";
const SENTINEL: &str = "move-writes-sentinel";
/// The group of the custom resources.
const GROUP: &str = "move.test.bosun.dev";

/// A replica's successful reconciles, from its `/metrics`.
async fn reconciled(r: &Replica) -> Option<f64> {
    let text = metrics(r.metrics).await?;
    series(
        &text,
        "controller_runtime_reconcile_total{",
        "result=\"success\"",
    )
}

fn shard_of(o: &impl ResourceExt) -> Option<String> {
    o.labels()
        .iter()
        .find(|(k, _)| k.starts_with(SHARD_PREFIX))
        .map(|(_, v)| v.clone())
}

/// Who owns the shard label of `o`: each managedFields entry that holds it, as
/// `manager/operation`.
fn label_managers(o: &DynamicObject) -> Vec<String> {
    o.managed_fields()
        .iter()
        .filter(|e| {
            e.fields_v1.as_ref().is_some_and(|f| {
                f.0.get("f:metadata")
                    .and_then(|m| m.get("f:labels"))
                    .and_then(Value::as_object)
                    .is_some_and(|l| l.keys().any(|k| k.starts_with("f:shard.bosun.dev/")))
            })
        })
        .map(|e| {
            format!(
                "{}/{}",
                e.manager.as_deref().unwrap_or(""),
                e.operation.as_deref().unwrap_or("")
            )
        })
        .collect()
}

/// One stored write of an object of a watched kind.
#[derive(Clone, Debug)]
enum Seen {
    /// A watch listed (again): writes may have been missed.
    List,
    Write {
        /// Kind/name.
        key: String,
        rv: String,
        shard: Option<String>,
        /// Who owns the shard label after it.
        managers: Vec<String>,
    },
}

/// Every write to the watched kinds' objects in the namespace, per kind in the order the
/// API server stored them.
#[derive(Clone, Default)]
struct Writes(Arc<Mutex<Vec<Seen>>>);

impl Writes {
    fn watch(&self, client: &Client, ns: &str, ar: &ApiResource) -> tokio::task::JoinHandle<()> {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
        let seen = self.0.clone();
        let kind = ar.kind.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = events.next().await {
                let s = match ev {
                    Ok(watcher::Event::Apply(o)) => Seen::Write {
                        key: format!("{kind}/{}", o.name_any()),
                        rv: o.resource_version().unwrap_or_default(),
                        shard: shard_of(&o),
                        managers: label_managers(&o),
                    },
                    Ok(watcher::Event::Init) => Seen::List,
                    // The sentinel found by a list still ends a sync (which then refuses to
                    // count: the record has a List in it).
                    Ok(watcher::Event::InitApply(o)) if o.name_any() == SENTINEL => Seen::Write {
                        key: format!("{kind}/{}", o.name_any()),
                        rv: o.resource_version().unwrap_or_default(),
                        shard: None,
                        managers: Vec::new(),
                    },
                    _ => continue,
                };
                seen.lock().unwrap_or_else(|e| e.into_inner()).push(s);
            }
        })
    }

    fn snapshot(&self) -> Vec<Seen> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Writes each kind's sentinel and waits until the watches show them: every write
    /// stored before is then in the record. Returns the record's length at that point.
    async fn sync(&self, client: &Client, ns: &str, kinds: &[ApiResource], n: &mut u32) -> usize {
        *n += 1;
        let mut want = Vec::new();
        for ar in kinds {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
            let body = json!({"metadata": {"annotations": {"bosun-test/n": n.to_string()}}});
            let written = api
                .patch(SENTINEL, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .expect("sentinel");
            want.push((
                format!("{}/{SENTINEL}", ar.kind),
                written.resource_version().unwrap_or_default(),
            ));
        }
        eventually(60, || async {
            let seen = self.snapshot();
            let mut end = 0;
            for (key, rv) in &want {
                let at = seen.iter().position(
                    |s| matches!(s, Seen::Write { key: k, rv: r, .. } if k == key && r == rv),
                )?;
                end = end.max(at + 1);
            }
            Some(end)
        })
        .await
        .unwrap_or_else(|| panic!("the watches did not show the sentinels {want:?} in 60 s"))
    }

    /// Writes per child between record positions `from` and `to` (with the label and its
    /// managers after each); panics if a watch listed again in between.
    fn per_child(&self, from: usize, to: usize) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in self.snapshot().iter().take(to).skip(from) {
            match s {
                Seen::List => panic!("a watch listed again: writes could have been missed"),
                Seen::Write { key, .. } if key.ends_with(SENTINEL) => {}
                Seen::Write {
                    key,
                    rv,
                    shard,
                    managers,
                } => out.entry(key.clone()).or_default().push(format!(
                    "rv {rv} label {shard:?} by {}",
                    serde_json::to_string(managers).unwrap_or_default()
                )),
            }
        }
        out
    }
}

struct Flavour {
    flags: Vec<String>,
    resource: ApiResource,
    spec: Value,
    /// The condition its status holds once reconciled.
    condition: &'static str,
    /// Children per object.
    per_object: usize,
}

/// The child kinds both flavours create.
fn child_kinds() -> Vec<ApiResource> {
    vec![
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
    ]
}

/// Every child (kind/name) in `ns` of an object of the flavour's kind, with its owner's name
/// and its shard label.
async fn children(
    client: &Client,
    ns: &str,
    flavour: &Flavour,
) -> Option<BTreeMap<String, (String, Option<String>)>> {
    let mut out = BTreeMap::new();
    for ar in child_kinds() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        for o in api.list(&ListParams::default()).await.ok()?.items {
            let Some(owner) = o
                .owner_references()
                .iter()
                .find(|r| r.kind == flavour.resource.kind)
            else {
                continue;
            };
            out.insert(
                format!("{}/{}", ar.kind, o.name_any()),
                (owner.name.clone(), shard_of(&o)),
            );
        }
    }
    Some(out)
}

/// The settled placement on `live`: every object labelled where the sharder's hash puts it
/// among `live` with no drain under way, reconciled (its condition), with both children
/// carrying its label; each of `live` has at least `want[i]` successful reconciles. Returns
/// object → member, child → owner, and each replica's reconciles.
async fn settled(
    client: &Client,
    ns: &str,
    flavour: &Flavour,
    live: &[&Replica],
    want: &[f64],
) -> (BTreeMap<String, String>, BTreeMap<String, String>, Vec<f64>) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &flavour.resource);
    let last = Mutex::new(String::new());
    let last = &last;
    let api = &api;
    let found = eventually(300, || async move {
        let note = |why: String| *last.lock().unwrap_or_else(|e| e.into_inner()) = why;
        let items = api.list(&ListParams::default()).await.ok()?.items;
        let members: Vec<String> = live.iter().map(|r| r.name.to_string()).collect();
        let mut placed = BTreeMap::new();
        for o in &items {
            let on = shard_of(o);
            let hashed = bosun_runtime::shard::ring::owner(&o.uid()?, &members).map(str::to_string);
            let reconciled = o.data["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == flavour.condition && c["status"] == "True")
            });
            if on.is_none()
                || on != hashed
                || o.labels().keys().any(|k| k.starts_with(DRAIN_PREFIX))
                || !reconciled
            {
                note(format!(
                    "{} on {on:?}, hashed to {hashed:?}, reconciled {reconciled}",
                    o.name_any()
                ));
                return None;
            }
            placed.insert(o.name_any(), on.unwrap_or_default());
        }
        if placed.is_empty() {
            note(format!("{} objects", placed.len()));
            return None;
        }
        let kids = children(client, ns, flavour).await?;
        let follow = placed.iter().all(|(o, m)| {
            kids.values()
                .filter(|(owner, shard)| owner == o && shard.as_ref() == Some(m))
                .count()
                == flavour.per_object
        });
        if kids.len() != flavour.per_object * placed.len() || !follow {
            note(format!("children {kids:?} of {placed:?}"));
            return None;
        }
        let mut counts = Vec::new();
        for (i, r) in live.iter().enumerate() {
            let ok = reconciled(r).await;
            let at_least = want.get(i).copied().unwrap_or(0.0);
            if ok.is_none_or(|ok| ok < at_least) {
                note(format!("{}: {ok:?} reconciles (≥ {at_least})", r.name));
                return None;
            }
            counts.push(ok.unwrap_or_default());
        }
        let owners = kids.into_iter().map(|(k, (o, _))| (k, o)).collect();
        Some((placed, owners, counts))
    })
    .await;
    found.unwrap_or_else(|| {
        let logs: Vec<String> = live
            .iter()
            .map(|r| {
                let text = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {} ---\n{}", r.name, tail.join("\n"))
            })
            .collect();
        panic!(
            "placement did not settle on {:?} (last: {})\n{}",
            live.iter().map(|r| r.name).collect::<Vec<_>>(),
            last.lock().unwrap_or_else(|e| e.into_inner()),
            logs.join("\n")
        )
    })
}

/// Who owns each child's shard label now (kind/name → `manager/operation` entries).
async fn label_owners(client: &Client, ns: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for ar in child_kinds() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let list = api.list(&ListParams::default()).await.expect("children");
        for o in list.items {
            out.insert(format!("{}/{}", ar.kind, o.name_any()), label_managers(&o));
        }
    }
    out
}

/// The manager names in `manager/operation` entries.
fn names(entries: &[String]) -> std::collections::BTreeSet<&str> {
    entries
        .iter()
        .map(|e| e.rsplit_once('/').map_or(e.as_str(), |(m, _)| m))
        .collect()
}

/// Each moved child (its owner in `moved`) was relabelled under the manager that owned its
/// label before (`before`: [`label_owners`]), and written once; every other child not at all.
fn writes_of<'a>(counted: &'a BTreeMap<String, Vec<String>>, child: &str) -> &'a [String] {
    counted.get(child).map_or(&[], Vec::as_slice)
}

fn once_per_moved_child(
    step: &str,
    owners: &BTreeMap<String, String>,
    moved: &[&String],
    before: &BTreeMap<String, Vec<String>>,
    counted: &BTreeMap<String, Vec<String>>,
) {
    println!("{step}: writes per child {counted:#?}");
    for (child, owner) in owners.iter().filter(|(_, o)| moved.contains(o)) {
        let Some(relabel) = writes_of(counted, child).first() else {
            continue;
        };
        let was = before.get(child).map(|e| names(e)).unwrap_or_default();
        let by = relabel
            .split_once(" by ")
            .and_then(|(_, m)| serde_json::from_str::<Vec<String>>(m).ok())
            .unwrap_or_default();
        assert!(
            names(&by).is_subset(&was),
            "{step}: {child} (of {owner}) relabelled by another field manager than its label's: \
             before {:?}, relabel {relabel}",
            before.get(child)
        );
    }
    let wrong: BTreeMap<&String, &Vec<String>> = owners
        .iter()
        .filter(|(child, owner)| {
            let want = usize::from(moved.contains(owner));
            counted.get(*child).map_or(0, Vec::len) != want
        })
        .filter_map(|(child, _)| Some((child, counted.get(child)?)))
        .collect();
    let unwritten: Vec<&String> = owners
        .iter()
        .filter(|(child, owner)| moved.contains(owner) && !counted.contains_key(*child))
        .map(|(c, _)| c)
        .collect();
    assert!(
        wrong.is_empty() && unwritten.is_empty(),
        "{step}: each moved child (owners {moved:?}) is written once (its relabel), others never; \
         written otherwise: {wrong:#?}; moved children not relabelled: {unwritten:?}"
    );
}

async fn scenario(client: &Client, ns: &str, flavour: Flavour, dir: &Path) {
    let cp = shared().await.expect("control plane");
    let kinds = child_kinds();
    // The sentinels, one per watched kind, owned by nothing.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": SENTINEL}})).expect("cm"),
    )
    .await
    .expect("sentinel ConfigMap");
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": SENTINEL}, "spec": {"ports": [{"port": 80}]}}),
        )
        .expect("svc"),
    )
    .await
    .expect("sentinel Service");
    let writes = Writes::default();
    let watches: Vec<_> = kinds
        .iter()
        .map(|ar| writes.watch(client, ns, ar))
        .collect();
    let mut n = 0;
    writes.sync(client, ns, &kinds, &mut n).await;

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &flavour.resource);
    let three: Vec<String> = ["r0", "r1", "r2"].map(String::from).to_vec();
    let mut to_r2 = 0;
    for i in 0.. {
        if i >= OBJECTS && to_r2 >= 2 {
            break;
        }
        assert!(
            i < 60,
            "{i} objects, {to_r2} of them placed on r2 by the hash"
        );
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": flavour.resource.api_version, "kind": flavour.resource.kind,
            "metadata": {"name": format!("m{i}"), "namespace": ns}, "spec": flavour.spec,
        }))
        .expect("object");
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .expect("create");
        let uid = created.uid().expect("uid");
        if bosun_runtime::shard::ring::owner(&uid, &three) == Some("r2") {
            to_r2 += 1;
        }
    }
    let r0 = start(cp.kubeconfig(), ns, "r0", &flavour.flags, dir);
    let r1 = start(cp.kubeconfig(), ns, "r1", &flavour.flags, dir);
    let (two, _, counts) = settled(client, ns, &flavour, &[&r0, &r1], &[]).await;
    println!("r0, r1: {two:?}");

    // r2 joins: r0 and r1 hand its share over, children first.
    let mark = writes.sync(client, ns, &kinds, &mut n).await;
    let before = label_owners(client, ns).await;
    let mut r2 = start(cp.kubeconfig(), ns, "r2", &flavour.flags, dir);
    // r2's share is known once placed; then its reconciles of that share are waited for.
    let (three, _, _) = settled(client, ns, &flavour, &[&r0, &r1, &r2], &counts).await;
    let share = three.values().filter(|m| *m == "r2").count() as f64;
    let want = [counts[0], counts[1], share];
    let (three, owners, _) = settled(client, ns, &flavour, &[&r0, &r1, &r2], &want).await;
    let end = writes.sync(client, ns, &kinds, &mut n).await;
    let to_r2: Vec<&String> = three
        .iter()
        .filter(|(_, m)| *m == "r2")
        .map(|(o, _)| o)
        .collect();
    println!("r2 joined: {three:?}");
    assert!(!to_r2.is_empty(), "r2 took nothing: {three:?}");
    once_per_moved_child(
        "the hand-off to r2",
        &owners,
        &to_r2,
        &before,
        &writes.per_child(mark, end),
    );

    // kill -9 r2: the sharder takes its objects over once its Lease expired, children first.
    let (_, _, counts) = settled(client, ns, &flavour, &[&r0, &r1, &r2], &[]).await;
    let mark = writes.sync(client, ns, &kinds, &mut n).await;
    let before = label_owners(client, ns).await;
    signal(&r2.child, "-9");
    let _ = r2.child.wait().await;
    let (back, _, _) = settled(client, ns, &flavour, &[&r0, &r1], &counts).await;
    let gained = |m: &str| {
        to_r2
            .iter()
            .filter(|o| back.get(o.as_str()).map(String::as_str) == Some(m))
            .count() as f64
    };
    let want = [counts[0] + gained("r0"), counts[1] + gained("r1")];
    settled(client, ns, &flavour, &[&r0, &r1], &want).await;
    let end = writes.sync(client, ns, &kinds, &mut n).await;
    println!("r2 killed: {back:?}");
    once_per_moved_child(
        "the takeover of r2",
        &owners,
        &to_r2,
        &before,
        &writes.per_child(mark, end),
    );

    // A user's edit of a moved child's content is still written back.
    let (child, owner) = owners
        .iter()
        .find(|(c, o)| c.starts_with("ConfigMap/") && c.ends_with("-cm") && to_r2.contains(o))
        .expect("a moved ConfigMap");
    let name = child.trim_start_matches("ConfigMap/");
    let before = cms.get(name).await.expect("child").data;
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cms.patch(
        name,
        &edit,
        &Patch::Merge(json!({"data": {"size": "edited"}})),
    )
    .await
    .expect("a user's edit");
    let back_again = eventually(120, || async {
        let now = cms.get(name).await.ok()?;
        (now.data == before).then_some(())
    })
    .await;
    assert!(
        back_again.is_some(),
        "{child} (of {owner}), edited by a user, was not written back to {before:?}: {:?}",
        cms.get(name).await.map(|c| c.data)
    );
    for w in watches {
        w.abort();
    }
    drop((r0, r1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_helm_release_move_writes_each_child_once() {
    let (admin, ns, dir) = operator_env("move-helm").await;
    let chart = write_chart(
        dir.path(),
        "movechart",
        &[
            ("cm.yaml", CM_TEMPLATE),
            (
                "svc.yaml",
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}-svc\nspec:\n  ports:\n  - port: 80\n    targetPort: 8080\n  selector:\n    app: {{ .Release.Name }}\n",
            ),
            // A hook that persists, created at the install by a plain POST (not by the
            // applier): its relabel too goes under its label's owner.
            ("hook.yaml", HOOK_TEMPLATE),
        ],
    );
    // No resync during the test: every reconcile counted is one a move (or a write) caused.
    let watches = write_watches(
        &admin,
        dir.path(),
        GROUP,
        "MovedChart",
        "chart",
        &chart,
        "  reconcilePeriod: 10h\n",
    )
    .await;
    let flavour = Flavour {
        flags: vec![format!("--watches={}", watches.display())],
        resource: resource(GROUP, "MovedChart", "movedcharts"),
        spec: json!({"size": 2}),
        condition: "Deployed",
        per_object: 3,
    };
    scenario(&admin, &ns, flavour, dir.path()).await;
}

/// The Ansible flavour, its role writing two children with `k8s` (`args`: the module's
/// arguments beside `definition`, each line indented under `k8s:`).
async fn ansible(prefix: &str, args: &str) {
    let (admin, ns, dir) = operator_env(prefix).await;
    let cm = "      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: \"{{ ansible_operator_meta.name }}-cm\"\n        namespace: \"{{ ansible_operator_meta.namespace }}\"\n      data:\n        size: \"size-{{ size }}\"\n";
    let svc = "      apiVersion: v1\n      kind: Service\n      metadata:\n        name: \"{{ ansible_operator_meta.name }}-svc\"\n        namespace: \"{{ ansible_operator_meta.namespace }}\"\n      spec:\n        ports:\n        - port: 80\n          targetPort: 8080\n        selector:\n          app: \"{{ ansible_operator_meta.name }}\"\n";
    let role = write_role(
        dir.path(),
        "moverole",
        &format!(
            "---\n- name: the ConfigMap\n  k8s:\n{args}    definition:\n{cm}- name: the Service\n  k8s:\n{args}    definition:\n{svc}"
        ),
    );
    let watches = write_watches(&admin, dir.path(), GROUP, "MovedRole", "role", &role, "").await;
    let flavour = Flavour {
        flags: vec![
            format!("--watches={}", watches.display()),
            "--ansible-engine=native".into(),
        ],
        resource: resource(GROUP, "MovedRole", "movedroles"),
        spec: json!({"size": 2}),
        condition: "Successful",
        per_object: 2,
    };
    scenario(&admin, &ns, flavour, dir.path()).await;
}

/// `k8s` as most roles call it: a merge patch when the object differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ansible_role_move_writes_each_child_once() {
    ansible("move-ansible", "").await;
}

/// `k8s` with `apply: true` and server-side apply under a field manager of the role's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ansible_role_applying_server_side_move_writes_each_child_once() {
    ansible(
        "move-ansible-ssa",
        "    apply: true\n    server_side_apply:\n      field_manager: moverole\n      force_conflicts: true\n",
    )
    .await;
}

/// `k8s` with `apply: true`, client-side (the last-applied annotation's three-way patch).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ansible_role_applying_client_side_move_writes_each_child_once() {
    ansible("move-ansible-csa", "    apply: true\n").await;
}
