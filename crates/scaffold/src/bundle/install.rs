//! A bundle installed without OLM (`bosun bundle run`, operator-sdk's `run bundle` without
//! its catalog and Subscription): the objects OLM would make from it, for one namespace.
//!
//! Pure: [`plan`] reads a loaded bundle and returns the objects in the order they are
//! applied — CRDs, the ServiceAccounts, for each `clusterPermissions` entry a ClusterRole and
//! its binding, for each `permissions` entry a Role and its binding in the install
//! namespace, the bundle's other manifests (Services, ClusterRoles, …) and last the CSV's
//! Deployments, whose pods get the `olm.targetNamespaces` annotation OLM sets (the CSV's
//! `WATCH_NAMESPACE` reads it). Each object carries [`LABEL`] with the CSV's name, so what an
//! install made can be told from what it found.
use serde_json::{json, Map, Value};

use crate::validate::Bundle;

/// The label on every object [`plan`] returns: the CSV's name.
pub const LABEL: &str = "operators.bosun.dev/bundle";

/// Which namespaces the operator watches, as OLM's OperatorGroup would say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallMode {
    AllNamespaces,
    OwnNamespace,
    SingleNamespace(String),
}

impl InstallMode {
    /// `AllNamespaces`, `OwnNamespace`, or `SingleNamespace=<ns>` (operator-sdk's
    /// `--install-mode` values).
    pub fn parse(s: &str) -> Result<InstallMode, String> {
        match s.split_once('=') {
            None if s == "AllNamespaces" => Ok(InstallMode::AllNamespaces),
            None if s == "OwnNamespace" => Ok(InstallMode::OwnNamespace),
            Some(("SingleNamespace", ns)) if !ns.is_empty() => {
                Ok(InstallMode::SingleNamespace(ns.to_string()))
            }
            _ => Err(format!(
                "install mode {s:?}: use AllNamespaces, OwnNamespace or SingleNamespace=<namespace>"
            )),
        }
    }

    fn csv_type(&self) -> &'static str {
        match self {
            InstallMode::AllNamespaces => "AllNamespaces",
            InstallMode::OwnNamespace => "OwnNamespace",
            InstallMode::SingleNamespace(_) => "SingleNamespace",
        }
    }

    /// The `olm.targetNamespaces` value for an install in `namespace`.
    fn targets(&self, namespace: &str) -> String {
        match self {
            InstallMode::AllNamespaces => String::new(),
            InstallMode::OwnNamespace => namespace.to_string(),
            InstallMode::SingleNamespace(ns) => ns.clone(),
        }
    }
}

/// What to install, in order.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The CSV's `metadata.name`.
    pub csv: String,
    pub objects: Vec<Value>,
    /// `(namespace, name)` of the Deployments to wait for.
    pub deployments: Vec<(String, String)>,
}

fn label(mut obj: Value, csv: &str) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(l) = labels.as_object_mut() {
            l.insert(LABEL.into(), json!(csv));
        }
    }
    obj
}

/// Kinds that live in a namespace among those a bundle may ship (operator-registry's list).
fn namespaced(kind: &str) -> bool {
    matches!(
        kind,
        "Service"
            | "ServiceAccount"
            | "ConfigMap"
            | "Secret"
            | "Role"
            | "RoleBinding"
            | "ServiceMonitor"
            | "PrometheusRule"
            | "PodDisruptionBudget"
            | "NetworkPolicy"
            | "VerticalPodAutoscaler"
    )
}

/// The objects installing `bundle` into `namespace` in `mode` makes.
pub fn plan(bundle: &Bundle, namespace: &str, mode: &InstallMode) -> Result<Plan, String> {
    let csv = bundle
        .csv()
        .ok_or("the bundle has no ClusterServiceVersion in manifests/")?;
    let c = &csv.object;
    let name = c["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{}: the CSV has no metadata.name", csv.file))?
        .to_string();
    let supported = c["spec"]["installModes"]
        .as_array()
        .map(|m| {
            m.iter()
                .any(|m| m["type"] == mode.csv_type() && m["supported"].as_bool().unwrap_or(false))
        })
        .unwrap_or(false);
    if !supported {
        return Err(format!(
            "{}: the CSV does not support install mode {} (spec.installModes)",
            csv.file,
            mode.csv_type()
        ));
    }
    if c["spec"]["webhookdefinitions"]
        .as_array()
        .is_some_and(|w| !w.is_empty())
    {
        return Err(format!(
            "{}: the CSV has webhookdefinitions, which only OLM serves (it makes their \
             certificates); install the operator with `bosun manifests --webhooks` instead",
            csv.file
        ));
    }
    let install = &c["spec"]["install"]["spec"];
    let mut objects = Vec::new();
    for crd in bundle.crds() {
        objects.push(label(crd.object.clone(), &name));
    }
    let mut accounts: Vec<String> = Vec::new();
    let mut account = |sa: &str, objects: &mut Vec<Value>| {
        if !accounts.iter().any(|a| a == sa) {
            accounts.push(sa.to_string());
            objects.push(label(
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": sa, "namespace": namespace}}),
                &name,
            ));
        }
    };
    let rbac = "rbac.authorization.k8s.io/v1";
    for (key, kind) in [
        ("clusterPermissions", "ClusterRole"),
        ("permissions", "Role"),
    ] {
        for (i, p) in install[key].as_array().into_iter().flatten().enumerate() {
            let sa = p["serviceAccountName"].as_str().ok_or_else(|| {
                format!(
                    "{}: spec.install.spec.{key}[{i}] has no serviceAccountName",
                    csv.file
                )
            })?;
            account(sa, &mut objects);
            let role = format!("{name}-{sa}");
            let mut meta = json!({"name": role});
            if kind == "Role" {
                meta["namespace"] = json!(namespace);
            }
            objects.push(label(
                json!({"apiVersion": rbac, "kind": kind, "metadata": meta, "rules": p["rules"]}),
                &name,
            ));
            let mut bmeta = meta.clone();
            bmeta["name"] = json!(role);
            objects.push(label(
                json!({"apiVersion": rbac, "kind": format!("{kind}Binding"), "metadata": bmeta,
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                       "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}),
                &name,
            ));
        }
    }
    for m in &bundle.manifests {
        let kind = m.object["kind"].as_str().unwrap_or_default();
        if kind == "ClusterServiceVersion" || kind == "CustomResourceDefinition" {
            continue;
        }
        let mut o = m.object.clone();
        if namespaced(kind) {
            o["metadata"]["namespace"] = json!(namespace);
        }
        objects.push(label(o, &name));
    }
    let targets = mode.targets(namespace);
    let mut deployments = Vec::new();
    for (i, d) in install["deployments"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let dname = d["name"].as_str().ok_or_else(|| {
            format!(
                "{}: spec.install.spec.deployments[{i}] has no name",
                csv.file
            )
        })?;
        let mut spec = d["spec"].clone();
        if let Some(sa) = spec["template"]["spec"]["serviceAccountName"].as_str() {
            let sa = sa.to_string();
            account(&sa, &mut objects);
        }
        let annotations = &mut spec["template"]["metadata"]["annotations"];
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations["olm.targetNamespaces"] = json!(targets);
        annotations["olm.operatorNamespace"] = json!(namespace);
        let mut labels = d["label"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        objects.push(label(
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": dname, "namespace": namespace, "labels": labels},
                   "spec": spec}),
            &name,
        ));
        deployments.push((namespace.to_string(), dname.to_string()));
    }
    if deployments.is_empty() {
        return Err(format!(
            "{}: the CSV's install strategy has no deployments",
            csv.file
        ));
    }
    Ok(Plan {
        csv: name,
        objects,
        deployments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Manifest;

    fn bundle(modes: &[&str], webhooks: bool) -> Bundle {
        let csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "shop.v0.0.1"},
            "spec": {
                "installModes": modes.iter().map(|m| json!({"type": m, "supported": true})).collect::<Vec<_>>(),
                "webhookdefinitions": if webhooks { json!([{"type": "ValidatingAdmissionWebhook"}]) } else { json!([]) },
                "install": {"strategy": "deployment", "spec": {
                    "clusterPermissions": [{"serviceAccountName": "shop", "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}],
                    "permissions": [{"serviceAccountName": "shop", "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}],
                    "deployments": [{"name": "shop", "label": {"app": "shop"}, "spec": {
                        "replicas": 1, "selector": {"matchLabels": {"app": "shop"}},
                        "template": {"metadata": {"labels": {"app": "shop"}},
                                     "spec": {"serviceAccountName": "shop", "containers": [{"name": "m", "image": "x"}]}}}}]
                }}
            }
        });
        let m = |file: &str, object: Value| Manifest {
            file: file.into(),
            object,
        };
        Bundle {
            manifests: vec![
                m("manifests/shop.clusterserviceversion.yaml", csv),
                m(
                    "manifests/crd.yaml",
                    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "shops.example.com"}}),
                ),
                m(
                    "manifests/svc.yaml",
                    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop-metrics"}}),
                ),
            ],
            annotations: None,
        }
    }

    #[test]
    fn the_plan_is_what_olm_makes_in_apply_order_each_labelled() {
        let p = plan(
            &bundle(&["OwnNamespace", "AllNamespaces"], false),
            "ops",
            &InstallMode::OwnNamespace,
        )
        .expect("plan");
        let kinds: Vec<&str> = p
            .objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Service",
                "Deployment"
            ]
        );
        assert!(p
            .objects
            .iter()
            .all(|o| o["metadata"]["labels"][LABEL] == "shop.v0.0.1"));
        let d = &p.objects[7];
        assert_eq!(d["metadata"]["namespace"], "ops");
        assert_eq!(
            d["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
            "ops"
        );
        assert_eq!(
            p.objects[6]["metadata"]["namespace"], "ops",
            "the Service in the install namespace"
        );
        assert_eq!(p.objects[3]["subjects"][0]["namespace"], "ops");
        assert_eq!(p.deployments, [("ops".to_string(), "shop".to_string())]);
        let all = plan(
            &bundle(&["AllNamespaces"], false),
            "ops",
            &InstallMode::AllNamespaces,
        )
        .expect("plan");
        assert_eq!(
            all.objects[7]["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
            ""
        );
    }

    #[test]
    fn unsupported_modes_webhooks_and_bad_modes_are_refused_naming_the_way_out() {
        let e = plan(
            &bundle(&["AllNamespaces"], false),
            "ops",
            &InstallMode::OwnNamespace,
        )
        .expect_err("mode");
        assert!(e.contains("install mode OwnNamespace"), "{e}");
        let e = plan(
            &bundle(&["AllNamespaces"], true),
            "ops",
            &InstallMode::AllNamespaces,
        )
        .expect_err("webhooks");
        assert!(e.contains("bosun manifests --webhooks"), "{e}");
        assert!(InstallMode::parse("SingleNamespace=").is_err());
        assert_eq!(
            InstallMode::parse("SingleNamespace=a"),
            Ok(InstallMode::SingleNamespace("a".into()))
        );
        assert!(plan(&Bundle::default(), "ops", &InstallMode::AllNamespaces).is_err());
    }
}
