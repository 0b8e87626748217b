//! operator-sdk's `bundle validate` (v1.42.2, built by `scripts/setup-peers.sh`) as the oracle
//! of `bosun bundle validate` (issue 35). A corpus of bundles, each the valid bundle of
//! `tests/peer_cli/bundle/` with one rule broken (or one feature added: webhooks, a conversion
//! CRD, install modes, removed APIs), is validated by both, with the default checks and with
//! `--select-optional suite=operatorframework`. Both must give the same verdict and the same set
//! of findings, compared by rule and level: each message is mapped to the rule it reports (the
//! tables `SDK` and `BOSUN` below; the wording differs on purpose, bosun's names the file, the
//! field and the fix), and a message no rule recognises fails the test, so that a new finding
//! on either side is looked at. Where bosun differs on purpose, the case names the difference
//! and its reason; a named difference that no longer happens fails too.
mod peers;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

const CSV: &str = "manifests/guestbook-operator.clusterserviceversion.yaml";
const CRD: &str = "manifests/example.com_guestbooks.yaml";
const ANN: &str = "metadata/annotations.yaml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Error,
    Warning,
}
use Level::{Error as E, Warning as W};

/// (rule, patterns): a message reports `rule` when it contains every pattern of one entry.
type Rules = &'static [(&'static str, &'static [&'static str])];

/// operator-sdk's messages (its JSON output, or the fatal log line when it stops early).
const SDK: Rules = &[
    ("annotations-missing", &["metadata not found"]),
    (
        "annotation-package",
        &["Missing annotation \"operators.operatorframework.io.bundle.package.v1\""],
    ),
    ("annotation-mediatype", &["mediatype.v1\" to have value"]),
    ("no-csv", &["unable to find a csv"]),
    ("csv-name", &["metadata.name", "RFC 1123"]),
    (
        "csv-name-convention",
        &["not following the versioning convention"],
    ),
    ("csv-name-convention", &["recommended naming convention"]),
    ("csv-version-required", &["csv.Spec.Version must be set"]),
    (
        "csv-version-semver",
        &["Invalid character(s) found in major number"],
    ),
    (
        "install-modes-none",
        &["none of InstallModeTypes are supported"],
    ),
    ("owned-crd-not-found", &["owned CRD", "not found in bundle"]),
    (
        "crd-not-owned",
        &["is present in bundle", "but not defined in CSV"],
    ),
    (
        "example-not-provided",
        &["example must have a provided API"],
    ),
    (
        "example-missing",
        &["provided API should have an example annotation"],
    ),
    ("example-missing", &["example annotations not found"]),
    ("examples-invalid", &["invalid example"]),
    ("crd-storage", &["exactly one version marked as storage"]),
    (
        "crd-preserve-unknown-fields",
        &["spec.preserveUnknownFields"],
    ),
    ("provider", &["Provider.Name not specified"]),
    ("icon-missing", &["csv.Spec.Icon not specified"]),
    ("capabilities", &["not a valid capabilities level"]),
    ("categories", &["not in the set of standard categories"]),
    ("maintainer-email", &["Maintainers email"]),
    ("link-url", &["Links url"]),
    ("display-name", &["Spec.DisplayName"]),
    ("min-kube-invalid", &["MinKubeVersion has an invalid value"]),
    (
        "min-kube-invalid",
        &["unable to use csv.Spec.MinKubeVersion"],
    ),
    ("min-kube-missing", &["minKubeVersion is not informed"]),
    (
        "resource-requests",
        &["unable to find the resource requests"],
    ),
    ("owned-description", &["has an empty description"]),
    (
        "removed-api-in-rules",
        &["deprecated and removed", "Permissions["],
    ),
    ("removed-api", &["deprecated and removed"]),
    (
        "conversion-install-modes",
        &["only AllNamespaces InstallModeType is supported when conversionCRDs"],
    ),
    (
        "unsupported-kind",
        &["unsupported media type registry+v1 for bundle object"],
    ),
    ("object-kind", &["Object 'Kind' is missing"]),
];

/// bosun's findings (`LEVEL [check] file: field: message`).
const BOSUN: Rules = &[
    (
        "annotations-missing",
        &["[bundle]", "annotations.yaml: missing"],
    ),
    (
        "annotation-package",
        &["bundle.package.v1: the package name is required"],
    ),
    (
        "annotation-mediatype",
        &["mediatype.v1: must be registry+v1"],
    ),
    (
        "default-channel",
        &["channel.default.v1: the default channel"],
    ),
    ("no-csv", &["the bundle has no ClusterServiceVersion"]),
    (
        "csv-name",
        &["metadata.name:", "is not a DNS-1123 subdomain"],
    ),
    ("csv-name-convention", &["<operator-name>.v<semver>"]),
    ("csv-version-required", &["spec.version: is required"]),
    (
        "csv-version-semver",
        &["spec.version:", "is not a semantic version"],
    ),
    ("replaces-self", &["a CSV cannot replace itself"]),
    ("install-modes-none", &["no install mode is supported"]),
    ("install-mode-type", &["is not one of [\"OwnNamespace\""]),
    (
        "install-strategy",
        &["spec.install.strategy: must be deployment"],
    ),
    ("deployment-name", &["deployments[", "].name: is required"]),
    ("owned-crd-not-found", &["owned[", "is not in the bundle"]),
    (
        "owned-crd-not-found",
        &["owned[", "].version: ", "has no version"],
    ),
    ("owned-crd-not-found", &["owned[", "].version: is required"]),
    (
        "owned-crd-not-found",
        &["owned[", "].kind: ", "serves kind"],
    ),
    ("crd-not-owned", &["is in the bundle but not in the CSV's"]),
    (
        "example-not-provided",
        &["is not a kind the CSV owns or requires"],
    ),
    ("example-missing", &["no example of the owned"]),
    ("example-missing", &["alm-examples: none"]),
    ("examples-invalid", &["alm-examples: not a JSON list"]),
    (
        "crd-storage",
        &["exactly one version must be the storage version"],
    ),
    ("crd-no-schema", &["openAPIV3Schema: none"]),
    (
        "crd-preserve-unknown-fields",
        &["spec.preserveUnknownFields:"],
    ),
    ("provider", &["spec.provider.name: is required"]),
    ("icon-missing", &["spec.icon: no icon"]),
    ("capabilities", &["metadata.annotations.capabilities:"]),
    ("categories", &["metadata.annotations.categories:"]),
    ("maintainer-email", &["spec.maintainers[", "].email:"]),
    ("link-url", &["spec.links[", "].url:"]),
    ("display-name", &["spec.displayName: is required"]),
    (
        "min-kube-invalid",
        &["spec.minKubeVersion:", "is not a semantic version"],
    ),
    ("min-kube-missing", &["spec.minKubeVersion: not set"]),
    (
        "resource-requests",
        &["resources.requests: no resource requests"],
    ),
    ("owned-description", &["an owned CRD without a description"]),
    (
        "removed-api",
        &["[alpha-deprecated-apis]", "was removed in Kubernetes"],
    ),
    (
        "conversion-install-modes",
        &["conversionCRDs needs AllNamespaces"],
    ),
    ("unsupported-kind", &["OLM does not install a"]),
    ("object-kind", &["kind: is required"]),
];

fn rule(table: Rules, message: &str) -> &'static str {
    table
        .iter()
        .find(|(_, pats)| pats.iter().all(|p| message.contains(p)))
        .map(|(r, _)| *r)
        .unwrap_or_else(|| {
            panic!("no rule recognises {message:?}: add it to the table (or fix the finding)")
        })
}

type Findings = BTreeSet<(Level, &'static str)>;

/// A tool's answer: passed (exit 0) and its findings by rule.
#[derive(Debug)]
struct Verdict {
    passed: bool,
    findings: Findings,
}

fn suite_args(suite: bool) -> &'static [&'static str] {
    if suite {
        &["--select-optional", "suite=operatorframework"]
    } else {
        &[]
    }
}

/// operator-sdk's verdict; `Err` with its stderr when it crashed (a Go panic, exit 2).
fn sdk(dir: &Path, suite: bool) -> Result<Verdict, String> {
    let out = Command::new(peers::peer("operator-sdk"))
        .args(["bundle", "validate"])
        .arg(dir)
        .args(suite_args(suite))
        .args(["-o", "json-alpha1"])
        .env_remove("KUBECONFIG")
        .output()
        .expect("run operator-sdk");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.code() == Some(2) {
        return Err(stderr);
    }
    let mut findings = Findings::new();
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(v) => {
            for o in v["outputs"].as_array().into_iter().flatten() {
                let level = if o["type"] == "error" { E } else { W };
                let msg = o["message"].as_str().unwrap_or_default();
                findings.insert((level, rule(SDK, msg)));
            }
        }
        // It stops before validating when the bundle does not load: the fatal log line says why.
        Err(_) => {
            let fatal = stderr
                .lines()
                .find(|l| l.contains("level=fatal"))
                .unwrap_or_else(|| panic!("operator-sdk printed no JSON and no fatal: {stderr}"));
            findings.insert((E, rule(SDK, fatal)));
        }
    }
    Ok(Verdict {
        passed: out.status.success(),
        findings,
    })
}

fn bosun(dir: &Path, suite: bool) -> Verdict {
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["bundle", "validate"])
        .arg(dir)
        .args(suite_args(suite))
        .output()
        .expect("run bosun");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let findings = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("ERROR ")
                .map(|m| (E, m))
                .or_else(|| l.strip_prefix("WARN ").map(|m| (W, m)))
        })
        .map(|(level, m)| (level, rule(BOSUN, m)))
        .collect();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "bosun bundle validate exits 0 or 1: {text}"
    );
    Verdict {
        passed: out.status.success(),
        findings,
    }
}

/// The bundle's files, each a YAML document; `None` removes the file.
type Files = BTreeMap<String, Option<Value>>;

fn base() -> Files {
    let dir = peers::repo().join("crates/bosun/tests/peer_cli/bundle");
    [CSV, CRD, ANN]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).expect("the corpus' base bundle");
            (
                f.to_string(),
                Some(serde_yaml::from_str(&text).expect("YAML")),
            )
        })
        .collect()
}

fn write(dir: &Path, files: &Files) {
    for (rel, v) in files {
        if let Some(v) = v {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
            std::fs::write(p, serde_yaml::to_string(v).expect("YAML")).expect("write");
        }
    }
}

fn csv(f: &mut Files) -> &mut Value {
    f.get_mut(CSV).and_then(Option::as_mut).expect("the CSV")
}
fn crd(f: &mut Files) -> &mut Value {
    f.get_mut(CRD).and_then(Option::as_mut).expect("the CRD")
}
fn ann(f: &mut Files) -> &mut Value {
    &mut f
        .get_mut(ANN)
        .and_then(Option::as_mut)
        .expect("annotations")["annotations"]
}
fn remove(v: &mut Value, key: &str) {
    v.as_object_mut().expect("a mapping").remove(key);
}
fn install(f: &mut Files) -> &mut Value {
    &mut csv(f)["spec"]["install"]["spec"]
}
fn supported_only(f: &mut Files, types: &[&str]) {
    for m in csv(f)["spec"]["installModes"]
        .as_array_mut()
        .expect("installModes")
    {
        let t = m["type"].as_str().unwrap_or_default().to_string();
        m["supported"] = json!(types.contains(&t.as_str()));
    }
}
fn second_version(f: &mut Files, storage: bool) {
    let versions = crd(f)["spec"]["versions"].as_array_mut().expect("versions");
    let mut v = versions[0].clone();
    v["name"] = json!("v1beta1");
    v["storage"] = json!(storage);
    versions.push(v);
}
fn validating_webhook(f: &mut Files) {
    csv(f)["spec"]["webhookdefinitions"] = json!([{
        "type": "ValidatingAdmissionWebhook", "generateName": "vguestbook.example.com",
        "deploymentName": "guestbook-operator", "containerPort": 9443, "targetPort": 9443,
        "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
        "webhookPath": "/validate-example-com-v1alpha1-guestbook",
        "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1alpha1"],
                   "operations": ["CREATE", "UPDATE"], "resources": ["guestbooks"]}]
    }]);
}
/// A CRD with two versions converted by the operator's webhook, installed in AllNamespaces only.
fn conversion_webhook(f: &mut Files) {
    supported_only(f, &["AllNamespaces"]);
    csv(f)["spec"]["webhookdefinitions"] = json!([{
        "type": "ConversionWebhook", "generateName": "cguestbook.example.com",
        "deploymentName": "guestbook-operator", "containerPort": 9443, "targetPort": 9443,
        "admissionReviewVersions": ["v1"], "sideEffects": "None", "webhookPath": "/convert",
        "conversionCRDs": ["guestbooks.example.com"]
    }]);
    second_version(f, false);
    crd(f)["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "guestbook-webhook", "namespace": "system", "path": "/convert"}}
    }});
}
/// The CRD as apiextensions.k8s.io/v1beta1 wrote it (removed in Kubernetes 1.22).
fn v1beta1_crd(f: &mut Files) {
    let c = crd(f);
    c["apiVersion"] = json!("apiextensions.k8s.io/v1beta1");
    let v = &mut c["spec"]["versions"][0];
    let schema = v["schema"].take();
    let sub = v["subresources"].take();
    remove(v, "schema");
    remove(v, "subresources");
    c["spec"]["validation"] = schema;
    c["spec"]["subresources"] = sub;
}

/// What bosun reports that operator-sdk does not (or the reverse), on purpose.
struct Named {
    bosun_only: &'static [(Level, &'static str)],
    sdk_only: &'static [(Level, &'static str)],
    /// Only in the run with (`Some(true)`) or without (`Some(false)`) `--select-optional
    /// suite=operatorframework`; `None`: in both.
    suite: Option<bool>,
    why: &'static str,
}

struct Case {
    name: &'static str,
    change: fn(&mut Files),
    named: Option<Named>,
}

const fn same(name: &'static str, change: fn(&mut Files)) -> Case {
    Case {
        name,
        change,
        named: None,
    }
}

const fn stricter(
    name: &'static str,
    change: fn(&mut Files),
    rule: &'static [(Level, &'static str)],
    why: &'static str,
) -> Case {
    Case {
        name,
        change,
        named: Some(Named {
            bosun_only: rule,
            sdk_only: &[],
            suite: None,
            why,
        }),
    }
}

fn corpus() -> Vec<Case> {
    vec![
        same("valid", |_| {}),
        // Annotations (metadata/annotations.yaml).
        same("no annotations file", |f| {
            f.insert(ANN.into(), None);
        }),
        same("no package annotation", |f| {
            remove(ann(f), "operators.operatorframework.io.bundle.package.v1")
        }),
        same("a media type other than registry+v1", |f| {
            ann(f)["operators.operatorframework.io.bundle.mediatype.v1"] = json!("helm")
        }),
        stricter(
            "a default channel that is not a channel",
            |f| {
                ann(f)["operators.operatorframework.io.bundle.channel.default.v1"] = json!("stable")
            },
            &[(E, "default-channel")],
            "the package would have no head in its default channel: opm refuses it when the \
             catalog is built, bosun already at validate time",
        ),
        same("channel named preview", |f| {
            let a = ann(f);
            a["operators.operatorframework.io.bundle.channels.v1"] = json!("preview");
            a["operators.operatorframework.io.bundle.channel.default.v1"] = json!("preview");
        }),
        // The CSV.
        same("no CSV", |f| {
            f.insert(CSV.into(), None);
        }),
        same("a CSV name that is not DNS-1123", |f| {
            csv(f)["metadata"]["name"] = json!("Guestbook_Operator")
        }),
        same("a CSV name off the <name>.v<semver> convention", |f| {
            csv(f)["metadata"]["name"] = json!("guestbook-operator")
        }),
        Case {
            name: "no spec.version",
            change: |f| remove(&mut csv(f)["spec"], "version"),
            named: Some(Named {
                bosun_only: &[(E, "csv-version-required")],
                sdk_only: &[],
                suite: Some(false),
                why: "OLM orders and replaces CSVs by version: operator-sdk asks for one only \
                      with the OperatorHub checks, bosun always",
            }),
        },
        same("a spec.version that is not semver", |f| {
            csv(f)["spec"]["version"] = json!("one")
        }),
        stricter(
            "a CSV that replaces itself",
            |f| csv(f)["spec"]["replaces"] = json!("guestbook-operator.v0.1.0"),
            &[(E, "replaces-self")],
            "an upgrade graph with a loop: OLM never leaves this version",
        ),
        same("no display name", |f| {
            remove(&mut csv(f)["spec"], "displayName")
        }),
        same("no description", |f| {
            remove(&mut csv(f)["spec"], "description")
        }),
        same("an invalid minKubeVersion", |f| {
            csv(f)["spec"]["minKubeVersion"] = json!("latest")
        }),
        same("no minKubeVersion", |f| {
            remove(&mut csv(f)["spec"], "minKubeVersion")
        }),
        // Install modes.
        same("no supported install mode", |f| supported_only(f, &[])),
        same("OwnNamespace only", |f| {
            supported_only(f, &["OwnNamespace"])
        }),
        same("an install mode listed twice", |f| {
            csv(f)["spec"]["installModes"]
                .as_array_mut()
                .expect("installModes")
                .push(json!({"type": "OwnNamespace", "supported": false}))
        }),
        stricter(
            "an unknown install mode",
            |f| {
                csv(f)["spec"]["installModes"]
                    .as_array_mut()
                    .expect("installModes")
                    .push(json!({"type": "Everywhere", "supported": true}))
            },
            &[(E, "install-mode-type")],
            "OLM knows four install modes and silently ignores any other: a typo would \
             change where the operator can be installed",
        ),
        // The install strategy.
        stricter(
            "an install strategy other than deployment",
            |f| csv(f)["spec"]["install"]["strategy"] = json!("helm"),
            &[(E, "install-strategy")],
            "OLM installs only the deployment strategy",
        ),
        stricter(
            "a deployment without a name",
            |f| install(f)["deployments"][0]["name"] = json!(""),
            &[(E, "deployment-name")],
            "OLM cannot create a Deployment without a name",
        ),
        same("a container without resource requests", |f| {
            remove(
                &mut install(f)["deployments"][0]["spec"]["template"]["spec"]["containers"][0],
                "resources",
            )
        }),
        same("a wildcard RBAC rule", |f| {
            install(f)["clusterPermissions"][0]["rules"]
                .as_array_mut()
                .expect("rules")
                .push(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}))
        }),
        // The CSV's owned CRDs against the manifests.
        same("an owned CRD without a version", |f| {
            remove(
                &mut csv(f)["spec"]["customresourcedefinitions"]["owned"][0],
                "version",
            )
        }),
        same("an owned CRD missing from the manifests", |f| {
            f.insert(CRD.into(), None);
        }),
        same("a CRD the CSV does not own", |f| {
            csv(f)["spec"]["customresourcedefinitions"]["owned"] = json!([])
        }),
        same("an owned version the CRD does not serve", |f| {
            csv(f)["spec"]["customresourcedefinitions"]["owned"][0]["version"] = json!("v1")
        }),
        same("an owned kind the CRD does not serve", |f| {
            csv(f)["spec"]["customresourcedefinitions"]["owned"][0]["kind"] = json!("GuestBook")
        }),
        same("an owned CRD without a description", |f| {
            remove(
                &mut csv(f)["spec"]["customresourcedefinitions"]["owned"][0],
                "description",
            )
        }),
        same("two versions, both owned, one with an example", |f| {
            second_version(f, false);
            csv(f)["spec"]["customresourcedefinitions"]["owned"]
                .as_array_mut()
                .expect("owned")
                .push(json!({"name": "guestbooks.example.com", "version": "v1beta1",
                             "kind": "Guestbook", "displayName": "Guestbook", "description": "A guest book."}))
        }),
        // alm-examples.
        same("no alm-examples", |f| {
            remove(&mut csv(f)["metadata"]["annotations"], "alm-examples")
        }),
        same("alm-examples that is not JSON", |f| {
            csv(f)["metadata"]["annotations"]["alm-examples"] = json!("[{")
        }),
        same("an example of a kind the CSV does not provide", |f| {
            csv(f)["metadata"]["annotations"]["alm-examples"] = json!(
                r#"[{"apiVersion":"example.com/v1alpha1","kind":"Visitor","metadata":{"name":"x"}}]"#
            )
        }),
        // CRDs.
        same("two storage versions", |f| second_version(f, true)),
        stricter(
            "a CRD version without a schema",
            |f| remove(&mut crd(f)["spec"]["versions"][0], "schema"),
            &[(W, "crd-no-schema")],
            "the API server accepts it, but nothing validates the kind and the scorecard \
             cannot check it",
        ),
        // OperatorHub listing (the suite).
        same("no provider", |f| remove(&mut csv(f)["spec"], "provider")),
        same("no icon", |f| remove(&mut csv(f)["spec"], "icon")),
        same("capabilities off the list", |f| {
            csv(f)["metadata"]["annotations"]["capabilities"] = json!("Everything")
        }),
        same("a category off the list", |f| {
            csv(f)["metadata"]["annotations"]["categories"] = json!("Gardening")
        }),
        same("a maintainer email that is not one", |f| {
            csv(f)["spec"]["maintainers"][0]["email"] = json!("nobody")
        }),
        same("a link that is not a URL", |f| {
            csv(f)["spec"]["links"][0]["url"] = json!("not a url")
        }),
        // Removed APIs.
        same(
            "a v1beta1 CRD (preserveUnknownFields defaulted)",
            v1beta1_crd,
        ),
        same("a v1beta1 CRD that prunes", |f| {
            v1beta1_crd(f);
            crd(f)["spec"]["preserveUnknownFields"] = json!(false);
        }),
        same("a policy/v1beta1 PodDisruptionBudget", |f| {
            f.insert(
                "manifests/pdb.yaml".into(),
                Some(json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "guestbook"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guestbook-operator"}}}})),
            );
        }),
        Case {
            name: "an RBAC rule on a resource whose beta API was removed",
            change: |f| {
                install(f)["clusterPermissions"][0]["rules"]
                    .as_array_mut()
                    .expect("rules")
                    .push(json!({"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get"]}))
            },
            named: Some(Named {
                bosun_only: &[],
                sdk_only: &[(W, "removed-api-in-rules")],
                suite: Some(true),
                why: "an RBAC rule names no API version: batch cronjobs is also batch/v1's, \
                      served today; bosun warns of the manifests' apiVersions only",
            }),
        },
        // Objects.
        same("a Deployment among the manifests", |f| {
            f.insert(
                "manifests/deploy.yaml".into(),
                Some(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}})),
            );
        }),
        same("an object without a kind", |f| {
            f.insert(
                "manifests/cm.yaml".into(),
                Some(json!({"apiVersion": "v1", "metadata": {"name": "x"}, "data": {}})),
            );
        }),
        // Webhooks and conversion.
        same("a validating webhook", validating_webhook),
        same("a webhook of a deployment the CSV lacks", |f| {
            validating_webhook(f);
            csv(f)["spec"]["webhookdefinitions"][0]["deploymentName"] = json!("nobody");
        }),
        same(
            "a conversion webhook, AllNamespaces only",
            conversion_webhook,
        ),
        same(
            "a conversion webhook with OwnNamespace supported too",
            |f| {
                conversion_webhook(f);
                supported_only(f, &["OwnNamespace", "AllNamespaces"]);
            },
        ),
        same("a conversion webhook naming a CRD not in the bundle", |f| {
            conversion_webhook(f);
            csv(f)["spec"]["webhookdefinitions"][0]["conversionCRDs"] =
                json!(["visitors.example.com"]);
        }),
    ]
}

#[test]
fn bosun_and_operator_sdk_give_the_same_verdicts_and_findings() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut failures = Vec::new();
    for (i, case) in corpus().into_iter().enumerate() {
        let dir = tmp.path().join(format!("b{i}"));
        let mut files = base();
        (case.change)(&mut files);
        write(&dir, &files);
        for suite in [false, true] {
            let label = format!(
                "{:?}{}",
                case.name,
                if suite {
                    " (suite=operatorframework)"
                } else {
                    ""
                }
            );
            let s =
                sdk(&dir, suite).unwrap_or_else(|e| panic!("{label}: operator-sdk crashed: {e}"));
            let b = bosun(&dir, suite);
            let applies = case
                .named
                .as_ref()
                .filter(|n| n.suite.is_none_or(|x| x == suite));
            let mut expected = s.findings.clone();
            if let Some(n) = applies {
                for f in n.sdk_only {
                    if !expected.remove(f) {
                        failures.push(format!(
                            "{label}: operator-sdk no longer reports {f:?}: drop the named difference ({})",
                            n.why
                        ));
                    }
                }
                for f in n.bosun_only {
                    if s.findings.contains(f) {
                        failures.push(format!(
                            "{label}: operator-sdk reports {f:?} now too: drop the named difference"
                        ));
                    }
                    expected.insert(*f);
                }
            }
            if b.findings != expected {
                failures.push(format!(
                    "{label}: bosun {:?}, operator-sdk {:?}{}",
                    b.findings,
                    s.findings,
                    applies.map_or(String::new(), |n| format!(" (named: {})", n.why))
                ));
            }
            // The verdict: an error fails, on both sides (a named difference may turn it).
            let fails = expected.iter().any(|(l, _)| *l == E);
            if b.passed == fails || s.passed == s.findings.iter().any(|(l, _)| *l == E) {
                failures.push(format!(
                    "{label}: verdicts bosun passed={} operator-sdk passed={}, findings {expected:?}",
                    b.passed, s.passed
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// operator-sdk v1.42.2 crashes (a Go panic, exit 2: an index out of range in the OperatorHub
/// icon check) on a CSV whose `spec.icon` is an empty list, with the suite selected. bosun
/// answers the same bundle with its "no icon" warning and passes, as operator-sdk does for a
/// CSV with no icon field at all.
#[test]
fn an_empty_icon_list_crashes_operator_sdk_and_not_bosun() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut files = base();
    csv(&mut files)["spec"]["icon"] = json!([]);
    write(tmp.path(), &files);
    let crash = sdk(tmp.path(), true).expect_err("operator-sdk v1.42.2 panics on `icon: []`");
    assert!(
        crash.contains("panic: runtime error: index out of range")
            && crash.contains("checkSpecIcon"),
        "{crash}"
    );
    let b = bosun(tmp.path(), true);
    assert!(b.passed);
    assert_eq!(b.findings, [(W, "icon-missing")].into());
    let without = {
        let mut f = base();
        remove(&mut csv(&mut f)["spec"], "icon");
        let d = tmp.path().join("no-icon");
        write(&d, &f);
        sdk(&d, true).expect("no crash without the field")
    };
    assert_eq!(without.findings, b.findings);
}
