//! The BookStore operator: the seeds' Python REST app backed by MongoDB, done right.
//!
//! Pipeline per BookStore (see [`reconcile`]): validate the spec into a [`validate::Plan`] →
//! build the children from it ([`build`], pure) → guard ownership and data → apply → volume
//! expansion ([`resize`], [`claims`]) → write status ([`status`]). [`operator`] says what the
//! runtime runs: the CRD ([`api`]), the RBAC ([`rbac`]) and the watches. [`convert`] converts
//! BookStores between the Helm/Ansible shape (`v1alpha1`) and `v1`, for the conversion webhook.
pub mod api;
pub mod build;
pub mod claims;
pub mod convert;
pub mod error;
pub mod names;
pub mod operator;
pub mod quantity;
pub mod rbac;
pub mod reason;
pub mod reconcile;
pub mod resize;
pub mod status;
pub mod validate;
pub mod webhook;

pub use api::{BookStore, BookStoreSpec, BookStoreStatus};
pub use operator::BookStoreOperator;
