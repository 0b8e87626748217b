//! What an operator needs granted, split by where it can be granted: rules on namespaced
//! resources go into a Role per watched namespace (or the ClusterRole when every namespace is
//! watched); rules on cluster-scoped resources always go into a ClusterRole.
use k8s_openapi::api::rbac::v1::PolicyRule;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rbac {
    pub namespaced: Vec<PolicyRule>,
    pub cluster: Vec<PolicyRule>,
}

impl Rbac {
    /// Both sets of `other` added to this one.
    pub fn merge(mut self, other: Rbac) -> Rbac {
        self.namespaced.extend(other.namespaced);
        self.cluster.extend(other.cluster);
        self
    }
}

/// A rule on `resources` of one API group.
pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A rule on named objects only (`get`/`update`/`patch`/`delete` can be narrowed by name;
/// `create`, `list` and `watch` cannot).
pub fn named_rule(group: &str, resource: &str, names: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(names.iter().map(|s| s.to_string()).collect()),
        ..rule(group, &[resource], verbs)
    }
}

/// What the runtime itself needs, besides the operators: Events (every operator publishes
/// them through [`crate::events`]) and, when `metrics_secure`, the reviews that check a
/// scraper's token.
pub fn runtime_rules(metrics_secure: bool) -> Rbac {
    let mut cluster = Vec::new();
    if metrics_secure {
        cluster.push(rule(
            "authentication.k8s.io",
            &["tokenreviews"],
            &["create"],
        ));
        cluster.push(rule(
            "authorization.k8s.io",
            &["subjectaccessreviews"],
            &["create"],
        ));
    }
    Rbac {
        namespaced: vec![rule("events.k8s.io", &["events"], &["create", "patch"])],
        cluster,
    }
}

/// Leader election, granted in the operator's own namespace only: `create` for the first
/// replica to make the Lease, then `get`/`update` of that one Lease by name.
pub fn lease_rules(lease_name: &str) -> Vec<PolicyRule> {
    vec![
        rule("coordination.k8s.io", &["leases"], &["create"]),
        named_rule(
            "coordination.k8s.io",
            "leases",
            &[lease_name],
            &["get", "update"],
        ),
    ]
}

/// True when a rule grants everything somewhere (a `*` verb, resource or group).
pub fn has_wildcard(rule: &PolicyRule) -> bool {
    let star = |v: &Option<Vec<String>>| v.iter().flatten().any(|s| s == "*");
    rule.verbs.iter().any(|v| v == "*") || star(&rule.resources) || star(&rule.api_groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_rules_name_the_lease() {
        let r = lease_rules("bosun-leader");
        assert_eq!(
            r[1].resource_names.as_deref(),
            Some(&["bosun-leader".to_string()][..])
        );
        assert!(r.iter().all(|r| !has_wildcard(r)));
    }

    #[test]
    fn wildcards_are_spotted() {
        assert!(has_wildcard(&rule("", &["*"], &["get"])));
        assert!(has_wildcard(&rule("*", &["pods"], &["get"])));
        assert!(has_wildcard(&rule("", &["pods"], &["*"])));
        assert!(!has_wildcard(&rule("", &["pods"], &["get"])));
    }

    #[test]
    fn metrics_reviews_only_when_secure() {
        assert!(runtime_rules(false).cluster.is_empty());
        assert_eq!(runtime_rules(true).cluster.len(), 2);
    }
}
