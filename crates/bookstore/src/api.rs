//! The BookStore custom resource, `bookstores.charts.example.com/v1`.
//!
//! `spec.bookApp` and `spec.bookDB` carry exactly the seed's fields; every field has a default
//! (so `spec: {}` works) and the schema lets the API server itself refuse bad input. Fields
//! added beyond the seed: `bookDB.storageClassName`, `bookDB.serviceName`, `bookDB.dataPolicy`,
//! `bookDB.adoptClaims` and `resources` on both parts.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[allow(clippy::duplicated_attributes)] // repeated printcolumn(...) attributes
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "charts.example.com",
    version = "v1",
    kind = "BookStore",
    plural = "bookstores",
    shortname = "bs",
    namespaced,
    status = "BookStoreStatus",
    scale(
        spec_replicas_path = ".spec.bookApp.replicas",
        status_replicas_path = ".status.appReplicas",
        label_selector_path = ".status.appSelector"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "App",
        type_ = "string",
        json_path = ".status.app",
        description = "app replicas ready/desired"
    ),
    printcolumn(
        name = "DB",
        type_ = "string",
        json_path = ".status.db",
        description = "MongoDB replicas ready/desired"
    ),
    printcolumn(name = "DB-Size", type_ = "string", json_path = ".status.volumeSize"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A Python REST book store backed by MongoDB"
)]
#[serde(rename_all = "camelCase")]
pub struct BookStoreSpec {
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub book_app: BookApp,
    #[serde(default, rename = "bookDB")]
    #[schemars(extend("default" = {}))]
    pub book_db: BookDb,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum PullPolicy {
    Always,
    #[default]
    IfNotPresent,
    Never,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

/// What happens to MongoDB's PersistentVolumeClaims when the BookStore is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum DataPolicy {
    /// Keep the claims (and the data); the default.
    #[default]
    Retain,
    /// Delete the claims with the BookStore.
    Delete,
}

fn app_repository() -> String {
    "akash125/pyapp".into()
}
fn db_repository() -> String {
    "mongo".into()
}
fn latest() -> String {
    "latest".into()
}
fn one() -> i32 {
    1
}
fn port_80() -> i32 {
    80
}
fn port_3000() -> i32 {
    3000
}
fn port_27017() -> i32 {
    27017
}
fn size_1gi() -> String {
    "1Gi".into()
}

/// The app: a Deployment and its Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BookApp {
    /// Image repository.
    #[serde(default = "app_repository")]
    #[schemars(length(min = 1, max = 255), pattern(r"^[a-z0-9]+([._/:-][a-z0-9]+)*$"))]
    pub repository: String,
    /// Image tag.
    #[serde(default = "latest")]
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"))]
    pub tag: String,
    #[serde(default)]
    pub image_pull_policy: PullPolicy,
    /// App pods.
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 1000))]
    pub replicas: i32,
    /// The Service port.
    #[serde(default = "port_80")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// The container port the Service sends to.
    #[serde(default = "port_3000")]
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: i32,
    #[serde(default)]
    pub service_type: ServiceType,
    /// Container resources (requests and limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// MongoDB: a StatefulSet with a volume per replica, a headless Service and a client Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BookDb {
    #[serde(default = "db_repository")]
    #[schemars(length(min = 1, max = 255), pattern(r"^[a-z0-9]+([._/:-][a-z0-9]+)*$"))]
    pub repository: String,
    #[serde(default = "latest")]
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"))]
    pub tag: String,
    #[serde(default)]
    pub image_pull_policy: PullPolicy,
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    #[serde(default = "port_27017")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Volume size per replica, a Kubernetes quantity such as 2Gi. Can grow, never shrink.
    #[serde(default = "size_1gi")]
    #[schemars(
        length(min = 1, max = 32),
        pattern(r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[kMGTPE]|([eE]\+?[0-9]+))?$")
    )]
    pub db_size: String,
    /// StorageClass of the volumes; the cluster default when unset. Fixed once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub storage_class_name: Option<String>,
    /// Name of the MongoDB client Service; `<name>-mongodb` when unset. The stock
    /// akash125/pyapp image expects `mongodb-service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(r"^[a-z]([-a-z0-9]*[a-z0-9])?$"))]
    pub service_name: Option<String>,
    /// Retain (default) or Delete the data volumes when the BookStore is deleted.
    #[serde(default)]
    pub data_policy: DataPolicy,
    /// Use volume claims left by an earlier BookStore of the same name. Off by default: such
    /// claims are reported, never silently reused.
    #[serde(default)]
    pub adopt_claims: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

impl Default for BookApp {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).unwrap_or_else(|_| unreachable_default_app())
    }
}

impl Default for BookDb {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).unwrap_or_else(|_| unreachable_default_db())
    }
}

// Deserializing `{}` cannot fail (every field has a default); these keep clippy's
// unwrap ban honest without a panic path.
fn unreachable_default_app() -> BookApp {
    BookApp {
        repository: app_repository(),
        tag: latest(),
        image_pull_policy: PullPolicy::IfNotPresent,
        replicas: 1,
        port: 80,
        target_port: 3000,
        service_type: ServiceType::ClusterIP,
        resources: None,
    }
}
fn unreachable_default_db() -> BookDb {
    BookDb {
        repository: db_repository(),
        tag: latest(),
        image_pull_policy: PullPolicy::IfNotPresent,
        replicas: 1,
        port: 27017,
        db_size: size_1gi(),
        storage_class_name: None,
        service_name: None,
        data_policy: DataPolicy::Retain,
        adopt_claims: false,
        resources: None,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = no_defaults)]
pub struct BookStoreStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// App pods that exist (the scale subresource's status replicas).
    #[serde(default)]
    pub app_replicas: i32,
    #[serde(default)]
    pub app_ready_replicas: i32,
    /// Label selector of the app pods (for the scale subresource and HPAs).
    #[serde(default)]
    pub app_selector: String,
    #[serde(default)]
    pub db_ready_replicas: i32,
    /// "ready/desired" for printing.
    #[serde(default)]
    pub app: String,
    #[serde(default)]
    pub db: String,
    /// The smallest capacity among the data volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
}

/// Container requests and limits (cpu, memory, ...). Values are Kubernetes quantities; the API
/// server checks them when the pods are written, and a refusal shows in the status.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Qty>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Qty>>,
}

/// A quantity written as a number or a string (`1`, `"500m"`, `"1Gi"`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Qty {
    Int(i64),
    Str(String),
}

impl Qty {
    pub fn to_quantity(&self) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(match self {
            Qty::Int(i) => i.to_string(),
            Qty::Str(s) => s.clone(),
        })
    }
}

impl JsonSchema for Qty {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Qty".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"x-kubernetes-int-or-string": true})
    }
}

impl Resources {
    pub fn to_requirements(&self) -> k8s_openapi::api::core::v1::ResourceRequirements {
        let conv = |m: &Option<BTreeMap<String, Qty>>| {
            m.as_ref().map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_quantity()))
                    .collect()
            })
        };
        k8s_openapi::api::core::v1::ResourceRequirements {
            limits: conv(&self.limits),
            requests: conv(&self.requests),
            ..Default::default()
        }
    }
}

/// Status is written by the operator only; schema defaults there serve no one (and an empty
/// string default is refused by Kubernetes 1.20's CRD validation).
fn no_defaults(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for (_, p) in props.iter_mut() {
            if let Some(o) = p.as_object_mut() {
                o.remove("default");
            }
        }
    }
}
