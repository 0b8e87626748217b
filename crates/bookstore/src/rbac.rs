//! The RBAC rules this controller needs, and nothing more. Printed by `bosun rbac` and used by
//! the install manifests; tests run the operator with exactly these rules.
use bosun_runtime::rbac::{rule, Rbac};
use k8s_openapi::api::rbac::v1::PolicyRule;

/// What the BookStore operator needs granted.
pub fn rbac() -> Rbac {
    Rbac {
        namespaced: namespaced(),
        cluster: cluster(),
    }
}

/// Rules on namespaced resources (a ClusterRole for all namespaces, or a Role per watched
/// namespace).
fn namespaced() -> Vec<PolicyRule> {
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
        // Pods: restarted one at a time to finish a file system resize; given a
        // non-controller owner reference before their StatefulSet is recreated.
        rule("", &["pods"], &["get", "list", "patch", "delete"]),
    ]
}

/// Cluster-scoped reads (storage classes decide whether a volume can grow).
fn cluster() -> Vec<PolicyRule> {
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
        let r = super::rbac();
        assert!(r
            .namespaced
            .iter()
            .chain(&r.cluster)
            .all(|r| !bosun_runtime::rbac::has_wildcard(r)));
    }
}
