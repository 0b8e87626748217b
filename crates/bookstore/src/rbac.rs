//! The RBAC rules this controller needs, and nothing more. Printed by `bosun rbac` and used by
//! the install manifests; tests run the operator with exactly these rules.
use k8s_openapi::api::rbac::v1::PolicyRule;

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// Rules for the BookStore controller (namespaced resources; grant in a ClusterRole for all
/// namespaces, or a Role per watched namespace).
pub fn rules() -> Vec<PolicyRule> {
    vec![
        rule(
            "charts.example.com",
            &["bookstores"],
            &["get", "list", "watch", "patch", "update"],
        ),
        rule(
            "charts.example.com",
            &["bookstores/status"],
            &["get", "patch", "update"],
        ),
        rule(
            "charts.example.com",
            &["bookstores/finalizers"],
            &["update"],
        ),
        rule(
            "apps",
            &["deployments", "statefulsets"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(
            "",
            &["services"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // Claims: grown on resize, relabelled on adoption, deleted only when the spec asks.
        rule(
            "",
            &["persistentvolumeclaims"],
            &["get", "list", "watch", "patch", "delete"],
        ),
        // Pods: restarted one at a time to finish a file system resize.
        rule("", &["pods"], &["get", "list", "delete"]),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
    ]
}

/// Cluster-scoped reads (storage classes decide whether a volume can grow).
pub fn cluster_rules() -> Vec<PolicyRule> {
    vec![rule(
        "storage.k8s.io",
        &["storageclasses"],
        &["get", "list"],
    )]
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_wildcards() {
        for r in super::rules().into_iter().chain(super::cluster_rules()) {
            assert!(!r.verbs.iter().any(|v| v == "*"));
            assert!(!r.resources.unwrap_or_default().iter().any(|v| v == "*"));
            assert!(!r.api_groups.unwrap_or_default().iter().any(|v| v == "*"));
        }
    }
}
