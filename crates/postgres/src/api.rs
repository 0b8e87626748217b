//! The PostgresCluster custom resource, `postgresclusters.lukeb0nd.com/v1` (seed 003's group
//! and kind).
//!
//! The seed's fields come first (`size`, `version`, `paused` and the pod policy, as in
//! etcd-operator); the rest is what a DBA who runs CloudNativePG expects: storage, PostgreSQL
//! parameters, bootstrap from initdb or from a backup, backups, synchronous replication,
//! failover delay, switchover and fencing. Bounds the schema can say are in the schema (the API
//! server refuses them); the rest is [`crate::validate`]'s. Every field carries a doc comment:
//! it is the schema's description, shown by `kubectl explain`.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Fewest and most instances of a cluster.
pub const MIN_SIZE: i32 = 1;
pub const MAX_SIZE: i32 = 32;
/// PostgreSQL majors the operator knows how to run.
pub const MIN_VERSION: i32 = 13;
pub const MAX_VERSION: i32 = 17;

#[allow(clippy::duplicated_attributes)] // repeated printcolumn(...) attributes
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "lukeb0nd.com",
    version = "v1",
    kind = "PostgresCluster",
    plural = "postgresclusters",
    shortname = "pgc",
    namespaced,
    status = "PostgresClusterStatus",
    scale(
        spec_replicas_path = ".spec.size",
        status_replicas_path = ".status.size",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyInstances",
        description = "instances that are ready"
    ),
    printcolumn(
        name = "Primary",
        type_ = "string",
        json_path = ".status.currentPrimary"
    ),
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(name = "Version", type_ = "integer", json_path = ".spec.version"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A PostgreSQL cluster: one primary and streaming replicas, with failover and backups"
)]
/// The PostgreSQL cluster to run: how many instances, which PostgreSQL, where its data lives,
/// how it is bootstrapped and backed up.
#[serde(rename_all = "camelCase")]
// Cross-field rules the API server checks (CEL), so that a bad edit is refused before it is
// stored; validate.rs keeps the same checks for a server without them.
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.replication) || !has(self.replication.synchronous) || self.replication.synchronous < (has(self.size) ? self.size : 1)",
        "message": "spec.replication.synchronous must be below spec.size: each synchronous standby is a replica"
    },
    {
        "rule": "!has(self.switchoverTo) || !has(self.fencedInstances) || !(self.switchoverTo in self.fencedInstances || '*' in self.fencedInstances)",
        "message": "spec.switchoverTo names a fenced instance: a fenced instance cannot become the primary"
    }
]))]
pub struct PostgresClusterSpec {
    /// Instances of the cluster: one primary and size-1 streaming replicas (1-32, default 1).
    /// Also set by `kubectl scale pgc/NAME --replicas=N`. Scaling down removes replicas one at a
    /// time, never the primary.
    #[serde(default = "default_size")]
    #[schemars(range(min = 1, max = 32))]
    pub size: i32,
    /// PostgreSQL major version (13-17, default 15). The image is `postgres:<version>` unless
    /// `image` is set. Fixed once the cluster exists: a change is refused until major upgrades
    /// are supported.
    #[serde(default = "default_version")]
    #[schemars(range(min = 13, max = 17))]
    pub version: i32,
    /// Container image of the instances (default `postgres:<version>`). It must hold the
    /// PostgreSQL `version` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Reconcile nothing while true (etcd-operator's `paused`); the status reports
    /// `controlPaused`. Running instances keep running.
    #[serde(default)]
    pub paused: bool,
    /// Where and how the instances' pods run.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub pod: PodPolicy,
    /// Each instance's data volume.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub storage: Storage,
    /// PostgreSQL's own configuration.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub postgresql: PostgresqlConfig,
    /// How the first instance gets its data: exactly one of `initdb` (a new, empty database;
    /// the default when `bootstrap` is absent) or `recovery` (restored from a backup). Read
    /// once, when the cluster is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    /// Base backups and continuous WAL archiving. Absent: no backups (and no recovery when
    /// every instance's data is lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<Backup>,
    /// Streaming replication between the primary and the replicas.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub replication: Replication,
    /// Seconds the primary must stay unreachable before a replica is promoted in its place
    /// (0-3600, default 10). Whatever the delay, the primary must also be missed on 3
    /// consecutive polls: one slow answer (a CPU stall, a slow disk) never fails it over.
    #[serde(default = "default_failover_delay")]
    #[schemars(range(min = 0, max = 3600), extend("default" = 10))]
    pub failover_delay_seconds: i32,
    /// Seconds an instance's start (crash recovery after a kill or an out-of-memory, a
    /// replica reaching a consistent state, a demotion's restart) may go **without its
    /// recovery advancing** before it is given up and the container restarted (1-604800,
    /// default 300). A recovery that keeps advancing is never cut short. A change reaches
    /// the pods through the rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub start_timeout_seconds: Option<i32>,
    /// Request a switchover: the name of the instance (e.g. `NAME-3`) to become the primary.
    /// The current primary is demoted only once the target is a ready, caught-up replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub switchover_to: Option<String>,
    /// Instances to fence: PostgreSQL is stopped on them and nothing is promoted there, but
    /// their pods and data stay. `*` fences every instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fenced_instances: Vec<String>,
    /// How the primary is updated when its pod must be replaced (a new image, resources, pod
    /// labels or annotations, a parameter that needs a restart): `unsupervised` (default)
    /// switches over to an updated replica by itself; `supervised` updates the replicas, then
    /// waits for `switchoverTo` (the `PodsUpToDate` condition names the instances to choose
    /// from).
    #[serde(default, skip_serializing_if = "is_default")]
    pub primary_update_strategy: PrimaryUpdateStrategy,
}

/// Who decides when the primary of a rolling update is switched over.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum PrimaryUpdateStrategy {
    #[default]
    Unsupervised,
    Supervised,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn default_size() -> i32 {
    1
}

fn default_version() -> i32 {
    15
}

/// Longer than a container restart of the primary (seconds), which must not fail it over.
pub const DEFAULT_FAILOVER_DELAY_SECONDS: i32 = 10;

fn default_failover_delay() -> i32 {
    DEFAULT_FAILOVER_DELAY_SECONDS
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Where and how the instances' pods run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PodPolicy {
    /// Nodes the instances may run on, by label (as a pod's `nodeSelector`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Keep instances on different nodes: `Preferred` (default; the scheduler tries),
    /// `Required` (an instance waits rather than share a node) or `None`.
    pub anti_affinity: AntiAffinity,
    /// Container requests and limits of PostgreSQL (none by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Labels added to every instance's pod.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to every instance's pod.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

// Container requests and limits: the runtime's type, shared with the BookStore.
pub use bosun_runtime::resources::{Qty, Resources};

/// How strongly instances are kept off each other's nodes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum AntiAffinity {
    #[default]
    Preferred,
    Required,
    None,
}

/// Each instance's data volume (a PersistentVolumeClaim per instance, kept when its pod dies).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Storage {
    /// Volume size per instance, a Kubernetes quantity such as 10Gi (default 1Gi, at least
    /// 256Mi). Can grow, never shrink.
    #[schemars(length(min = 1, max = 32))]
    pub size: String,
    /// StorageClass of the volumes (default: the cluster's default class). Fixed once created.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
}

impl Default for Storage {
    fn default() -> Self {
        Storage {
            size: "1Gi".into(),
            storage_class_name: None,
        }
    }
}

/// PostgreSQL's own configuration.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PostgresqlConfig {
    /// `postgresql.conf` parameters, name to value (e.g. `shared_buffers: 256MB`). Parameters
    /// the operator owns are refused: listen_addresses, port, unix_socket_directories,
    /// primary_conninfo, primary_slot_name, archive_mode, archive_command, restore_command,
    /// recovery_target*, wal_level, hot_standby, wal_log_hints, max_wal_senders,
    /// max_replication_slots, synchronous_standby_names, data_directory, hba_file, ident_file,
    /// config_file, ssl*, cluster_name, logging_collector.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// How the first instance gets its data: exactly one of `initdb` or `recovery`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.initdb) != has(self.recovery)",
    "message": "spec.bootstrap: set exactly one of initdb or recovery"
}]))]
pub struct Bootstrap {
    /// Create a new, empty database cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initdb: Option<InitDb>,
    /// Restore from a backup (base backup plus archived WAL), optionally to a point in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
}

/// A new database cluster, made by `initdb`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct InitDb {
    /// Application database created at bootstrap (default `app`).
    #[schemars(length(min = 1, max = 63))]
    pub database: String,
    /// Owner of the application database, a login role (default `app`).
    #[schemars(length(min = 1, max = 63))]
    pub owner: String,
    /// Enable data page checksums (default true).
    pub data_checksums: bool,
    /// Locale of the new cluster (default `C`).
    #[schemars(length(min = 1, max = 64))]
    pub locale: String,
}

impl Default for InitDb {
    fn default() -> Self {
        InitDb {
            database: "app".into(),
            owner: "app".into(),
            data_checksums: true,
            locale: "C".into(),
        }
    }
}

/// A restore from the backups of a cluster (this one or another), optionally stopping at a
/// point in time (at most one target).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!(has(self.targetTime) && has(self.targetLsn))",
    "message": "spec.bootstrap.recovery: set at most one of targetTime or targetLsn"
}]))]
pub struct Recovery {
    /// The store holding the backups to restore.
    pub store: BackupStore,
    /// Whose backups to restore: the name of the cluster that wrote them (default: this
    /// cluster's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: Option<String>,
    /// Stop replaying WAL at this time (RFC 3339, e.g. `2024-05-01T12:00:00Z`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_time: Option<String>,
    /// Stop replaying WAL at this WAL position (e.g. `0/3000060`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_lsn: Option<String>,
}

/// Base backups and continuous WAL archiving: WAL is archived whenever a store is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Backup {
    /// Where base backups and archived WAL are written.
    pub store: BackupStore,
    /// When to take base backups, a cron expression of five fields (e.g. `0 3 * * *`; default:
    /// none, WAL archiving only, plus one base backup when the cluster is created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub schedule: Option<String>,
    /// How long base backups are kept, in days (`7d`), weeks (`4w`) or months (`3m`) (default
    /// `30d`). WAL older than the oldest kept base backup is removed with it.
    #[serde(default = "default_retention")]
    #[schemars(length(min = 2, max = 8))]
    pub retention: String,
}

fn default_retention() -> String {
    "30d".into()
}

/// A backup store: exactly one of `volume` or `s3`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.volume) != has(self.s3)",
    "message": "the backup store: set exactly one of volume or s3"
}]))]
pub struct BackupStore {
    /// A PersistentVolumeClaim of its own holding base backups and the WAL archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<VolumeStore>,
    /// An S3-compatible object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Store>,
}

/// Backups on a claim of their own (`<cluster>-backup`, kept when the cluster is deleted).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStore {
    /// Size of the backup volume, a Kubernetes quantity (e.g. 20Gi). Can grow, never shrink.
    #[schemars(length(min = 1, max = 32))]
    pub size: String,
    /// StorageClass of the backup volume (default: the cluster's default class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
}

/// An S3-compatible object store.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Store {
    /// Endpoint URL (e.g. `https://s3.eu-west-1.amazonaws.com` or a MinIO URL).
    #[schemars(length(min = 1, max = 2048))]
    pub endpoint: String,
    /// Bucket name.
    #[schemars(length(min = 3, max = 63))]
    pub bucket: String,
    /// Key prefix inside the bucket (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub prefix: Option<String>,
    /// Region (default `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,
    /// A Secret in the cluster's namespace with `accessKeyId` and `secretAccessKey`.
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: String,
    /// Part size of multipart uploads, a Kubernetes quantity from 5Mi to 5Gi (default 64Mi).
    /// Files larger than it (base backups) are uploaded in parts of this size, one part in
    /// memory at a time; it grows when a file would need more than 10,000 parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub part_size: Option<String>,
}

/// Streaming replication between the primary and the replicas.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Replication {
    /// Replicas that must confirm each commit before it is acknowledged (0-31, default 0:
    /// asynchronous replication). Must be below `size`.
    #[schemars(range(min = 0, max = 31))]
    pub synchronous: i32,
    /// How far (bytes of WAL) a replica may be behind the newest position known of the
    /// cluster and still be promoted by a failover (default 16Mi, one WAL segment; as
    /// Patroni's `maximum_lag_on_failover`). A replica further behind is never promoted:
    /// the operator waits for the old primary instead of losing that much.
    #[serde(default = "default_max_failover_lag")]
    #[schemars(range(min = 0), extend("default" = 16777216))]
    pub max_failover_lag_bytes: i64,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            synchronous: 0,
            max_failover_lag_bytes: default_max_failover_lag(),
        }
    }
}

fn default_max_failover_lag() -> i64 {
    16 << 20
}

/// What the operator observed and decided, written by bosun only. Every decision in progress
/// (a failover, a switchover, a scale step) is recorded here, none only in the operator's
/// memory.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = no_defaults)]
pub struct PostgresClusterStatus {
    /// Creating, Scaling, Healthy, FailingOver, SwitchingOver, Recovering, Paused, Failed or
    /// Updating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Why the cluster is in its phase, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_reason: Option<String>,
    /// The instance that is the primary now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_primary: Option<String>,
    /// The instance that should be the primary; differs from `currentPrimary` during a
    /// failover or a switchover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_primary: Option<String>,
    /// Instances that exist (the scale subresource's status replicas).
    #[serde(default)]
    pub size: i32,
    /// Instances that are ready: the primary accepting writes, replicas streaming.
    #[serde(default)]
    pub ready_instances: i32,
    /// Label selector of the instances' pods (for the scale subresource).
    #[serde(default)]
    pub selector: String,
    /// Names of the ready and unready members (etcd-operator's `members`).
    #[serde(default)]
    pub members: Members,
    /// Each instance as last observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceStatus>,
    /// Serial number of the latest instance created; names are never reused.
    #[serde(default)]
    pub latest_instance: i64,
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The PostgreSQL major the cluster's data was made with, recorded by the first cycle
    /// that accepts the spec: a `spec.version` that differs is refused (no major upgrades).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
    /// True while `spec.paused` is set and the operator reconciles nothing.
    #[serde(default)]
    pub control_paused: bool,
    /// Backups and WAL archiving, as last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupStatus>,
    /// Since when no instance has been seen running as the primary (RFC 3339): the failover
    /// delay counts from here, across operator restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_lost_since: Option<String>,
    /// Synchronous replication: the standbys the spec asks each commit to wait for, and
    /// those the primary waits for now (applied live; they differ only while it is applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<SynchronousStatus>,
    /// Consecutive polls in which no primary answered (0 while one does): a failover needs
    /// several, never one slow answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub primary_missed_polls: i32,
    /// The primary's WAL position when it was last seen: how far a failover candidate is
    /// behind is measured from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_last_lsn: Option<String>,
    /// The primary's pod that reported a clean shutdown while being deleted (its postgres
    /// exited on SIGTERM, and a pod being deleted never restarts): a failover then needs no
    /// isolation wait. Cleared when a primary runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_stopped_cleanly: Option<CleanStop>,
    /// The primary's PostgreSQL address when it was last seen running, and the operator's
    /// fence of it through SQL when its manager stopped answering while its pod was
    /// force-deleted or left on a lost node. Replaced when a primary runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_primary: Option<LastPrimary>,
    /// The seed being made (initdb, or a restore from the store) while no primary has run
    /// since: if its pod goes before it runs, it is made again as the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<SeedStatus>,
    /// The last spec the operator accepted (JSON). A later edit it refuses (a typo in a
    /// parameter, a smaller storage size) is named in the `SpecAccepted` condition, and the
    /// cluster — failover included — goes on being reconciled on this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_spec: Option<String>,
    /// `postgresql.parameters` as asked and as in effect on the primary, with the instances
    /// that still need a restart to apply them (the rolling update restarts them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParameterStatus>,
    /// Ready, Progressing, Recovering, ContinuousArchiving, LastBackupSucceeded,
    /// ArchiveReadable (with a backup store: False while a replica cannot read it),
    /// ParametersApplied and PodsUpToDate, each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A primary's pod whose clean shutdown the operator read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CleanStop {
    /// The instance.
    pub instance: String,
    /// The UID of its pod that stopped (a new pod on the claim is another).
    pub pod_uid: String,
}

/// Where the primary's PostgreSQL was last seen, and what the operator's fence through it
/// did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct LastPrimary {
    /// The instance.
    pub instance: String,
    /// Its PostgreSQL's `host:port` (its pod IP then).
    pub address: String,
    /// The fence through PostgreSQL: absent until one is decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql_fence: Option<SqlFenceState>,
    /// What the fence found there, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql_fence_message: Option<String>,
}

/// The seed instance being made.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct SeedStatus {
    /// The instance.
    pub instance: String,
    /// It restores from a backup store (else initdb).
    #[serde(default)]
    pub restore: bool,
}

/// The operator's fence of an old primary through its PostgreSQL.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SqlFenceState {
    /// Decided and recorded; not known to have completed (tried again).
    Fencing,
    /// It answered as the primary and its server was stopped.
    Stopped,
    /// Nothing answered there as this cluster's primary: the isolation wait applies.
    Unreachable,
}

/// One PostgreSQL parameter: the spec's value and the one in effect.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ParameterStatus {
    /// The parameter's name (lower case).
    pub name: String,
    /// `spec.postgresql.parameters[name]`; absent: removed from the spec, not yet reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// What the primary uses now (`SHOW`); absent while unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<String>,
    /// Instances that hold the new value but need a restart to use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_restart: Vec<String>,
}

/// `replication.synchronous` as asked and as applied.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct SynchronousStatus {
    /// `spec.replication.synchronous`.
    pub desired: i32,
    /// What the primary applies (`synchronous_standby_names`); absent while unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<i32>,
}

/// The cluster's phase.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    Creating,
    Scaling,
    Healthy,
    FailingOver,
    SwitchingOver,
    Recovering,
    Paused,
    Failed,
    /// A rolling update replaces the pods one at a time (or parameters are being set).
    Updating,
}

/// Ready and unready members by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct Members {
    /// Members that are ready.
    #[serde(default)]
    pub ready: Vec<String>,
    /// Members that exist but are not ready.
    #[serde(default)]
    pub unready: Vec<String>,
}

/// One instance as last observed through its instance manager.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// The instance's name (also its pod's and claim's).
    pub name: String,
    /// primary, replica, fenced or unknown.
    pub role: String,
    /// The WAL timeline the instance is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Kubernetes knows no `uint32` format (the API server warns on it): int64, at least 0.
    #[schemars(with = "Option<i64>", range(min = 0))]
    pub timeline: Option<u32>,
    /// The instance's WAL position: written (primary) or replayed (replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsn: Option<String>,
    /// The pod's IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// Whether the instance is ready.
    #[serde(default)]
    pub ready: bool,
}

/// Backups and WAL archiving, as last observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The earliest point in time the cluster can be restored to (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_recoverability_point: Option<String>,
    /// When the last base backup succeeded (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_backup: Option<String>,
    /// When the last base backup failed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_backup: Option<String>,
    /// Why the last base backup failed, as the primary that ran it reported. Kept here
    /// until a later backup succeeds: the next primary, or the operator restarted, knows of
    /// the failure only from this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_backup_message: Option<String>,
    /// Name of the last WAL segment archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_wal: Option<String>,
    /// When the last WAL segment was archived (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_wal_time: Option<String>,
    /// The last value of the `postgres.lukeb0nd.com/backup-request` annotation a base
    /// backup was started for (a new value requests another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup_request: Option<String>,
    /// The time of the last scheduled base backup started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_backup: Option<String>,
}

/// Status is written by the operator only; schema defaults there serve no one. An optional
/// enum (`phase`) is left without `null` among its values: kube-apiserver 1.20 refuses a CRD
/// whose schema holds one ("per-version schemas may not all be set to identical values": a
/// null value never compares equal to itself there); absent is how it is unset.
fn no_defaults(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for (_, p) in props.iter_mut() {
            if let Some(o) = p.as_object_mut() {
                o.remove("default");
                if let Some(values) = o.get_mut("enum").and_then(|e| e.as_array_mut()) {
                    values.retain(|v| !v.is_null());
                    o.remove("nullable");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// Every property of the schema, at any depth, has a description (`kubectl explain`).
    #[test]
    fn every_field_is_documented() {
        let crd = PostgresCluster::crd();
        let v = serde_json::to_value(&crd).expect("crd as json");
        let schema = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        let mut missing = Vec::new();
        walk(&schema["spec"], "spec", &mut missing);
        walk(&schema["status"], "status", &mut missing);
        assert!(missing.is_empty(), "undocumented fields: {missing:?}");
        // Deep enough to reach the backup store's fields: the walk really descends.
        assert!(
            schema["spec"]["properties"]["backup"]["properties"]["store"]["properties"]["s3"]
                ["properties"]["bucket"]["description"]
                .is_string()
        );
    }

    fn walk(node: &serde_json::Value, at: &str, missing: &mut Vec<String>) {
        if let Some(props) = node.get("properties").and_then(|p| p.as_object()) {
            for (k, p) in props {
                let path = format!("{at}.{k}");
                // Conditions are Kubernetes' own type, documented upstream.
                if path == "status.conditions" {
                    continue;
                }
                if !p.get("description").is_some_and(|d| d.is_string()) {
                    missing.push(path.clone());
                }
                walk(p, &path, missing);
                if let Some(items) = p.get("items") {
                    walk(items, &path, missing);
                }
            }
        }
    }

    /// kube-apiserver 1.20 refuses a CRD with `null` among an enum's values.
    #[test]
    fn no_enum_holds_null() {
        let text = serde_json::to_string(&PostgresCluster::crd()).expect("crd as json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        fn walk(v: &serde_json::Value, bad: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(o) => {
                    if let Some(e) = o.get("enum").and_then(|e| e.as_array()) {
                        if e.iter().any(|x| x.is_null()) {
                            bad.push(format!("{e:?}"));
                        }
                    }
                    o.values().for_each(|x| walk(x, bad));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, bad)),
                _ => {}
            }
        }
        let mut bad = Vec::new();
        walk(&v, &mut bad);
        assert!(bad.is_empty(), "enums with null: {bad:?}");
    }

    #[test]
    fn crd_shape() {
        let crd = PostgresCluster::crd();
        assert_eq!(crd.spec.group, "lukeb0nd.com");
        assert_eq!(crd.spec.scope, "Namespaced");
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1");
        let sub = v.subresources.as_ref().expect("subresources");
        assert!(sub.status.is_some());
        let scale = sub.scale.as_ref().expect("scale");
        assert_eq!(scale.spec_replicas_path, ".spec.size");
        let cols: Vec<&str> = v
            .additional_printer_columns
            .as_ref()
            .expect("columns")
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            ["Phase", "Ready", "Primary", "Size", "Version", "Age"]
        );
    }

    #[test]
    fn empty_spec_takes_defaults() {
        let spec: PostgresClusterSpec = serde_json::from_str("{}").expect("empty spec");
        assert_eq!(spec.size, 1);
        assert_eq!(spec.version, 15);
        assert_eq!(spec.storage.size, "1Gi");
        assert!(spec.bootstrap.is_none());
    }
}
