//! The CustomResourceDefinitions of a chart's `crds/` directory.
//!
//! Helm's rule (the default): they are created when absent, before anything else of the
//! release, and never changed or deleted afterwards ([`create_missing`]).
//!
//! `upgradeCRDs: true` in the watches entry (bosun's extension) server-side applies them on
//! every install and upgrade with the field manager [`FIELD_MANAGER`] ([`apply`]), checked
//! first as a whole: a CRD that would drop a version the API server still lists in the
//! existing CRD's `status.storedVersions` is refused, and then none is applied (objects
//! stored at that version would become unreadable; the API server itself refuses such an
//! update only for the versions it stores, after the other CRDs went through). A CRD is never
//! deleted, not on uninstall either: it carries no owner reference, and its objects outlive
//! every release.
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;

use crate::error::{write_error, Error};

/// The field manager of the CRDs `upgradeCRDs` applies: its own, so `kubectl get crd
/// --show-managed-fields` tells the chart's CRD fields from the release's objects.
pub const FIELD_MANAGER: &str = "bosun-helm-crds";

/// How long an install waits for a created CRD to be Established.
const ESTABLISHED: Duration = Duration::from_secs(30);

/// `crds/` files (`(path, content)`) as CRDs, in file order. Helm reads them with the
/// Kubernetes YAML reader, not the manifest splitter.
pub fn parse(crds: &[(String, String)]) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut out = Vec::new();
    for (path, content) in crds {
        let docs = bosun_yaml::goyaml::split_documents(content)
            .map_err(|e| Error::Manifest(format!("{path}: {e}")))?;
        for doc in docs.into_iter().filter(|d| !d.trim().is_empty()) {
            let json = bosun_yaml::goyaml::yaml_to_json(&doc)
                .map_err(|e| Error::Manifest(format!("{path}: {e}")))?;
            let crd: CustomResourceDefinition = serde_json::from_str(&json).map_err(|e| {
                Error::Manifest(format!("{path}: not a CustomResourceDefinition: {e}"))
            })?;
            out.push(crd);
        }
    }
    Ok(out)
}

/// Why applying `desired` over `existing` is refused: the first version still in the
/// existing CRD's `status.storedVersions` that `desired` no longer lists.
pub fn dropped_stored_version(
    existing: &CustomResourceDefinition,
    desired: &CustomResourceDefinition,
) -> Option<String> {
    let stored = existing.status.as_ref()?.stored_versions.as_ref()?;
    stored
        .iter()
        .find(|v| !desired.spec.versions.iter().any(|d| &d.name == *v))
        .cloned()
}

/// Helm's rule: each CRD created when absent, never changed.
pub async fn create_missing(client: &kube::Client, crds: &[(String, String)]) -> Result<(), Error> {
    if crds.is_empty() {
        return Ok(());
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in parse(crds)? {
        let name = crd.name_any();
        if api.get_opt(&name).await?.is_some() {
            continue;
        }
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(write_error(&format!("CustomResourceDefinition {name}"), e)),
        }
        established(&api, &name).await;
    }
    Ok(())
}

/// `upgradeCRDs`: every CRD checked against the existing one, then all server-side applied.
pub async fn apply(client: &kube::Client, crds: &[(String, String)]) -> Result<(), Error> {
    if crds.is_empty() {
        return Ok(());
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let desired = parse(crds)?;
    let mut fresh = Vec::new();
    for crd in &desired {
        let name = crd.name_any();
        match api.get_opt(&name).await? {
            Some(existing) => {
                if let Some(version) = dropped_stored_version(&existing, crd) {
                    return Err(Error::StoredVersionDropped { crd: name, version });
                }
            }
            None => fresh.push(name),
        }
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    for crd in &desired {
        let name = crd.name_any();
        let mut body = crd.clone();
        // What the cluster keeps is not the chart's to say (a resourceVersion would make the
        // apply a compare-and-swap against a file written long ago).
        body.metadata.resource_version = None;
        body.metadata.managed_fields = None;
        body.status = None;
        api.patch(&name, &pp, &Patch::Apply(&body))
            .await
            .map_err(|e| write_error(&format!("CustomResourceDefinition {name}"), e))?;
    }
    for name in &fresh {
        established(&api, name).await;
    }
    Ok(())
}

/// Waits (bounded) until a new CRD is Established; a kind it defines not served yet shows
/// later as that object's own error.
async fn established(api: &Api<CustomResourceDefinition>, name: &str) {
    let done = kube::runtime::wait::await_condition(
        api.clone(),
        name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    let _ = tokio::time::timeout(ESTABLISHED, done).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &[&str], stored: Option<&[&str]>) -> CustomResourceDefinition {
        let mut v = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Gadget", "plural": "gadgets"},
                "scope": "Namespaced",
                "versions": versions.iter().enumerate().map(|(i, n)| serde_json::json!({
                    "name": n, "served": true, "storage": i == 0,
                    "schema": {"openAPIV3Schema": {"type": "object"}}
                })).collect::<Vec<_>>()
            }
        });
        if let Some(s) = stored {
            v["status"] = serde_json::json!({"storedVersions": s});
        }
        serde_json::from_value(v).expect("a CRD")
    }

    #[test]
    fn a_version_still_stored_may_not_go() {
        // (existing versions, stored, desired versions, refused version, why)
        type Case<'a> = (
            &'a [&'a str],
            Option<&'a [&'a str]>,
            &'a [&'a str],
            Option<&'a str>,
            &'a str,
        );
        let cases: &[Case] = &[
            (
                &["v1"],
                Some(&["v1"]),
                &["v1", "v2"],
                None,
                "a version added",
            ),
            (
                &["v1", "v2"],
                Some(&["v1"]),
                &["v2", "v1"],
                None,
                "reordered",
            ),
            (
                &["v1", "v2"],
                Some(&["v2"]),
                &["v2"],
                None,
                "v1 was never stored",
            ),
            (
                &["v1", "v2"],
                Some(&["v1", "v2"]),
                &["v2"],
                Some("v1"),
                "v1 still stored",
            ),
            (
                &["v1alpha1"],
                Some(&["v1alpha1"]),
                &["v1"],
                Some("v1alpha1"),
                "renamed",
            ),
            (&["v1"], None, &["v2"], None, "no status reported yet"),
        ];
        for (existing, stored, desired, refused, why) in cases {
            assert_eq!(
                dropped_stored_version(&crd(existing, *stored), &crd(desired, None)).as_deref(),
                *refused,
                "{why}"
            );
        }
    }

    #[test]
    fn crds_files_hold_several_documents() {
        let files = vec![(
            "c/crds/all.yaml".to_string(),
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: a.example.com\nspec:\n  group: example.com\n  names: {kind: A, plural: a}\n  scope: Namespaced\n  versions: []\n---\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: b.example.com\nspec:\n  group: example.com\n  names: {kind: B, plural: b}\n  scope: Namespaced\n  versions: []\n".to_string(),
        )];
        let names: Vec<String> = parse(&files)
            .expect("parse")
            .iter()
            .map(|c| c.name_any())
            .collect();
        assert_eq!(names, ["a.example.com", "b.example.com"]);
        let bad = vec![("c/crds/x.yaml".to_string(), "kind: [".to_string())];
        let e = parse(&bad).expect_err("not YAML").to_string();
        assert!(e.starts_with("c/crds/x.yaml: "), "{e}");
    }
}
