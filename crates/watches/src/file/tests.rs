use super::*;

fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

/// A directory with a chart `helm-charts/book-store` and a playbook beside the watches file.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("helm-charts/book-store");
    std::fs::create_dir_all(&chart).expect("mkdir");
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: book-store\nversion: 0.1.0\n",
    )
    .expect("chart");
    std::fs::write(dir.path().join("site.yml"), "- hosts: localhost\n").expect("playbook");
    dir
}

fn parse(dir: &tempfile::TempDir, text: &str) -> Result<WatchesFile, WatchesError> {
    WatchesFile::parse(
        &dir.path().join("watches.yaml"),
        text,
        &env(&[("IMAGE", "repo/app:1.2"), ("TEAM", "books")]),
    )
}

#[test]
fn the_seed_helm_watches_file() {
    let dir = project();
    let w = parse(
        &dir,
        "# Use the 'create api' subcommand to add watches to this file.\n- group: charts.example.com\n  version: v1alpha1\n  kind: BookStore\n  chart: helm-charts/book-store\n#+kubebuilder:scaffold:watch\n",
    )
    .expect("valid");
    let e = &w.entries[0];
    assert_eq!(
        e.gvk,
        GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore")
    );
    assert_eq!(
        e.runner,
        Runner::Chart(dir.path().join("helm-charts/book-store"))
    );
    assert!(e.watch_dependent_resources);
    assert_eq!((e.index, e.line), (1, 2));
    assert!(w.warnings.is_empty());
}

#[test]
fn helm_options_and_environment() {
    let dir = project();
    let w = parse(
        &dir,
        r#"
- group: charts.example.com
  version: v1alpha1
  kind: BookStore
  chart: helm-charts/book-store
  watchDependentResources: false
  reconcilePeriod: 1h30m
  maxConcurrentReconciles: 4
  selector: {matchLabels: {team: books}, matchExpressions: [{key: tier, operator: In, values: [a, b]}]}
  overrideValues:
    image.repository: $IMAGE
    image.tag: "${UNSET}"
    owner: "${TEAM}-x"
"#,
    )
    .expect("valid");
    let e = &w.entries[0];
    assert!(!e.watch_dependent_resources);
    assert_eq!(e.reconcile_period, Some(Duration::from_secs(5400)));
    assert_eq!(e.max_concurrent_reconciles, Some(4));
    assert_eq!(
        e.selector_string().as_deref(),
        Some("team=books,tier in (a,b)")
    );
    assert_eq!(e.override_values["image.repository"], "repo/app:1.2");
    assert_eq!(
        e.override_values["image.tag"], "",
        "unset: empty, as os.ExpandEnv"
    );
    assert_eq!(e.override_values["owner"], "books-x");
    assert!(!e.dry_run_server, "lookup is offline unless asked");
}

#[test]
fn dry_run_option_server_turns_lookup_on_and_others_are_refused() {
    let dir = project();
    let entry = |opt: &str| {
        format!("- {{group: charts.example.com, version: v1alpha1, kind: BookStore, chart: helm-charts/book-store, dryRunOption: {opt}}}\n")
    };
    let w = parse(&dir, &entry("server")).expect("valid");
    assert!(w.entries[0].dry_run_server);
    for off in ["none", "client"] {
        assert!(!parse(&dir, &entry(off)).expect("valid").entries[0].dry_run_server);
    }
    let e = parse(&dir, &entry("sever")).expect_err("a typo is refused");
    assert!(e.to_string().contains("dryRunOption"), "{e}");
}

#[test]
fn ansible_options_with_their_defaults() {
    let dir = project();
    let w = parse(
        &dir,
        r#"
- version: v1alpha1
  group: charts.example.com
  kind: BookStore
  role: bookstore
- version: v1
  group: cache.example.com
  kind: Memcached
  playbook: site.yml
  vars: {state: present, size: 3}
  finalizer: {name: cache.example.com/finalizer, vars: {state: absent}}
  snakeCaseParameters: false
  manageStatus: false
  blacklist: [{group: apps, version: v1, kind: ReplicaSet}]
  path: "${UNSET_TOO}"
"#,
    )
    .expect("valid");
    let a = &w.entries[0].ansible;
    assert_eq!(w.entries[0].runner, Runner::Role("bookstore".into()));
    assert!(
        a.manage_status
            && a.snake_case_parameters
            && !a.mark_unsafe
            && !a.watch_cluster_scoped_resources
    );
    assert_eq!(a.max_runner_artifacts, 20);
    let m = &w.entries[1];
    assert_eq!(m.runner, Runner::Playbook(dir.path().join("site.yml")));
    assert_eq!(m.ansible.vars["size"], 3);
    let f = m.ansible.finalizer.as_ref().expect("finalizer");
    assert_eq!(
        (f.name.as_str(), f.runner.is_none()),
        ("cache.example.com/finalizer", true)
    );
    assert_eq!(f.vars["state"], "absent");
    assert!(!m.ansible.snake_case_parameters && !m.ansible.manage_status);
    assert_eq!(m.ansible.blacklist[0].kind, "ReplicaSet");
    assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
    assert!(
        w.warnings[0].0.contains("unknown key `path`"),
        "{:?}",
        w.warnings
    );
}

#[test]
fn braced_variables_expand_and_unset_ones_stay() {
    let e = env(&[("A", "1")]);
    assert_eq!(expand_braced("x ${A} ${B} $A ${", &e), "x 1 ${B} $A ${");
    assert_eq!(expand_env("x ${A} ${B} $A $ $1A", &e), "x 1  1 $ ");
}

#[test]
fn errors_name_the_line_entry_and_field() {
    let dir = project();
    let cases: &[(&str, &str)] = &[
        ("- group: g\n  kind: K\n  chart: helm-charts/book-store\n", "watches.yaml:1: entry 1 (K): version: version must not be empty"),
        ("- group: g\n  version: v1\n  role: r\n", "watches.yaml:1: entry 1: kind: kind must not be empty"),
        ("- {group: g, version: v1, kind: K}\n", "entry 1 (K): one of chart, role or playbook is required"),
        ("- {group: g, version: v1, kind: K, chart: c, role: r}\n", "chart, role and playbook are exclusive"),
        ("- {group: g, version: v1, kind: K, chart: nowhere}\n", "entry 1 (K): chart: invalid chart directory nowhere: no Chart.yaml"),
        ("- {group: g, version: v1, kind: K, playbook: none.yml}\n", "playbook: none.yml not found"),
        ("- {group: g, version: v1, kind: K, role: r, reconcilePeriod: soon}\n", "reconcilePeriod: \"soon\" is not a duration"),
        ("- {group: g, version: v1, kind: K, role: r, maxConcurrentReconciles: 0}\n", "maxConcurrentReconciles: expected a whole number from 1 to 1024"),
        ("- {group: g, version: v1, kind: K, role: r, watchDependentResources: maybe}\n", "watchDependentResources: expected true or false"),
        ("- {group: g, version: v1, kind: K, role: r, selector: {matchExpressions: [{key: a, operator: Near}]}}\n", "selector.matchExpressions: invalid requirement"),
        ("- {group: g, version: v1, kind: K, role: r, finalizer: {vars: {a: 1}}}\n", "finalizer.name: a finalizer needs a name"),
        ("- {group: g, version: v1, kind: K, role: r}\n- {group: g, version: v1, kind: K, role: s}\n", "watches.yaml:2: entry 2 (K): duplicate GVK K.g/v1: entry 1 watches it already"),
        ("- {group: g, version: v1, kind: K, role: r}\n- 3\n", "watches.yaml:2: entry 2: expected a mapping"),
        ("{group: g}\n", "watches.yaml:1: expected a list of entries"),
        ("", "empty: a watches file is a list of entries"),
        ("- [\n", "not YAML"),
    ];
    for (text, want) in cases {
        let err = parse(&dir, text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains(want),
            "for {text:?}:\n  got  {err:?}\n  want {want:?}"
        );
    }
}

#[test]
fn keys_of_the_other_flavour_are_warned_about() {
    let dir = project();
    let w = parse(
        &dir,
        "- {group: g, version: v1, kind: K, chart: helm-charts/book-store, vars: {a: 1}, overideValues: {a: b}}\n",
    )
    .expect("valid");
    let text: Vec<&str> = w.warnings.iter().map(|w| w.0.as_str()).collect();
    assert!(
        text.iter()
            .any(|w| w.contains("`vars` applies to role and playbook entries only")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|w| w.contains("unknown key `overideValues`")),
        "{text:?}"
    );
}

#[test]
fn durations_like_go() {
    for (s, secs) in [
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        ("0", 0.0),
    ] {
        assert_eq!(parse_duration(s), Ok(Duration::from_secs_f64(secs)), "{s}");
    }
    for bad in ["", "5", "m", "1d", "-1s", "1h x"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

/// Review L4: helm-operator reads the file, then expands `overrideValues` once
/// (`os.ExpandEnv`); ansible-operator expands `${VAR}` in the whole text first. A variable's
/// value never changes a Helm entry's YAML, and is never expanded twice.
#[test]
fn helm_entries_expand_override_values_once_after_parsing() {
    let dir = project();
    let text = r#"
- group: charts.example.com
  version: v1alpha1
  kind: BookStore
  chart: helm-charts/book-store
  overrideValues:
    password: ${PASS}
    enabled: ${ENABLE}
    empty: ${EMPTY}
    comment: ${HASH}
    brace: ${BRACE}
- version: v1
  group: cache.example.com
  kind: Memcached
  playbook: site.yml
  vars:
    team: "${TEAM}"
    enabled: ${ENABLE}
"#;
    let w = WatchesFile::parse(
        &dir.path().join("watches.yaml"),
        text,
        &env(&[
            ("PASS", "p$ss"),
            ("ENABLE", "yes"),
            ("EMPTY", ""),
            ("HASH", "a # b"),
            ("BRACE", "{x: 1}"),
            ("TEAM", "books"),
        ]),
    )
    .expect("valid");
    let o = &w.entries[0].override_values;
    assert_eq!(o["password"], "p$ss", "expanded once");
    assert_eq!(o["enabled"], "yes", "a string, not YAML's boolean");
    assert_eq!(o["empty"], "", "an empty variable is an empty value");
    assert_eq!(o["comment"], "a # b");
    assert_eq!(o["brace"], "{x: 1}");
    let vars = &w.entries[1].ansible.vars;
    assert_eq!(
        vars["team"], "books",
        "ansible-operator expands the whole text"
    );
    assert_eq!(
        vars["enabled"], true,
        "and then reads it: yes is YAML 1.1's true"
    );
}
