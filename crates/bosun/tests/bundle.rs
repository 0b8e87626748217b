//! `bosun bundle` and `bosun bundle validate`, through the binary: the bundles of the coded
//! operators, of both example watches files and of a scaffolded project pass the
//! operatorframework suite; the same input gives the same bytes; the CSV grants exactly what
//! `bosun rbac` grants; the scorecard's six tests pass (an Ansible role's CRD too: its spec is
//! described from the role's defaults); broken bundles fail with exit code 1 and name the file
//! and the field. The bundles of a scaffolded project, of the coded operators (BookStore and
//! MyOwnShell; PostgresCluster on real PostgreSQL) and of the Helm example install as OLM
//! would on one shared control plane, and every example gets Ready.
mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{apply, docs, ok, repo, run, service_account_kubeconfig, tree};

const CREATED: &str = "2026-01-02T03:04:05Z";

/// The listing fields a person writes (OperatorHub needs them), for package `package`.
fn write_base(path: &Path, package: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        path,
        format!(
            r#"apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: {package}.v0.0.0
  annotations:
    categories: Application Runtime
spec:
  displayName: Test Operator
  description: An operator bundled by the bundle test.
  provider:
    name: Bundle Test
  maintainers:
  - name: Test Maintainer
    email: maintainer@bundle.test
  links:
  - name: Source
    url: https://bundle.test/source
  keywords:
  - test
  icon:
  - base64data: PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=
    mediatype: image/svg+xml
"#
        ),
    )
    .expect("write base");
}

fn csv(dir: &Path, package: &str) -> Value {
    let p = dir.join(format!(
        "bundle/manifests/{package}.clusterserviceversion.yaml"
    ));
    docs(&std::fs::read_to_string(p).expect("csv")).remove(0)
}

/// `bundle validate` passes, and the scorecard's six tests.
fn validate_passes(dir: &Path) {
    let card = run(dir, &["scorecard", "bundle", "-o", "json"]);
    let results: Vec<Value> = serde_json::from_slice(&card.stdout).expect("scorecard json");
    assert_eq!(results.len(), 6);
    let failed: Vec<&Value> = results.iter().filter(|r| r["state"] != "pass").collect();
    let names: Vec<&str> = failed.iter().filter_map(|r| r["name"].as_str()).collect();
    assert!(names.is_empty(), "failed: {names:?}: {failed:#?}");
    assert!(card.status.success());
    let out = ok(
        dir,
        &[
            "bundle",
            "validate",
            "bundle",
            "--select-optional",
            "suite=operatorframework",
        ],
    );
    assert!(
        out.contains("All validation tests have completed successfully"),
        "{out}"
    );
}

const CODED: &str = "--operators=bookstore,myownshell,vmgroup,postgres";

#[test]
fn the_coded_operators_bundle_passes_and_grants_what_bosun_rbac_grants() {
    let dir = tempfile::tempdir().expect("dir");
    write_base(
        &dir.path()
            .join("config/manifests/bases/bosun.clusterserviceversion.yaml"),
        "bosun",
    );
    let samples = repo().join("deploy/samples");
    let samples = samples.to_str().expect("utf8");
    ok(
        dir.path(),
        &[
            "bundle",
            CODED,
            "--samples",
            samples,
            "--created-at",
            CREATED,
        ],
    );
    validate_passes(dir.path());

    let csv = csv(dir.path(), "bosun");
    assert_eq!(
        csv["spec"]["provider"]["name"], "Bundle Test",
        "base merged"
    );
    let owned: Vec<&str> = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .expect("owned")
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    let crds = docs(&ok(dir.path(), &["crd", CODED]));
    let crd_names: Vec<&str> = crds
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    assert_eq!(owned, crd_names);
    for name in crd_names {
        let (plural, group) = name.split_once('.').expect("plural.group");
        assert!(
            dir.path()
                .join(format!("bundle/manifests/{group}_{plural}.yaml"))
                .exists(),
            "{name}"
        );
    }
    // The CSV's permissions are exactly `bosun rbac`'s rules, nothing more.
    let rbac = docs(&ok(dir.path(), &["rbac", CODED]));
    let rules = |kind: &str, name: &str| {
        rbac.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .map(|o| o["rules"].clone())
            .expect("role")
    };
    let install = &csv["spec"]["install"]["spec"];
    assert_eq!(
        install["clusterPermissions"][0]["rules"],
        rules("ClusterRole", "bosun")
    );
    assert_eq!(
        install["permissions"][0]["rules"],
        rules("Role", "bosun-leader-election")
    );
    assert_eq!(
        install["clusterPermissions"][0]["serviceAccountName"],
        "bosun"
    );
    assert!(dir
        .path()
        .join("bundle/manifests/bosun-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml")
        .exists());
}

#[test]
fn the_same_input_gives_the_same_bytes() {
    let a = tempfile::tempdir().expect("a");
    let b = tempfile::tempdir().expect("b");
    for d in [&a, &b] {
        ok(d.path(), &["bundle", CODED, "--created-at", CREATED]);
    }
    let (ta, tb) = (tree(a.path()), tree(b.path()));
    assert!(!ta.is_empty());
    assert!(ta == tb, "two runs differ");
    // A second run over an existing bundle leaves no stale manifest behind.
    ok(
        a.path(),
        &["bundle", "--operators=bookstore", "--created-at", CREATED],
    );
    assert!(!a
        .path()
        .join("bundle/manifests/my-first-operator.jgato.io_myownshells.yaml")
        .exists());
}

#[test]
fn the_example_watches_bundles_pass() {
    for example in ["helm-bookstore", "ansible-bookstore"] {
        let dir = tempfile::tempdir().expect("dir");
        let base = dir.path().join("base.yaml");
        write_base(&base, "bookstore-operator");
        let watches = repo().join(format!("examples/{example}/watches.yaml"));
        let out = dir.path().to_str().expect("utf8");
        ok(
            dir.path(),
            &[
                "bundle",
                "--watches",
                watches.to_str().expect("utf8"),
                "--package",
                "bookstore-operator",
                "--base",
                base.to_str().expect("utf8"),
                "--output-dir",
                out,
                "--channels",
                "stable,fast",
                "--default-channel",
                "stable",
                "--version",
                "1.2.3",
                "--replaces",
                "bookstore-operator.v1.2.2",
            ],
        );
        // Both CRDs describe the sample's spec: the chart's values, the role's defaults.
        validate_passes(dir.path());
        let csv = csv(dir.path(), "bookstore-operator");
        assert_eq!(csv["metadata"]["name"], "bookstore-operator.v1.2.3");
        assert_eq!(csv["spec"]["replaces"], "bookstore-operator.v1.2.2");
        // config/samples beside the watches file became the examples.
        let examples: Vec<Value> = serde_json::from_str(
            csv["metadata"]["annotations"]["alm-examples"]
                .as_str()
                .expect("examples"),
        )
        .expect("json");
        assert_eq!(examples.len(), 1, "{example}");
        assert_eq!(examples[0]["kind"], "BookStore");
        let args = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
            ["containers"][0]["args"]
            .to_string();
        assert!(args.contains("--watches=/opt/bosun/watches.yaml"), "{args}");
        // The chart's workloads at the sample's values: the operands (roles decide at run time).
        let images: Vec<&str> = csv["spec"]["relatedImages"]
            .as_array()
            .expect("relatedImages")
            .iter()
            .filter_map(|r| r["image"].as_str())
            .collect();
        let bosun = released_image();
        if example.starts_with("helm") {
            assert_eq!(
                images,
                [bosun.as_str(), "akash125/pyapp:latest", "mongo:latest"]
            );
        } else {
            assert_eq!(images, [bosun.as_str()]);
        }
    }
}

/// bosun's image as the release workflow pushes it for this version: on a git tag `v*` it
/// pushes `ghcr.io/<owner>/bosun:<the tag>`, so `v<version>`.
fn released_image() -> String {
    let workflow =
        std::fs::read_to_string(repo().join(".github/workflows/ci.yml")).expect("ci.yml");
    assert!(
        workflow.contains(r#"tags: ["v*"]"#)
            && workflow.contains("tags: ${{ env.IMAGE }}:${{ github.ref_name }}"),
        "the release workflow no longer pushes the git tag as the image tag: update this test \
         and bosun's default image together"
    );
    format!("ghcr.io/bosun-dev/bosun:v{}", env!("CARGO_PKG_VERSION"))
}

/// `bosun manifests` and `bosun bundle` default to an image the release workflow pushes: a
/// default naming a tag nobody pushes fails the first `kubectl apply` or OLM install with
/// ImagePullBackOff.
#[test]
fn the_default_image_is_the_tag_the_release_workflow_pushes() {
    let dir = tempfile::tempdir().expect("dir");
    let out = ok(dir.path(), &["manifests"]);
    let images: Vec<String> = docs(&out)
        .iter()
        .filter(|d| d["kind"] == "Deployment")
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["image"].as_str().map(str::to_string))
        .collect();
    assert!(!images.is_empty(), "{out}");
    let want = released_image();
    assert!(images.iter().all(|i| *i == want), "{images:?}, want {want}");
}

/// What one bundle's operator names in its install namespace: the Deployment, its
/// ServiceAccount, the Lease it elects a leader on, its pods' labels, and every object shipped
/// beside the CSV (the metrics Service, the metrics-reader role).
fn namespace_names(dir: &Path, package: &str) -> Vec<String> {
    let csv = csv(dir, package);
    let d = &csv["spec"]["install"]["spec"]["deployments"][0];
    let pod = &d["spec"]["template"]["spec"];
    let lease = pod["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix("--lease-name="))
        .expect("--lease-name");
    let mut names = vec![
        format!("Deployment/{}", d["name"].as_str().expect("name")),
        format!(
            "ServiceAccount/{}",
            pod["serviceAccountName"].as_str().expect("sa")
        ),
        format!("Lease/{lease}"),
        format!("labels/{}", d["spec"]["selector"]["matchLabels"]),
    ];
    for e in std::fs::read_dir(dir.join("bundle/manifests"))
        .expect("ls")
        .flatten()
    {
        let o = docs(&std::fs::read_to_string(e.path()).expect("read")).remove(0);
        if !matches!(
            o["kind"].as_str(),
            Some("ClusterServiceVersion" | "CustomResourceDefinition")
        ) {
            names.push(format!(
                "{}/{}",
                o["kind"].as_str().expect("kind"),
                o["metadata"]["name"].as_str().expect("name")
            ));
        }
    }
    names
}

/// Two operators bundled with bosun, installed by OLM into one namespace (`operators`, with
/// AllNamespaces), must not share a Deployment, ServiceAccount, Service or Lease: each name
/// derives from the package.
#[test]
fn two_packages_bundles_name_nothing_alike() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    ok(
        a.path(),
        &[
            "bundle",
            "--operators=bookstore",
            "--package",
            "books-operator",
        ],
    );
    ok(
        b.path(),
        &[
            "bundle",
            "--operators=myownshell",
            "--package",
            "shell-operator",
        ],
    );
    let (na, nb) = (
        namespace_names(a.path(), "books-operator"),
        namespace_names(b.path(), "shell-operator"),
    );
    assert!(na.len() >= 6, "{na:?}");
    let shared: Vec<&String> = na.iter().filter(|n| nb.contains(n)).collect();
    assert!(shared.is_empty(), "both bundles name {shared:?}");
    assert!(
        na.contains(&"Deployment/books-operator".to_string()),
        "{na:?}"
    );
    assert!(
        na.contains(&"Lease/books-operator-leader".to_string()),
        "{na:?}"
    );
}

/// `init` then `create api` in `dir`, `edit` (the user's work), a base CSV, then `bosun
/// bundle` as the Makefile's `bundle` runs it: the bundle passes, and its CSV is returned.
fn bundle_scaffolded(
    dir: &Path,
    package: &str,
    init: &[&str],
    api: &[&str],
    edit: impl FnOnce(&Path),
) -> Value {
    let mut args = vec!["init", "--domain", "example.com", "--project-name", package];
    args.extend(init);
    ok(dir, &args);
    let mut args = vec!["create", "api"];
    args.extend(api);
    ok(dir, &args);
    edit(dir);
    assert!(std::fs::read_to_string(dir.join("Makefile"))
        .expect("Makefile")
        .contains("$(BOSUN) bundle --watches watches.yaml"));
    write_base(
        &dir.join(format!(
            "config/manifests/bases/{package}.clusterserviceversion.yaml"
        )),
        package,
    );
    ok(dir, &["bundle", "--watches", "watches.yaml"]);
    validate_passes(dir);
    csv(dir, package)
}

#[test]
fn a_scaffolded_project_bundles_from_its_own_files() {
    let dir = tempfile::tempdir().expect("dir");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/greeter");
    let csv = bundle_scaffolded(
        dir.path(),
        "greeter-operator",
        &["--plugins", "helm"],
        &["--helm-chart", chart.to_str().expect("utf8")],
        |_| {},
    );
    assert_eq!(
        csv["metadata"]["annotations"]["operators.operatorframework.io/project_layout"],
        "helm.sdk.operatorframework.io/v1"
    );
    let examples = csv["metadata"]["annotations"]["alm-examples"]
        .as_str()
        .expect("examples");
    assert!(examples.contains("Greeter"), "{examples}");
}

/// What a user edits in `config/manager/manager.yaml` — an env var, resources, the pod's
/// node selector and pull secret — is what OLM runs too (operator-sdk builds the bundle from
/// `config/`): the CSV's Deployment carries it.
#[test]
fn config_manager_edits_reach_the_bundles_deployment() {
    let dir = tempfile::tempdir().expect("dir");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/greeter");
    let csv = bundle_scaffolded(
        dir.path(),
        "greeter-operator",
        &["--plugins", "helm"],
        &["--helm-chart", chart.to_str().expect("utf8")],
        |dir| {
            let path = dir.join("config/manager/manager.yaml");
            let text = std::fs::read_to_string(&path).expect("manager.yaml");
            let edited = text
                .replacen(
                    "        env:\n",
                    "        env:\n        - name: GREETING\n          value: hello\n",
                    1,
                )
                .replacen("memory: 128Mi", "memory: 256Mi", 1)
                .replacen(
                    "      terminationGracePeriodSeconds: 10\n",
                    "      terminationGracePeriodSeconds: 10\n      nodeSelector:\n        disk: ssd\n      imagePullSecrets:\n      - name: regcred\n",
                    1,
                );
            assert_ne!(edited, text);
            std::fs::write(&path, edited).expect("write");
        },
    );
    let pod = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env = container["env"].as_array().expect("env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "GREETING" && e["value"] == "hello"),
        "{env:?}"
    );
    assert!(
        env.iter().any(|e| e["name"] == "WATCH_NAMESPACE"
            && e["valueFrom"]["fieldRef"]["fieldPath"]
                .as_str()
                .is_some_and(|p| p.contains("olm.targetNamespaces"))),
        "OLM's namespaces stay: {env:?}"
    );
    assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
    assert_eq!(pod["nodeSelector"]["disk"], "ssd");
    assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred");
}

/// The generated role's defaults hold the sample's spec, so its CRD describes it; the role is
/// given a task creating a ConfigMap (the scorecard wants the kinds a CRD's operator creates).
#[test]
fn a_scaffolded_ansible_project_bundles_from_its_own_files() {
    let dir = tempfile::tempdir().expect("dir");
    let csv = bundle_scaffolded(
        dir.path(),
        "parrot-operator",
        &["--plugins", "ansible"],
        &[
            "--group",
            "cache",
            "--version",
            "v1alpha1",
            "--kind",
            "Parrot",
            "--generate-role",
        ],
        |dir| {
            std::fs::write(
                dir.join("roles/parrot/tasks/main.yml"),
                "- kubernetes.core.k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: \"{{ ansible_operator_meta.name }}\", namespace: \"{{ ansible_operator_meta.namespace }}\"}\n      data: {words: \"{{ foo }}\"}\n",
            )
            .expect("the role's task");
        },
    );
    assert_eq!(
        csv["metadata"]["annotations"]["operators.operatorframework.io/project_layout"],
        "ansible.sdk.operatorframework.io/v1"
    );
    let crd = docs(
        &std::fs::read_to_string(
            dir.path()
                .join("bundle/manifests/cache.example.com_parrots.yaml"),
        )
        .expect("the bundle's CRD"),
    )
    .remove(0);
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["foo"]["type"], "string", "{spec}");
}

/// The error lines of a failing validation (exit code 1).
fn fails(dir: &Path) -> String {
    let out = run(dir, &["bundle", "validate", "bundle"]);
    assert_eq!(out.status.code(), Some(1), "should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn broken_bundles_fail_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    ok(dir.path(), &["bundle", "--operators=bookstore"]);
    let m = dir.path().join("bundle/manifests");
    let crd = m.join("charts.example.com_bookstores.yaml");
    // A duplicate CRD.
    std::fs::copy(&crd, m.join("copy.yaml")).expect("copy");
    let err = fails(dir.path());
    assert!(
        err.contains("ERROR [crd] bundle/manifests/copy.yaml: metadata.name: duplicate CRD bookstores.charts.example.com"),
        "{err}"
    );
    // An owned CRD missing.
    std::fs::remove_file(m.join("copy.yaml")).expect("rm");
    std::fs::remove_file(&crd).expect("rm");
    let err = fails(dir.path());
    assert!(
        err.contains("bundle/manifests/bosun.clusterserviceversion.yaml: spec.customresourcedefinitions.owned[0]: owned CRD bookstores.charts.example.com is not in the bundle"),
        "{err}"
    );
    // No bundle at all.
    let empty = tempfile::tempdir().expect("empty");
    let err = fails(empty.path());
    assert!(err.contains("bundle/manifests/"), "{err}");
    // An unknown selector is a usage error, not a validation result.
    let out = run(
        dir.path(),
        &["bundle", "validate", "--select-optional", "suite=nope"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("suite=operatorframework"));
}

/// An example whose kind the CSV does not own (here, a MyOwnShell in the BookStore operator's
/// bundle, as when a sample is left behind by a removed API) fails the default checks.
#[test]
fn an_example_of_an_unowned_kind_fails_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    let samples = repo().join("deploy/samples/bookstore.yaml");
    ok(
        dir.path(),
        &[
            "bundle",
            "--operators=bookstore",
            "--samples",
            samples.to_str().expect("utf8"),
        ],
    );
    let path = dir
        .path()
        .join("bundle/manifests/bosun.clusterserviceversion.yaml");
    let mut csv = docs(&std::fs::read_to_string(&path).expect("csv")).remove(0);
    let field = &mut csv["metadata"]["annotations"]["alm-examples"];
    let mut examples: Vec<Value> =
        serde_json::from_str(field.as_str().expect("examples")).expect("json");
    assert_eq!(examples.len(), 1, "{examples:?}");
    examples.push(serde_json::json!({
        "apiVersion": "my-first-operator.jgato.io/v1alpha1",
        "kind": "MyOwnShell",
        "metadata": {"name": "myownshell-sample"},
        "spec": {"size": 3}
    }));
    *field = serde_json::to_string(&examples).expect("json").into();
    std::fs::write(&path, serde_yaml::to_string(&csv).expect("yaml")).expect("write");
    let err = fails(dir.path());
    assert!(
        err.contains("ERROR [csv] bundle/manifests/bosun.clusterserviceversion.yaml: metadata.annotations.alm-examples[1]: the example's my-first-operator.jgato.io/v1alpha1 MyOwnShell is not a kind the CSV owns or requires"),
        "{err}"
    );
    assert!(
        err.contains("1 error(s)"),
        "only the example is wrong: {err}"
    );
}

/// A bundle installed as OLM installs it in SingleNamespace mode, its examples Ready.
struct Installed {
    admin: kube::Client,
    /// Where the operator runs (its ServiceAccount, its Lease).
    system: String,
    target: String,
    child: tokio::process::Child,
    /// The owned CRDs' names, and each example's resource and name.
    crds: Vec<String>,
    examples: Vec<(kube::core::ApiResource, String)>,
    _agent: bosun_testenv::NodeAgent,
}

/// How the test's node runs the examples' pods.
enum Node {
    /// Pods are made Ready by the simulated node agent.
    Simulated,
    /// Pods run as local processes (PostgreSQL and bosun's instance manager).
    Processes,
}

/// Ready as the kind reports it: its Ready condition, or — MyOwnShell's status is the seed's,
/// without conditions — every replica the spec asks for ready at the current generation.
fn ready(o: &kube::api::DynamicObject) -> bool {
    let status = &o.data["status"];
    match status["conditions"].as_array() {
        Some(cs) => cs
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        None => {
            status["observedGeneration"].as_i64() == o.metadata.generation
                && status["readyReplicas"].is_i64()
                && status["readyReplicas"] == o.data["spec"]["size"]
        }
    }
}

/// Installs the bundle under `dir` as OLM installs it in SingleNamespace mode: its CRDs
/// applied, the CSV's ServiceAccount given exactly the CSV's `clusterPermissions` (ClusterRole)
/// and `permissions` (Role in the install namespace), `bosun run` with the CSV deployment's
/// arguments as that account with `WATCH_NAMESPACE` set to the target namespace (what
/// `olm.targetNamespaces` gives it); then every `alm-examples` entry is created there and
/// must become Ready. `watches` stands for the image's watches file of a watches-based bundle.
async fn install_as_olm(
    dir: &Path,
    package: &str,
    watches: Option<&Path>,
    node: Node,
) -> Installed {
    install_as_olm_into(dir, package, watches, node, None).await
}

/// [`install_as_olm`] into the install namespace `system` (a new one when `None`), as OLM
/// puts every AllNamespaces operator into one namespace.
async fn install_as_olm_into(
    dir: &Path,
    package: &str,
    watches: Option<&Path>,
    node: Node,
    system: Option<&str>,
) -> Installed {
    use bosun_testenv::{eventually, shared, test_namespace, NodeAgent, NodeAgentConfig};
    use kube::api::{Api, DynamicObject};
    use kube::core::{ApiResource, GroupVersionKind};

    let csv = csv(dir, package);
    let install = &csv["spec"]["install"]["spec"];
    let deployment = &install["deployments"][0]["spec"]["template"]["spec"];
    let sa = deployment["serviceAccountName"].as_str().expect("sa");

    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let system = match system {
        Some(s) => s.to_string(),
        None => test_namespace(&admin, "olm-install").await.expect("ns"),
    };
    let target = test_namespace(&admin, "olm-target").await.expect("ns");
    let mut crds = Vec::new();
    for e in std::fs::read_dir(dir.join("bundle/manifests"))
        .expect("ls")
        .flatten()
    {
        let o = docs(&std::fs::read_to_string(e.path()).expect("read")).remove(0);
        if o["kind"] == "CustomResourceDefinition" {
            crds.push(o["metadata"]["name"].as_str().expect("name").to_string());
            apply(&admin, o, None).await;
        }
    }
    let name = format!("{system}-{sa}");
    let subject = serde_json::json!([{"kind": "ServiceAccount", "name": sa, "namespace": system}]);
    let rbac = "rbac.authorization.k8s.io/v1";
    for obj in [
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": system}}),
        serde_json::json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": name},
            "rules": install["clusterPermissions"][0]["rules"]}),
        serde_json::json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject}),
        serde_json::json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": name, "namespace": system},
            "rules": install["permissions"][0]["rules"]}),
        serde_json::json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": name, "namespace": system},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject}),
    ] {
        let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
        apply(&admin, obj, ns.as_deref()).await;
    }
    let kubeconfig = dir.join("sa.kubeconfig");
    service_account_kubeconfig(cp, &admin, &system, sa, &kubeconfig).await;
    let agent = match node {
        Node::Simulated => NodeAgent::start(
            admin.clone(),
            NodeAgentConfig {
                namespace: Some(target.clone()),
                resize_needs_restart: false,
            },
        ),
        Node::Processes => NodeAgent::process_mode(
            admin.clone(),
            bosun_testenv::ProcessConfig {
                namespace: Some(target.clone()),
                images: bosun_testenv::ImageMap::standard(Some(PathBuf::from(env!(
                    "CARGO_BIN_EXE_bosun"
                )))),
                ..Default::default()
            },
        )
        .expect("the process-mode node agent (root and PostgreSQL: scripts/setup-postgres.sh)"),
    };
    // The CSV deployment's arguments, with the watches file given (the image's path
    // otherwise) and no listening ports (tests share the host).
    let args: Vec<String> = deployment["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .filter(|a| !a.starts_with("--metrics") && !a.starts_with("--probe"))
        .map(|a| match watches {
            Some(w) if a.starts_with("--watches=") => format!("--watches={}", w.display()),
            _ => a.to_string(),
        })
        .chain(["--metrics-addr=off".into(), "--probe-addr=off".into()])
        .collect();
    assert_eq!(
        args.iter().any(|a| a.starts_with("--watches=")),
        watches.is_some(),
        "{args:?}"
    );
    let env = deployment["containers"][0]["env"].to_string();
    assert!(env.contains("olm.targetNamespaces"), "{env}");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .current_dir(dir)
        .args(&args)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env("POD_NAME", format!("{package}-0"))
        .env("POD_NAMESPACE", &system)
        .env("WATCH_NAMESPACE", &target)
        .env_remove("BOSUN_NAMESPACES")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn bosun run");
    let mut installed = Installed {
        admin,
        system,
        target,
        child,
        crds,
        examples: Vec::new(),
        _agent: agent,
    };
    let list: Vec<Value> = serde_json::from_str(
        csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .expect("examples"),
    )
    .expect("json");
    assert!(!list.is_empty());
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .expect("owned");
    for ex in &list {
        apply(&installed.admin, ex.clone(), Some(&installed.target)).await;
        let (group, version) = ex["apiVersion"]
            .as_str()
            .and_then(|a| a.split_once('/'))
            .expect("group/version");
        let kind = ex["kind"].as_str().expect("kind");
        let crd = owned
            .iter()
            .find(|o| o["kind"] == kind && o["version"] == version)
            .and_then(|o| o["name"].as_str())
            .expect("an owned CRD");
        let plural = crd.split_once('.').expect("plural.group").0;
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        let name = ex["metadata"]["name"].as_str().expect("name");
        installed.examples.push((ar, name.to_string()));
    }
    for (ar, name) in installed.examples.clone() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(installed.admin.clone(), &installed.target, &ar);
        let got = eventually(120, || async {
            let o = api.get(&name).await.ok()?;
            ready(&o).then_some(())
        })
        .await;
        if got.is_none() {
            let status = api
                .get(&name)
                .await
                .map(|o| o.data["status"].clone())
                .unwrap_or_default();
            let _ = installed.child.start_kill();
            let out = installed.child.wait_with_output().await.expect("output");
            panic!(
                "{} {name} not Ready: {status:#}\nbosun run said:\n{}",
                ar.kind,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    installed
}

impl Installed {
    /// Removes what the install added to the cluster's shared scope: the examples first,
    /// while the operator runs (to remove its finalizers), then the operator, then the CRDs.
    async fn uninstall(mut self) {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kube::api::{Api, DynamicObject};
        for (ar, name) in &self.examples {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.admin.clone(), &self.target, ar);
            delete_and_wait(&api, name, &ar.kind).await;
        }
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        let api = Api::<CustomResourceDefinition>::all(self.admin.clone());
        for crd in &self.crds {
            delete_and_wait(&api, crd, "CRD").await;
        }
    }
}

/// Deletes `name` and waits until it is gone.
async fn delete_and_wait<K>(api: &kube::Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.delete(name, &kube::api::DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {what} {name}: {e}"));
    let gone = bosun_testenv::eventually(60, || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "{what} {name} was not deleted");
}

/// The coded BookStore (charts.example.com/v1) and the Helm example's (v1alpha1) are one
/// CRD name: their installs take turns, each removing its CRDs when done.
static BOOKSTORE_CRD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A scaffolded Helm project's bundle (`make bundle`'s `bosun bundle --watches`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scaffolded_bundle_installs_as_olm_would_and_its_examples_get_ready() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("greeter-operator");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/greeter");
    ok(
        &dir,
        &["init", "--plugins", "helm", "--domain", "example.com"],
    );
    ok(
        &dir,
        &[
            "create",
            "api",
            "--helm-chart",
            chart.to_str().expect("utf8"),
        ],
    );
    ok(&dir, &["bundle", "--watches", "watches.yaml"]);
    let watches = dir.join("watches.yaml");
    let installed = install_as_olm(&dir, "greeter-operator", Some(&watches), Node::Simulated).await;
    assert_eq!(installed.examples.len(), 1);
}

/// `bosun bundle ARGS` in a new directory (the bundle's), then [`install_as_olm`].
async fn bundle_and_install(
    args: &[&str],
    package: &str,
    watches: Option<&Path>,
    node: Node,
) -> (tempfile::TempDir, Installed) {
    let dir = tempfile::tempdir().expect("dir");
    let mut all = vec!["bundle"];
    all.extend(args);
    ok(dir.path(), &all);
    let installed = install_as_olm(dir.path(), package, watches, node).await;
    (dir, installed)
}

/// The coded `operators`' bundle, their examples from deploy/samples, installed.
async fn coded_bundle_installed(operators: &str, node: Node) -> (tempfile::TempDir, Installed) {
    let samples = repo().join("deploy/samples");
    let args = [
        &format!("--operators={operators}"),
        "--samples",
        samples.to_str().expect("utf8"),
    ];
    bundle_and_install(&args, "bosun", None, node).await
}

/// The coded operators' bundle: the seed's BookStore and MyOwnShell from deploy/samples.
/// PostgresCluster's examples need the process-mode node agent (below, a bundle of its own);
/// VmGroup's needs a vCenter (vcsim), left to its operator's own e2e tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coded_operators_bundle_installs_as_olm_would_and_its_examples_get_ready() {
    let _turn = BOOKSTORE_CRD.lock().await;
    let (_dir, installed) = coded_bundle_installed("bookstore,myownshell", Node::Simulated).await;
    let kinds: Vec<&str> = installed
        .examples
        .iter()
        .map(|(ar, _)| ar.kind.as_str())
        .collect();
    assert_eq!(kinds, ["BookStore", "MyOwnShell"]);
    installed.uninstall().await;
}

/// The Helm example's bundle (examples/helm-bookstore), its sample from config/samples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_example_bundle_installs_as_olm_would_and_its_examples_get_ready() {
    let watches = repo()
        .join("examples/helm-bookstore/watches.yaml")
        .canonicalize()
        .expect("watches");
    let args = [
        "--watches",
        watches.to_str().expect("utf8"),
        "--package",
        "bookstore-operator",
    ];
    let _turn = BOOKSTORE_CRD.lock().await;
    let (_dir, installed) =
        bundle_and_install(&args, "bookstore-operator", Some(&watches), Node::Simulated).await;
    assert_eq!(installed.examples.len(), 1);
    installed.uninstall().await;
}

/// Two bosun operators' bundles installed as OLM installs them into one namespace: each has its
/// own ServiceAccount (the other's RBAC is not replaced) and its own Lease, so both lead and
/// both examples get Ready. With one shared name, the second operator stood by forever on the
/// first one's Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bundles_operators_run_side_by_side_in_one_namespace() {
    use k8s_openapi::api::coordination::v1::Lease;
    let _turn = BOOKSTORE_CRD.lock().await;
    let cp = bosun_testenv::shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let system = bosun_testenv::test_namespace(&admin, "olm-operators")
        .await
        .expect("ns");
    let mut installed = Vec::new();
    for (op, package) in [
        ("bookstore", "books-operator"),
        ("myownshell", "shell-operator"),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let samples = repo().join(format!("deploy/samples/{op}.yaml"));
        ok(
            dir.path(),
            &[
                "bundle",
                &format!("--operators={op}"),
                "--package",
                package,
                "--samples",
                samples.to_str().expect("utf8"),
            ],
        );
        let i =
            install_as_olm_into(dir.path(), package, None, Node::Simulated, Some(&system)).await;
        installed.push((dir, package, i));
    }
    // Both Ready above; each operator holds its own Lease, beside the other's.
    let leases: kube::Api<Lease> = kube::Api::namespaced(admin.clone(), &system);
    for (_, package, i) in &installed {
        assert_eq!(i.system, system);
        let lease = leases
            .get(&format!("{package}-leader"))
            .await
            .unwrap_or_else(|e| panic!("{package}'s Lease: {e}"));
        let holder = lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        assert!(
            holder.starts_with(&format!("{package}-0")),
            "{package}: held by {holder:?}"
        );
    }
    for (_dir, _, i) in installed {
        i.uninstall().await;
    }
}

/// The PostgresCluster operator's bundle, its examples (deploy/samples: a 3-instance cluster
/// and a 2-instance one with WAL archiving and base backups on a claim) real PostgreSQL run
/// by the process-mode node agent, bosun's instance manager in the pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_bundle_installs_as_olm_would_and_its_examples_get_ready() {
    let (_dir, installed) = coded_bundle_installed("postgres", Node::Processes).await;
    let names: Vec<&str> = installed.examples.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["postgres-backup", "postgres-sample"]);
}
