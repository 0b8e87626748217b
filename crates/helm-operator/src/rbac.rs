//! The RBAC a chart operator needs, derived from what the chart renders with its default
//! values (plus its hooks and `crds/`), with no wildcards — operator-sdk's scaffold grants
//! `secrets: "*"` and, with a cluster at hand, `"*"` on every group the chart touches.
//!
//! Kinds are mapped to their resources offline (`bosun rbac` needs no cluster): Kubernetes'
//! built-in kinds from a table, others by the usual English plural. Secrets are granted only
//! as the release storage needs them (none with `--release-storage=none`, unless the chart
//! renders Secrets). Charts that render Roles or ClusterRoles need `bind` and `escalate` on
//! them (Kubernetes refuses to let an operator grant what it does not hold otherwise).
use std::collections::{BTreeMap, BTreeSet};

use bosun_runtime::rbac::{rule, Rbac};
use kube::core::GroupVersionKind;

use crate::crd::plural;
use crate::storage::Storage;

/// Built-in kinds: (group, kind) → (resource, namespaced).
const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("", "ConfigMap", "configmaps", true),
    ("", "Secret", "secrets", true),
    ("", "Service", "services", true),
    ("", "ServiceAccount", "serviceaccounts", true),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("", "Pod", "pods", true),
    ("", "Endpoints", "endpoints", true),
    ("", "LimitRange", "limitranges", true),
    ("", "ResourceQuota", "resourcequotas", true),
    ("", "ReplicationController", "replicationcontrollers", true),
    ("", "Namespace", "namespaces", false),
    ("", "PersistentVolume", "persistentvolumes", false),
    ("", "Node", "nodes", false),
    ("apps", "Deployment", "deployments", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("batch", "Job", "jobs", true),
    ("batch", "CronJob", "cronjobs", true),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    (
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    ("policy", "PodSecurityPolicy", "podsecuritypolicies", false),
    ("networking.k8s.io", "Ingress", "ingresses", true),
    ("networking.k8s.io", "IngressClass", "ingressclasses", false),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    ("rbac.authorization.k8s.io", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("storage.k8s.io", "StorageClass", "storageclasses", false),
    ("storage.k8s.io", "CSIDriver", "csidrivers", false),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    ("apiregistration.k8s.io", "APIService", "apiservices", false),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    ("node.k8s.io", "RuntimeClass", "runtimeclasses", false),
    ("coordination.k8s.io", "Lease", "leases", true),
];

/// The resource and scope of a kind.
pub fn resource_of(gvk: &GroupVersionKind) -> (String, bool) {
    BUILTIN
        .iter()
        .find(|(g, k, _, _)| *g == gvk.group && *k == gvk.kind)
        .map(|(_, _, r, ns)| (r.to_string(), *ns))
        .unwrap_or_else(|| (plural(&gvk.kind), true))
}

const WRITE: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// What running `primary` with a chart that renders `kinds` needs.
pub fn rbac(
    primary: &GroupVersionKind,
    kinds: &BTreeSet<(String, String)>,
    has_crds: bool,
    storage: Storage,
) -> Rbac {
    let p = plural(&primary.kind);
    let mut namespaced = vec![
        rule(
            &primary.group,
            &[&p],
            &["get", "list", "watch", "patch", "update"],
        ),
        rule(
            &primary.group,
            &[&format!("{p}/status")],
            &["get", "patch", "update"],
        ),
        rule(&primary.group, &[&format!("{p}/finalizers")], &["update"]),
    ];
    let mut cluster = Vec::new();
    let mut by_group: BTreeMap<(String, bool), BTreeSet<String>> = BTreeMap::new();
    for (group, kind) in kinds {
        let (resource, ns) = resource_of(&GroupVersionKind::gvk(group, "", kind));
        by_group
            .entry((group.clone(), ns))
            .or_default()
            .insert(resource);
    }
    if storage == Storage::Secrets {
        by_group
            .entry((String::new(), true))
            .or_default()
            .insert("secrets".into());
    }
    for ((group, ns), resources) in by_group {
        let list: Vec<&str> = resources.iter().map(String::as_str).collect();
        let mut verbs = WRITE.to_vec();
        if group == "rbac.authorization.k8s.io"
            && list.iter().any(|r| *r == "roles" || *r == "clusterroles")
        {
            verbs.extend(["bind", "escalate"]);
        }
        let r = rule(&group, &list, &verbs);
        if ns {
            namespaced.push(r)
        } else {
            cluster.push(r)
        }
    }
    if has_crds {
        cluster.push(rule(
            "apiextensions.k8s.io",
            &["customresourcedefinitions"],
            &["get", "create"],
        ));
    }
    Rbac {
        namespaced,
        cluster,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_follow_the_rendered_kinds_and_the_storage() {
        let kinds: BTreeSet<(String, String)> = [
            ("apps", "Deployment"),
            ("", "Service"),
            ("rbac.authorization.k8s.io", "ClusterRole"),
            ("example.com", "Widget"),
        ]
        .iter()
        .map(|(g, k)| (g.to_string(), k.to_string()))
        .collect();
        let primary = GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore");
        let r = rbac(&primary, &kinds, false, Storage::Secrets);
        let text = serde_json::to_string(&r.namespaced).expect("json");
        assert!(text.contains("\"bookstores\"") && text.contains("\"bookstores/status\""));
        assert!(
            text.contains("\"deployments\"") && text.contains("\"services\",\"secrets\"")
                || text.contains("\"secrets\",\"services\""),
            "{text}"
        );
        assert!(text.contains("\"widgets\""));
        let cluster = serde_json::to_string(&r.cluster).expect("json");
        assert!(
            cluster.contains("clusterroles") && cluster.contains("escalate"),
            "{cluster}"
        );
        assert!(r
            .namespaced
            .iter()
            .chain(&r.cluster)
            .all(|x| !bosun_runtime::rbac::has_wildcard(x)));
        let none = rbac(&primary, &kinds, true, Storage::None);
        assert!(!serde_json::to_string(&none.namespaced)
            .expect("json")
            .contains("secrets"));
        assert!(serde_json::to_string(&none.cluster)
            .expect("json")
            .contains("customresourcedefinitions"));
    }
}
