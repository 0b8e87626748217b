//! `bosun bundle --webhooks`: a bundle whose operators serve webhooks carries them as the CSV's
//! `spec.webhookdefinitions`, as OLM installs them (it makes the certificate, mounts it into
//! the named Deployment, and makes the Service and the configurations): the admission
//! webhooks of VmGroup and the BookStore's conversion webhook. The objects bosun's own
//! install uses for them (cert-manager's Issuer and Certificates, the webhook Service, the
//! configurations) are not in the bundle, which both bosun's and operator-sdk's own `bundle
//! validate` pass.
mod peers;
mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::{docs, ok, tree};

/// Where OLM mounts the serving certificate it makes.
const OLM_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

fn csv(dir: &Path, package: &str) -> Value {
    let p = dir.join(format!(
        "bundle/manifests/{package}.clusterserviceversion.yaml"
    ));
    docs(&std::fs::read_to_string(p).expect("csv")).remove(0)
}

/// bosun's own verdict and operator-sdk v1.42.2's (the default validators, which check the
/// CSV's webhook definitions; the OperatorHub listing fields are a base CSV's, not these).
fn both_validators_pass(dir: &Path) {
    let out = ok(dir, &["bundle", "validate", "bundle"]);
    assert!(
        out.contains("All validation tests have completed successfully"),
        "{out}"
    );
    let sdk = Command::new(peers::peer("operator-sdk"))
        .args(["bundle", "validate", "bundle"])
        .current_dir(dir)
        .env_remove("KUBECONFIG")
        .output()
        .expect("operator-sdk runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&sdk.stdout),
        String::from_utf8_lossy(&sdk.stderr)
    );
    assert!(sdk.status.success(), "operator-sdk bundle validate: {text}");
    assert!(
        text.contains("All validation tests have completed successfully")
            && !text.contains("level=error"),
        "{text}"
    );
}

/// The manifests of the bundle, as `kind/name`.
fn manifests(dir: &Path) -> Vec<String> {
    tree(dir)
        .into_iter()
        .filter(|(f, _)| f.starts_with("bundle/manifests/"))
        .flat_map(|(_, data)| docs(&String::from_utf8_lossy(&data)))
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn deployment(csv: &Value) -> &Value {
    &csv["spec"]["install"]["spec"]["deployments"][0]
}

#[test]
fn admission_webhooks_become_webhookdefinitions_for_the_bundles_deployment() {
    let dir = tempfile::tempdir().expect("dir");
    ok(
        dir.path(),
        &[
            "bundle",
            "--operators=vmgroup",
            "--webhooks=vmgroup",
            "--package=vm-operator",
        ],
    );
    let csv = csv(dir.path(), "vm-operator");
    let defs = csv["spec"]["webhookdefinitions"]
        .as_array()
        .expect("webhookdefinitions");
    let types: Vec<&str> = defs.iter().filter_map(|d| d["type"].as_str()).collect();
    assert_eq!(
        types,
        ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"]
    );
    let d = deployment(&csv);
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    let ports: Vec<&Value> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| &p["containerPort"])
        .collect();
    for def in defs {
        assert_eq!(def["deploymentName"], d["name"], "{def}");
        assert!(
            ports.contains(&&def["targetPort"]),
            "{def} not served by {ports:?}"
        );
        assert_eq!(def["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(def["sideEffects"], "None");
        assert!(def["failurePolicy"].is_string(), "{def}");
        assert_eq!(def["rules"][0]["resources"], json!(["vmgroups"]), "{def}");
        assert!(
            def["webhookPath"]
                .as_str()
                .is_some_and(|p| p.starts_with('/')),
            "{def}"
        );
        assert!(def.get("namespaceSelector").is_none(), "OLM sets it: {def}");
    }
    let paths: Vec<&str> = defs
        .iter()
        .filter_map(|d| d["webhookPath"].as_str())
        .collect();
    assert_eq!(paths, ["/default-vmgroup", "/validate-vmgroup"]);
    // The operator reads the certificate OLM mounts; no cert-manager Secret is mounted.
    let env = container["env"].as_array().expect("env");
    let cert_dir = env
        .iter()
        .find(|e| e["name"] == "BOSUN_VMGROUP_WEBHOOK_CERT_DIR")
        .expect("the certificate's directory");
    assert_eq!(cert_dir["value"], OLM_CERT_DIR);
    assert!(
        d["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|v| v["secret"]["secretName"] != "bosun-vmgroup"),
        "{d}"
    );
    let shipped = manifests(dir.path());
    for gone in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "Certificate",
        "Issuer",
        "Service/bosun-webhook",
    ] {
        assert!(
            !shipped.iter().any(|m| m.starts_with(gone)),
            "{gone} in the bundle: {shipped:?}"
        );
    }
    both_validators_pass(dir.path());
}

#[test]
fn a_conversion_webhook_names_its_crds_and_the_bundle_installs_for_all_namespaces() {
    let dir = tempfile::tempdir().expect("dir");
    ok(
        dir.path(),
        &[
            "bundle",
            "--operators=bookstore",
            "--webhooks=bookstore",
            "--package=books-operator",
        ],
    );
    let csv = csv(dir.path(), "books-operator");
    let defs = csv["spec"]["webhookdefinitions"]
        .as_array()
        .expect("webhookdefinitions");
    assert_eq!(defs.len(), 1, "{defs:?}");
    let c = &defs[0];
    assert_eq!(c["type"], "ConversionWebhook");
    assert_eq!(
        c["conversionCRDs"],
        json!(["bookstores.charts.example.com"])
    );
    assert_eq!(c["webhookPath"], "/convert-bookstore");
    assert_eq!(c["deploymentName"], deployment(&csv)["name"]);
    assert_eq!(c["admissionReviewVersions"], json!(["v1"]));
    // A CRD converts for the whole cluster: OLM installs such an operator for all namespaces.
    let modes: Vec<(&str, bool)> = csv["spec"]["installModes"]
        .as_array()
        .expect("modes")
        .iter()
        .map(|m| {
            (
                m["type"].as_str().expect("type"),
                m["supported"].as_bool().expect("bool"),
            )
        })
        .collect();
    assert_eq!(
        modes,
        [
            ("OwnNamespace", false),
            ("SingleNamespace", false),
            ("MultiNamespace", false),
            ("AllNamespaces", true)
        ]
    );
    // The CRD serves both versions; OLM writes its conversion stanza and CA.
    let crd = docs(
        &std::fs::read_to_string(
            dir.path()
                .join("bundle/manifests/charts.example.com_bookstores.yaml"),
        )
        .expect("the CRD"),
    )
    .remove(0);
    let versions: Vec<(&str, bool)> = crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().expect("name"),
                v["storage"].as_bool().expect("storage"),
            )
        })
        .collect();
    assert_eq!(versions, [("v1", true), ("v1alpha1", false)]);
    assert!(crd["spec"].get("conversion").is_none(), "{crd}");
    assert!(
        crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].is_null(),
        "{crd}"
    );
    both_validators_pass(dir.path());
}

/// `bundle validate --select-optional name=olmv1`: a bundle `bosun bundle` writes without
/// webhooks is one OLM v1 installs; with webhook definitions it is refused, naming the field
/// and the way out, exit code 1 as for any failed validation.
#[test]
fn olm_v1_readiness_is_an_optional_suite() {
    let dir = tempfile::tempdir().expect("dir");
    ok(
        dir.path(),
        &[
            "bundle",
            "--operators=myownshell",
            "--package=shell-operator",
        ],
    );
    let out = ok(
        dir.path(),
        &[
            "bundle",
            "validate",
            "bundle",
            "--select-optional",
            "name=olmv1",
        ],
    );
    assert!(
        out.contains("All validation tests have completed successfully"),
        "{out}"
    );

    let hooks = tempfile::tempdir().expect("dir");
    ok(
        hooks.path(),
        &[
            "bundle",
            "--operators=vmgroup",
            "--webhooks=vmgroup",
            "--package=vm-operator",
        ],
    );
    let out = support::run(
        hooks.path(),
        &[
            "bundle",
            "validate",
            "bundle",
            "--select-optional",
            "name=olmv1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ERROR [olmv1]")
            && err.contains("spec.webhookdefinitions: Value vm-operator.v0.0.1: OLM v1")
            && err.contains("bundle without --webhooks"),
        "{err}"
    );
    // Without the suite the same bundle passes: OLM v0 installs it.
    let out = ok(hooks.path(), &["bundle", "validate", "bundle"]);
    assert!(
        out.contains("All validation tests have completed successfully"),
        "{out}"
    );
}
