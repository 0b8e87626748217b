//! The BookStore operator: the seeds' Python REST app backed by MongoDB, done right.
//!
//! Pipeline per BookStore (see [`controller`]): fetch → validate ([`validate`]) → build the
//! children ([`build`], pure) → guard data and ownership → apply → volume expansion
//! ([`resize`]) → write status ([`status`]).
pub mod api;
pub mod build;
pub mod controller;
pub mod error;
pub mod quantity;
pub mod rbac;
pub mod resize;
pub mod status;
pub mod validate;

pub use api::{BookStore, BookStoreSpec, BookStoreStatus};
pub use controller::BookStoreOperator;
