//! Generated artifacts: CRDs and RBAC.
use bosun_bookstore::BookStore;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;

fn to_yaml_docs<T: serde::Serialize>(objs: &[T]) -> anyhow::Result<String> {
    let mut out = String::new();
    for o in objs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(o)?);
    }
    Ok(out)
}

pub fn crds_yaml() -> anyhow::Result<String> {
    to_yaml_docs(&[BookStore::crd(), bosun_myownshell::MyOwnShell::crd()])
}

pub fn cluster_role(name: &str) -> ClusterRole {
    let mut rules = bosun_bookstore::rbac::rules();
    rules.extend(bosun_bookstore::rbac::cluster_rules());
    rules.extend(bosun_myownshell::controller::rbac_rules());
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    }
}

pub fn cluster_role_yaml(name: &str) -> anyhow::Result<String> {
    to_yaml_docs(&[cluster_role(name)])
}

#[cfg(test)]
mod tests {
    /// `deploy/crds/` is generated: regenerate with `bosun crd > deploy/crds/crds.yaml`.
    #[test]
    fn committed_crds_are_fresh() {
        let committed = include_str!("../../../../deploy/crds/crds.yaml");
        let generated = super::crds_yaml().expect("crds");
        assert!(
            committed == generated,
            "deploy/crds is stale: run `cargo run -p bosun -- crd > deploy/crds/crds.yaml`"
        );
    }
}
