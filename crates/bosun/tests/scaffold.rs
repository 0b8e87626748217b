//! `bosun init` and `bosun create api --plugins helm`, through the binary: operator-sdk's
//! layout, the watches marker, the refusals (nothing written), the freshness of config/crd and
//! config/rbac against `bosun crd` / `bosun rbac --watches`, and a scaffolded operator that
//! converges on the test control plane from its own config/ as its own ServiceAccount.
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bosun_testenv::{eventually, shared, test_namespace, NodeAgent, NodeAgentConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::api::{Api, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::ResourceExt;
use support::{apply_yaml, ok, repo, run, service_account_kubeconfig, tree};

fn greeter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/greeter")
}

/// Runs the recipe of the project Makefile's `target` as make would, `$(BOSUN)` being this
/// binary (the scaffold's recipes call nothing else; prerequisites are not run); returns what
/// the recipe printed.
fn make(dir: &Path, target: &str) -> String {
    let makefile = std::fs::read_to_string(dir.join("Makefile")).expect("Makefile");
    let mut lines = makefile
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{target}:")));
    assert!(lines.next().is_some(), "no target {target}: {makefile}");
    let recipe: Vec<&str> = lines.take_while(|l| l.starts_with('\t')).collect();
    assert!(!recipe.is_empty(), "{target} has no recipe");
    recipe
        .iter()
        .map(|line| {
            let args = line
                .trim()
                .strip_prefix("$(BOSUN) ")
                .unwrap_or_else(|| panic!("{target} runs {line:?}, not bosun"));
            ok(dir, &args.split_whitespace().collect::<Vec<_>>())
        })
        .collect()
}

/// The error of a refused command.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(!out.status.success(), "bosun {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A project named `name` in a fresh directory, with the greeter chart's kind.
fn greeter_project(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    let out = ok(
        &dir,
        &["init", "--plugins", "helm", "--domain", "example.com"],
    );
    assert!(
        out.starts_with("Writing kustomize manifests for you to edit...\nWriting scaffold for you to edit...\nNext: define a resource with:\n$ bosun create api"),
        "{out}"
    );
    let chart = greeter();
    let out = ok(
        &dir,
        &[
            "create",
            "api",
            "--helm-chart",
            chart.to_str().expect("utf8"),
        ],
    );
    assert!(
        out.contains("Created helm-charts/greeter\nGenerating RBAC rules\nNext: "),
        "{out}"
    );
    (tmp, dir)
}

/// operator-sdk v1.42's paths after `init --plugins helm --domain example.com` and
/// `create api --helm-chart greeter` (its testdata/helm/memcached-operator without the bundle,
/// with group charts and kind Greeter), minus what bosun folds elsewhere.
const OPERATOR_SDK_PATHS: &[&str] = &[
    ".gitignore",
    "Dockerfile",
    "Makefile",
    "PROJECT",
    "watches.yaml",
    "config/crd/bases/charts.example.com_greeters.yaml",
    "config/crd/kustomization.yaml",
    "config/default/kustomization.yaml",
    "config/default/manager_metrics_patch.yaml",
    "config/default/metrics_service.yaml",
    "config/manager/kustomization.yaml",
    "config/manager/manager.yaml",
    "config/manifests/kustomization.yaml",
    "config/network-policy/allow-metrics-traffic.yaml",
    "config/network-policy/kustomization.yaml",
    "config/prometheus/kustomization.yaml",
    "config/prometheus/monitor.yaml",
    "config/rbac/kustomization.yaml",
    "config/rbac/leader_election_role.yaml",
    "config/rbac/leader_election_role_binding.yaml",
    "config/rbac/greeter_admin_role.yaml",
    "config/rbac/greeter_editor_role.yaml",
    "config/rbac/greeter_viewer_role.yaml",
    "config/rbac/metrics_auth_role.yaml",
    "config/rbac/metrics_auth_role_binding.yaml",
    "config/rbac/metrics_reader_role.yaml",
    "config/rbac/role.yaml",
    "config/rbac/role_binding.yaml",
    "config/rbac/service_account.yaml",
    "config/samples/charts_v1alpha1_greeter.yaml",
    "config/samples/kustomization.yaml",
    "config/scorecard/bases/config.yaml",
    "config/scorecard/kustomization.yaml",
    "config/scorecard/patches/basic.config.yaml",
    "config/scorecard/patches/olm.config.yaml",
];

/// bosun's role.yaml holds the TokenReview and SubjectAccessReview rules of the secured
/// metrics endpoint (as `bosun rbac` prints them), so these two files have nothing to hold.
const FOLDED_INTO_ROLE: &[&str] = &[
    "config/rbac/metrics_auth_role.yaml",
    "config/rbac/metrics_auth_role_binding.yaml",
];

/// `make install`, `deploy` and `bundle` (real make, this bosun, a kubectl that accepts
/// anything) leave a hand-edited config/ as the user left it: only `make manifests` derives
/// config/rbac and config/crd again, as operator-sdk's targets never regenerate them.
#[test]
fn make_install_deploy_and_bundle_keep_hand_edited_config() {
    let (tmp, dir) = greeter_project("edit-operator");
    let kubectl = tmp.path().join("kubectl");
    std::fs::write(&kubectl, "#!/bin/sh\ncat >/dev/null\n").expect("stub");
    std::fs::set_permissions(
        &kubectl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let edited = [
        "config/rbac/role.yaml",
        "config/crd/bases/charts.example.com_greeters.yaml",
        "config/crd/kustomization.yaml",
    ];
    for f in edited {
        let p = dir.join(f);
        let mut text = std::fs::read_to_string(&p).expect(f);
        text.push_str("# edited by hand\n");
        std::fs::write(&p, text).expect(f);
    }
    let before: Vec<String> = edited
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).expect(f))
        .collect();
    let out = std::process::Command::new("make")
        .args(["install", "deploy", "bundle"])
        .arg(format!("BOSUN={}", env!("CARGO_BIN_EXE_bosun")))
        .arg(format!("KUBECTL={}", kubectl.display()))
        .current_dir(&dir)
        .output()
        .expect("make runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (f, was) in edited.iter().zip(before) {
        let now = std::fs::read_to_string(dir.join(f)).expect(f);
        assert!(
            now == was,
            "{f} was rewritten by make install/deploy/bundle"
        );
    }
    assert!(dir.join("bundle/manifests").is_dir(), "make bundle ran");
}

#[test]
fn the_layout_is_operator_sdks() {
    let (_tmp, dir) = greeter_project("shop-operator");
    let got = tree(&dir);
    let chart_files: Vec<String> = tree(&greeter())
        .into_keys()
        .map(|k| format!("helm-charts/greeter/{k}"))
        .collect();
    let mut want: Vec<String> = OPERATOR_SDK_PATHS
        .iter()
        .filter(|p| !FOLDED_INTO_ROLE.contains(p))
        .map(|p| p.to_string())
        .chain(chart_files.clone())
        // bosun's own addition: the CI job running `bosun verify --quick`.
        .chain([".github/workflows/verify.yml".to_string()])
        .collect();
    want.sort();
    let have: Vec<String> = got.keys().cloned().collect();
    assert_eq!(have, want);
    // The chart is copied verbatim.
    for f in &chart_files {
        let rel = f.trim_start_matches("helm-charts/greeter/");
        assert_eq!(
            got[f],
            std::fs::read(greeter().join(rel)).expect("chart file"),
            "{f}"
        );
    }
    let text = |p: &str| String::from_utf8(got[p].clone()).expect("utf8");
    assert_eq!(
        text("watches.yaml"),
        "# Use the 'create api' subcommand to add watches to this file.\n- group: charts.example.com\n  version: v1alpha1\n  kind: Greeter\n  chart: helm-charts/greeter\n# +kubebuilder:scaffold:watch\n"
    );
    assert!(text("Dockerfile").contains(&format!(
        "FROM ghcr.io/bosun-dev/bosun:v{}\n",
        env!("CARGO_PKG_VERSION")
    )));
    let make = text("Makefile");
    for target in [
        "all:",
        "help:",
        "manifests:",
        "run:",
        "docker-build:",
        "docker-push:",
        "docker-buildx:",
        "install:",
        "uninstall:",
        "deploy:",
        "undeploy:",
        "kustomize:",
        "helm-operator:",
    ] {
        assert!(
            make.lines().any(|l| l.starts_with(target)),
            "target {target}"
        );
    }
    assert!(make.contains("\n\t$(BOSUN) run --watches watches.yaml\n"));
    assert!(
        make.contains("\nmanifests: helm-operator ##")
            && make.contains("\n\t$(BOSUN) generate manifests\n")
    );
    assert!(make.contains("\ninstall: kustomize ##"));
    for fetch in ["curl", "wget", "go install", "GOBIN"] {
        assert!(!make.contains(fetch), "the Makefile downloads ({fetch})");
    }
    let project = text("PROJECT");
    assert!(
        project.contains("layout:\n- helm.sdk.operatorframework.io/v1\n")
            && project.contains("projectName: shop-operator\n")
            && project.contains("  group: charts\n  kind: Greeter\n  version: v1alpha1\n"),
        "{project}"
    );
    // The sample's spec is the chart's values; the CRD's schema is inferred from them.
    let sample: serde_json::Value =
        serde_yaml::from_str(&text("config/samples/charts_v1alpha1_greeter.yaml")).expect("yaml");
    assert_eq!(
        sample["spec"],
        serde_json::json!({"replicaCount": 1, "greeting": "Hello",
            "image": {"repository": "registry.example/greeter", "tag": "1.0"}})
    );
    let crd: serde_json::Value =
        serde_yaml::from_str(&text("config/crd/bases/charts.example.com_greeters.yaml"))
            .expect("yaml");
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["greeting"]["type"], "string", "{spec}");
    assert_eq!(
        spec["properties"]["replicaCount"]["type"], "number",
        "{spec}"
    );
    // Kustomize turned on for the first API, as operator-sdk does.
    assert!(text("config/default/kustomization.yaml").contains("\n- ../crd\n"));
    // No wildcard anywhere in the RBAC.
    for (p, c) in &got {
        if p.starts_with("config/rbac/") {
            let c = String::from_utf8_lossy(c);
            assert!(!c.contains("'*'") && !c.contains("\"*\""), "{p}");
        }
    }
}

/// `init` with a chart runs `create api` after it, as operator-sdk's does.
#[test]
fn init_with_a_chart_is_init_then_create_api() {
    let (_tmp, two_steps) = greeter_project("same");
    let tmp = tempfile::tempdir().expect("tmp");
    let one = tmp.path().join("same");
    std::fs::create_dir(&one).expect("mkdir");
    let chart = greeter();
    let out = ok(
        &one,
        &[
            "init",
            "--plugins",
            "helm",
            "--domain",
            "example.com",
            "--helm-chart",
            chart.to_str().expect("utf8"),
        ],
    );
    assert!(out.contains("Created helm-charts/greeter"), "{out}");
    assert_eq!(tree(&one), tree(&two_steps));
}

/// A chart archive (`helm package`'s layout: files under the chart's directory) scaffolds the
/// same project as the chart's directory.
#[test]
fn a_chart_archive_scaffolds_what_its_directory_does() {
    let (_tmp, from_dir) = greeter_project("packed");
    let tmp = tempfile::tempdir().expect("tmp");
    let tgz = tmp.path().join("greeter-0.1.0.tgz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&tgz).expect("create"),
        flate2::Compression::default(),
    );
    let mut ar = tar::Builder::new(gz);
    ar.append_dir_all("greeter", greeter()).expect("pack");
    ar.into_inner().expect("tar").finish().expect("gz");
    let dir = tmp.path().join("packed");
    std::fs::create_dir(&dir).expect("mkdir");
    ok(
        &dir,
        &["init", "--plugins", "helm", "--domain", "example.com"],
    );
    let out = ok(
        &dir,
        &["create", "api", "--helm-chart", tgz.to_str().expect("utf8")],
    );
    assert!(out.contains("Created helm-charts/greeter"), "{out}");
    assert_eq!(tree(&dir), tree(&from_dir));
}

/// Serves `files` (path → body, else 404) over HTTP on a loopback port for the rest of the
/// test process; returns the base URL.
fn serve(files: BTreeMap<String, Vec<u8>>) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let Ok(read) = conn.try_clone() else { continue };
            let mut reader = BufReader::new(read);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let (status, body) = match files.get(&path) {
                Some(b) => ("200 OK", b.clone()),
                None => ("404 Not Found", Vec::new()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    base
}

/// `--helm-chart example/greeter --helm-chart-repo URL` (a repository on a loopback HTTP
/// server) scaffolds the same project as the chart's directory, so the same operator converges.
#[test]
fn a_repository_chart_scaffolds_what_its_directory_does() {
    let (_tmp, from_dir) = greeter_project("fetched");
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut ar = tar::Builder::new(gz);
    ar.append_dir_all("greeter", greeter()).expect("pack");
    let tgz = ar.into_inner().expect("tar").finish().expect("gz");
    let index = "apiVersion: v1\nentries:\n  greeter:\n  - name: greeter\n    version: 0.1.0\n    urls:\n    - greeter-0.1.0.tgz\n";
    let url = serve(BTreeMap::from([
        ("/repo/index.yaml".to_string(), index.as_bytes().to_vec()),
        ("/repo/greeter-0.1.0.tgz".to_string(), tgz),
    ]));
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("fetched");
    std::fs::create_dir(&dir).expect("mkdir");
    let repo = format!("{url}/repo");
    let out = ok(
        &dir,
        &[
            "init",
            "--plugins",
            "helm",
            "--domain",
            "example.com",
            "--helm-chart",
            "example/greeter",
            "--helm-chart-repo",
            &repo,
        ],
    );
    assert!(out.contains("Created helm-charts/greeter"), "{out}");
    assert_eq!(tree(&dir), tree(&from_dir));
    // A version the index does not hold: refused, naming the versions there are.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).expect("mkdir");
    let err = refused(
        &other,
        &[
            "init",
            "--plugins",
            "helm",
            "--helm-chart",
            "greeter",
            "--helm-chart-repo",
            &repo,
            "--helm-chart-version",
            "2.0.0",
        ],
    );
    assert!(err.contains("has no version 2.0.0"), "{err}");
}

/// The generated CRDs and RBAC are exactly what bosun derives for the generated watches file.
fn assert_fresh(dir: &Path, project: &str) {
    let got = tree(dir);
    let kust = String::from_utf8(got["config/crd/kustomization.yaml"].clone()).expect("utf8");
    let crds: String = kust
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|f| String::from_utf8(got[&format!("config/crd/{f}")].clone()).expect("utf8"))
        .collect();
    assert_eq!(crds, ok(dir, &["crd", "--watches", "watches.yaml"]));
    let rbac: String = bosun_scaffold::commands::RBAC_FILES
        .iter()
        .map(|f| String::from_utf8(got[*f].clone()).expect("utf8"))
        .collect();
    let ns = format!("--namespace={project}-system");
    assert_eq!(rbac, ok(dir, &["rbac", "--watches", "watches.yaml", &ns]));
}

#[test]
fn config_crd_and_rbac_are_fresh() {
    let (_tmp, dir) = greeter_project("fresh-operator");
    assert_fresh(&dir, "fresh-operator");
}

/// A second `create api` in a project whose first kind's watch ends with `last_line`.
struct SecondApi<'a> {
    last_line: &'a str,
    args: &'a [&'a str],
    /// What `create api` says it created.
    created: &'a str,
    /// watches.yaml afterwards, with the user's line after `last_line`.
    watches: &'a str,
    files: &'a [&'a str],
    samples: &'a str,
}

/// The second kind's watch is added at the marker (a line of the user's own stays where it
/// is), with its CRD, sample and roles; config/ stays fresh.
fn assert_second_api_at_the_marker(dir: &Path, project: &str, case: SecondApi) {
    let w = dir.join("watches.yaml");
    let before = std::fs::read_to_string(&w).expect("watches");
    assert!(before.contains(case.last_line), "{before}");
    let mine = before.replace(
        case.last_line,
        &format!("{}  reconcilePeriod: 30s # mine\n", case.last_line),
    );
    std::fs::write(&w, &mine).expect("edit");
    let out = ok(dir, case.args);
    assert!(out.contains(case.created), "{out}");
    assert_eq!(std::fs::read_to_string(&w).expect("watches"), case.watches);
    let got = tree(dir);
    for p in case.files {
        assert!(got.contains_key(*p), "{p}");
    }
    let samples =
        String::from_utf8(got["config/samples/kustomization.yaml"].clone()).expect("utf8");
    assert!(samples.contains(case.samples), "{samples}");
    assert_fresh(dir, project);
}

#[test]
fn a_second_api_is_added_at_the_marker() {
    let (_tmp, dir) = greeter_project("two-kinds");
    assert_second_api_at_the_marker(
        &dir,
        "two-kinds",
        SecondApi {
            last_line: "  chart: helm-charts/greeter\n",
            args: &["create", "api", "--kind", "Library", "--version", "v1"],
            created: "Created helm-charts/library",
            watches: "# Use the 'create api' subcommand to add watches to this file.\n- group: charts.example.com\n  version: v1alpha1\n  kind: Greeter\n  chart: helm-charts/greeter\n  reconcilePeriod: 30s # mine\n- group: charts.example.com\n  version: v1\n  kind: Library\n  chart: helm-charts/library\n# +kubebuilder:scaffold:watch\n",
            files: &[
                "config/crd/bases/charts.example.com_libraries.yaml",
                "config/samples/charts_v1_library.yaml",
                "config/rbac/library_editor_role.yaml",
                "helm-charts/library/Chart.yaml",
            ],
            samples: "- charts_v1alpha1_greeter.yaml\n- charts_v1_library.yaml\n",
        },
    );
}

#[test]
fn a_second_ansible_api_is_added_at_the_marker() {
    let (_tmp, dir) = ansible_project("two-roles", "cache", "Memcached", &["--generate-role"]);
    assert_second_api_at_the_marker(
        &dir,
        "two-roles",
        SecondApi {
            last_line: "  role: memcached\n",
            args: &[
                "create",
                "api",
                "--group",
                "cache",
                "--version",
                "v1",
                "--kind",
                "Library",
                "--generate-playbook",
            ],
            created: "Created playbooks/library.yml",
            watches: "# Use the 'create api' subcommand to add watches to this file.\n- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n  reconcilePeriod: 30s # mine\n- version: v1\n  group: cache.example.com\n  kind: Library\n  playbook: playbooks/library.yml\n# +kubebuilder:scaffold:watch\n",
            files: &[
                "config/crd/bases/cache.example.com_libraries.yaml",
                "config/samples/cache_v1_library.yaml",
                "config/rbac/library_editor_role.yaml",
                "playbooks/library.yml",
            ],
            samples: "- cache_v1alpha1_memcached.yaml\n- cache_v1_library.yaml\n",
        },
    );
}

#[test]
fn bad_input_is_refused_with_the_fix_and_nothing_written() {
    let (_tmp, dir) = greeter_project("refusals");
    let before = tree(&dir);
    let chart = greeter();
    let chart = chart.to_str().expect("utf8");
    let broken = tempfile::tempdir().expect("tmp");
    let b = broken.path().join("broken");
    std::fs::create_dir_all(b.join("templates")).expect("mkdir");
    std::fs::write(
        b.join("Chart.yaml"),
        "apiVersion: v2\nname: broken\nversion: 0.1.0\n",
    )
    .expect("chart");
    std::fs::write(b.join("templates/cm.yaml"), "data: {{ if }}\n").expect("template");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["create", "api", "--helm-chart", chart],
            "already exists: choose another --kind",
        ),
        (
            vec!["create", "api", "--kind", "Greeter", "--version", "v2"],
            "already exists",
        ),
        (
            vec!["create", "api", "--kind", "Library", "--group", "shop"],
            "set 'multigroup: true' in the PROJECT file",
        ),
        (
            vec!["create", "api", "--kind", "Library", "--group", "Bad_Group"],
            "invalid group \"Bad_Group\": use lowercase",
        ),
        (
            vec!["create", "api", "--kind", "library"],
            "invalid kind \"library\": use UpperCamelCase",
        ),
        (
            vec!["create", "api", "--kind", "Library", "--version", "1"],
            "invalid version \"1\"",
        ),
        (
            vec!["create", "api", "--helm-chart", b.to_str().expect("utf8")],
            "does not load",
        ),
        (
            vec!["create", "api", "--plugins", "ansible.sdk.operatorframework.io/v1", "--kind", "Library"],
            "this project's layout is helm.sdk.operatorframework.io/v1, not ansible.sdk.operatorframework.io/v1",
        ),
        (vec!["create", "api"], "either --kind or --helm-chart"),
        (
            vec!["init", "--plugins", "helm"],
            "is not empty (found Dockerfile, Makefile, PROJECT, config, helm-charts, watches.yaml): run `bosun init` in an empty directory",
        ),
    ];
    for (args, fix) in cases {
        let err = refused(&dir, &args);
        assert!(err.contains(fix), "bosun {args:?}: {err}");
        assert_eq!(tree(&dir), before, "bosun {args:?} wrote something");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with(".bosun"))
            .collect();
        assert!(left.is_empty(), "a staging directory is left: {left:?}");
    }
    let empty = tempfile::tempdir().expect("tmp");
    let err = refused(empty.path(), &["init", "--plugins", "go/v4"]);
    assert!(err.contains("unknown plugin \"go/v4\""), "{err}");
    let err = refused(empty.path(), &["create", "api", "--kind", "Library"]);
    assert!(
        err.contains("run `bosun init --plugins helm` (or ansible) there first"),
        "{err}"
    );
    let err = refused(
        empty.path(),
        &["init", "--plugins", "helm", "--domain", "Example.com"],
    );
    assert!(err.contains("invalid domain \"Example.com\""), "{err}");
    assert!(tree(empty.path()).is_empty());
}

fn condition_true(o: &DynamicObject, type_: &str) -> bool {
    o.data["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}

/// A scaffolded project's operator, running: its CRDs and RBAC applied from its own config/,
/// `bosun run` (the binary, with the manager's arguments) authenticated as the ServiceAccount
/// of config/rbac, watching a fresh namespace where [`Running::apply_samples`] creates its
/// samples.
struct Running {
    admin: kube::Client,
    ns: String,
    child: tokio::process::Child,
    _agent: NodeAgent,
    _one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
}

/// config/rbac's cluster-scoped objects have the same names in every project (kustomize's
/// namePrefix makes them unique in an install, applied raw here): one project runs at a time.
static CLUSTER_RBAC: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Running {
    async fn start(dir: &Path, project: &str) -> Running {
        let one_at_a_time = CLUSTER_RBAC.lock().await;
        let cp = shared().await.expect("control plane");
        let admin = cp.client().await.expect("client");
        let system = format!("{project}-system");
        let ns_obj: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": system}})).expect("ns");
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns_obj)
            .await
            .expect("system namespace");
        let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).expect(rel);
        let kust = read("config/crd/kustomization.yaml");
        for base in kust.lines().filter_map(|l| l.strip_prefix("- ")) {
            apply_yaml(&admin, &read(&format!("config/crd/{base}")), None).await;
        }
        for f in bosun_scaffold::commands::RBAC_FILES
            .iter()
            .copied()
            .chain(["config/rbac/service_account.yaml"])
        {
            apply_yaml(&admin, &read(f), None).await;
        }
        let kubeconfig = dir.join("../sa.kubeconfig");
        service_account_kubeconfig(
            cp,
            &admin,
            &system,
            bosun_scaffold::kustomize::SERVICE_ACCOUNT,
            &kubeconfig,
        )
        .await;
        let ns = test_namespace(&admin, "scaffold").await.expect("ns");
        let agent = NodeAgent::start(
            admin.clone(),
            NodeAgentConfig {
                namespace: Some(ns.clone()),
                resize_needs_restart: false,
            },
        );
        // The manager's own arguments (config/manager), with the project dir's watches file.
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
            .current_dir(dir)
            .args([
                "run",
                "--leader-elect",
                "--leader-election-id",
                bosun_scaffold::kustomize::LEASE,
                "--watches",
                "watches.yaml",
                "--metrics-addr=off",
                "--probe-addr=off",
                "--ansible-engine=native",
            ])
            .arg(format!("--lease-namespace={system}"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .env("POD_NAME", format!("{project}-0"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn bosun run");
        Running {
            admin,
            ns,
            child,
            _agent: agent,
            _one_at_a_time: one_at_a_time,
        }
    }

    /// Creates config/samples (as `kubectl apply -k config/samples`) in the test namespace.
    async fn apply_samples(&self, dir: &Path) {
        let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).expect(rel);
        let samples = read("config/samples/kustomization.yaml");
        for s in samples.lines().filter_map(|l| l.strip_prefix("- ")) {
            apply_yaml(
                &self.admin,
                &read(&format!("config/samples/{s}")),
                Some(&self.ns),
            )
            .await;
        }
    }

    /// Waits until `pred` holds for the named custom resource; fails with its status and
    /// what `bosun run` said otherwise.
    async fn wait(
        self,
        ar: &ApiResource,
        name: &str,
        pred: impl Fn(&DynamicObject) -> bool,
    ) -> (Running, DynamicObject) {
        let api: Api<DynamicObject> = Api::namespaced_with(self.admin.clone(), &self.ns, ar);
        let got = eventually(120, || async {
            let o = api.get(name).await.ok()?;
            pred(&o).then_some(o)
        })
        .await;
        match got {
            Some(o) => (self, o),
            None => {
                let status = api
                    .get(name)
                    .await
                    .map(|o| o.data["status"].clone())
                    .unwrap_or_default();
                let mut child = self.child;
                let _ = child.start_kill();
                let out = child.wait_with_output().await.expect("output");
                panic!(
                    "{name} did not converge; status {status:#}\nbosun run said:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// A scaffolded Helm operator converges from its own config/: its CRD applied, its RBAC
/// applied and used by `bosun run` (the binary) as the ServiceAccount it creates, and its
/// sample — the chart's values — installed as a release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_operator_converges_from_its_own_sample() {
    let project = "greeter-operator";
    let (_tmp, dir) = greeter_project(project);
    let running = Running::start(&dir, project).await;
    running.apply_samples(&dir).await;
    let gvk = GroupVersionKind::gvk("charts.example.com", "v1alpha1", "Greeter");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "greeters");
    let (running, _) = running
        .wait(&ar, "greeter-sample", |o| {
            condition_true(o, "Deployed") && condition_true(o, "Ready")
        })
        .await;
    // The release holds the sample's spec, which is the chart's values.
    let cm = Api::<ConfigMap>::namespaced(running.admin.clone(), &running.ns)
        .get("greeter-sample-greeting")
        .await
        .expect("the chart's ConfigMap");
    assert_eq!(
        cm.data.expect("data").get("greeting").map(String::as_str),
        Some("Hello")
    );
}

/// A project with an Ansible-backed kind of `group` (role, and a playbook importing it).
fn ansible_project(
    name: &str,
    group: &str,
    kind: &str,
    flags: &[&str],
) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    ok(
        &dir,
        &["init", "--plugins", "ansible", "--domain", "example.com"],
    );
    let mut args = vec![
        "create",
        "api",
        "--group",
        group,
        "--version",
        "v1alpha1",
        "--kind",
        kind,
    ];
    args.extend(flags);
    let out = ok(&dir, &args);
    assert!(
        out.contains(&format!("Created roles/{}", kind.to_lowercase())),
        "{out}"
    );
    (tmp, dir)
}

/// operator-sdk's (ansible-operator-plugins') paths for `init --plugins ansible` and
/// `create api --group cache --version v1alpha1 --kind Memcached --generate-role
/// --generate-playbook`, minus what bosun does not scaffold (listed below).
const OPERATOR_SDK_ANSIBLE_PATHS: &[&str] = &[
    ".gitignore",
    "Dockerfile",
    "Makefile",
    "PROJECT",
    "requirements.yml",
    "watches.yaml",
    "config/crd/bases/cache.example.com_memcacheds.yaml",
    "config/crd/kustomization.yaml",
    "config/default/kustomization.yaml",
    "config/default/manager_metrics_patch.yaml",
    "config/default/metrics_service.yaml",
    "config/manager/kustomization.yaml",
    "config/manager/manager.yaml",
    "config/manifests/kustomization.yaml",
    "config/network-policy/allow-metrics-traffic.yaml",
    "config/network-policy/kustomization.yaml",
    "config/prometheus/kustomization.yaml",
    "config/prometheus/monitor.yaml",
    "config/rbac/kustomization.yaml",
    "config/rbac/leader_election_role.yaml",
    "config/rbac/leader_election_role_binding.yaml",
    "config/rbac/memcached_admin_role.yaml",
    "config/rbac/memcached_editor_role.yaml",
    "config/rbac/memcached_viewer_role.yaml",
    "config/rbac/metrics_auth_role.yaml",
    "config/rbac/metrics_auth_role_binding.yaml",
    "config/rbac/metrics_reader_role.yaml",
    "config/rbac/role.yaml",
    "config/rbac/role_binding.yaml",
    "config/rbac/service_account.yaml",
    "config/samples/cache_v1alpha1_memcached.yaml",
    "config/samples/kustomization.yaml",
    "config/scorecard/bases/config.yaml",
    "config/scorecard/kustomization.yaml",
    "config/scorecard/patches/basic.config.yaml",
    "config/scorecard/patches/olm.config.yaml",
    "config/testing/debug_logs_patch.yaml",
    "config/testing/kustomization.yaml",
    "config/testing/manager_image.yaml",
    "config/testing/pull_policy/Always.yaml",
    "config/testing/pull_policy/IfNotPresent.yaml",
    "config/testing/pull_policy/Never.yaml",
    "config/testing/watch_namespace_patch.yaml",
    "molecule/default/converge.yml",
    "molecule/default/create.yml",
    "molecule/default/destroy.yml",
    "molecule/default/kustomize.yml",
    "molecule/default/molecule.yml",
    "molecule/default/prepare.yml",
    "molecule/default/tasks/memcached_test.yml",
    "molecule/default/verify.yml",
    "molecule/kind/converge.yml",
    "molecule/kind/create.yml",
    "molecule/kind/destroy.yml",
    "molecule/kind/molecule.yml",
    "playbooks/.placeholder",
    "playbooks/memcached.yml",
    "roles/.placeholder",
    "roles/memcached/README.md",
    "roles/memcached/defaults/main.yml",
    "roles/memcached/files/.placeholder",
    "roles/memcached/handlers/main.yml",
    "roles/memcached/meta/main.yml",
    "roles/memcached/tasks/main.yml",
    "roles/memcached/templates/.placeholder",
    "roles/memcached/vars/main.yml",
];

/// Not scaffolded by bosun: the metrics auth rules are in role.yaml (as for helm); molecule/
/// and config/testing/ drive operator-sdk's kind-cluster tests of the ansible-operator image,
/// which bosun's projects do not use (yet).
fn not_scaffolded_for_ansible(p: &str) -> bool {
    FOLDED_INTO_ROLE.contains(&p) || p.starts_with("molecule/") || p.starts_with("config/testing/")
}

#[test]
fn the_ansible_layout_is_operator_sdks() {
    let (_tmp, dir) = ansible_project(
        "memcached-operator",
        "cache",
        "Memcached",
        &["--generate-role", "--generate-playbook"],
    );
    let got = tree(&dir);
    let mut want: Vec<String> = OPERATOR_SDK_ANSIBLE_PATHS
        .iter()
        .filter(|p| !not_scaffolded_for_ansible(p))
        .map(|p| p.to_string())
        // bosun's own addition: the CI job running `bosun verify --quick`.
        .chain([".github/workflows/verify.yml".to_string()])
        .collect();
    want.sort();
    assert_eq!(got.keys().cloned().collect::<Vec<_>>(), want);
    let text = |p: &str| String::from_utf8(got[p].clone()).expect("utf8");
    assert_eq!(
        text("watches.yaml"),
        "# Use the 'create api' subcommand to add watches to this file.\n- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  playbook: playbooks/memcached.yml\n# +kubebuilder:scaffold:watch\n"
    );
    assert!(text("playbooks/memcached.yml").contains("import_role:\n        name: \"memcached\""));
    assert!(text("Dockerfile").contains("COPY roles/ ${HOME}/roles/\n"));
    assert!(text("Makefile")
        .lines()
        .any(|l| l.starts_with("ansible-operator:")));
    assert!(text("PROJECT").contains("layout:\n- ansible.sdk.operatorframework.io/v1\n"));
    assert_fresh(&dir, "memcached-operator");
}

#[test]
fn ansible_refusals_name_the_fix() {
    let tmp = tempfile::tempdir().expect("tmp");
    ok(
        tmp.path(),
        &["init", "--plugins", "ansible", "--project-name", "x"],
    );
    let before = tree(tmp.path());
    let err = refused(tmp.path(), &["create", "api", "--kind", "Memcached"]);
    assert!(
        err.contains("--group, --version and --kind are needed"),
        "{err}"
    );
    let err = refused(
        tmp.path(),
        &[
            "create",
            "api",
            "--group",
            "cache",
            "--version",
            "v1",
            "--kind",
            "Memcached",
            "--plugins",
            "helm",
        ],
    );
    assert!(
        err.contains("not helm.sdk.operatorframework.io/v1"),
        "{err}"
    );
    assert_eq!(tree(tmp.path()), before);
}

/// A scaffolded Ansible operator converges with tasks pasted into its generated role, once
/// `bosun generate manifests` (the Makefile's `manifests`) derived the RBAC they need: the
/// native engine runs them as the project's own ServiceAccount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_ansible_operator_converges_from_its_own_sample() {
    let project = "parrot-operator";
    let (_tmp, dir) = ansible_project(project, "cache", "Parrot", &["--generate-role"]);
    std::fs::write(
        dir.join("roles/parrot/tasks/main.yml"),
        r#"---
- name: a ConfigMap with what the parrot says
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-words"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        words: "{{ foo }}"
- name: and in the status
  operator_sdk.util.k8s_status:
    api_version: cache.example.com/v1alpha1
    kind: Parrot
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      said: "{{ foo }}"
"#,
    )
    .expect("paste the tasks");
    let role = || std::fs::read_to_string(dir.join("config/rbac/role.yaml")).expect("role");
    assert!(!role().contains("configmaps"), "the empty role needed none");
    let out = make(&dir, "manifests");
    assert!(out.contains("Wrote config/rbac/role.yaml"), "{out}");
    assert!(role().contains("configmaps"), "{}", role());
    assert_fresh(&dir, project);

    let running = Running::start(&dir, project).await;
    running.apply_samples(&dir).await;
    let gvk = GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Parrot");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "parrots");
    let (running, parrot) = running
        .wait(&ar, "parrot-sample", |o| {
            condition_true(o, "Successful") && o.data["status"]["said"] == "bar"
        })
        .await;
    assert_eq!(parrot.data["spec"]["foo"], "bar", "the sample's spec");
    let cm = Api::<ConfigMap>::namespaced(running.admin.clone(), &running.ns)
        .get("parrot-sample-words")
        .await
        .expect("the role's ConfigMap");
    assert_eq!(
        cm.data.expect("data").get("words").map(String::as_str),
        Some("bar")
    );
}

/// The seed's Ansible BookStore made the operator-sdk way: `init --plugins ansible`, `create
/// api --generate-role` with the group, version and kind of examples/ansible-bookstore's
/// watches, the seed's role (examples/ansible-bookstore/roles/bookstore) pasted over the
/// generated one, `make manifests`, then the project's own sample given the seed's spec
/// converges as the project's ServiceAccount: the role's four children, status Successful.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_ansible_operator_with_the_seeds_role_converges() {
    let project = "bookstore-operator";
    let (_tmp, dir) = ansible_project(project, "charts", "BookStore", &["--generate-role"]);
    let seed = repo().join("examples/ansible-bookstore");
    let watches = std::fs::read_to_string(seed.join("watches.yaml")).expect("seed watches");
    assert!(
        watches.contains("- version: v1alpha1\n  group: charts.example.com\n  kind: BookStore\n  role: bookstore\n"),
        "the seed's watches changed: {watches}"
    );
    let role = dir.join("roles/bookstore");
    let pasted = tree(&seed.join("roles/bookstore"));
    assert!(pasted.contains_key("tasks/main.yml"), "{:?}", pasted.keys());
    for (rel, body) in &pasted {
        let to = role.join(rel);
        assert!(to.exists(), "the generated role has no {rel}");
        std::fs::write(&to, body).expect("paste the seed's role");
    }
    let out = make(&dir, "manifests");
    assert!(out.contains("Wrote config/rbac/role.yaml"), "{out}");
    let rules = std::fs::read_to_string(dir.join("config/rbac/role.yaml")).expect("role");
    assert!(
        rules.contains("deployments") && rules.contains("services"),
        "{rules}"
    );
    assert_fresh(&dir, project);

    let running = Running::start(&dir, project).await;
    // The project's own sample, with the seed's spec; its `metadata.namespace` (where the
    // seed's role puts the children) is the test's namespace.
    let sample_path = dir.join("config/samples/charts_v1alpha1_bookstore.yaml");
    let mut sample: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&sample_path).expect("sample"))
            .expect("yaml");
    let mut spec: serde_json::Value = serde_yaml::from_str::<serde_json::Value>(
        &std::fs::read_to_string(seed.join("config/samples/charts_v1alpha1_bookstore.yaml"))
            .expect("seed sample"),
    )
    .expect("yaml")["spec"]
        .clone();
    spec["metadata"]["namespace"] = running.ns.clone().into();
    sample["spec"] = spec;
    std::fs::write(&sample_path, serde_yaml::to_string(&sample).expect("yaml"))
        .expect("edit the sample");
    running.apply_samples(&dir).await;

    let gvk = GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "bookstores");
    let (running, store) = running
        .wait(&ar, "bookstore-sample", |o| condition_true(o, "Successful"))
        .await;
    let uid = store.uid().expect("uid");
    let deployments = Api::<Deployment>::namespaced(running.admin.clone(), &running.ns);
    for (name, image) in [
        ("mongodb-deployment", "mongo:latest"),
        ("book-store", "akash125/pyapp:latest"),
    ] {
        let d = deployments.get(name).await.expect("the role's Deployment");
        assert_eq!(d.owner_references()[0].uid, uid, "{name}");
        let pod = d.spec.expect("spec").template.spec.expect("pod");
        assert_eq!(pod.containers[0].image.as_deref(), Some(image));
        assert_eq!(
            pod.containers[0].image_pull_policy.as_deref(),
            Some("Always"),
            "the sample's pullPolicy, snake-cased for the role"
        );
    }
    let services = Api::<Service>::namespaced(running.admin.clone(), &running.ns);
    for name in ["mongodb-service", "book-store"] {
        let s = services.get(name).await.expect("the role's Service");
        assert_eq!(s.owner_references()[0].uid, uid, "{name}");
        assert_eq!(s.spec.and_then(|s| s.type_).as_deref(), Some("ClusterIP"));
    }
}
