//! An owned CRD's `resources`: the kinds its operator creates, read from the operator's own
//! RBAC rules (a rule with `create` on a known resource), so consoles show what a custom
//! resource is made of. Resources bosun cannot name a kind for are left out.
use serde_json::{json, Value};

/// `(apiGroup, resource) → (kind, version)` for the kinds operators build.
const KINDS: [(&str, &str, &str, &str); 18] = [
    ("", "configmaps", "ConfigMap", "v1"),
    ("", "secrets", "Secret", "v1"),
    ("", "services", "Service", "v1"),
    ("", "serviceaccounts", "ServiceAccount", "v1"),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim", "v1"),
    ("", "pods", "Pod", "v1"),
    ("apps", "deployments", "Deployment", "v1"),
    ("apps", "statefulsets", "StatefulSet", "v1"),
    ("apps", "daemonsets", "DaemonSet", "v1"),
    ("apps", "replicasets", "ReplicaSet", "v1"),
    ("batch", "jobs", "Job", "v1"),
    ("batch", "cronjobs", "CronJob", "v1"),
    ("networking.k8s.io", "ingresses", "Ingress", "v1"),
    (
        "networking.k8s.io",
        "networkpolicies",
        "NetworkPolicy",
        "v1",
    ),
    (
        "policy",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        "v1",
    ),
    ("rbac.authorization.k8s.io", "roles", "Role", "v1"),
    (
        "rbac.authorization.k8s.io",
        "rolebindings",
        "RoleBinding",
        "v1",
    ),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        "v2",
    ),
];

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// `[{kind, name, version}]` for what `rules` let the operator create, in the table's order;
/// for an operator that creates none (its resources live outside Kubernetes, as VmGroup's
/// VMs), what it reads (its credentials Secret, say).
pub fn from_rules(rules: &[Value]) -> Vec<Value> {
    let with = |verb: &str| -> Vec<Value> {
        KINDS
            .iter()
            .filter(|(group, resource, _, _)| {
                rules.iter().any(|r| {
                    strings(&r["verbs"]).contains(&verb)
                        && strings(&r["apiGroups"]).contains(group)
                        && strings(&r["resources"]).contains(resource)
                })
            })
            .map(|(_, resource, kind, version)| {
                json!({"kind": kind, "name": resource, "version": version})
            })
            .collect()
    };
    let created = with("create");
    if created.is_empty() {
        with("get")
    } else {
        created
    }
}
