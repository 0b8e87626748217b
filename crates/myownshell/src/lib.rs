//! The MyOwnShell operator from seed 004: a `MyOwnShell` with `spec.size` gets a Deployment of
//! that many busybox pods running the seed's shell command. Owner references clean the
//! Deployment up; the seed's finalizer (which only logs) is kept, through kube-runtime's
//! `finalizer()` helper as the single top-level action.
pub mod api;
pub mod build;
pub mod controller;

pub use api::MyOwnShell;
pub use controller::MyOwnShellOperator;
