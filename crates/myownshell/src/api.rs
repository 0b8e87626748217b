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
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    doc = "Busybox shell pods, as many as spec.size asks (seed 004)"
)]
/// How many shell pods to run.
pub struct MyOwnShellSpec {
    /// Number of shell pods (0-1000).
    #[schemars(range(min = 0, max = 1000))]
    pub size: i32,
}

/// What the operator observed, written by bosun only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct MyOwnShellStatus {
    /// The generation of the spec this status describes.
    pub observed_generation: Option<i64>,
    /// Shell pods that are ready.
    pub ready_replicas: i32,
}
