//! The app Deployment: the Python REST service, told where MongoDB is through env vars.
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::child_meta;
use crate::names::Component;
use crate::validate::Plan;

pub fn build(plan: &Plan) -> Deployment {
    let (app, db, names) = (&plan.app, &plan.db, &plan.id.names);
    let env = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        ..Default::default()
    };
    Deployment {
        metadata: child_meta(plan, &names.app, Component::App),
        spec: Some(DeploymentSpec {
            replicas: Some(app.replicas),
            selector: LabelSelector {
                match_labels: Some(names.selector(Component::App)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(names.labels(Component::App)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "bookstore".into(),
                        image: Some(app.image.clone()),
                        image_pull_policy: Some(app.pull_policy.as_str().into()),
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
                        resources: app.resources.clone(),
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
    use crate::build::fixtures::{empty, plan, sample};

    #[test]
    fn seed_sample() {
        insta::assert_yaml_snapshot!(build(&plan(&sample())));
    }

    #[test]
    fn defaults_from_empty_spec() {
        insta::assert_yaml_snapshot!(build(&plan(&empty())));
    }
}
