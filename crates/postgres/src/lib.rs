//! The PostgresCluster operator (seed 003, issue 21): the API ([`api`]), the spec's
//! validation into a plan ([`validate`]), the lifecycle's decision ([`lifecycle`], pure) and the
//! in-pod instance manager ([`instance`]), every instance's pod's entry point (`bosun pg
//! instance`), the controller ([`controller`]) and backups ([`backup`]: WAL archiving, base
//! backups, retention and restore, on a volume or, with the `s3` feature, an S3-compatible
//! store).
pub mod api;
pub mod backup;
pub mod contract;
pub mod controller;
pub mod instance;
pub mod lifecycle;
pub mod validate;

pub use api::{PostgresCluster, PostgresClusterSpec, PostgresClusterStatus};
pub use controller::PostgresOperator;
