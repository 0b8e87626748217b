/// The role replicas stream with.
pub const REPLICATION_USER: &str = "streaming_replica";
