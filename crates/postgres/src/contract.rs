//! The operator ↔ instance contract that both sides import: the environment the operator
//! writes into an instance's pod and the instance manager reads (see `instance::Args`).
//! Names only the two sides share live here; the `/state` JSON is `instance::InstanceState`.

/// `metadata.uid` of the PostgresCluster: the backup store's owner record must name it.
pub const ENV_CLUSTER_UID: &str = "BOSUN_PG_CLUSTER_UID";
/// The PostgresCluster's name.
pub const ENV_CLUSTER: &str = "BOSUN_PG_CLUSTER";
/// What the cluster may claim of a backup store not recorded as its own
/// (`backup::owner::Claim`: `empty`, `adopt`, `take-over`).
pub const ENV_STORE_CLAIM: &str = "BOSUN_PG_STORE_CLAIM";
/// Seconds a start (crash recovery included) may go without progress before it is given up.
pub const ENV_START_TIMEOUT: &str = "BOSUN_PG_START_TIMEOUT";
/// Seconds a primary may go without the operator reaching it before it stops accepting
/// writes (0: never).
pub const ENV_ISOLATION_TIMEOUT: &str = "BOSUN_PG_ISOLATION_TIMEOUT";
/// The isolation timeout the operator gives its pods: a primary that has had streaming
/// replicas, and then for this long neither a replica streaming nor an authenticated poll
/// from the operator, fences itself.
pub const ISOLATION_TIMEOUT_SECS: u64 = 10;
/// What the operator waits, since it last saw a primary that it cannot confirm stopped
/// (its pod gone, or stuck Terminating), before promoting another: the isolation timeout,
/// plus the time between the primary's last poll and the first missed one (a reconcile's
/// period and its `/state` timeout), plus a margin for clock rates.
pub const ISOLATION_WAIT_SECS: u64 = ISOLATION_TIMEOUT_SECS + 10;
