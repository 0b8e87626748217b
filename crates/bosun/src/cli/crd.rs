//! `bosun crd` and `bosun rbac`: generated artifacts, from the operator registry.
use clap::Args;

use crate::manifests::{self, ManifestArgs};
use crate::registry;

#[derive(Args, Debug, Clone, Default)]
pub struct CrdArgs {
    /// Coded operators whose CRDs to print (comma-separated). Default: every coded
    /// operator, or none when --watches is given.
    #[arg(long, value_delimiter = ',')]
    pub operators: Option<Vec<String>>,
    /// An operator-sdk watches.yaml: a CRD per entry (from the chart's values.schema.json
    /// or values.yaml; from the defaults of roles).
    #[arg(long, visible_alias = "watches-file")]
    pub watches: Option<std::path::PathBuf>,
}

pub fn crds_yaml(args: &CrdArgs) -> anyhow::Result<String> {
    let all: Vec<String> = registry::coded()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    let operators = match (&args.operators, &args.watches) {
        (Some(list), _) => Some(list.clone()),
        (None, None) => Some(all),
        (None, Some(_)) => None,
    };
    let ops = registry::operators(&registry::Sources {
        operators: operators.as_deref(),
        watches: args.watches.as_deref(),
        ..Default::default()
    })?;
    let mut crds = Vec::new();
    for op in &ops {
        for crd in op.crds() {
            crds.push(serde_json::to_value(crd)?);
        }
    }
    manifests::to_yaml(&crds)
}

/// Exactly the RBAC objects `bosun manifests` prints for the same flags.
pub fn rbac_yaml(args: &ManifestArgs) -> anyhow::Result<String> {
    let ops = args.operators()?;
    manifests::to_yaml(&manifests::rbac::objects(args, &ops)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `deploy/crds/` is generated: regenerate with `bosun crd > deploy/crds/crds.yaml`.
    #[test]
    fn committed_crds_are_fresh() {
        let committed = include_str!("../../../../deploy/crds/crds.yaml");
        let generated = crds_yaml(&CrdArgs::default()).expect("crds");
        assert!(
            committed == generated,
            "deploy/crds is stale: run `cargo run -p bosun -- crd > deploy/crds/crds.yaml`"
        );
    }

    #[test]
    fn rbac_prints_what_the_manifests_grant() {
        for args in [ManifestArgs::default(), manifests::tests::webhook_args()] {
            rbac_matches(&args);
        }
    }

    fn rbac_matches(args: &ManifestArgs) {
        let args = args.clone();
        let ops = args.operators().expect("ops");
        let all = manifests::objects(&args, &ops).expect("objects");
        let rbac_kinds = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];
        let from_manifests: Vec<_> = all
            .into_iter()
            .filter(|o| rbac_kinds.iter().any(|k| o["kind"] == *k))
            .collect();
        assert_eq!(
            rbac_yaml(&args).expect("rbac"),
            manifests::to_yaml(&from_manifests).expect("yaml")
        );
    }

    /// Every field of every CRD bosun generates says what it is (`kubectl explain` shows it).
    #[test]
    fn every_crd_field_is_documented() {
        fn walk(path: &str, schema: &serde_json::Value, missing: &mut Vec<String>) {
            let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
                if let Some(items) = schema.get("items") {
                    walk(&format!("{path}[]"), items, missing);
                }
                return;
            };
            for (name, prop) in props {
                let p = format!("{path}.{name}");
                if ["apiVersion", "kind", "metadata"].contains(&name.as_str()) && path.is_empty() {
                    continue;
                }
                let doc = prop
                    .get("description")
                    .and_then(|d| d.as_str())
                    .unwrap_or("");
                if doc.trim().is_empty() {
                    missing.push(p.clone());
                }
                walk(&p, prop, missing);
            }
        }
        let mut missing = Vec::new();
        let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/helm-bookstore/watches.yaml");
        let chart_ops = registry::watched(&seed, &Default::default()).expect("seed chart");
        for op in registry::coded().into_iter().chain(chart_ops) {
            for crd in op.crds() {
                for v in &crd.spec.versions {
                    let schema = serde_json::to_value(
                        v.schema
                            .as_ref()
                            .and_then(|s| s.open_api_v3_schema.as_ref()),
                    )
                    .expect("schema");
                    walk(
                        &format!("{}/{}", crd.spec.names.kind, v.name),
                        &schema,
                        &mut missing,
                    );
                }
            }
        }
        assert!(
            missing.is_empty(),
            "fields without a description: {missing:#?}"
        );
    }
}
