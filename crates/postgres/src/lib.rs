//! The PostgresCluster operator (seed 003, issue 21), first slice: the API ([`api`]), the spec's
//! validation into a plan ([`validate`]), the lifecycle's decision ([`lifecycle`], pure) and the
//! in-pod instance manager ([`instance`]), every instance's pod's entry point (`bosun pg
//! instance`). The controller that applies the lifecycle's actions to pods and claims is the
//! next slice.
pub mod api;
pub mod backup;
pub mod controller;
pub mod instance;
pub mod lifecycle;
pub mod validate;

pub use api::{PostgresCluster, PostgresClusterSpec, PostgresClusterStatus};
pub use controller::PostgresOperator;
