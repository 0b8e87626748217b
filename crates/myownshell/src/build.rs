//! The shell Deployment (pure).
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::{Resource, ResourceExt};

use crate::api::MyOwnShell;

/// The seed's command, verbatim.
pub const COMMAND: &str =
    "echo The app is running, You can now ssh into for a while! && sleep 99999999 ";

pub fn labels(m: &MyOwnShell) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app".to_string(), "myownshell".to_string()),
        ("myownshell_cr".to_string(), m.name_any()),
    ])
}

pub fn deployment(m: &MyOwnShell) -> Deployment {
    let ls = labels(m);
    let mut meta_labels = ls.clone();
    meta_labels.insert("app.kubernetes.io/managed-by".into(), "bosun".into());
    Deployment {
        metadata: ObjectMeta {
            name: Some(m.name_any()),
            namespace: m.namespace(),
            labels: Some(meta_labels),
            owner_references: m.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(m.spec.size),
            selector: LabelSelector {
                match_labels: Some(ls.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(ls),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "busybox".into(),
                        image: Some("busybox:latest".into()),
                        command: Some(vec!["sh".into(), "-c".into(), COMMAND.into()]),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MyOwnShellSpec;

    #[test]
    fn seed_deployment() {
        let mut m = MyOwnShell::new("myownshell-sample", MyOwnShellSpec { size: 3 });
        m.metadata.namespace = Some("default".into());
        m.metadata.uid = Some("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".into());
        insta::assert_yaml_snapshot!(deployment(&m));
    }
}
