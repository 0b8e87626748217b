//! Kubernetes quantities to bytes: the runtime's (`bosun_runtime::quantity`), shared with the
//! PostgresCluster operator; re-exported here for the BookStore's own paths.
pub use bosun_runtime::quantity::*;
