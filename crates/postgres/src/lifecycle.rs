//! The lifecycle's decision (pure): what was observed of a cluster in, **one** action out,
//! as the seed (etcd-operator) teaches — observe, analyse, act, then observe again.
//!
//! The operator gathers an [`Observation`] (pods, claims, each instance's state from its API,
//! and what its status recorded: the primary, the switchover target, the latest serial, since
//! when the primary is lost), calls [`decide`], records the decision in the status, then
//! carries it out. Nothing is held in memory between cycles, so a restart mid-failover
//! resumes from the status.
//!
//! The rules, in order of precedence:
//! 1. paused → nothing.
//! 2. two instances running as primary → fence every one but the one to keep (the recorded
//!    primary, else the most advanced): two writable primaries is the data-loss case.
//! 3. with a primary: fence what the spec fences; restart pods whose claim is intact; forget
//!    members whose data is gone (their names are never reused); rejoin fenced or
//!    wrongly-pointed members as replicas of the primary; re-clone a replica of the live
//!    primary whose WAL is gone there (it can never stream again; see
//!    [`reclone_loses_nothing`] for why nothing is lost); wait for unready members; then grow
//!    (one replica at a time), shrink (the highest replica, never the primary), switch over.
//! 4. without a primary: finish a switchover (the old primary fenced first); after the
//!    failover delay *and* [`FAILOVER_MISSED_POLLS`] consecutive polls without a primary, with
//!    a quorum of standbys answering under synchronous replication, fence the old primary (if
//!    its pod is still there; an unanswering one whose pod is Terminating on a Ready node
//!    counts only once that pod is gone, as the kubelet kills its processes first) then
//!    promote the replica with the most WAL received, if it is
//!    within `maxFailoverLagBytes` of the newest position known; without such a replica,
//!    restart the old primary's pod; with no data at all, restore from the backup or fail.
use std::time::Duration;

use crate::instance::{parse_lsn, InstanceState, StateRole};
use crate::validate::{Fencing, Plan};

/// One member (instance) of the cluster as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub serial: u32,
    /// Its pod exists.
    pub pod: bool,
    /// Its data claim exists.
    pub claim: bool,
    /// Its pod is being deleted (it may stay so forever when its node is lost).
    pub terminating: bool,
    /// Its pod's node is not Ready (NotReady, Unknown) or no longer exists: no kubelet there
    /// is known to kill its processes at the end of a grace period.
    pub node_lost: bool,
    /// Its pod is bound to no node (Pending: no node it may run on, e.g. its volume's zone
    /// is down): nothing of it has run, and it may never start.
    pub unscheduled: bool,
    /// Its pod is bound to a node and its status never showed a container started (a
    /// status from a lost node may be old: it may have started since).
    pub never_started: bool,
    /// Its pod was built from an older spec (image, resources, pod labels or annotations,
    /// the backup store), or its PostgreSQL waits for a restart to apply a parameter: the
    /// rolling update replaces it.
    pub outdated: bool,
    /// What its instance manager reported (None: the API did not answer).
    pub seen: Option<Seen>,
}

/// An instance's report, as the decision needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub role: StateRole,
    pub ready: bool,
    pub timeline: Option<u32>,
    /// Primary: written. Replica: received (what a failover compares).
    pub lsn: Option<u64>,
    /// The serial of the primary a replica follows.
    pub follows: Option<u32>,
    /// Why its restore from the backup store failed (a new primary that waits, no data).
    pub restore_failed: Option<String>,
    /// A replica whose WAL went past the point its primary's timeline forked: it never
    /// streams until rewound.
    pub diverged: bool,
    /// A primary: the standbys each commit waits for now (None: unknown).
    pub synchronous: Option<u32>,
    /// The parameters written in its `postgresql.auto.conf` (None: unknown).
    pub parameters: Option<std::collections::BTreeMap<String, String>>,
    /// Parameters it holds but applies only after a restart.
    pub pending_restart: Vec<String>,
    /// A replica that does not stream: why it never can again from its primary (the WAL it
    /// needs is gone there).
    pub cannot_catch_up: Option<String>,
}

impl Seen {
    /// From an instance's API answer; `serial_at` names the instance at a `host:port` (the
    /// operator knows the pod IPs).
    pub fn from_state(s: &InstanceState, serial_at: impl Fn(&str) -> Option<u32>) -> Seen {
        // A replica is compared on what it received: replay may lag behind and catches up
        // after promotion anyway.
        let lsn = match s.role {
            StateRole::Replica => s.received_lsn.as_deref().or(s.lsn.as_deref()),
            _ => s.lsn.as_deref(),
        };
        Seen {
            role: s.role,
            ready: s.ready,
            timeline: s.timeline,
            lsn: lsn.and_then(parse_lsn),
            follows: s.primary.as_deref().and_then(serial_at),
            restore_failed: s.restore_failure.clone(),
            diverged: s.diverged.is_some(),
            synchronous: s.synchronous,
            parameters: s.parameters.as_ref().map(|ps| {
                ps.iter()
                    .filter_map(|p| Some((p.name.clone(), p.written.clone()?)))
                    .collect()
            }),
            pending_restart: s
                .parameters
                .iter()
                .flatten()
                .filter(|p| p.pending_restart)
                .map(|p| p.name.clone())
                .collect(),
            cannot_catch_up: s.cannot_catch_up.clone(),
        }
    }
}

/// Everything a decision reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    pub members: Vec<Member>,
    /// status.currentPrimary, as a serial.
    pub current_primary: Option<u32>,
    /// status.targetPrimary, when a switchover is under way.
    pub target_primary: Option<u32>,
    /// status.latestInstance: serials are never reused.
    pub latest_serial: u32,
    /// How long no primary has been seen (None: one is seen now).
    pub primary_lost_for: Option<Duration>,
    /// Consecutive polls, this one included, in which no primary was seen.
    pub primary_missed: u32,
    /// The primary's WAL position when last seen (lag of a failover candidate counts from it).
    pub primary_last_lsn: Option<u64>,
    /// A backup store holds a base backup to restore from.
    pub has_backup: bool,
    /// Why a bootstrap from a backup cannot start (its store is not there).
    pub restore_blocked: Option<String>,
    /// The recorded primary's pod is being deleted (or gone) after reporting that its
    /// postgres stopped cleanly: it cannot be writable, so no isolation wait and no failover
    /// delay apply.
    pub primary_stopped_cleanly: bool,
    /// What the operator's fence through PostgreSQL found at the recorded primary's last
    /// address (`status.lastPrimary`).
    pub primary_sql_fence: SqlFence,
    /// The seed being made (serial, whether it restores) with no primary run since
    /// (`status.seed`).
    pub seed: Option<(u32, bool)>,
}

/// The operator's own fence of an old primary whose manager does not answer, through its
/// PostgreSQL at the address it last had (issue 32, M4): a stopped manager fences nothing,
/// so neither its isolation check nor the time since it was seen proves its PostgreSQL
/// stopped while the kubelet is not known to have killed it (pod force-deleted, or
/// Terminating on a lost node).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SqlFence {
    /// No address recorded for the old primary (a status written by an older operator):
    /// the isolation wait alone applies, as before.
    #[default]
    NoAddress,
    /// Not tried yet, or a try failed half way: the operator tries (again).
    NotTried,
    /// Its PostgreSQL answered as a primary and was stopped by the operator.
    Stopped,
    /// Nothing answered there as this cluster's primary (refused, unreachable within the
    /// bound, another server): the isolation wait applies.
    Unreachable,
}

/// The one action of this cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do or nothing to do yet.
    Wait(Wait),
    /// The first instance: initdb, or a restore from the backup.
    CreateSeed {
        serial: u32,
        restore: bool,
    },
    /// A new replica (`pg_basebackup` from the primary).
    AddReplica {
        serial: u32,
    },
    /// Recreate a pod on its intact claim.
    StartPod {
        serial: u32,
    },
    /// Remove a member whose data is gone (pod and slot); a new one replaces it later.
    RemoveMember {
        serial: u32,
    },
    /// Stop PostgreSQL there (through its API; the pod is deleted if the API does not answer).
    Fence {
        serial: u32,
    },
    /// The old primary's manager does not answer and no kubelet is known to have killed it:
    /// reach its PostgreSQL at its last address with SQL and stop it (recorded in the status
    /// first, the outcome after).
    FencePostgres {
        serial: u32,
    },
    Unfence {
        serial: u32,
    },
    /// Record `to` as the target primary, then fence `from`.
    BeginSwitchover {
        from: u32,
        to: u32,
    },
    Promote {
        serial: u32,
    },
    /// Rejoin as a replica of `primary` (rewind, or re-clone).
    Follow {
        serial: u32,
        primary: u32,
    },
    /// Replace a replica's data with a fresh clone of `primary`: the WAL it needs to catch
    /// up is gone there (`why`). Only for a replica of that live primary, so nothing is lost.
    Reclone {
        serial: u32,
        primary: u32,
        why: String,
    },
    /// Make the primary's commits wait for `n` standbys (0: none), live (ALTER SYSTEM and a
    /// reload).
    SetSynchronous {
        serial: u32,
        n: u32,
    },
    /// Scale down: remove this replica (pod and claim).
    RemoveReplica {
        serial: u32,
    },
    /// Make this running instance's `postgresql.auto.conf` hold the spec's parameters
    /// (ALTER SYSTEM, then a reload).
    SetParameters {
        serial: u32,
    },
    /// Rolling update: replace this instance's pod (deleted gracefully; the next cycles make
    /// it again on its claim from the current spec). Never the primary of a cluster that has
    /// a replica to switch over to.
    RollInstance {
        serial: u32,
    },
    /// Nothing can be done: the reason goes to the status and an Event.
    Fail(String),
}

/// Why nothing is done this cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    Healthy,
    Paused,
    /// A member is starting or catching up.
    Unready {
        serial: u32,
    },
    /// The primary is lost, for less than the failover delay.
    FailoverDelay {
        remaining: Duration,
    },
    /// The primary was missed on fewer consecutive polls than a failover needs.
    PrimaryMissed {
        polls: u32,
    },
    /// Synchronous replication: too few standbys answer to know which one holds every
    /// acknowledged commit.
    FailoverQuorum {
        have: u32,
        need: u32,
    },
    /// The old primary's pod is gone or stuck Terminating, unseen: it may still run where its
    /// pod was; it fences itself within the isolation timeout, this much later.
    PrimaryIsolating {
        remaining: Duration,
    },
    /// The old primary's pod is Terminating on a Ready node and its manager does not answer:
    /// its PostgreSQL may still run until the kubelet kills the pod's processes at the end of
    /// the grace period and removes the pod object; promotion waits for that.
    PrimaryTerminating {
        serial: u32,
    },
    /// The current primary is fenced by request: no failover.
    PrimaryFenced {
        serial: u32,
    },
    /// The old primary's pod is back and starting.
    PrimaryStarting {
        serial: u32,
    },
}

/// Consecutive polls without a primary before a failover (with the failover delay).
pub const FAILOVER_MISSED_POLLS: u32 = 3;

/// The decision of one cycle.
pub fn decide(plan: &Plan, obs: &Observation) -> Action {
    if plan.paused {
        return Action::Wait(Wait::Paused);
    }
    if obs.members.is_empty() {
        return no_members(plan, obs);
    }
    let primaries: Vec<&Member> = obs
        .members
        .iter()
        .filter(|m| role(m) == Some(StateRole::Primary))
        .collect();
    match primaries.as_slice() {
        [] => without_primary(plan, obs),
        [p] => with_primary(plan, obs, p.serial),
        many => {
            let keep = keep_of(obs, many);
            let extra = many.iter().find(|m| m.serial != keep).map(|m| m.serial);
            match extra {
                Some(serial) => Action::Fence { serial },
                None => Action::Wait(Wait::Healthy),
            }
        }
    }
}

fn role(m: &Member) -> Option<StateRole> {
    m.seen.as_ref().map(|s| s.role)
}

fn spec_fenced(plan: &Plan, serial: u32) -> bool {
    match &plan.fencing {
        Fencing::None => false,
        Fencing::All => true,
        Fencing::Some(set) => set.contains(&serial),
    }
}

/// Of several primaries: the switchover's target when one was under way (the old primary was
/// fenced on purpose; what the target accepted since must not be rewound away), else the
/// recorded one, else the latest timeline and most WAL.
fn keep_of(obs: &Observation, many: &[&Member]) -> u32 {
    if let Some(t) = obs
        .target_primary
        .filter(|t| Some(*t) != obs.current_primary)
    {
        if many.iter().any(|m| m.serial == t) {
            return t;
        }
    }
    if let Some(p) = obs.current_primary {
        if many.iter().any(|m| m.serial == p) {
            return p;
        }
    }
    many.iter()
        .max_by_key(|m| {
            let s = m.seen.as_ref();
            (
                s.and_then(|s| s.timeline),
                s.and_then(|s| s.lsn),
                std::cmp::Reverse(m.serial),
            )
        })
        .map(|m| m.serial)
        .unwrap_or(0)
}

fn no_members(plan: &Plan, obs: &Observation) -> Action {
    let serial = obs.latest_serial + 1;
    if obs.latest_serial == 0 {
        let restore = matches!(
            plan.bootstrap,
            crate::validate::BootstrapPlan::Recovery { .. }
        );
        if let (true, Some(why)) = (restore, &obs.restore_blocked) {
            return Action::Fail(why.clone());
        }
        return Action::CreateSeed { serial, restore };
    }
    if obs.has_backup {
        Action::CreateSeed {
            serial,
            restore: true,
        }
    } else {
        Action::Fail("every instance's data is gone and there is no backup to restore".into())
    }
}

fn with_primary(plan: &Plan, obs: &Observation, primary: u32) -> Action {
    let members = &obs.members;
    let effective = members
        .iter()
        .find(|m| m.serial == primary)
        .and_then(|m| m.seen.as_ref())
        .and_then(|s| s.synchronous);
    // Lowered: first, before any replica is removed, or the primary would wait for
    // standbys that no longer exist (every commit hangs).
    if effective.is_some_and(|e| e > plan.synchronous) {
        return Action::SetSynchronous {
            serial: primary,
            n: plan.synchronous,
        };
    }
    // What the spec fences, unless already fenced.
    if let Some(m) = members
        .iter()
        .find(|m| spec_fenced(plan, m.serial) && m.pod && role(m) != Some(StateRole::Fenced))
    {
        return Action::Fence { serial: m.serial };
    }
    if let Some(m) = members.iter().find(|m| !m.pod && m.claim) {
        return Action::StartPod { serial: m.serial };
    }
    if let Some(m) = members.iter().find(|m| !m.claim && m.serial != primary) {
        return Action::RemoveMember { serial: m.serial };
    }
    for m in members.iter().filter(|m| m.serial != primary) {
        let Some(seen) = &m.seen else { continue };
        let wrong = match seen.role {
            StateRole::Fenced => !spec_fenced(plan, m.serial),
            // Diverged: it follows the primary but can never stream from it; the rejoin
            // rewinds it.
            StateRole::Replica => seen.follows != Some(primary) || seen.diverged,
            StateRole::Stopped => true,
            _ => false,
        };
        if wrong {
            return Action::Follow {
                serial: m.serial,
                primary,
            };
        }
    }
    if let Some((m, why)) = members.iter().find_map(|m| {
        let why = m.seen.as_ref()?.cannot_catch_up.as_ref()?;
        (m.serial != primary
            && !spec_fenced(plan, m.serial)
            && reclone_loses_nothing(members, m, primary))
        .then_some((m, why))
    }) {
        return Action::Reclone {
            serial: m.serial,
            primary,
            why: why.clone(),
        };
    }
    // Parameters reach every running instance live; one that needs a restart then waits in
    // `pending_restart` for the rolling update below.
    if let Some(m) = members.iter().find(|m| {
        m.seen.as_ref().is_some_and(|s| {
            matches!(s.role, StateRole::Primary | StateRole::Replica) && !parameters_match(plan, s)
        })
    }) {
        return Action::SetParameters { serial: m.serial };
    }
    if let Some(m) = members.iter().find(|m| {
        (!spec_fenced(plan, m.serial) && !m.seen.as_ref().is_some_and(|s| s.ready))
            // A pod on its way out (a rolling update's) is down even if it still answers.
            || m.terminating
    }) {
        return Action::Wait(Wait::Unready { serial: m.serial });
    }
    let count = members.len() as u32;
    if count < plan.size {
        return Action::AddReplica {
            serial: obs.latest_serial + 1,
        };
    }
    // Raised: once the replicas that will confirm are there and ready.
    if effective.is_some_and(|e| e < plan.synchronous) {
        return Action::SetSynchronous {
            serial: primary,
            n: plan.synchronous,
        };
    }
    if count > plan.size {
        if let Some(m) = members
            .iter()
            .filter(|m| m.serial != primary)
            .max_by_key(|m| m.serial)
        {
            return Action::RemoveReplica { serial: m.serial };
        }
    }
    // Rolling update, with every member ready (checked above), so one instance at a time:
    // the replicas first, lowest serial first.
    if let Some(m) = members
        .iter()
        .find(|m| m.serial != primary && m.outdated && !spec_fenced(plan, m.serial))
    {
        return Action::RollInstance { serial: m.serial };
    }
    if let Some(to) = plan.switchover_to {
        if to != primary && members.iter().any(|m| m.serial == to) {
            return Action::BeginSwitchover { from: primary, to };
        }
    }
    // Then the primary: a switchover to an updated replica (never a failover), after which
    // the old primary is an outdated replica, rolled as above. `supervised` leaves the
    // switchover to the user (the PodsUpToDate condition says so).
    if members.iter().any(|m| m.serial == primary && m.outdated) && !plan.supervised_primary_update
    {
        match update_target(plan, members, primary) {
            Some(to) => return Action::BeginSwitchover { from: primary, to },
            // No replica at all: the pod must be replaced, and that is an outage only a
            // single instance has.
            None if count == 1 => return Action::RollInstance { serial: primary },
            None => {}
        }
    }
    Action::Wait(Wait::Healthy)
}

/// Whether replacing `m`'s data with a clone of `primary` can lose no committed data (issue
/// 32, M13): `m` is a replica in recovery that follows `primary`, which is running, ready (it
/// accepts writes) and ahead of it on the same or a later timeline, and `m` has not diverged.
/// A replica only ever holds WAL it received from the primaries it followed; not diverged,
/// that WAL is a prefix of the live primary's history, which that primary holds, so the clone
/// brings every byte back. A replica that may hold WAL no one else has (diverged, ahead of the
/// primary, following another, or while no primary answers) is never re-cloned.
fn reclone_loses_nothing(members: &[Member], m: &Member, primary: u32) -> bool {
    let Some(p) = members
        .iter()
        .find(|p| p.serial == primary)
        .and_then(|p| p.seen.as_ref())
    else {
        return false;
    };
    let Some(r) = &m.seen else {
        return false;
    };
    p.role == StateRole::Primary
        && p.ready
        && r.role == StateRole::Replica
        && r.follows == Some(primary)
        && !r.diverged
        && matches!((r.timeline, p.timeline), (Some(rt), Some(pt)) if rt <= pt)
        && matches!((r.lsn, p.lsn), (Some(rl), Some(pl)) if rl <= pl)
}

/// Whether the instance's `postgresql.auto.conf` holds the spec's parameters, no more (the
/// operator's own entries aside); unknown counts as matching (nothing to act on).
pub fn parameters_match(plan: &Plan, s: &Seen) -> bool {
    let Some(written) = &s.parameters else {
        return true;
    };
    let theirs: Vec<(&String, &String)> = written
        .iter()
        .filter(|(k, _)| !crate::contract::OPERATOR_AUTO_CONF.contains(&k.as_str()))
        .collect();
    theirs.len() == plan.parameters.len()
        && theirs.iter().all(|(k, v)| {
            plan.parameters
                .get(*k)
                .is_some_and(|d| crate::contract::parameter_matches(k, v, d))
        })
}

/// The replicas a rolling update may switch over to: updated, ready, streaming from the
/// primary, not fenced.
pub fn update_targets(plan: &Plan, members: &[Member], primary: u32) -> Vec<u32> {
    members
        .iter()
        .filter(|m| m.serial != primary && !m.outdated && !spec_fenced(plan, m.serial))
        .filter(|m| {
            m.seen.as_ref().is_some_and(|s| {
                s.role == StateRole::Replica && s.ready && !s.diverged && s.follows == Some(primary)
            })
        })
        .map(|m| m.serial)
        .collect()
}

/// Of [`update_targets`], the most advanced (the lowest serial of equals).
fn update_target(plan: &Plan, members: &[Member], primary: u32) -> Option<u32> {
    let targets = update_targets(plan, members, primary);
    members
        .iter()
        .filter(|m| targets.contains(&m.serial))
        .max_by_key(|m| {
            (
                m.seen.as_ref().and_then(|s| s.lsn),
                std::cmp::Reverse(m.serial),
            )
        })
        .map(|m| m.serial)
}

fn without_primary(plan: &Plan, obs: &Observation) -> Action {
    let members = &obs.members;
    // A restore that cannot succeed: retrying changes nothing; the user must act.
    if let Some((m, why)) = members.iter().find_map(|m| {
        m.seen
            .as_ref()
            .and_then(|s| s.restore_failed.as_ref())
            .map(|w| (m, w))
    }) {
        return Action::Fail(format!(
            "restoring instance {} from the backup failed: {why}",
            crate::controller::build::instance_name(&plan.name, m.serial)
        ));
    }
    let old = obs
        .current_primary
        .and_then(|p| members.iter().find(|m| m.serial == p));
    if let Some(o) = old {
        if spec_fenced(plan, o.serial) {
            return Action::Wait(Wait::PrimaryFenced { serial: o.serial });
        }
    }
    let replicas: Vec<&Member> = members
        .iter()
        .filter(|m| role(m) == Some(StateRole::Replica) && !spec_fenced(plan, m.serial))
        .collect();
    // Nothing is promoted while the old primary may still write: it is fenced first (through
    // its API, else its pod is deleted), a switchover included. A pod whose node is lost
    // stays Terminating forever, and a pod force-deleted is gone while postgres may still run
    // there: neither proves the old primary stopped. Only its own isolation does: a primary
    // cut off from the operator and every replica fences itself within the isolation timeout,
    // so once it has been unseen for longer it counts as fenced (issue 32, H6).
    // That needs a live manager: a stopped one (SIGSTOP, a deadlock) fences nothing while its
    // PostgreSQL runs on. So a pod Terminating on a Ready node proves nothing until it is
    // gone: that kubelet kills the pod's whole process group at the end of the grace period
    // and only then removes the object (issue 32, M4; the chaos `stall` case).
    let awaiting_kubelet = old.filter(|o| {
        o.pod && o.terminating && !o.node_lost && o.seen.is_none() && !obs.primary_stopped_cleanly
    });
    // Force-deleted (the object gone before anything was killed) or Terminating where no
    // kubelet answers: the time unseen proves only that a *live* manager fenced itself. The
    // operator first reaches the old PostgreSQL itself, at its last address, and stops it;
    // the isolation wait is relied on only when nothing answers there.
    let beyond_kubelet = old.filter(|o| {
        o.seen.is_none()
            && (!o.pod || (o.terminating && o.node_lost))
            && !obs.primary_stopped_cleanly
            && obs.primary_sql_fence != SqlFence::NoAddress
    });
    let sql_pending = beyond_kubelet.is_some() && obs.primary_sql_fence == SqlFence::NotTried;
    let sql_stopped = beyond_kubelet.is_some() && obs.primary_sql_fence == SqlFence::Stopped;
    let isolated = (old.is_some_and(|o| o.seen.is_none())
        && awaiting_kubelet.is_none()
        && !sql_pending
        && obs
            .primary_lost_for
            .is_some_and(|l| l >= Duration::from_secs(crate::contract::ISOLATION_WAIT_SECS)))
        || (obs.primary_stopped_cleanly && old.is_some_and(|o| !o.pod || o.terminating))
        || sql_stopped;
    // Fencing it again would only re-send a deletion: the wait says what it waits for.
    let fence = |o: &Member| match awaiting_kubelet {
        Some(_) => Action::Wait(Wait::PrimaryTerminating { serial: o.serial }),
        None => Action::Fence { serial: o.serial },
    };
    let unconfirmed = old.is_some_and(|o| {
        role(o) != Some(StateRole::Fenced) && (!o.pod || o.terminating) && !isolated
    });
    let old_unfenced =
        old.filter(|o| o.pod && role(o) != Some(StateRole::Fenced) && !(o.terminating && isolated));
    // A switchover under way: the old primary was fenced on purpose; no delay applies.
    if let Some(t) = obs
        .target_primary
        .filter(|t| Some(*t) != obs.current_primary)
    {
        if let Some(m) = replicas.iter().find(|m| m.serial == t) {
            if let Some(o) = old_unfenced {
                return fence(o);
            }
            // No isolation wait here: a switchover fenced the old primary through its API
            // (a fence survives restarts) before recording the target.
            return Action::Promote { serial: m.serial };
        }
    }
    // A primary that shut down cleanly on its pod's deletion is gone for good: the delay
    // and the missed polls guard against a slow or restarting primary, which it is not.
    let gone_for_good = obs.primary_stopped_cleanly && isolated;
    if !replicas.is_empty() {
        // The old primary cannot run (no node takes its pod): every other member with data
        // is started during the delay, so that the most advanced can be chosen and a
        // synchronous quorum reached.
        if old.is_some_and(|o| stranded(plan, o)) {
            if let Some(m) = members
                .iter()
                .find(|m| m.claim && !m.pod && Some(m.serial) != obs.current_primary)
            {
                return Action::StartPod { serial: m.serial };
            }
        }
        let lost = obs.primary_lost_for.unwrap_or_default();
        let delay = plan.failover_delay;
        if !gone_for_good && lost < delay {
            return Action::Wait(Wait::FailoverDelay {
                remaining: delay - lost,
            });
        }
        if obs.primary_missed < FAILOVER_MISSED_POLLS && !gone_for_good {
            return Action::Wait(Wait::PrimaryMissed {
                polls: obs.primary_missed,
            });
        }
        let old_serial = old.map(|o| o.serial);
        // With `ANY n` synchronous replication every commit reached n of the standbys, not
        // a named one: only the most advanced of at least (standbys - n + 1) answers is
        // sure to hold them all.
        if plan.synchronous > 0 {
            let standbys = members
                .iter()
                .filter(|m| Some(m.serial) != old_serial && !spec_fenced(plan, m.serial))
                .count() as u32;
            let need = standbys.saturating_sub(plan.synchronous).saturating_add(1);
            let have = replicas
                .iter()
                .filter(|m| Some(m.serial) != old_serial)
                .count() as u32;
            if have < need {
                return Action::Wait(Wait::FailoverQuorum { have, need });
            }
        }
        if let Some(b) = candidate(plan, obs, &replicas, old_serial) {
            if let Some(o) = beyond_kubelet.filter(|_| sql_pending) {
                return Action::FencePostgres { serial: o.serial };
            }
            // The old primary must not come back writable beside the new one.
            if let Some(o) = old_unfenced {
                return fence(o);
            }
            if unconfirmed {
                let lost = obs.primary_lost_for.unwrap_or_default();
                return Action::Wait(Wait::PrimaryIsolating {
                    remaining: Duration::from_secs(crate::contract::ISOLATION_WAIT_SECS)
                        .saturating_sub(lost),
                });
            }
            return Action::Promote { serial: b };
        }
    }
    // A promotion was recorded (target ≠ current) and then the target went away: it may be
    // the primary already, with commits the old one never had. It is brought back (as a
    // replica, promoted again) before the old primary is ever unfenced (issue 32, M15).
    if let Some(t) = obs
        .target_primary
        .filter(|t| Some(*t) != obs.current_primary)
        .and_then(|t| members.iter().find(|m| m.serial == t && m.claim))
    {
        if !t.pod {
            return Action::StartPod { serial: t.serial };
        }
        if !matches!(role(t), Some(StateRole::Fenced | StateRole::Stopped)) {
            return Action::Wait(Wait::PrimaryStarting { serial: t.serial });
        }
    }
    // The seed's pod went before it ever ran as the primary (mid-initdb, mid-restore): its
    // volume holds no data of a primary, only an unfinished seed. Made again as the seed,
    // never as a replica with no primary (it would wait for ever on a half-restored
    // directory) (issue 32, M12).
    if let Some((serial, restore)) = obs.seed {
        if members
            .iter()
            .any(|m| m.serial == serial && m.claim && !m.pod)
        {
            return Action::CreateSeed { serial, restore };
        }
    }
    // No replica to promote: restart on the data that is left, the old primary's first.
    // Its pod bound to no node (Pending: its zone may be down for hours) is not starting:
    // the replicas are started beside it, and the failover above promotes one of them after
    // the delay, deleting that pod first (issue 32, M12(c)).
    if let Some(o) = old {
        if o.claim && !o.pod {
            return Action::StartPod { serial: o.serial };
        }
        if o.claim && role(o) != Some(StateRole::Fenced) && !stranded(plan, o) {
            return Action::Wait(Wait::PrimaryStarting { serial: o.serial });
        }
        if role(o) == Some(StateRole::Fenced) {
            return Action::Unfence { serial: o.serial };
        }
    }
    if let Some(m) = members.iter().find(|m| m.claim && !m.pod) {
        return Action::StartPod { serial: m.serial };
    }
    if members.iter().all(|m| !m.claim) {
        return no_members(plan, obs);
    }
    let starting = members
        .iter()
        .find(|m| m.claim)
        .map(|m| m.serial)
        .unwrap_or(0);
    Action::Wait(Wait::PrimaryStarting { serial: starting })
}

/// The old primary's pod is not counted on to start, and the replicas are started beside
/// it (the failover rules then apply, the old primary fenced first like any other): bound to
/// no node, nothing of it ran (M12(c)); or bound to a lost node with no container ever
/// started per its status — it may have started after the node's last report, as a primary
/// with no standby, so only under synchronous replication, where none of its commits can be
/// acknowledged (no standby follows it: the replicas start with no upstream, then follow
/// the promoted one). Without, it is waited for: one of its commits could be acknowledged
/// and then lost.
fn stranded(plan: &Plan, o: &Member) -> bool {
    o.seen.is_none() && (o.unscheduled || (o.node_lost && o.never_started && plan.synchronous > 0))
}

/// The replica a failover promotes: not diverged, with a known position at most
/// `max_failover_lag` behind the newest position known (the old primary's last, or the most
/// advanced replica's); of those, the latest timeline and most WAL. None: no replica may be
/// promoted without losing more than the bound.
fn candidate(
    plan: &Plan,
    obs: &Observation,
    replicas: &[&Member],
    old: Option<u32>,
) -> Option<u32> {
    let lsn = |m: &Member| m.seen.as_ref().and_then(|s| s.lsn);
    let newest = replicas
        .iter()
        .filter_map(|m| lsn(m))
        .chain(obs.primary_last_lsn)
        .max()?;
    replicas
        .iter()
        .filter(|m| Some(m.serial) != old)
        .filter(|m| {
            let s = m.seen.as_ref();
            // WAL past a fork is WAL no one else has: never promoted by a failover.
            !s.is_some_and(|s| s.diverged)
                && lsn(m).is_some_and(|l| newest.saturating_sub(l) <= plan.max_failover_lag)
        })
        .max_by_key(|m| {
            let s = m.seen.as_ref();
            (
                s.and_then(|s| s.timeline),
                lsn(m),
                std::cmp::Reverse(m.serial),
            )
        })
        .map(|m| m.serial)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::plan_of;

    fn primary(serial: u32, timeline: u32, lsn: u64) -> Member {
        member(serial, StateRole::Primary, true, timeline, lsn, None)
    }

    fn replica(serial: u32, follows: u32, ready: bool, lsn: u64) -> Member {
        member(serial, StateRole::Replica, ready, 1, lsn, Some(follows))
    }

    fn member(
        serial: u32,
        role: StateRole,
        ready: bool,
        timeline: u32,
        lsn: u64,
        follows: Option<u32>,
    ) -> Member {
        Member {
            serial,
            pod: true,
            claim: true,
            terminating: false,
            node_lost: false,
            unscheduled: false,
            never_started: false,
            outdated: false,
            seen: Some(Seen {
                role,
                ready,
                timeline: Some(timeline),
                lsn: Some(lsn),
                follows,
                restore_failed: None,
                diverged: false,
                synchronous: None,
                parameters: None,
                pending_restart: Vec::new(),
                cannot_catch_up: None,
            }),
        }
    }

    fn gone(mut m: Member, pod: bool, claim: bool) -> Member {
        m.pod = pod;
        m.claim = claim;
        if !pod {
            m.seen = None;
        }
        m
    }

    fn obs(members: Vec<Member>, current: Option<u32>, latest: u32) -> Observation {
        Observation {
            members,
            current_primary: current,
            target_primary: None,
            latest_serial: latest,
            primary_lost_for: None,
            primary_missed: 0,
            primary_last_lsn: None,
            has_backup: false,
            restore_blocked: None,
            primary_stopped_cleanly: false,
            primary_sql_fence: SqlFence::NoAddress,
            seed: None,
        }
    }

    #[test]
    fn a_new_cluster_starts_with_its_seed() {
        let p = plan_of(serde_json::json!({"size": 3}));
        assert_eq!(
            decide(&p, &obs(vec![], None, 0)),
            Action::CreateSeed {
                serial: 1,
                restore: false
            }
        );
        let r = plan_of(
            serde_json::json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}}}}),
        );
        assert_eq!(
            decide(&r, &obs(vec![], None, 0)),
            Action::CreateSeed {
                serial: 1,
                restore: true
            }
        );
    }

    #[test]
    fn replicas_are_added_one_at_a_time_with_new_serials() {
        let p = plan_of(serde_json::json!({"size": 3}));
        assert_eq!(
            decide(&p, &obs(vec![primary(1, 1, 100)], Some(1), 1)),
            Action::AddReplica { serial: 2 }
        );
        // pg-2 still joining: no third one yet.
        assert_eq!(
            decide(
                &p,
                &obs(
                    vec![primary(1, 1, 100), replica(2, 1, false, 0)],
                    Some(1),
                    2
                )
            ),
            Action::Wait(Wait::Unready { serial: 2 })
        );
        // A removed member's serial is not reused.
        assert_eq!(
            decide(
                &p,
                &obs(
                    vec![primary(1, 1, 100), replica(4, 1, true, 90)],
                    Some(1),
                    4
                )
            ),
            Action::AddReplica { serial: 5 }
        );
    }

    #[test]
    fn a_dead_member_is_replaced_before_growing() {
        let p = plan_of(serde_json::json!({"size": 4}));
        let members = vec![
            primary(1, 1, 100),
            gone(replica(2, 1, true, 90), false, false),
            replica(3, 1, true, 90),
        ];
        assert_eq!(
            decide(&p, &obs(members, Some(1), 3)),
            Action::RemoveMember { serial: 2 }
        );
        // A pod gone with its claim intact restarts on it.
        let members = vec![
            primary(1, 1, 100),
            gone(replica(2, 1, true, 90), false, true),
        ];
        assert_eq!(
            decide(&p, &obs(members, Some(1), 2)),
            Action::StartPod { serial: 2 }
        );
    }

    #[test]
    fn scaling_down_removes_the_highest_replica_never_the_primary() {
        let p = plan_of(serde_json::json!({"size": 1}));
        let members = vec![
            replica(1, 3, true, 90),
            replica(2, 3, true, 90),
            primary(3, 2, 100),
        ];
        assert_eq!(
            decide(&p, &obs(members, Some(3), 3)),
            Action::RemoveReplica { serial: 2 }
        );
    }

    #[test]
    fn failover_waits_for_the_delay_then_fences_and_promotes_the_most_advanced_replica() {
        let p = plan_of(serde_json::json!({"size": 3, "failoverDelaySeconds": 10}));
        let lost_primary = Member {
            seen: None,
            ..primary(1, 1, 100)
        };
        let members = vec![
            lost_primary,
            replica(2, 1, false, 80),
            replica(3, 1, false, 95),
        ];
        let mut o = obs(members, Some(1), 3);
        o.primary_lost_for = Some(Duration::from_secs(4));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        assert_eq!(
            decide(&p, &o),
            Action::Wait(Wait::FailoverDelay {
                remaining: Duration::from_secs(6)
            })
        );
        o.primary_lost_for = Some(Duration::from_secs(10));
        // Its pod is still there (unreachable): fence it first.
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        o.members[0].seen = Some(Seen {
            role: StateRole::Fenced,
            ready: false,
            timeline: None,
            lsn: None,
            follows: None,
            restore_failed: None,
            diverged: false,
            synchronous: None,
            parameters: None,
            pending_restart: Vec::new(),
            cannot_catch_up: None,
        });
        assert_eq!(decide(&p, &o), Action::Promote { serial: 3 });
        // Pod deleted, unseen since: it may have been force-deleted with postgres still
        // running; promoted once the old primary has fenced itself (issue 32, H6).
        o.members[0] = gone(o.members[0].clone(), false, true);
        o.members[0].seen = None;
        assert!(matches!(
            decide(&p, &o),
            Action::Wait(Wait::PrimaryIsolating { .. })
        ));
        o.primary_lost_for = Some(Duration::from_secs(crate::contract::ISOLATION_WAIT_SECS));
        assert_eq!(decide(&p, &o), Action::Promote { serial: 3 });
    }

    /// Issue 32, H6: a primary whose node is lost stays Terminating forever, and a force
    /// delete removes its pod while postgres may still run there. Neither blocks failover
    /// forever, and neither promotes before the old primary has fenced itself (isolation).
    #[test]
    fn a_lost_node_neither_blocks_failover_nor_promotes_before_the_primary_isolates() {
        let p = plan_of(serde_json::json!({"size": 2, "failoverDelaySeconds": 10}));
        let wait = Duration::from_secs(crate::contract::ISOLATION_WAIT_SECS);
        for terminating in [true, false] {
            let old = Member {
                seen: None,
                pod: terminating,
                terminating,
                node_lost: terminating,
                outdated: false,
                ..primary(1, 1, 100)
            };
            let mut o = obs(vec![old, replica(2, 1, true, 100)], Some(1), 2);
            o.primary_missed = FAILOVER_MISSED_POLLS;
            for lost in [10, wait.as_secs() - 1] {
                o.primary_lost_for = Some(Duration::from_secs(lost));
                let d = decide(&p, &o);
                assert!(
                    !matches!(d, Action::Promote { .. }),
                    "terminating={terminating}, lost {lost}s: promoted while the old primary may write"
                );
            }
            // Past the isolation wait: it has fenced itself; a pod stuck Terminating no
            // longer holds the failover.
            for lost in [wait.as_secs(), 3600] {
                o.primary_lost_for = Some(Duration::from_secs(lost));
                assert_eq!(
                    decide(&p, &o),
                    Action::Promote { serial: 2 },
                    "terminating={terminating}, lost {lost}s"
                );
            }
        }
        // A Terminating pod whose manager still answers is fenced through its API first.
        let old = Member {
            terminating: true,
            outdated: false,
            seen: Some(Seen {
                role: StateRole::Starting,
                ready: false,
                timeline: Some(1),
                lsn: Some(100),
                follows: None,
                restore_failed: None,
                diverged: false,
                synchronous: None,
                parameters: None,
                pending_restart: Vec::new(),
                cannot_catch_up: None,
            }),
            ..primary(1, 1, 100)
        };
        let mut o = obs(vec![old, replica(2, 1, true, 100)], Some(1), 2);
        o.primary_missed = FAILOVER_MISSED_POLLS;
        o.primary_lost_for = Some(wait);
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
    }

    #[test]
    fn after_a_failover_the_old_primary_follows_the_new_one() {
        let p = plan_of(serde_json::json!({"size": 3}));
        let old = member(1, StateRole::Fenced, false, 1, 100, None);
        let members = vec![old, primary(3, 2, 120), replica(2, 1, true, 95)];
        // The old primary first (lower serial), then the replica still pointing at it.
        assert_eq!(
            decide(&p, &obs(members.clone(), Some(3), 3)),
            Action::Follow {
                serial: 1,
                primary: 3
            }
        );
        let mut m = members;
        m[0] = replica(1, 3, true, 120);
        assert_eq!(
            decide(&p, &obs(m, Some(3), 3)),
            Action::Follow {
                serial: 2,
                primary: 3
            }
        );
    }

    #[test]
    fn two_primaries_are_never_left_running() {
        let p = plan_of(serde_json::json!({"size": 2}));
        let members = vec![primary(1, 1, 100), primary(2, 2, 50)];
        // The recorded primary is kept.
        assert_eq!(
            decide(&p, &obs(members.clone(), Some(2), 2)),
            Action::Fence { serial: 1 }
        );
        // None recorded: the later timeline wins.
        assert_eq!(
            decide(&p, &obs(members, None, 2)),
            Action::Fence { serial: 1 }
        );
    }

    #[test]
    fn all_pods_dead_with_claims_restart_the_old_primary_first() {
        let p = plan_of(serde_json::json!({"size": 2}));
        let members = vec![
            gone(replica(1, 2, true, 90), false, true),
            gone(primary(2, 1, 100), false, true),
        ];
        let mut o = obs(members, Some(2), 2);
        o.primary_lost_for = Some(Duration::from_secs(600));
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 2 });
    }

    #[test]
    fn all_data_gone_restores_from_the_backup_or_fails() {
        let p = plan_of(serde_json::json!({"size": 2}));
        let mut o = obs(vec![], Some(2), 2);
        assert!(matches!(decide(&p, &o), Action::Fail(ref why) if why.contains("no backup")));
        o.has_backup = true;
        assert_eq!(
            decide(&p, &o),
            Action::CreateSeed {
                serial: 3,
                restore: true
            }
        );
    }

    #[test]
    fn a_failed_restore_fails_the_cluster_with_its_reason() {
        let p = plan_of(
            serde_json::json!({"bootstrap": {"recovery": {"store": {"volume": {"size": "1Gi"}}, "clusterName": "old"}}}),
        );
        let mut o = obs(vec![], None, 0);
        o.restore_blocked = Some("no backup volume old-backup".into());
        assert_eq!(
            decide(&p, &o),
            Action::Fail("no backup volume old-backup".into())
        );
        let mut m = member(1, StateRole::Stopped, false, 1, 0, None);
        if let Some(s) = m.seen.as_mut() {
            s.restore_failed = Some("no base backup in the store".into());
        }
        let mut o = obs(vec![m], None, 1);
        o.primary_lost_for = Some(Duration::from_secs(600));
        assert!(
            matches!(decide(&p, &o), Action::Fail(ref why) if why.contains("pg-1") && why.contains("no base backup")),
            "{:?}",
            decide(&p, &o)
        );
    }

    #[test]
    fn switchover_fences_the_primary_then_promotes_the_target_without_delay() {
        let p = plan_of(
            serde_json::json!({"size": 3, "switchoverTo": "pg-2", "failoverDelaySeconds": 60}),
        );
        let members = vec![
            primary(1, 1, 100),
            replica(2, 1, true, 100),
            replica(3, 1, true, 100),
        ];
        assert_eq!(
            decide(&p, &obs(members.clone(), Some(1), 3)),
            Action::BeginSwitchover { from: 1, to: 2 }
        );
        let mut m = members;
        m[0] = member(1, StateRole::Fenced, false, 1, 100, None);
        let mut o = obs(m, Some(1), 3);
        o.target_primary = Some(2);
        o.primary_lost_for = Some(Duration::ZERO);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
    }

    #[test]
    fn a_primary_fenced_by_request_is_not_failed_over() {
        let p = plan_of(serde_json::json!({"size": 2, "fencedInstances": ["pg-1"]}));
        let members = vec![primary(1, 1, 100), replica(2, 1, true, 100)];
        assert_eq!(
            decide(&p, &obs(members.clone(), Some(1), 2)),
            Action::Fence { serial: 1 }
        );
        let mut m = members;
        m[0] = member(1, StateRole::Fenced, false, 1, 100, None);
        let mut o = obs(m, Some(1), 2);
        o.primary_lost_for = Some(Duration::from_secs(600));
        assert_eq!(
            decide(&p, &o),
            Action::Wait(Wait::PrimaryFenced { serial: 1 })
        );
    }

    /// A replica that follows the primary but diverged from its timeline is rejoined (the
    /// rejoin rewinds it), not waited for: it never becomes ready by itself. And it is the
    /// last choice for a promotion.
    #[test]
    fn a_diverged_replica_is_rejoined_and_promoted_last() {
        let p = plan_of(serde_json::json!({"size": 3}));
        let mut diverged = replica(3, 1, false, 500);
        if let Some(s) = diverged.seen.as_mut() {
            s.diverged = true;
        }
        let members = vec![primary(1, 2, 400), replica(2, 1, true, 400), diverged];
        assert_eq!(
            decide(&p, &obs(members.clone(), Some(1), 3)),
            Action::Follow {
                serial: 3,
                primary: 1
            }
        );
        // The primary lost: the diverged replica has more WAL, on the same timeline here,
        // but the other is promoted.
        let mut m = members;
        m[0] = gone(m[0].clone(), false, true);
        let mut o = obs(m, Some(1), 3);
        o.primary_lost_for = Some(Duration::from_secs(600));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
    }

    #[test]
    fn an_instance_report_is_read_for_the_decision() {
        let state = InstanceState {
            name: "pg-2".into(),
            role: StateRole::Replica,
            ready: true,
            timeline: Some(2),
            lsn: Some("0/3000000".into()),
            received_lsn: Some("1/10".into()),
            primary: Some("10.0.0.3:5432".into()),
            last_rejoin: None,
            rewind_failure: None,
            error: None,
            restore_failure: None,
            diverged: None,
            synchronous: None,
            isolation_armed: false,
            stopped_cleanly: false,
            cannot_catch_up: None,
            archive_read_failure: None,
            backup: None,
            parameters: None,
        };
        let seen = Seen::from_state(&state, |addr| (addr == "10.0.0.3:5432").then_some(3));
        assert_eq!(
            seen,
            Seen {
                role: StateRole::Replica,
                ready: true,
                timeline: Some(2),
                lsn: Some((1 << 32) + 0x10),
                follows: Some(3),
                restore_failed: None,
                diverged: false,
                synchronous: None,
                parameters: None,
                pending_restart: Vec::new(),
                cannot_catch_up: None,
            }
        );
    }

    #[test]
    fn paused_does_nothing() {
        let p = plan_of(serde_json::json!({"paused": true}));
        assert_eq!(
            decide(&p, &obs(vec![], None, 0)),
            Action::Wait(Wait::Paused)
        );
    }

    /// Every combination of three members' states: a promotion is only ever chosen when no
    /// member runs as primary, it targets a replica, and never the fenced-by-request.
    #[test]
    fn no_decision_ever_makes_a_second_primary() {
        let p = plan_of(serde_json::json!({"size": 3, "fencedInstances": ["pg-3"]}));
        let kinds = [
            Some(StateRole::Primary),
            Some(StateRole::Replica),
            Some(StateRole::Fenced),
            Some(StateRole::Starting),
            None, // unreachable
        ];
        let mut checked = 0;
        for a in kinds {
            for b in kinds {
                for c in kinds {
                    for pods in [true, false] {
                        let members: Vec<Member> = [a, b, c]
                            .iter()
                            .enumerate()
                            .map(|(i, k)| Member {
                                serial: i as u32 + 1,
                                pod: pods || i > 0,
                                claim: true,
                                terminating: false,
                                node_lost: false,
                                unscheduled: false,
                                never_started: false,
                                outdated: false,
                                seen: k.map(|role| Seen {
                                    role,
                                    ready: true,
                                    timeline: Some(1),
                                    lsn: Some(100 + i as u64),
                                    follows: Some(1),
                                    restore_failed: None,
                                    diverged: false,
                                    synchronous: None,
                                    parameters: None,
                                    pending_restart: Vec::new(),
                                    cannot_catch_up: None,
                                }),
                            })
                            .collect();
                        for (lost, target) in [0, 600]
                            .into_iter()
                            .flat_map(|l| [None, Some(2), Some(3)].map(|t| (l, t)))
                        {
                            let mut o = obs(members.clone(), Some(1), 3);
                            o.primary_lost_for = Some(Duration::from_secs(lost));
                            o.primary_missed = FAILOVER_MISSED_POLLS;
                            o.target_primary = target;
                            if let Action::Promote { serial } = decide(&p, &o) {
                                let running_primary =
                                    members.iter().any(|m| role(m) == Some(StateRole::Primary));
                                assert!(
                                    !running_primary,
                                    "promoted {serial} beside a primary: {members:?}"
                                );
                                let target = &members[serial as usize - 1];
                                assert_eq!(role(target), Some(StateRole::Replica), "{members:?}");
                                assert_ne!(serial, 3, "promoted a fenced instance");
                                // The old primary is fenced or its pod is gone.
                                let old = &members[0];
                                assert!(
                                    !old.pod || role(old) == Some(StateRole::Fenced),
                                    "{members:?}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 0, "no promotion was ever decided");
    }

    fn unseen(m: Member) -> Member {
        Member { seen: None, ..m }
    }

    fn fenced(serial: u32) -> Member {
        member(serial, StateRole::Fenced, false, 1, 100, None)
    }

    /// Issue 32, H2: the old primary does not answer (a slow poll, a restarting container)
    /// while a switchover is recorded: it is fenced before the target is promoted.
    #[test]
    fn a_switchover_target_is_promoted_only_once_the_old_primary_is_fenced() {
        let p = plan_of(serde_json::json!({"size": 2, "switchoverTo": "pg-2"}));
        let mut o = obs(
            vec![unseen(primary(1, 1, 100)), replica(2, 1, true, 100)],
            Some(1),
            2,
        );
        o.target_primary = Some(2);
        o.primary_lost_for = Some(Duration::ZERO);
        o.primary_missed = 1;
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        o.members[0] = fenced(1);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        o.members[0] = gone(o.members[0].clone(), false, true);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
    }

    /// Issue 32, H2: both answer as primaries during a switchover (the old one came back):
    /// the target, which may have taken writes already, is kept; the old one is fenced.
    #[test]
    fn two_primaries_during_a_switchover_keep_the_target() {
        let p = plan_of(serde_json::json!({"size": 2}));
        let mut o = obs(vec![primary(1, 1, 100), primary(2, 2, 90)], Some(1), 2);
        o.target_primary = Some(2);
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
    }

    /// Issue 32, H4: one slow poll is not a lost primary, whatever the delay.
    #[test]
    fn a_failover_needs_the_primary_missed_on_consecutive_polls() {
        let p = plan_of(serde_json::json!({"size": 2, "failoverDelaySeconds": 0}));
        let mut o = obs(
            vec![unseen(primary(1, 1, 100)), replica(2, 1, false, 100)],
            Some(1),
            2,
        );
        o.primary_lost_for = Some(Duration::from_secs(4));
        for polls in 1..FAILOVER_MISSED_POLLS {
            o.primary_missed = polls;
            assert_eq!(decide(&p, &o), Action::Wait(Wait::PrimaryMissed { polls }));
        }
        o.primary_missed = FAILOVER_MISSED_POLLS;
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        // And by default a delay longer than a container restart applies too.
        let d = plan_of(serde_json::json!({"size": 2}));
        assert_eq!(d.failover_delay, Duration::from_secs(10));
        assert!(matches!(
            decide(&d, &o),
            Action::Wait(Wait::FailoverDelay { .. })
        ));
    }

    /// Issue 32, H5: a replica far behind the newest position known is never promoted (the
    /// old primary is waited for instead); one within the bound is.
    #[test]
    fn a_failover_never_promotes_a_replica_beyond_the_lag_bound() {
        let p = plan_of(serde_json::json!({"size": 2, "failoverDelaySeconds": 0}));
        let mib = 1u64 << 20;
        let mut o = obs(
            vec![
                gone(primary(1, 1, 100 * mib), false, true),
                replica(2, 1, false, 50 * mib),
            ],
            Some(1),
            2,
        );
        o.primary_lost_for = Some(Duration::from_secs(60));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        o.primary_last_lsn = Some(100 * mib);
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 1 });
        o.primary_last_lsn = Some(60 * mib);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        let strict = plan_of(serde_json::json!({
            "size": 2, "failoverDelaySeconds": 0,
            "replication": {"maxFailoverLagBytes": 0}
        }));
        assert_eq!(decide(&strict, &o), Action::StartPod { serial: 1 });
    }

    /// Issue 32, H5: with `synchronous: 1` of 2 standbys, the one that holds every
    /// acknowledged commit is unknown until both answer; then the most advanced wins.
    #[test]
    fn synchronous_failover_waits_for_a_quorum_of_standbys() {
        let p = plan_of(serde_json::json!({
            "size": 3, "failoverDelaySeconds": 0, "replication": {"synchronous": 1}
        }));
        let mut o = obs(
            vec![
                gone(primary(1, 1, 100), false, true),
                unseen(replica(2, 1, false, 100)),
                replica(3, 1, false, 90),
            ],
            Some(1),
            3,
        );
        o.primary_lost_for = Some(Duration::from_secs(60));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        assert_eq!(
            decide(&p, &o),
            Action::Wait(Wait::FailoverQuorum { have: 1, need: 2 })
        );
        o.members[1] = replica(2, 1, false, 100);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
    }

    fn with_sync(mut m: Member, n: u32) -> Member {
        if let Some(s) = m.seen.as_mut() {
            s.synchronous = Some(n);
        }
        m
    }

    /// Issue 32, H3: `{size: 1, synchronous: 0}` on a size-2 cluster waiting for 1 standby:
    /// the primary stops waiting before its only standby is removed.
    #[test]
    fn lowering_synchronous_with_size_applies_before_the_replica_goes() {
        let p = plan_of(serde_json::json!({"size": 1}));
        let mut o = obs(
            vec![with_sync(primary(1, 1, 100), 1), replica(2, 1, true, 100)],
            Some(1),
            2,
        );
        assert_eq!(decide(&p, &o), Action::SetSynchronous { serial: 1, n: 0 });
        o.members[0] = with_sync(primary(1, 1, 100), 0);
        assert_eq!(decide(&p, &o), Action::RemoveReplica { serial: 2 });
    }

    /// Issue 32, H3: a raised `synchronous` reaches the running primary once its replicas
    /// are ready; an unknown effective value is left alone.
    #[test]
    fn raising_synchronous_applies_to_the_running_primary() {
        let p = plan_of(serde_json::json!({"size": 2, "replication": {"synchronous": 1}}));
        let mut o = obs(
            vec![with_sync(primary(1, 1, 100), 0), replica(2, 1, false, 90)],
            Some(1),
            2,
        );
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Unready { serial: 2 }));
        o.members[1] = replica(2, 1, true, 100);
        assert_eq!(decide(&p, &o), Action::SetSynchronous { serial: 1, n: 1 });
        o.members[0] = with_sync(primary(1, 1, 100), 1);
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Healthy));
        o.members[0] = primary(1, 1, 100);
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Healthy));
    }

    fn outdated(mut m: Member) -> Member {
        m.outdated = true;
        m
    }

    fn with_parameters(mut m: Member, written: &[(&str, &str)]) -> Member {
        if let Some(s) = m.seen.as_mut() {
            s.parameters = Some(
                written
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        m
    }

    /// Issue 32: a rolling update replaces one instance at a time, every member ready
    /// before the next, the replicas first, then switches over to an updated replica (the
    /// most advanced) and replaces the old primary last, as a replica.
    #[test]
    fn a_rolling_update_goes_replicas_first_then_switches_over_then_the_old_primary() {
        let p = plan_of(serde_json::json!({"size": 3}));
        let mut o = obs(
            vec![
                outdated(primary(1, 1, 100)),
                outdated(replica(2, 1, true, 100)),
                outdated(replica(3, 1, true, 100)),
            ],
            Some(1),
            3,
        );
        assert_eq!(decide(&p, &o), Action::RollInstance { serial: 2 });
        // Its pod deleted, still terminating: nothing else goes down meanwhile.
        o.members[1].terminating = true;
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Unready { serial: 2 }));
        // Gone: made again (from the current spec), then waited for.
        o.members[1] = gone(o.members[1].clone(), false, true);
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 2 });
        o.members[1] = replica(2, 1, false, 0);
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Unready { serial: 2 }));
        o.members[1] = replica(2, 1, true, 100);
        assert_eq!(decide(&p, &o), Action::RollInstance { serial: 3 });
        o.members[2] = replica(3, 1, true, 101);
        // Only the primary is outdated: a switchover to the most advanced updated replica.
        assert_eq!(decide(&p, &o), Action::BeginSwitchover { from: 1, to: 3 });
        // A replica that does not stream from the primary is no target.
        o.members[2] = replica(3, 2, true, 101);
        assert_eq!(
            decide(&p, &o),
            Action::Follow {
                serial: 3,
                primary: 1
            }
        );
        // After the switchover the old primary is a replica, outdated: replaced last.
        let o = obs(
            vec![
                outdated(replica(1, 3, true, 100)),
                replica(2, 3, true, 100),
                primary(3, 2, 120),
            ],
            Some(3),
            3,
        );
        assert_eq!(decide(&p, &o), Action::RollInstance { serial: 1 });
    }

    /// `supervised`: the replicas are updated, the primary waits for the user's
    /// `switchoverTo`; a single instance has nothing to switch to and is replaced in place
    /// (unsupervised only).
    #[test]
    fn a_supervised_update_waits_for_the_switchover_and_a_lone_primary_is_replaced() {
        let sup = plan_of(serde_json::json!({"size": 2, "primaryUpdateStrategy": "supervised"}));
        let o = obs(
            vec![
                outdated(primary(1, 1, 100)),
                outdated(replica(2, 1, true, 100)),
            ],
            Some(1),
            2,
        );
        assert_eq!(decide(&sup, &o), Action::RollInstance { serial: 2 });
        let o = obs(
            vec![outdated(primary(1, 1, 100)), replica(2, 1, true, 100)],
            Some(1),
            2,
        );
        assert_eq!(decide(&sup, &o), Action::Wait(Wait::Healthy));
        let asked = plan_of(serde_json::json!({
            "size": 2, "primaryUpdateStrategy": "supervised", "switchoverTo": "pg-2"
        }));
        assert_eq!(
            decide(&asked, &o),
            Action::BeginSwitchover { from: 1, to: 2 }
        );
        let one = plan_of(serde_json::json!({"size": 1}));
        let o = obs(vec![outdated(primary(1, 1, 100))], Some(1), 1);
        assert_eq!(decide(&one, &o), Action::RollInstance { serial: 1 });
        let one_sup =
            plan_of(serde_json::json!({"size": 1, "primaryUpdateStrategy": "supervised"}));
        assert_eq!(decide(&one_sup, &o), Action::Wait(Wait::Healthy));
    }

    /// Issue 32: every running instance gets the spec's parameters (set or reset) before
    /// anything else waits on it; the operator's own entries are not the user's.
    #[test]
    fn parameters_that_differ_are_set_on_each_running_instance() {
        let p = plan_of(serde_json::json!({
            "size": 2, "postgresql": {"parameters": {"work_mem": "8MB"}}
        }));
        let mut o = obs(
            vec![
                with_parameters(
                    primary(1, 1, 100),
                    &[("work_mem", "8MB"), ("synchronous_standby_names", "")],
                ),
                with_parameters(replica(2, 1, true, 100), &[]),
            ],
            Some(1),
            2,
        );
        assert_eq!(decide(&p, &o), Action::SetParameters { serial: 2 });
        o.members[1] = with_parameters(replica(2, 1, true, 100), &[("work_mem", "8MB")]);
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Healthy));
        // Removed from the spec: reset.
        let none = plan_of(serde_json::json!({"size": 2}));
        assert_eq!(decide(&none, &o), Action::SetParameters { serial: 1 });
        // Unknown (an older manager): nothing to act on.
        o.members[0] = primary(1, 1, 100);
        o.members[1] = replica(2, 1, true, 100);
        assert_eq!(decide(&p, &o), Action::Wait(Wait::Healthy));
    }

    /// Issue 32, M15: the operator recorded `Promote{3}` (target 3, current 1, pg-1 fenced)
    /// and then every pod went away. The target comes back first and is promoted again; the
    /// old primary is never unfenced meanwhile.
    #[test]
    fn a_recorded_promotion_is_finished_before_the_old_primary_is_unfenced() {
        let p = plan_of(serde_json::json!({"size": 3}));
        let all_gone = vec![
            gone(fenced(1), false, true),
            gone(replica(2, 1, true, 90), false, true),
            gone(replica(3, 1, true, 100), false, true),
        ];
        let mut o = obs(all_gone, Some(1), 3);
        o.target_primary = Some(3);
        o.primary_lost_for = Some(Duration::from_secs(600));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 3 });
        // Its pod made, starting (not yet answering): waited for, pg-1 left fenced.
        o.members[2].pod = true;
        assert_eq!(
            decide(&p, &o),
            Action::Wait(Wait::PrimaryStarting { serial: 3 })
        );
        // pg-1's pod made again too: still fenced, nothing unfences it.
        o.members[0] = fenced(1);
        assert_eq!(
            decide(&p, &o),
            Action::Wait(Wait::PrimaryStarting { serial: 3 })
        );
        // Back as a replica (its new pod starts it so): promoted, with no delay.
        o.members[2] = replica(3, 1, false, 100);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 3 });
    }

    /// Issue 32, M12: every pod gone and the primary's data lost with it: the replicas with
    /// data are started (the act makes them replicas with no primary to follow), and the
    /// most advanced is promoted — not `StartPod` retried forever.
    #[test]
    fn with_the_primary_data_lost_the_replicas_are_started_and_one_promoted() {
        let p = plan_of(serde_json::json!({"size": 3, "failoverDelaySeconds": 0}));
        let mut o = obs(
            vec![
                gone(replica(2, 1, true, 90), false, true),
                gone(replica(3, 1, true, 100), false, true),
            ],
            Some(1),
            3,
        );
        o.primary_lost_for = Some(Duration::from_secs(600));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        o.primary_last_lsn = Some(100);
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 2 });
        o.members[0] = replica(2, 1, false, 90);
        o.members[1] = replica(3, 1, false, 100);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 3 });
    }

    /// Issue 32: the primary's pod deleted gracefully, its manager reporting a clean stop:
    /// promoted at once (no failover delay, no isolation wait); without the report, the
    /// usual waits.
    #[test]
    fn a_primary_that_stopped_cleanly_on_deletion_is_failed_over_at_once() {
        let p = plan_of(serde_json::json!({"size": 2}));
        let old = Member {
            terminating: true,
            ..member(1, StateRole::Stopped, false, 1, 100, None)
        };
        let mut o = obs(vec![old, replica(2, 1, true, 100)], Some(1), 2);
        o.primary_lost_for = Some(Duration::from_secs(1));
        o.primary_missed = 1;
        assert!(matches!(
            decide(&p, &o),
            Action::Wait(Wait::FailoverDelay { .. })
        ));
        o.primary_stopped_cleanly = true;
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        // Its pod gone since: still.
        o.members[0] = gone(o.members[0].clone(), false, true);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        // A pod that is not being deleted may have its container restarted: no shortcut.
        o.members[0] = member(1, StateRole::Stopped, false, 1, 100, None);
        assert!(matches!(
            decide(&p, &o),
            Action::Wait(Wait::FailoverDelay { .. })
        ));
    }

    /// Issue 32, M4 (the chaos `stall` case): an old primary whose pod is Terminating on a
    /// Ready node and whose manager does not answer (stopped, deadlocked) may still write
    /// there: nothing kills its PostgreSQL before the kubelet does, at the end of the grace
    /// period, and the kubelet removes the pod object only after. However long it has been
    /// unseen, no promotion until the pod is gone, and no fence call repeated meanwhile.
    #[test]
    fn a_primary_terminating_on_a_ready_node_is_not_fenced_until_its_pod_is_gone() {
        let p = plan_of(serde_json::json!({"size": 3, "replication": {"synchronous": 1}}));
        let wait = Duration::from_secs(crate::contract::ISOLATION_WAIT_SECS);
        let stalled = Member {
            seen: None,
            terminating: true,
            ..primary(1, 1, 100)
        };
        let members = vec![
            stalled.clone(),
            replica(2, 1, true, 100),
            replica(3, 1, true, 100),
        ];
        let mut o = obs(members, Some(1), 3);
        o.primary_missed = FAILOVER_MISSED_POLLS;
        for lost in [wait.as_secs(), 3600, 86_400] {
            o.primary_lost_for = Some(Duration::from_secs(lost));
            assert_eq!(
                decide(&p, &o),
                Action::Wait(Wait::PrimaryTerminating { serial: 1 }),
                "lost {lost}s: its pod still exists on a Ready node"
            );
            // A switchover under way changes nothing: the old primary was not fenced.
            let mut s = o.clone();
            s.target_primary = Some(2);
            assert_eq!(
                decide(&p, &s),
                Action::Wait(Wait::PrimaryTerminating { serial: 1 }),
                "lost {lost}s, switchover to 2"
            );
        }
        // The kubelet killed its processes and removed the pod: promoted (the isolation
        // wait is long past).
        o.members[0] = gone(stalled.clone(), false, true);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        // Gone, but only just lost: the isolation wait still applies (it may have been
        // force-deleted while running).
        o.primary_lost_for = Some(Duration::from_secs(12));
        assert!(matches!(
            decide(&p, &o),
            Action::Wait(Wait::PrimaryIsolating { .. })
        ));
        // Terminating on a node that is not Ready: no kubelet will kill it; the self-fence
        // is relied on after the isolation wait, as before (until then, fenced again).
        o.members[0] = Member {
            node_lost: true,
            ..stalled.clone()
        };
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        o.primary_lost_for = Some(wait);
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        // Not Terminating yet, unreachable: fenced (the pod is deleted when the fence call
        // goes unanswered), never promoted over.
        o.members[0] = Member {
            terminating: false,
            ..stalled.clone()
        };
        o.primary_lost_for = Some(Duration::from_secs(3600));
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        // Terminating on a Ready node with its manager answering (not fenced): fenced
        // through its API, not waited for.
        o.members[0] = Member {
            terminating: true,
            ..member(1, StateRole::Starting, false, 1, 100, None)
        };
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        // Fenced through its API: promoted without waiting for the pod.
        o.members[0] = Member {
            terminating: true,
            ..member(1, StateRole::Fenced, false, 1, 100, None)
        };
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
    }

    fn cannot_catch_up(mut m: Member) -> Member {
        if let Some(s) = m.seen.as_mut() {
            s.ready = false;
            s.cannot_catch_up = Some("the WAL it needs is gone".into());
        }
        m
    }

    /// Issue 32, M13: a replica whose WAL is gone on its live primary is re-cloned (it used
    /// to wait on it forever: the phase stayed Scaling, blocking scaling, switchovers and
    /// backups), and never when it could hold data the primary has not.
    #[test]
    fn a_replica_that_cannot_catch_up_is_recloned_from_its_live_primary_only() {
        let p = plan_of(serde_json::json!({"size": 3}));
        let stuck = cannot_catch_up(replica(2, 1, false, 50));
        let o = obs(
            vec![primary(1, 1, 100), stuck.clone(), replica(3, 1, true, 100)],
            Some(1),
            3,
        );
        assert_eq!(
            decide(&p, &o),
            Action::Reclone {
                serial: 2,
                primary: 1,
                why: "the WAL it needs is gone".into()
            }
        );
        // Without the report it is only waited for (what the audit saw).
        let waiting = obs(
            vec![
                primary(1, 1, 100),
                replica(2, 1, false, 50),
                replica(3, 1, true, 100),
            ],
            Some(1),
            3,
        );
        assert_eq!(
            decide(&p, &waiting),
            Action::Wait(Wait::Unready { serial: 2 })
        );
        let never = |o: Observation, what: &str| {
            let d = decide(&p, &o);
            assert!(
                !matches!(d, Action::Reclone { .. }),
                "{what}: re-cloned ({d:?})"
            );
        };
        // Ahead of the primary: it may hold WAL the primary lacks.
        never(
            obs(
                vec![
                    primary(1, 1, 100),
                    cannot_catch_up(replica(2, 1, false, 150)),
                ],
                Some(1),
                2,
            ),
            "ahead of the primary",
        );
        // On a later timeline than the primary.
        let mut later = cannot_catch_up(replica(2, 1, false, 50));
        if let Some(s) = later.seen.as_mut() {
            s.timeline = Some(2);
        }
        never(
            obs(vec![primary(1, 1, 100), later], Some(1), 2),
            "a later timeline",
        );
        // Diverged: rewound (Follow), never cloned over.
        let mut diverged = cannot_catch_up(replica(2, 1, false, 50));
        if let Some(s) = diverged.seen.as_mut() {
            s.diverged = true;
        }
        assert_eq!(
            decide(&p, &obs(vec![primary(1, 1, 100), diverged], Some(1), 2)),
            Action::Follow {
                serial: 2,
                primary: 1
            }
        );
        // The primary not accepting writes (starting its recovery, not ready).
        let mut slow = primary(1, 1, 100);
        if let Some(s) = slow.seen.as_mut() {
            s.ready = false;
        }
        never(
            obs(vec![slow, stuck.clone()], Some(1), 2),
            "the primary not ready",
        );
        // No primary at all: the replica is a failover candidate, not a clone target.
        let mut lost = obs(
            vec![gone(primary(1, 1, 100), true, true), stuck.clone()],
            Some(1),
            2,
        );
        lost.members[0].seen = None;
        lost.primary_lost_for = Some(Duration::from_secs(3600));
        lost.primary_missed = FAILOVER_MISSED_POLLS;
        never(lost, "no primary");
        // Fenced by the spec: left alone.
        let fenced = plan_of(serde_json::json!({"size": 2, "fencedInstances": ["pg-2"]}));
        let d = decide(&fenced, &obs(vec![primary(1, 1, 100), stuck], Some(1), 2));
        assert!(!matches!(d, Action::Reclone { .. }), "{d:?}");
    }

    /// Issue 32, M12(c): after a full restart the old primary's pod stays Pending (its zone
    /// is down). The replicas are started (read-only, no upstream), and after the failover
    /// delay the most advanced is promoted, the Pending pod deleted first so that it never
    /// starts later as a primary; the old primary is then made again as a replica of the new
    /// one. Before, the operator waited for that pod forever and started nothing.
    #[test]
    fn an_old_primary_that_cannot_be_scheduled_does_not_hold_the_replicas_back() {
        let p = plan_of(serde_json::json!({"size": 3, "failoverDelaySeconds": 10}));
        let pending = Member {
            seen: None,
            unscheduled: true,
            ..primary(1, 1, 100)
        };
        let mut o = obs(
            vec![
                pending.clone(),
                gone(replica(2, 1, false, 90), false, true),
                gone(replica(3, 1, false, 100), false, true),
            ],
            Some(1),
            3,
        );
        o.primary_lost_for = Some(Duration::from_secs(1));
        o.primary_missed = 1;
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 2 });
        o.members[1] = member(2, StateRole::Replica, false, 1, 90, None);
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 3 });
        o.members[2] = member(3, StateRole::Replica, false, 1, 100, None);
        assert!(matches!(
            decide(&p, &o),
            Action::Wait(Wait::FailoverDelay { .. })
        ));
        o.primary_lost_for = Some(Duration::from_secs(10));
        o.primary_missed = FAILOVER_MISSED_POLLS;
        // The Pending pod goes first: scheduled later, it would start as a primary.
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        o.members[0] = gone(pending.clone(), false, true);
        assert!(matches!(
            decide(&p, &o),
            Action::Wait(Wait::PrimaryIsolating { .. })
        ));
        o.primary_lost_for = Some(Duration::from_secs(crate::contract::ISOLATION_WAIT_SECS));
        assert_eq!(decide(&p, &o), Action::Promote { serial: 3 });
        // Promoted: the old primary's pod is made again (act makes it a replica of the
        // running primary).
        let after = obs(
            vec![
                gone(pending.clone(), false, true),
                replica(2, 3, true, 100),
                primary(3, 2, 100),
            ],
            Some(3),
            3,
        );
        assert_eq!(decide(&p, &after), Action::StartPod { serial: 1 });
        // A pod bound to a node and starting is waited for, as before: it may be about to
        // run as the primary.
        let mut starting = o.clone();
        starting.members[0] = Member {
            seen: None,
            ..primary(1, 1, 100)
        };
        starting.members[1] = gone(replica(2, 1, false, 90), false, true);
        starting.members[2] = gone(replica(3, 1, false, 100), false, true);
        starting.primary_lost_for = Some(Duration::from_secs(1));
        starting.primary_missed = 1;
        assert_eq!(
            decide(&p, &starting),
            Action::Wait(Wait::PrimaryStarting { serial: 1 })
        );
    }

    /// Issue 32, M4 beyond the kubelet: the old primary's manager stopped (it fences
    /// nothing) and its pod force-deleted, or Terminating on a lost node. However long it
    /// has been unseen, the operator first reaches its PostgreSQL at its last address and
    /// stops it; promoted at once once stopped; the isolation wait only when nothing
    /// answered there.
    #[test]
    fn an_old_primary_beyond_its_kubelet_is_stopped_through_postgres_before_a_promotion() {
        let p = plan_of(serde_json::json!({"size": 3, "replication": {"synchronous": 1}}));
        let wait = crate::contract::ISOLATION_WAIT_SECS;
        let stalled = Member {
            seen: None,
            ..primary(1, 1, 100)
        };
        let force_deleted = gone(stalled.clone(), false, true);
        let on_lost_node = Member {
            terminating: true,
            node_lost: true,
            ..stalled.clone()
        };
        for old in [force_deleted, on_lost_node.clone()] {
            let mut o = obs(
                vec![
                    old.clone(),
                    replica(2, 1, true, 100),
                    replica(3, 1, true, 90),
                ],
                Some(1),
                3,
            );
            o.primary_missed = FAILOVER_MISSED_POLLS;
            o.primary_sql_fence = SqlFence::NotTried;
            for lost in [10, wait - 1, wait, 3600] {
                o.primary_lost_for = Some(Duration::from_secs(lost));
                assert_eq!(
                    decide(&p, &o),
                    Action::FencePostgres { serial: 1 },
                    "pod {}, lost {lost}s: not fenced through PostgreSQL first",
                    if old.pod { "on a lost node" } else { "gone" }
                );
            }
            // Before the failover delay, nothing: the fence is for a failover only.
            o.primary_lost_for = Some(Duration::from_secs(3));
            assert!(matches!(
                decide(&p, &o),
                Action::Wait(Wait::FailoverDelay { .. })
            ));
            // Stopped: promoted at once, no isolation wait.
            o.primary_sql_fence = SqlFence::Stopped;
            o.primary_lost_for = Some(Duration::from_secs(10));
            assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
            // Nothing answered at its address: the isolation wait, then promoted.
            o.primary_sql_fence = SqlFence::Unreachable;
            assert!(
                !matches!(decide(&p, &o), Action::Promote { .. }),
                "unreachable, lost 10s: promoted before the isolation wait"
            );
            o.primary_lost_for = Some(Duration::from_secs(wait));
            assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
        }
        // Terminating on a Ready node: the kubelet kills it; no SQL fence, the pod is waited
        // for (the rule above), whatever the fence record says.
        let mut o = obs(
            vec![
                Member {
                    terminating: true,
                    ..stalled.clone()
                },
                replica(2, 1, true, 100),
                replica(3, 1, true, 90),
            ],
            Some(1),
            3,
        );
        o.primary_missed = FAILOVER_MISSED_POLLS;
        o.primary_lost_for = Some(Duration::from_secs(3600));
        for f in [SqlFence::NotTried, SqlFence::Stopped, SqlFence::Unreachable] {
            o.primary_sql_fence = f;
            assert_eq!(
                decide(&p, &o),
                Action::Wait(Wait::PrimaryTerminating { serial: 1 }),
                "{f:?}"
            );
        }
        // A primary that answers its API is fenced through it, never through PostgreSQL.
        o.members[0] = Member {
            terminating: true,
            node_lost: true,
            ..member(1, StateRole::Starting, false, 1, 100, None)
        };
        o.primary_sql_fence = SqlFence::NotTried;
        assert_eq!(decide(&p, &o), Action::Fence { serial: 1 });
        // No address recorded (a status from an older operator): the isolation wait, as
        // before.
        o.members[0] = gone(stalled, false, true);
        o.primary_sql_fence = SqlFence::NoAddress;
        assert_eq!(decide(&p, &o), Action::Promote { serial: 2 });
    }

    /// Issue 32, M12: a disaster-recovery seed (every instance's data lost, serial > 1,
    /// restoring from the store) whose pod is deleted mid-restore is made again as the seed
    /// (a restoring pod), not started as a replica with no primary; the first seed likewise.
    #[test]
    fn a_seed_deleted_before_it_ever_ran_is_made_again_as_the_seed() {
        let p = plan_of(serde_json::json!({"size": 3,
            "backup": {"store": {"volume": {"size": "1Gi"}}}}));
        let restoring = Member {
            serial: 4,
            pod: false,
            claim: true,
            seen: None,
            ..primary(4, 1, 0)
        };
        // The old primary (2) and its replica (3) are gone with their data.
        let mut o = obs(vec![restoring.clone()], Some(2), 4);
        o.has_backup = true;
        o.primary_lost_for = Some(Duration::from_secs(600));
        o.primary_missed = 100;
        // Without the record: started as a replica with no primary (the bug).
        assert_eq!(decide(&p, &o), Action::StartPod { serial: 4 });
        o.seed = Some((4, true));
        assert_eq!(
            decide(&p, &o),
            Action::CreateSeed {
                serial: 4,
                restore: true
            }
        );
        // While its new pod restores, it is waited for.
        o.members[0].pod = true;
        assert!(
            matches!(decide(&p, &o), Action::Wait(_)),
            "{:?}",
            decide(&p, &o)
        );
        // The first seed, deleted during initdb.
        let mut first = obs(
            vec![Member {
                serial: 1,
                ..restoring
            }],
            None,
            1,
        );
        first.seed = Some((1, false));
        assert_eq!(
            decide(&p, &first),
            Action::CreateSeed {
                serial: 1,
                restore: false
            }
        );
    }

    /// Issue 32, M12(c) on a lost node: after a full restart the old primary's pod is bound
    /// to a node that went NotReady before it reported a container started. It may have
    /// started since, as a primary with no standby: with synchronous replication none of its
    /// commits can be acknowledged, so the replicas are started beside it and the failover
    /// fences it first (its pod deleted; then, Terminating on the lost node, through its
    /// PostgreSQL) before promoting. Without synchronous replication, or once it was seen to
    /// start, it is waited for as before.
    #[test]
    fn an_old_primary_on_a_lost_node_that_never_started_does_not_hold_a_synchronous_cluster() {
        let sync = plan_of(serde_json::json!({"size": 3, "replication": {"synchronous": 1}}));
        let not_sync = plan_of(serde_json::json!({"size": 3}));
        let stuck = Member {
            seen: None,
            node_lost: true,
            never_started: true,
            ..primary(1, 1, 100)
        };
        let mut o = obs(
            vec![
                stuck.clone(),
                gone(replica(2, 1, false, 90), false, true),
                gone(replica(3, 1, false, 100), false, true),
            ],
            Some(1),
            3,
        );
        o.primary_lost_for = Some(Duration::from_secs(600));
        o.primary_missed = 100;
        o.primary_sql_fence = SqlFence::NotTried;
        assert_eq!(decide(&sync, &o), Action::StartPod { serial: 2 });
        assert_eq!(
            decide(&not_sync, &o),
            Action::Wait(Wait::PrimaryStarting { serial: 1 })
        );
        // Started at some point per its status: it may be the primary with standbys; waited
        // for, as any primary that may run.
        let mut started = o.clone();
        started.members[0].never_started = false;
        assert_eq!(
            decide(&sync, &started),
            Action::Wait(Wait::PrimaryStarting { serial: 1 })
        );
        // The replicas run (no upstream): the old primary is fenced (its pod deleted), then
        // through its PostgreSQL once Terminating on the lost node, then a replica promoted.
        o.members[1] = replica(2, 1, true, 90);
        o.members[2] = replica(3, 1, true, 100);
        assert_eq!(decide(&sync, &o), Action::Fence { serial: 1 });
        o.members[0].terminating = true;
        assert_eq!(decide(&sync, &o), Action::FencePostgres { serial: 1 });
        o.primary_sql_fence = SqlFence::Unreachable;
        assert_eq!(decide(&sync, &o), Action::Promote { serial: 3 });
    }
}
