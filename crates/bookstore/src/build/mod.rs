//! Pure builders, one per child: BookStore in, typed k8s-openapi object out. No client here.
//!
//! | child                      | name                         | file              |
//! |----------------------------|------------------------------|-------------------|
//! | app Deployment             | `<name>-app`                 | `app_deployment`  |
//! | app Service                | `<name>-app`                 | `app_service`     |
//! | MongoDB StatefulSet        | `<name>-mongodb`             | `db_statefulset`  |
//! | MongoDB headless Service   | `<name>-mongodb-headless`    | `db_services`     |
//! | MongoDB client Service     | `bookDB.serviceName` or `<name>-mongodb` | `db_services` |
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::api::BookStore;

pub mod app_deployment;
pub mod app_service;
pub mod db_services;
pub mod db_statefulset;

pub const MANAGED_BY: &str = "bosun";
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// On volume claims: the UID of the BookStore whose StatefulSet created them.
pub const OWNER_UID_LABEL: &str = "bookstore.bosun.dev/owner-uid";
/// On the StatefulSet: the volume size and class its claim template carries.
pub const DB_SIZE_ANNOTATION: &str = "bookstore.bosun.dev/db-size";
pub const STORAGE_CLASS_ANNOTATION: &str = "bookstore.bosun.dev/storage-class";
/// The claim template's name; claims are `data-<name>-mongodb-<ordinal>`.
pub const DATA_VOLUME: &str = "data";

/// Every child's name, derived from the BookStore's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub app: String,
    pub db: String,
    pub db_headless: String,
    pub db_client: String,
}

impl Names {
    pub fn of(bs: &BookStore) -> Names {
        let n = bs.name_any();
        Names {
            app: format!("{n}-app"),
            db: format!("{n}-mongodb"),
            db_headless: format!("{n}-mongodb-headless"),
            db_client: bs
                .spec
                .book_db
                .service_name
                .clone()
                .unwrap_or_else(|| format!("{n}-mongodb")),
        }
    }

    /// The claim of one MongoDB replica.
    pub fn claim(&self, ordinal: i32) -> String {
        format!("{DATA_VOLUME}-{}-{ordinal}", self.db)
    }
}

/// Labels that select one component's pods (stable: used in immutable selectors).
pub fn selector(bs: &BookStore, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), "bookstore".to_string()),
        (INSTANCE_LABEL.to_string(), bs.name_any()),
        (COMPONENT_LABEL.to_string(), component.to_string()),
    ])
}

/// Labels on every child.
pub fn labels(bs: &BookStore, component: &str) -> BTreeMap<String, String> {
    let mut l = selector(bs, component);
    l.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
    l
}

pub fn owner(bs: &BookStore) -> Option<Vec<OwnerReference>> {
    bs.controller_owner_ref(&()).map(|o| vec![o])
}

/// Metadata of a child owned by the BookStore.
pub fn child_meta(bs: &BookStore, name: &str, component: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: bs.namespace(),
        labels: Some(labels(bs, component)),
        owner_references: owner(bs),
        ..Default::default()
    }
}

pub fn image(repository: &str, tag: &str) -> String {
    format!("{repository}:{tag}")
}

/// Label selector string for a map of labels.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
pub(crate) mod fixtures {
    use crate::api::{BookStore, BookStoreSpec};

    /// The seed's sample CR, with its `metadata:name:` typo fixed.
    pub const SEED_SAMPLE: &str = include_str!("../../../../deploy/samples/bookstore.yaml");

    pub fn sample() -> BookStore {
        let mut bs: BookStore = serde_yaml::from_str(SEED_SAMPLE).expect("seed sample parses");
        bs.metadata.namespace = Some("shop".into());
        bs.metadata.uid = Some("0ef42889-deb4-11e9-ba56-42010a800256".into());
        bs
    }

    pub fn empty() -> BookStore {
        let mut bs = BookStore::new("minimal", BookStoreSpec::default());
        bs.metadata.namespace = Some("shop".into());
        bs.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
        bs
    }
}
