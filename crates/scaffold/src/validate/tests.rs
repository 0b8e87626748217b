//! Each rule triggered by a bundle written to break it, and the generated bundle passing.
use serde_json::{json, Value};

use super::*;
use crate::bundle::tests::{base, crd, input};

const CSV: &str = "manifests/garden-operator.clusterserviceversion.yaml";

fn all() -> Options {
    let mut o = Options::default();
    o.select("suite=operatorframework").expect("suite");
    o
}

/// The generated bundle (with a base CSV), read back from disk.
fn good() -> Bundle {
    let mut i = input();
    i.base = Some(base());
    let tree = crate::bundle::generate(&i).expect("bundle");
    let dir = tempfile::tempdir().expect("dir");
    for (rel, data) in &tree.files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, data).expect("write");
    }
    let (b, findings) = load(&dir.path().join("bundle"));
    assert!(findings.is_empty(), "{findings:?}");
    b
}

fn csv_mut(b: &mut Bundle) -> &mut Value {
    &mut b
        .manifests
        .iter_mut()
        .find(|m| m.object["kind"] == "ClusterServiceVersion")
        .expect("csv")
        .object
}

fn errors(b: &Bundle) -> Vec<Finding> {
    validate(b, &all())
        .into_iter()
        .filter(|f| f.level == Level::Error)
        .collect()
}

/// The one finding of `check` at `file`/`field`, at `level`.
#[track_caller]
fn expect(b: &Bundle, level: Level, check: &str, file: &str, field: &str) -> Finding {
    let findings = validate(b, &all());
    findings
        .iter()
        .find(|f| f.check == check && f.file == file && f.field == field && f.level == level)
        .cloned()
        .unwrap_or_else(|| panic!("no {level:?} {check} {file} {field} in {findings:#?}"))
}

#[test]
fn the_generated_bundle_passes_every_suite_without_warnings() {
    let findings = validate(&good(), &all());
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn without_a_base_operatorhub_asks_for_the_listing_fields() {
    let tree = crate::bundle::generate(&input()).expect("bundle");
    let dir = tempfile::tempdir().expect("dir");
    for (rel, data) in &tree.files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, data).expect("write");
    }
    let findings = validate_dir(&dir.path().join("bundle"), &all());
    let fields: Vec<&str> = findings
        .iter()
        .filter(|f| f.level == Level::Error)
        .map(|f| f.field.as_str())
        .collect();
    // operatorhubv2 needs the provider; empty maintainers and links are allowed.
    assert_eq!(fields, ["spec.provider.name"]);
    // The default set alone passes: the listing is OperatorHub's concern.
    assert!(validate_dir(&dir.path().join("bundle"), &Options::default()).is_empty());
}

#[test]
fn a_missing_directory_or_annotations_file_is_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let f = validate_dir(dir.path(), &Options::default());
    assert!(
        f.iter()
            .any(|f| f.file == "manifests/" && f.level == Level::Error),
        "{f:?}"
    );
    assert!(
        f.iter().any(|f| f.file == "metadata/annotations.yaml"),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|f| f.message.contains("no ClusterServiceVersion")),
        "{f:?}"
    );
}

#[test]
fn a_manifest_that_is_not_yaml_names_its_file() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("manifests")).expect("mkdir");
    std::fs::write(dir.path().join("manifests/bad.yaml"), "a: [").expect("write");
    let f = validate_dir(dir.path(), &Options::default());
    assert!(
        f.iter()
            .any(|f| f.file == "manifests/bad.yaml" && f.message.contains("not valid YAML")),
        "{f:?}"
    );
}

#[test]
fn annotations_need_mediatype_package_and_a_default_among_the_channels() {
    let mut b = good();
    let a = b.annotations.as_mut().expect("annotations");
    let p = "operators.operatorframework.io.bundle";
    a["annotations"][format!("{p}.mediatype.v1")] = json!("plain+v0");
    a["annotations"][format!("{p}.package.v1")] = json!("");
    a["annotations"][format!("{p}.channel.default.v1")] = json!("stable");
    for k in ["mediatype.v1", "package.v1", "channel.default.v1"] {
        expect(
            &b,
            Level::Error,
            "bundle",
            "metadata/annotations.yaml",
            &format!("annotations.{p}.{k}"),
        );
    }
}

#[test]
fn a_duplicate_crd_is_an_error_naming_both_files() {
    let mut b = good();
    b.manifests.push(Manifest {
        file: "manifests/copy.yaml".into(),
        object: crd("plants.example.test", "Garden", "gardens"),
    });
    let f = expect(
        &b,
        Level::Error,
        "crd",
        "manifests/copy.yaml",
        "metadata.name",
    );
    assert!(
        f.message
            .contains("manifests/plants.example.test_gardens.yaml"),
        "{f}"
    );
}

#[test]
fn an_owned_crd_missing_from_the_bundle_is_an_error() {
    let mut b = good();
    b.manifests
        .retain(|m| m.object["kind"] != "CustomResourceDefinition");
    let f = expect(
        &b,
        Level::Error,
        "bundle",
        CSV,
        "spec.customresourcedefinitions.owned[0]",
    );
    assert!(f.message.contains("gardens.plants.example.test"), "{f}");
}

#[test]
fn a_crd_the_csv_does_not_own_is_an_error() {
    let mut b = good();
    b.manifests.push(Manifest {
        file: "manifests/extra.yaml".into(),
        object: crd("plants.example.test", "Shed", "sheds"),
    });
    expect(
        &b,
        Level::Error,
        "bundle",
        "manifests/extra.yaml",
        "metadata.name",
    );
}

#[test]
fn an_owned_version_or_kind_the_crd_does_not_serve_is_an_error() {
    let mut b = good();
    let owned = &mut csv_mut(&mut b)["spec"]["customresourcedefinitions"]["owned"][0];
    owned["version"] = json!("v9");
    owned["kind"] = json!("Yard");
    expect(
        &b,
        Level::Error,
        "bundle",
        CSV,
        "spec.customresourcedefinitions.owned[0].version",
    );
    expect(
        &b,
        Level::Error,
        "bundle",
        CSV,
        "spec.customresourcedefinitions.owned[0].kind",
    );
    // And the CRD is then owned by no entry (operator-framework matches group, version and
    // kind): an error on the CRD too, as operator-sdk reports it.
    let crd_file = b.crds().next().expect("a CRD").file.clone();
    expect(&b, Level::Error, "bundle", &crd_file, "metadata.name");
}

/// The rules operator-sdk v1.42.2's `bundle validate` showed bosun lacked (peer_cli_bundle_validate).
#[test]
fn rules_found_by_comparing_with_operator_sdk() {
    // A conversion webhook with a namespaced install mode supported.
    let mut b = good();
    let csv = csv_mut(&mut b);
    csv["spec"]["webhookdefinitions"] = json!([{"type": "ConversionWebhook",
        "deploymentName": "x", "generateName": "c.example.test", "conversionCRDs": ["gardens.plants.example.test"]}]);
    csv["spec"]["installModes"] = json!([{"type": "OwnNamespace", "supported": true},
        {"type": "AllNamespaces", "supported": true}]);
    let f = expect(&b, Level::Error, "csv", CSV, "spec.installModes");
    assert!(f.message.contains("OwnNamespace"), "{f}");
    csv_mut(&mut b)["spec"]["installModes"][0]["supported"] = json!(false);
    assert!(!validate(&b, &all())
        .iter()
        .any(|f| f.field == "spec.installModes"));

    // A v1beta1 CRD that keeps v1beta1's preserveUnknownFields default.
    let mut b = good();
    let crd = &mut b
        .manifests
        .iter_mut()
        .find(|m| m.object["kind"] == "CustomResourceDefinition")
        .expect("a CRD");
    crd.object["apiVersion"] = json!("apiextensions.k8s.io/v1beta1");
    let file = crd.file.clone();
    expect(&b, Level::Error, "crd", &file, "spec.preserveUnknownFields");

    // No alm-examples at all: a warning of the default checks.
    let mut b = good();
    csv_mut(&mut b)["metadata"]["annotations"]
        .as_object_mut()
        .expect("annotations")
        .remove("alm-examples");
    let default = validate(&b, &Options::default());
    assert!(
        default
            .iter()
            .any(|f| f.level == Level::Warning && f.field == "metadata.annotations.alm-examples"),
        "{default:#?}"
    );

    // A CSV name off <operator>.v<semver>: a good-practices warning.
    let mut b = good();
    csv_mut(&mut b)["metadata"]["name"] = json!("garden-operator");
    expect(&b, Level::Warning, "good-practices", CSV, "metadata.name");
}

#[test]
fn an_example_of_an_unowned_kind_is_an_error() {
    let mut b = good();
    let ex = json!([{"apiVersion": "plants.example.test/v1alpha1", "kind": "Shed", "metadata": {"name": "s"}}]);
    csv_mut(&mut b)["metadata"]["annotations"]["alm-examples"] = json!(ex.to_string());
    let f = expect(
        &b,
        Level::Error,
        "csv",
        CSV,
        "metadata.annotations.alm-examples[0]",
    );
    assert!(f.message.contains("Shed"), "{f}");
    // And the owned Garden now has no example: a warning of the default CSV check, as
    // operator-framework's ("provided API should have an example annotation").
    expect(
        &b,
        Level::Warning,
        "csv",
        CSV,
        "metadata.annotations.alm-examples",
    );
}

#[test]
fn examples_must_be_a_json_list_of_named_objects() {
    let mut b = good();
    csv_mut(&mut b)["metadata"]["annotations"]["alm-examples"] = json!("{not json");
    expect(
        &b,
        Level::Error,
        "csv",
        CSV,
        "metadata.annotations.alm-examples",
    );
    let ex =
        json!([{"apiVersion": "plants.example.test/v1alpha1", "kind": "Garden", "metadata": {}}]);
    csv_mut(&mut b)["metadata"]["annotations"]["alm-examples"] = json!(ex.to_string());
    expect(
        &b,
        Level::Warning,
        "csv",
        CSV,
        "metadata.annotations.alm-examples[0].metadata.name",
    );
}

#[test]
fn csv_required_fields() {
    let mut b = good();
    let csv = csv_mut(&mut b);
    csv["spec"]["version"] = json!("v1.0");
    csv["spec"]["replaces"] = csv["metadata"]["name"].clone();
    csv["spec"]["installModes"] = json!([{"type": "Everywhere", "supported": "yes"}]);
    csv["spec"]["install"]["strategy"] = json!("helm");
    csv["spec"]["install"]["spec"]["clusterPermissions"][0]["serviceAccountName"] = json!("");
    csv["spec"]["customresourcedefinitions"]["owned"][0]["kind"] = json!("");
    for field in [
        "spec.version",
        "spec.replaces",
        "spec.installModes[0].type",
        "spec.installModes[0].supported",
        "spec.installModes",
        "spec.install.strategy",
        "spec.install.spec.clusterPermissions[0].serviceAccountName",
        "spec.customresourcedefinitions.owned[0].kind",
    ] {
        expect(&b, Level::Error, "csv", CSV, field);
    }
    csv_mut(&mut b)["spec"]["install"]["spec"]["deployments"] = json!([]);
    expect(
        &b,
        Level::Error,
        "csv",
        CSV,
        "spec.install.spec.deployments",
    );
}

#[test]
fn a_deployment_account_without_permissions_is_a_warning() {
    let mut b = good();
    csv_mut(&mut b)["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
        ["serviceAccountName"] = json!("other");
    expect(
        &b,
        Level::Warning,
        "csv",
        CSV,
        "spec.install.spec.deployments[0].spec.template.spec.serviceAccountName",
    );
}

#[test]
fn crd_rules() {
    let mut b = good();
    let m = b
        .manifests
        .iter_mut()
        .find(|m| m.object["kind"] == "CustomResourceDefinition")
        .expect("crd");
    let file = m.file.clone();
    m.object["metadata"]["name"] = json!("wrong.name");
    m.object["spec"]["versions"][0]["storage"] = json!(false);
    m.object["spec"]["versions"][0]["schema"] = json!(null);
    expect(&b, Level::Error, "crd", &file, "metadata.name");
    expect(&b, Level::Error, "crd", &file, "spec.versions");
    expect(
        &b,
        Level::Warning,
        "crd",
        &file,
        "spec.versions[0].schema.openAPIV3Schema",
    );
}

#[test]
fn objects_need_a_name() {
    let mut b = good();
    b.manifests.push(Manifest {
        file: "manifests/anon.yaml".into(),
        object: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
    });
    expect(
        &b,
        Level::Error,
        "object",
        "manifests/anon.yaml",
        "metadata.name",
    );
}

#[test]
fn operatorhub_listing_rules() {
    let mut b = good();
    let csv = csv_mut(&mut b);
    csv["spec"]["displayName"] = json!("");
    csv["spec"]["maintainers"] =
        json!([{"name": "Ann", "email": "not-an-address"}, {"name": "Bob"}]);
    csv["spec"]["links"] = json!([{"name": "Docs", "url": "ftp://x"}]);
    csv["spec"]["keywords"] = json!([""]);
    csv["spec"]["icon"] = json!([{"base64data": "", "mediatype": "image/bmp"}]);
    csv["spec"]["minKubeVersion"] = json!("latest");
    csv["metadata"]["annotations"]["capabilities"] = json!("Magic");
    csv["metadata"]["annotations"]["categories"] = json!("Storage, Gardening");
    expect(&b, Level::Error, "csv", CSV, "spec.displayName");
    for field in [
        "spec.maintainers[0].email",
        "spec.maintainers[1]",
        "spec.links[0].url",
        "spec.keywords[0]",
        "spec.icon[0].base64data",
        "spec.icon[0].mediatype",
        "spec.minKubeVersion",
        "metadata.annotations.capabilities",
        "metadata.annotations.categories",
    ] {
        expect(&b, Level::Error, "operatorhub", CSV, field);
    }
    let csv = csv_mut(&mut b);
    csv["spec"]["icon"] = json!([]);
    csv["spec"]["minKubeVersion"] = json!(null);
    expect(&b, Level::Warning, "operatorhub", CSV, "spec.icon");
    // operator-framework's default CSV check warns of a missing minKubeVersion, suite or not.
    expect(&b, Level::Warning, "csv", CSV, "spec.minKubeVersion");
    assert!(validate(&b, &Options::default())
        .iter()
        .any(|f| f.check == "csv" && f.field == "spec.minKubeVersion"));
    // Only with the suite selected.
    assert!(validate(&b, &Options::default())
        .iter()
        .all(|f| f.check != "operatorhub"));
}

#[test]
fn good_practice_rules() {
    let mut b = good();
    let csv = csv_mut(&mut b);
    let c = &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
        ["containers"][0];
    c.as_object_mut().expect("c").remove("resources");
    csv["spec"]["customresourcedefinitions"]["owned"][0]["description"] = json!("");
    b.annotations.as_mut().expect("a")["annotations"]
        ["operators.operatorframework.io.bundle.channels.v1"] = json!("alpha,nightly");
    expect(
        &b,
        Level::Warning,
        "good-practices",
        CSV,
        "spec.install.spec.deployments[0].spec.template.spec.containers[0].resources.requests",
    );
    expect(
        &b,
        Level::Warning,
        "good-practices",
        CSV,
        "spec.customresourcedefinitions.owned[0].description",
    );
    let f = expect(
        &b,
        Level::Warning,
        "good-practices",
        "metadata/annotations.yaml",
        "annotations.operators.operatorframework.io.bundle.channels.v1",
    );
    assert!(f.message.contains("nightly"), "{f}");
    assert!(errors(&b).is_empty(), "warnings only: {:?}", errors(&b));
}

#[test]
fn removed_apis_warn_and_fail_from_the_target_version_on() {
    let mut b = good();
    let mut old = crd("plants.example.test", "Garden", "gardens");
    old["apiVersion"] = json!("apiextensions.k8s.io/v1beta1");
    let m = b
        .manifests
        .iter_mut()
        .find(|m| m.object["kind"] == "CustomResourceDefinition")
        .expect("crd");
    let file = m.file.clone();
    m.object = old;
    b.manifests.push(Manifest {
        file: "manifests/pdb.yaml".into(),
        object: json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}}),
    });
    // minKubeVersion 1.20: both still served there.
    expect(
        &b,
        Level::Warning,
        "alpha-deprecated-apis",
        &file,
        "apiVersion",
    );
    expect(
        &b,
        Level::Warning,
        "alpha-deprecated-apis",
        "manifests/pdb.yaml",
        "apiVersion",
    );
    let mut o = all();
    o.k8s_version = Some((1, 22));
    let f = validate(&b, &o);
    let level = |file: &str| {
        f.iter()
            .find(|x| x.check == "alpha-deprecated-apis" && x.file == file)
            .map(|x| x.level)
    };
    assert_eq!(level(&file), Some(Level::Error));
    assert_eq!(level("manifests/pdb.yaml"), Some(Level::Warning));
}

#[test]
fn selectors_are_operator_sdks() {
    let mut o = Options::default();
    o.select("name=good-practices").expect("known");
    assert!(o.good_practices && !o.operatorhub);
    let e = o.select("suite=everything").expect_err("unknown");
    assert!(e.contains("suite=operatorframework"), "{e}");
}

/// operator-framework's default set refuses these (operator-registry's supported kinds, the
/// CSV validator's name, replaces, displayName and minKubeVersion rules): each is an error
/// without any optional suite.
#[test]
fn what_operator_framework_refuses_by_default_is_an_error() {
    let default_errors = |b: &Bundle| -> Vec<(String, String)> {
        validate(b, &Options::default())
            .into_iter()
            .filter(|f| f.level == Level::Error)
            .map(|f| (f.file, f.field))
            .collect()
    };
    // Kinds OLM does not install from a bundle (what `--webhooks` once shipped).
    for (kind, api) in [
        ("Issuer", "cert-manager.io/v1"),
        (
            "ValidatingWebhookConfiguration",
            "admissionregistration.k8s.io/v1",
        ),
        ("Deployment", "apps/v1"),
    ] {
        let mut b = good();
        let file = format!("manifests/x_{}.yaml", kind.to_lowercase());
        b.manifests.push(Manifest {
            file: file.clone(),
            object: json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}),
        });
        assert_eq!(default_errors(&b), [(file, "kind".to_string())], "{kind}");
    }
    // Kinds it does install pass.
    for kind in [
        "ConfigMap",
        "Secret",
        "ServiceMonitor",
        "PodDisruptionBudget",
    ] {
        let mut b = good();
        b.manifests.push(Manifest {
            file: "manifests/ok.yaml".into(),
            object: json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "ok"}}),
        });
        assert!(default_errors(&b).is_empty(), "{kind}");
    }
    let csv_error = |edit: &dyn Fn(&mut Value), field: &str| {
        let mut b = good();
        edit(csv_mut(&mut b));
        assert_eq!(
            default_errors(&b),
            [(CSV.to_string(), field.to_string())],
            "{field}"
        );
    };
    // A name longer than a label value (OLM labels objects with it), or not a DNS subdomain.
    let long = format!("{}.v0.2.0", "g".repeat(60));
    csv_error(
        &|c| c["metadata"]["name"] = long.clone().into(),
        "metadata.name",
    );
    csv_error(
        &|c| c["metadata"]["name"] = "Garden_Operator.v0.2.0".into(),
        "metadata.name",
    );
    csv_error(
        &|c| c["spec"]["replaces"] = "garden operator.v0.1.0".into(),
        "spec.replaces",
    );
    csv_error(
        &|c| {
            c["spec"]
                .as_object_mut()
                .expect("spec")
                .remove("displayName");
        },
        "spec.displayName",
    );
    // blang/semver: no leading v.
    csv_error(
        &|c| c["spec"]["minKubeVersion"] = "v1.20.0".into(),
        "spec.minKubeVersion",
    );
}

/// What operator-framework lets pass (operatorhubv2, the CRD and example checks) passes here:
/// no listing fields beyond the provider, the current category list, a CRD version without a
/// schema, an example without a name, and operator-sdk's selectors.
#[test]
fn what_operator_framework_lets_pass_is_no_error() {
    let mut b = good();
    let csv = csv_mut(&mut b);
    for f in ["maintainers", "links", "keywords"] {
        csv["spec"][f] = json!([]);
    }
    csv["spec"]["description"] = json!("");
    csv["metadata"]["annotations"]["categories"] = json!("Observability,Storage");
    csv["metadata"]["annotations"]["alm-examples"] = json!(json!([
        {"apiVersion": "plants.example.test/v1alpha1", "kind": "Garden", "metadata": {}, "spec": {}}
    ])
    .to_string());
    let crd = b
        .manifests
        .iter_mut()
        .find(|m| m.object["kind"] == "CustomResourceDefinition")
        .expect("crd");
    crd.object["spec"]["versions"][0]["schema"] = json!(null);
    let errors = errors(&b);
    assert!(errors.is_empty(), "{errors:#?}");
    // A category no longer on the list is refused; a custom list replaces the standard one.
    csv_mut(&mut b)["metadata"]["annotations"]["categories"] = json!("Drivers and plugins");
    expect(
        &b,
        Level::Error,
        "operatorhub",
        CSV,
        "metadata.annotations.categories",
    );
    let mut custom = all();
    custom.categories = Some(vec!["Drivers and plugins".into()]);
    assert!(validate(&b, &custom)
        .iter()
        .all(|f| f.level != Level::Error));
    for s in ["name=operatorhubv2", "name=capabilities", "name=categories"] {
        let mut o = Options::default();
        o.select(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert!(o.operatorhub, "{s}");
    }
}
