//! Whether a release's workloads are rolled out and ready, from their cached status (the
//! child caches of these kinds keep `status` and `spec.replicas`, nothing else of the spec).
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
    let replicas = obj.data.pointer("/spec/replicas").cloned();
    let status = obj.data.get("status").cloned();
    let mut data = serde_json::Map::new();
    if let Some(r) = replicas {
        data.insert("spec".into(), serde_json::json!({ "replicas": r }));
    }
    if let Some(s) = status {
        data.insert("status".into(), s);
    }
    obj.data = serde_json::Value::Object(data);
}

fn int(v: &serde_json::Value, path: &str) -> i64 {
    v.pointer(path).and_then(|x| x.as_i64()).unwrap_or(0)
}

/// None when ready; otherwise what it waits for.
pub fn not_ready(kind: &str, obj: &DynamicObject) -> Option<String> {
    let d = &obj.data;
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
        assert_eq!(
            ready.data.pointer("/spec/template"),
            None,
            "the spec is slimmed away"
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
