//! The RBAC objects of an install: what the selected operators and the runtime need, granted
//! in a ClusterRole (every namespace watched) or a Role per watched namespace, plus the
//! leader-election Role (its one Lease, in bosun's namespace) and the metrics-reader
//! ClusterRole to bind to Prometheus. `bosun rbac` prints exactly these objects.
use std::sync::Arc;

use bosun_runtime::manager::Operator;
use bosun_runtime::rbac::{lease_rules, runtime_rules, Rbac};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::Value;

use super::{meta, ManifestArgs};

/// What the selected operators and the runtime need (the install always enables the secure
/// metrics endpoint).
pub fn needed(operators: &[Arc<dyn Operator>]) -> Rbac {
    operators
        .iter()
        .fold(Rbac::default(), |acc, op| acc.merge(op.rbac()))
        .merge(runtime_rules(true))
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn subjects(a: &ManifestArgs) -> Option<Vec<Subject>> {
    Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: a.name().into(),
        namespace: Some(a.namespace.clone()),
        ..Default::default()
    }])
}

fn cluster_role(a: &ManifestArgs, name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(a, name, None),
        rules: Some(rules),
        ..Default::default()
    }
}

fn role(a: &ManifestArgs, name: &str, namespace: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(a, name, Some(namespace)),
        rules: Some(rules),
    }
}

fn cluster_binding(a: &ManifestArgs, name: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(a, name, None),
        role_ref: role_ref("ClusterRole", name),
        subjects: subjects(a),
    }
}

fn binding(a: &ManifestArgs, name: &str, namespace: &str) -> RoleBinding {
    RoleBinding {
        metadata: meta(a, name, Some(namespace)),
        role_ref: role_ref("Role", name),
        subjects: subjects(a),
    }
}

/// The RBAC objects, in apply order.
pub fn objects(a: &ManifestArgs, operators: &[Arc<dyn Operator>]) -> anyhow::Result<Vec<Value>> {
    let need = needed(operators);
    let name = a.name();
    let mut out = Vec::new();
    if a.watch_namespaces.is_empty() {
        let mut all = need.namespaced.clone();
        all.extend(need.cluster.clone());
        out.push(serde_json::to_value(cluster_role(a, name, all))?);
        out.push(serde_json::to_value(cluster_binding(a, name))?);
    } else {
        let cluster_name = format!("{name}-cluster");
        out.push(serde_json::to_value(cluster_role(
            a,
            &cluster_name,
            need.cluster.clone(),
        ))?);
        out.push(serde_json::to_value(cluster_binding(a, &cluster_name))?);
        for w in &a.watch_namespaces {
            out.push(serde_json::to_value(role(
                a,
                name,
                w,
                need.namespaced.clone(),
            ))?);
            out.push(serde_json::to_value(binding(a, name, w))?);
        }
    }
    // Bind this to Prometheus' ServiceAccount to let it scrape /metrics.
    let reader = PolicyRule {
        non_resource_urls: Some(vec!["/metrics".into()]),
        verbs: vec!["get".into()],
        ..Default::default()
    };
    out.push(serde_json::to_value(cluster_role(
        a,
        &format!("{name}-metrics-reader"),
        vec![reader],
    ))?);
    let lease = format!("{name}-leader-election");
    let mut lease_role = lease_rules(&a.lease_name());
    if a.sharded() {
        // The membership Leases are named after the pods, unknown here; the sharder takes
        // over and deletes those of pods that are gone.
        lease_role.push(PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            verbs: ["get", "list", "update", "delete"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        });
    }
    out.push(serde_json::to_value(role(
        a,
        &lease,
        &a.namespace,
        lease_role,
    ))?);
    out.push(serde_json::to_value(binding(a, &lease, &a.namespace))?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::NAME;
    use super::*;

    #[test]
    fn the_lease_role_names_its_lease() {
        let a = ManifestArgs::default();
        let objs = objects(&a, &a.operators().expect("ops")).expect("rbac");
        let lease_role = objs
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == "bosun-leader-election")
            .expect("lease role");
        for r in lease_role["rules"].as_array().expect("rules") {
            let verbs: Vec<&str> = r["verbs"]
                .as_array()
                .expect("verbs")
                .iter()
                .filter_map(|v| v.as_str())
                .collect();
            if verbs.iter().any(|v| *v != "create") {
                assert_eq!(
                    r["resourceNames"][0], "bosun-leader",
                    "get/update only on bosun's own Lease: {r}"
                );
            }
        }
    }

    #[test]
    fn every_operator_rule_is_granted() {
        let a = ManifestArgs {
            operators: Some(vec!["bookstore".into(), "myownshell".into()]),
            ..Default::default()
        };
        let ops = a.operators().expect("ops");
        let objs = objects(&a, &ops).expect("rbac");
        let granted: Vec<PolicyRule> = objs
            .iter()
            .filter(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == NAME)
            .flat_map(|o| {
                serde_json::from_value::<Vec<PolicyRule>>(o["rules"].clone()).expect("rules")
            })
            .collect();
        for op in &ops {
            let r = op.rbac();
            for rule in r.namespaced.iter().chain(&r.cluster) {
                assert!(granted.contains(rule), "{} needs {rule:?}", op.name());
            }
        }
    }
    fn lease_role(a: &ManifestArgs) -> Vec<PolicyRule> {
        let objs = objects(a, &a.operators().expect("ops")).expect("rbac");
        let name = format!("{}-leader-election", a.name());
        let role = objs
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == name.as_str())
            .expect("lease role");
        serde_json::from_value(role["rules"].clone()).expect("rules")
    }

    fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
        let has = |v: &Option<Vec<String>>, x: &str| v.iter().flatten().any(|s| s == x);
        rules.iter().any(|r| {
            has(&r.api_groups, group)
                && has(&r.resources, resource)
                && r.resource_names.is_none()
                && r.verbs.iter().any(|v| v == verb)
        })
    }

    /// Sharded replicas hold Leases named after their pods and take over those of dead ones,
    /// so `--sharding` grants get/list/update/delete on any Lease of bosun's namespace (the
    /// chart's `sharding.enabled` rule); without it, only the one leader Lease is nameable.
    #[test]
    fn sharding_grants_the_member_and_sharder_leases_only_when_on() {
        let off = lease_role(&ManifestArgs::default());
        for verb in ["get", "list", "update", "delete"] {
            assert!(
                !grants(&off, "coordination.k8s.io", "leases", verb),
                "{off:?}"
            );
        }
        let on = lease_role(&ManifestArgs {
            sharding: true,
            ..Default::default()
        });
        for verb in ["create", "get", "list", "update", "delete"] {
            assert!(
                grants(&on, "coordination.k8s.io", "leases", verb),
                "{verb}: {on:?}"
            );
        }
        assert!(on.iter().all(|r| !bosun_runtime::rbac::has_wildcard(r)));
    }

    /// The sharder labels every operator's primary objects (`shard.bosun.dev/<operator>`):
    /// each operator's own rules must allow `patch` on the kinds it installs.
    #[test]
    fn every_operator_lets_the_sharder_label_its_objects() {
        let ops = crate::registry::coded();
        assert!(!ops.is_empty());
        for op in &ops {
            let r = op.rbac();
            for crd in op.crds() {
                let (group, plural) = (&crd.spec.group, &crd.spec.names.plural);
                assert!(
                    grants(&r.namespaced, group, plural, "patch"),
                    "{}: no patch on {plural}.{group}",
                    op.name()
                );
            }
        }
    }
}
