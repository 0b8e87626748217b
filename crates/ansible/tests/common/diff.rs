//! The differential harness on a real kube-apiserver: one role run by ansible-playbook (with
//! the extra vars ansible-operator passes) in one namespace and by bosun in another, then
//! compared task by task, stats, registered results and the objects left in the namespaces.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bosun_ansible::extra_vars::{for_cr, ExtraVarsOptions};
use bosun_ansible::{Discovery, LoadOptions, Outcome, Owner, Role, RunContext, TaskStatus};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{json, Value as Json};

pub struct Case<'a> {
    pub roles_dir: PathBuf,
    pub role: &'a str,
    pub group: &'a str,
    pub kind: &'a str,
    /// The CR's spec; `__NS__` is replaced by the run's namespace.
    pub spec: Json,
    pub watch_vars: Option<Json>,
    /// Kinds whose objects are compared: (apiVersion, kind, plural).
    pub kinds: Vec<(&'a str, &'a str, &'a str)>,
}

pub struct Side {
    pub ns: String,
    pub tasks: Vec<(String, Json)>,
    pub stats: Json,
    pub objects: Vec<Json>,
    pub cr_status: Json,
}

pub fn crate_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

pub async fn ensure_crd(client: &kube::Client, group: &str, kind: &str) {
    let plural = format!("{}s", kind.to_lowercase());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let ar = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let obj: DynamicObject = serde_json::from_value(crd).expect("test value");
    let _ = api.create(&PostParams::default(), &obj).await;
    // Wait until the new kind is served.
    let cr_ar = cr_resource(group, kind);
    for _ in 0..100 {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &cr_ar);
        if api.list(&ListParams::default()).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("CRD {kind}.{group} not served");
}

pub fn cr_resource(group: &str, kind: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1alpha1".into(),
        api_version: format!("{group}/v1alpha1"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

pub async fn create_cr(client: &kube::Client, case: &Case<'_>, ns: &str) -> Json {
    let spec: Json =
        serde_json::from_str(&case.spec.to_string().replace("__NS__", ns)).expect("test value");
    let cr = json!({"apiVersion": format!("{}/v1alpha1", case.group), "kind": case.kind,
                    "metadata": {"name": "sample", "namespace": ns}, "spec": spec});
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &cr_resource(case.group, case.kind));
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(cr).expect("test value"),
        )
        .await
        .expect("test value");
    serde_json::to_value(created).expect("test value")
}

pub async fn get_cr(client: &kube::Client, case: &Case<'_>, ns: &str) -> Json {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &cr_resource(case.group, case.kind));
    serde_json::to_value(api.get("sample").await.expect("test value")).expect("test value")
}

pub fn extra_vars(case: &Case<'_>, cr: &Json) -> serde_json::Map<String, Json> {
    let wv = case.watch_vars.as_ref().and_then(Json::as_object);
    for_cr(
        cr,
        &ExtraVarsOptions {
            snake_case: true,
            mark_unsafe: false,
            watch_vars: wv,
            finalizer_vars: None,
            group: case.group,
            kind: case.kind,
        },
    )
}

/// ansible-playbook, as ansible-runner runs a role (`roles: [role]`, localhost, no facts).
pub fn run_ansible(
    case: &Case<'_>,
    kubeconfig: &Path,
    extra: &serde_json::Map<String, Json>,
) -> (Vec<(String, Json)>, Json) {
    let dir = tempfile::tempdir().expect("test value");
    let playbook = json!([{"hosts": "localhost", "gather_facts": false, "roles": [case.role]}]);
    let roles = case.roles_dir.display().to_string();
    let colls = crate_dir().join("tests/collections").display().to_string();
    let kc = kubeconfig.display().to_string();
    let env = [
        ("ANSIBLE_ROLES_PATH", roles.as_str()),
        ("ANSIBLE_COLLECTIONS_PATH", colls.as_str()),
        ("K8S_AUTH_KUBECONFIG", kc.as_str()),
        ("KUBECONFIG", kc.as_str()),
    ];
    let report = super::run_playbook(dir.path(), &playbook, &Json::Object(extra.clone()), &env);
    let tasks = super::task_results(&report)
        .into_iter()
        .filter(|(_, r)| !r.is_null())
        .collect();
    (tasks, report["stats"]["localhost"].clone())
}

pub async fn run_bosun(
    case: &Case<'_>,
    client: &kube::Client,
    discovery: &Arc<Discovery>,
    cr: &Json,
    extra: &serde_json::Map<String, Json>,
) -> Outcome {
    let opts = LoadOptions {
        roles_path: vec![case.roles_dir.clone()],
        collections_paths: vec![],
        cwd: case.roles_dir.clone(),
    };
    let role = Role::load(case.role, &opts).unwrap_or_else(|e| panic!("load {}: {e}", case.role));
    let ctx = RunContext::new(
        Some(client.clone()),
        discovery.clone(),
        Owner::from_object(cr),
    );
    role.run(&ctx, extra).await
}

/// bosun's task results in the JSON callback's shape.
pub fn bosun_tasks(o: &Outcome) -> Vec<(String, Json)> {
    o.tasks
        .iter()
        .map(|t| {
            let mut r = t.result.clone();
            if matches!(
                t.status,
                TaskStatus::Failed | TaskStatus::Rescued | TaskStatus::Ignored
            ) {
                r["failed"] = json!(true);
            }
            (t.name.clone(), r)
        })
        .collect()
}

pub fn bosun_stats(o: &Outcome) -> Json {
    json!({"ok": o.stats.ok, "changed": o.stats.changed, "skipped": o.stats.skipped, "failures": o.stats.failures, "rescued": o.stats.rescued, "ignored": o.stats.ignored})
}

pub async fn objects(client: &kube::Client, ns: &str, kinds: &[(&str, &str, &str)]) -> Vec<Json> {
    let mut out = Vec::new();
    for (av, kind, plural) in kinds {
        let (group, version) = av.split_once('/').unwrap_or(("", av));
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: av.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        for o in api
            .list(&ListParams::default())
            .await
            .expect("test value")
            .items
        {
            if o.metadata.name.as_deref() == Some("kube-root-ca.crt") {
                continue;
            }
            let mut j = serde_json::to_value(&o).expect("test value");
            j["kind"] = json!(kind);
            out.push(normalize(j, ns));
        }
    }
    out.sort_by_key(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]));
    out
}

/// Drops what the server fills in (and the namespace, which differs by design).
pub fn normalize(mut o: Json, ns: &str) -> Json {
    if let Some(m) = o.get_mut("metadata").and_then(Json::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "selfLink",
            "generation",
            "namespace",
            "ownerReferences",
        ] {
            m.remove(k);
        }
        if let Some(a) = m.get_mut("annotations").and_then(Json::as_object_mut) {
            a.remove("deployment.kubernetes.io/revision");
            if a.is_empty() {
                m.remove("annotations");
            }
        }
    }
    if let Some(o) = o.as_object_mut() {
        o.remove("status");
        o.remove("apiVersion");
    }
    if let Some(s) = o.get_mut("spec").and_then(Json::as_object_mut) {
        s.remove("clusterIP");
        s.remove("clusterIPs");
    }
    serde_json::from_str(&o.to_string().replace(ns, "NS")).expect("test value")
}

fn strip_role(name: &str) -> &str {
    name.split_once(" : ").map_or(name, |(_, n)| n)
}

/// The parts of a task result compared (keys every engine sets the same way).
pub fn comparable(r: &Json, ns: &str) -> Json {
    let mut out = serde_json::Map::new();
    let flag = |k: &str| r.get(k).and_then(Json::as_bool).unwrap_or(false);
    out.insert("changed".into(), json!(flag("changed")));
    out.insert("failed".into(), json!(flag("failed")));
    out.insert("skipped".into(), json!(flag("skipped")));
    for k in [
        "msg",
        "ansible_facts",
        "method",
        "period",
        "include",
        "false_condition",
        "attempts",
        "assertion",
        "censored",
    ] {
        if let Some(v) = r.get(k) {
            let mut v = v.clone();
            // The API server's error is quoted differently by each client: the module's own
            // words before it are compared.
            if let Some(m) = v.as_str().filter(|m| m.starts_with("Failed to ")) {
                v = json!(m.split(':').next().unwrap_or_default());
            }
            strip_server_fields(&mut v);
            out.insert(k.into(), v);
        }
    }
    if let Some(res) = r.get("result").filter(|x| x.is_object()) {
        out.insert(
            "result".into(),
            json!({"kind": res.get("kind"), "name": res.pointer("/metadata/name")}),
        );
    }
    if let Some(res) = r.get("resources").and_then(Json::as_array) {
        out.insert(
            "resources".into(),
            json!(res
                .iter()
                .map(|x| x.pointer("/metadata/name").cloned())
                .collect::<Vec<_>>()),
        );
    }
    if let Some(items) = r.get("results").and_then(Json::as_array) {
        out.insert(
            "results".into(),
            Json::Array(
                items
                    .iter()
                    .map(|i| {
                        let mut c = comparable(i, ns);
                        for k in ["item", "ansible_loop_var", "ansible_index_var"] {
                            if let Some(v) = i.get(k) {
                                c[k] = v.clone();
                            }
                        }
                        c
                    })
                    .collect(),
            ),
        );
    }
    serde_json::from_str(&Json::Object(out).to_string().replace(ns, "NS")).expect("test value")
}

/// Removes what the server fills in from any object inside a value.
fn strip_server_fields(v: &mut Json) {
    match v {
        Json::Object(m) => {
            if let Some(meta) = m.get_mut("metadata").and_then(Json::as_object_mut) {
                for k in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "managedFields",
                    "generation",
                    "ownerReferences",
                    "selfLink",
                ] {
                    meta.remove(k);
                }
            }
            m.values_mut().for_each(strip_server_fields);
        }
        Json::Array(a) => a.iter_mut().for_each(strip_server_fields),
        _ => {}
    }
}

/// Compares both engines' reports; returns the differences.
pub fn differences(a: &Side, b: &Side) -> Vec<String> {
    let mut d = Vec::new();
    let names_a: Vec<&str> = a.tasks.iter().map(|(n, _)| strip_role(n)).collect();
    let names_b: Vec<&str> = b.tasks.iter().map(|(n, _)| n.as_str()).collect();
    if names_a != names_b {
        d.push(format!(
            "task sequence differs:\n  ansible: {names_a:?}\n  bosun:   {names_b:?}"
        ));
    }
    for ((na, ra), (_, rb)) in a.tasks.iter().zip(&b.tasks) {
        let (ca, cb) = (comparable(ra, &a.ns), comparable(rb, &b.ns));
        if ca != cb {
            d.push(format!("task {na:?}:\n  ansible: {ca}\n  bosun:   {cb}"));
        }
    }
    let stats = |s: &Json| json!({"ok": s["ok"], "changed": s["changed"], "skipped": s["skipped"], "failures": s["failures"], "rescued": s["rescued"], "ignored": s["ignored"]});
    if stats(&a.stats) != stats(&b.stats) {
        d.push(format!(
            "stats differ:\n  ansible: {}\n  bosun:   {}",
            stats(&a.stats),
            stats(&b.stats)
        ));
    }
    if a.objects != b.objects {
        d.push(format!(
            "objects differ:\n  ansible: {}\n  bosun:   {}",
            serde_json::to_string_pretty(&a.objects).expect("test value"),
            serde_json::to_string_pretty(&b.objects).expect("test value")
        ));
    }
    let strip_times = |s: &Json, ns: &str| {
        let mut s: Json =
            serde_json::from_str(&s.to_string().replace(ns, "NS")).expect("test value");
        if let Some(cs) = s.get_mut("conditions").and_then(Json::as_array_mut) {
            for c in cs {
                if let Some(o) = c.as_object_mut() {
                    o.remove("lastTransitionTime");
                }
            }
        }
        s
    };
    if strip_times(&a.cr_status, &a.ns) != strip_times(&b.cr_status, &b.ns) {
        d.push(format!(
            "CR status differs:\n  ansible: {}\n  bosun:   {}",
            a.cr_status, b.cr_status
        ));
    }
    d
}
