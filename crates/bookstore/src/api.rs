//! The BookStore custom resource, `bookstores.charts.example.com/v1`.
//!
//! `spec.bookApp` and `spec.bookDB` carry exactly the seed's fields; every field has a default
//! (so `spec: {}` works) and the schema lets the API server itself refuse bad input. Fields
//! added beyond the seed: `bookDB.storageClassName`, `bookDB.serviceName`, `bookDB.dataPolicy`,
//! `bookDB.adoptClaims` and `resources` on both parts.
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
/// The book store to run: the app and its MongoDB.
#[serde(rename_all = "camelCase")]
pub struct BookStoreSpec {
    /// The Python REST app (a Deployment and its Service). Every field has a default, so `{}`
    /// runs the seed's app.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub book_app: BookApp,
    /// MongoDB (a StatefulSet with one volume per replica, a headless Service and a client
    /// Service). Every field has a default.
    #[serde(default, rename = "bookDB")]
    #[schemars(extend("default" = {}))]
    pub book_db: BookDb,
}

/// When the node pulls the container image: Always, IfNotPresent (default) or Never.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum PullPolicy {
    Always,
    #[default]
    IfNotPresent,
    Never,
}

impl PullPolicy {
    /// The value Kubernetes expects in `imagePullPolicy`.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// How the app's Service is exposed: ClusterIP (default), NodePort or LoadBalancer.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    /// The value Kubernetes expects in a Service's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// What happens to MongoDB's PersistentVolumeClaims when the BookStore is deleted: Retain
/// (default) keeps them and the data; Delete removes them with the BookStore.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum DataPolicy {
    #[default]
    Retain,
    Delete,
}

/// The app: a Deployment and its Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct BookApp {
    /// Image repository (default akash125/pyapp; 1-255 characters, lower case).
    #[schemars(length(min = 1, max = 255), pattern(r"^[a-z0-9]+([._/:-][a-z0-9]+)*$"))]
    pub repository: String,
    /// Image tag (default latest; 1-128 characters).
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"))]
    pub tag: String,
    /// When to pull the image: Always, IfNotPresent (default) or Never.
    pub image_pull_policy: PullPolicy,
    /// App pods (default 1, 0-1000). Also set by `kubectl scale bs/NAME --replicas=N`.
    #[schemars(range(min = 0, max = 1000))]
    pub replicas: i32,
    /// Port of the app's Service (default 80, 1-65535).
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Container port the Service sends to (default 3000, 1-65535).
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: i32,
    /// Type of the app's Service: ClusterIP (default), NodePort or LoadBalancer.
    pub service_type: ServiceType,
    /// Container requests and limits of the app (none by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

impl Default for BookApp {
    fn default() -> Self {
        BookApp {
            repository: "akash125/pyapp".into(),
            tag: "latest".into(),
            image_pull_policy: PullPolicy::IfNotPresent,
            replicas: 1,
            port: 80,
            target_port: 3000,
            service_type: ServiceType::ClusterIP,
            resources: None,
        }
    }
}

/// MongoDB: a StatefulSet with a volume per replica, a headless Service and a client Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct BookDb {
    /// Image repository (default mongo; 1-255 characters, lower case).
    #[schemars(length(min = 1, max = 255), pattern(r"^[a-z0-9]+([._/:-][a-z0-9]+)*$"))]
    pub repository: String,
    /// Image tag (default latest; 1-128 characters).
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"))]
    pub tag: String,
    /// When to pull the image: Always, IfNotPresent (default) or Never.
    pub image_pull_policy: PullPolicy,
    /// MongoDB pods, each with its own volume (default 1, 0-100).
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    /// MongoDB's port, in the pods and on both Services (default 27017, 1-65535).
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Volume size per replica, a Kubernetes quantity such as 2Gi (default 1Gi, at least
    /// 64Mi). Can grow, never shrink.
    #[schemars(
        length(min = 1, max = 32),
        pattern(r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[kMGTPE]|([eE]\+?[0-9]+))?$")
    )]
    pub db_size: String,
    /// StorageClass of the volumes (default: the cluster's default class). Fixed once created.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub storage_class_name: Option<String>,
    /// Name of the MongoDB client Service (default `<name>-mongodb`; a DNS label of at most
    /// 63 characters). The stock akash125/pyapp image expects `mongodb-service`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(r"^[a-z]([-a-z0-9]*[a-z0-9])?$"))]
    pub service_name: Option<String>,
    /// Retain (default) or Delete the data volumes when the BookStore is deleted.
    pub data_policy: DataPolicy,
    /// Use volume claims left by an earlier BookStore of the same name (default false: such
    /// claims are reported, never silently reused).
    pub adopt_claims: bool,
    /// Container requests and limits of MongoDB (none by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

impl Default for BookDb {
    fn default() -> Self {
        BookDb {
            repository: "mongo".into(),
            tag: "latest".into(),
            image_pull_policy: PullPolicy::IfNotPresent,
            replicas: 1,
            port: 27017,
            db_size: "1Gi".into(),
            storage_class_name: None,
            service_name: None,
            data_policy: DataPolicy::Retain,
            adopt_claims: false,
            resources: None,
        }
    }
}

/// What the operator observed, written by bosun only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = no_defaults)]
pub struct BookStoreStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Progressing and Degraded, each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// App pods that exist (the scale subresource's status replicas).
    #[serde(default)]
    pub app_replicas: i32,
    /// App pods that are ready.
    #[serde(default)]
    pub app_ready_replicas: i32,
    /// Label selector of the app pods (for the scale subresource and HPAs).
    #[serde(default)]
    pub app_selector: String,
    /// MongoDB pods that are ready.
    #[serde(default)]
    pub db_ready_replicas: i32,
    /// App pods "ready/desired", for printing.
    #[serde(default)]
    pub app: String,
    /// MongoDB pods "ready/desired", for printing.
    #[serde(default)]
    pub db: String,
    /// The smallest capacity among the data volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
}

// Container requests and limits: the runtime's type, shared with the PostgresCluster.
pub use bosun_runtime::resources::{Qty, Resources};

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

/// The BookStore CRD as bosun installs it: the derived schema plus validation rules (CEL) for
/// what a schema alone cannot say — the name must fit every child's name and be a Service
/// name, `dbSize` must be at least 64Mi, and `bookDB.serviceName` must not take another child
/// Service's name. The API server then refuses such a BookStore with the rule's message; the
/// reconcile keeps the same checks (`validate.rs`) for what was stored before the rules.
pub fn crd(
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
    use kube::CustomResourceExt;
    let rule = |rule: &str, message: String, field: Option<&str>| ValidationRule {
        rule: rule.into(),
        message: Some(message),
        field_path: field.map(str::to_string),
        ..Default::default()
    };
    let max = crate::validate::MAX_NAME;
    let mut crd = BookStore::crd();
    for v in &mut crd.spec.versions {
        let Some(root) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        root.x_kubernetes_validations = Some(vec![
            rule(
                &format!("self.metadata.name.size() <= {max}"),
                format!("BookStore names are limited to {max} characters so every child name fits"),
                None,
            ),
            rule(
                "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
                "a BookStore's name names its Services: use lower-case letters, digits and '-', \
                 starting with a letter (no dots)"
                    .into(),
                None,
            ),
            rule(
                "!has(self.spec) || !has(self.spec.bookDB) || !has(self.spec.bookDB.serviceName) || \
                 (self.spec.bookDB.serviceName != self.metadata.name + '-app' && \
                 self.spec.bookDB.serviceName != self.metadata.name + '-mongodb-headless')",
                "bookDB.serviceName collides with another Service of this BookStore \
                 (<name>-app or <name>-mongodb-headless)"
                    .into(),
                Some(".spec.bookDB.serviceName"),
            ),
        ]);
        let db_size = root
            .properties
            .as_mut()
            .and_then(|p| p.get_mut("spec"))
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("bookDB"))
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("dbSize"));
        if let Some(db_size) = db_size {
            db_size.x_kubernetes_validations = Some(vec![rule(
                "isQuantity(self) && quantity(self).compareTo(quantity('64Mi')) >= 0",
                "dbSize must be a storage quantity of at least 64Mi (MongoDB will not start on less)"
                    .into(),
                None,
            )]);
        }
    }
    crd
}
