//! The RBAC a chart operator needs, derived from what the chart renders with its default
//! values (plus its hooks and `crds/`), with no wildcards — operator-sdk's scaffold grants
//! `secrets: "*"` and, with a cluster at hand, `"*"` on every group the chart touches.
//!
//! Kinds are mapped to their resources offline (`bosun rbac` needs no cluster) by
//! [`bosun_watches::kinds`], shared with the Ansible flavour. Secrets are granted only
//! as the release storage needs them (none with `--release-storage=none`, unless the chart
//! renders Secrets).
//!
//! Roles a chart renders: Kubernetes lets a user create a Role only with permissions it
//! holds, or with `escalate`; and bind a role only if it holds its permissions, or with
//! `bind`. Unscoped `bind` and `escalate` let whoever may create the custom resource grant
//! anything through a chart that templates rules or a `roleRef` from values (review M12).
//! So the operator holds neither: it holds the rules of the Roles and ClusterRoles its chart
//! renders with the default values (so it can create them), and `bind` only on the roles the
//! chart's bindings name literally without rendering them (`view`, say). A rule a value adds
//! then fails with 403 in the CR's status instead of granting it; the load warnings say so.
use std::collections::{BTreeMap, BTreeSet};

use bosun_helm::render::manifest::Manifest;
use bosun_runtime::rbac::{named_rule, rule, Rbac};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use kube::core::GroupVersionKind;

use crate::storage::Storage;

use bosun_watches::kinds::plural;
pub use bosun_watches::kinds::resource_of;

const WRITE: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// What the RBAC objects of a chart's default render need the operator to hold.
#[derive(Debug, Default, PartialEq)]
pub struct ChartGrants {
    /// The rules of its Roles.
    pub namespaced: Vec<PolicyRule>,
    /// The rules of its ClusterRoles (creating one takes holding them cluster-wide).
    pub cluster: Vec<PolicyRule>,
    /// Roles its bindings name that it does not render: (`roles` | `clusterroles`, name).
    pub bound: BTreeSet<(String, String)>,
}

/// Reads the Roles, ClusterRoles and bindings of rendered manifests. A document that does
/// not read as its kind is skipped (the install reports it).
pub fn chart_grants(manifests: &[&Manifest]) -> ChartGrants {
    #[derive(serde::Deserialize)]
    struct RoleDoc {
        #[serde(default)]
        rules: Option<Vec<PolicyRule>>,
    }
    #[derive(serde::Deserialize)]
    struct BindingDoc {
        #[serde(rename = "roleRef")]
        role_ref: RoleRef,
    }
    let mut out = ChartGrants::default();
    let mut rendered: BTreeSet<(String, String)> = BTreeSet::new();
    let mut refs: Vec<(String, String)> = Vec::new();
    for m in manifests {
        let group = m.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if group != "rbac.authorization.k8s.io" {
            continue;
        }
        let Ok(json) = bosun_yaml::goyaml::yaml_to_json(&m.content) else {
            continue;
        };
        match m.kind.as_str() {
            "Role" | "ClusterRole" => {
                let resource = if m.kind == "Role" {
                    "roles"
                } else {
                    "clusterroles"
                };
                rendered.insert((resource.to_string(), m.name.clone()));
                let Ok(doc) = serde_json::from_str::<RoleDoc>(&json) else {
                    continue;
                };
                let rules = doc.rules.unwrap_or_default();
                if m.kind == "Role" {
                    out.namespaced.extend(rules);
                } else {
                    out.cluster.extend(rules);
                }
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                if let Ok(b) = serde_json::from_str::<BindingDoc>(&json) {
                    let resource = match b.role_ref.kind.as_str() {
                        "Role" => "roles",
                        _ => "clusterroles",
                    };
                    refs.push((resource.to_string(), b.role_ref.name));
                }
            }
            _ => {}
        }
    }
    out.bound = refs
        .into_iter()
        .filter(|r| !rendered.contains(r) && !r.1.is_empty())
        .collect();
    out
}

/// What running `primary` with a chart that renders `kinds` needs.
pub fn rbac(
    primary: &GroupVersionKind,
    kinds: &BTreeSet<(String, String)>,
    has_crds: bool,
    storage: Storage,
    grants: &ChartGrants,
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
    let records = match storage {
        Storage::Secrets => Some("secrets"),
        Storage::ConfigMaps => Some("configmaps"),
        Storage::None => None,
    };
    if let Some(resource) = records {
        by_group
            .entry((String::new(), true))
            .or_default()
            .insert(resource.into());
    }
    for ((group, ns), resources) in by_group {
        let list: Vec<&str> = resources.iter().map(String::as_str).collect();
        let r = rule(&group, &list, WRITE);
        if ns {
            namespaced.push(r)
        } else {
            cluster.push(r)
        }
    }
    namespaced.extend(grants.namespaced.iter().cloned());
    cluster.extend(grants.cluster.iter().cloned());
    for (resource, name) in &grants.bound {
        let r = named_rule("rbac.authorization.k8s.io", resource, &[name], &["bind"]);
        if resource == "roles" {
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

/// What the entry's opt-in extensions need on top of [`rbac`]: `patch` on CRDs to apply the
/// chart's `crds/` (`upgradeCRDs`), and reading and watching the kinds of its `valuesFrom`
/// sources (their names are known, but a watch by name needs `list` and `watch` on the kind).
pub fn extensions(mut rbac: Rbac, entry: &bosun_watches::Entry, has_crds: bool) -> Rbac {
    if entry.upgrade_crds && has_crds {
        rbac.cluster.push(rule(
            "apiextensions.k8s.io",
            &["customresourcedefinitions"],
            &["get", "create", "patch"],
        ));
    }
    let kinds: BTreeSet<&str> = entry
        .values_from
        .iter()
        .map(|v| match v.kind {
            bosun_watches::ValuesSourceKind::Secret => "secrets",
            bosun_watches::ValuesSourceKind::ConfigMap => "configmaps",
        })
        .collect();
    if !kinds.is_empty() {
        let list: Vec<&str> = kinds.into_iter().collect();
        rbac.namespaced
            .push(rule("", &list, &["get", "list", "watch"]));
    }
    rbac
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
        let r = rbac(
            &primary,
            &kinds,
            false,
            Storage::Secrets,
            &ChartGrants::default(),
        );
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
            cluster.contains("clusterroles")
                && !cluster.contains("escalate")
                && !cluster.contains("bind"),
            "{cluster}"
        );
        assert!(r
            .namespaced
            .iter()
            .chain(&r.cluster)
            .all(|x| !bosun_runtime::rbac::has_wildcard(x)));
        let none = rbac(
            &primary,
            &kinds,
            true,
            Storage::None,
            &ChartGrants::default(),
        );
        assert!(!serde_json::to_string(&none.namespaced)
            .expect("json")
            .contains("secrets"));
        assert!(serde_json::to_string(&none.cluster)
            .expect("json")
            .contains("customresourcedefinitions"));
    }

    fn manifest(kind: &str, name: &str, content: &str) -> Manifest {
        Manifest {
            path: "c/templates/rbac.yaml".into(),
            content: content.into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: kind.into(),
            name: name.into(),
            hook: None,
        }
    }

    /// Review M12: no unscoped bind or escalate; the rules of the chart's own roles are held
    /// (so the operator may create them), and bind only on roles bound but not rendered.
    #[test]
    fn chart_roles_are_held_not_escalated() {
        let ms = [
            manifest(
                "Role",
                "r-reader",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r-reader}\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get, list]\n",
            ),
            manifest(
                "ClusterRole",
                "r-nodes",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r-nodes}\nrules:\n- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [get]\n",
            ),
            manifest(
                "RoleBinding",
                "r-reader",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: r-reader}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r-reader}\nsubjects: []\n",
            ),
            manifest(
                "ClusterRoleBinding",
                "r-view",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: r-view}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects: []\n",
            ),
        ];
        let refs: Vec<&Manifest> = ms.iter().collect();
        let g = chart_grants(&refs);
        assert_eq!(g.namespaced.len(), 1);
        assert_eq!(
            g.namespaced[0].resources.as_deref(),
            Some(&["pods".to_string()][..])
        );
        assert_eq!(
            g.cluster[0].resources.as_deref(),
            Some(&["nodes".to_string()][..])
        );
        assert_eq!(
            g.bound,
            BTreeSet::from([("clusterroles".to_string(), "view".to_string())]),
            "the chart's own Role needs no bind: the operator holds its rules"
        );
        let kinds: BTreeSet<(String, String)> =
            ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]
                .iter()
                .map(|k| ("rbac.authorization.k8s.io".to_string(), k.to_string()))
                .collect();
        let primary = GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore");
        let r = rbac(&primary, &kinds, false, Storage::Secrets, &g);
        let all: Vec<&PolicyRule> = r.namespaced.iter().chain(&r.cluster).collect();
        assert!(all.iter().all(|x| !x.verbs.iter().any(|v| v == "escalate")));
        let binds: Vec<_> = all
            .iter()
            .filter(|x| x.verbs.iter().any(|v| v == "bind"))
            .map(|x| x.resource_names.clone())
            .collect();
        assert_eq!(binds, [Some(vec!["view".to_string()])], "bind only by name");
        assert!(r
            .cluster
            .iter()
            .any(|x| x.resources.as_deref() == Some(&["nodes".to_string()][..])));
        assert!(r
            .namespaced
            .iter()
            .any(|x| x.resources.as_deref() == Some(&["pods".to_string()][..])));
    }
}
