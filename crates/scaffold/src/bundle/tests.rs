use serde_json::{json, Value};

use super::*;

/// A CRD as bosun derives one: a spec field, a status with conditions.
pub(crate) fn crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "description": "A garden. It grows.",
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "replicaCount": {"type": "integer", "description": "How many pods."}
                        }},
                        "status": {"type": "object", "properties": {
                            "conditions": {"type": "array", "description": "Ready and friends."}
                        }}
                    }
                }}
            }]
        }
    })
}

pub(crate) fn input() -> BundleInput {
    BundleInput {
        package: "garden-operator".into(),
        version: "0.2.0".into(),
        channels: vec!["alpha".into()],
        image: "example.test/garden:0.2.0".into(),
        min_kube_version: "1.20.0".into(),
        project_layout: "helm.sdk.operatorframework.io/v1".into(),
        builder: "bosun-v0.1.0".into(),
        crds: vec![crd("plants.example.test", "Garden", "gardens")],
        deployment: json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "garden", "namespace": "x", "labels": {"app": "garden"}},
            "spec": {
                "selector": {"matchLabels": {"app": "garden"}},
                "template": {
                    "metadata": {"labels": {"app": "garden"}},
                    "spec": {
                        "serviceAccountName": "garden",
                        "containers": [{"name": "op", "image": "example.test/garden:0.2.0",
                            "resources": {"requests": {"cpu": "10m"}}}]
                    }
                }
            }
        }),
        cluster_rules: vec![
            json!({"apiGroups": ["plants.example.test"], "resources": ["gardens"], "verbs": ["get", "list", "watch"]}),
        ],
        namespaced_rules: vec![
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}),
        ],
        extra: vec![json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "garden-metrics", "namespace": "x"},
            "spec": {"ports": [{"port": 8080}]}
        })],
        samples: vec![json!({
            "apiVersion": "plants.example.test/v1alpha1", "kind": "Garden",
            "metadata": {"name": "garden-sample", "namespace": "default"},
            "spec": {"replicaCount": 1}
        })],
        ..Default::default()
    }
}

/// The listing fields OperatorHub needs, as a person writes them in the base CSV.
pub(crate) fn base() -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "garden-operator.v0.0.0", "annotations": {
            "categories": "Storage", "alm-examples": "[]", "createdAt": "1999-01-01"}},
        "spec": {
            "displayName": "Garden Operator",
            "description": "Grows gardens.",
            "provider": {"name": "Garden Co"},
            "maintainers": [{"name": "Ann Gardener", "email": "ann@garden.test"}],
            "links": [{"name": "Docs", "url": "https://garden.test/docs"}],
            "keywords": ["garden"],
            "icon": [{"base64data": "PHN2Zy8+", "mediatype": "image/svg+xml"}],
            "customresourcedefinitions": {"owned": [{
                "name": "gardens.plants.example.test", "version": "v1alpha1", "kind": "Garden",
                "displayName": "Garden (hand-written)",
                "specDescriptors": [{"path": "replicaCount", "displayName": "Pods", "x-descriptors": ["urn:alm:descriptor:com.tectonic.ui:podCount"]}]
            }]}
        }
    })
}

fn csv_of(tree: &Tree) -> Value {
    let text = &tree.files["bundle/manifests/garden-operator.clusterserviceversion.yaml"];
    serde_yaml::from_slice(text).expect("csv yaml")
}

#[test]
fn the_bundle_has_operator_sdks_paths() {
    let tree = generate(&input()).expect("bundle");
    let paths: Vec<&str> = tree.files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "bundle.Dockerfile",
            "bundle/manifests/garden-metrics_v1_service.yaml",
            "bundle/manifests/garden-operator.clusterserviceversion.yaml",
            "bundle/manifests/plants.example.test_gardens.yaml",
            "bundle/metadata/annotations.yaml",
            "bundle/tests/scorecard/config.yaml",
        ]
    );
    let svc: Value =
        serde_yaml::from_slice(&tree.files["bundle/manifests/garden-metrics_v1_service.yaml"])
            .expect("svc");
    assert!(
        svc["metadata"].get("namespace").is_none(),
        "OLM places it: {svc}"
    );
}

#[test]
fn same_input_same_bytes_and_no_clock() {
    let a = generate(&input()).expect("a");
    assert_eq!(a, generate(&input()).expect("b"));
    assert!(csv_of(&a)["metadata"]["annotations"]
        .get("createdAt")
        .is_none());
    let mut i = input();
    i.created_at = Some("2026-01-02T03:04:05Z".into());
    let c = generate(&i).expect("c");
    assert_eq!(
        csv_of(&c)["metadata"]["annotations"]["createdAt"],
        "2026-01-02T03:04:05Z"
    );
    assert_eq!(c, generate(&i).expect("d"));
}

#[test]
fn the_csv_installs_what_bosun_derives() {
    let i = input();
    let csv = csv_of(&generate(&i).expect("bundle"));
    let install = &csv["spec"]["install"];
    assert_eq!(install["strategy"], "deployment");
    let s = &install["spec"];
    assert_eq!(s["clusterPermissions"][0]["serviceAccountName"], "garden");
    assert_eq!(s["clusterPermissions"][0]["rules"], json!(i.cluster_rules));
    assert_eq!(s["permissions"][0]["rules"], json!(i.namespaced_rules));
    let d = &s["deployments"][0];
    assert_eq!(d["name"], "garden");
    let env = &d["spec"]["template"]["spec"]["containers"][0]["env"][0];
    assert_eq!(env["name"], "WATCH_NAMESPACE");
    assert_eq!(
        env["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['olm.targetNamespaces']"
    );
    assert_eq!(csv["metadata"]["name"], "garden-operator.v0.2.0");
    assert_eq!(csv["spec"]["version"], "0.2.0");
    assert_eq!(csv["spec"]["minKubeVersion"], "1.20.0");
    assert_eq!(
        csv["spec"]["relatedImages"][0]["image"],
        "example.test/garden:0.2.0"
    );
    let examples: Vec<Value> = serde_json::from_str(
        csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .expect("s"),
    )
    .expect("json");
    assert_eq!(examples[0]["metadata"], json!({"name": "garden-sample"}));
}

#[test]
fn owned_crds_carry_descriptions_and_descriptors_from_the_schema() {
    let csv = csv_of(&generate(&input()).expect("bundle"));
    let owned = &csv["spec"]["customresourcedefinitions"]["owned"][0];
    assert_eq!(owned["name"], "gardens.plants.example.test");
    assert_eq!(owned["version"], "v1alpha1");
    assert_eq!(owned["displayName"], "Garden");
    assert_eq!(owned["description"], "A garden.");
    assert_eq!(
        owned["specDescriptors"],
        json!([{"path": "replicaCount", "displayName": "Replica Count", "description": "How many pods."}])
    );
    assert_eq!(
        owned["statusDescriptors"][0]["x-descriptors"],
        json!(["urn:alm:descriptor:io.kubernetes.conditions"])
    );
}

/// operator-sdk v1.42.2's `bundle validate --select-optional suite=operatorframework` panics on
/// `spec.icon: []` (its icon check indexes the first element), so a CSV made without an icon in
/// its base must leave the field out, as operator-sdk's own generator does for a base without
/// one (`peer_cli_bundle_validate` records the panic).
#[test]
fn no_icon_in_the_base_no_icon_field() {
    let csv = csv_of(&generate(&input()).expect("bundle"));
    assert!(
        csv["spec"].get("icon").is_none(),
        "an empty icon list crashes operator-sdk's validator: {}",
        csv["spec"]
    );
    let mut i = input();
    i.base = Some(base());
    let csv = csv_of(&generate(&i).expect("bundle"));
    assert_eq!(csv["spec"]["icon"][0]["mediatype"], "image/svg+xml");
}

#[test]
fn a_base_csv_supplies_what_a_person_writes() {
    let mut i = input();
    i.base = Some(base());
    let csv = csv_of(&generate(&i).expect("bundle"));
    assert_eq!(csv["spec"]["displayName"], "Garden Operator");
    assert_eq!(csv["spec"]["provider"]["name"], "Garden Co");
    assert_eq!(csv["metadata"]["annotations"]["categories"], "Storage");
    // Generated, whatever the base says.
    assert_eq!(csv["metadata"]["name"], "garden-operator.v0.2.0");
    assert_ne!(csv["metadata"]["annotations"]["alm-examples"], "[]");
    assert!(csv["metadata"]["annotations"].get("createdAt").is_none());
    let owned = &csv["spec"]["customresourcedefinitions"]["owned"][0];
    assert_eq!(owned["displayName"], "Garden (hand-written)");
    assert_eq!(owned["specDescriptors"][0]["displayName"], "Pods");
    // What the base does not say stays generated.
    assert_eq!(owned["description"], "A garden.");
}

/// operator-sdk starts from the base and replaces only what it generates: an upgrade graph, a
/// dependency, operand images and OLM's other fields written in the base survive.
#[test]
fn a_base_csvs_upgrade_graph_dependencies_and_images_are_kept() {
    let mut i = input();
    let mut b = base();
    b["spec"]["replaces"] = json!("garden-operator.v0.1.0");
    b["spec"]["skips"] = json!(["garden-operator.v0.1.1"]);
    b["spec"]["customresourcedefinitions"]["required"] = json!([{
        "name": "soils.earth.example.test", "version": "v1", "kind": "Soil",
        "displayName": "Soil", "description": "The soil a garden grows in."
    }]);
    b["spec"]["relatedImages"] =
        json!([{"name": "sprinkler", "image": "example.test/sprinkler@sha256:00"}]);
    b["spec"]["nativeAPIs"] = json!([{"group": "", "version": "v1", "kind": "Pod"}]);
    b["spec"]["labels"] = json!({"garden": "yes"});
    b["spec"]["cleanup"] = json!({"enabled": true});
    i.base = Some(b);
    let csv = csv_of(&generate(&i).expect("bundle"));
    let spec = &csv["spec"];
    assert_eq!(spec["replaces"], "garden-operator.v0.1.0");
    assert_eq!(spec["skips"][0], "garden-operator.v0.1.1");
    assert_eq!(
        spec["customresourcedefinitions"]["required"][0]["name"],
        "soils.earth.example.test"
    );
    assert_eq!(
        spec["customresourcedefinitions"]["owned"][0]["name"], "gardens.plants.example.test",
        "the owned CRDs are still generated"
    );
    let images: Vec<&str> = spec["relatedImages"]
        .as_array()
        .expect("relatedImages")
        .iter()
        .filter_map(|r| r["image"].as_str())
        .collect();
    assert!(
        images.contains(&"example.test/sprinkler@sha256:00"),
        "{images:?}"
    );
    assert!(images.contains(&i.image.as_str()), "{images:?}");
    assert_eq!(spec["nativeAPIs"][0]["kind"], "Pod");
    assert_eq!(spec["labels"]["garden"], "yes");
    assert_eq!(spec["cleanup"]["enabled"], true);
    assert!(
        spec["install"]["spec"]["deployments"].is_array(),
        "generated"
    );
    assert_eq!(spec["version"], "0.2.0", "generated");
    // The --replaces flag names this release's predecessor: it wins over the base's.
    i.replaces = Some("garden-operator.v0.1.9".into());
    let csv = csv_of(&generate(&i).expect("bundle"));
    assert_eq!(csv["spec"]["replaces"], "garden-operator.v0.1.9");
}

#[test]
fn a_base_of_another_kind_is_refused() {
    let mut i = input();
    i.base = Some(json!({"kind": "Deployment"}));
    let e = generate(&i).expect_err("refused").to_string();
    assert!(
        e.contains("config/manifests/bases/garden-operator.clusterserviceversion.yaml"),
        "{e}"
    );
}

#[test]
fn metadata_and_dockerfile_agree() {
    let mut i = input();
    i.channels = vec!["stable".into(), "fast".into()];
    i.default_channel = Some("fast".into());
    let tree = generate(&i).expect("bundle");
    let ann = String::from_utf8(tree.files["bundle/metadata/annotations.yaml"].clone()).expect("u");
    let docker = String::from_utf8(tree.files["bundle.Dockerfile"].clone()).expect("u");
    let parsed: Value = serde_yaml::from_str(&ann).expect("yaml");
    let a = parsed["annotations"].as_object().expect("map");
    assert_eq!(
        a["operators.operatorframework.io.bundle.channels.v1"],
        "stable,fast"
    );
    assert_eq!(
        a["operators.operatorframework.io.bundle.channel.default.v1"],
        "fast"
    );
    for (k, v) in a {
        let line = format!("LABEL {k}={}", v.as_str().expect("s"));
        assert!(
            docker.contains(&line),
            "{line} missing from bundle.Dockerfile"
        );
    }
    let sc: Value =
        serde_yaml::from_slice(&tree.files["bundle/tests/scorecard/config.yaml"]).expect("yaml");
    assert_eq!(sc["stages"][0]["tests"].as_array().expect("tests").len(), 6);
}

#[test]
fn owned_resources_are_what_the_operator_may_create() {
    let mut i = input();
    i.operator_rules.insert(
        "gardens.plants.example.test".into(),
        vec![
            json!({"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": ["get", "create"]}),
            // Read only: not something the operator makes.
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["services"], "verbs": ["create"]}),
        ],
    );
    let csv = csv_of(&generate(&i).expect("bundle"));
    let kinds: Vec<&str> = csv["spec"]["customresourcedefinitions"]["owned"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["Service", "Deployment", "StatefulSet"]);
}

/// An operator whose resources live outside Kubernetes (VmGroup's VMs) creates no kind: its
/// owned CRD lists what it reads, so the scorecard's `olm-crds-have-resources` holds.
#[test]
fn an_operator_that_creates_nothing_lists_what_it_reads() {
    let mut i = input();
    i.operator_rules.insert(
        "gardens.plants.example.test".into(),
        vec![
            json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["vc-creds"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}),
        ],
    );
    let csv = csv_of(&generate(&i).expect("bundle"));
    let kinds: Vec<&str> = csv["spec"]["customresourcedefinitions"]["owned"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["Secret"]);
}

#[test]
fn an_open_status_is_described_by_its_printer_columns_and_an_open_spec_by_the_samples() {
    let mut i = input();
    let v = &mut i.crds[0]["spec"]["versions"][0];
    v["schema"]["openAPIV3Schema"]["properties"]["status"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    v["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    v["additionalPrinterColumns"] = json!([
        {"name": "Ready", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status", "type": "string"},
        {"name": "Revision", "jsonPath": ".status.deployedRelease.revision", "type": "integer"},
        {"name": "Age", "jsonPath": ".metadata.creationTimestamp", "type": "date"}
    ]);
    let csv = csv_of(&generate(&i).expect("bundle"));
    let owned = &csv["spec"]["customresourcedefinitions"]["owned"][0];
    let status: Vec<&str> = owned["statusDescriptors"]
        .as_array()
        .expect("status")
        .iter()
        .filter_map(|d| d["path"].as_str())
        .collect();
    assert_eq!(status, ["conditions", "deployedRelease"]);
    assert_eq!(
        owned["statusDescriptors"][1]["description"],
        "Shown in the Revision column."
    );
    assert_eq!(owned["specDescriptors"][0]["path"], "replicaCount");
}

/// A CRD serving two versions is owned once per version, the stored one first (as
/// operator-sdk lists it), so an example of the other version is of an owned kind and passes.
#[test]
fn every_served_version_is_owned_and_its_examples_pass() {
    let mut i = input();
    let mut v1 = i.crds[0]["spec"]["versions"][0].clone();
    v1["name"] = json!("v1");
    v1["storage"] = json!(false);
    i.crds[0]["spec"]["versions"]
        .as_array_mut()
        .expect("versions")
        .push(v1);
    i.samples = vec![json!({
        "apiVersion": "plants.example.test/v1", "kind": "Garden",
        "metadata": {"name": "g"}, "spec": {"replicaCount": 1}
    })];
    let tree = generate(&i).expect("bundle");
    let csv = csv_of(&tree);
    let owned: Vec<(&str, &str)> = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .expect("owned")
        .iter()
        .map(|o| {
            (
                o["name"].as_str().expect("name"),
                o["version"].as_str().expect("version"),
            )
        })
        .collect();
    assert_eq!(
        owned,
        [
            ("gardens.plants.example.test", "v1alpha1"),
            ("gardens.plants.example.test", "v1")
        ]
    );
    let dir = tempfile::tempdir().expect("dir");
    let stage = crate::files::Stage::new(dir.path()).expect("stage");
    stage.write(&tree).expect("write");
    stage.commit(&tree).expect("commit");
    let errors: Vec<String> =
        crate::validate::validate_dir(&dir.path().join("bundle"), &Default::default())
            .into_iter()
            .filter(|f| f.level == crate::validate::Level::Error)
            .map(|f| f.to_string())
            .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
