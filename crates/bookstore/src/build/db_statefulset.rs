//! The MongoDB StatefulSet: one volume claim per replica from `dbSize` and the storage class.
//! The claim template is immutable in Kubernetes; [`crate::resize`] recreates the StatefulSet
//! (orphaning its pods) when the size grows. The annotations record what the template holds,
//! so size and class can be compared from the metadata cache.
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

use super::{
    child_meta, image, labels, selector, Names, DATA_VOLUME, DB_SIZE_ANNOTATION, OWNER_UID_LABEL,
    STORAGE_CLASS_ANNOTATION,
};
use crate::api::BookStore;

pub fn build(bs: &BookStore) -> StatefulSet {
    let db = &bs.spec.book_db;
    let names = Names::of(bs);
    let mut meta = child_meta(bs, &names.db, "mongodb");
    meta.annotations = Some(BTreeMap::from([
        (DB_SIZE_ANNOTATION.to_string(), db.db_size.clone()),
        (
            STORAGE_CLASS_ANNOTATION.to_string(),
            db.storage_class_name.clone().unwrap_or_default(),
        ),
    ]));
    let mut claim_labels = labels(bs, "mongodb");
    claim_labels.insert(OWNER_UID_LABEL.to_string(), bs.uid().unwrap_or_default());
    StatefulSet {
        metadata: meta,
        spec: Some(StatefulSetSpec {
            replicas: Some(db.replicas),
            service_name: Some(names.db_headless.clone()),
            selector: LabelSelector {
                match_labels: Some(selector(bs, "mongodb")),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(bs, "mongodb")),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "mongodb".into(),
                        image: Some(image(&db.repository, &db.tag)),
                        image_pull_policy: Some(format!("{:?}", db.image_pull_policy)),
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
                        resources: db.resources.as_ref().map(|r| r.to_requirements()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(DATA_VOLUME.into()),
                    labels: Some(claim_labels),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: db.storage_class_name.clone(),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(db.db_size.clone()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
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
    fn storage_class_and_size_reach_the_claim_template() {
        let mut bs = fixtures::sample();
        bs.spec.book_db.storage_class_name = Some("fast".into());
        bs.spec.book_db.db_size = "5Gi".into();
        let sts = build(&bs);
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
