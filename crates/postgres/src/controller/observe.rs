//! Observe: the cluster's pods and claims from the API server, and each instance's state
//! from its instance manager's API at the pod IP (Kubernetes refuses loopback Endpoints in
//! process mode, and a replica's `primary` is a pod IP anyway). The result is turned into the
//! lifecycle's [`Observation`] together with what the status recorded.
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::api::PostgresClusterStatus;
use crate::instance::client::InstanceClient;
use crate::instance::InstanceState;
use crate::lifecycle::{Member, Observation, Seen, SqlFence};
use crate::validate::{serial_of, Plan};

use super::build::{selector, HTTP_PORT, PG_PORT};

/// One instance's pod as the controller needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSeen {
    pub ip: Option<IpAddr>,
    pub terminating: bool,
    /// The node it is bound to (`spec.nodeName`).
    pub node: Option<String>,
    /// The role label it carries.
    pub role_label: Option<String>,
    /// The hash of the spec it was built from (`contract::TEMPLATE_ANNOTATION`).
    pub template: Option<String>,
    pub uid: Option<String>,
    /// Its status shows a container started at some point (running, exited or restarted).
    pub ever_started: bool,
}

/// What one cycle saw.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub pods: BTreeMap<u32, PodSeen>,
    pub claims: BTreeSet<u32>,
    pub states: BTreeMap<u32, InstanceState>,
    /// The nodes of unanswering pods that are not Ready or no longer exist.
    pub lost_nodes: BTreeSet<String>,
}

/// The cluster's claims (its instances' data and its backup volume), listed before the spec
/// is validated: their sizes bound a shrink.
pub async fn claims(
    client: &Client,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<PersistentVolumeClaim>, kube::Error> {
    let lp = ListParams::default().labels(&selector(cluster));
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&lp).await?.items)
}

/// Lists the cluster's pods, takes its `claims` (listed by [`claims`]) and asks every
/// instance with an IP for its state.
pub async fn observe(
    client: &Client,
    plan: &Plan,
    claims: &[PersistentVolumeClaim],
    token: Option<&str>,
) -> Result<Snapshot, kube::Error> {
    let lp = ListParams::default().labels(&selector(&plan.name));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &plan.namespace);
    let mut seen = Snapshot::default();
    for p in pods.list(&lp).await? {
        let Some(serial) = serial_of(&plan.name, &p.name_any()) else {
            continue;
        };
        seen.pods.insert(
            serial,
            PodSeen {
                ip: p
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.as_deref())
                    .and_then(|ip| ip.parse().ok()),
                terminating: p.metadata.deletion_timestamp.is_some(),
                node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
                role_label: p.labels().get(super::build::ROLE_LABEL).cloned(),
                uid: p.metadata.uid.clone(),
                ever_started: ever_started(&p),
                template: p
                    .annotations()
                    .get(crate::contract::TEMPLATE_ANNOTATION)
                    .cloned(),
            },
        );
    }
    for c in claims {
        if c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(serial) = serial_of(&plan.name, &c.name_any()) {
            seen.claims.insert(serial);
        }
    }
    let asks = seen
        .pods
        .iter()
        .filter_map(|(serial, p)| p.ip.map(|ip| (*serial, ip)))
        .map(|(serial, ip)| async move {
            let api =
                InstanceClient::new(SocketAddr::new(ip, HTTP_PORT), token.map(str::to_string));
            // A hung instance must not hold the cycle: its state is then unknown.
            let state = tokio::time::timeout(Duration::from_secs(3), api.state()).await;
            (serial, state.ok().and_then(|r| r.ok()))
        });
    for (serial, state) in futures::future::join_all(asks).await {
        if let Some(s) = state {
            seen.states.insert(serial, s);
        }
    }
    // Only the nodes of pods that did not answer matter: whether a kubelet there will kill
    // what still runs decides how an unanswering primary's absence is proven.
    let unanswered: BTreeSet<String> = seen
        .pods
        .iter()
        .filter(|(serial, _)| !seen.states.contains_key(serial))
        .filter_map(|(_, p)| p.node.clone())
        .collect();
    let nodes: Api<Node> = Api::all(client.clone());
    for name in unanswered {
        match nodes.get_opt(&name).await {
            Ok(Some(n)) if node_ready(&n) => {}
            Ok(_) => {
                seen.lost_nodes.insert(name);
            }
            // Unknown counts as Ready: the failover then waits for the pod to be gone
            // rather than trusting a self-fence it cannot prove.
            Err(e) => tracing::warn!(node = %name, error = %e, "reading the node failed"),
        }
    }
    Ok(seen)
}

/// Whether the pod's status shows any container started, ever.
fn ever_started(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.started == Some(true)
                    || c.restart_count > 0
                    || c.state
                        .as_ref()
                        .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
                    || c.last_state
                        .as_ref()
                        .is_some_and(|s| s.terminated.is_some())
            })
        })
}

/// The fence through PostgreSQL of the recorded primary, from its record (one for another
/// instance says nothing of this one).
fn sql_fence(status: &PostgresClusterStatus) -> SqlFence {
    use crate::api::SqlFenceState;
    let Some(l) = status
        .last_primary
        .as_ref()
        .filter(|l| status.current_primary.as_deref() == Some(l.instance.as_str()))
    else {
        return SqlFence::NoAddress;
    };
    match l.sql_fence {
        None | Some(SqlFenceState::Fencing) => SqlFence::NotTried,
        Some(SqlFenceState::Stopped) => SqlFence::Stopped,
        Some(SqlFenceState::Unreachable) => SqlFence::Unreachable,
    }
}

/// The node reports Ready=True; NotReady and Unknown (a silent kubelet) do not.
fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Snapshot {
    /// The serial of the instance whose PostgreSQL listens at `host:port`.
    pub fn serial_at(&self, addr: &str) -> Option<u32> {
        self.pods
            .iter()
            .find(|(_, p)| p.ip.is_some_and(|ip| format!("{ip}:{PG_PORT}") == addr))
            .map(|(s, _)| *s)
    }

    /// `host:port` of instance `serial`'s PostgreSQL.
    pub fn addr_of(&self, serial: u32) -> Option<String> {
        self.pods
            .get(&serial)
            .and_then(|p| p.ip)
            .map(|ip| format!("{ip}:{PG_PORT}"))
    }

    /// The lifecycle's input: these members plus what the status recorded; `template` is
    /// the current spec's pod template hash (`build::template_hash`).
    pub fn observation(
        &self,
        plan: &Plan,
        status: &PostgresClusterStatus,
        lost_for: Option<Duration>,
        template: &str,
    ) -> Observation {
        let serials: BTreeSet<u32> = self
            .pods
            .keys()
            .chain(self.claims.iter())
            .copied()
            .collect();
        let members = serials
            .iter()
            .map(|&serial| Member {
                serial,
                pod: self.pods.contains_key(&serial),
                claim: self.claims.contains(&serial),
                terminating: self.pods.get(&serial).is_some_and(|p| p.terminating),
                node_lost: self
                    .pods
                    .get(&serial)
                    .and_then(|p| p.node.as_ref())
                    .is_some_and(|n| self.lost_nodes.contains(n)),
                never_started: self
                    .pods
                    .get(&serial)
                    .is_some_and(|p| p.node.is_some() && !p.ever_started),
                unscheduled: self
                    .pods
                    .get(&serial)
                    .is_some_and(|p| p.node.is_none() && !p.terminating),
                outdated: self
                    .pods
                    .get(&serial)
                    .is_some_and(|p| p.template.as_deref() != Some(template))
                    || self
                        .states
                        .get(&serial)
                        .is_some_and(|s| s.parameters.iter().flatten().any(|p| p.pending_restart)),
                seen: self
                    .states
                    .get(&serial)
                    .map(|s| Seen::from_state(s, |a| self.serial_at(a))),
            })
            .collect();
        let recorded =
            |name: &Option<String>| name.as_deref().and_then(|n| serial_of(&plan.name, n));
        let latest = u32::try_from(status.latest_instance).unwrap_or(0);
        Observation {
            members,
            current_primary: recorded(&status.current_primary),
            target_primary: recorded(&status.target_primary),
            latest_serial: serials.iter().copied().max().unwrap_or(0).max(latest),
            primary_lost_for: lost_for,
            // This poll counts: the status written after it records one more.
            primary_missed: if lost_for.is_some() {
                u32::try_from(status.primary_missed_polls.saturating_add(1)).unwrap_or(0)
            } else {
                0
            },
            primary_last_lsn: status
                .primary_last_lsn
                .as_deref()
                .and_then(crate::instance::parse_lsn),
            // The status recorded a base backup of this cluster: restore from the store when
            // every instance's data is gone (the restoring instance reports it if the store
            // no longer holds one).
            has_backup: plan.backup.is_some()
                && status
                    .backup
                    .as_ref()
                    .is_some_and(|b| b.last_successful_backup.is_some()),
            restore_blocked: None,
            primary_stopped_cleanly: lost_for.is_some()
                && super::status::clean_stop(plan, self, status).is_some(),
            primary_sql_fence: sql_fence(status),
            seed: status
                .seed
                .as_ref()
                .and_then(|s| Some((serial_of(&plan.name, &s.instance)?, s.restore))),
        }
    }
}
