//! A PostgresCluster in, the [`Plan`] out (pure): every check the schema cannot express, and
//! every value the operator needs, parsed once. The lifecycle and the builders read the plan,
//! never the raw spec.
//!
//! What was observed of the running cluster (its PostgreSQL major, its volumes' size) comes in
//! as [`Observed`], so that a major-version change or a shrink is refused here too, with the
//! message the user sees in the condition.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bosun_runtime::quantity;
use kube::ResourceExt;

use crate::api::{
    AntiAffinity, BackupStore, PodPolicy, PostgresCluster, PostgresClusterStatus, MAX_SIZE,
    MAX_VERSION, MIN_SIZE, MIN_VERSION,
};

/// What the operator saw of the cluster as it runs; `None` where nothing exists yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The PostgreSQL major the instances' data was made with.
    pub version: Option<i32>,
    /// The status shows this cluster archived WAL to, or has a backup in, its store (one
    /// written before stores recorded their owner is then its own).
    pub store_used: bool,
    /// The smallest data volume's capacity, in bytes.
    pub storage_bytes: Option<u128>,
}

impl Observed {
    /// What the status recorded (the major the data was made with) and the data volumes'
    /// smallest size.
    pub fn of(status: Option<&PostgresClusterStatus>, storage_bytes: Option<u128>) -> Self {
        Observed {
            version: status.and_then(|s| s.version),
            store_used: status.and_then(|s| s.backup.as_ref()).is_some_and(|b| {
                b.last_archived_wal.is_some() || b.last_successful_backup.is_some()
            }),
            storage_bytes,
        }
    }
}

/// Everything the operator needs from a valid PostgresCluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub name: String,
    pub namespace: String,
    pub size: u32,
    pub version: i32,
    pub image: String,
    pub paused: bool,
    pub pod: PodPolicy,
    pub anti_affinity: AntiAffinity,
    pub storage: Size,
    pub storage_class: Option<String>,
    /// User parameters, none of them one the operator owns.
    pub parameters: BTreeMap<String, String>,
    pub bootstrap: BootstrapPlan,
    pub backup: Option<BackupPlan>,
    /// Synchronous standbys required per commit (0: asynchronous).
    pub synchronous: u32,
    pub failover_delay: Duration,
    /// How long a start may go without its recovery advancing (None: not given, the
    /// instance's default, `contract::DEFAULT_START_TIMEOUT_SECS`).
    pub start_timeout: Option<Duration>,
    /// A failover candidate at most this many bytes of WAL behind.
    pub max_failover_lag: u64,
    /// The serial of the instance a switchover is asked to.
    pub switchover_to: Option<u32>,
    pub fencing: Fencing,
    /// A rolling update waits for `switchoverTo` before it replaces the primary.
    pub supervised_primary_update: bool,
}

/// A volume size, as written and in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size {
    pub text: String,
    pub bytes: u128,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapPlan {
    InitDb {
        database: String,
        owner: String,
        data_checksums: bool,
        locale: String,
    },
    Recovery {
        store: StorePlan,
        /// Whose backups: the cluster that wrote them.
        source_cluster: String,
        target: Option<RecoveryTarget>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryTarget {
    /// RFC 3339, as given (already checked).
    Time(String),
    /// A WAL position `X/Y`.
    Lsn(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorePlan {
    Volume {
        size: Size,
        storage_class: Option<String>,
    },
    S3 {
        endpoint: String,
        bucket: String,
        prefix: String,
        region: String,
        credentials_secret: String,
        /// Bytes per part of a multipart upload.
        part_size: u64,
    },
}

/// Multipart upload parts: S3's bounds, and the default.
pub const MIN_PART_SIZE: u128 = 5 << 20;
pub const MAX_PART_SIZE: u128 = 5 << 30;
pub const DEFAULT_PART_SIZE: u64 = 64 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupPlan {
    pub store: StorePlan,
    /// What this cluster may claim of a store not recorded as its own.
    pub claim: crate::backup::owner::Claim,
    /// Five cron fields, as given.
    pub schedule: Option<String>,
    pub retention_days: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fencing {
    None,
    All,
    /// Instance serials.
    Some(BTreeSet<u32>),
}

/// Why a spec is refused: one variant per rule, the message names the field and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("metadata.name {0:?} is too long: at most {MAX_NAME} characters, so that instance names `<name>-<n>` and replication slot names fit")]
    NameTooLong(String),
    #[error("spec.size {0} is out of range: {MIN_SIZE}-{MAX_SIZE}")]
    Size(i32),
    #[error("spec.version {0} is not supported: PostgreSQL {MIN_VERSION}-{MAX_VERSION}")]
    Version(i32),
    #[error("spec.version cannot change from {running} to {wanted}: major upgrades are not supported yet; set spec.version back to {running}")]
    MajorVersionChange { running: i32, wanted: i32 },
    #[error("spec.image {0:?} is not an image reference (no spaces or control characters, 1-512 characters)")]
    Image(String),
    #[error("{field} {value:?} is not a Kubernetes quantity (e.g. 10Gi)")]
    Quantity { field: &'static str, value: String },
    #[error("{field} {value} is too small: at least {min}")]
    TooSmall {
        field: &'static str,
        value: String,
        min: &'static str,
    },
    #[error("spec.storage.size cannot shrink from {current} to {wanted}: volumes only grow")]
    StorageShrink { current: String, wanted: String },
    #[error("spec.postgresql.parameters.{0} is managed by the operator and cannot be set")]
    ReservedParameter(String),
    #[error("spec.postgresql.parameters: {0:?} is not a PostgreSQL parameter name (letters, digits, `_` and `.`)")]
    ParameterName(String),
    #[error("spec.postgresql.parameters.{0}: the value holds a control character or is longer than 4096 characters")]
    ParameterValue(String),
    #[error("spec.bootstrap: set exactly one of initdb or recovery, not both")]
    BootstrapBoth,
    #[error("spec.bootstrap: set one of initdb or recovery (or leave bootstrap out for initdb)")]
    BootstrapNone,
    #[error("spec.bootstrap.initdb.{field} {value:?} is not usable: {why}")]
    InitDb {
        field: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("spec.bootstrap.recovery: set at most one of targetTime or targetLsn")]
    RecoveryTargets,
    #[error("spec.bootstrap.recovery.targetTime {0:?} is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z)")]
    TargetTime(String),
    #[error("spec.bootstrap.recovery.targetLsn {0:?} is not a WAL position (e.g. 0/3000060)")]
    TargetLsn(String),
    #[error("spec.bootstrap.recovery.clusterName {0:?} is not a cluster name")]
    SourceCluster(String),
    #[error("{0}: set exactly one of volume or s3, not both")]
    StoreBoth(&'static str),
    #[error("{0}: set one of volume or s3")]
    StoreNone(&'static str),
    #[error("{field} {value:?} is not usable: {why}")]
    S3 {
        field: &'static str,
        value: String,
        why: &'static str,
    },
    #[error(
        "spec.backup.schedule {0:?} is not a cron expression of five fields (e.g. `0 3 * * *`)"
    )]
    Schedule(String),
    #[error("spec.backup.retention {0:?} is not a duration such as 7d, 4w or 3m (1-9999)")]
    Retention(String),
    #[error("spec.replication.synchronous {synchronous} needs more replicas: size {size} has {replicas}; set size to at least {need}", replicas = size - 1, need = synchronous + 1)]
    Synchronous { synchronous: i32, size: i32 },
    #[error("spec.failoverDelaySeconds {0} is out of range: 0-3600")]
    FailoverDelay(i32),
    #[error("spec.startTimeoutSeconds {0} is out of range: 1-604800 (seconds a start may go without its recovery advancing; omit it for 300)")]
    StartTimeout(i32),
    #[error("spec.replication.maxFailoverLagBytes {0} is negative: give 0 or more bytes")]
    MaxFailoverLag(i64),
    #[error("spec.switchoverTo {0:?} is fenced (spec.fencedInstances): a fenced instance cannot become the primary; unfence it or choose another")]
    SwitchoverToFenced(String),
    #[error("spec.switchoverTo {0:?} is not an instance of this cluster (`<name>-<n>`)")]
    SwitchoverTarget(String),
    #[error(
        "spec.fencedInstances: {0:?} is not an instance of this cluster (`<name>-<n>` or `*`)"
    )]
    FencedInstance(String),
    #[error("spec.pod.{field}: {key:?} is not a label key")]
    LabelKey { field: &'static str, key: String },
}

/// Instance names `<name>-<serial>` must stay DNS labels (63) and slot names `bosun_<...>`.
pub const MAX_NAME: usize = 50;
/// PostgreSQL does not start well on less.
const MIN_STORAGE: u128 = 256 << 20;
const MIN_STORAGE_TEXT: &str = "256Mi";

/// Parameters the operator sets itself (per instance, on the command line) or must control
/// for replication, archiving and failover to stay safe.
const RESERVED: &[&str] = &[
    "listen_addresses",
    "port",
    "unix_socket_directories",
    "unix_socket_group",
    "unix_socket_permissions",
    "primary_conninfo",
    "primary_slot_name",
    "promote_trigger_file",
    "archive_mode",
    "archive_command",
    "archive_library",
    "restore_command",
    "archive_cleanup_command",
    "recovery_end_command",
    "wal_level",
    "hot_standby",
    "wal_log_hints",
    "max_wal_senders",
    "max_replication_slots",
    "synchronous_standby_names",
    "data_directory",
    "hba_file",
    "ident_file",
    "config_file",
    "external_pid_file",
    "cluster_name",
    "logging_collector",
    "log_directory",
    "restart_after_crash",
];
/// Families of reserved parameters.
const RESERVED_PREFIXES: &[&str] = &["recovery_target", "ssl"];

/// The spec → plan.
/// A store the spec restores this very cluster from is taken over (the restored database
/// continues the old one); a store without an owner record is adopted only when the status
/// shows this cluster wrote to it; otherwise only an empty store is claimed (issue 32, H12).
fn store_claim(
    bootstrap: &BootstrapPlan,
    backup: &StorePlan,
    name: &str,
    observed: &Observed,
) -> crate::backup::owner::Claim {
    use crate::backup::owner::Claim;
    let same = |from: &StorePlan| match (from, backup) {
        (StorePlan::Volume { .. }, StorePlan::Volume { .. }) => true,
        (
            StorePlan::S3 {
                endpoint: e1,
                bucket: b1,
                prefix: p1,
                ..
            },
            StorePlan::S3 {
                endpoint: e2,
                bucket: b2,
                prefix: p2,
                ..
            },
        ) => e1 == e2 && b1 == b2 && p1.trim_matches('/') == p2.trim_matches('/'),
        _ => false,
    };
    match bootstrap {
        BootstrapPlan::Recovery {
            store,
            source_cluster,
            ..
        } if source_cluster == name && same(store) => Claim::TakeOver,
        _ if observed.store_used => Claim::Adopt,
        _ => Claim::Empty,
    }
}

pub fn plan(pc: &PostgresCluster, observed: &Observed) -> Result<Plan, Invalid> {
    let name = pc.name_any();
    if name.len() > MAX_NAME {
        return Err(Invalid::NameTooLong(name));
    }
    let s = &pc.spec;
    if !(MIN_SIZE..=MAX_SIZE).contains(&s.size) {
        return Err(Invalid::Size(s.size));
    }
    if !(MIN_VERSION..=MAX_VERSION).contains(&s.version) {
        return Err(Invalid::Version(s.version));
    }
    if let Some(running) = observed.version {
        if running != s.version {
            return Err(Invalid::MajorVersionChange {
                running,
                wanted: s.version,
            });
        }
    }
    let image = match &s.image {
        Some(i) => {
            if i.is_empty()
                || i.len() > 512
                || i.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(Invalid::Image(i.clone()));
            }
            i.clone()
        }
        None => format!("postgres:{}", s.version),
    };
    for (field, map) in [
        ("labels", &s.pod.labels),
        ("annotations", &s.pod.annotations),
    ] {
        if let Some(k) = map.keys().find(|k| !is_label_key(k)) {
            return Err(Invalid::LabelKey {
                field,
                key: k.clone(),
            });
        }
    }
    if let Some(k) = s.pod.node_selector.keys().find(|k| !is_label_key(k)) {
        return Err(Invalid::LabelKey {
            field: "nodeSelector",
            key: k.clone(),
        });
    }
    let storage = size("spec.storage.size", &s.storage.size)?;
    if let Some(current) = observed.storage_bytes {
        if storage.bytes < current {
            return Err(Invalid::StorageShrink {
                current: quantity::human(current),
                wanted: storage.text,
            });
        }
    }
    let parameters = parameters(&s.postgresql.parameters)?;
    let bootstrap = bootstrap(pc, &name)?;
    let backup = match &s.backup {
        None => None,
        Some(b) => Some(BackupPlan {
            claim: store_claim(
                &bootstrap,
                &store("spec.backup.store", &b.store)?,
                &name,
                observed,
            ),
            store: store("spec.backup.store", &b.store)?,
            schedule: match &b.schedule {
                Some(c) if !is_cron(c) => return Err(Invalid::Schedule(c.clone())),
                c => c.clone(),
            },
            retention_days: retention_days(&b.retention)
                .ok_or_else(|| Invalid::Retention(b.retention.clone()))?,
        }),
    };
    let sync = s.replication.synchronous;
    if sync < 0 || sync >= s.size {
        return Err(Invalid::Synchronous {
            synchronous: sync,
            size: s.size,
        });
    }
    if s.replication.max_failover_lag_bytes < 0 {
        return Err(Invalid::MaxFailoverLag(
            s.replication.max_failover_lag_bytes,
        ));
    }
    if !(0..=3600).contains(&s.failover_delay_seconds) {
        return Err(Invalid::FailoverDelay(s.failover_delay_seconds));
    }
    let start_timeout = match s.start_timeout_seconds {
        None => None,
        Some(t) if (1..=crate::contract::MAX_START_TIMEOUT_SECS).contains(&t) => {
            Some(Duration::from_secs(u64::from(t.unsigned_abs())))
        }
        Some(t) => return Err(Invalid::StartTimeout(t)),
    };
    let switchover_to = match &s.switchover_to {
        None => None,
        Some(t) => Some(serial_of(&name, t).ok_or_else(|| Invalid::SwitchoverTarget(t.clone()))?),
    };
    let fencing = if s.fenced_instances.is_empty() {
        Fencing::None
    } else if s.fenced_instances.iter().any(|f| f == "*") {
        Fencing::All
    } else {
        let mut set = BTreeSet::new();
        for f in &s.fenced_instances {
            set.insert(serial_of(&name, f).ok_or_else(|| Invalid::FencedInstance(f.clone()))?);
        }
        Fencing::Some(set)
    };
    // A switchover to a fenced instance would fence the primary, find no target, unfence it,
    // and start again: a write outage per turn (issue 32, M3).
    if let Some(t) = switchover_to {
        let fenced = match &fencing {
            Fencing::None => false,
            Fencing::All => true,
            Fencing::Some(set) => set.contains(&t),
        };
        if fenced {
            return Err(Invalid::SwitchoverToFenced(
                s.switchover_to.clone().unwrap_or_default(),
            ));
        }
    }
    Ok(Plan {
        namespace: pc.namespace().unwrap_or_default(),
        name,
        size: s.size.unsigned_abs(),
        version: s.version,
        image,
        paused: s.paused,
        pod: s.pod.clone(),
        anti_affinity: s.pod.anti_affinity,
        storage,
        storage_class: s.storage.storage_class_name.clone(),
        parameters,
        bootstrap,
        backup,
        synchronous: sync.unsigned_abs(),
        failover_delay: Duration::from_secs(u64::from(s.failover_delay_seconds.unsigned_abs())),
        start_timeout,
        max_failover_lag: s.replication.max_failover_lag_bytes.unsigned_abs(),
        switchover_to,
        fencing,
        supervised_primary_update: s.primary_update_strategy
            == crate::api::PrimaryUpdateStrategy::Supervised,
    })
}

/// The plan of the spec the status recorded as last accepted (`status.acceptedSpec`), for
/// a cluster whose current spec is refused: None when there is none, or it no longer
/// validates (then nothing can be reconciled).
pub fn last_good(pc: &PostgresCluster, observed: &Observed) -> Option<Plan> {
    let text = pc.status.as_ref()?.accepted_spec.as_deref()?;
    let spec: crate::api::PostgresClusterSpec = serde_json::from_str(text).ok()?;
    let mut accepted = pc.clone();
    accepted.spec = spec;
    plan(&accepted, observed).ok()
}

/// The serial of instance `<cluster>-<n>`, if `instance` names one.
pub fn serial_of(cluster: &str, instance: &str) -> Option<u32> {
    let n = instance.strip_prefix(cluster)?.strip_prefix('-')?;
    if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

fn size(field: &'static str, text: &str) -> Result<Size, Invalid> {
    let bytes = quantity::to_bytes(text).ok_or_else(|| Invalid::Quantity {
        field,
        value: text.to_string(),
    })?;
    if bytes < MIN_STORAGE {
        return Err(Invalid::TooSmall {
            field,
            value: text.to_string(),
            min: MIN_STORAGE_TEXT,
        });
    }
    Ok(Size {
        text: text.to_string(),
        bytes,
    })
}

fn parameters(given: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Invalid> {
    for (k, v) in given {
        let valid_name = k
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            && k.len() <= 63;
        if !valid_name {
            return Err(Invalid::ParameterName(k.clone()));
        }
        // PostgreSQL's names are case-insensitive: `Port` is `port`.
        let lower = k.to_ascii_lowercase();
        if RESERVED.contains(&lower.as_str())
            || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
        {
            return Err(Invalid::ReservedParameter(k.clone()));
        }
        if v.len() > 4096 || v.chars().any(|c| c.is_control()) {
            return Err(Invalid::ParameterValue(k.clone()));
        }
    }
    Ok(given
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect())
}

fn bootstrap(pc: &PostgresCluster, name: &str) -> Result<BootstrapPlan, Invalid> {
    let default_initdb = crate::api::InitDb::default();
    let (initdb, recovery) = match &pc.spec.bootstrap {
        None => (Some(&default_initdb), None),
        Some(b) => (b.initdb.as_ref(), b.recovery.as_ref()),
    };
    match (initdb, recovery) {
        (Some(_), Some(_)) => Err(Invalid::BootstrapBoth),
        (None, None) => Err(Invalid::BootstrapNone),
        (Some(i), None) => {
            for (field, value) in [("database", &i.database), ("owner", &i.owner)] {
                if !is_identifier(value) {
                    return Err(Invalid::InitDb {
                        field,
                        value: value.clone(),
                        why: "use lower-case letters, digits and `_`, starting with a letter (at most 63)",
                    });
                }
            }
            if ["postgres", "template0", "template1"].contains(&i.database.as_str()) {
                return Err(Invalid::InitDb {
                    field: "database",
                    value: i.database.clone(),
                    why: "PostgreSQL creates it itself; choose another name",
                });
            }
            if i.owner == "postgres" || i.owner == crate::instance::REPLICATION_USER {
                return Err(Invalid::InitDb {
                    field: "owner",
                    value: i.owner.clone(),
                    why: "the operator's own roles cannot own the application database",
                });
            }
            if i.locale.is_empty()
                || !i
                    .locale
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-@".contains(c))
            {
                return Err(Invalid::InitDb {
                    field: "locale",
                    value: i.locale.clone(),
                    why: "a locale name such as C or en_US.UTF-8",
                });
            }
            Ok(BootstrapPlan::InitDb {
                database: i.database.clone(),
                owner: i.owner.clone(),
                data_checksums: i.data_checksums,
                locale: i.locale.clone(),
            })
        }
        (None, Some(r)) => {
            let target = match (&r.target_time, &r.target_lsn) {
                (Some(_), Some(_)) => return Err(Invalid::RecoveryTargets),
                (Some(t), None) => {
                    if chrono::DateTime::parse_from_rfc3339(t).is_err() {
                        return Err(Invalid::TargetTime(t.clone()));
                    }
                    Some(RecoveryTarget::Time(t.clone()))
                }
                (None, Some(l)) => {
                    if !is_lsn(l) {
                        return Err(Invalid::TargetLsn(l.clone()));
                    }
                    Some(RecoveryTarget::Lsn(l.to_ascii_uppercase()))
                }
                (None, None) => None,
            };
            let source_cluster = match &r.cluster_name {
                None => name.to_string(),
                Some(c) if is_dns_label(c) => c.clone(),
                Some(c) => return Err(Invalid::SourceCluster(c.clone())),
            };
            Ok(BootstrapPlan::Recovery {
                store: store("spec.bootstrap.recovery.store", &r.store)?,
                source_cluster,
                target,
            })
        }
    }
}

fn store(field: &'static str, s: &BackupStore) -> Result<StorePlan, Invalid> {
    match (&s.volume, &s.s3) {
        (Some(_), Some(_)) => Err(Invalid::StoreBoth(field)),
        (None, None) => Err(Invalid::StoreNone(field)),
        (Some(v), None) => Ok(StorePlan::Volume {
            size: size("backup store volume size", &v.size)?,
            storage_class: v.storage_class_name.clone(),
        }),
        (None, Some(s3)) => {
            if !(s3.endpoint.starts_with("http://") || s3.endpoint.starts_with("https://"))
                || s3.endpoint.chars().any(|c| c.is_whitespace())
            {
                return Err(Invalid::S3 {
                    field: "s3.endpoint",
                    value: s3.endpoint.clone(),
                    why: "an http:// or https:// URL",
                });
            }
            let bucket_ok = (3..=63).contains(&s3.bucket.len())
                && s3
                    .bucket
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
                && !s3.bucket.starts_with(['-', '.'])
                && !s3.bucket.ends_with(['-', '.']);
            if !bucket_ok {
                return Err(Invalid::S3 {
                    field: "s3.bucket",
                    value: s3.bucket.clone(),
                    why: "3-63 lower-case letters, digits, `-` and `.`",
                });
            }
            if !is_dns_subdomain(&s3.credentials_secret) {
                return Err(Invalid::S3 {
                    field: "s3.credentialsSecret",
                    value: s3.credentials_secret.clone(),
                    why: "the name of a Secret",
                });
            }
            let part_size = match &s3.part_size {
                None => DEFAULT_PART_SIZE,
                Some(text) => quantity::to_bytes(text)
                    .filter(|b| (MIN_PART_SIZE..=MAX_PART_SIZE).contains(b))
                    .and_then(|b| u64::try_from(b).ok())
                    .ok_or_else(|| Invalid::S3 {
                        field: "s3.partSize",
                        value: text.clone(),
                        why: "a quantity from 5Mi to 5Gi",
                    })?,
            };
            Ok(StorePlan::S3 {
                part_size,
                endpoint: s3.endpoint.trim_end_matches('/').to_string(),
                bucket: s3.bucket.clone(),
                prefix: s3.prefix.clone().unwrap_or_default(),
                region: s3.region.clone().unwrap_or_else(|| "us-east-1".into()),
                credentials_secret: s3.credentials_secret.clone(),
            })
        }
    }
}

fn is_identifier(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn is_dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// `prefix/name` with a DNS-subdomain prefix and a 1-63 character name.
fn is_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(is_dns_subdomain)
        && (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn is_lsn(s: &str) -> bool {
    match s.split_once('/') {
        Some((a, b)) => [a, b]
            .iter()
            .all(|p| (1..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_hexdigit())),
        None => false,
    }
}

/// Five fields of digits, `*`, `/`, `-` and `,` (the forms base-backup schedules use).
fn is_cron(s: &str) -> bool {
    let fields: Vec<&str> = s.split_whitespace().collect();
    fields.len() == 5
        && fields
            .iter()
            .all(|f| f.chars().all(|c| c.is_ascii_digit() || "*/-,".contains(c)))
}

fn retention_days(s: &str) -> Option<u32> {
    let (n, unit) = s.split_at(s.len().checked_sub(1)?);
    if n.is_empty() || n.len() > 4 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u32 = n.parse().ok().filter(|n| *n > 0)?;
    match unit {
        "d" => Some(n),
        "w" => Some(n * 7),
        "m" => Some(n * 30),
        _ => None,
    }
}

/// The plan of a cluster `db/pg` with `spec` (tests of the modules that take a plan).
#[cfg(test)]
pub(crate) fn plan_of(spec: serde_json::Value) -> Plan {
    let pc = serde_json::from_value(serde_json::json!({
        "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
        "metadata": {"name": "pg", "namespace": "db"}, "spec": spec,
    }))
    .expect("cluster");
    plan(&pc, &Observed::default()).expect("valid")
}

#[cfg(test)]
mod tests {

    /// Issue 32, M1: a refused edit leaves the last accepted spec to reconcile on.
    #[test]
    fn a_refused_edit_falls_back_to_the_last_accepted_spec() {
        let mut pc: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "pg", "namespace": "db"},
            "spec": {"size": 2, "postgresql": {"parameters": {"work_mem": "4MB"}}},
        }))
        .expect("cluster");
        let good = plan(&pc, &Observed::default()).expect("valid");
        assert_eq!(last_good(&pc, &Observed::default()), None);
        pc.status = Some(crate::api::PostgresClusterStatus {
            accepted_spec: Some(serde_json::to_string(&pc.spec).expect("json")),
            ..Default::default()
        });
        pc.spec
            .postgresql
            .parameters
            .insert("work mem".into(), "8MB".into());
        assert!(plan(&pc, &Observed::default()).is_err());
        assert_eq!(last_good(&pc, &Observed::default()), Some(good));
    }
    use super::*;

    fn cluster(spec: serde_json::Value) -> PostgresCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1",
            "kind": "PostgresCluster",
            "metadata": {"name": "pg", "namespace": "db"},
            "spec": spec,
        }))
        .expect("a spec that deserializes")
    }

    fn refused(spec: serde_json::Value) -> Invalid {
        refused_with(spec, &Observed::default())
    }

    fn refused_with(spec: serde_json::Value, observed: &Observed) -> Invalid {
        match plan(&cluster(spec.clone()), observed) {
            Ok(p) => panic!("{spec} was accepted: {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn empty_spec_plans_a_single_initdb_instance() {
        let p = plan(&cluster(serde_json::json!({})), &Observed::default()).expect("valid");
        assert_eq!(p.size, 1);
        assert_eq!(p.image, "postgres:15");
        assert_eq!(p.storage.bytes, 1 << 30);
        assert_eq!(p.fencing, Fencing::None);
        assert!(
            matches!(p.bootstrap, BootstrapPlan::InitDb { ref database, .. } if database == "app")
        );
    }

    #[test]
    fn full_spec_is_parsed_once() {
        let p = plan(
            &cluster(serde_json::json!({
                "size": 3, "version": 16, "image": "registry.local/pg:16.2",
                "storage": {"size": "10Gi"},
                "postgresql": {"parameters": {"Shared_Buffers": "256MB"}},
                "bootstrap": {"recovery": {"store": {"volume": {"size": "5Gi"}}, "clusterName": "old", "targetLsn": "0/3000a60"}},
                "backup": {"store": {"s3": {"endpoint": "http://127.0.0.1:9000/", "bucket": "pg-backups", "credentialsSecret": "s3"}}, "schedule": "0 3 * * *", "retention": "2w"},
                "replication": {"synchronous": 1},
                "failoverDelaySeconds": 5,
                "startTimeoutSeconds": 3600,
                "switchoverTo": "pg-2",
                "fencedInstances": ["pg-1", "pg-3"],
            })),
            &Observed { version: Some(16), storage_bytes: Some(1 << 30), ..Default::default() },
        )
        .expect("valid");
        assert_eq!(p.image, "registry.local/pg:16.2");
        assert_eq!(
            p.parameters.get("shared_buffers").map(String::as_str),
            Some("256MB")
        );
        assert_eq!(
            p.bootstrap,
            BootstrapPlan::Recovery {
                store: StorePlan::Volume {
                    size: Size {
                        text: "5Gi".into(),
                        bytes: 5 << 30
                    },
                    storage_class: None
                },
                source_cluster: "old".into(),
                target: Some(RecoveryTarget::Lsn("0/3000A60".into())),
            }
        );
        let b = p.backup.expect("backup");
        assert_eq!(b.retention_days, 14);
        assert!(
            matches!(b.store, StorePlan::S3 { ref endpoint, ref region, .. } if endpoint == "http://127.0.0.1:9000" && region == "us-east-1")
        );
        assert_eq!(p.synchronous, 1);
        assert_eq!(p.failover_delay, Duration::from_secs(5));
        assert_eq!(p.start_timeout, Some(Duration::from_secs(3600)));
        assert_eq!(p.switchover_to, Some(2));
        assert_eq!(p.fencing, Fencing::Some([1, 3].into()));
    }

    #[test]
    fn star_fences_every_instance() {
        let p = plan(
            &cluster(serde_json::json!({"fencedInstances": ["*"]})),
            &Observed::default(),
        )
        .expect("valid");
        assert_eq!(p.fencing, Fencing::All);
    }

    #[test]
    fn bad_specs_are_refused_with_the_field_named() {
        use serde_json::json;
        let s3 = |endpoint: &str, bucket: &str, secret: &str| json!({"store": {"s3": {"endpoint": endpoint, "bucket": bucket, "credentialsSecret": secret}}});
        // (spec, the error expected, a piece of its message)
        let cases: Vec<(serde_json::Value, Invalid, &str)> = vec![
            (json!({"size": 0}), Invalid::Size(0), "spec.size 0"),
            (json!({"size": 33}), Invalid::Size(33), "1-32"),
            (json!({"version": 9}), Invalid::Version(9), "PostgreSQL 13-17"),
            (json!({"image": "postgres 15"}), Invalid::Image("postgres 15".into()), "spec.image"),
            (json!({"image": ""}), Invalid::Image("".into()), "spec.image"),
            (json!({"storage": {"size": "lots"}}), Invalid::Quantity { field: "spec.storage.size", value: "lots".into() }, "quantity"),
            (json!({"storage": {"size": "100Mi"}}), Invalid::TooSmall { field: "spec.storage.size", value: "100Mi".into(), min: "256Mi" }, "at least 256Mi"),
            (json!({"postgresql": {"parameters": {"listen_addresses": "*"}}}), Invalid::ReservedParameter("listen_addresses".into()), "managed by the operator"),
            (json!({"postgresql": {"parameters": {"PORT": "5433"}}}), Invalid::ReservedParameter("PORT".into()), "PORT"),
            (json!({"postgresql": {"parameters": {"archive_command": "cp %p /x"}}}), Invalid::ReservedParameter("archive_command".into()), "archive_command"),
            (json!({"postgresql": {"parameters": {"recovery_target_time": "x"}}}), Invalid::ReservedParameter("recovery_target_time".into()), "recovery_target_time"),
            (json!({"postgresql": {"parameters": {"wal_level": "minimal"}}}), Invalid::ReservedParameter("wal_level".into()), "wal_level"),
            (json!({"postgresql": {"parameters": {"hot_standby": "off"}}}), Invalid::ReservedParameter("hot_standby".into()), "hot_standby"),
            (json!({"postgresql": {"parameters": {"ssl_cert_file": "/x"}}}), Invalid::ReservedParameter("ssl_cert_file".into()), "ssl_cert_file"),
            (json!({"postgresql": {"parameters": {"work mem": "4MB"}}}), Invalid::ParameterName("work mem".into()), "not a PostgreSQL parameter name"),
            (json!({"postgresql": {"parameters": {"work_mem": "4MB\n"}}}), Invalid::ParameterValue("work_mem".into()), "control character"),
            (json!({"bootstrap": {"initdb": {}, "recovery": {"store": {"volume": {"size": "1Gi"}}}}}), Invalid::BootstrapBoth, "not both"),
            (json!({"bootstrap": {}}), Invalid::BootstrapNone, "set one of initdb or recovery"),
            (json!({"bootstrap": {"initdb": {"database": "App-DB"}}}), Invalid::InitDb { field: "database", value: "App-DB".into(), why: "use lower-case letters, digits and `_`, starting with a letter (at most 63)" }, "initdb.database"),
            (json!({"bootstrap": {"initdb": {"database": "postgres"}}}), Invalid::InitDb { field: "database", value: "postgres".into(), why: "PostgreSQL creates it itself; choose another name" }, "choose another name"),
            (json!({"bootstrap": {"initdb": {"owner": "streaming_replica"}}}), Invalid::InitDb { field: "owner", value: "streaming_replica".into(), why: "the operator's own roles cannot own the application database" }, "operator's own roles"),
            (json!({"bootstrap": {"initdb": {"locale": "en US"}}}), Invalid::InitDb { field: "locale", value: "en US".into(), why: "a locale name such as C or en_US.UTF-8" }, "locale"),
            (json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}, "targetTime": "2024-05-01T12:00:00Z", "targetLsn": "0/1"}}}), Invalid::RecoveryTargets, "at most one"),
            (json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}, "targetTime": "yesterday"}}}), Invalid::TargetTime("yesterday".into()), "RFC 3339"),
            (json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}, "targetLsn": "3000060"}}}), Invalid::TargetLsn("3000060".into()), "WAL position"),
            (json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}, "clusterName": "Old_One"}}}), Invalid::SourceCluster("Old_One".into()), "clusterName"),
            (json!({"bootstrap": {"recovery": {"store": {}}}}), Invalid::StoreNone("spec.bootstrap.recovery.store"), "set one of volume or s3"),
            (json!({"backup": {"store": {"volume": {"size": "1Gi"}, "s3": {"endpoint": "http://x", "bucket": "bkt", "credentialsSecret": "s"}}}}), Invalid::StoreBoth("spec.backup.store"), "not both"),
            (json!({"backup": s3("s3.example.com", "bkt", "s")}), Invalid::S3 { field: "s3.endpoint", value: "s3.example.com".into(), why: "an http:// or https:// URL" }, "s3.endpoint"),
            (json!({"backup": s3("https://s3", "Bucket_1", "s")}), Invalid::S3 { field: "s3.bucket", value: "Bucket_1".into(), why: "3-63 lower-case letters, digits, `-` and `.`" }, "s3.bucket"),
            (json!({"backup": {"store": {"s3": {"endpoint": "https://s3", "bucket": "bkt", "credentialsSecret": "s", "partSize": "1Mi"}}}}), Invalid::S3 { field: "s3.partSize", value: "1Mi".into(), why: "a quantity from 5Mi to 5Gi" }, "5Mi to 5Gi"),
            (json!({"backup": s3("https://s3", "bkt", "My Secret")}), Invalid::S3 { field: "s3.credentialsSecret", value: "My Secret".into(), why: "the name of a Secret" }, "Secret"),
            (json!({"backup": {"store": {"volume": {"size": "1Gi"}}, "schedule": "daily"}}), Invalid::Schedule("daily".into()), "five fields"),
            (json!({"backup": {"store": {"volume": {"size": "1Gi"}}, "retention": "7y"}}), Invalid::Retention("7y".into()), "7d, 4w or 3m"),
            (json!({"backup": {"store": {"volume": {"size": "1Gi"}}, "retention": "0d"}}), Invalid::Retention("0d".into()), "retention"),
            (json!({"size": 2, "replication": {"synchronous": 2}}), Invalid::Synchronous { synchronous: 2, size: 2 }, "set size to at least 3"),
            (json!({"failoverDelaySeconds": -1}), Invalid::FailoverDelay(-1), "0-3600"),
            (json!({"startTimeoutSeconds": 0}), Invalid::StartTimeout(0), "1-604800"),
            (json!({"startTimeoutSeconds": 604_801}), Invalid::StartTimeout(604_801), "without its recovery advancing"),
            (json!({"switchoverTo": "other-1"}), Invalid::SwitchoverTarget("other-1".into()), "not an instance of this cluster"),
            (json!({"switchoverTo": "pg-01"}), Invalid::SwitchoverTarget("pg-01".into()), "switchoverTo"),
            (json!({"fencedInstances": ["pg-1", "pg"]}), Invalid::FencedInstance("pg".into()), "fencedInstances"),
            (json!({"size": 2, "switchoverTo": "pg-2", "fencedInstances": ["pg-2"]}), Invalid::SwitchoverToFenced("pg-2".into()), "cannot become the primary"),
            (json!({"size": 2, "switchoverTo": "pg-2", "fencedInstances": ["*"]}), Invalid::SwitchoverToFenced("pg-2".into()), "unfence it"),
            (json!({"replication": {"maxFailoverLagBytes": -1}}), Invalid::MaxFailoverLag(-1), "maxFailoverLagBytes"),
            (json!({"pod": {"labels": {"-bad": "x"}}}), Invalid::LabelKey { field: "labels", key: "-bad".into() }, "label key"),
            (json!({"pod": {"nodeSelector": {"a/b/c": "x"}}}), Invalid::LabelKey { field: "nodeSelector", key: "a/b/c".into() }, "nodeSelector"),
        ];
        assert!(cases.len() >= 20);
        for (spec, want, words) in cases {
            let got = refused(spec.clone());
            assert_eq!(got, want, "for {spec}");
            let msg = got.to_string();
            assert!(
                msg.contains(words),
                "message for {spec} lacks {words:?}: {msg}"
            );
        }
    }

    #[test]
    fn a_major_version_change_is_refused_until_upgrades_exist() {
        let e = refused_with(
            serde_json::json!({"version": 16}),
            &Observed {
                version: Some(15),
                storage_bytes: None,
                ..Default::default()
            },
        );
        assert_eq!(
            e,
            Invalid::MajorVersionChange {
                running: 15,
                wanted: 16
            }
        );
        assert!(e.to_string().contains("set spec.version back to 15"), "{e}");
    }

    #[test]
    fn the_store_is_taken_over_only_when_the_spec_restores_this_cluster_from_it() {
        use crate::backup::owner::Claim;
        let vol = serde_json::json!({"volume": {"size": "1Gi"}});
        let s3 = |prefix: &str| {
            serde_json::json!({"s3": {"endpoint": "http://s3", "bucket": "bkt", "prefix": prefix,
                "credentialsSecret": "c"}})
        };
        let claim = |spec: serde_json::Value, observed: &Observed| {
            let pc: PostgresCluster = serde_json::from_value(serde_json::json!({
                "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
                "metadata": {"name": "pg", "namespace": "ns"}, "spec": spec,
            }))
            .expect("cluster");
            plan(&pc, observed)
                .expect("valid")
                .backup
                .expect("backup")
                .claim
        };
        let none = Observed::default();
        assert_eq!(
            claim(serde_json::json!({"backup": {"store": vol}}), &none),
            Claim::Empty
        );
        let used = Observed {
            store_used: true,
            ..Default::default()
        };
        assert_eq!(
            claim(serde_json::json!({"backup": {"store": vol}}), &used),
            Claim::Adopt
        );
        let restore = |from: serde_json::Value, to: serde_json::Value, cluster: &str| {
            serde_json::json!({"backup": {"store": to},
                "bootstrap": {"recovery": {"store": from, "clusterName": cluster}}})
        };
        assert_eq!(
            claim(restore(vol.clone(), vol.clone(), "pg"), &none),
            Claim::TakeOver
        );
        assert_eq!(
            claim(restore(s3("x/"), s3("/x"), "pg"), &none),
            Claim::TakeOver
        );
        // Another cluster's backups, or another store: nothing taken over.
        assert_eq!(
            claim(restore(vol.clone(), vol.clone(), "other"), &none),
            Claim::Empty
        );
        assert_eq!(claim(restore(s3("x"), s3("y"), "pg"), &none), Claim::Empty);
        assert_eq!(claim(restore(s3("x"), vol, "pg"), &none), Claim::Empty);
    }

    #[test]
    fn storage_never_shrinks() {
        let e = refused_with(
            serde_json::json!({"storage": {"size": "1Gi"}}),
            &Observed {
                version: None,
                storage_bytes: Some(2 << 30),
                ..Default::default()
            },
        );
        assert_eq!(
            e,
            Invalid::StorageShrink {
                current: quantity::human(2 << 30),
                wanted: "1Gi".into()
            }
        );
    }

    #[test]
    fn a_long_cluster_name_is_refused() {
        let mut pc = cluster(serde_json::json!({}));
        pc.metadata.name = Some("p".repeat(MAX_NAME + 1));
        assert!(matches!(
            plan(&pc, &Observed::default()),
            Err(Invalid::NameTooLong(_))
        ));
    }

    #[test]
    fn serials_are_read_from_instance_names() {
        assert_eq!(serial_of("pg", "pg-12"), Some(12));
        assert_eq!(serial_of("pg", "pg-"), None);
        assert_eq!(serial_of("pg", "pgx-1"), None);
        assert_eq!(serial_of("pg-a", "pg-a-3"), Some(3));
    }
}
