use super::*;

fn schema_of(defaults: Value, snake_case: bool) -> Value {
    let Value::Object(m) = defaults else {
        panic!("defaults are a mapping")
    };
    spec_schema(Some(&(m, BTreeSet::new())), snake_case)
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

#[test]
fn camel_case_inverts_ansible_operators_snake_case() {
    for (var, key) in [
        ("pull_policy", "pullPolicy"),
        ("size", "size"),
        ("size_k8s_buckets", "sizeK8sBuckets"),
        ("egress_ips", "egressIps"),
        ("pg1_repo", "pg1Repo"),
        ("_private", "Private"),
        // Consecutive capitals would join into one word: the name as it is works.
        ("a_b_c", "a_b_c"),
        ("a_1", "a_1"),
        ("double__underscore", "double__underscore"),
    ] {
        assert_eq!(to_camel(var).as_deref(), Some(key), "{var}");
        assert_eq!(to_snake(key), var, "{key} snake-cases back to {var}");
    }
    // No spec key snake-cases to these: they cannot be set from the spec.
    for var in ["pullPolicy", "Upper", "HTTP_port"] {
        assert_eq!(to_camel(var), None, "{var}");
    }
}

#[test]
fn defaults_become_camel_cased_typed_properties_nested_keys_too() {
    let s = schema_of(
        json!({
            "pull_policy": "Always", "replica_count": 2, "ratio": 0.5, "enabled": true,
            "image": {"app": {"pull_policy": "IfNotPresent", "tag": "1.0"}},
            "extra_ports": [{"container_port": 80}], "camelVar": "unreachable", "maybe": null
        }),
        true,
    );
    assert_eq!(s["type"], "object");
    assert_eq!(
        s[OPEN], true,
        "the spec stays open to variables without a default"
    );
    let p = &s["properties"];
    let keys: Vec<&str> = p
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "enabled",
            "extraPorts",
            "image",
            "maybe",
            "pullPolicy",
            "ratio",
            "replicaCount"
        ]
    );
    assert_eq!(p["pullPolicy"]["type"], "string");
    assert_eq!(p["pullPolicy"]["description"], "Default: \"Always\"");
    assert_eq!(p["replicaCount"]["type"], "integer");
    assert_eq!(p["ratio"]["type"], "number");
    assert_eq!(p["enabled"]["type"], "boolean");
    assert_eq!(p["enabled"]["nullable"], true);
    let app = &p["image"]["properties"]["app"];
    assert_eq!(app[OPEN], true, "nested objects stay open");
    assert_eq!(app["properties"]["pullPolicy"]["type"], "string");
    assert!(app["properties"].get("pull_policy").is_none());
    assert_eq!(
        p["extraPorts"]["items"]["properties"]["containerPort"]["type"],
        "integer"
    );
    assert_eq!(p["maybe"][OPEN], true);
}

#[test]
fn snake_case_parameters_false_keeps_the_names_verbatim() {
    let s = schema_of(
        json!({"pull_policy": "Always", "a_1": "x", "image": {"pull_policy": "Never"}}),
        false,
    );
    let p = &s["properties"];
    assert_eq!(p["pull_policy"]["type"], "string");
    assert_eq!(p["a_1"]["type"], "string");
    assert_eq!(p["image"]["properties"]["pull_policy"]["type"], "string");
    assert!(p.get("pullPolicy").is_none());
}

#[test]
fn a_jinja_default_leaves_its_property_open() {
    let s = schema_of(
        json!({
            "namespace": "{{ ansible_operator_meta.namespace }}",
            "replicas": "{% if big %}3{% else %}1{% endif %}",
            "image": {"tag": "latest", "registry": "{{ registry_default }}"},
            "hosts": ["a", "{{ extra_host }}"],
            "braces": "not {a template}"
        }),
        true,
    );
    let p = &s["properties"];
    for jinja in [
        &p["namespace"],
        &p["replicas"],
        &p["image"]["properties"]["registry"],
    ] {
        assert_eq!(jinja[OPEN], true, "{jinja}");
        assert!(jinja.get("type").is_none(), "any type: {jinja}");
        assert_eq!(jinja["nullable"], true);
        assert!(
            jinja["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Default: \"{")
                    && d.ends_with("(a Jinja expression: any type)")),
            "{jinja}"
        );
    }
    assert_eq!(p["image"]["type"], "object");
    assert_eq!(p["image"]["properties"]["tag"]["type"], "string");
    assert_eq!(p["hosts"]["type"], "array");
    assert_eq!(p["hosts"]["items"], json!({ OPEN: true }));
    assert_eq!(p["braces"]["type"], "string");
}

#[test]
fn without_defaults_the_spec_is_open() {
    assert_eq!(
        spec_schema(None, true),
        json!({"type": "object", OPEN: true})
    );
    let d = tempfile::tempdir().expect("dir");
    write(d.path(), "r/tasks/main.yml", "- debug: {msg: hi}\n");
    assert!(read_defaults(&[d.path().join("r")]).is_none());
    // An empty defaults file (operator-sdk scaffolds one holding a comment): no properties.
    write(
        d.path(),
        "r/defaults/main.yml",
        "---\n# defaults file for R\n",
    );
    let (vars, _) = read_defaults(&[d.path().join("r")]).expect("a defaults file");
    assert!(vars.is_empty());
    let s = spec_schema(Some(&(vars, BTreeSet::new())), true);
    assert_eq!(s["type"], "object");
    assert_eq!(s[OPEN], true);
}

#[test]
fn defaults_are_read_with_ansibles_yaml_rules() {
    let d = tempfile::tempdir().expect("dir");
    write(
        d.path(),
        "r/defaults/main.yml",
        "---\nenabled: yes\nport: 0x50\nversion: '1.0'\nwhen_: 2001-12-14\n",
    );
    let (vars, _) = read_defaults(&[d.path().join("r")]).expect("defaults");
    assert_eq!(
        vars["enabled"], true,
        "YAML 1.1 booleans, as PyYAML reads them"
    );
    assert_eq!(vars["port"], 80);
    assert_eq!(vars["version"], "1.0");
}

/// A playbook is described by the roles it imports: its plays' `roles:` and its
/// `import_role` tasks (inside blocks too); a variable two roles default differently is open.
#[test]
fn a_playbook_is_described_by_the_defaults_of_the_roles_it_imports() {
    let d = tempfile::tempdir().expect("dir");
    let p = d.path();
    write(p, "roles/web/tasks/main.yml", "- debug: {msg: web}\n");
    write(
        p,
        "roles/web/defaults/main.yml",
        "web_port: 8080\nshared_name: web\nsame: 1\n",
    );
    write(p, "roles/db/tasks/main.yml", "- debug: {msg: db}\n");
    write(
        p,
        "roles/db/defaults/main.yml",
        "db_size: 10Gi\nshared_name: db\nsame: 1\n",
    );
    write(p, "roles/cache/tasks/main.yml", "- debug: {msg: cache}\n");
    write(p, "roles/cache/defaults/main.yml", "cache_ttl: 60\n");
    write(
        p,
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  roles: [web]\n  tasks:\n    - import_role: {name: db}\n    - block:\n        - import_role: {name: cache}\n",
    );
    let opts = bosun_ansible::LoadOptions {
        roles_path: vec![p.join("roles")],
        cwd: p.to_path_buf(),
        ..Default::default()
    };
    let role = Role::load(p.join("site.yml").to_str().expect("utf8"), &opts).expect("loads");
    let dirs = role_dirs(&role);
    let names: Vec<_> = dirs
        .iter()
        .filter_map(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["web", "db", "cache"]);
    let s = spec_schema(read_defaults(&dirs).as_ref(), true);
    let props = &s["properties"];
    assert_eq!(props["webPort"]["type"], "integer");
    assert_eq!(props["dbSize"]["type"], "string");
    assert_eq!(props["cacheTtl"]["type"], "integer");
    assert_eq!(props["same"]["type"], "integer");
    assert_eq!(props["sharedName"][OPEN], true, "{}", props["sharedName"]);
    assert!(props["sharedName"].get("type").is_none());

    // A playbook that imports no role keeps an open spec.
    write(
        p,
        "bare.yml",
        "- hosts: localhost\n  tasks:\n    - debug: {msg: hi}\n",
    );
    let bare = Role::load(p.join("bare.yml").to_str().expect("utf8"), &opts).expect("loads");
    assert!(role_dirs(&bare).is_empty());
    assert_eq!(
        spec_schema(read_defaults(&role_dirs(&bare)).as_ref(), true),
        json!({"type": "object", OPEN: true})
    );
}

#[test]
fn a_role_run_by_real_ansible_is_found_as_ansible_finds_it() {
    let d = tempfile::tempdir().expect("dir");
    let coll = d.path().join("colls");
    write(
        &coll,
        "ansible_collections/acme/tools/roles/web/defaults/main.yml",
        "port: 80\n",
    );
    let dirs = target_dirs(
        &Target::CollectionRole("acme.tools.web".into()),
        &[d.path().join("none"), coll.clone()],
    );
    assert_eq!(
        dirs,
        [coll.join("ansible_collections/acme/tools/roles/web")]
    );
    let (vars, _) = read_defaults(&dirs).expect("defaults");
    assert_eq!(vars["port"], 80);
    let role = target_dirs(
        &Target::Role {
            name: "web".into(),
            roles_path: d.path().join("roles"),
        },
        &[],
    );
    assert_eq!(role, [d.path().join("roles/web")]);
    assert!(target_dirs(&Target::Playbook(d.path().join("site.yml")), &[]).is_empty());
}
