//! The MongoDB StatefulSet: one volume claim per replica from `dbSize` and the storage class.
//! The claim template is immutable in Kubernetes; [`crate::resize`] recreates the StatefulSet
//! (orphaning its pods) when the size grows, reading the current size and class from the
//! template itself (the StatefulSet cache keeps `volumeClaimTemplates`).
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PodSpec, PodTemplateSpec, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::child_meta;
use crate::names::{Component, DATA_VOLUME, OWNER_UID_LABEL};
use crate::validate::Plan;

pub fn build(plan: &Plan) -> StatefulSet {
    let (db, names) = (&plan.db, &plan.id.names);
    let mut claim_labels = names.labels(Component::MongoDb);
    claim_labels.insert(OWNER_UID_LABEL.to_string(), plan.id.uid.clone());
    StatefulSet {
        metadata: child_meta(plan, &names.db, Component::MongoDb),
        spec: Some(StatefulSetSpec {
            replicas: Some(db.replicas),
            service_name: Some(names.db_headless.clone()),
            selector: LabelSelector {
                match_labels: Some(names.selector(Component::MongoDb)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(names.labels(Component::MongoDb)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "mongodb".into(),
                        image: Some(db.image.clone()),
                        image_pull_policy: Some(db.pull_policy.as_str().into()),
                        ports: Some(vec![ContainerPort {
                            name: Some("mongodb".into()),
                            container_port: db.port,
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        }]),
                        args: Some(vec![
                            "--port".into(),
                            db.port.to_string(),
                            "--bind_ip_all".into(),
                        ]),
                        volume_mounts: Some(vec![VolumeMount {
                            name: DATA_VOLUME.into(),
                            mount_path: "/data/db".into(),
                            ..Default::default()
                        }]),
                        resources: db.resources.clone(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            // The claim templates are one atomic field: the live value, server defaults
            // included, is what bosun's owned-field fingerprint sees, so the defaults
            // (`volumeMode`, `status.phase`) are part of the desired template.
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(DATA_VOLUME.into()),
                    labels: Some(claim_labels),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: db.storage_class.clone(),
                    volume_mode: Some("Filesystem".into()),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(db.size.text.clone()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                status: Some(PersistentVolumeClaimStatus {
                    phase: Some("Pending".into()),
                    ..Default::default()
                }),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::{plan, sample};

    #[test]
    fn seed_sample() {
        insta::assert_yaml_snapshot!(build(&plan(&sample())));
    }

    #[test]
    fn storage_class_and_size_reach_the_claim_template() {
        let mut bs = sample();
        bs.spec.book_db.storage_class_name = Some("fast".into());
        bs.spec.book_db.db_size = "5Gi".into();
        let sts = build(&plan(&bs));
        let tpl = &sts
            .spec
            .expect("spec")
            .volume_claim_templates
            .expect("templates")[0];
        let spec = tpl.spec.as_ref().expect("claim spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        let req = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .expect("requests");
        assert_eq!(req["storage"].0, "5Gi");
        assert_eq!(
            tpl.metadata.labels.as_ref().expect("labels")[OWNER_UID_LABEL],
            "0ef42889-deb4-11e9-ba56-42010a800256"
        );
    }
}
