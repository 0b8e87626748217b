//! The CRD of a role-backed kind, as operator-sdk scaffolds it for Ansible: spec and status
//! open (`x-kubernetes-preserve-unknown-fields`: a role reads whatever the spec holds and
//! `k8s_status` writes whatever it likes), the status subresource (conditions are written
//! there, and a status write does not bump the generation that triggers a reconcile), and —
//! bosun's additions — the spec's properties described from the role's defaults
//! ([`crate::spec_schema`]), and columns from the conditions: `Successful`, the `Failure`
//! message (in `-o wide`) and the age.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::GroupVersionKind;
use serde_json::json;

use bosun_watches::kinds::plural;
use bosun_watches::schema::OPEN;

/// The CRD of `gvk`, reconciled by `runs` (`role x`), its spec described by `spec` (an open
/// object, see [`crate::spec_schema::spec_schema`]).
pub fn crd(
    gvk: &GroupVersionKind,
    runs: &str,
    spec: serde_json::Value,
) -> Result<CustomResourceDefinition, serde_json::Error> {
    let plural = plural(&gvk.kind);
    let mut spec = spec;
    if let Some(o) = spec.as_object_mut() {
        o.insert(
            "description".into(),
            json!("Passed to the role as variables (keys snake_cased unless snakeCaseParameters is false)."),
        );
        o.remove("nullable");
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{}", gvk.group)},
        "spec": {
            "group": gvk.group,
            "names": {"kind": gvk.kind, "listKind": format!("{}List", gvk.kind), "plural": plural, "singular": gvk.kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": gvk.version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Successful", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Successful\")].status"},
                    {"name": "Failure", "type": "string", "priority": 1, "jsonPath": ".status.conditions[?(@.type==\"Failure\")].message"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": format!("{} is reconciled by {runs}, run by bosun", gvk.kind),
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": {"type": "object", OPEN: true,
                                   "description": "Conditions Running, Successful and Failure (with ansibleResult), and what the role's k8s_status sets."}
                    }
                }}
            }]
        }
    });
    serde_json::from_value(crd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_schema_status_subresource_and_columns() {
        let c = crd(
            &GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
            "role bookstore",
            crate::spec_schema::spec_schema(None, true),
        )
        .expect("crd");
        assert_eq!(
            c.metadata.name.as_deref(),
            Some("bookstores.charts.example.com")
        );
        let v = &c.spec.versions[0];
        assert!(v
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some());
        let cols: Vec<&str> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["Successful", "Failure", "Age"]);
        let schema = serde_json::to_value(&v.schema).expect("json");
        for part in ["spec", "status"] {
            assert_eq!(
                schema["openAPIV3Schema"]["properties"][part][OPEN], true,
                "{part} is open"
            );
        }
    }
}
