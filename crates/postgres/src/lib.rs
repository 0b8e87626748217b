//! The PostgresCluster operator (seed 003, issue 21), first slice: the API ([`api`]), the spec's
//! validation into a plan ([`validate`]) and the in-pod instance manager ([`instance`]), which
//! every instance's pod runs as its entry point (`bosun pg instance`).
pub mod api;
pub mod instance;
pub mod validate;

pub use api::{PostgresCluster, PostgresClusterSpec, PostgresClusterStatus};
