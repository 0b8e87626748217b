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
/// The start timeout when the spec gives none (and when a pod's env has none: pods made by
/// an older operator).
pub const DEFAULT_START_TIMEOUT_SECS: u64 = 300;
/// The longest start timeout the spec may give (a week): longer is a typo, not a recovery.
pub const MAX_START_TIMEOUT_SECS: i32 = 604_800;
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
/// The pod annotation with the hash of what the operator's current spec puts in a pod (its
/// template): a pod whose annotation differs is replaced by the rolling update.
pub const TEMPLATE_ANNOTATION: &str = "postgres.lukeb0nd.com/template";
/// Entries of `postgresql.auto.conf` that the operator sets itself (`ALTER SYSTEM`), never
/// from `postgresql.parameters`: they are neither compared with the spec nor reset.
pub const OPERATOR_AUTO_CONF: &[&str] = &["synchronous_standby_names"];
/// Parameters whose value is a list of quoted names: PostgreSQL would take the whole value,
/// given as one string, for one name; they are written as a list.
pub const LIST_PARAMETERS: &[&str] = &[
    "search_path",
    "shared_preload_libraries",
    "local_preload_libraries",
    "session_preload_libraries",
    "temp_tablespaces",
];

/// A list parameter's items (quotes and spaces around them removed); other parameters are
/// compared as written.
pub fn parameter_items(name: &str, value: &str) -> Vec<String> {
    if !LIST_PARAMETERS.contains(&name) {
        return vec![value.to_string()];
    }
    value
        .split(',')
        .map(|i| i.trim().trim_matches('"').to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

/// Whether the value written in `postgresql.auto.conf` is the one the spec asks for.
pub fn parameter_matches(name: &str, written: &str, desired: &str) -> bool {
    parameter_items(name, written) == parameter_items(name, desired)
}
