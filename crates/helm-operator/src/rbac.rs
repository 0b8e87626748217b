//! The RBAC a chart operator needs, derived from what the chart renders with its default
//! values (plus its hooks and `crds/`), with no wildcards — operator-sdk's scaffold grants
//! `secrets: "*"` and, with a cluster at hand, `"*"` on every group the chart touches.
//!
//! Kinds are mapped to their resources offline (`bosun rbac` needs no cluster) by
//! [`bosun_watches::kinds`], shared with the Ansible flavour. Secrets are granted only
//! as the release storage needs them (none with `--release-storage=none`, unless the chart
//! renders Secrets). Charts that render Roles or ClusterRoles need `bind` and `escalate` on
//! them (Kubernetes refuses to let an operator grant what it does not hold otherwise).
use std::collections::{BTreeMap, BTreeSet};

use bosun_runtime::rbac::{rule, Rbac};
use kube::core::GroupVersionKind;

use crate::storage::Storage;

use bosun_watches::kinds::plural;
pub use bosun_watches::kinds::resource_of;

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
