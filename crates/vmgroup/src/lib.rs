//! The VmGroup operator from seed 002: a `VmGroup` keeps `replicas` vSphere VMs cloned from a
//! template, each with `cpu` CPUs and `memory` GB, powered on, in a folder of its own.
//!
//! Pipeline per VmGroup (see [`reconcile`]): validate the spec into a [`validate::Plan`]
//! (pure) → connect to vCenter with the credentials Secret ([`connect`]) → read the group's
//! VMs in one property retrieval → decide what to do ([`diff`], pure) → clone, reconfigure,
//! power on, remove → write status ([`status`]). The finalizer removes the VMs and the folder
//! before the VmGroup goes. Only what carries the group's mark ([`owner`]) is ever changed
//! or destroyed; [`migrate`] takes groups over from the seed's Go operator. [`operator`] says what the runtime runs; [`webhook`] holds the
//! defaulting and validating webhooks (optional, `BOSUN_VMGROUP_WEBHOOK_ADDR`).
pub mod api;
pub mod connect;
pub mod diff;
pub mod error;
pub mod migrate;
pub mod operator;
pub mod owner;
pub mod reason;
pub mod reconcile;
pub mod status;
pub mod validate;
pub mod webhook;

pub use api::{VmGroup, VmGroupSpec, VmGroupStatus};
pub use operator::{Settings, VmGroupOperator};
