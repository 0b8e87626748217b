//! `myownshells.my-first-operator.jgato.io/v1alpha1`.
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[allow(clippy::duplicated_attributes)] // repeated printcolumn(...) attributes
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "my-first-operator.jgato.io",
    version = "v1alpha1",
    kind = "MyOwnShell",
    namespaced,
    status = "MyOwnShellStatus",
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas")
)]
pub struct MyOwnShellSpec {
    /// Number of shell pods.
    #[schemars(range(min = 0, max = 1000))]
    pub size: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct MyOwnShellStatus {
    pub observed_generation: Option<i64>,
    pub ready_replicas: i32,
}
