//! `bosun run --sharding` for the three flavours, each replica a `bosun run` process on the
//! real API server: a coded operator (`--operators bookstore`), a Helm chart and an Ansible
//! role (`--watches`, each of a kind of its own).
//!
//! Per flavour: 20 custom resources, two replicas (r0, r1), then a third joins (r2), r1
//! leaves (SIGTERM) and r2 is killed (`kill -9`). After each step the test waits until every
//! object is labelled with a live replica, each holds some, every object is reconciled (its
//! status says so) and each replica's caches hold exactly its share: its objects, and of each
//! child kind the children of its objects plus the children no shard label names; every
//! child carries its owner's member label and none was recreated. Some children are written
//! once and never again (a Helm hook that persists, a ConfigMap the role creates only when
//! absent), so their label follows only by the move's relabelling; the Helm chart's Secret is
//! rendered only with the custom resources' values, not the defaults, so its cache starts on
//! a reconcile's first use, after the controller. That no object is ever
//! reconciled by two replicas at once across joins, leaves and kills is proven on the
//! runtime they share (crates/runtime/tests/shard.rs), with a recorder of every write.
mod support;

use std::collections::BTreeMap;
use std::path::Path;

use bosun_testenv::{eventually, shared, test_namespace};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::{json, Value};
use support::sharded::*;

const OBJECTS: usize = 20;
const SHARD_PREFIX: &str = "shard.bosun.dev/";
/// The group of the Helm and Ansible flavours' custom resources.
const GROUP: &str = "shard.test.bosun.dev";

struct Flavour {
    flags: Vec<String>,
    resource: ApiResource,
    /// The object with this name in `ns`.
    object: fn(&str, &str) -> Value,
    /// Whether its status says it was reconciled.
    done: fn(&DynamicObject) -> bool,
    /// The kinds of the children its reconcile creates.
    children: Vec<ApiResource>,
    /// The label selector of its child caches (empty: none).
    child_selector: &'static str,
    /// How many children each object has once reconciled (None: not checked).
    per_object: Option<usize>,
    /// The child kinds whose caches select their replica's share: each replica's
    /// `bosun_cached_children` of each equals the children of its objects plus the objects
    /// its caches select that carry no shard label.
    cached_children: &'static [&'static str],
}

/// One child, as the API server holds it.
#[derive(Debug)]
struct Child {
    /// kind/name.
    key: String,
    uid: String,
    /// The name of the object of the flavour's kind its owner reference names.
    owner: String,
    /// The value of its shard label.
    shard: Option<String>,
}

/// Every child in `ns` of the flavour's child kinds that an object of its kind owns.
async fn children(client: &Client, ns: &str, flavour: &Flavour) -> Option<Vec<Child>> {
    let mut out = Vec::new();
    let selected = ListParams::default().labels(flavour.child_selector);
    for r in &flavour.children {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, r);
        for o in api.list(&selected).await.ok()?.items {
            // ansible-operator's owner reference is not a controller one.
            let Some(owner) = o
                .owner_references()
                .iter()
                .find(|o| o.kind == flavour.resource.kind)
            else {
                continue;
            };
            out.push(Child {
                key: format!("{}/{}", r.kind, o.name_any()),
                uid: o.uid()?,
                owner: owner.name.clone(),
                shard: o
                    .labels()
                    .iter()
                    .find(|(k, _)| k.starts_with(SHARD_PREFIX))
                    .map(|(_, v)| v.clone()),
            });
        }
    }
    Some(out)
}

/// Waits until every object has a child and every child carries the shard label of the
/// member its owner is placed on (`on`: the member each object's name is labelled with).
async fn children_follow(
    client: &Client,
    ns: &str,
    flavour: &Flavour,
    on: &BTreeMap<String, String>,
) -> BTreeMap<String, Child> {
    let last = std::sync::Mutex::new(String::new());
    let last = &last;
    let found = eventually(120, || async move {
        let all = children(client, ns, flavour).await?;
        let ok = on.keys().all(|o| all.iter().any(|c| &c.owner == o))
            && flavour.per_object.is_none_or(|n| all.len() == n * on.len())
            && all
                .iter()
                .all(|c| c.shard.is_some() && c.shard.as_ref() == on.get(&c.owner));
        if ok {
            Some(all)
        } else {
            *last.lock().unwrap_or_else(|e| e.into_inner()) = format!("{all:#?}");
            None
        }
    })
    .await;
    let all = found.unwrap_or_else(|| {
        panic!(
            "the children did not all carry their owner's shard label {on:?}: {}",
            last.lock().unwrap_or_else(|e| e.into_inner())
        )
    });
    all.into_iter().map(|c| (c.key.clone(), c)).collect()
}

/// The objects of `kind` in `ns` that the flavour's child caches select and no shard label
/// names: every replica caches them.
async fn unlabelled(client: &Client, ns: &str, flavour: &Flavour, kind: &str) -> Option<usize> {
    let r = flavour.children.iter().find(|r| r.kind == kind)?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, r);
    let list = api
        .list(&ListParams::default().labels(flavour.child_selector))
        .await
        .ok()?;
    Some(
        list.items
            .iter()
            .filter(|o| !o.labels().keys().any(|k| k.starts_with(SHARD_PREFIX)))
            .count(),
    )
}

/// Every child of `before` is still there with the same UID after `step`.
fn same_children(before: &BTreeMap<String, Child>, after: &BTreeMap<String, Child>, step: &str) {
    let uids = |m: &BTreeMap<String, Child>| {
        m.iter()
            .map(|(k, c)| (k.clone(), c.uid.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(uids(after), uids(before), "children recreated by {step}");
}

fn condition(o: &DynamicObject, kind: &str) -> bool {
    o.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Name → the replica its shard label names, for every object (None: some object is not
/// labelled yet).
async fn placement(
    api: &Api<DynamicObject>,
) -> Option<(BTreeMap<String, String>, Vec<DynamicObject>)> {
    let list = api.list(&ListParams::default()).await.ok()?;
    let mut map = BTreeMap::new();
    for o in &list.items {
        let owner = o
            .labels()
            .iter()
            .find(|(k, _)| k.starts_with(SHARD_PREFIX))
            .map(|(_, v)| v.clone())?;
        map.insert(o.name_any(), owner);
    }
    Some((map, list.items))
}

/// Waits until every object is labelled with one of `live`, each of `must_own` holds some,
/// every object is reconciled, each live replica caches exactly its share and has reconciled
/// at least `reconciled[i]` times successfully. Returns the placement and those counts.
async fn settled(
    api: &Api<DynamicObject>,
    flavour: &Flavour,
    live: &[&Replica],
    must_own: &[&str],
    reconciled: &[f64],
) -> (BTreeMap<String, String>, Vec<f64>) {
    let last = std::sync::Mutex::new(String::new());
    let last = &last;
    let found = eventually(240, || async move {
        let note = |why: String| *last.lock().unwrap_or_else(|e| e.into_inner()) = why;
        let Some((map, items)) = placement(api).await else {
            note("some object has no shard label".into());
            return None;
        };
        // Where the sharder's hash puts each object among the live replicas, no move under
        // way: a join moves objects in batches, and a placement seen between two of them is
        // not the settled one.
        let members: Vec<String> = live.iter().map(|r| r.name.to_string()).collect();
        let final_place = items.iter().all(|o| {
            let owner = o
                .uid()
                .and_then(|u| bosun_runtime::shard::ring::owner(&u, &members).map(str::to_string));
            owner.as_ref() == map.get(&o.name_any())
                && !o.labels().keys().any(|k| k.starts_with("drain.bosun.dev/"))
        });
        if map.len() != OBJECTS
            || !final_place
            || !must_own.iter().all(|m| map.values().any(|o| o == m))
            || !items.iter().all(flavour.done)
        {
            note(format!("placement {map:?}, or not all reconciled"));
            return None;
        }
        let mut counts = Vec::new();
        for (i, r) in live.iter().enumerate() {
            let Some(text) = metrics(r.metrics).await else {
                note(format!("{}: no metrics", r.name));
                return None;
            };
            let share = map.values().filter(|o| *o == r.name).count();
            let cached = series(&text, "bosun_cached_objects{", "");
            let ok = series(
                &text,
                "controller_runtime_reconcile_total{",
                "result=\"success\"",
            );
            let want = reconciled.get(i).copied().unwrap_or(0.0);
            if cached != Some(share as f64) || ok.is_none_or(|ok| ok < want) {
                note(format!(
                    "{}: {cached:?} objects cached (share {share}), {ok:?} reconciles (≥ {want})",
                    r.name
                ));
                return None;
            }
            let ok = ok.unwrap_or_default();
            if !flavour.cached_children.is_empty() {
                let ns = api.namespace()?.to_string();
                let client = api.clone().into_client();
                let all = children(&client, &ns, flavour).await?;
                for kind in flavour.cached_children {
                    let mine = all
                        .iter()
                        .filter(|c| c.key.starts_with(&format!("{kind}/")))
                        .filter(|c| map.get(&c.owner) == Some(&r.name.to_string()))
                        .count();
                    let unlabelled = unlabelled(&client, &ns, flavour, kind).await?;
                    let kind_label = format!("kind=\"{kind}\"");
                    let Some(cached) = series(&text, "bosun_cached_children{", &kind_label)
                    else {
                        note(format!("{}: no bosun_cached_children of {kind}", r.name));
                        return None;
                    };
                    if cached != (mine + unlabelled) as f64 {
                        note(format!(
                            "{}: {cached} {kind} cached, its share is {mine} + {unlabelled} unlabelled",
                            r.name
                        ));
                        return None;
                    }
                }
            }
            counts.push(ok);
        }
        Some((map, counts))
    })
    .await;
    found.unwrap_or_else(|| {
        let logs: Vec<String> = live
            .iter()
            .map(|r| {
                let text = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.contains("Server cert bypassed"))
                    .rev()
                    .take(40)
                    .collect();
                format!(
                    "--- {} ---\n{}",
                    r.name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
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

async fn scenario(client: &Client, ns: &str, flavour: Flavour, dir: &Path) {
    let cp = shared().await.expect("control plane");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &flavour.resource);
    for i in 0..OBJECTS {
        let obj: DynamicObject =
            serde_json::from_value((flavour.object)(ns, &format!("s{i}"))).expect("object");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create");
    }
    // Durations are printed for the report, never asserted (the waits are for states).
    let started = std::time::Instant::now();
    let r0 = start(cp.kubeconfig(), ns, "r0", &flavour.flags, dir);
    let mut r1 = start(cp.kubeconfig(), ns, "r1", &flavour.flags, dir);
    let (two, _) = settled(&api, &flavour, &[&r0, &r1], &["r0", "r1"], &[]).await;
    println!(
        "r0, r1 ({} s from the start to placed, reconciled, cached): {two:?}",
        started.elapsed().as_secs_f32()
    );
    // Each child was created with its owner's shard label (the member that created it).
    let first = children_follow(client, ns, &flavour, &two).await;

    // A join: r2 takes its share, each handed over by the member that held it, children
    // first.
    let joined = std::time::Instant::now();
    let mut r2 = start(cp.kubeconfig(), ns, "r2", &flavour.flags, dir);
    let (three, _) = settled(&api, &flavour, &[&r0, &r1, &r2], &["r0", "r1", "r2"], &[]).await;
    let after = children_follow(client, ns, &flavour, &three).await;
    same_children(&first, &after, "the join");
    println!(
        "r2 joined → {three:?} after {} s",
        joined.elapsed().as_secs_f32()
    );

    // A leave: r1 stops (SIGTERM); the sharder takes its Lease over and relabels its
    // objects' children, then the objects.
    let left = std::time::Instant::now();
    signal(&r1.child, "-TERM");
    let _ = r1.child.wait().await;
    let (two, counts) = settled(&api, &flavour, &[&r0, &r2], &["r0", "r2"], &[]).await;
    let after = children_follow(client, ns, &flavour, &two).await;
    same_children(&first, &after, "the leave");
    println!("r1 left → {two:?} after {} s", left.elapsed().as_secs_f32());

    // kill -9 r2: its objects move to r0 once its membership Lease expired, and r0
    // reconciles each of them (seen for the first time in its shard).
    let moved = two.values().filter(|o| *o == "r2").count();
    signal(&r2.child, "-9");
    let killed = std::time::Instant::now();
    let _ = r2.child.wait().await;
    let (alone, _) = settled(&api, &flavour, &[&r0], &["r0"], &[counts[0] + moved as f64]).await;
    assert!(alone.values().all(|o| o == "r0"));
    // The move recreated no child, and each child's label followed its owner.
    let after = children_follow(client, ns, &flavour, &alone).await;
    same_children(&first, &after, "the kill -9");
    println!(
        "kill -9 of r2 → its {moved} objects held, cached and reconciled by r0 after {} s",
        killed.elapsed().as_secs_f32()
    );
    drop(r0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coded_operator_objects_are_sharded_and_move_on_a_kill() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    install(&admin, vec![bosun_bookstore::BookStore::crd()]).await;
    let ns = test_namespace(&admin, "shard-coded").await.expect("ns");
    let dir = tempfile::tempdir().expect("dir");
    let flavour = Flavour {
        flags: vec!["--operators=bookstore".into()],
        resource: ApiResource::erase::<bosun_bookstore::BookStore>(&()),
        object: |ns, name| {
            json!({"apiVersion": "charts.example.com/v1", "kind": "BookStore",
                   "metadata": {"name": name, "namespace": ns}, "spec": {}})
        },
        done: |o| {
            o.metadata.generation.is_some()
                && o.data["status"]["observedGeneration"].as_i64() == o.metadata.generation
        },
        children: vec![
            ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
            ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&()),
            ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
        ],
        child_selector: "",
        per_object: None,
        cached_children: &["Deployment", "StatefulSet", "Service"],
    };
    scenario(&admin, &ns, flavour, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_releases_are_sharded_and_move_on_a_kill() {
    let (admin, ns, dir) = operator_env("shard-helm").await;
    let chart = write_chart(
        dir.path(),
        "shardchart",
        &[
            ("cm.yaml", CM_TEMPLATE),
            // A hook that persists: written at the install only, so after a move only the
            // move's relabelling gives it its owner's new label.
            ("hook.yaml", HOOK_TEMPLATE),
            // Not rendered with the chart's defaults: not a warm kind, its cache starts on
            // the first reconcile that renders it.
            (
                "secret.yaml",
                "{{- if gt (int .Values.size) 1 }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-late\nstringData:\n  size: {{ .Values.size | quote }}\n{{- end }}\n",
            ),
        ],
    );
    let watches = write_watches(
        &admin,
        dir.path(),
        GROUP,
        "ShardedChart",
        "chart",
        &chart,
        "",
    )
    .await;
    let flavour = Flavour {
        flags: vec![format!("--watches={}", watches.display())],
        resource: resource(GROUP, "ShardedChart", "shardedcharts"),
        object: |ns, name| {
            json!({"apiVersion": "shard.test.bosun.dev/v1", "kind": "ShardedChart",
                   "metadata": {"name": name, "namespace": ns}, "spec": {"size": 2}})
        },
        done: |o| condition(o, "Deployed"),
        children: vec![
            ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
        ],
        // Not the release records (Secrets the custom resource owns, carrying no label of
        // the operator's children).
        child_selector: "bosun.dev/owner-kind=shardedchart.shard.test.bosun.dev",
        // The release's ConfigMap and Secret, the hook.
        per_object: Some(3),
        cached_children: &["ConfigMap", "Secret"],
    };
    scenario(&admin, &ns, flavour, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ansible_roles_are_sharded_and_move_on_a_kill() {
    let (admin, ns, dir) = operator_env("shard-ansible").await;
    let role = write_role(
        dir.path(),
        "shardrole",
        "---\n- name: the ConfigMap\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: \"{{ ansible_operator_meta.name }}-cm\"\n        namespace: \"{{ ansible_operator_meta.namespace }}\"\n      data:\n        size: \"size-{{ size }}\"\n\
         - name: find the child written once\n  k8s_info:\n    api_version: v1\n    kind: ConfigMap\n    name: \"{{ ansible_operator_meta.name }}-once\"\n    namespace: \"{{ ansible_operator_meta.namespace }}\"\n  register: once\n\
         - name: the child written once, never updated (its label follows only by a move)\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: \"{{ ansible_operator_meta.name }}-once\"\n        namespace: \"{{ ansible_operator_meta.namespace }}\"\n      data:\n        at: first\n  when: once.resources | length == 0\n",
    );
    let watches = write_watches(&admin, dir.path(), GROUP, "ShardedRole", "role", &role, "").await;
    let mut flags = vec![format!("--watches={}", watches.display())];
    flags.push("--ansible-engine=native".into());
    let flavour = Flavour {
        flags,
        resource: resource(GROUP, "ShardedRole", "shardedroles"),
        object: |ns, name| {
            json!({"apiVersion": "shard.test.bosun.dev/v1", "kind": "ShardedRole",
                   "metadata": {"name": name, "namespace": ns}, "spec": {"size": 2}})
        },
        done: |o| condition(o, "Successful"),
        children: vec![ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(
            &(),
        )],
        // The role's child caches select nothing of their own: every ConfigMap of the
        // namespace (kube-root-ca.crt among them, unlabelled: in every replica's cache).
        child_selector: "",
        // The ConfigMap updated each run, the one written once.
        per_object: Some(2),
        cached_children: &["ConfigMap"],
    };
    scenario(&admin, &ns, flavour, dir.path()).await;
}
