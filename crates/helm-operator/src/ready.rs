//! Whether a release's objects are rolled out and ready, from their cached status (the
//! child caches of these kinds keep `status` and `spec.replicas`, nothing else of the spec,
//! as JSON text).
//!
//! Deployments, StatefulSets, DaemonSets and Jobs by their own rules; any other kind that is
//! not one of Kubernetes' own (a custom resource: a database, a certificate, a bucket) by
//! kstatus' generic rules (sigs.k8s.io/cli-utils `pkg/kstatus`): its controller has seen its
//! generation (`status.observedGeneration`, when it reports one), its `Ready` and `Available`
//! conditions, when it has them, are True, and neither `Reconciling` nor `Stalled` is True.
//! An object whose controller reports nothing is current, as kstatus says. Kubernetes' own
//! kinds other than the workloads (ConfigMaps, Services, RBAC) have no readiness here.
use kube::core::{DynamicObject, GroupVersionKind};

/// The workload kinds, with rules of their own.
pub fn is_workload(gvk: &GroupVersionKind) -> bool {
    matches!(
        (gvk.group.as_str(), gvk.kind.as_str()),
        ("apps", "Deployment") | ("apps", "StatefulSet") | ("apps", "DaemonSet") | ("batch", "Job")
    )
}

/// A kind served by a CRD or an aggregated API rather than Kubernetes itself (whose groups
/// are the core group, the unqualified ones and `*.k8s.io`).
pub fn is_custom(gvk: &GroupVersionKind) -> bool {
    gvk.group.contains('.') && !gvk.group.ends_with(".k8s.io") && gvk.group != "k8s.io"
}

/// The kinds whose readiness `Ready` waits for (and whose caches keep their status, so that
/// a status change brings a reconcile).
pub fn is_tracked(gvk: &GroupVersionKind) -> bool {
    is_workload(gvk) || is_custom(gvk)
}

fn gvk_of(obj: &DynamicObject) -> GroupVersionKind {
    let (api_version, kind) = obj
        .types
        .as_ref()
        .map(|t| (t.api_version.as_str(), t.kind.as_str()))
        .unwrap_or_default();
    crate::objects::gvk_of(api_version, kind)
}

/// What a child cache of a workload kind keeps: its status and its desired replicas.
pub fn slim(obj: &mut DynamicObject) {
    crate::objects::slim_meta(&mut obj.metadata);
    let replicas = obj.data.pointer("/spec/replicas").cloned();
    let mut status = obj.data.get("status").cloned();
    // (A list's items may come without their kind: then the whole status stays.)
    if obj.types.is_some() && !is_workload(&gvk_of(obj)) {
        // A custom resource's status may be large (inventories, histories): what kstatus
        // reads of it, nothing more.
        status = status.map(|s| {
            let mut kept = serde_json::Map::new();
            for k in ["observedGeneration", "conditions"] {
                if let Some(v) = s.get(k) {
                    kept.insert(k.into(), v.clone());
                }
            }
            serde_json::Value::Object(kept)
        });
    }
    slim_into(obj, replicas, status);
}

fn slim_into(
    obj: &mut DynamicObject,
    replicas: Option<serde_json::Value>,
    status: Option<serde_json::Value>,
) {
    let mut data = serde_json::Map::new();
    if let Some(r) = replicas {
        data.insert("spec".into(), serde_json::json!({ "replicas": r }));
    }
    if let Some(s) = status {
        data.insert("status".into(), s);
    }
    // As JSON text: a tree of two or three small maps costs ≈1 KB, the text a few dozen
    // bytes ([`not_ready`] parses it).
    obj.data = serde_json::Value::String(serde_json::Value::Object(data).to_string());
}

/// A workload as the API server holds it right after this operator created it from
/// `desired`: generation 1, the desired replicas, no status (a create ignores the status).
pub fn created(desired: &DynamicObject) -> DynamicObject {
    let mut o = DynamicObject {
        types: desired.types.clone(),
        metadata: kube::core::ObjectMeta {
            name: desired.metadata.name.clone(),
            namespace: desired.metadata.namespace.clone(),
            generation: Some(1),
            ..Default::default()
        },
        data: serde_json::json!({}),
    };
    slim_into(
        &mut o,
        desired.data.pointer("/spec/replicas").cloned(),
        None,
    );
    o
}

fn int(v: &serde_json::Value, path: &str) -> i64 {
    v.pointer(path).and_then(|x| x.as_i64()).unwrap_or(0)
}

/// None when ready; otherwise what it waits for.
pub fn not_ready(gvk: &GroupVersionKind, obj: &DynamicObject) -> Option<String> {
    let d = &bosun_watches::packed::data(&obj.data);
    let kind = gvk.kind.as_str();
    let name = obj.metadata.name.as_deref().unwrap_or("");
    if !is_workload(gvk) {
        return kstatus(kind, name, obj.metadata.generation, d);
    }
    let generation = obj.metadata.generation.unwrap_or(0);
    let observed = int(d, "/status/observedGeneration");
    if kind != "Job" && observed < generation {
        return Some(format!(
            "{kind} {name}: the controller has not seen generation {generation} yet"
        ));
    }
    let want = d
        .pointer("/spec/replicas")
        .and_then(|r| r.as_i64())
        .unwrap_or(1);
    match kind {
        "Deployment" => {
            let (updated, ready, total) = (
                int(d, "/status/updatedReplicas"),
                int(d, "/status/readyReplicas"),
                int(d, "/status/replicas"),
            );
            (updated < want || ready < want || total > want)
                .then(|| format!("Deployment {name}: {ready}/{want} ready, {updated} updated"))
        }
        "StatefulSet" => {
            let (updated, ready) = (
                int(d, "/status/updatedReplicas"),
                int(d, "/status/readyReplicas"),
            );
            (ready < want || updated < want)
                .then(|| format!("StatefulSet {name}: {ready}/{want} ready, {updated} updated"))
        }
        "DaemonSet" => {
            let desired = int(d, "/status/desiredNumberScheduled");
            let (ready, updated) = (
                int(d, "/status/numberReady"),
                int(d, "/status/updatedNumberScheduled"),
            );
            (ready < desired || updated < desired)
                .then(|| format!("DaemonSet {name}: {ready}/{desired} ready"))
        }
        "Job" => {
            let conditions = d.pointer("/status/conditions").and_then(|c| c.as_array());
            let complete = conditions.is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            });
            (!complete).then(|| format!("Job {name}: not complete"))
        }
        _ => None,
    }
}

/// kstatus' generic rules (see the module doc); None when current.
fn kstatus(
    kind: &str,
    name: &str,
    generation: Option<i64>,
    d: &serde_json::Value,
) -> Option<String> {
    let observed = d
        .pointer("/status/observedGeneration")
        .and_then(|g| g.as_i64());
    if let (Some(generation), Some(observed)) = (generation, observed) {
        if observed < generation {
            return Some(format!(
                "{kind} {name}: its controller has not seen generation {generation} yet"
            ));
        }
    }
    let conditions = d
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let why = |c: &serde_json::Value| {
        let text = |k: &str| c[k].as_str().filter(|s| !s.is_empty());
        let mut s = format!(
            "{kind} {name}: {} is {}",
            text("type").unwrap_or_default(),
            text("status").unwrap_or("Unknown")
        );
        match (text("reason"), text("message")) {
            (Some(r), Some(m)) => s.push_str(&format!(" ({r}: {m})")),
            (Some(r), None) => s.push_str(&format!(" ({r})")),
            (None, Some(m)) => s.push_str(&format!(" ({m})")),
            (None, None) => {}
        }
        s
    };
    let reasons: Vec<String> = conditions
        .iter()
        .filter(|c| {
            let (t, st) = (c["type"].as_str(), c["status"].as_str());
            match t {
                Some("Ready") | Some("Available") => st != Some("True"),
                Some("Reconciling") | Some("Stalled") => st == Some("True"),
                _ => false,
            }
        })
        .map(why)
        .collect();
    (!reasons.is_empty()).then(|| reasons.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ApiResource;
    use serde_json::json;

    fn gvk(group: &str, kind: &str) -> GroupVersionKind {
        GroupVersionKind::gvk(group, "v1", kind)
    }

    fn obj(kind: &str, generation: i64, data: serde_json::Value) -> DynamicObject {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", kind));
        let mut o = DynamicObject::new("w", &ar);
        o.metadata.generation = Some(generation);
        o.data = data;
        slim(&mut o);
        o
    }

    #[test]
    fn deployments_are_ready_when_rolled_out() {
        let ready = obj(
            "Deployment",
            2,
            json!({"spec": {"replicas": 2, "template": {}}, "status": {"observedGeneration": 2, "updatedReplicas": 2, "readyReplicas": 2, "replicas": 2}}),
        );
        assert!(
            ready.data.as_str().is_some_and(|t| !t.contains("template")),
            "the spec is slimmed away: {}",
            ready.data
        );
        assert_eq!(not_ready(&gvk("apps", "Deployment"), &ready), None);
        let old = obj(
            "Deployment",
            3,
            json!({"spec": {"replicas": 2}, "status": {"observedGeneration": 2, "updatedReplicas": 2, "readyReplicas": 2, "replicas": 2}}),
        );
        assert!(not_ready(&gvk("apps", "Deployment"), &old).is_some());
        let surge = obj(
            "Deployment",
            2,
            json!({"spec": {"replicas": 1}, "status": {"observedGeneration": 2, "updatedReplicas": 1, "readyReplicas": 2, "replicas": 2}}),
        );
        assert!(not_ready(&gvk("apps", "Deployment"), &surge).is_some());
    }

    /// The readiness of a workload this reconcile just created is what its first cached copy
    /// will show until its controller acts: the reconcile that copy's event brings finds the
    /// same Ready message, so the status is written once per install, not twice.
    #[test]
    fn a_workload_just_created_reads_as_its_first_cached_copy() {
        for kind in ["Deployment", "StatefulSet", "DaemonSet", "Job"] {
            let group = if kind == "Job" { "batch" } else { "apps" };
            let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
            let mut desired = DynamicObject::new("w", &ar).within("ns");
            desired.data = json!({"spec": {"replicas": 2, "template": {}}});
            let mut first_sight = desired.clone();
            first_sight.metadata.generation = Some(1);
            first_sight.metadata.uid = Some("u".into());
            slim(&mut first_sight);
            let just_created = created(&desired);
            let why = not_ready(&gvk(group, kind), &just_created);
            assert!(why.is_some(), "{kind} is not ready when just created");
            assert_eq!(why, not_ready(&gvk(group, kind), &first_sight), "{kind}");
        }
    }

    #[test]
    fn statefulsets_daemonsets_and_jobs() {
        assert_eq!(
            not_ready(
                &gvk("apps", "StatefulSet"),
                &obj(
                    "StatefulSet",
                    1,
                    json!({"spec": {"replicas": 1}, "status": {"observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 1}})
                )
            ),
            None
        );
        assert!(not_ready(&gvk("apps", "DaemonSet"), &obj("DaemonSet", 1, json!({"status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2}}))).is_some());
        assert_eq!(
            not_ready(
                &gvk("batch", "Job"),
                &obj(
                    "Job",
                    1,
                    json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
                )
            ),
            None
        );
        assert!(is_workload(&GroupVersionKind::gvk("batch", "v1", "Job")));
        assert!(!is_workload(&GroupVersionKind::gvk("", "v1", "Service")));
    }

    #[test]
    fn any_other_kind_by_kstatus_rules() {
        let widget = gvk("example.com", "Widget");
        let with = |generation: i64, status: serde_json::Value| {
            let ar = kube::core::ApiResource::from_gvk(&widget);
            let mut o = DynamicObject::new("w", &ar);
            o.metadata.generation = Some(generation);
            o.data = json!({"spec": {"big": "x"}, "status": status});
            slim(&mut o);
            o
        };
        assert_eq!(
            not_ready(&widget, &with(1, json!(null))),
            None,
            "nothing reported"
        );
        let lagging = with(2, json!({"observedGeneration": 1}));
        assert!(not_ready(&widget, &lagging).is_some_and(|m| m.contains("generation 2")));
        let provisioning = with(
            1,
            json!({"observedGeneration": 1, "history": ["a"], "conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning", "message": "volume pending"}]}),
        );
        assert!(
            provisioning
                .data
                .as_str()
                .is_some_and(|t| !t.contains("history")),
            "only what kstatus reads is cached: {}",
            provisioning.data
        );
        assert_eq!(
            not_ready(&widget, &provisioning).as_deref(),
            Some("Widget w: Ready is False (Provisioning: volume pending)")
        );
        for (t, st, ready) in [
            ("Available", "False", false),
            ("Available", "True", true),
            ("Reconciling", "True", false),
            ("Stalled", "True", false),
            ("Stalled", "False", true),
            ("Synced", "False", true),
        ] {
            let o = with(1, json!({"conditions": [{"type": t, "status": st}]}));
            assert_eq!(not_ready(&widget, &o).is_none(), ready, "{t}={st}");
        }
        assert!(is_tracked(&widget));
        assert!(!is_tracked(&gvk("networking.k8s.io", "Ingress")));
        assert!(!is_tracked(&gvk("", "ConfigMap")));
        assert!(is_tracked(&gvk("apps", "Deployment")));
    }
}
