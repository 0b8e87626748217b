//! The default checks (operator-framework's bundle, CSV, CRD and object validators).
use std::collections::BTreeMap;

use serde_json::Value;

use super::{semver, str_of, At, Bundle, Finding};

const INSTALL_MODE_TYPES: [&str; 4] = [
    "OwnNamespace",
    "SingleNamespace",
    "MultiNamespace",
    "AllNamespaces",
];

/// The kinds OLM installs from a registry+v1 bundle (operator-registry's supported resources);
/// anything else makes the bundle fail to load.
const SUPPORTED_KINDS: [&str; 16] = [
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ServiceAccount",
    "Service",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
];

pub fn run(b: &Bundle, out: &mut Vec<Finding>) {
    annotations(b, out);
    objects(b, out);
    crds(b, out);
    let csvs: Vec<_> = b
        .manifests
        .iter()
        .filter(|m| m.object["kind"] == "ClusterServiceVersion")
        .collect();
    let mut at = At {
        out,
        check: "bundle",
        file: "manifests/",
    };
    match csvs.len() {
        0 => at.error("", "the bundle has no ClusterServiceVersion"),
        1 => {}
        n => at.error(
            "",
            format!("the bundle has {n} ClusterServiceVersions; it must have one"),
        ),
    }
    if let Some(csv) = csvs.first() {
        csv_fields(&csv.file, &csv.object, out);
        ownership(b, &csv.file, &csv.object, out);
        examples(&csv.file, &csv.object, out);
    }
}

fn annotations(b: &Bundle, out: &mut Vec<Finding>) {
    let mut at = At {
        out,
        check: "bundle",
        file: "metadata/annotations.yaml",
    };
    let Some(a) = &b.annotations else {
        at.error("", "missing: a bundle needs metadata/annotations.yaml");
        return;
    };
    let a = &a["annotations"];
    let key = |k: &str| format!("operators.operatorframework.io.bundle.{k}");
    if a[key("mediatype.v1")] != "registry+v1" {
        at.error(
            &format!("annotations.{}", key("mediatype.v1")),
            "must be registry+v1",
        );
    }
    if str_of(a, &[&key("package.v1")]).is_empty() {
        at.error(
            &format!("annotations.{}", key("package.v1")),
            "the package name is required",
        );
    }
    let channels: Vec<&str> = str_of(a, &[&key("channels.v1")])
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    if channels.is_empty() {
        at.error(
            &format!("annotations.{}", key("channels.v1")),
            "at least one channel is required",
        );
    }
    let default = str_of(a, &[&key("channel.default.v1")]);
    if !default.is_empty() && !channels.contains(&default) {
        at.error(
            &format!("annotations.{}", key("channel.default.v1")),
            format!("the default channel {default:?} is not one of the channels {channels:?}"),
        );
    }
}

/// Every manifest is a Kubernetes object with a name.
fn objects(b: &Bundle, out: &mut Vec<Finding>) {
    for m in &b.manifests {
        let mut at = At {
            out: &mut *out,
            check: "object",
            file: &m.file,
        };
        for f in ["apiVersion", "kind"] {
            if str_of(&m.object, &[f]).is_empty() {
                at.error(f, "is required");
            }
        }
        let kind = str_of(&m.object, &["kind"]);
        if !kind.is_empty() && !SUPPORTED_KINDS.contains(&kind) {
            at.error(
                "kind",
                format!(
                    "OLM does not install a {kind} from a bundle: remove it (webhooks belong in \
                     the CSV's webhookdefinitions); the kinds it installs are {SUPPORTED_KINDS:?}"
                ),
            );
        }
        if str_of(&m.object, &["metadata", "name"]).is_empty() {
            at.error("metadata.name", "is required");
        }
    }
}

fn crds(b: &Bundle, out: &mut Vec<Finding>) {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for m in b.crds() {
        let o = &m.object;
        let name = str_of(o, &["metadata", "name"]);
        let mut at = At {
            out: &mut *out,
            check: "crd",
            file: &m.file,
        };
        if let Some(first) = seen.get(name) {
            at.error(
                "metadata.name",
                format!("duplicate CRD {name}: also in {first}"),
            );
        } else {
            seen.insert(name.to_string(), m.file.clone());
        }
        let plural = str_of(o, &["spec", "names", "plural"]);
        let group = str_of(o, &["spec", "group"]);
        if name != format!("{plural}.{group}") {
            at.error(
                "metadata.name",
                format!("must be spec.names.plural.spec.group ({plural}.{group}), not {name}"),
            );
        }
        if str_of(o, &["spec", "names", "kind"]).is_empty() {
            at.error("spec.names.kind", "is required");
        }
        let versions = o["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if versions.is_empty() && o["apiVersion"] == "apiextensions.k8s.io/v1" {
            at.error("spec.versions", "at least one version is required");
        }
        let storage = versions.iter().filter(|v| v["storage"] == true).count();
        if !versions.is_empty() && storage != 1 {
            at.error(
                "spec.versions",
                format!("exactly one version must be the storage version, found {storage}"),
            );
        }
        // A v1beta1 CRD prunes nothing unless it says so, and the API server (which stores it as
        // v1) refuses preserveUnknownFields: true: operator-framework converts it and fails.
        if o["apiVersion"] == "apiextensions.k8s.io/v1beta1"
            && o["spec"]["preserveUnknownFields"] != false
        {
            at.error(
                "spec.preserveUnknownFields",
                "true (v1beta1's default) cannot be installed: set it to false, with \
                 x-kubernetes-preserve-unknown-fields in the schema where fields must be kept",
            );
        }
        for (i, v) in versions.iter().enumerate() {
            if o["apiVersion"] == "apiextensions.k8s.io/v1"
                && v["schema"]["openAPIV3Schema"].is_null()
            {
                // operator-framework filters this out: the API server accepts it too.
                at.warn(
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "none: the kind is not validated, and the scorecard cannot check it",
                );
            }
        }
    }
}

fn csv_fields(file: &str, csv: &Value, out: &mut Vec<Finding>) {
    let mut at = At {
        out,
        check: "csv",
        file,
    };
    let name = str_of(csv, &["metadata", "name"]);
    let spec = &csv["spec"];
    // OLM labels what it installs with the CSV's name: a DNS subdomain within a label's 63.
    if let Some(why) = bad_csv_name(name) {
        at.error("metadata.name", format!("{name:?} {why}"));
    }
    if let Some(r) = spec["replaces"].as_str() {
        if let Some(why) = bad_csv_name(r) {
            at.error("spec.replaces", format!("{r:?} {why}"));
        }
    }
    if str_of(spec, &["displayName"]).trim().is_empty() {
        at.error("spec.displayName", "is required");
    }
    match spec["minKubeVersion"].as_str() {
        // operator-framework's CSV validator warns by default, not only for OperatorHub.
        None | Some("") => at.warn(
            "spec.minKubeVersion",
            "not set: OLM installs on any Kubernetes version",
        ),
        Some(v) if semver(v).is_none() || v.starts_with('v') => at.error(
            "spec.minKubeVersion",
            format!("{v:?} is not a semantic version (e.g. 1.25.0, no leading v)"),
        ),
        Some(_) => {}
    }
    let version = str_of(spec, &["version"]);
    if version.is_empty() {
        at.error("spec.version", "is required");
    } else if semver(version).is_none() || version.starts_with('v') {
        at.error(
            "spec.version",
            format!("{version:?} is not a semantic version (e.g. 0.1.0)"),
        );
    }
    if let Some(r) = spec["replaces"].as_str() {
        if r == name {
            at.error("spec.replaces", "a CSV cannot replace itself");
        }
    }
    match spec["installModes"].as_array() {
        None => at.error("spec.installModes", "is required"),
        Some(modes) => {
            for (i, m) in modes.iter().enumerate() {
                let t = str_of(m, &["type"]);
                if !INSTALL_MODE_TYPES.contains(&t) {
                    at.error(
                        &format!("spec.installModes[{i}].type"),
                        format!("{t:?} is not one of {INSTALL_MODE_TYPES:?}"),
                    );
                }
                if !m["supported"].is_boolean() {
                    at.error(
                        &format!("spec.installModes[{i}].supported"),
                        "must be true or false",
                    );
                }
            }
            if !modes.iter().any(|m| m["supported"] == true) {
                at.error("spec.installModes", "no install mode is supported");
            }
            // A conversion webhook serves every namespace's objects of its CRDs: OLM installs
            // it only with the operator watching all namespaces.
            let converts = spec["webhookdefinitions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|w| {
                    w["conversionCRDs"]
                        .as_array()
                        .is_some_and(|c| !c.is_empty())
                });
            let others: Vec<&str> = modes
                .iter()
                .filter(|m| m["supported"] == true && m["type"] != "AllNamespaces")
                .map(|m| str_of(m, &["type"]))
                .collect();
            if converts && !others.is_empty() {
                at.error(
                    "spec.installModes",
                    format!(
                        "a webhook with conversionCRDs needs AllNamespaces as the only supported \
                         install mode, but {others:?} are supported too"
                    ),
                );
            }
        }
    }
    let install = &spec["install"];
    if install["strategy"] != "deployment" {
        at.error(
            "spec.install.strategy",
            format!("must be deployment, not {}", install["strategy"]),
        );
    }
    let deployments = install["spec"]["deployments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if deployments.is_empty() {
        at.error(
            "spec.install.spec.deployments",
            "at least one deployment is required",
        );
    }
    let accounts: Vec<&str> = ["permissions", "clusterPermissions"]
        .iter()
        .flat_map(|p| install["spec"][*p].as_array().into_iter().flatten())
        .map(|p| str_of(p, &["serviceAccountName"]))
        .collect();
    for p in ["permissions", "clusterPermissions"] {
        for (i, perm) in install["spec"][p]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if str_of(perm, &["serviceAccountName"]).is_empty() {
                at.error(
                    &format!("spec.install.spec.{p}[{i}].serviceAccountName"),
                    "is required",
                );
            }
        }
    }
    for (i, d) in deployments.iter().enumerate() {
        if str_of(d, &["name"]).is_empty() {
            at.error(
                &format!("spec.install.spec.deployments[{i}].name"),
                "is required",
            );
        }
        let sa = str_of(d, &["spec", "template", "spec", "serviceAccountName"]);
        if !sa.is_empty() && !accounts.contains(&sa) {
            at.warn(
                &format!(
                    "spec.install.spec.deployments[{i}].spec.template.spec.serviceAccountName"
                ),
                format!("{sa} has no permissions in the CSV: OLM creates it without any role"),
            );
        }
    }
    let owned = spec["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, o) in owned.iter().enumerate() {
        for f in ["name", "version", "kind"] {
            if str_of(o, &[f]).is_empty() {
                at.error(
                    &format!("spec.customresourcedefinitions.owned[{i}].{f}"),
                    "is required",
                );
            }
        }
    }
}

/// Why `name` cannot name a CSV, if it cannot.
fn bad_csv_name(name: &str) -> Option<&'static str> {
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 63 {
        Some("is longer than 63 characters (a label value)")
    } else if !name.split('.').all(label) {
        Some("is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')")
    } else {
        None
    }
}

/// Each owned CRD is in the bundle, serves the version the CSV names, and each CRD of the
/// bundle is owned.
fn ownership(b: &Bundle, file: &str, csv: &Value, out: &mut Vec<Finding>) {
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, o) in owned.iter().enumerate() {
        let name = str_of(o, &["name"]);
        let version = str_of(o, &["version"]);
        let crd = b
            .crds()
            .find(|m| str_of(&m.object, &["metadata", "name"]) == name);
        let mut at = At {
            out: &mut *out,
            check: "bundle",
            file,
        };
        let field = format!("spec.customresourcedefinitions.owned[{i}]");
        match crd {
            None => at.error(
                &field,
                format!("owned CRD {name} is not in the bundle: add its manifest or remove it from the CSV"),
            ),
            Some(m) => {
                let served = m.object["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v["name"] == version);
                if !served {
                    at.error(
                        &format!("{field}.version"),
                        format!("{name} has no version {version} ({})", m.file),
                    );
                }
                if m.object["spec"]["names"]["kind"] != o["kind"] {
                    at.error(
                        &format!("{field}.kind"),
                        format!(
                            "{} but the CRD in {} serves kind {}",
                            o["kind"], m.file, m.object["spec"]["names"]["kind"]
                        ),
                    );
                }
            }
        }
    }
    for m in b.crds() {
        let name = str_of(&m.object, &["metadata", "name"]);
        // operator-framework matches by group, version and kind: an owned entry naming the CRD
        // with a version or kind it does not have leaves the CRD unowned.
        let versions: Vec<&str> = m.object["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| str_of(v, &["name"]))
            .chain(m.object["spec"]["version"].as_str())
            .collect();
        let owns = |o: &Value| {
            o["name"] == name
                && o["kind"] == m.object["spec"]["names"]["kind"]
                && versions.contains(&str_of(o, &["version"]))
        };
        if !owned.iter().any(owns) && !required(csv, name) {
            out.push(Finding {
                level: super::Level::Error,
                check: "bundle",
                file: m.file.clone(),
                field: "metadata.name".into(),
                message: format!(
                    "CRD {name} is in the bundle but not in the CSV's spec.customresourcedefinitions.owned ({file})"
                ),
            });
        }
    }
}

fn required(csv: &Value, name: &str) -> bool {
    csv["spec"]["customresourcedefinitions"]["required"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["name"] == name)
}

/// `alm-examples` is a JSON list of objects of owned (or required) kinds.
fn examples(file: &str, csv: &Value, out: &mut Vec<Finding>) {
    let mut at = At {
        out,
        check: "csv",
        file,
    };
    let field = "metadata.annotations.alm-examples";
    let Some(text) = csv["metadata"]["annotations"]["alm-examples"].as_str() else {
        at.warn(
            field,
            "none: consoles offer no template for the CSV's kinds",
        );
        return;
    };
    let list: Vec<Value> = match serde_json::from_str(text) {
        Ok(l) => l,
        Err(e) => {
            at.error(field, format!("not a JSON list of objects: {e}"));
            return;
        }
    };
    let provided: Vec<(String, String)> = ["owned", "required"]
        .iter()
        .flat_map(|k| {
            csv["spec"]["customresourcedefinitions"][*k]
                .as_array()
                .into_iter()
                .flatten()
        })
        .map(|o| {
            let group = str_of(o, &["name"])
                .split_once('.')
                .map(|(_, g)| g)
                .unwrap_or("");
            (
                format!("{group}/{}", str_of(o, &["version"])),
                str_of(o, &["kind"]).to_string(),
            )
        })
        .collect();
    for (i, ex) in list.iter().enumerate() {
        let api = str_of(ex, &["apiVersion"]);
        let kind = str_of(ex, &["kind"]);
        if api.is_empty() || kind.is_empty() {
            at.error(&format!("{field}[{i}]"), "apiVersion and kind are required");
            continue;
        }
        if !provided.iter().any(|(a, k)| a == api && k == kind) {
            at.error(
                &format!("{field}[{i}]"),
                format!("the example's {api} {kind} is not a kind the CSV owns or requires"),
            );
        }
        if str_of(ex, &["metadata", "name"]).is_empty() {
            at.warn(
                &format!("{field}[{i}].metadata.name"),
                "none: a console creating this example asks for one",
            );
        }
    }
    for (api, kind) in provided.iter().take(owned_count(csv)) {
        if !list
            .iter()
            .any(|e| e["kind"] == kind.as_str() && e["apiVersion"] == api.as_str())
        {
            at.warn(
                field,
                format!("no example of the owned {kind} {api}: consoles offer no template"),
            );
        }
    }
}

fn owned_count(csv: &Value) -> usize {
    csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .map_or(0, Vec::len)
}
