//! The RBAC a role entry needs, from what its role (and finalizer role) name in their text
//! ([`crate::scan`]), with no wildcards — operator-sdk's Ansible scaffold grants `"*"` on
//! the core and apps groups.
//!
//! Per kind, the verbs of what the tasks do: `k8s` present → get, create, patch (+ list and
//! watch for the dependent watch, when the entry watches that kind's children), `force` →
//! update, absent → delete; `k8s_info` and `lookup('k8s')` → get, list; `k8s_scale` → get,
//! patch; `k8s_status` on another object → get, and patch/update of its `status`. The
//! entry's own kind: get, list, watch, patch, update, its `status` and `finalizers`.
//! `k8s_event` → core `events`. Kinds are mapped to resources offline
//! ([`bosun_watches::kinds`]); a custom kind is assumed namespaced.
use std::collections::BTreeMap;

use bosun_runtime::rbac::{rule, Rbac};
use bosun_watches::kinds::{plural, resource_of};
use bosun_watches::Entry;
use kube::core::GroupVersionKind;

use crate::scan::Scan;

/// What running `entry` with a role that touches `scan` needs.
pub fn rbac(entry: &Entry, scan: &Scan) -> Rbac {
    let p = plural(&entry.gvk.kind);
    let group = &entry.gvk.group;
    let mut namespaced = vec![
        rule(group, &[&p], &["get", "list", "watch", "patch", "update"]),
        rule(
            group,
            &[&format!("{p}/status")],
            &["get", "patch", "update"],
        ),
        rule(group, &[&format!("{p}/finalizers")], &["update"]),
    ];
    let mut cluster = Vec::new();
    // (group, namespaced, verbs) → resources, so kinds needing the same verbs share a rule.
    let mut by: BTreeMap<(String, bool, Vec<&str>), Vec<String>> = BTreeMap::new();
    for ((g, kind), u) in &scan.kinds {
        if g == group && kind == &entry.gvk.kind {
            // The own-kind rules above hold every verb but these: a role that creates or
            // deletes objects of its own kind (a core-kind entry's role writing ConfigMaps)
            // needs them too.
            let mut verbs = Vec::new();
            if u.manage {
                verbs.push("create");
            }
            if u.delete {
                verbs.push("delete");
            }
            if !verbs.is_empty() {
                namespaced.push(rule(group, &[&p], &verbs));
            }
            continue;
        }
        let (resource, ns) = resource_of(&GroupVersionKind::gvk(g, "", kind));
        let watched = entry.watch_dependent_resources
            && (ns || entry.ansible.watch_cluster_scoped_resources)
            && !blacklisted(entry, g, kind);
        let mut verbs = vec!["get"];
        if u.read || (u.manage && watched) {
            verbs.push("list");
        }
        if u.manage && watched {
            verbs.push("watch");
        }
        if u.manage {
            verbs.push("create");
        }
        if u.manage || u.scale {
            verbs.push("patch");
        }
        if u.replace {
            verbs.push("update");
        }
        if u.delete {
            verbs.push("delete");
        }
        if u.manage && g == "rbac.authorization.k8s.io" && (kind == "Role" || kind == "ClusterRole")
        {
            // Kubernetes refuses to let an operator grant what it does not hold otherwise.
            verbs.extend(["bind", "escalate"]);
        }
        by.entry((g.clone(), ns, verbs))
            .or_default()
            .push(resource.clone());
        if u.status {
            by.entry((g.clone(), ns, vec!["get", "patch", "update"]))
                .or_default()
                .push(format!("{resource}/status"));
        }
    }
    if scan.events {
        by.entry((String::new(), true, vec!["get", "create", "patch"]))
            .or_default()
            .push("events".into());
    }
    for ((g, ns, verbs), mut resources) in by {
        resources.sort();
        resources.dedup();
        let list: Vec<&str> = resources.iter().map(String::as_str).collect();
        let r = rule(&g, &list, &verbs);
        if ns {
            namespaced.push(r);
        } else {
            cluster.push(r);
        }
    }
    Rbac {
        namespaced,
        cluster,
    }
}

/// Whether the entry's `blacklist` names this kind (any version).
pub fn blacklisted(entry: &Entry, group: &str, kind: &str) -> bool {
    entry
        .ansible
        .blacklist
        .iter()
        .any(|b| b.group == group && b.kind == kind)
}
