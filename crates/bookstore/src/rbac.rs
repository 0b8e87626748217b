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
        // The primary cache; the finalizer is a merge patch.
        rule(
            "charts.example.com",
            &["bookstores"],
            &["list", "watch", "patch"],
        ),
        // Status is server-side applied.
        rule("charts.example.com", &["bookstores/status"], &["patch"]),
        // Children's owner references block their owner's deletion; clusters enforcing
        // OwnerReferencesPermissionEnforcement require this to set them.
        rule(
            "charts.example.com",
            &["bookstores/finalizers"],
            &["update"],
        ),
        // Caches; apply, and apply that creates; the applier's lookup by name.
        rule(
            "apps",
            &["deployments"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // ... and the orphan delete that recreates it on resize.
        rule(
            "apps",
            &["statefulsets"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(
            "",
            &["services"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // Claims: looked up by name before a StatefulSet mounts them, grown on resize,
        // relabelled on adoption, deleted only when the spec asks.
        rule(
            "",
            &["persistentvolumeclaims"],
            &["get", "list", "watch", "patch", "delete"],
        ),
        // Pods: restarted one at a time to finish a file system resize; given a
        // non-controller owner reference before their StatefulSet is recreated.
        rule("", &["pods"], &["list", "patch", "delete"]),
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
    use std::collections::BTreeSet;

    /// (group, resource) → verbs, as granted.
    fn granted() -> std::collections::BTreeMap<(String, String), BTreeSet<String>> {
        let r = super::rbac();
        let mut m = std::collections::BTreeMap::new();
        for rule in r.namespaced.iter().chain(&r.cluster) {
            for g in rule.api_groups.iter().flatten() {
                for res in rule.resources.iter().flatten() {
                    m.entry((g.clone(), res.clone()))
                        .or_insert_with(BTreeSet::new)
                        .extend(rule.verbs.iter().cloned());
                }
            }
        }
        m
    }

    /// Every verb granted is one the code calls, and the reverse: the e2e and reliability
    /// tests run the operator as a ServiceAccount holding exactly these rules, so a verb
    /// missing here fails them; a verb no code calls fails this test.
    #[test]
    fn grants_exactly_what_the_code_calls() {
        let want: &[(&str, &str, &[&str])] = &[
            // Primary cache (list, watch); finalizer (merge patch).
            (
                "charts.example.com",
                "bookstores",
                &["list", "patch", "watch"],
            ),
            // Status: server-side apply.
            ("charts.example.com", "bookstores/status", &["patch"]),
            // Owner references with blockOwnerDeletion (OwnerReferencesPermissionEnforcement).
            ("charts.example.com", "bookstores/finalizers", &["update"]),
            // Caches (list, watch); apply (patch), apply that creates (create), the applier's
            // lookup by name for kinds that refuse its guarded create (get).
            (
                "apps",
                "deployments",
                &["create", "get", "list", "patch", "watch"],
            ),
            // ... and the orphan delete that recreates it on resize.
            (
                "apps",
                "statefulsets",
                &["create", "delete", "get", "list", "patch", "watch"],
            ),
            ("", "services", &["create", "get", "list", "patch", "watch"]),
            // Cache and fresh lists; exact-name checks (get); grow, adopt, restart marker
            // (patch); dataPolicy: Delete (delete).
            (
                "",
                "persistentvolumeclaims",
                &["delete", "get", "list", "patch", "watch"],
            ),
            // Restarts (list, delete); owner reference before a recreate (patch).
            ("", "pods", &["delete", "list", "patch"]),
            // Expansion allowed? The named class (get) or the default one (list).
            ("storage.k8s.io", "storageclasses", &["get", "list"]),
        ];
        let want: std::collections::BTreeMap<(String, String), BTreeSet<String>> = want
            .iter()
            .map(|(g, r, v)| {
                (
                    (g.to_string(), r.to_string()),
                    v.iter().map(|s| s.to_string()).collect(),
                )
            })
            .collect();
        assert_eq!(granted(), want);
    }

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
