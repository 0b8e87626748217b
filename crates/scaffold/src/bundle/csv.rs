//! The ClusterServiceVersion: generated from the input, then the hand-written base merged in
//! as operator-sdk does — the generator owns what bosun knows (name, version, install strategy
//! and permissions, the owned CRDs, examples); every other field of the base's `spec` is kept
//! as written (display name, icon, install modes, `replaces` and `skips`, required CRDs,
//! `nativeAPIs`, labels, …), the owned CRDs keep the base's descriptions and descriptors, and
//! the base's `relatedImages` are listed beside the generated ones. A `--replaces` flag names
//! this release's predecessor, so it wins over the base's.
use serde_json::{json, Map, Value};

use super::{descriptors, BundleInput};
use crate::Error;

/// The install modes OLM may use: bosun reads `WATCH_NAMESPACE` (set below from OLM's
/// `olm.targetNamespaces`), so it watches one namespace, its own, or all; a comma-separated
/// list works too, but OLM's MultiNamespace mode is being removed, so it is not offered
/// (operator-sdk's default set).
const INSTALL_MODES: [(&str, bool); 4] = [
    ("OwnNamespace", true),
    ("SingleNamespace", true),
    ("MultiNamespace", false),
    ("AllNamespaces", true),
];

/// Fields of `spec` bosun generates: a base cannot pin them.
const GENERATED_SPEC_FIELDS: [&str; 4] = [
    "install",
    "version",
    "customresourcedefinitions",
    "relatedImages",
];

pub fn build(input: &BundleInput) -> Result<Value, Error> {
    let mut csv = generated(input)?;
    if let Some(base) = &input.base {
        merge_base(&mut csv, base, input)?;
    }
    Ok(csv)
}

fn generated(input: &BundleInput) -> Result<Value, Error> {
    let sa = input.deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let examples: Vec<Value> = input.samples.iter().map(strip_sample).collect();
    let examples = serde_json::to_string_pretty(&examples).map_err(|e| Error::BadProject {
        path: "alm-examples".into(),
        message: e.to_string(),
    })?;
    let mut annotations = Map::new();
    annotations.insert("alm-examples".into(), examples.into());
    annotations.insert("capabilities".into(), "Basic Install".into());
    annotations.insert("containerImage".into(), input.image.clone().into());
    if let Some(t) = &input.created_at {
        annotations.insert("createdAt".into(), t.clone().into());
    }
    annotations.insert(
        "operators.operatorframework.io/builder".into(),
        input.builder.clone().into(),
    );
    annotations.insert(
        "operators.operatorframework.io/project_layout".into(),
        input.project_layout.clone().into(),
    );
    let mut owned: Vec<Value> = Vec::new();
    for crd in &input.crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        let made = super::resources::from_rules(
            input
                .operator_rules
                .get(name)
                .map(Vec::as_slice)
                .unwrap_or(&[]),
        );
        for mut o in descriptors::owned_versions(crd) {
            if !made.is_empty() {
                o["resources"] = Value::Array(made.clone());
            }
            sample_descriptors(&mut o, &input.samples);
            owned.push(o);
        }
    }
    let mut related = vec![json!({"name": "operator", "image": input.image})];
    for (name, image) in &input.related_images {
        if !related.iter().any(|r| r["image"] == *image) {
            related.push(json!({"name": name, "image": image}));
        }
    }
    let mut spec = json!({
        "apiservicedefinitions": {},
        "customresourcedefinitions": {"owned": owned},
        "description": format!("The {} operator, run by bosun.", display(&input.package)),
        "displayName": display(&input.package),
        "install": {
            "strategy": "deployment",
            "spec": {
                "clusterPermissions": [{"serviceAccountName": sa, "rules": input.cluster_rules}],
                "permissions": [{"serviceAccountName": sa, "rules": input.namespaced_rules}],
                "deployments": [deployment(&input.deployment)],
            }
        },
        "installModes": INSTALL_MODES
            .iter()
            .map(|(t, s)| json!({"type": t, "supported": s}))
            .collect::<Vec<_>>(),
        "keywords": [input.package],
        "links": [],
        "maintainers": [],
        "maturity": "alpha",
        "minKubeVersion": input.min_kube_version,
        "provider": {},
        "relatedImages": related,
        "version": input.version,
    });
    if input.cluster_rules.is_empty() {
        remove(&mut spec["install"]["spec"], "clusterPermissions");
    }
    if input.namespaced_rules.is_empty() {
        remove(&mut spec["install"]["spec"], "permissions");
    }
    if let Some(r) = &input.replaces {
        spec["replaces"] = r.clone().into();
    }
    if !input.webhook_definitions.is_empty() {
        spec["webhookdefinitions"] = Value::Array(input.webhook_definitions.clone());
    }
    // OLM installs an operator with a conversion webhook only in AllNamespaces mode: a CRD
    // converts for the whole cluster, so one operator must serve every namespace.
    if input
        .webhook_definitions
        .iter()
        .any(|d| d["type"] == "ConversionWebhook")
    {
        spec["installModes"] = INSTALL_MODES
            .iter()
            .map(|(t, _)| json!({"type": t, "supported": *t == "AllNamespaces"}))
            .collect::<Vec<_>>()
            .into();
    }
    Ok(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "annotations": annotations,
            "name": format!("{}.v{}", input.package, input.version),
            "namespace": "placeholder",
        },
        "spec": spec,
    }))
}

/// A spec field a sample sets but the schema does not describe (an Ansible role's open schema)
/// still gets a descriptor, so consoles show it.
fn sample_descriptors(owned: &mut Value, samples: &[Value]) {
    let group = owned["name"]
        .as_str()
        .and_then(|n| n.split_once('.'))
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    let api = format!("{group}/{}", owned["version"].as_str().unwrap_or_default());
    let mut extra = Vec::new();
    for s in samples {
        if s["kind"] != owned["kind"] || s["apiVersion"] != api.as_str() {
            continue;
        }
        for k in s["spec"].as_object().into_iter().flat_map(|m| m.keys()) {
            let known = owned["specDescriptors"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(&extra)
                .any(|d| d["path"] == k.as_str());
            if !known {
                extra.push(
                    json!({"path": k, "displayName": descriptors::words(k), "description": ""}),
                );
            }
        }
    }
    if let Some(d) = owned["specDescriptors"].as_array_mut() {
        d.extend(extra);
    }
}

fn remove(v: &mut Value, key: &str) {
    if let Some(m) = v.as_object_mut() {
        m.remove(key);
    }
}

/// `my-operator` → `My Operator`.
fn display(package: &str) -> String {
    package
        .split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An example as a user would write it: no namespace, no status.
fn strip_sample(s: &Value) -> Value {
    let mut s = s.clone();
    remove(&mut s["metadata"], "namespace");
    remove(&mut s, "status");
    s
}

/// The install strategy's deployment: the install's Deployment spec, told by OLM which
/// namespaces to watch (operator-sdk's `WATCH_NAMESPACE` from `olm.targetNamespaces`).
fn deployment(d: &Value) -> Value {
    let mut spec = d["spec"].clone();
    if let Some(containers) = spec["template"]["spec"]["containers"].as_array_mut() {
        for c in containers {
            let watch = json!({
                "name": "WATCH_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}
            });
            match c["env"].as_array_mut() {
                Some(env) => {
                    if !env.iter().any(|e| e["name"] == "WATCH_NAMESPACE") {
                        env.push(watch);
                    }
                }
                None => c["env"] = json!([watch]),
            }
        }
    }
    let mut out = json!({"name": d["metadata"]["name"], "spec": spec});
    if let Some(labels) = d["metadata"]["labels"].as_object() {
        out["label"] = Value::Object(labels.clone());
    }
    out
}

fn merge_base(csv: &mut Value, base: &Value, input: &BundleInput) -> Result<(), Error> {
    if base["kind"] != "ClusterServiceVersion" {
        return Err(Error::BadProject {
            path: format!(
                "config/manifests/bases/{}.clusterserviceversion.yaml",
                input.package
            )
            .into(),
            message: format!("kind is {}, not ClusterServiceVersion", base["kind"]),
        });
    }
    if let Some(annotations) = base["metadata"]["annotations"].as_object() {
        for (k, v) in annotations {
            // Generated from the samples and the flags: the base cannot pin them.
            if ["alm-examples", "createdAt"].contains(&k.as_str()) {
                continue;
            }
            csv["metadata"]["annotations"][k] = v.clone();
        }
    }
    for (field, v) in base["spec"].as_object().into_iter().flatten() {
        let flag_wins = field == "replaces" && input.replaces.is_some();
        if v.is_null() || flag_wins || GENERATED_SPEC_FIELDS.contains(&field.as_str()) {
            continue;
        }
        csv["spec"][field] = v.clone();
    }
    if let Some(required) = base["spec"]["customresourcedefinitions"].get("required") {
        if !required.is_null() {
            csv["spec"]["customresourcedefinitions"]["required"] = required.clone();
        }
    }
    if let (Some(listed), Some(related)) = (
        base["spec"]["relatedImages"].as_array(),
        csv["spec"]["relatedImages"].as_array_mut(),
    ) {
        for r in listed {
            if !related.iter().any(|g| g["image"] == r["image"]) {
                related.push(r.clone());
            }
        }
    }
    // A person's descriptions and descriptors of an owned CRD win over the generated ones.
    let Some(base_owned) = base["spec"]["customresourcedefinitions"]["owned"].as_array() else {
        return Ok(());
    };
    if let Some(owned) = csv["spec"]["customresourcedefinitions"]["owned"].as_array_mut() {
        for o in owned.iter_mut() {
            let Some(b) = base_owned
                .iter()
                .find(|b| b["name"] == o["name"] && b["version"] == o["version"])
            else {
                continue;
            };
            for f in [
                "displayName",
                "description",
                "specDescriptors",
                "statusDescriptors",
                "resources",
            ] {
                if let Some(v) = b.get(f) {
                    o[f] = v.clone();
                }
            }
        }
    }
    Ok(())
}
