//! Roles outside the supported subset are refused at load time with file:line:col and the
//! construct; hostile roles and inputs end in errors, never hangs, panics or stack overflows.
use std::path::Path;
use std::sync::Arc;

use bosun_ansible::{Discovery, LoadOptions, Role, RunContext};

fn role_with(dir: &Path, files: &[(&str, &str)]) -> LoadOptions {
    for (p, text) in files {
        let path = dir.join("roles/r").join(p);
        std::fs::create_dir_all(path.parent().expect("test value")).expect("test value");
        std::fs::write(path, text).expect("test value");
    }
    LoadOptions {
        roles_path: vec![],
        collections_paths: vec![],
        cwd: dir.to_path_buf(),
    }
}

fn load_err(tasks: &str) -> String {
    let dir = tempfile::tempdir().expect("test value");
    let opts = role_with(dir.path(), &[("tasks/main.yml", tasks)]);
    match Role::load("r", &opts) {
        Ok(_) => panic!("loaded a role that should be refused:\n{tasks}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unsupported_constructs_are_refused_with_their_location() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "- name: x\n  shell: echo hi\n",
            "main.yml:2:3",
            "module 'shell'",
        ),
        (
            "- name: x\n  debug: {msg: hi}\n  become: true\n",
            "main.yml:3:3",
            "task keyword 'become'",
        ),
        (
            "- name: x\n  k8s:\n    definition: {}\n    kubeconfig: /tmp/k\n",
            "main.yml:4:17",
            "option 'kubeconfig'",
        ),
        (
            "- name: x\n  debug:\n    msg: \"{{ x | password_hash('sha512') }}\"\n",
            "main.yml:3:10",
            "filter 'password_hash'",
        ),
        (
            "- name: x\n  debug:\n    msg: \"{{ lookup('pipe', 'date') }}\"\n",
            "main.yml:3:10",
            "lookup plugin 'pipe'",
        ),
        (
            "- name: x\n  debug: {msg: hi}\n  when: x is ansible.builtin.file\n",
            "main.yml:3:9",
            "test 'file'",
        ),
        (
            "- name: x\n  debug: {msg: \"{{ x \"}\n",
            "main.yml:2:16",
            "template error",
        ),
        (
            "- name: x\n  k8s: {state: patched}\n",
            "main.yml:2:16",
            "k8s state: 'patched'",
        ),
        (
            "- name: x\n  meta: refresh_inventory\n",
            "main.yml:2:3",
            "meta: refresh_inventory",
        ),
        (
            "- name: x\n  include_tasks: missing.yml\n",
            "main.yml:2:18",
            "could not find tasks file",
        ),
        (
            "- name: x\n  debug: {msg: hi}\n  notify: restart\n",
            "main.yml:3:3",
            "task keyword 'notify'",
        ),
        ("- x: [\n", "main.yml:", "YAML"),
    ];
    for (tasks, at, what) in cases {
        let err = load_err(tasks);
        assert!(
            err.contains(at) && err.contains(what),
            "for\n{tasks}\nexpected {at} and {what:?} in: {err}"
        );
    }
}

/// Issue 20: a refusal lists every construct outside the subset, not only the first, each
/// with its file:line:col, across included files.
#[test]
fn every_unsupported_construct_is_listed() {
    let dir = tempfile::tempdir().expect("test value");
    let opts = role_with(
        dir.path(),
        &[
            (
                "tasks/main.yml",
                "- name: a\n  shell: echo hi\n- name: b\n  debug: {msg: hi}\n  become: true\n- import_tasks: more.yml\n",
            ),
            (
                "tasks/more.yml",
                "- name: c\n  debug:\n    msg: \"{{ x | password_hash('sha512') }}\"\n- name: d\n  ansible.builtin.uri: {url: http://x}\n",
            ),
        ],
    );
    let err = match Role::load("r", &opts) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    };
    for (at, what) in [
        ("main.yml:2:3", "module 'shell'"),
        ("main.yml:5:3", "task keyword 'become'"),
        ("more.yml:3:10", "filter 'password_hash'"),
        ("more.yml:5:3", "module 'ansible.builtin.uri'"),
    ] {
        assert!(
            err.lines().any(|l| l.contains(at) && l.contains(what)),
            "expected {at} {what:?} in:\n{err}"
        );
    }
    assert!(err.starts_with("4 constructs"), "{err}");
}

#[test]
fn a_role_importing_itself_is_refused() {
    let err = load_err("- import_tasks: main.yml\n");
    assert!(err.contains("nest too deep"), "{err}");
}

#[test]
fn seed_role_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ansible-bookstore");
    let opts = LoadOptions {
        roles_path: vec![],
        collections_paths: vec![],
        cwd: root.clone(),
    };
    let role = Role::load("bookstore", &opts).expect("test value");
    assert_eq!(role.plays.len(), 1);
    let body = &role.plays[0].roles[0].role;
    assert_eq!(body.tasks_file("main").expect("test value").len(), 4);
    // The variables its tasks read, at the sample's values (they describe the CRD's spec).
    let mut defaults: Vec<&String> = body.defaults.keys().collect();
    defaults.sort();
    assert_eq!(defaults, ["image", "metadata", "service"]);
}

fn run_pure(tasks: &str, max_tasks: usize) -> bosun_ansible::Outcome {
    let dir = tempfile::tempdir().expect("test value");
    let opts = role_with(
        dir.path(),
        &[
            ("tasks/main.yml", tasks),
            ("tasks/again.yml", "- include_tasks: again.yml\n"),
        ],
    );
    let role = Role::load("r", &opts).expect("test value");
    let mut ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    ctx.max_tasks = max_tasks;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test value");
    rt.block_on(role.run(&ctx, &serde_json::Map::new()))
}

#[test]
fn hostile_include_recursion() {
    // Endless include recursion.
    let o = run_pure("- include_tasks: again.yml\n", 100_000);
    assert!(
        !o.succeeded() && o.failures[0].msg.contains("nests deeper"),
        "{:?}",
        o.failures
    );
}

#[test]
fn hostile_var_recursion() {
    // Self-referencing variables.
    let o = run_pure(
        "- set_fact: {a: \"{{ b }}\"}\n  vars: {b: \"{{ c }}\", c: \"{{ b }}\"}\n",
        1000,
    );
    assert!(!o.succeeded(), "{:?}", o.tasks);
}

#[test]
fn hostile_roles_end_in_errors() {
    // A loop too long.
    let o = run_pure(
        "- debug: {msg: x}\n  loop: \"{{ range(100000) | list }}\"\n",
        100_000,
    );
    assert!(!o.succeeded(), "{:?}", o.stats);
    // Too many task executions.
    let o = run_pure(
        "- debug: {msg: x}\n  loop: \"{{ range(5000) | list }}\"\n",
        1000,
    );
    assert!(
        !o.succeeded()
            && o.failures
                .iter()
                .any(|f| f.msg.contains("more than 1000 tasks")),
        "{:?}",
        o.failures
    );
    // A template that computes forever.
    let o = run_pure("- debug: {msg: \"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\"}\n", 1000);
    assert!(!o.succeeded());
    // A pause longer than the limit.
    let o = run_pure("- pause: {seconds: 100000}\n", 1000);
    assert!(!o.succeeded());
    // Kubernetes modules without a client fail the task, not the process.
    let o = run_pure("- k8s: {definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: b}}}\n", 1000);
    assert!(!o.succeeded() && o.failures[0].msg.contains("Kubernetes client"));
}

#[test]
fn hostile_specs_never_crash() {
    // Extra vars from arbitrary CR specs: the seed role fails cleanly or succeeds, never panics.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ansible-bookstore");
    let opts = LoadOptions {
        roles_path: vec![],
        collections_paths: vec![],
        cwd: root,
    };
    let role = Role::load("bookstore", &opts).expect("test value");
    let ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    let deep = (0..200).fold(serde_json::json!(1), |acc, _| serde_json::json!([acc]));
    let specs = vec![
        serde_json::json!({}),
        serde_json::json!({"metadata": null}),
        serde_json::json!({"metadata": {"namespace": 5}}),
        serde_json::json!({"metadata": {"namespace": "{{ metadata }}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ lookup('env', 'HOME') }}"}}),
        serde_json::json!({"metadata": {"namespace": "{% for i in range(10**9) %}x{% endfor %}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ image }}"}, "image": "{{ metadata }}"}),
        serde_json::json!({"image": {"app": {"repository": "\u{0}\u{ffff}", "tag": []}}}),
        serde_json::json!({"image": deep}),
        serde_json::json!({"": 1, " ": 2, "A": {"B": {"C": "{{"}}}),
        serde_json::json!({"service": {"app": {"type": "{{ 1/0 }}"}}}),
        serde_json::json!({"image": {"mongodb": {"pullPolicy": "{{ x.y.z | default(q('k8s', kind='Secret')) }}"}}}),
        serde_json::json!({"metadata": {"namespace": "x".repeat(1 << 20)}}),
        serde_json::json!({"size": 1e308, "n": -0.0, "big": u64::MAX}),
        serde_json::json!({"metadata": {"namespace": "{{ '%s' % 1 }}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ metadata.namespace.__class__ }}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ ().__class__.__bases__[0].__subclasses__() }}"}}),
        serde_json::json!({"image": {"app": {"repository": "{{ image.app.repository }}"}}}),
        serde_json::json!({"metadata": {"namespace": "{{ range(999999999) | list }}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ 'a' * 999999999 }}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ [1] * 999999999 }}"}}),
        serde_json::json!({"metadata": {"namespace": "{{ 9 ** 9 ** 9 }}"}}),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test value");
    for spec in specs {
        let cr = serde_json::json!({"apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore", "metadata": {"name": "x", "namespace": "y"}, "spec": spec});
        let vars = bosun_ansible::for_cr(
            &cr,
            &bosun_ansible::ExtraVarsOptions {
                snake_case: true,
                group: "charts.example.com",
                kind: "BookStore",
                ..Default::default()
            },
        );
        let o = rt.block_on(role.run(&ctx, &vars));
        // No client: every spec ends in a failed first task, with a message.
        assert!(!o.succeeded(), "{spec}");
        assert!(!o.failures[0].msg.is_empty());
    }
}

#[test]
fn mark_unsafe_strings_are_never_templated() {
    let dir = tempfile::tempdir().expect("dir");
    let opts = role_with(dir.path(), &[("tasks/main.yml", "- debug: {msg: \"{{ payload }}\"}\n  register: shown\n- set_fact: {copy: \"{{ payload }}-x\"}\n")]);
    let role = Role::load("r", &opts).expect("load");
    let cr = serde_json::json!({"metadata": {"name": "a", "namespace": "b"}, "spec": {"payload": "{{ lookup('env', 'HOME') }}"}});
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    let unsafe_vars = bosun_ansible::for_cr(
        &cr,
        &bosun_ansible::ExtraVarsOptions {
            snake_case: true,
            mark_unsafe: true,
            group: "g",
            kind: "K",
            ..Default::default()
        },
    );
    let o = rt.block_on(role.run(&ctx, &unsafe_vars));
    assert_eq!(o.tasks[0].result["msg"], "{{ lookup('env', 'HOME') }}");
    assert_eq!(
        o.tasks[1].result["ansible_facts"]["copy"],
        "{{ lookup('env', 'HOME') }}-x"
    );
    // Without markUnsafe, Ansible templates the value when it is read.
    let vars = bosun_ansible::for_cr(
        &cr,
        &bosun_ansible::ExtraVarsOptions {
            snake_case: true,
            group: "g",
            kind: "K",
            ..Default::default()
        },
    );
    let o = rt.block_on(role.run(&ctx, &vars));
    assert_eq!(
        o.tasks[0].result["msg"],
        std::env::var("HOME").unwrap_or_default()
    );
}

/// What the native engine cannot run exactly is refused as outside its subset (so the entry
/// runs under real Ansible) — never loaded to stop halfway through a run: a template file
/// whose name is computed at run time, an import or role named by a template.
#[test]
fn computed_file_names_are_run_or_left_to_real_ansible() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                (
                    "tasks/main.yml",
                    "- name: x\n  k8s:\n    template: \"{{ kind }}.yaml.j2\"\n",
                ),
                ("templates/cm.yaml.j2", "when: {{ stamp | to_datetime }}\n"),
            ],
            "cm.yaml.j2:0:0: filter 'to_datetime'",
        ),
        (
            &[
                ("tasks/main.yml", "- import_tasks: \"{{ flavour }}.yml\"\n"),
                ("tasks/a.yml", "- debug: {msg: a}\n"),
            ],
            "import_tasks of a file named by a template",
        ),
        (
            &[(
                "tasks/main.yml",
                "- include_role:\n    name: \"{{ component }}\"\n",
            )],
            "role named by a template",
        ),
    ];
    for (files, want) in cases {
        let dir = tempfile::tempdir().expect("test value");
        let opts = role_with(dir.path(), files);
        let e = Role::load("r", &opts).expect_err("refused");
        assert!(e.to_string().contains(want), "{e}");
        assert!(
            e.is_outside_subset(),
            "{e} should leave the role to real Ansible"
        );
    }
    // A role's own Python plugins may redefine any name: the whole role goes to Ansible.
    let dir = tempfile::tempdir().expect("test value");
    let opts = role_with(
        dir.path(),
        &[
            ("tasks/main.yml", "- debug: {msg: \"{{ x | to_yaml }}\"}\n"),
            ("filter_plugins/own.py", "class FilterModule: pass\n"),
        ],
    );
    let e = Role::load("r", &opts).expect_err("refused");
    assert!(
        e.to_string().contains("filter_plugins/ (Python plugins)"),
        "{e}"
    );
    assert!(e.is_outside_subset(), "{e}");
    // Facts are gathered by real Ansible.
    let dir = tempfile::tempdir().expect("test value");
    std::fs::write(
        dir.path().join("site.yml"),
        "- hosts: localhost\n  gather_facts: true\n  gather_subset: [min]\n  tasks: []\n",
    )
    .expect("test value");
    let opts = LoadOptions {
        roles_path: vec![],
        collections_paths: vec![],
        cwd: dir.path().to_path_buf(),
    };
    let e = Role::load("site.yml", &opts).expect_err("refused");
    assert!(e.to_string().contains("gather_facts: true"), "{e}");
    assert!(e.is_outside_subset(), "{e}");
    // Templates the subset renders load, whatever names them.
    let dir = tempfile::tempdir().expect("test value");
    let opts = role_with(
        dir.path(),
        &[
            (
                "tasks/main.yml",
                "- name: x\n  k8s:\n    template: \"{{ kind }}.yaml.j2\"\n",
            ),
            ("templates/cm.yaml.j2", "name: {{ name | lower }}\n"),
        ],
    );
    Role::load("r", &opts).expect("loads");
}

/// `levels` nested flow sequences around a scalar: `[[[...1...]]]`.
fn nested(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

fn run_with(files: &[(&str, &str)], extra: serde_json::Value) -> bosun_ansible::Outcome {
    let dir = tempfile::tempdir().expect("test value");
    let opts = role_with(dir.path(), files);
    let role = Role::load("r", &opts).expect("the role loads");
    let ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test value");
    let extra = extra.as_object().cloned().unwrap_or_default();
    rt.block_on(role.run(&ctx, &extra))
}

#[test]
fn yaml_nested_deeper_than_the_limit_is_a_load_error() {
    // In a task file, the role's defaults and vars, and a vars file read by include_vars: a
    // load error naming the file, never a crash (this test runs in the debug build, on a test
    // thread's 2 MiB stack). Past 512 levels bosun-yaml refuses it while reading; past 128
    // the engine does (the deepest value it converts and templates).
    for (levels, says) in [
        (600, "exceeded max depth of 512"),
        (200, "more than 128 levels"),
    ] {
        let deep = nested(levels);
        let files: [(&str, String); 4] = [
            ("tasks/main.yml", format!("- debug:\n    msg: {deep}\n")),
            ("defaults/main.yml", format!("deep: {deep}\n")),
            ("vars/main.yml", format!("deep: {deep}\n")),
            ("vars/other.yml", format!("deep: {deep}\n")),
        ];
        for (path, text) in &files {
            let dir = tempfile::tempdir().expect("test value");
            let mut role = vec![(*path, text.as_str())];
            if *path == "vars/other.yml" {
                role.push(("tasks/main.yml", "- include_vars: other.yml\n"));
            }
            let opts = role_with(dir.path(), &role);
            let err = match Role::load("r", &opts) {
                Ok(_) => panic!("{path}: loaded YAML nested {levels} levels deep"),
                Err(e) => e.to_string(),
            };
            assert!(
                err.contains(&format!("roles/r/{path}:")) && err.contains(says),
                "{path}, {levels} levels: {err}"
            );
        }
    }
}

#[test]
fn values_within_the_limit_run_and_deeper_ones_fail_the_task() {
    // Within the limit, everything a role does with the value (template it, convert it,
    // compare it, print it) works.
    let deep = nested(120);
    let tasks = "- set_fact:\n    copy: \"{{ deep }}\"\n- debug:\n    msg: \"{{ deep | to_json | length }}\"\n- assert:\n    that: copy == deep\n- debug:\n    msg: \"{{ deep | to_nice_yaml | length }}\"\n";
    let defaults = format!("deep: {deep}\n");
    let o = run_with(
        &[("tasks/main.yml", tasks), ("defaults/main.yml", &defaults)],
        serde_json::json!({}),
    );
    assert!(o.succeeded(), "{:?}", o.failures);
    assert_eq!(o.stats.ok, 4);
    // A value a loop nests deeper, one level a task: the task that goes past the limit
    // fails with the reason, the run ends there.
    let tasks = "- set_fact: {x: 1}\n- set_fact:\n    x: \"{{ [x] }}\"\n  loop: \"{{ range(300) | list }}\"\n";
    let o = run_with(&[("tasks/main.yml", tasks)], serde_json::json!({}));
    assert_eq!(o.failures[0].msg, "One or more items failed");
    let items = &o.tasks[1].result["results"];
    assert!(
        items.to_string().contains("more than 128 levels"),
        "{items}"
    );
    // A spec string that reads as a deeply nested list (ansible-core 2.18 turns such a
    // rendered string into the list): a task error, not a crash.
    let tasks = "- debug:\n    msg: \"{{ text }}\"\n";
    for levels in [200, 100_000] {
        let o = run_with(
            &[("tasks/main.yml", tasks)],
            serde_json::json!({"text": nested(levels)}),
        );
        assert!(
            o.succeeded() || !o.failures[0].msg.is_empty(),
            "{levels}: {:?}",
            o.failures
        );
    }
}
