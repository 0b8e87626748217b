//! operator-sdk's CLI (v1.42.2, built by `scripts/setup-peers.sh`) as the oracle of `bosun init`
//! and `bosun create api` (issue 35): the same arguments in two empty directories of the same
//! name, then the two trees compared. The file lists must agree, and where both have a file that
//! matters (PROJECT, watches.yaml, the kustomizations of config/default, manager, rbac, crd,
//! samples and prometheus, the Makefile's target names, the Dockerfile's instructions) its
//! meaning must agree. Every difference bosun makes on purpose is listed below with its reason;
//! a difference not listed fails, and so does a listed one that no longer happens (the list
//! stays the truth the README quotes).
//!
//! operator-sdk runs offline here: `init --plugins helm|ansible` and `create api` fetch nothing
//! (the starter chart is compiled in; `--helm-chart` takes a local directory). Without a
//! kubeconfig `create api` for Helm logs "Using default RBAC rules" instead of asking a cluster
//! for its discovery: KUBECONFIG is removed and HOME is the test's own, so that is what it does.
mod peers;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{ok, tree};

/// A difference bosun makes on purpose: what, and why.
struct Named {
    what: &'static str,
    why: &'static str,
}

const fn named(what: &'static str, why: &'static str) -> Named {
    Named { what, why }
}

/// Files only operator-sdk writes, by path prefix.
const ONLY_SDK: &[Named] = &[
    named(
        "config/rbac/metrics_auth_role.yaml",
        "bosun's TokenReview/SubjectAccessReview rules for its secured /metrics are in the \
         operator's own ClusterRole (config/rbac/role.yaml), derived with its other rules",
    ),
    named(
        "config/rbac/metrics_auth_role_binding.yaml",
        "its role is part of role.yaml, bound by role_binding.yaml",
    ),
    named(
        "config/testing/",
        "ansible: molecule's kustomize overlay; bosun has no molecule scaffold (`bosun dev` and \
         the project's CI workflow test the operator instead)",
    ),
    named(
        "molecule/",
        "ansible: molecule scenarios need Docker/kind and ansible-galaxy; not scaffolded",
    ),
];

/// The starter chart `create api` writes without `--helm-chart`: operator-sdk's is `helm
/// create`'s, bosun's is a Deployment and a Service only.
const ONLY_SDK_STARTER_CHART: &[Named] = &[
    named(
        "helm-charts/bookstore/.helmignore",
        "bosun's starter chart is the least that runs: a Deployment and a Service, so the RBAC \
         `bosun rbac` derives for it stays two kinds wide",
    ),
    named(
        "helm-charts/bookstore/templates/NOTES.txt",
        "no NOTES: the operator never shows them",
    ),
    named(
        "helm-charts/bookstore/templates/_helpers.tpl",
        "names are written inline in the two templates",
    ),
    named(
        "helm-charts/bookstore/templates/hpa.yaml",
        "no HorizontalPodAutoscaler: it would widen the operator's RBAC",
    ),
    named(
        "helm-charts/bookstore/templates/ingress.yaml",
        "no Ingress: it would widen the operator's RBAC",
    ),
    named(
        "helm-charts/bookstore/templates/serviceaccount.yaml",
        "no ServiceAccount: creating them would widen the operator's RBAC",
    ),
    named(
        "helm-charts/bookstore/templates/tests/",
        "no `helm test` hook pod: the operator never runs tests",
    ),
];

/// Files only bosun writes.
const ONLY_BOSUN: &[Named] = &[named(
    ".github/workflows/verify.yml",
    "a CI workflow that checks config/ is what `make manifests` derives and that the bundle \
     validates",
)];

/// Makefile targets only operator-sdk has.
const TARGETS_ONLY_SDK: &[Named] = &[
    named(
        "catalog-build",
        "file-based catalogs are built with opm, which bosun does not wrap",
    ),
    named("catalog-push", "the catalog image of catalog-build"),
    named(
        "opm",
        "operator-sdk's Makefile downloads opm; bosun's Makefile downloads nothing",
    ),
    named(
        "operator-sdk",
        "operator-sdk's Makefile downloads operator-sdk; `bosun bundle` does its part",
    ),
];

/// Makefile targets only bosun has.
const TARGETS_ONLY_BOSUN: &[Named] = &[named(
    "manifests",
    "config/crd and config/rbac are derived from watches.yaml and the charts or roles (inferred \
     schemas, rules without wildcards) instead of written once by `create api`",
)];

/// Scaffolds a project named `proj` twice, with the same arguments: `sdk` by operator-sdk,
/// `bosun` by this binary.
struct Pair {
    _tmp: tempfile::TempDir,
    sdk: PathBuf,
    bosun: PathBuf,
}

fn sdk(dir: &Path, home: &Path, args: &[&str]) {
    let out = Command::new(peers::peer("operator-sdk"))
        .args(args)
        .current_dir(dir)
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .output()
        .expect("run operator-sdk");
    assert!(
        out.status.success(),
        "operator-sdk {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scaffold(init: &[&str], api: &[&str]) -> Pair {
    let tmp = tempfile::tempdir().expect("tmp");
    let sdk_dir = tmp.path().join("sdk/proj");
    let bosun_dir = tmp.path().join("bosun/proj");
    std::fs::create_dir_all(&sdk_dir).expect("mkdir");
    std::fs::create_dir_all(&bosun_dir).expect("mkdir");
    let init: Vec<&str> = ["init"].iter().chain(init).copied().collect();
    let api: Vec<&str> = ["create", "api"].iter().chain(api).copied().collect();
    sdk(&sdk_dir, tmp.path(), &init);
    sdk(&sdk_dir, tmp.path(), &api);
    ok(&bosun_dir, &init);
    ok(&bosun_dir, &api);
    Pair {
        _tmp: tmp,
        sdk: sdk_dir,
        bosun: bosun_dir,
    }
}

fn files(dir: &Path) -> BTreeSet<String> {
    tree(dir).into_keys().collect()
}

fn yaml(dir: &Path, rel: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `found` (what one side has and the other lacks) against the named differences `listed`:
/// every found item is named, every name applies. Returns the reasons, for the failure text.
fn assert_named(side: &str, found: &BTreeSet<String>, listed: &[&Named]) {
    let unnamed: Vec<&String> = found
        .iter()
        .filter(|f| !listed.iter().any(|n| f.starts_with(n.what)))
        .collect();
    assert!(
        unnamed.is_empty(),
        "{side}, not a named difference (fix bosun or name it with its reason): {unnamed:?}"
    );
    let stale: Vec<(&str, &str)> = listed
        .iter()
        .filter(|n| !found.iter().any(|f| f.starts_with(n.what)))
        .map(|n| (n.what, n.why))
        .collect();
    assert!(
        stale.is_empty(),
        "{side}: these named differences no longer happen, drop them (and their README line): \
         {stale:?}"
    );
}

fn compare_file_lists(p: &Pair, only_sdk: &[&Named], only_bosun: &[&Named]) {
    let (s, b) = (files(&p.sdk), files(&p.bosun));
    assert_named(
        "only operator-sdk writes",
        &s.difference(&b).cloned().collect(),
        only_sdk,
    );
    assert_named(
        "only bosun writes",
        &b.difference(&s).cloned().collect(),
        only_bosun,
    );
}

/// PROJECT and watches.yaml: the same documents.
fn compare_project_and_watches(p: &Pair) {
    for f in ["PROJECT", "watches.yaml"] {
        assert_eq!(yaml(&p.bosun, f), yaml(&p.sdk, f), "{f}");
    }
}

fn without(v: &Value, key: &str, drop: &[&str]) -> Value {
    let mut v = v.clone();
    if let Some(list) = v.get_mut(key).and_then(Value::as_array_mut) {
        list.retain(|x| !drop.iter().any(|d| x == d));
    }
    v
}

/// The kustomizations, as kustomize reads them (comments aside).
fn compare_kustomizations(p: &Pair) {
    for d in ["default", "crd", "samples", "prometheus", "manifests"] {
        let f = format!("config/{d}/kustomization.yaml");
        let (s, b) = (yaml(&p.sdk, &f), yaml(&p.bosun, &f));
        if d == "manifests" {
            // operator-sdk lists a CSV base it has not written yet (kustomize fails on
            // config/manifests until `make bundle` writes one); bosun leaves it out, as `bosun
            // bundle` reads config/manifests/bases itself when a base is there.
            let base = "bases/proj.clusterserviceversion.yaml";
            assert_eq!(b, without(&s, "resources", &[base]), "{f}");
            assert!(!p.sdk.join("config/manifests").join(base).exists());
            continue;
        }
        assert_eq!(b, s, "{f}");
    }
    // rbac: the metrics-auth role's rules live in role.yaml (ONLY_SDK).
    let f = "config/rbac/kustomization.yaml";
    let auth = ["metrics_auth_role.yaml", "metrics_auth_role_binding.yaml"];
    assert_eq!(
        yaml(&p.bosun, f),
        without(&yaml(&p.sdk, f), "resources", &auth),
        "{f}"
    );
    let role = yaml(&p.bosun, "config/rbac/role.yaml");
    for r in ["tokenreviews", "subjectaccessreviews"] {
        assert!(
            role["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|rule| rule["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|x| x == r)
                    && rule["verbs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v == "create")),
            "bosun's role.yaml must grant create on {r} (operator-sdk's metrics_auth_role does)"
        );
    }
    // manager: bosun writes the `images` entry `make deploy` would otherwise add with
    // `kustomize edit set image` (bosun's Makefile runs no kustomize binary: kubectl's built-in
    // one cannot edit), and so the apiVersion/kind that `kustomize edit` adds with it.
    let f = "config/manager/kustomization.yaml";
    let mut b = yaml(&p.bosun, f);
    let images = b.as_object_mut().expect("a mapping").remove("images");
    assert_eq!(
        images,
        Some(
            serde_json::json!([{"name": "controller", "newName": "controller", "newTag": "latest"}])
        ),
        "{f}: the image `make deploy IMG=...` replaces"
    );
    for k in ["apiVersion", "kind"] {
        b.as_object_mut().expect("a mapping").remove(k);
    }
    assert_eq!(b, yaml(&p.sdk, f), "{f}");
}

fn targets(dir: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(dir.join("Makefile")).expect("Makefile");
    text.lines()
        .filter(|l| !l.starts_with(['\t', '#', '.', ' ']))
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, rest)| !name.contains(['$', ' ', '?', '=']) && !rest.starts_with('='))
        .map(|(name, _)| name.to_string())
        .collect()
}

fn compare_targets(p: &Pair) {
    let (s, b) = (targets(&p.sdk), targets(&p.bosun));
    let all = |l: &'static [Named]| l.iter().collect::<Vec<_>>();
    assert_named(
        "Makefile targets only operator-sdk has",
        &s.difference(&b).cloned().collect(),
        &all(TARGETS_ONLY_SDK),
    );
    assert_named(
        "Makefile targets only bosun has",
        &b.difference(&s).cloned().collect(),
        &all(TARGETS_ONLY_BOSUN),
    );
}

/// The Dockerfile's instructions (comments and blank lines aside), with the base image by its
/// role: operator-sdk's `<plugin>-operator` image, bosun's own.
fn instructions(dir: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(dir.join("Dockerfile")).expect("Dockerfile");
    let mut from = String::new();
    let mut rest = Vec::new();
    let mut joined = String::new();
    for l in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        joined.push_str(l.trim_end().trim_end_matches('\\'));
        if l.trim_end().ends_with('\\') {
            continue;
        }
        let line = std::mem::take(&mut joined);
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        match line.strip_prefix("FROM ") {
            Some(image) => from = image.to_string(),
            None => rest.push(line),
        }
    }
    (from, rest)
}

fn compare_dockerfiles(p: &Pair, plugin: &str) {
    let (sdk_from, sdk) = instructions(&p.sdk);
    let (bosun_from, bosun) = instructions(&p.bosun);
    assert_eq!(
        sdk_from,
        format!("quay.io/operator-framework/{plugin}-operator:v1.42.2")
    );
    assert!(
        bosun_from.starts_with("ghcr.io/bosun-dev/bosun:v"),
        "bosun's base is its own image: {bosun_from}"
    );
    let copies = |v: &[String]| -> Vec<String> {
        v.iter()
            .filter(|l| l.starts_with("COPY "))
            .cloned()
            .collect()
    };
    let mut s = copies(&sdk);
    let mut b = copies(&bosun);
    s.sort();
    b.sort();
    assert_eq!(
        b, s,
        "the same files go into the image, at the same places under $HOME"
    );
    // Named: bosun's image sets its HOME (/opt/bosun) and WORKDIR; operator-sdk's helm
    // Dockerfile sets /opt/helm, its ansible one relies on the base image's. The ansible
    // Dockerfile's `ansible-galaxy collection install` is not in bosun's: its engine runs the
    // roles natively, with operator_sdk.util and kubernetes.core built in.
    let other = |v: &[String]| -> BTreeSet<String> {
        v.iter()
            .filter(|l| !l.starts_with("COPY "))
            .cloned()
            .collect()
    };
    let expected_sdk: BTreeSet<String> = match plugin {
        "helm" => ["ENV HOME=/opt/helm", "WORKDIR ${HOME}"].map(String::from).into(),
        _ => ["RUN ansible-galaxy collection install -r ${HOME}/requirements.yml && chmod -R ug+rwx ${HOME}/.ansible"]
            .map(String::from)
            .into(),
    };
    assert_eq!(
        other(&sdk),
        expected_sdk,
        "operator-sdk's other instructions"
    );
    assert_eq!(
        other(&bosun),
        ["ENV HOME=/opt/bosun", "WORKDIR ${HOME}"]
            .map(String::from)
            .into(),
        "bosun's other instructions"
    );
}

/// The sample custom resources: the same kind, name and spec, but for two named differences.
fn compare_samples(p: &Pair, plugin: &str) {
    let dir = p.sdk.join("config/samples");
    let mut samples: Vec<String> = std::fs::read_dir(&dir)
        .expect("config/samples")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f != "kustomization.yaml")
        .collect();
    samples.sort();
    assert_eq!(samples.len(), 1, "{samples:?}");
    let f = format!("config/samples/{}", samples[0]);
    let (mut s, mut b) = (yaml(&p.sdk, &f), yaml(&p.bosun, &f));
    let labels = serde_json::json!({
        "app.kubernetes.io/name": "proj",
        "app.kubernetes.io/managed-by": "kustomize",
    });
    if plugin == "helm" {
        // Named: bosun labels its Helm samples as operator-sdk labels its Ansible (and Go)
        // ones; operator-sdk's Helm sample has no labels.
        assert!(s["metadata"]["labels"].is_null(), "{f}: {s}");
        s["metadata"]["labels"] = labels;
        // Both specs are the chart's values (the starter charts differ: ONLY_SDK_STARTER_CHART;
        // a --helm-chart's values are the same bytes on both sides).
        let chart = yaml(&p.sdk, "watches.yaml")[0]["chart"]
            .as_str()
            .expect("the entry's chart")
            .to_string();
        for (side, v) in [(&p.sdk, &mut s), (&p.bosun, &mut b)] {
            assert_eq!(
                v["spec"],
                yaml(side, &format!("{chart}/values.yaml")),
                "{f}"
            );
            v["spec"] = Value::Null;
        }
    } else {
        assert_eq!(s["metadata"]["labels"], labels, "{f}");
        // Named: operator-sdk's Ansible sample has an empty spec (a TODO comment); bosun's sets
        // the variable the scaffolded role's defaults/main.yml declares, so the sample runs the
        // role with a value a user sees in action.
        assert!(s["spec"].is_null(), "{f}: {s}");
        let role = yaml(&p.bosun, "roles/memcached/defaults/main.yml");
        assert_eq!(b["spec"], role, "{f}: the role's defaults");
        b["spec"] = Value::Null;
    }
    assert_eq!(b, s, "{f}");
}

fn compare_all(p: &Pair, plugin: &str, only_sdk: &[&Named]) {
    compare_samples(p, plugin);
    compare_file_lists(p, only_sdk, &ONLY_BOSUN.iter().collect::<Vec<_>>());
    compare_project_and_watches(p);
    compare_kustomizations(p);
    compare_targets(p);
    compare_dockerfiles(p, plugin);
}

#[test]
fn helm_with_the_starter_chart() {
    let p = scaffold(
        &["--plugins", "helm", "--domain", "example.com"],
        &[
            "--group",
            "charts",
            "--version",
            "v1alpha1",
            "--kind",
            "BookStore",
        ],
    );
    let only_sdk: Vec<&Named> = ONLY_SDK[..2].iter().chain(ONLY_SDK_STARTER_CHART).collect();
    compare_all(&p, "helm", &only_sdk);
    // Both starters have a Deployment and a Service, and the same values keys for them.
    for f in [
        "helm-charts/bookstore/templates/deployment.yaml",
        "helm-charts/bookstore/templates/service.yaml",
    ] {
        assert!(p.bosun.join(f).is_file() && p.sdk.join(f).is_file(), "{f}");
    }
    let name = |dir: &Path| yaml(dir, "helm-charts/bookstore/Chart.yaml")["name"].clone();
    assert_eq!(name(&p.bosun), name(&p.sdk));
}

#[test]
fn helm_with_a_local_chart() {
    let chart = peers::repo().join("crates/bosun/tests/peer_cli/guestbook");
    let chart = chart.to_str().expect("utf-8 path");
    let p = scaffold(
        &["--plugins", "helm", "--domain", "example.com"],
        &[&format!("--helm-chart={chart}")],
    );
    compare_all(&p, "helm", &ONLY_SDK[..2].iter().collect::<Vec<_>>());
    // The chart's templates and values are copied byte for byte by both. Chart.yaml is the
    // same document: operator-sdk loads and writes it again (keys sorted, quotes dropped),
    // bosun copies it as its author wrote it (named).
    let chart_yaml = "helm-charts/guestbook/Chart.yaml";
    assert_eq!(yaml(&p.bosun, chart_yaml), yaml(&p.sdk, chart_yaml));
    let source =
        std::fs::read(peers::repo().join("crates/bosun/tests/peer_cli/guestbook/Chart.yaml"))
            .expect("the fixture's Chart.yaml");
    assert_eq!(
        tree(&p.bosun)[chart_yaml],
        source,
        "bosun copies Chart.yaml as written"
    );
    assert_ne!(
        tree(&p.sdk)[chart_yaml],
        source,
        "operator-sdk rewrites Chart.yaml"
    );
    let charts = |dir: &Path| -> BTreeMap<String, String> {
        tree(dir)
            .into_iter()
            .filter(|(k, _)| k.starts_with("helm-charts/") && k != chart_yaml)
            .map(|(k, v)| (k, String::from_utf8(v).expect("utf-8")))
            .collect()
    };
    assert_eq!(charts(&p.bosun), charts(&p.sdk));
    assert_eq!(charts(&p.sdk).len(), 4, "values.yaml and three templates");
}

#[test]
fn ansible_with_a_role_and_a_playbook() {
    let p = scaffold(
        &["--plugins", "ansible", "--domain", "example.com"],
        &[
            "--group",
            "cache",
            "--version",
            "v1alpha1",
            "--kind",
            "Memcached",
            "--generate-role",
            "--generate-playbook",
        ],
    );
    compare_all(&p, "ansible", &ONLY_SDK.iter().collect::<Vec<_>>());
    // The playbook runs the role, in both.
    let play = |dir: &Path| {
        let v = yaml(dir, "playbooks/memcached.yml");
        v[0]["tasks"].clone()
    };
    assert_eq!(
        play(&p.bosun),
        play(&p.sdk),
        "playbooks/memcached.yml tasks"
    );
}
