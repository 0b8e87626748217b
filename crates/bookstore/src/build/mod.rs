//! Pure builders, one per child: the validated [`Plan`] in, a typed k8s-openapi object out.
//! No client here. Names and labels come from [`crate::names`].
//!
//! | child                      | file              |
//! |----------------------------|-------------------|
//! | app Deployment             | `app_deployment`  |
//! | app Service                | `app_service`     |
//! | MongoDB StatefulSet        | `db_statefulset`  |
//! | MongoDB headless Service   | `db_services`     |
//! | MongoDB client Service     | `db_services`     |
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::names::Component;
use crate::validate::Plan;

pub mod app_deployment;
pub mod app_service;
pub mod db_services;
pub mod db_statefulset;

/// Metadata of a child owned by the BookStore.
pub fn child_meta(plan: &Plan, name: &str, component: Component) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(plan.id.namespace.clone()),
        labels: Some(plan.id.names.labels(component)),
        owner_references: Some(vec![plan.owner.clone()]),
        ..Default::default()
    }
}

/// Every child of one BookStore.
pub struct Children {
    pub deployment: Deployment,
    pub app_service: Service,
    pub statefulset: StatefulSet,
    pub headless: Service,
    pub client_service: Service,
}

impl Children {
    pub fn build(plan: &Plan) -> Children {
        Children {
            deployment: app_deployment::build(plan),
            app_service: app_service::build(plan),
            statefulset: db_statefulset::build(plan),
            headless: db_services::headless(plan),
            client_service: db_services::client(plan),
        }
    }

    /// The three Services.
    pub fn services(&self) -> [&Service; 3] {
        [&self.app_service, &self.headless, &self.client_service]
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use crate::api::{BookStore, BookStoreSpec};
    use crate::validate::{validate, Plan};

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

    pub fn plan(bs: &BookStore) -> Plan {
        validate(bs).expect("valid fixture")
    }
}
