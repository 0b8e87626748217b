//! The cluster's children, built purely from the [`Plan`]: one function per child.
//!
//! - the credentials Secret (`<name>-credentials`): passwords and the instance API token,
//!   made once by the operator and never rewritten;
//! - a claim per instance (`<name>-<n>`), owned by the cluster: deleting the cluster deletes
//!   its data, as the issue asks and as CloudNativePG does (backups live elsewhere and stay);
//! - a pod per instance (`<name>-<n>`, the serial never reused): an init container copies
//!   the `bosun` binary from bosun's image into a shared `emptyDir`, then the PostgreSQL image
//!   (`postgres:<version>`, whose `PATH` holds PostgreSQL's programs) runs `bosun pg instance`
//!   from there — CloudNativePG's layout, so any image of the right major works on a real
//!   cluster;
//! - a Service (`<name>-rw`) selecting the primary by its role label. In process mode nothing
//!   resolves it (loopback pods): the operator and the replicas use the pod IPs.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinityTerm, PodAntiAffinity, PodSpec, Probe,
    ResourceRequirements, Secret, SecretKeySelector, Service, ServicePort, ServiceSpec, Volume,
    VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::AntiAffinity;
use crate::instance::Role;
use crate::validate::{BootstrapPlan, Plan, RecoveryTarget, StorePlan};

/// Where instances mount the backup volume (their own cluster's) and a restore's source.
pub const BACKUP_MOUNT: &str = "/var/lib/postgresql/backup";
pub const RESTORE_MOUNT: &str = "/var/lib/postgresql/restore";

/// The backup volume's claim of a cluster.
pub fn backup_claim_name(cluster: &str) -> String {
    format!("{cluster}-backup")
}

/// Where a new primary restores from: the backups `cluster` wrote, to `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreFrom {
    pub cluster: String,
    pub store: StorePlan,
    pub target: Option<RecoveryTarget>,
}

/// The keys of an S3 store's credentials Secret.
pub const KEY_S3_ACCESS: &str = "accessKeyId";
pub const KEY_S3_SECRET: &str = "secretAccessKey";

/// `s3://bucket/<prefix><cluster>`: where `cluster`'s backups live in an S3 store.
pub fn s3_location(bucket: &str, prefix: &str, cluster: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        format!("s3://{bucket}/{cluster}")
    } else {
        format!("s3://{bucket}/{prefix}/{cluster}")
    }
}

/// The environment an S3 store's client reads (credentials by reference only).
fn s3_env(store: &StorePlan) -> Vec<EnvVar> {
    let StorePlan::S3 {
        endpoint,
        region,
        credentials_secret,
        part_size,
        ..
    } = store
    else {
        return Vec::new();
    };
    let secret = |name: &str, key: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: credentials_secret.clone(),
                key: key.into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    vec![
        env("BOSUN_PG_S3_ENDPOINT", endpoint.clone()),
        env("BOSUN_PG_S3_REGION", region.clone()),
        env("BOSUN_PG_S3_PART_SIZE", part_size.to_string()),
        secret("AWS_ACCESS_KEY_ID", KEY_S3_ACCESS),
        secret("AWS_SECRET_ACCESS_KEY", KEY_S3_SECRET),
    ]
}

/// Labels every child carries.
pub const CLUSTER_LABEL: &str = "postgres.lukeb0nd.com/cluster";
pub const INSTANCE_LABEL: &str = "postgres.lukeb0nd.com/instance";
/// `primary` or `replica`, kept in step with what the instance reports (the Service's
/// selector).
pub const ROLE_LABEL: &str = "postgres.lukeb0nd.com/role";
pub const PG_PORT: u16 = 5432;
pub const HTTP_PORT: u16 = 8000;
/// The instance container's name.
pub const CONTAINER: &str = "postgres";

/// The Secret's keys.
pub const KEY_SUPERUSER: &str = "superuserPassword";
pub const KEY_REPLICATION: &str = "replicationPassword";
pub const KEY_TOKEN: &str = "apiToken";
pub const KEY_APP: &str = "appPassword";

/// The image the init container copies `bosun` from: `BOSUN_PG_OPERATOR_IMAGE`, else bosun's
/// own image at this version.
pub fn operator_image() -> String {
    std::env::var("BOSUN_PG_OPERATOR_IMAGE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("ghcr.io/bosun-dev/bosun:v{}", env!("CARGO_PKG_VERSION")))
}

pub fn instance_name(cluster: &str, serial: u32) -> String {
    format!("{cluster}-{serial}")
}

pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}-credentials")
}

pub fn service_name(cluster: &str) -> String {
    format!("{cluster}-rw")
}

/// The selector of every instance's pod (the scale subresource's).
pub fn selector(cluster: &str) -> String {
    format!("{CLUSTER_LABEL}={cluster}")
}

fn meta(plan: &Plan, name: String, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(plan.namespace.clone()),
        labels: Some(BTreeMap::from([(
            CLUSTER_LABEL.to_string(),
            plan.name.clone(),
        )])),
        owner_references: Some(vec![owner.clone()]),
        ..Default::default()
    }
}

/// The credentials, from fresh random values (`random` makes one).
/// The keys of the cluster's Secret, each given a random value when it is made.
pub const SECRET_KEYS: [&str; 4] = [KEY_SUPERUSER, KEY_REPLICATION, KEY_TOKEN, KEY_APP];

/// The cluster's Secret with `values` (one a key of [`SECRET_KEYS`], in that order).
pub fn secret(plan: &Plan, owner: &OwnerReference, values: Vec<String>) -> Secret {
    let data = SECRET_KEYS
        .into_iter()
        .zip(values)
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Secret {
        metadata: meta(plan, secret_name(&plan.name), owner),
        string_data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

pub fn claim(plan: &Plan, serial: u32, owner: &OwnerReference) -> PersistentVolumeClaim {
    let mut m = meta(plan, instance_name(&plan.name, serial), owner);
    labels_mut(&mut m).insert(INSTANCE_LABEL.into(), instance_name(&plan.name, serial));
    PersistentVolumeClaim {
        metadata: m,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: plan.storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(plan.storage.text.clone()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The backup volume's claim (a volume store only). It has **no owner**: deleting the
/// cluster keeps its backups, as a DBA expects. ReadWriteMany: every instance mounts it (the
/// one that is primary archives and backs up).
pub fn backup_claim(plan: &Plan) -> Option<PersistentVolumeClaim> {
    let Some(StorePlan::Volume {
        size,
        storage_class,
    }) = plan.backup.as_ref().map(|b| &b.store)
    else {
        return None;
    };
    Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(backup_claim_name(&plan.name)),
            namespace: Some(plan.namespace.clone()),
            labels: Some(BTreeMap::from([(
                CLUSTER_LABEL.to_string(),
                plan.name.clone(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteMany".into()]),
            storage_class_name: storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(size.text.clone()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The pods' grace period: the manager's stop deadline and 30 s to exit after it.
pub const GRACE_PERIOD_SECONDS: i64 = crate::instance::STOP_DEADLINE_SECS as i64 + 30;

/// At most one instance down by a voluntary disruption (a drain, an eviction) at a time: a
/// drain never takes the primary and a replica together. Named as the cluster; owned by it.
pub fn disruption_budget(plan: &Plan, owner: &OwnerReference) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(plan, plan.name.clone(), owner),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    CLUSTER_LABEL.to_string(),
                    plan.name.clone(),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn service(plan: &Plan, owner: &OwnerReference) -> Service {
    Service {
        metadata: meta(plan, service_name(&plan.name), owner),
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([
                (CLUSTER_LABEL.to_string(), plan.name.clone()),
                (ROLE_LABEL.to_string(), "primary".to_string()),
            ])),
            ports: Some(vec![ServicePort {
                name: Some("postgres".into()),
                port: PG_PORT.into(),
                target_port: Some(IntOrString::Int(PG_PORT.into())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn resources(r: &crate::api::Resources) -> ResourceRequirements {
    r.to_requirements()
}

fn claim_volume(name: &str, claim: String) -> Volume {
    Volume {
        name: name.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim,
            read_only: None,
        }),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..Default::default()
    }
}

fn labels_mut(m: &mut ObjectMeta) -> &mut BTreeMap<String, String> {
    m.labels.get_or_insert_with(BTreeMap::new)
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// An env var from the downward API.
fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.into(),
                api_version: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn secret_env(plan: &Plan, name: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret_name(&plan.name),
                key: key.into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn http_probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(HTTP_PORT.into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(5),
        ..Default::default()
    }
}

/// The pod of instance `serial`, starting as `role` (`primary`: `host:port` of the primary
/// a replica joins). Data lives in `/var/lib/postgresql/data/pgdata` on the claim.
pub fn pod(
    plan: &Plan,
    serial: u32,
    role: Role,
    primary: Option<&str>,
    owner: &OwnerReference,
) -> Pod {
    pod_with(plan, serial, role, primary, owner, None)
}

/// The pod of a new primary that restores from a backup store (a volume store: its claim is
/// mounted, unless it is the cluster's own backup volume, mounted already).
pub fn restoring_pod(plan: &Plan, serial: u32, owner: &OwnerReference, from: &RestoreFrom) -> Pod {
    pod_with(plan, serial, Role::Primary, None, owner, Some(from))
}

fn has_volume_store(plan: &Plan) -> bool {
    matches!(
        plan.backup.as_ref().map(|b| &b.store),
        Some(StorePlan::Volume { .. })
    )
}

fn pod_with(
    plan: &Plan,
    serial: u32,
    role: Role,
    primary: Option<&str>,
    owner: &OwnerReference,
    restore: Option<&RestoreFrom>,
) -> Pod {
    let mut pod = pod_bare(plan, serial, role, primary, owner, restore);
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            crate::contract::TEMPLATE_ANNOTATION.into(),
            template_hash(plan),
        );
    pod
}

/// What the spec puts into every instance's pod, hashed: the pod of a placeholder instance
/// (serial 0, a replica) built from the spec less what reaches running instances without a
/// new pod (`postgresql.parameters`, `replication.synchronous`) and less what never reaches a
/// pod (switchover, fencing, size). A pod whose annotation differs is outdated.
pub fn template_hash(plan: &Plan) -> String {
    use sha2::{Digest, Sha256};
    let mut p = plan.clone();
    p.parameters.clear();
    p.synchronous = 0;
    p.switchover_to = None;
    p.fencing = crate::validate::Fencing::None;
    p.size = 1;
    // The store claim follows the status (the store becomes "used" with the first archived
    // WAL) and matters only until the store records its owner, which that first archive
    // does: a change must not replace a running pod (it restarted every new cluster with a
    // store some seconds after its creation). Pods of an operator too old to record owners
    // carry no template annotation, and are rolled (getting the claim) anyway.
    if let Some(b) = p.backup.as_mut() {
        b.claim = crate::backup::owner::Claim::default();
    }
    let pod = pod_bare(&p, 0, Role::Replica, None, &OwnerReference::default(), None);
    let text = serde_json::to_vec(&(&pod.metadata.labels, &pod.metadata.annotations, &pod.spec))
        .unwrap_or_default();
    Sha256::digest(&text)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn pod_bare(
    plan: &Plan,
    serial: u32,
    role: Role,
    primary: Option<&str>,
    owner: &OwnerReference,
    restore: Option<&RestoreFrom>,
) -> Pod {
    let name = instance_name(&plan.name, serial);
    let mut m = meta(plan, name.clone(), owner);
    let labels = labels_mut(&mut m);
    labels.extend(plan.pod.labels.clone());
    labels.insert(CLUSTER_LABEL.into(), plan.name.clone());
    labels.insert(INSTANCE_LABEL.into(), name.clone());
    labels.insert(
        ROLE_LABEL.into(),
        match role {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
        .into(),
    );
    if !plan.pod.annotations.is_empty() {
        m.annotations = Some(plan.pod.annotations.clone());
    }
    let mut envs = vec![
        env("BOSUN_PG_NAME", name.clone()),
        env("PGDATA", "/var/lib/postgresql/data/pgdata"),
        field_env("BOSUN_PG_POD_IP", "status.podIP"),
        // Tells the instance a container restart (its role record wins) from a new pod
        // (this env wins): see crate::instance::record.
        field_env("BOSUN_PG_POD_UID", "metadata.uid"),
        env("BOSUN_PG_PORT", PG_PORT.to_string()),
        env("BOSUN_PG_HTTP_PORT", HTTP_PORT.to_string()),
        env(
            "BOSUN_PG_ROLE",
            match role {
                Role::Primary => "primary",
                Role::Replica => "replica",
            },
        ),
        env("BOSUN_PG_SYNCHRONOUS", plan.synchronous.to_string()),
        env(
            crate::contract::ENV_ISOLATION_TIMEOUT,
            crate::contract::ISOLATION_TIMEOUT_SECS.to_string(),
        ),
        secret_env(plan, "BOSUN_PG_SUPERUSER_PASSWORD", KEY_SUPERUSER),
        secret_env(plan, "BOSUN_PG_REPLICATION_PASSWORD", KEY_REPLICATION),
        secret_env(plan, "BOSUN_PG_API_TOKEN", KEY_TOKEN),
        secret_env(plan, "BOSUN_PG_APP_PASSWORD", KEY_APP),
    ];
    if let Some(p) = primary.filter(|_| role == Role::Replica) {
        envs.push(env("BOSUN_PG_PRIMARY", p));
    }
    // Only when the spec gives one: the instance's default is the same, and a pod made
    // before the field existed is then not outdated (an operator upgrade rolls nothing).
    if let Some(t) = plan.start_timeout {
        envs.push(env(
            crate::contract::ENV_START_TIMEOUT,
            t.as_secs().to_string(),
        ));
    }
    if let BootstrapPlan::InitDb {
        database,
        owner,
        data_checksums,
        locale,
    } = &plan.bootstrap
    {
        envs.push(env("BOSUN_PG_LOCALE", locale.clone()));
        envs.push(env("BOSUN_PG_APP_DATABASE", database.clone()));
        envs.push(env("BOSUN_PG_APP_OWNER", owner.clone()));
        if !data_checksums {
            envs.push(env("BOSUN_PG_NO_DATA_CHECKSUMS", "true"));
        }
    }
    let mut extra_volumes = Vec::new();
    let mut extra_mounts = Vec::new();
    let mut s3_set = false;
    if let Some(b) = &plan.backup {
        let location = match &b.store {
            StorePlan::Volume { .. } => {
                extra_volumes.push(claim_volume("backup", backup_claim_name(&plan.name)));
                extra_mounts.push(mount("backup", BACKUP_MOUNT));
                format!("{BACKUP_MOUNT}/{}", plan.name)
            }
            StorePlan::S3 { bucket, prefix, .. } => {
                envs.extend(s3_env(&b.store));
                s3_set = true;
                s3_location(bucket, prefix, &plan.name)
            }
        };
        envs.push(env("BOSUN_PG_BACKUP_STORE", location));
        // The store records which cluster owns it: a cluster recreated under this name
        // (another UID) never archives into, backs up to or restores from the old one's.
        envs.push(env(crate::contract::ENV_CLUSTER_UID, owner.uid.clone()));
        envs.push(env(crate::contract::ENV_CLUSTER, plan.name.clone()));
        envs.push(env(crate::contract::ENV_STORE_CLAIM, b.claim.as_str()));
        envs.push(env(
            "BOSUN_PG_BACKUP_RETENTION_DAYS",
            b.retention_days.to_string(),
        ));
    }
    if let Some(from) = restore {
        let location = match &from.store {
            StorePlan::Volume { .. } if from.cluster == plan.name && has_volume_store(plan) => {
                format!("{BACKUP_MOUNT}/{}", from.cluster)
            }
            StorePlan::Volume { .. } => {
                extra_volumes.push(claim_volume("restore", backup_claim_name(&from.cluster)));
                extra_mounts.push(mount("restore", RESTORE_MOUNT));
                format!("{RESTORE_MOUNT}/{}", from.cluster)
            }
            // One S3 client per instance: a restore from S3 into a cluster backing up to
            // S3 uses the backup store's endpoint and credentials.
            StorePlan::S3 { bucket, prefix, .. } => {
                if !s3_set {
                    envs.extend(s3_env(&from.store));
                }
                s3_location(bucket, prefix, &from.cluster)
            }
        };
        envs.push(env("BOSUN_PG_RESTORE_FROM", location));
        match &from.target {
            Some(RecoveryTarget::Time(t)) => {
                envs.push(env("BOSUN_PG_RECOVERY_TARGET_TIME", t.clone()))
            }
            Some(RecoveryTarget::Lsn(l)) => {
                envs.push(env("BOSUN_PG_RECOVERY_TARGET_LSN", l.clone()))
            }
            None => {}
        }
    }
    let mut args = vec!["pg".to_string(), "instance".to_string()];
    for (k, v) in &plan.parameters {
        args.push(format!("--param={k}={v}"));
    }
    let controller_mount = VolumeMount {
        name: "controller".into(),
        mount_path: "/controller".into(),
        ..Default::default()
    };
    Pod {
        metadata: m,
        spec: Some(PodSpec {
            init_containers: Some(vec![Container {
                name: "bootstrap".into(),
                image: Some(operator_image()),
                command: Some(vec![
                    "/bosun".into(),
                    "pg".into(),
                    "install".into(),
                    "/controller/bosun".into(),
                ]),
                volume_mounts: Some(vec![controller_mount.clone()]),
                ..Default::default()
            }]),
            containers: vec![Container {
                name: CONTAINER.into(),
                image: Some(plan.image.clone()),
                command: Some(vec!["/controller/bosun".into()]),
                args: Some(args),
                env: Some(envs),
                resources: plan.pod.resources.as_ref().map(resources),
                readiness_probe: Some(http_probe("/readyz", 1, 1)),
                liveness_probe: Some(http_probe("/healthz", 5, 6)),
                volume_mounts: Some(
                    [
                        controller_mount,
                        VolumeMount {
                            name: "data".into(),
                            mount_path: "/var/lib/postgresql/data".into(),
                            ..Default::default()
                        },
                    ]
                    .into_iter()
                    .chain(extra_mounts)
                    .collect(),
                ),
                ..Default::default()
            }],
            volumes: Some(
                [
                    Volume {
                        name: "controller".into(),
                        empty_dir: Some(EmptyDirVolumeSource::default()),
                        ..Default::default()
                    },
                    claim_volume("data", name),
                ]
                .into_iter()
                .chain(extra_volumes)
                .collect(),
            ),
            node_selector: (!plan.pod.node_selector.is_empty())
                .then(|| plan.pod.node_selector.clone()),
            affinity: affinity(plan),
            // A fast shutdown flushes WAL to the replicas: the manager's own deadline, and
            // time to exit after it, before the kubelet's SIGKILL.
            termination_grace_period_seconds: Some(GRACE_PERIOD_SECONDS),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Keeps a cluster's instances on different nodes (by hostname), as `antiAffinity` asks:
/// `Required` (an instance waits rather than share a node), `Preferred` (the scheduler
/// tries) or `None`.
fn affinity(plan: &Plan) -> Option<Affinity> {
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                CLUSTER_LABEL.to_string(),
                plan.name.clone(),
            )])),
            ..Default::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    };
    let anti = match plan.anti_affinity {
        AntiAffinity::None => return None,
        AntiAffinity::Required => PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..Default::default()
        },
        AntiAffinity::Preferred => PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    pod_affinity_term: term,
                    weight: 100,
                },
            ]),
            ..Default::default()
        },
    };
    Some(Affinity {
        pod_anti_affinity: Some(anti),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::plan_of;

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "lukeb0nd.com/v1".into(),
            kind: "PostgresCluster".into(),
            name: "pg".into(),
            uid: "u-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn env_of(pod: &Pod) -> BTreeMap<String, EnvVar> {
        pod.spec.as_ref().expect("spec").containers[0]
            .env
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect()
    }

    /// Issue 32 (a bench flake): a new cluster with a backup store had its only instance
    /// restarted about 6 s after it was created, ending the client's sessions ("terminating
    /// connection due to administrator command"): the first archived WAL made the status show
    /// the store in use, which turned the pod's store claim from `empty` to `adopt`, and that
    /// env was part of the pod template hash, so the rolling update replaced the pod. The
    /// claim matters only before the store records its owner; it must not outdate a pod.
    #[test]
    fn the_store_claim_learned_from_the_status_does_not_outdate_a_pod() {
        let spec = serde_json::json!({"size": 1, "backup": {"store": {"volume": {"size": "1Gi"}}}});
        let pc: crate::api::PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "pg", "namespace": "db"}, "spec": spec,
        }))
        .expect("cluster");
        let fresh =
            crate::validate::plan(&pc, &crate::validate::Observed::default()).expect("valid");
        let used = crate::validate::plan(
            &pc,
            &crate::validate::Observed {
                store_used: true,
                ..Default::default()
            },
        )
        .expect("valid");
        assert_ne!(
            fresh.backup.as_ref().map(|b| b.claim),
            used.backup.as_ref().map(|b| b.claim),
            "the premise: the status changes the claim"
        );
        assert_eq!(template_hash(&fresh), template_hash(&used));
    }

    /// Issue 32, H7: the start timeout is the spec's (`startTimeoutSeconds`), in every
    /// instance's pod.
    #[test]
    fn the_start_timeout_reaches_every_pod_from_the_spec() {
        let timeout = |pod: &Pod| {
            env_of(pod)
                .get(crate::contract::ENV_START_TIMEOUT)
                .and_then(|e| e.value.clone())
        };
        let p = plan_of(serde_json::json!({"size": 2, "startTimeoutSeconds": 3600}));
        assert_eq!(
            timeout(&pod(&p, 1, Role::Primary, None, &owner())).as_deref(),
            Some("3600")
        );
        assert_eq!(
            timeout(&pod(&p, 2, Role::Replica, Some("127.1.0.1:5432"), &owner())).as_deref(),
            Some("3600")
        );
        // Absent: no env, and the instance manager's default (300 s) applies; the pod
        // template is the one an operator without the field made.
        let d = plan_of(serde_json::json!({"size": 1}));
        assert_eq!(timeout(&pod(&d, 1, Role::Primary, None, &owner())), None);
    }

    #[test]
    fn a_replica_pod_runs_bosun_from_the_postgres_image_and_joins_its_primary() {
        let p = plan_of(
            serde_json::json!({"size": 3, "postgresql": {"parameters": {"work_mem": "8MB"}}}),
        );
        let pod = pod(&p, 2, Role::Replica, Some("127.1.0.1:5432"), &owner());
        assert_eq!(pod.metadata.name.as_deref(), Some("pg-2"));
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(labels[CLUSTER_LABEL], "pg");
        assert_eq!(labels[ROLE_LABEL], "replica");
        let spec = pod.spec.as_ref().expect("spec");
        let init = &spec.init_containers.as_ref().expect("init")[0];
        assert_eq!(
            init.command.as_deref(),
            Some(
                &[
                    "/bosun".to_string(),
                    "pg".into(),
                    "install".into(),
                    "/controller/bosun".into()
                ][..]
            )
        );
        let c = &spec.containers[0];
        assert_eq!(c.image.as_deref(), Some("postgres:15"));
        assert_eq!(
            c.command.as_deref(),
            Some(&["/controller/bosun".to_string()][..])
        );
        assert!(c
            .args
            .as_ref()
            .expect("args")
            .contains(&"--param=work_mem=8MB".to_string()));
        let env = env_of(&pod);
        assert_eq!(env["BOSUN_PG_ROLE"].value.as_deref(), Some("replica"));
        assert_eq!(
            env["BOSUN_PG_PRIMARY"].value.as_deref(),
            Some("127.1.0.1:5432")
        );
        // Secrets by reference only, never as values.
        let token = env["BOSUN_PG_API_TOKEN"].value_from.as_ref().expect("from");
        let key = token.secret_key_ref.as_ref().expect("secret ref");
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("pg-credentials", KEY_TOKEN)
        );
        assert!(env["BOSUN_PG_API_TOKEN"].value.is_none());
        assert_eq!(
            env["BOSUN_PG_POD_IP"]
                .value_from
                .as_ref()
                .and_then(|f| f.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("status.podIP")
        );
    }

    #[test]
    fn a_primary_pod_names_no_primary() {
        let p = plan_of(serde_json::json!({}));
        let pod = pod(&p, 1, Role::Primary, Some("ignored:5432"), &owner());
        let env = env_of(&pod);
        assert_eq!(env["BOSUN_PG_ROLE"].value.as_deref(), Some("primary"));
        assert!(!env.contains_key("BOSUN_PG_PRIMARY"));
        assert_eq!(env["BOSUN_PG_APP_DATABASE"].value.as_deref(), Some("app"));
    }

    /// Each antiAffinity mode of the spec, as the scheduler reads it: instances of one
    /// cluster kept off each other's nodes (by hostname), required or preferred, or not at all.
    #[test]
    fn anti_affinity_keeps_a_clusters_instances_apart_as_the_spec_says() {
        let affinity = |mode: &str| {
            let p = plan_of(serde_json::json!({"pod": {"antiAffinity": mode}}));
            pod(&p, 1, Role::Primary, None, &owner())
                .spec
                .expect("spec")
                .affinity
        };
        let term = |t: &k8s_openapi::api::core::v1::PodAffinityTerm| {
            let selector = t.label_selector.as_ref().expect("selector");
            (
                t.topology_key.clone(),
                selector.match_labels.clone().expect("labels"),
                selector.match_expressions.is_none(),
            )
        };
        let same_cluster = BTreeMap::from([(CLUSTER_LABEL.to_string(), "pg".to_string())]);
        let hostname = "kubernetes.io/hostname".to_string();

        let required = affinity("Required")
            .and_then(|a| a.pod_anti_affinity)
            .expect("anti-affinity");
        assert!(required
            .preferred_during_scheduling_ignored_during_execution
            .is_none());
        let terms = required
            .required_during_scheduling_ignored_during_execution
            .expect("required terms");
        assert_eq!(terms.len(), 1);
        assert_eq!(
            term(&terms[0]),
            (hostname.clone(), same_cluster.clone(), true)
        );

        let preferred = affinity("Preferred")
            .and_then(|a| a.pod_anti_affinity)
            .expect("anti-affinity");
        assert!(preferred
            .required_during_scheduling_ignored_during_execution
            .is_none());
        let weighted = preferred
            .preferred_during_scheduling_ignored_during_execution
            .expect("preferred terms");
        assert_eq!(weighted.len(), 1);
        assert_eq!(weighted[0].weight, 100);
        assert_eq!(
            term(&weighted[0].pod_affinity_term),
            (hostname, same_cluster, true)
        );
        // The default is Preferred.
        let p = plan_of(serde_json::json!({}));
        assert_eq!(
            pod(&p, 1, Role::Primary, None, &owner())
                .spec
                .expect("spec")
                .affinity,
            affinity("Preferred")
        );

        assert_eq!(affinity("None"), None);
    }

    #[test]
    fn the_claim_is_owned_by_the_cluster_and_sized_by_the_plan() {
        let p =
            plan_of(serde_json::json!({"storage": {"size": "2Gi", "storageClassName": "fast"}}));
        let c = claim(&p, 4, &owner());
        assert_eq!(c.metadata.name.as_deref(), Some("pg-4"));
        assert_eq!(c.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        let spec = c.spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            spec.resources.and_then(|r| r.requests).expect("requests")["storage"].0,
            "2Gi"
        );
    }

    #[test]
    fn the_secret_holds_fresh_values_for_every_key() {
        let p = plan_of(serde_json::json!({}));
        let s = secret(&p, &owner(), (1..=4).map(|n| format!("v{n}")).collect());
        let data = s.string_data.expect("data");
        let values: std::collections::BTreeSet<&String> = data.values().collect();
        assert_eq!(values.len(), 4, "{data:?}");
        assert!(data.contains_key(KEY_TOKEN) && data.contains_key(KEY_SUPERUSER));
    }

    #[test]
    fn a_backup_volume_is_mounted_everywhere_and_kept_with_no_owner() {
        let p = plan_of(
            serde_json::json!({"backup": {"store": {"volume": {"size": "5Gi"}}, "retention": "2w"}}),
        );
        let c = backup_claim(&p).expect("a volume store has a claim");
        assert_eq!(c.metadata.name.as_deref(), Some("pg-backup"));
        assert!(
            c.metadata.owner_references.is_none(),
            "backups outlive the cluster"
        );
        let pod = pod(&p, 2, Role::Replica, Some("127.1.0.1:5432"), &owner());
        let env = env_of(&pod);
        assert_eq!(
            env["BOSUN_PG_BACKUP_STORE"].value.as_deref(),
            Some("/var/lib/postgresql/backup/pg")
        );
        assert_eq!(
            env["BOSUN_PG_BACKUP_RETENTION_DAYS"].value.as_deref(),
            Some("14")
        );
        assert!(!env.contains_key("BOSUN_PG_RESTORE_FROM"));
        let vols = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .expect("volumes");
        assert!(vols.iter().any(|v| v
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == "pg-backup")));
        assert!(backup_claim(&plan_of(serde_json::json!({}))).is_none());
    }

    #[test]
    fn a_restoring_pod_reads_the_source_clusters_backup_volume_to_its_target() {
        let p = plan_of(serde_json::json!({"bootstrap": {"recovery": {
            "store": {"volume": {"size": "1Gi"}}, "clusterName": "old",
            "targetTime": "2026-11-25T01:00:00Z"}}}));
        let from = RestoreFrom {
            cluster: "old".into(),
            store: StorePlan::Volume {
                size: crate::validate::Size {
                    text: "1Gi".into(),
                    bytes: 1 << 30,
                },
                storage_class: None,
            },
            target: Some(RecoveryTarget::Time("2026-11-25T01:00:00Z".into())),
        };
        let pod = restoring_pod(&p, 1, &owner(), &from);
        let env = env_of(&pod);
        assert_eq!(
            env["BOSUN_PG_RESTORE_FROM"].value.as_deref(),
            Some("/var/lib/postgresql/restore/old")
        );
        assert_eq!(
            env["BOSUN_PG_RECOVERY_TARGET_TIME"].value.as_deref(),
            Some("2026-11-25T01:00:00Z")
        );
        assert_eq!(env["BOSUN_PG_ROLE"].value.as_deref(), Some("primary"));
        let vols = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .expect("volumes");
        assert!(vols.iter().any(|v| v
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == "old-backup")));
    }

    #[test]
    fn an_s3_store_is_reached_with_credentials_by_reference() {
        let p = plan_of(serde_json::json!({"backup": {"store": {"s3": {
            "endpoint": "http://127.0.0.1:9000", "bucket": "bkt", "prefix": "team/",
            "credentialsSecret": "s3-creds", "partSize": "16Mi"}}}}));
        let pod = pod(&p, 1, Role::Primary, None, &owner());
        let env = env_of(&pod);
        assert_eq!(
            env["BOSUN_PG_S3_PART_SIZE"].value.as_deref(),
            Some("16777216")
        );
        assert_eq!(
            env["BOSUN_PG_BACKUP_STORE"].value.as_deref(),
            Some("s3://bkt/team/pg")
        );
        assert_eq!(
            env["BOSUN_PG_S3_ENDPOINT"].value.as_deref(),
            Some("http://127.0.0.1:9000")
        );
        let key = env["AWS_SECRET_ACCESS_KEY"]
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref())
            .expect("a secret reference");
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("s3-creds", KEY_S3_SECRET)
        );
        assert!(env["AWS_SECRET_ACCESS_KEY"].value.is_none());
        assert!(backup_claim(&p).is_none(), "no volume for an S3 store");
    }

    #[test]
    fn the_service_selects_the_primary() {
        let p = plan_of(serde_json::json!({}));
        let s = service(&p, &owner());
        assert_eq!(s.metadata.name.as_deref(), Some("pg-rw"));
        let sel = s.spec.and_then(|s| s.selector).expect("selector");
        assert_eq!(sel[ROLE_LABEL], "primary");
        assert_eq!(sel[CLUSTER_LABEL], "pg");
    }
}
