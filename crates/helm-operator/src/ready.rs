//! Whether a release's workloads are rolled out and ready, from their cached status (the
//! child caches of these kinds keep `status` and `spec.replicas`, nothing else of the spec,
//! as JSON text).
use kube::core::{DynamicObject, GroupVersionKind};

/// The kinds whose readiness `Ready` waits for.
pub fn is_workload(gvk: &GroupVersionKind) -> bool {
    matches!(
        (gvk.group.as_str(), gvk.kind.as_str()),
        ("apps", "Deployment") | ("apps", "StatefulSet") | ("apps", "DaemonSet") | ("batch", "Job")
    )
}

/// What a child cache of a workload kind keeps: its status and its desired replicas.
pub fn slim(obj: &mut DynamicObject) {
    crate::objects::slim_meta(&mut obj.metadata);
    let replicas = obj.data.pointer("/spec/replicas").cloned();
    let status = obj.data.get("status").cloned();
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
pub fn not_ready(kind: &str, obj: &DynamicObject) -> Option<String> {
    let d = &bosun_watches::packed::data(&obj.data);
    let generation = obj.metadata.generation.unwrap_or(0);
    let observed = int(d, "/status/observedGeneration");
    let name = obj.metadata.name.as_deref().unwrap_or("");
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

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ApiResource;
    use serde_json::json;

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
        assert_eq!(not_ready("Deployment", &ready), None);
        let old = obj(
            "Deployment",
            3,
            json!({"spec": {"replicas": 2}, "status": {"observedGeneration": 2, "updatedReplicas": 2, "readyReplicas": 2, "replicas": 2}}),
        );
        assert!(not_ready("Deployment", &old).is_some());
        let surge = obj(
            "Deployment",
            2,
            json!({"spec": {"replicas": 1}, "status": {"observedGeneration": 2, "updatedReplicas": 1, "readyReplicas": 2, "replicas": 2}}),
        );
        assert!(not_ready("Deployment", &surge).is_some());
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
            let why = not_ready(kind, &just_created);
            assert!(why.is_some(), "{kind} is not ready when just created");
            assert_eq!(why, not_ready(kind, &first_sight), "{kind}");
        }
    }

    #[test]
    fn statefulsets_daemonsets_and_jobs() {
        assert_eq!(
            not_ready(
                "StatefulSet",
                &obj(
                    "StatefulSet",
                    1,
                    json!({"spec": {"replicas": 1}, "status": {"observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 1}})
                )
            ),
            None
        );
        assert!(not_ready("DaemonSet", &obj("DaemonSet", 1, json!({"status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2}}))).is_some());
        assert_eq!(
            not_ready(
                "Job",
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
}
