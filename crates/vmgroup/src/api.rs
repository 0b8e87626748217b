//! The VmGroup custom resource, `vmgroups.vm.codeconnect.vmworld.com/v1alpha1`, with exactly
//! the seed's fields and bounds (enforced by the API server through the schema), its print
//! columns and its status and scale subresources; `conditions` and `observedGeneration` added
//! beside the seed's status fields.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[allow(clippy::duplicated_attributes)] // repeated printcolumn(...) attributes
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "vm.codeconnect.vmworld.com",
    version = "v1alpha1",
    kind = "VmGroup",
    plural = "vmgroups",
    shortname = "vg",
    namespaced,
    status = "VmGroupStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.desiredReplicas"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.currentReplicas"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "CPU", type_ = "integer", json_path = ".spec.cpu"),
    printcolumn(name = "Memory", type_ = "integer", json_path = ".spec.memory"),
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.template"),
    printcolumn(
        name = "Last_Message",
        type_ = "string",
        json_path = ".status.lastMessage"
    ),
    doc = "A group of vSphere VMs cloned from one template, kept at a count and a shape"
)]
/// The VMs to keep: how many, their shape and the template they are cloned from. A change of
/// `cpu` or `memory` is applied to the existing VMs by reconfiguring them (each is powered
/// off, reconfigured and powered on again).
#[serde(rename_all = "camelCase")]
pub struct VmGroupSpec {
    /// Virtual CPUs of each VM (1-4).
    #[schemars(range(min = 1, max = 4))]
    pub cpu: i32,
    /// Memory of each VM in GB (1-8); the VM gets 1024 × memory MB.
    #[schemars(range(min = 1, max = 8))]
    pub memory: i32,
    /// The VM (or template) the VMs are cloned from: a name in the operator's parent folder,
    /// or an inventory path starting with `/` (e.g. `/DC0/vm/ubuntu-template`).
    #[schemars(length(min = 1, max = 1024))]
    pub template: String,
    /// How many VMs to keep (at least 1). Also set by `kubectl scale vg/NAME --replicas=N`.
    /// Scaling down removes the highest-numbered VMs first.
    #[schemars(range(min = 1))]
    pub replicas: i32,
}

/// What the operator observed, written by bosun only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = no_defaults)]
pub struct VmGroupStatus {
    /// PENDING (being created or changed), RUNNING (every VM exists, shaped and powered on),
    /// ERROR (see lastMessage and the Degraded condition) or DELETING.
    #[serde(default)]
    pub phase: String,
    /// VMs of the group that exist with the wanted shape and are powered on.
    #[serde(default)]
    pub current_replicas: i32,
    /// VMs the spec asks for (the scale subresource's status replicas, as in the seed).
    #[serde(default)]
    pub desired_replicas: i32,
    /// The last thing that happened, or what is wrong, in words.
    #[serde(default)]
    pub last_message: String,
    /// Ready, Degraded and ForeignObjects, each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The vCenter folder holding the group's VMs, as a managed object reference (e.g.
    /// `group-v42`), recorded once bosun created and marked it: the group finds its folder by
    /// it, so a changed parent folder setting neither loses nor duplicates its VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Status is written by the operator only; schema defaults there serve no one, and the API
/// server refuses the `null` defaults schemars derives for `#[serde(default)]` strings.
fn no_defaults(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for (_, p) in props.iter_mut() {
            if let Some(o) = p.as_object_mut() {
                o.remove("default");
            }
        }
    }
}
