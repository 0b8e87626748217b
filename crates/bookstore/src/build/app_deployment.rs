//! The app Deployment: the Python REST service, told where MongoDB is through env vars.
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::{child_meta, image, labels, selector, Names};
use crate::api::BookStore;

pub fn build(bs: &BookStore) -> Deployment {
    let app = &bs.spec.book_app;
    let db = &bs.spec.book_db;
    let names = Names::of(bs);
    let env = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        ..Default::default()
    };
    Deployment {
        metadata: child_meta(bs, &names.app, "app"),
        spec: Some(DeploymentSpec {
            replicas: Some(app.replicas),
            selector: LabelSelector {
                match_labels: Some(selector(bs, "app")),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(bs, "app")),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "bookstore".into(),
                        image: Some(image(&app.repository, &app.tag)),
                        image_pull_policy: Some(format!("{:?}", app.image_pull_policy)),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: app.target_port,
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        }]),
                        env: Some(vec![
                            env("MONGODB_HOST", names.db_client.clone()),
                            env("MONGODB_PORT", db.port.to_string()),
                            env(
                                "MONGODB_URI",
                                format!("mongodb://{}:{}", names.db_client, db.port),
                            ),
                        ]),
                        resources: app.resources.as_ref().map(|r| r.to_requirements()),
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
    use crate::build::fixtures;

    #[test]
    fn seed_sample() {
        insta::assert_yaml_snapshot!(build(&fixtures::sample()));
    }

    #[test]
    fn defaults_from_empty_spec() {
        insta::assert_yaml_snapshot!(build(&fixtures::empty()));
    }
}
