//! Act: carry out the one decision of the cycle. Pods and claims are created, never updated
//! (a pod's start role is fixed; a running instance changes role through its API): a pod
//! built from an older spec is replaced by the rolling update (`RollInstance`). Instances are
//! promoted, demoted and fenced through their manager's API with the operator's token;
//! parameters and `synchronous` are set on them with SQL.
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;

use crate::instance::client::{ClientError, InstanceClient};
use crate::instance::{slot_name, Role, StateRole, SUPERUSER};
use crate::lifecycle::Action;
use crate::validate::Plan;

use super::build::{self, instance_name, HTTP_PORT, PG_PORT, ROLE_LABEL};

/// The operator's own SQL on an instance, connection included: beyond it the reconcile goes
/// on (a failover must not wait behind a stalled primary; issue 32, M5).
const SQL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);
use super::observe::Snapshot;
use super::Error;

/// The grace period of a pod deleted because its instance did not answer a fence. Never 0:
/// with a grace period the kubelet removes the pod object only after killing its processes,
/// which is what the failover waits for; a zero grace removes the object at once.
pub const FENCE_KILL_GRACE_SECS: u32 = 15;

/// What acting needs besides the decision.
pub struct Act<'a> {
    pub client: &'a Client,
    pub plan: &'a Plan,
    pub owner: &'a OwnerReference,
    pub seen: &'a Snapshot,
    pub token: &'a str,
    pub superuser_password: &'a str,
    /// The primary recorded in the status (a serial).
    pub current_primary: Option<u32>,
}

impl Act<'_> {
    pub async fn run(&self, action: &Action) -> Result<(), Error> {
        match action {
            Action::Wait(_) | Action::Fail(_) => Ok(()),
            Action::CreateSeed { serial, restore } => self.create_seed(*serial, *restore).await,
            Action::AddReplica { serial } => {
                let primary = self.primary_addr()?;
                self.create_claim(*serial).await?;
                self.create_pod(*serial, Role::Replica, Some(&primary))
                    .await
            }
            Action::StartPod { serial } => {
                // A running primary elsewhere wins over the recorded one: after a failover
                // the status may still name this (old) primary until the next write, and
                // starting it as a primary would make two.
                match self.running_primary() {
                    Some(p) if p != *serial => {
                        let primary = self.primary_addr()?;
                        self.create_pod(*serial, Role::Replica, Some(&primary))
                            .await
                    }
                    Some(_) => Ok(()),
                    None if self.current_primary == Some(*serial) => {
                        self.create_pod(*serial, Role::Primary, None).await
                    }
                    // No primary recorded: the seed, deleted before it ever became the
                    // primary (during initdb or a restore), is made again as the seed.
                    None if self.current_primary.is_none() && *serial == 1 => {
                        let restore = matches!(
                            self.plan.bootstrap,
                            crate::validate::BootstrapPlan::Recovery { .. }
                        );
                        self.create_seed(1, restore).await
                    }
                    // No primary runs: a replica with data starts read-only with no
                    // upstream, a candidate the failover promotes or the new primary's
                    // Follow rejoins (issue 32, M12; it used to wait forever here).
                    None => self.create_pod(*serial, Role::Replica, None).await,
                }
            }
            Action::RemoveMember { serial } | Action::RemoveReplica { serial } => {
                self.delete_pod(*serial).await?;
                if matches!(action, Action::RemoveReplica { .. }) {
                    self.delete_claim(*serial).await?;
                }
                self.drop_slot(*serial).await;
                Ok(())
            }
            Action::Fence { serial } => match self.instance(*serial) {
                Some(api) => match api.fence().await {
                    Ok(()) => Ok(()),
                    // Unreachable or unanswering within the bound: the kubelet is the fence
                    // of last resort. No promotion follows until the pod is gone (the
                    // decision waits for it), so this never makes two writable primaries.
                    Err(ClientError::Transport { .. }) => self.delete_to_fence(*serial).await,
                    Err(e) => Err(e.into()),
                },
                None => self.delete_to_fence(*serial).await,
            },
            // Carried out by `fence_postgres`, whose outcome the status records.
            Action::FencePostgres { .. } => Ok(()),
            Action::Unfence { serial } => Ok(self.required(*serial)?.unfence().await?),
            Action::BeginSwitchover { from, .. } => Ok(self.required(*from)?.fence().await?),
            Action::Promote { serial } => {
                self.required(*serial)?.promote().await?;
                self.label_role(*serial, "primary").await?;
                // The promoted replica's setting is the one its base backup copied, or its
                // pod's: the spec's applies now, not one cycle later.
                self.set_synchronous(*serial, self.plan.synchronous).await
            }
            Action::SetSynchronous { serial, n } => self.set_synchronous(*serial, *n).await,
            Action::SetParameters { serial } => self.set_parameters(*serial).await,
            // Deleted gracefully: a replica stops with a fast shutdown, and the next cycles
            // make its pod again (StartPod) from the current spec.
            Action::RollInstance { serial } => self.delete_pod(*serial).await,
            Action::Follow { serial, primary } => {
                let addr = self
                    .seen
                    .addr_of(*primary)
                    .ok_or_else(|| Error::NotYet(format!("{} has no IP", self.name(*primary))))?;
                self.required(*serial)?.demote(&addr).await?;
                self.label_role(*serial, "replica").await
            }
            Action::Reclone {
                serial, primary, ..
            } => {
                let addr = self
                    .seen
                    .addr_of(*primary)
                    .ok_or_else(|| Error::NotYet(format!("{} has no IP", self.name(*primary))))?;
                self.required(*serial)?.reclone(&addr).await?;
                self.label_role(*serial, "replica").await
            }
        }
    }

    /// Stops the old primary `serial`'s PostgreSQL at its recorded address (`last`), its
    /// manager not answering ([`super::fence`]); what was found there.
    pub async fn fence_postgres(
        &self,
        serial: u32,
        last: Option<&crate::api::LastPrimary>,
    ) -> Result<(crate::api::SqlFenceState, String), Error> {
        use crate::api::SqlFenceState;
        let name = self.name(serial);
        let last = last
            .filter(|l| l.instance == name)
            .ok_or_else(|| Error::NotYet(format!("no address of {name} recorded")))?;
        // Addresses are reused: one that is now another member's is not the old primary's.
        let reused = self.seen.pods.keys().any(|s| {
            *s != serial && self.seen.addr_of(*s).as_deref() == Some(last.address.as_str())
        });
        if reused {
            return Ok((
                SqlFenceState::Unreachable,
                format!("{} is now another instance's address", last.address),
            ));
        }
        let (host, port) = last
            .address
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| {
                Error::NotYet(format!(
                    "{name}'s recorded address {} is not host:port",
                    last.address
                ))
            })?;
        match super::fence::fence(host, port, self.superuser_password).await {
            Ok(super::fence::Outcome::Stopped(m)) => Ok((SqlFenceState::Stopped, m)),
            Ok(super::fence::Outcome::Unreachable(m)) => Ok((SqlFenceState::Unreachable, m)),
            Err(e) => Err(Error::NotYet(format!(
                "fencing {name} through PostgreSQL: {e}"
            ))),
        }
    }

    /// The first instance (initdb), or one restoring from a backup, on its claim.
    async fn create_seed(&self, serial: u32, restore: bool) -> Result<(), Error> {
        if !restore {
            self.create_claim(serial).await?;
            return self.create_pod(serial, Role::Primary, None).await;
        }
        let from = restore_source(self.plan, serial)?;
        self.create_claim(serial).await?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.plan.namespace);
        let pod = build::restoring_pod(self.plan, serial, self.owner, &from);
        ignore_exists(api.create(&PostParams::default(), &pod).await)
    }

    fn name(&self, serial: u32) -> String {
        instance_name(&self.plan.name, serial)
    }

    fn instance(&self, serial: u32) -> Option<InstanceClient> {
        let ip = self.seen.pods.get(&serial)?.ip?;
        Some(InstanceClient::new(
            SocketAddr::new(ip, HTTP_PORT),
            Some(self.token.to_string()),
        ))
    }

    fn required(&self, serial: u32) -> Result<InstanceClient, Error> {
        self.instance(serial)
            .ok_or_else(|| Error::NotYet(format!("{} has no pod IP", self.name(serial))))
    }

    /// The serial of the instance running as the primary, if one does.
    fn running_primary(&self) -> Option<u32> {
        self.seen
            .states
            .iter()
            .find(|(_, s)| s.role == StateRole::Primary)
            .map(|(serial, _)| *serial)
    }

    /// ALTER SYSTEM and a reload on `serial`'s PostgreSQL; the next poll reads it back (the
    /// status shows the effective value).
    async fn set_synchronous(&self, serial: u32, n: u32) -> Result<(), Error> {
        let addr = self
            .seen
            .addr_of(serial)
            .ok_or_else(|| Error::NotYet(format!("{} has no IP", self.name(serial))))?;
        let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(&addr);
        let client =
            crate::instance::connect_remote(host, PG_PORT, SUPERUSER, self.superuser_password)
                .await
                .map_err(|e| Error::NotYet(format!("{}: {e}", self.name(serial))))?;
        // The server's statement timeout does not cover a backend that never reads the
        // query (hung IO): the client side bounds it too.
        tokio::time::timeout(
            SQL_DEADLINE,
            crate::instance::sql::set_synchronous(&client, n),
        )
        .await
        .map_err(|_| Error::NotYet(format!("{}: ALTER SYSTEM timed out", self.name(serial))))?
        .map_err(|e| Error::NotYet(format!("{}: {e}", self.name(serial))))
    }

    /// The spec's parameters into `serial`'s `postgresql.auto.conf` (ALTER SYSTEM), then a
    /// reload; the next poll reads them back. A value PostgreSQL refuses fails with its words.
    async fn set_parameters(&self, serial: u32) -> Result<(), Error> {
        let addr = self
            .seen
            .addr_of(serial)
            .ok_or_else(|| Error::NotYet(format!("{} has no IP", self.name(serial))))?;
        let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(&addr);
        let client =
            crate::instance::connect_remote(host, PG_PORT, SUPERUSER, self.superuser_password)
                .await
                .map_err(|e| Error::NotYet(format!("{}: {e}", self.name(serial))))?;
        let applied = tokio::time::timeout(
            SQL_DEADLINE,
            crate::instance::sql::set_parameters(&client, &self.plan.parameters),
        )
        .await
        .map_err(|_| Error::NotYet(format!("{}: ALTER SYSTEM timed out", self.name(serial))))?
        .map_err(|e| Error::NotYet(format!("{}: {e}", self.name(serial))))?;
        tracing::info!(instance = %self.name(serial), changed = ?applied.changed, "parameters set");
        if applied.refused.is_empty() {
            Ok(())
        } else {
            Err(Error::ParameterRefused(applied.refused.join("; ")))
        }
    }

    /// `host:port` of the running primary.
    fn primary_addr(&self) -> Result<String, Error> {
        self.seen
            .states
            .iter()
            .find(|(_, s)| s.role == StateRole::Primary)
            .and_then(|(serial, _)| self.seen.addr_of(*serial))
            .ok_or_else(|| Error::NotYet("no running primary to join".into()))
    }

    async fn create_claim(&self, serial: u32) -> Result<(), Error> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.plan.namespace);
        let claim = build::claim(self.plan, serial, self.owner);
        ignore_exists(api.create(&PostParams::default(), &claim).await)
    }

    async fn create_pod(
        &self,
        serial: u32,
        role: Role,
        primary: Option<&str>,
    ) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.plan.namespace);
        let pod = build::pod(self.plan, serial, role, primary, self.owner);
        ignore_exists(api.create(&PostParams::default(), &pod).await)
    }

    async fn delete_pod(&self, serial: u32) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.plan.namespace);
        ignore_missing(
            api.delete(&self.name(serial), &DeleteParams::default())
                .await,
        )
    }

    /// Deletes the pod of an instance that did not answer a fence, with a short grace
    /// period: a manager that ignored the fence will not run a clean shutdown either, and
    /// the failover waits for the kubelet to kill the pod's processes and remove it.
    async fn delete_to_fence(&self, serial: u32) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.plan.namespace);
        let dp = DeleteParams {
            grace_period_seconds: Some(FENCE_KILL_GRACE_SECS),
            ..Default::default()
        };
        ignore_missing(api.delete(&self.name(serial), &dp).await)
    }

    async fn delete_claim(&self, serial: u32) -> Result<(), Error> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.plan.namespace);
        ignore_missing(
            api.delete(&self.name(serial), &DeleteParams::default())
                .await,
        )
    }

    /// The removed member's slot would keep WAL on the primary forever; best effort (the
    /// primary may be away), logged.
    async fn drop_slot(&self, serial: u32) {
        let Ok(addr) = self.primary_addr() else {
            return;
        };
        let Some((host, _)) = addr.rsplit_once(':') else {
            return;
        };
        let slot = slot_name(&self.name(serial));
        let r = async {
            let client =
                crate::instance::connect_remote(host, PG_PORT, SUPERUSER, self.superuser_password)
                    .await
                    .map_err(|e| e.to_string())?;
            client
                .execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                     WHERE slot_name = $1 AND NOT active",
                    &[&slot],
                )
                .await
                .map_err(|e| e.to_string())
        };
        let r = tokio::time::timeout(SQL_DEADLINE, r)
            .await
            .unwrap_or_else(|_| Err("timed out".into()));
        if let Err(e) = r {
            tracing::warn!(%slot, error = %e, "could not drop the replication slot");
        }
    }

    /// Drops the primary's inactive `bosun_` slots that no member streams through: a
    /// removed replica's slot, when its walreceiver still held it at removal, would keep WAL
    /// on the primary forever. Run when the cluster is healthy; best effort, logged.
    pub async fn drop_orphan_slots(&self) {
        let Ok(addr) = self.primary_addr() else {
            return;
        };
        let Some((host, _)) = addr.rsplit_once(':') else {
            return;
        };
        let keep: Vec<String> = self
            .seen
            .pods
            .keys()
            .chain(self.seen.claims.iter())
            .map(|s| slot_name(&self.name(*s)))
            .collect();
        let r = async {
            let client =
                crate::instance::connect_remote(host, PG_PORT, SUPERUSER, self.superuser_password)
                    .await
                    .map_err(|e| e.to_string())?;
            client
                .execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                     WHERE slot_name LIKE 'bosun\\_%' AND NOT active \
                     AND NOT (slot_name = ANY($1))",
                    &[&keep],
                )
                .await
                .map_err(|e| e.to_string())
        };
        let r = tokio::time::timeout(SQL_DEADLINE, r)
            .await
            .unwrap_or_else(|_| Err("timed out".into()));
        match r {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(cluster = %self.plan.name, dropped = n, "dropped orphan replication slots")
            }
            Err(e) => {
                tracing::warn!(cluster = %self.plan.name, error = %e, "could not drop orphan replication slots")
            }
        }
    }

    /// Asks the running primary to take a base backup (it runs in the background there).
    pub async fn start_backup(&self) -> Result<(), Error> {
        let primary = self
            .running_primary()
            .ok_or_else(|| Error::NotYet("no running primary to back up".into()))?;
        Ok(self.required(primary)?.backup().await?)
    }

    /// Keeps the role label (the Service's selector) in step with a role change.
    async fn label_role(&self, serial: u32, role: &str) -> Result<(), Error> {
        label_role(self.client, &self.plan.namespace, &self.name(serial), role).await
    }
}

/// Where a restoring seed reads from: the first instance of a cluster bootstrapped from a
/// backup restores that backup (to its target); a later one — every instance's data lost —
/// restores the cluster's own backups to their end.
pub fn restore_source(plan: &Plan, serial: u32) -> Result<build::RestoreFrom, Error> {
    use crate::validate::BootstrapPlan;
    match (&plan.bootstrap, serial) {
        (
            BootstrapPlan::Recovery {
                store,
                source_cluster,
                target,
            },
            1,
        ) => Ok(build::RestoreFrom {
            cluster: source_cluster.clone(),
            store: store.clone(),
            target: target.clone(),
        }),
        _ => match plan.backup.as_ref().map(|b| &b.store) {
            Some(store) => Ok(build::RestoreFrom {
                cluster: plan.name.clone(),
                store: store.clone(),
                target: None,
            }),
            None => Err(Error::Unsupported(
                "the cluster has no backup store to restore from".into(),
            )),
        },
    }
}

pub async fn label_role(client: &Client, ns: &str, pod: &str, role: &str) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"metadata": {"labels": {ROLE_LABEL: role}}});
    ignore_missing(
        api.patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )
}

fn ignore_exists<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn ignore_missing<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
