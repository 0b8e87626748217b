//! Loading role and playbook entries, with no cluster: roles outside the subset refused at
//! load with their file:line; the RBAC derived from what roles name (and the gaps where
//! they do not say); the CRD.
mod support;

use std::path::Path;

use bosun_ansible_operator::{AnsibleFlavor, AnsibleOptions};
use bosun_watches::{Flavor, WatchOperator, WatchesFile};
use k8s_openapi::api::rbac::v1::PolicyRule;
use support::{repo, roles_path, watches};

fn load(dir: &Path, text: &str) -> Result<Vec<WatchOperator<AnsibleFlavor>>, String> {
    let w = watches(dir, text);
    let file = WatchesFile::load(&w).map_err(|e| e.to_string())?;
    let mut opts = AnsibleOptions {
        watches_dir: Some(dir.to_path_buf()),
        // Refusals are asserted: no real Ansible fallback even where one is installed.
        ansible: None,
        ..Default::default()
    };
    opts.load.roles_path.extend(roles_path());
    let ops = bosun_ansible_operator::operators(&file.entries, &opts).map_err(|e| e.to_string())?;
    // An entry no engine runs is that entry's refusal (the file's other entries still run).
    match ops.iter().find_map(|o| o.flavor().refused.clone()) {
        Some(why) => Err(why.to_string()),
        None => Ok(ops),
    }
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// The verbs granted on `group`/`resource`, across rules.
fn verbs(rules: &[PolicyRule], group: &str, resource: &str) -> Vec<String> {
    let mut v: Vec<String> = rules
        .iter()
        .filter(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
        })
        .flat_map(|r| r.verbs.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn the_seed_entry_loads_with_exact_rbac_and_a_crd_from_its_defaults() {
    let file = WatchesFile::load(&repo().join("examples/ansible-bookstore/watches.yaml"))
        .expect("watches");
    let opts = AnsibleOptions {
        watches_dir: Some(repo().join("examples/ansible-bookstore")),
        ..Default::default()
    };
    let ops = bosun_ansible_operator::operators(&file.entries, &opts).expect("loads");
    assert_eq!(ops.len(), 1);
    let f = ops[0].flavor();
    assert_eq!(f.rbac_gaps().count(), 0);
    let r = f.rbac();
    assert!(r.cluster.is_empty(), "{:?}", r.cluster);
    let ns = &r.namespaced;
    let write = ["create", "get", "list", "patch", "watch"];
    assert_eq!(verbs(ns, "apps", "deployments"), write);
    assert_eq!(verbs(ns, "", "services"), write);
    assert_eq!(
        verbs(ns, "charts.example.com", "bookstores"),
        ["get", "list", "patch", "update", "watch"]
    );
    assert_eq!(
        verbs(ns, "charts.example.com", "bookstores/status"),
        ["get", "patch", "update"]
    );
    assert_eq!(
        verbs(ns, "charts.example.com", "bookstores/finalizers"),
        ["update"]
    );
    assert!(verbs(ns, "", "secrets").is_empty());
    assert!(ns.iter().all(|x| !bosun_runtime::rbac::has_wildcard(x)));
    let crd = f.crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("bookstores.charts.example.com")
    );
    // The spec as the role's defaults describe it: camelCased, typed, open.
    let v = serde_json::to_value(&crd.spec.versions[0].schema).expect("json");
    let spec = &v["openAPIV3Schema"]["properties"]["spec"];
    let open = "x-kubernetes-preserve-unknown-fields";
    assert_eq!(spec[open], true, "{spec}");
    let props = &spec["properties"];
    let mut keys: Vec<&String> = props.as_object().expect("properties").keys().collect();
    keys.sort();
    assert_eq!(keys, ["image", "metadata", "service"]);
    for part in ["app", "mongodb"] {
        let image = &props["image"]["properties"][part]["properties"];
        for field in ["repository", "tag", "pullPolicy"] {
            assert_eq!(
                image[field]["type"], "string",
                "image.{part}.{field}: {spec}"
            );
        }
        assert_eq!(
            props["service"]["properties"][part]["properties"]["type"]["description"],
            "Default: \"ClusterIP\""
        );
    }
    // Its default is a Jinja expression (the CR's own namespace): any type.
    let ns = &props["metadata"]["properties"]["namespace"];
    assert_eq!(ns[open], true, "{ns}");
    assert!(ns.get("type").is_none(), "{ns}");
    let status = &v["openAPIV3Schema"]["properties"]["status"];
    assert_eq!(status[open], true);
}

#[test]
fn rbac_follows_every_way_a_role_names_kinds() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    write(
        d,
        "roles/r/tasks/main.yml",
        r#"---
- k8s: {definition: "{{ lookup('template', 'job.yaml.j2') | from_yaml }}"}
- k8s: {template: deploy.yaml.j2}
- k8s:
    state: absent
    api_version: v1
    kind: Secret
    name: x
    namespace: y
- k8s:
    definition:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      metadata: {name: "{{ ansible_operator_meta.name }}"}
- k8s_info: {kind: Pod, namespace: y}
- k8s_scale: {api_version: apps/v1, kind: StatefulSet, name: s, namespace: y, replicas: 2}
- k8s_status: {api_version: example.com/v1, kind: Gadget, name: g, namespace: y, status: {a: 1}}
- k8s_status: {api_version: "{{ v }}", kind: Widget, name: w, status: {a: 1}}
- k8s_event: {name: e, message: m}
- k8s:
    force: true
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: c, namespace: y}
- debug: {msg: "{{ query('k8s', kind='Node') | length }}"}
- set_fact:
    ingresses: "{{ lookup('kubernetes.core.k8s', api_version='networking.k8s.io/v1', kind='Ingress') }}"
"#,
    );
    write(
        d,
        "roles/r/templates/job.yaml.j2",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ n }}\nspec:\n  template:\n    metadata:\n      kind: nested-is-not-top-level\n",
    );
    write(
        d,
        "roles/r/templates/deploy.yaml.j2",
        "---\napiVersion: apps/v1\nkind: Deployment\n---\n# a second document\napiVersion: v1\nkind: ServiceAccount\n",
    );
    let f = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, role: r}\n",
    )
    .expect("loads");
    let f = f[0].flavor();
    assert_eq!(
        f.rbac_gaps().map(|g| g.to_string()).collect::<Vec<_>>(),
        Vec::<String>::new()
    );
    assert!(f.scan.own_status, "k8s_status on the entry's own kind");
    let r = f.rbac();
    let ns = &r.namespaced;
    let manage = ["create", "get", "list", "patch", "watch"];
    assert_eq!(verbs(ns, "batch", "jobs"), manage);
    assert_eq!(verbs(ns, "apps", "deployments"), manage);
    assert_eq!(verbs(ns, "", "serviceaccounts"), manage);
    assert_eq!(verbs(ns, "", "secrets"), ["delete", "get"]);
    assert_eq!(verbs(ns, "", "pods"), ["get", "list"]);
    assert_eq!(verbs(ns, "apps", "statefulsets"), ["get", "patch"]);
    assert_eq!(verbs(ns, "example.com", "gadgets"), ["get"]);
    assert_eq!(
        verbs(ns, "example.com", "gadgets/status"),
        ["get", "patch", "update"]
    );
    assert_eq!(verbs(ns, "", "events"), ["create", "get", "patch"]);
    assert_eq!(
        verbs(ns, "", "configmaps"),
        ["create", "get", "list", "patch", "update", "watch"]
    );
    assert_eq!(verbs(ns, "networking.k8s.io", "ingresses"), ["get", "list"]);
    // Cluster-scoped kinds: not watched unless watchClusterScopedResources.
    assert_eq!(verbs(&r.cluster, "", "nodes"), ["get", "list"]);
    assert_eq!(
        verbs(&r.cluster, "rbac.authorization.k8s.io", "clusterroles"),
        ["bind", "create", "escalate", "get", "patch"]
    );
    let watched = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, role: r, watchClusterScopedResources: true,\n   blacklist: [{group: apps, version: v1, kind: Deployment}]}\n",
    )
    .expect("loads");
    let r = watched[0].flavor().rbac();
    assert_eq!(
        verbs(&r.cluster, "rbac.authorization.k8s.io", "clusterroles"),
        ["bind", "create", "escalate", "get", "list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&r.namespaced, "apps", "deployments"),
        ["create", "get", "patch"],
        "a blacklisted kind is not watched"
    );
}

#[test]
fn what_cannot_be_read_is_reported_with_its_location() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    write(
        d,
        "roles/r/tasks/main.yml",
        "---\n- k8s: {definition: \"{{ my_definition }}\"}\n- k8s_info: {kind: \"{{ kind }}\"}\n- debug: {msg: \"{{ lookup('k8s', kind=some_kind) }}\"}\n",
    );
    let f = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, role: r}\n",
    )
    .expect("loads");
    let gaps: Vec<String> = f[0].flavor().rbac_gaps().map(|g| g.to_string()).collect();
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    for (line, g) in [2, 3, 4].iter().zip(&gaps) {
        assert!(
            g.contains(&format!("tasks/main.yml:{line}:")),
            "{g} names its line"
        );
    }
}

#[test]
fn roles_outside_the_subset_are_refused_at_load_with_their_location() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    write(
        d,
        "roles/r/tasks/main.yml",
        "---\n- name: fine\n  debug: {msg: hi}\n- name: not run natively\n  shell: rm -rf /\n",
    );
    let e = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, role: r}\n",
    )
    .err()
    .expect("refused");
    assert!(e.contains("Widget.test.bosun.dev/v1"), "{e}");
    assert!(e.contains("tasks/main.yml:5:"), "{e}");
    assert!(e.contains("shell"), "{e}");

    // A finalizer role is checked as well.
    write(d, "roles/ok/tasks/main.yml", "---\n- debug: {msg: hi}\n");
    write(
        d,
        "roles/bad_final/tasks/main.yml",
        "---\n- debug: {msg: hi}\n  become: true\n",
    );
    let e = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, role: ok, finalizer: {name: x/y, role: bad_final}}\n",
    )
    .err()
    .expect("refused");
    assert!(e.contains("finalizer role bad_final"), "{e}");
    assert!(e.contains("bad_final/tasks/main.yml:3:"), "{e}");
    assert!(e.contains("become"), "{e}");

    let e = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, role: missing}\n",
    )
    .err()
    .expect("refused");
    assert!(e.contains("'missing' was not found"), "{e}");
}

#[test]
fn playbook_entries_load_and_chart_entries_are_left_to_helm() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    write(
        d,
        "site.yml",
        "---\n- hosts: localhost\n  gather_facts: false\n  tasks:\n    - k8s:\n        definition:\n          apiVersion: v1\n          kind: ConfigMap\n          metadata: {name: a, namespace: b}\n",
    );
    write(
        d,
        "chart/Chart.yaml",
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    );
    let f = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Widget, playbook: site.yml}\n- {group: test.bosun.dev, version: v1, kind: Gadget, chart: chart}\n",
    )
    .expect("loads");
    assert_eq!(f.len(), 1, "the chart entry is not an Ansible one");
    assert_eq!(
        verbs(&f[0].flavor().rbac().namespaced, "", "configmaps"),
        ["create", "get", "list", "patch", "watch"]
    );
}

/// The spec's properties of an entry's CRD.
fn spec_properties(f: &WatchOperator<AnsibleFlavor>) -> serde_json::Value {
    let v = serde_json::to_value(&f.flavor().crd().spec.versions[0].schema).expect("json");
    v["openAPIV3Schema"]["properties"]["spec"]["properties"].clone()
}

/// The CRD follows each entry's `snakeCaseParameters`, and a playbook's is described by the
/// roles it imports.
#[test]
fn the_crd_follows_snake_case_parameters_and_a_playbooks_roles() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    write(
        d,
        "roles/web/tasks/main.yml",
        "- debug: {msg: \"{{ pull_policy }}\"}\n",
    );
    write(
        d,
        "roles/web/defaults/main.yml",
        "pull_policy: Always\nreplica_count: 2\n",
    );
    write(
        d,
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - import_role: {name: web}\n",
    );
    let f = load(
        d,
        "- {group: test.bosun.dev, version: v1, kind: Camel, role: web}\n- {group: test.bosun.dev, version: v1, kind: Verbatim, role: web, snakeCaseParameters: false}\n- {group: test.bosun.dev, version: v1, kind: Book, playbook: site.yml}\n",
    )
    .expect("loads");
    let camel = spec_properties(&f[0]);
    assert_eq!(camel["pullPolicy"]["type"], "string", "{camel}");
    assert_eq!(camel["replicaCount"]["type"], "integer", "{camel}");
    assert!(camel.get("pull_policy").is_none(), "{camel}");
    let verbatim = spec_properties(&f[1]);
    assert_eq!(verbatim["pull_policy"]["type"], "string", "{verbatim}");
    assert!(verbatim.get("pullPolicy").is_none(), "{verbatim}");
    assert_eq!(spec_properties(&f[2]), camel, "the playbook imports web");
}
