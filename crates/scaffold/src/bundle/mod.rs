//! `bosun bundle`: an OLM bundle (registry+v1) as operator-sdk's `make bundle` writes it, from
//! what bosun derives about the operators — their CRDs, the install's Deployment, RBAC and
//! metrics Service — and the samples.
//!
//! Pure: [`generate`] turns a [`BundleInput`] into a [`Tree`] of `bundle/manifests/…`,
//! `bundle/metadata/annotations.yaml`, `bundle/tests/scorecard/config.yaml` and
//! `bundle.Dockerfile`. Nothing in it reads the clock: `createdAt` is written only when given,
//! so the same input gives the same bytes.
mod csv;
mod descriptors;
pub mod install;
mod metadata;
mod resources;
pub mod webhooks;

pub use metadata::SCORECARD_TESTS;

use serde_json::Value;

use crate::files::Tree;
use crate::Error;

/// Everything a bundle is made of; the CLI fills it from the registry or a watches file.
#[derive(Debug, Clone, Default)]
pub struct BundleInput {
    /// The OLM package (operator-sdk's default: the project name).
    pub package: String,
    /// The bundle's semantic version (no leading `v`).
    pub version: String,
    pub channels: Vec<String>,
    pub default_channel: Option<String>,
    /// The CSV this one replaces (`<package>.v<version>`).
    pub replaces: Option<String>,
    /// `metadata.annotations.createdAt`, written only when given (reproducible bundles).
    pub created_at: Option<String>,
    /// The operator's image (`containerImage`, `relatedImages`).
    pub image: String,
    /// Further images the operator deploys, `(name, image)`.
    pub related_images: Vec<(String, String)>,
    /// `spec.minKubeVersion`.
    pub min_kube_version: String,
    /// The project layout annotation (`operators.operatorframework.io/project_layout`).
    pub project_layout: String,
    /// The bosun version that built the bundle (`operators.operatorframework.io/builder`).
    pub builder: String,
    /// apiextensions.k8s.io/v1 CustomResourceDefinitions, in order.
    pub crds: Vec<Value>,
    /// The operator's apps/v1 Deployment.
    pub deployment: Value,
    /// Rules granted cluster-wide (`clusterPermissions`).
    pub cluster_rules: Vec<Value>,
    /// Rules granted in the operator's namespace (`permissions`).
    pub namespaced_rules: Vec<Value>,
    /// Objects shipped beside the CSV (the metrics Service, unbound roles).
    pub extra: Vec<Value>,
    /// Example custom resources (`alm-examples`).
    pub samples: Vec<Value>,
    /// Each CRD's operator's own rules (CRD name → rules): the owned CRD's `resources`.
    pub operator_rules: std::collections::BTreeMap<String, Vec<Value>>,
    /// `spec.webhookdefinitions` ([`webhooks::for_olm`]).
    pub webhook_definitions: Vec<Value>,
    /// The hand-written base CSV (`config/manifests/bases/<package>.clusterserviceversion.yaml`).
    pub base: Option<Value>,
}

/// The bundle's files: `bundle/…` and `bundle.Dockerfile`.
pub fn generate(input: &BundleInput) -> Result<Tree, Error> {
    let mut tree = Tree::default();
    let csv = csv::build(input)?;
    tree.put(
        format!(
            "bundle/manifests/{}.clusterserviceversion.yaml",
            input.package
        ),
        yaml("the ClusterServiceVersion", &csv)?,
    );
    for crd in &input.crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        let (plural, group) = name.split_once('.').unwrap_or((name, ""));
        tree.put(
            format!("bundle/manifests/{group}_{plural}.yaml"),
            yaml(&format!("the CRD {name}"), &clean(crd))?,
        );
    }
    for obj in &input.extra {
        tree.put(
            format!("bundle/manifests/{}", file_name(obj)),
            yaml("a manifest", &clean(obj))?,
        );
    }
    tree.put(
        "bundle/metadata/annotations.yaml",
        metadata::annotations(input),
    );
    tree.put("bundle.Dockerfile", metadata::dockerfile(input));
    tree.put("bundle/tests/scorecard/config.yaml", metadata::scorecard());
    Ok(tree)
}

/// operator-sdk's manifest file names: `<name>_<group>_<version>_<kind>.yaml`, lowercase,
/// the group left out for the core group.
pub fn file_name(obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap_or("unnamed");
    let api = obj["apiVersion"].as_str().unwrap_or("v1").replace('/', "_");
    let kind = obj["kind"].as_str().unwrap_or("object").to_lowercase();
    format!("{name}_{api}_{kind}.yaml")
}

/// A bundle manifest is namespace-free (OLM places it) and carries no status.
fn clean(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("namespace");
        m.remove("creationTimestamp");
    }
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    o
}

fn yaml(what: &str, v: &Value) -> Result<String, Error> {
    serde_yaml::to_string(v).map_err(|source| Error::Yaml {
        what: what.to_string(),
        source,
    })
}

#[cfg(test)]
pub(crate) mod tests;
