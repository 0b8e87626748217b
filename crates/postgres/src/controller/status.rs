//! The status (pure): what was observed, and the decision of this cycle, recorded before it
//! is carried out — so an operator restarted mid-failover reads the target primary, the
//! latest serial and since when the primary is lost from here, never from memory.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use bosun_runtime::conditions::{condition, set_condition};

use crate::api::{InstanceStatus, Members, Phase, PostgresClusterStatus};
use crate::instance::StateRole;
use crate::lifecycle::{Action, Wait};
use crate::validate::Plan;

use super::build::{instance_name, selector};
use super::observe::Snapshot;
use super::reason::Reason;

/// The status after this cycle's decision.
pub fn build(
    plan: &Plan,
    generation: Option<i64>,
    prev: &PostgresClusterStatus,
    seen: &Snapshot,
    action: &Action,
    now: Timestamp,
) -> PostgresClusterStatus {
    let name = |s: u32| instance_name(&plan.name, s);
    let primaries: Vec<u32> = seen
        .states
        .iter()
        .filter(|(_, s)| s.role == StateRole::Primary)
        .map(|(serial, _)| *serial)
        .collect();
    let current_primary = match primaries.as_slice() {
        [one] => Some(name(*one)),
        _ => prev.current_primary.clone(),
    };
    let target_primary = match action {
        Action::Promote { serial } => Some(name(*serial)),
        Action::BeginSwitchover { to, .. } => Some(name(*to)),
        _ if primaries.len() == 1 => current_primary.clone(),
        _ => prev.target_primary.clone(),
    };
    let primary_lost_since = if primaries.is_empty() {
        prev.primary_lost_since
            .clone()
            .or_else(|| Some(now.to_string()))
    } else {
        None
    };
    let mut latest = prev.latest_instance.max(
        seen.pods
            .keys()
            .chain(seen.claims.iter())
            .copied()
            .max()
            .map(i64::from)
            .unwrap_or(0),
    );
    if let Action::CreateSeed { serial, .. } | Action::AddReplica { serial } = action {
        latest = latest.max(i64::from(*serial));
    }
    let serials: std::collections::BTreeSet<u32> = seen
        .pods
        .keys()
        .chain(seen.claims.iter())
        .copied()
        .collect();
    let mut instances = Vec::new();
    let mut members = Members::default();
    for &serial in &serials {
        let st = seen.states.get(&serial);
        let ready = st.is_some_and(|s| s.ready);
        if ready {
            members.ready.push(name(serial));
        } else {
            members.unready.push(name(serial));
        }
        instances.push(InstanceStatus {
            name: name(serial),
            role: st
                .map(|s| match s.role {
                    StateRole::Primary => "primary",
                    StateRole::Replica => "replica",
                    StateRole::Fenced => "fenced",
                    StateRole::Starting => "starting",
                    StateRole::Stopped => "stopped",
                })
                .unwrap_or("unknown")
                .into(),
            timeline: st.and_then(|s| s.timeline),
            lsn: st.and_then(|s| s.lsn.clone()),
            pod_ip: seen
                .pods
                .get(&serial)
                .and_then(|p| p.ip)
                .map(|ip| ip.to_string()),
            ready,
        });
    }
    let (phase, reason) = phase(action, primaries.is_empty());
    let mut conditions: Vec<Condition> = prev.conditions.clone();
    let healthy = matches!(action, Action::Wait(Wait::Healthy));
    let all_ready = members.unready.is_empty() && !serials.is_empty();
    set_condition(
        &mut conditions,
        &prev.conditions,
        condition(
            "Ready",
            healthy && all_ready,
            if healthy && all_ready {
                Reason::Healthy.as_str()
            } else {
                reason.as_str()
            },
            describe(plan, action),
            generation,
        ),
        now,
    );
    set_condition(
        &mut conditions,
        &prev.conditions,
        condition(
            "Progressing",
            !matches!(
                action,
                Action::Wait(Wait::Healthy) | Action::Wait(Wait::Paused) | Action::Fail(_)
            ),
            reason.as_str(),
            describe(plan, action),
            generation,
        ),
        now,
    );
    PostgresClusterStatus {
        phase: Some(phase),
        phase_reason: Some(describe(plan, action)),
        current_primary,
        target_primary,
        size: serials.len() as i32,
        ready_instances: members.ready.len() as i32,
        selector: selector(&plan.name),
        members,
        instances,
        latest_instance: latest,
        observed_generation: generation,
        control_paused: plan.paused,
        backup: prev.backup.clone(),
        primary_lost_since,
        conditions,
    }
}

fn phase(action: &Action, no_primary: bool) -> (Phase, Reason) {
    match action {
        Action::Wait(Wait::Healthy) => (Phase::Healthy, Reason::Healthy),
        Action::Wait(Wait::Paused) => (Phase::Paused, Reason::Paused),
        Action::Wait(Wait::Unready { .. }) if no_primary => (Phase::Creating, Reason::Starting),
        Action::Wait(Wait::Unready { .. }) => (Phase::Scaling, Reason::Starting),
        Action::Wait(Wait::FailoverDelay { .. }) => (Phase::FailingOver, Reason::PrimaryLost),
        Action::Wait(Wait::PrimaryFenced { .. }) => (Phase::Healthy, Reason::Fenced),
        Action::Wait(Wait::PrimaryStarting { .. }) => (Phase::Recovering, Reason::Starting),
        Action::CreateSeed { restore: true, .. } => (Phase::Recovering, Reason::CreatingSeed),
        Action::CreateSeed { .. } => (Phase::Creating, Reason::CreatingSeed),
        Action::AddReplica { .. } => (Phase::Scaling, Reason::AddingReplica),
        Action::RemoveReplica { .. } => (Phase::Scaling, Reason::RemovingReplica),
        Action::StartPod { .. } => (Phase::Recovering, Reason::RestartingInstance),
        Action::RemoveMember { .. } => (Phase::Recovering, Reason::RemovingMember),
        Action::Fence { .. } if no_primary => (Phase::FailingOver, Reason::Fencing),
        Action::Fence { .. } => (Phase::Healthy, Reason::Fencing),
        Action::Unfence { .. } => (Phase::Recovering, Reason::Unfencing),
        Action::BeginSwitchover { .. } => (Phase::SwitchingOver, Reason::SwitchingOver),
        Action::Promote { .. } => (Phase::FailingOver, Reason::Promoting),
        Action::Follow { .. } => (Phase::Recovering, Reason::Rejoining),
        Action::Fail(_) => (Phase::Failed, Reason::Failed),
    }
}

/// The decision in words (status, conditions, Events); never a secret.
pub fn describe(plan: &Plan, action: &Action) -> String {
    let n = |s: &u32| instance_name(&plan.name, *s);
    match action {
        Action::Wait(Wait::Healthy) => "every instance is ready".into(),
        Action::Wait(Wait::Paused) => "spec.paused is set: nothing is reconciled".into(),
        Action::Wait(Wait::Unready { serial }) => format!("waiting for {} to be ready", n(serial)),
        Action::Wait(Wait::FailoverDelay { remaining }) => format!(
            "the primary is lost; failing over in {}s unless it comes back",
            remaining.as_secs()
        ),
        Action::Wait(Wait::PrimaryFenced { serial }) => {
            format!(
                "the primary {} is fenced by request: no failover",
                n(serial)
            )
        }
        Action::Wait(Wait::PrimaryStarting { serial }) => {
            format!("waiting for {} to start as the primary", n(serial))
        }
        Action::CreateSeed { serial, restore } => format!(
            "creating the seed instance {}{}",
            n(serial),
            if *restore { " from the backup" } else { "" }
        ),
        Action::AddReplica { serial } => format!("adding the replica {}", n(serial)),
        Action::StartPod { serial } => format!("restarting {} on its volume", n(serial)),
        Action::RemoveMember { serial } => {
            format!("removing {}: its data is gone", n(serial))
        }
        Action::Fence { serial } => format!("fencing {}", n(serial)),
        Action::Unfence { serial } => format!("unfencing {}", n(serial)),
        Action::BeginSwitchover { from, to } => {
            format!("switching over from {} to {}", n(from), n(to))
        }
        Action::Promote { serial } => format!("promoting {}", n(serial)),
        Action::Follow { serial, primary } => {
            format!("{} rejoins as a replica of {}", n(serial), n(primary))
        }
        Action::RemoveReplica { serial } => format!("removing the replica {}", n(serial)),
        Action::Fail(why) => why.clone(),
    }
}
