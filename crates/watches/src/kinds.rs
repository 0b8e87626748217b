//! Kinds mapped to their API resources offline (`bosun crd`/`bosun rbac` need no cluster):
//! Kubernetes' built-in kinds from a table, others by the plural operator-sdk's scaffolding
//! gives a kind. Shared by both flavours.
use kube::core::GroupVersionKind;

/// `kind` → plural as operator-sdk's scaffolding (flect) does for common English.
pub fn plural(kind: &str) -> String {
    let k = kind.to_lowercase();
    if let Some(stem) = k.strip_suffix('y') {
        if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) {
            return format!("{stem}ies");
        }
    }
    if k.ends_with('s')
        || k.ends_with('x')
        || k.ends_with("ch")
        || k.ends_with("sh")
        || k.ends_with('z')
    {
        return format!("{k}es");
    }
    format!("{k}s")
}

/// The group of a built-in kind (`Ingress` → `networking.k8s.io`), for a kind whose
/// apiVersion a template computes.
pub fn builtin_group(kind: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(_, k, _, _)| *k == kind)
        .map(|(g, _, _, _)| *g)
}

/// Whether `group` is one of Kubernetes' own API groups (the core group `""`, `apps`,
/// `batch`, `*.k8s.io`, ...): an entry watching a kind of it watches what the API server
/// already serves, and has no CRD to install.
pub fn is_builtin_group(group: &str) -> bool {
    group.is_empty() || !group.contains('.') || group.ends_with(".k8s.io")
}

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
    ("", "Event", "events", true),
    ("events.k8s.io", "Event", "events", true),
    ("discovery.k8s.io", "EndpointSlice", "endpointslices", true),
    ("", "PodTemplate", "podtemplates", true),
];

/// The resource and scope of a kind.
pub fn resource_of(gvk: &GroupVersionKind) -> (String, bool) {
    BUILTIN
        .iter()
        .find(|(g, k, _, _)| *g == gvk.group && *k == gvk.kind)
        .map(|(_, _, r, ns)| (r.to_string(), *ns))
        .unwrap_or_else(|| (plural(&gvk.kind), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_builtin_resources() {
        for (k, p) in [
            ("BookStore", "bookstores"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
            ("Box", "boxes"),
        ] {
            assert_eq!(plural(k), p);
        }
        let r = |g: &str, k: &str| resource_of(&GroupVersionKind::gvk(g, "v1", k));
        assert_eq!(r("", "Endpoints"), ("endpoints".to_string(), true));
        assert_eq!(r("", "Namespace"), ("namespaces".to_string(), false));
        assert_eq!(r("apps", "Deployment"), ("deployments".to_string(), true));
        assert_eq!(r("example.com", "Widget"), ("widgets".to_string(), true));
    }
}

#[cfg(test)]
mod group_tests {
    use super::*;

    #[test]
    fn kubernetes_groups_are_builtin_and_domains_are_not() {
        for g in [
            "",
            "apps",
            "batch",
            "networking.k8s.io",
            "rbac.authorization.k8s.io",
        ] {
            assert!(is_builtin_group(g), "{g}");
        }
        for g in ["cache.example.com", "test.bosun.dev", "charts.example.com"] {
            assert!(!is_builtin_group(g), "{g}");
        }
    }
}
