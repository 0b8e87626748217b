//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! * A standby judges the lease expired by its **own monotonic clock**: it notes when it last
//!   saw the lease record change and waits `lease_duration` from then. Timestamps written by
//!   other machines are never compared with the local wall clock, so clock skew between nodes
//!   cannot make two replicas lead at once.
//! * The leader renews every `retry_period`. It counts itself leader until `renew_deadline`
//!   (shorter than `lease_duration`) after the **start** of its last successful attempt: the
//!   renewal reached the server no earlier than that, so a standby, which waits
//!   `lease_duration` from when it saw the renewal, cannot take over before the leader has
//!   stopped. (Counting from the answer would let a late answer stretch the leader's belief
//!   past the standby's takeover.) Past the deadline, or on finding another holder, it reports
//!   the loss at once, so its controllers stop before any standby may take over.
//! * Every write carries the `resourceVersion` it read (optimistic concurrency), so two
//!   candidates racing for a free lease cannot both win.
//! * On graceful shutdown the leader releases the lease so a standby takes over without
//!   waiting for expiry.
//! * With a [`Fence`], the operators' client refuses every write past the instant the leader
//!   last proved it leads until: the controllers are stopped on a lost lease, but a process
//!   paused past its deadline wakes with its writes and that check racing (see
//!   [`crate::fence`]).
//!
//! The defaults (4 s lease, 3 s renew deadline, 0.5 s retry) put a standby in charge 3.5-4.5 s
//! after a `kill -9` of the leader (the lease, from the renewal the standby last saw, plus at
//! most one retry), where client-go's 15/10/2 took 15-17 s. They cost the leader 120 Lease
//! writes a minute at rest, and each standby 120 reads: a few small requests a second, next
//! to a node's heartbeat Lease every 10 s per node. An API server slower than 3 s for a while
//! makes the leader step down — a failover, never two writers.
//!
//! Why not a crate: kube-lease-manager (the best-kept one) judges expiry as the holder's
//! `renewTime + duration` against the local wall clock (skew up to its `grace` only) and keeps
//! believing it leads while its renewals fail; both conflict with this module's promises.
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::time::Instant;

use crate::fence::Fence;

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// bosun's defaults (see the module's documentation): 4 s lease, 3 s renew deadline,
    /// 0.5 s retry.
    pub fn new(lease_name: &str, namespace: &str, identity: &str) -> Self {
        LeaderConfig {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Refuses timings under which a leader could still write after a standby took over, or
    /// never renew in time; the message names the rule.
    pub fn validate(&self) -> Result<(), LeaderError> {
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.is_zero() {
            return Err(LeaderError::Timing(
                "the lease duration must be a whole number of seconds (a Lease records seconds)",
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaderError::Timing(
                "the renew deadline must be shorter than the lease duration",
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err(LeaderError::Timing(
                "the retry period must be above zero and shorter than the renew deadline",
            ));
        }
        Ok(())
    }
}

pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(4);
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(3);
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_millis(500);

impl LeaderConfig {}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lease API request failed: {0}")]
    Api(#[from] kube::Error),
    #[error("invalid leader election timing: {0}")]
    Timing(&'static str),
    #[error("lease API request timed out")]
    Timeout,
}

/// What was last seen of the lease, and when (by the local monotonic clock).
#[derive(Default)]
struct Observed {
    record: Option<(Option<String>, String)>, // (holder, resourceVersion)
    seen_at: Option<Instant>,
}

pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaderConfig,
    observed: Observed,
    /// Until when this replica may act as leader (`renew_deadline` after the start of its last
    /// successful attempt). Kept here, not in `hold`, so a cancelled `hold` resumes without
    /// stretching it.
    valid_until: Option<Instant>,
    fence: Option<Fence>,
    /// The record of child kinds this Lease carries ([`crate::shard::record`]): read from
    /// every Lease seen, written with every acquire and renewal.
    record: Option<crate::shard::record::Record>,
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

impl LeaderElector {
    pub fn new(client: Client, cfg: LeaderConfig) -> Result<Self, LeaderError> {
        cfg.validate()?;
        Ok(LeaderElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: Observed::default(),
            valid_until: None,
            fence: None,
            record: None,
        })
    }

    /// Carries `record` on the Lease: read whenever the Lease is read (a standby learns
    /// what the leader recorded), written with each acquire and renewal (no write of its
    /// own). A record on the Lease that is malformed or too big is ignored with a warning.
    pub fn with_record(mut self, record: crate::shard::record::Record) -> Self {
        self.record = Some(record);
        self
    }

    /// Moves `fence` with the leadership: open until the deadline of each successful
    /// renewal, closed on a loss or release (and now: this replica does not lead yet).
    pub fn with_fence(mut self, fence: Fence) -> Self {
        fence.close();
        self.fence = Some(fence);
        self
    }

    fn lost(&mut self) {
        self.valid_until = None;
        if let Some(f) = &self.fence {
            f.close();
        }
    }

    pub fn config(&self) -> &LeaderConfig {
        &self.cfg
    }

    fn duration_secs(&self) -> i32 {
        // Rounded up: a standby waits what the Lease says, which must not be less than what
        // this leader's renew deadline was computed against.
        let secs = self.cfg.lease_duration.as_secs()
            + u64::from(self.cfg.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }

    /// One attempt to acquire or renew. Ok(true) when this replica holds the lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = MicroTime(Timestamp::now());
        let Some(current) = self.api.get_opt(&self.cfg.lease_name).await? else {
            let mut metadata = ObjectMeta {
                name: Some(self.cfg.lease_name.clone()),
                ..Default::default()
            };
            if let Some(r) = &self.record {
                r.write(&mut metadata.annotations);
            }
            let lease = Lease {
                metadata,
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(self.duration_secs()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e.into()),
            };
        };

        if let Some(r) = &self.record {
            r.read(current.metadata.annotations.as_ref(), &self.cfg.lease_name);
        }
        let rv = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let current_holder = holder(&current);
        let record = (current_holder.clone(), rv);
        if self.observed.record.as_ref() != Some(&record) {
            self.observed.record = Some(record);
            self.observed.seen_at = Some(Instant::now());
        }
        let i_hold = current_holder.as_deref() == Some(self.cfg.identity.as_str());
        if !i_hold && current_holder.is_some() {
            let their_duration = current
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
                .unwrap_or(self.cfg.lease_duration);
            let seen_at = self.observed.seen_at.unwrap_or_else(Instant::now);
            if seen_at.elapsed() < their_duration {
                return Ok(false);
            }
        }

        let mut lease = current.clone();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if !i_hold {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.cfg.identity.clone());
        spec.lease_duration_seconds = Some(self.duration_secs());
        spec.renew_time = Some(now);
        if let Some(r) = &self.record {
            r.write(&mut lease.metadata.annotations);
        }
        // replace() sends the resourceVersion we read: a concurrent writer makes this fail with 409.
        match self
            .api
            .replace(&self.cfg.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observed.record = Some((
                    holder(&updated),
                    updated.metadata.resource_version.unwrap_or_default(),
                ));
                self.observed.seen_at = Some(Instant::now());
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// One attempt bounded by `deadline`; on success the leadership is valid until
    /// `renew_deadline` after the attempt's start.
    async fn attempt(&mut self, deadline: Instant) -> Result<bool, LeaderError> {
        let started = Instant::now();
        match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
            Ok(Ok(true)) => {
                let until = started + self.cfg.renew_deadline;
                self.valid_until = Some(until);
                if let Some(f) = &self.fence {
                    f.open_until(until);
                }
                Ok(true)
            }
            Ok(other) => other,
            Err(_) => Err(LeaderError::Timeout),
        }
    }

    /// Waits until this replica holds the lease.
    pub async fn acquire(&mut self) {
        loop {
            let deadline = Instant::now() + self.cfg.renew_deadline;
            match self.attempt(deadline).await {
                Ok(true) => {
                    tracing::info!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, "acquired leadership");
                    return;
                }
                Ok(false) => {
                    tracing::debug!(lease = %self.cfg.lease_name, "lease held by another replica")
                }
                Err(e) => tracing::warn!(error = %e, "leader election attempt failed"),
            }
            tokio::time::sleep(self.cfg.retry_period).await;
        }
    }

    /// Keeps renewing; returns when leadership is lost (no successful renewal started within
    /// `renew_deadline`, or another holder was found). The caller must stop writing at once.
    /// Cancel-safe: a later call carries on from the last successful renewal.
    pub async fn hold(&mut self) {
        loop {
            let Some(valid_until) = self.valid_until else {
                return;
            };
            let next = (Instant::now() + self.cfg.retry_period).min(valid_until);
            tokio::time::sleep_until(next).await;
            if Instant::now() >= valid_until {
                tracing::warn!(lease = %self.cfg.lease_name, "could not renew the lease before the deadline");
                self.lost();
                return;
            }
            match self.attempt(valid_until).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(lease = %self.cfg.lease_name, "lease taken by another replica");
                    self.lost();
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
            }
        }
    }

    /// Gives the lease up so a standby can take over at once. Only clears it if we hold it.
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        self.lost();
        let Some(mut lease) = self.api.get_opt(&self.cfg.lease_name).await? else {
            return Ok(());
        };
        if holder(&lease).as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match self
            .api
            .replace(&self.cfg.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
