//! OLM v1 readiness (`--select-optional name=olmv1`): whether operator-controller would install
//! the bundle as a ClusterExtension. It installs registry+v1 bundles that
//!
//! * support the `AllNamespaces` install mode (it installs an operator for the whole cluster;
//!   SingleNamespace and OwnNamespace are only a compatibility path there);
//! * declare no dependencies — no `olm.gvk.required`, `olm.package.required` or
//!   `olm.constraint` in `metadata/dependencies.yaml` or `metadata/properties.yaml`: it
//!   resolves one package, never a set;
//! * carry no webhook definitions (OLM v0 made their certificates; operator-controller
//!   releases refuse them unless started with a webhook certificate provider feature gate,
//!   `WebhookProviderCertManager` or `WebhookProviderOpenshiftServiceCA`) and no API service
//!   definitions.
//!
//! Each is an error: operator-controller reports it in the ClusterExtension's conditions and
//! installs nothing. That it does not support the OperatorConditions API is a warning: a
//! bundle cannot show whether its operator uses it.
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{str_of, At, Bundle, Finding};

/// What operator-controller refuses among a bundle's declared properties.
const DEPENDENCY_TYPES: [&str; 3] = ["olm.gvk.required", "olm.package.required", "olm.constraint"];

/// The OLM v1 findings for the bundle in `dir` (its metadata files read from there).
pub fn run(dir: &Path, bundle: &Bundle, out: &mut Vec<Finding>) {
    if let Some(csv) = bundle.csv() {
        let name = str_of(&csv.object, &["metadata", "name"]).to_string();
        let mut at = At {
            out: &mut *out,
            check: "olmv1",
            file: &csv.file,
        };
        check_csv(&name, &csv.object, &mut at);
    }
    for file in ["metadata/dependencies.yaml", "metadata/properties.yaml"] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        let mut at = At {
            out: &mut *out,
            check: "olmv1",
            file,
        };
        check_dependencies(&text, &mut at);
    }
}

fn check_csv(name: &str, csv: &Value, at: &mut At) {
    let spec = &csv["spec"];
    let all = spec["installModes"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["type"] == "AllNamespaces" && m["supported"] == true);
    if !all {
        at.error(
            "spec.installModes",
            format!(
                "Value {name}: OLM v1 installs only bundles supporting the AllNamespaces install mode: set {{type: AllNamespaces, supported: true}} (bosun's operators watch every namespace when WATCH_NAMESPACE is empty)"
            ),
        );
    }
    let hooks = spec["webhookdefinitions"].as_array().map_or(0, Vec::len);
    if hooks > 0 {
        at.error(
            "spec.webhookdefinitions",
            format!(
                "Value {name}: OLM v1 (operator-controller) does not install bundles with webhook definitions ({hooks} here) unless started with the WebhookProviderCertManager or WebhookProviderOpenshiftServiceCA feature gate: bundle without --webhooks for OLM v1, and serve the webhooks from `bosun manifests --webhooks` where needed"
            ),
        );
    }
    let apis = spec["apiservicedefinitions"]["owned"]
        .as_array()
        .map_or(0, Vec::len);
    if apis > 0 {
        at.error(
            "spec.apiservicedefinitions.owned",
            format!(
                "Value {name}: OLM v1 does not install bundles that own API services ({apis} here)"
            ),
        );
    }
    at.warn(
        "",
        format!(
            "Value {name}: OLM v1 does not support the OperatorConditions API (OperatorCondition objects, the upgradeable condition): an operator that reads or writes them fails under OLM v1"
        ),
    );
}

fn check_dependencies(text: &str, at: &mut At) {
    let mut found = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let Ok(v) = Value::deserialize(doc) else {
            at.error("", "not valid YAML");
            return;
        };
        for list in ["dependencies", "properties"] {
            for (i, d) in v[list].as_array().into_iter().flatten().enumerate() {
                let kind = d["type"].as_str().unwrap_or_default();
                // Every entry of dependencies.yaml is one (olm.package, olm.gvk, olm.label,
                // olm.constraint); among properties only the required ones are.
                if list == "dependencies" || DEPENDENCY_TYPES.contains(&kind) {
                    found.push((format!("{list}[{i}]"), kind.to_string()));
                }
            }
        }
    }
    for (field, kind) in found {
        at.error(
            &field,
            format!(
                "OLM v1 does not install bundles that declare dependencies ({kind}): remove it, and install what it names yourself"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validate::{Level, Manifest};

    fn bundle(spec: Value) -> Bundle {
        Bundle {
            manifests: vec![Manifest {
                file: "manifests/shop.clusterserviceversion.yaml".into(),
                object: json!({"kind": "ClusterServiceVersion", "metadata": {"name": "shop.v0.0.1"}, "spec": spec}),
            }],
            annotations: None,
        }
    }

    fn errors(dir: &Path, b: &Bundle) -> Vec<String> {
        let mut out = Vec::new();
        run(dir, b, &mut out);
        out.iter()
            .filter(|f| f.level == Level::Error)
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    }

    fn modes(all: bool) -> Value {
        json!([{"type": "OwnNamespace", "supported": true}, {"type": "AllNamespaces", "supported": all}])
    }

    #[test]
    fn a_bundle_for_all_namespaces_without_webhooks_or_dependencies_installs() {
        let dir = tempfile::tempdir().expect("dir");
        let b = bundle(
            json!({"installModes": modes(true), "webhookdefinitions": [], "apiservicedefinitions": {}}),
        );
        assert_eq!(errors(dir.path(), &b), Vec::<String>::new());
        let mut out = Vec::new();
        run(dir.path(), &b, &mut out);
        assert_eq!(out.len(), 1, "the OperatorConditions warning: {out:?}");
    }

    #[test]
    fn what_operator_controller_refuses_is_an_error_naming_the_field() {
        let dir = tempfile::tempdir().expect("dir");
        let b = bundle(json!({
            "installModes": modes(false),
            "webhookdefinitions": [{"type": "ConversionWebhook"}],
            "apiservicedefinitions": {"owned": [{"name": "x"}]},
        }));
        let e = errors(dir.path(), &b);
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            e[0].starts_with("spec.installModes: Value shop.v0.0.1: ")
                && e[0].contains("AllNamespaces"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("spec.webhookdefinitions: ") && e[1].contains("(1 here)"),
            "{e:?}"
        );
        assert!(
            e[2].starts_with("spec.apiservicedefinitions.owned: "),
            "{e:?}"
        );

        std::fs::create_dir_all(dir.path().join("metadata")).expect("mkdir");
        std::fs::write(
            dir.path().join("metadata/dependencies.yaml"),
            "dependencies:\n- type: olm.package\n  value: {packageName: x, version: '>1'}\n- type: olm.gvk\n  value: {group: a, kind: B, version: v1}\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("metadata/properties.yaml"),
            "properties:\n- type: olm.constraint\n  value: {failureMessage: no}\n- type: olm.maxOpenShiftVersion\n  value: 4.9\n",
        )
        .expect("write");
        let ok = bundle(json!({"installModes": modes(true)}));
        let e = errors(dir.path(), &ok);
        assert_eq!(
            e,
            [
                "dependencies[0]: OLM v1 does not install bundles that declare dependencies (olm.package): remove it, and install what it names yourself",
                "dependencies[1]: OLM v1 does not install bundles that declare dependencies (olm.gvk): remove it, and install what it names yourself",
                "properties[0]: OLM v1 does not install bundles that declare dependencies (olm.constraint): remove it, and install what it names yourself",
            ]
        );
    }
}
