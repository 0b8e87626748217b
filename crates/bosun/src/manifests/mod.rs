//! `bosun manifests`: everything needed to install bosun, built as typed k8s-openapi objects
//! from the operator registry (CRDs, RBAC from each operator's rules, the Deployment, the
//! metrics Service). Pure builders; the committed `deploy/base/bosun.yaml` is this output at
//! the defaults (checked by a test), and the Helm chart under `charts/bosun` renders the same
//! objects (checked with Helm's engine).
mod deployment;
pub mod rbac;

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_runtime::manager::Operator;
use clap::Args;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

#[derive(Args, Debug, Clone)]
pub struct ManifestArgs {
    /// Container image of bosun.
    #[arg(long, default_value = "ghcr.io/bosun-dev/bosun:0.1.0")]
    pub image: String,
    /// Namespace bosun runs in.
    #[arg(long, default_value = "bosun-system")]
    pub namespace: String,
    /// Coded operators to enable (comma-separated). Default: bookstore, or none when
    /// --watches is given.
    #[arg(long, value_delimiter = ',')]
    pub operators: Option<Vec<String>>,
    /// An operator-sdk watches.yaml: CRDs and RBAC for its entries, and the Deployment runs it.
    #[arg(long, visible_alias = "watches-file")]
    pub watches: Option<std::path::PathBuf>,
    /// The watches file's path inside the image (the Deployment's `--watches`): build an
    /// image from bosun's with the watches file and its charts or roles copied in.
    #[arg(long, default_value = "/opt/bosun/watches.yaml")]
    pub watches_in_image: String,
    /// Release storage of chart entries: `secret` or `none` (no Secrets granted then).
    #[arg(long, default_value = "secret")]
    pub release_storage: bosun_helm_operator::Storage,
    /// Namespaces to watch (comma-separated); all when empty. When set, RBAC for the
    /// operators' resources is granted with a Role in each watched namespace only.
    #[arg(long, value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Replicas (leader election keeps one active).
    #[arg(long, default_value_t = 2)]
    pub replicas: i32,
    /// Log format: text or json.
    #[arg(long, default_value = "json")]
    pub log_format: String,
}

impl Default for ManifestArgs {
    fn default() -> Self {
        ManifestArgs {
            image: "ghcr.io/bosun-dev/bosun:0.1.0".into(),
            namespace: "bosun-system".into(),
            operators: None,
            watches: None,
            watches_in_image: "/opt/bosun/watches.yaml".into(),
            release_storage: bosun_helm_operator::Storage::Secrets,
            watch_namespaces: vec![],
            replicas: 2,
            log_format: "json".into(),
        }
    }
}

impl ManifestArgs {
    /// The operators these flags select (see [`crate::registry::operators`]).
    pub fn operators(&self) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
        crate::registry::operators(&crate::registry::Sources {
            operators: self.operators.as_deref(),
            watches: self.watches.as_deref(),
            release_storage: self.release_storage,
            ..Default::default()
        })
    }

    /// The coded operators the Deployment's `--operators` names.
    pub fn coded_names(&self) -> Vec<String> {
        match (&self.operators, &self.watches) {
            (Some(list), _) => list.clone(),
            (None, Some(_)) => Vec::new(),
            (None, None) => crate::registry::DEFAULT_OPERATORS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

pub const NAME: &str = "bosun";
/// The Lease the Deployment's replicas elect a leader with.
pub const LEASE_NAME: &str = "bosun-leader";

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), NAME.to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            "operator".to_string(),
        ),
    ])
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(labels()),
        ..Default::default()
    }
}

/// Every object, in apply order, for the given operators.
pub fn objects(a: &ManifestArgs, operators: &[Arc<dyn Operator>]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for op in operators {
        for crd in op.crds() {
            out.push(serde_json::to_value(crd)?);
        }
    }
    out.push(serde_json::to_value(Namespace {
        metadata: ObjectMeta {
            name: Some(a.namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    })?);
    out.push(serde_json::to_value(ServiceAccount {
        metadata: meta(NAME, Some(&a.namespace)),
        ..Default::default()
    })?);
    out.extend(rbac::objects(a, operators)?);
    out.push(serde_json::to_value(deployment::deployment(a))?);
    out.push(serde_json::to_value(deployment::metrics_service(a))?);
    Ok(out)
}

/// Objects as a YAML stream.
pub fn to_yaml(objects: &[Value]) -> anyhow::Result<String> {
    let mut s = String::new();
    for o in objects {
        s.push_str("---\n");
        s.push_str(&serde_yaml::to_string(o)?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objs(a: &ManifestArgs) -> Vec<Value> {
        let ops = a.operators().expect("operators");
        objects(a, &ops).expect("objects")
    }

    fn yaml(a: &ManifestArgs) -> String {
        to_yaml(&objs(a)).expect("yaml")
    }

    #[test]
    fn committed_base_is_fresh() {
        let committed = include_str!("../../../../deploy/base/bosun.yaml");
        assert!(
            committed == yaml(&ManifestArgs::default()),
            "deploy/base/bosun.yaml is stale: run `cargo run -p bosun -- manifests > deploy/base/bosun.yaml`"
        );
    }

    #[test]
    fn committed_namespaced_overlay_is_fresh() {
        let committed = include_str!("../../../../deploy/overlays/namespaced/bosun.yaml");
        let args = ManifestArgs {
            watch_namespaces: vec!["shop".into()],
            ..Default::default()
        };
        assert!(
            committed == yaml(&args),
            "deploy/overlays/namespaced/bosun.yaml is stale: run `cargo run -p bosun -- manifests --watch-namespaces=shop > deploy/overlays/namespaced/bosun.yaml`"
        );
    }

    #[test]
    fn no_wildcard_in_any_rule() {
        for args in [
            ManifestArgs::default(),
            ManifestArgs {
                operators: Some(vec!["bookstore".into(), "myownshell".into()]),
                watch_namespaces: vec!["a".into(), "b".into()],
                ..Default::default()
            },
        ] {
            let text = serde_json::to_string(&objs(&args)).expect("json");
            assert!(!text.contains("\"*\""), "wildcard found");
        }
    }

    #[test]
    fn restricted_security_context() {
        let objs = objs(&ManifestArgs::default());
        let dep = objs
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        let pod = &dep["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(
            (
                c["readOnlyRootFilesystem"].as_bool(),
                c["allowPrivilegeEscalation"].as_bool()
            ),
            (Some(true), Some(false))
        );
        assert_eq!(c["capabilities"]["drop"][0], "ALL");
        assert_eq!(dep["spec"]["replicas"], 2);
    }

    #[test]
    fn namespaced_install_uses_roles_per_watched_namespace() {
        let objs = objs(&ManifestArgs {
            watch_namespaces: vec!["shop".into()],
            ..Default::default()
        });
        let role = objs
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == "shop")
            .expect("role in shop");
        assert!(role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["resources"][0] == "bookstores"));
        let cr = objs
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        assert!(
            !serde_json::to_string(cr)
                .expect("json")
                .contains("bookstores"),
            "cluster role is only cluster-scoped reads"
        );
    }

    #[test]
    fn only_the_selected_operators_crds_are_installed() {
        let kinds = |ops: &[&str]| -> Vec<String> {
            objs(&ManifestArgs {
                operators: Some(ops.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            })
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .map(|o| {
                o["spec"]["names"]["kind"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
        };
        assert_eq!(kinds(&["bookstore"]), vec!["BookStore"]);
        assert_eq!(
            kinds(&["myownshell", "bookstore"]),
            vec!["MyOwnShell", "BookStore"]
        );
    }
}
