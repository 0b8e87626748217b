//! The sharder's view of the members: who is live, whose Lease it took over.
//!
//! Every replica runs this task; the one that holds the sharder Lease does a round every
//! retry period: it reads the membership Leases, judges each expired by its own monotonic
//! clock (lease duration since it saw the record change, as a standby judges the leader's
//! Lease), takes over the Lease of each member that expired or released it (an update on the
//! `resourceVersion` it judged, so a renewal that lands first wins), renews its takeovers
//! while some object is still labelled with that member, deletes them when none is, and
//! publishes the result to every kind's placement loop (holding first placements while
//! fewer members are live than expected, early in its term: [`super::place::holds_first_placement`]) ([`super::kind`]). Its Lease writes go
//! through the client fenced by the sharder Lease. Each round also reads every member Lease's
//! record of child kinds ([`super::record`]) into this replica's, which the sharder Lease
//! then carries to the others.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::Client;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{MemberView, Reports, ShardConfig};
use crate::fence::Fence;
use crate::leader::LeaderElector;

pub(crate) struct Coordinator {
    pub cfg: ShardConfig,
    /// Unfenced: the sharder Lease itself.
    pub leader_client: Client,
    /// Fenced by `fence`: takeovers of member Leases.
    pub sharder_client: Client,
    pub fence: Fence,
    pub view: watch::Sender<Option<Arc<MemberView>>>,
    pub reports: Reports,
    /// This process's record of child kinds: each member Lease's record is read into it
    /// every round, and the sharder Lease carries the union to every replica (each reads
    /// that Lease while it campaigns for it).
    pub record: super::record::Record,
}

/// When each member Lease record was last seen to change, by this replica's clock.
#[derive(Default)]
struct Observed(HashMap<String, (Option<String>, String, Instant)>);

impl Observed {
    fn seen_at(&mut self, name: &str, holder: &Option<String>, rv: &str, now: Instant) -> Instant {
        match self.0.get(name) {
            Some((h, r, at)) if h == holder && r == rv => *at,
            _ => {
                self.0
                    .insert(name.to_string(), (holder.clone(), rv.to_string(), now));
                now
            }
        }
    }
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

impl Coordinator {
    /// Runs until `stop`, then releases the sharder Lease if it holds it.
    pub(crate) async fn run(self, stop: tokio_util::sync::CancellationToken) {
        loop {
            let elector =
                match LeaderElector::new(self.leader_client.clone(), self.cfg.sharder_lease()) {
                    Ok(e) => e
                        .with_fence(self.fence.clone())
                        .with_record(self.record.clone()),
                    Err(e) => {
                        tracing::error!(error = %e, "sharder lease: invalid settings");
                        return;
                    }
                };
            let mut elector = elector;
            tokio::select! {
                _ = elector.acquire() => {}
                _ = stop.cancelled() => return,
            }
            tracing::info!("this replica places the objects (holds the sharder lease)");
            self.reports.clear();
            let mut observed = Observed::default();
            let leading_since = Instant::now();
            let stopped = tokio::select! {
                _ = elector.hold() => false,
                _ = self.rounds(&mut observed, leading_since) => false,
                _ = stop.cancelled() => true,
            };
            self.view.send_replace(None);
            if stopped {
                if let Err(e) = elector.release().await {
                    tracing::warn!(error = %e, "could not release the sharder lease");
                }
                return;
            }
            tracing::warn!("lost the sharder lease: no longer placing objects");
        }
    }

    async fn rounds(&self, observed: &mut Observed, leading_since: Instant) {
        let mut tick = tokio::time::interval(self.cfg.timings().retry_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.round(observed).await {
                Ok(mut view) => {
                    view.holding = super::place::holds_first_placement(
                        self.cfg.expected(),
                        view.live.len(),
                        leading_since.elapsed(),
                        self.cfg.grace(),
                    );
                    if view.holding {
                        tracing::debug!(
                            live = view.live.len(),
                            expected = self.cfg.expected(),
                            "first placements held until the expected members are live"
                        );
                    }
                    self.view.send_replace(Some(Arc::new(view)));
                }
                Err(e) => tracing::warn!(error = %e, "sharder: could not read the members"),
            }
        }
    }

    async fn round(&self, observed: &mut Observed) -> Result<MemberView, kube::Error> {
        let ns = self.cfg.namespace();
        let read: Api<Lease> = Api::namespaced(self.leader_client.clone(), ns);
        let write: Api<Lease> = Api::namespaced(self.sharder_client.clone(), ns);
        let prefix = self.cfg.member_prefix();
        let tag = self.cfg.sharder_lease().lease_name;
        let default_duration = self.cfg.timings().lease_duration;
        let started = Instant::now();
        let in_use = self.reports.in_use();
        let leases = read.list(&ListParams::default()).await?;
        let now = Instant::now();
        let mut view = MemberView::default();
        let mut present = HashSet::new();
        for lease in leases.items {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let Some(member) = name.strip_prefix(&prefix).map(str::to_string) else {
                continue;
            };
            present.insert(member.clone());
            // A taken-over member's record too: its kinds' children are relabelled.
            self.record.read(lease.metadata.annotations.as_ref(), &name);
            let rv = lease.metadata.resource_version.clone().unwrap_or_default();
            let h = holder(&lease);
            let duration = lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(default_duration, Duration::from_secs);
            let fresh = now.duration_since(observed.seen_at(&name, &h, &rv, now)) < duration;
            if h.as_deref() == Some(tag.as_str()) {
                if in_use.contains(&member) {
                    if self.hold(&write, lease, &tag, false).await {
                        view.taken.insert(member);
                    }
                } else {
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            resource_version: Some(rv),
                            uid: None,
                        }),
                        ..Default::default()
                    };
                    match write.delete(&name, &dp).await {
                        Ok(_) => {
                            tracing::info!(member = %member, "member gone and no object left on it: lease deleted")
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, member = %member, "could not delete a takeover lease")
                        }
                    }
                }
            } else if h.as_deref() == Some(member.as_str()) && fresh {
                view.live.push(member);
            } else if (h.is_none() || !fresh) && self.hold(&write, lease, &tag, true).await {
                tracing::info!(member = %member, "member expired or left: its lease taken over, its objects move");
                view.taken.insert(member);
            }
        }
        // Objects labelled with a member that has no Lease at all: hold one for it, so that
        // a replica of that name cannot start working them while they move.
        for member in in_use.difference(&present) {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(format!("{prefix}{member}")),
                    ..Default::default()
                },
                spec: Some(self.takeover_spec(&tag, None)),
            };
            if write.create(&PostParams::default(), &lease).await.is_ok() {
                view.taken.insert(member.clone());
            }
        }
        view.live.sort();
        view.taken_until = Some((started + self.cfg.timings().renew_deadline).into_std());
        Ok(view)
    }

    fn takeover_spec(&self, tag: &str, old: Option<&LeaseSpec>) -> LeaseSpec {
        let secs = i32::try_from(self.cfg.timings().lease_duration.as_secs()).unwrap_or(i32::MAX);
        let now = MicroTime(Timestamp::now());
        let mut spec = old.cloned().unwrap_or_default();
        spec.holder_identity = Some(tag.to_string());
        spec.lease_duration_seconds = Some(secs);
        spec.renew_time = Some(now.clone());
        if old.is_none_or(|o| o.holder_identity.as_deref() != Some(tag)) {
            spec.acquire_time = Some(now);
            spec.lease_transitions = Some(old.and_then(|o| o.lease_transitions).unwrap_or(0) + 1);
        }
        spec
    }

    /// Takes over (or renews a takeover of) `lease`, on the `resourceVersion` read: false when
    /// someone wrote it since (the member renewed: it is alive).
    async fn hold(&self, api: &Api<Lease>, mut lease: Lease, tag: &str, take: bool) -> bool {
        let name = lease.metadata.name.clone().unwrap_or_default();
        lease.spec = Some(self.takeover_spec(tag, lease.spec.as_ref()));
        match api.replace(&name, &PostParams::default(), &lease).await {
            Ok(_) => true,
            Err(e) => {
                if take {
                    tracing::debug!(error = %e, lease = %name, "member lease not taken over");
                } else {
                    tracing::warn!(error = %e, lease = %name, "could not renew a takeover");
                }
                false
            }
        }
    }
}
