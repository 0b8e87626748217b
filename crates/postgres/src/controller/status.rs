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
    let primary_missed_polls = if primaries.is_empty() {
        prev.primary_missed_polls.saturating_add(1)
    } else {
        0
    };
    let primary_last_lsn = match primaries.as_slice() {
        [one] => seen
            .states
            .get(one)
            .and_then(|s| s.lsn.clone())
            .or_else(|| prev.primary_last_lsn.clone()),
        _ => prev.primary_last_lsn.clone(),
    };
    let synchronous = Some(crate::api::SynchronousStatus {
        desired: i32::try_from(plan.synchronous).unwrap_or(i32::MAX),
        effective: match primaries.as_slice() {
            [one] => seen
                .states
                .get(one)
                .and_then(|s| s.synchronous)
                .and_then(|n| i32::try_from(n).ok()),
            _ => prev.synchronous.as_ref().and_then(|s| s.effective),
        },
    });
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
        // Recorded once: a valid plan has the recorded major (see `validate::Observed::of`).
        version: prev.version.or(Some(plan.version)),
        control_paused: plan.paused,
        backup: prev.backup.clone(),
        primary_lost_since,
        primary_missed_polls,
        primary_last_lsn,
        synchronous,
        // Filled in by `parameters`, from this cycle's reports.
        parameters: prev.parameters.clone(),
        // Kept after the failover it allowed (it names an instance that is no longer the
        // recorded primary, so it allows nothing more); dropped once that instance runs as
        // the primary again, or it would vouch for a later pod of it.
        primary_stopped_cleanly: match primaries.as_slice() {
            [] => clean_stop(plan, seen, prev).or_else(|| prev.primary_stopped_cleanly.clone()),
            running => prev.primary_stopped_cleanly.clone().filter(|c| {
                !running
                    .iter()
                    .any(|s| instance_name(&plan.name, *s) == c.instance)
            }),
        },
        last_primary: last_primary(plan, seen, prev, &primaries, action),
        seed: match (action, primaries.is_empty()) {
            (Action::CreateSeed { serial, restore }, _) => Some(crate::api::SeedStatus {
                instance: name(*serial),
                restore: *restore,
            }),
            (_, true) => prev.seed.clone(),
            (_, false) => None,
        },
        // Set by the controller once it knows whether the spec was accepted.
        accepted_spec: prev.accepted_spec.clone(),
        conditions,
    }
}

/// Where the one running primary's PostgreSQL listens (a fence through PostgreSQL needs it
/// once its pod object is gone); with none running, the record kept, and a fence through
/// PostgreSQL marked `Fencing` when this cycle decides one (before it is carried out).
fn last_primary(
    plan: &Plan,
    seen: &Snapshot,
    prev: &PostgresClusterStatus,
    primaries: &[u32],
    action: &Action,
) -> Option<crate::api::LastPrimary> {
    if let [one] = primaries {
        let instance = instance_name(&plan.name, *one);
        return match seen.addr_of(*one) {
            Some(address) => Some(crate::api::LastPrimary {
                instance,
                address,
                sql_fence: None,
                sql_fence_message: None,
            }),
            None => prev.last_primary.clone().filter(|l| l.instance == instance),
        };
    }
    let mut last = prev.last_primary.clone();
    if let (Action::FencePostgres { serial }, Some(l)) = (action, last.as_mut()) {
        if l.instance == instance_name(&plan.name, *serial) {
            l.sql_fence = Some(crate::api::SqlFenceState::Fencing);
            l.sql_fence_message = None;
        }
    }
    last
}

/// The recorded primary's clean shutdown: reported now by its pod being deleted, or
/// recorded earlier for the pod that is still terminating or gone (a new pod on its claim
/// is another story).
pub fn clean_stop(
    plan: &Plan,
    seen: &Snapshot,
    prev: &PostgresClusterStatus,
) -> Option<crate::api::CleanStop> {
    let current = prev.current_primary.as_deref()?;
    let serial = crate::validate::serial_of(&plan.name, current)?;
    let pod = seen.pods.get(&serial);
    let reported = seen
        .states
        .get(&serial)
        .is_some_and(|s| s.stopped_cleanly)
        .then_some(pod)
        .flatten()
        .filter(|p| p.terminating)
        .and_then(|p| p.uid.clone());
    if let Some(uid) = reported {
        return Some(crate::api::CleanStop {
            instance: current.to_string(),
            pod_uid: uid,
        });
    }
    prev.primary_stopped_cleanly
        .clone()
        .filter(|c| c.instance == current)
        .filter(|c| pod.is_none_or(|p| p.terminating && p.uid.as_deref() == Some(&c.pod_uid)))
}

/// `status.parameters` and the `ParametersApplied` condition: the spec's parameters next to
/// the values the primary uses, and the instances that hold a new value they apply only
/// after a restart.
pub fn parameters(
    plan: &Plan,
    seen: &Snapshot,
    generation: Option<i64>,
    prev: &PostgresClusterStatus,
    desired: &mut PostgresClusterStatus,
    now: Timestamp,
) {
    use std::collections::{BTreeMap, BTreeSet};
    let running: Vec<(u32, &crate::instance::InstanceState)> = seen
        .states
        .iter()
        .filter(|(_, s)| matches!(s.role, StateRole::Primary | StateRole::Replica))
        .map(|(serial, s)| (*serial, s))
        .collect();
    let primary = running
        .iter()
        .find(|(_, s)| s.role == StateRole::Primary)
        .map(|(_, s)| *s);
    let owned = |n: &str| crate::contract::OPERATOR_AUTO_CONF.contains(&n);
    let mut names: BTreeSet<String> = plan.parameters.keys().cloned().collect();
    let mut pending: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (serial, st) in &running {
        for p in st.parameters.iter().flatten() {
            if owned(&p.name) {
                continue;
            }
            if p.written.is_some() || p.pending_restart {
                names.insert(p.name.clone());
            }
            if p.pending_restart {
                pending
                    .entry(p.name.clone())
                    .or_default()
                    .push(instance_name(&plan.name, *serial));
            }
        }
    }
    desired.parameters = names
        .iter()
        .map(|name| crate::api::ParameterStatus {
            name: name.clone(),
            desired: plan.parameters.get(name).cloned(),
            effective: primary
                .and_then(|p| p.parameters.as_ref())
                .and_then(|ps| ps.iter().find(|p| &p.name == name))
                .and_then(|p| p.effective.clone()),
            pending_restart: pending.get(name).cloned().unwrap_or_default(),
        })
        .collect();
    let unset: Vec<String> = running
        .iter()
        .filter(|(_, st)| {
            let seen = crate::lifecycle::Seen::from_state(st, |_| None);
            !crate::lifecycle::parameters_match(plan, &seen)
        })
        .map(|(serial, _)| instance_name(&plan.name, *serial))
        .collect();
    // A refusal (written after the act of an earlier cycle) stands until the spec changes:
    // the instances keep differing from the spec meanwhile.
    let refused = prev.conditions.iter().find(|c| {
        c.type_ == "ParametersApplied"
            && c.reason == Reason::ParameterRefused.as_str()
            && c.observed_generation == generation
    });
    if let (Some(c), false) = (refused, unset.is_empty()) {
        set_condition(&mut desired.conditions, &prev.conditions, c.clone(), now);
        return;
    }
    let (ok, reason, message) = if !unset.is_empty() {
        (
            false,
            Reason::SettingParameters,
            format!(
                "spec.postgresql.parameters are being set on {}",
                unset.join(", ")
            ),
        )
    } else if !pending.is_empty() {
        let what: Vec<String> = pending
            .iter()
            .map(|(name, on)| format!("{name} (on {})", on.join(", ")))
            .collect();
        (
            false,
            Reason::PendingRestart,
            format!(
                "applied only after a restart: {}; the rolling update restarts the instances",
                what.join(", ")
            ),
        )
    } else {
        (
            true,
            Reason::ParametersApplied,
            "every running instance uses spec.postgresql.parameters".to_string(),
        )
    };
    set_condition(
        &mut desired.conditions,
        &prev.conditions,
        condition(
            "ParametersApplied",
            ok,
            reason.as_str(),
            message,
            generation,
        ),
        now,
    );
}

/// The `PodsUpToDate` condition: which pods the rolling update still has to replace, and,
/// with `primaryUpdateStrategy: supervised`, that the primary waits for `switchoverTo`.
pub fn rollout(
    plan: &Plan,
    obs: &crate::lifecycle::Observation,
    generation: Option<i64>,
    prev: &PostgresClusterStatus,
    desired: &mut PostgresClusterStatus,
    now: Timestamp,
) {
    let name = |s: u32| instance_name(&plan.name, s);
    let outdated: Vec<u32> = obs
        .members
        .iter()
        .filter(|m| m.pod && m.outdated)
        .map(|m| m.serial)
        .collect();
    let primary = obs.members.iter().find(|m| {
        m.seen
            .as_ref()
            .is_some_and(|s| s.role == StateRole::Primary)
    });
    let (ok, reason, message) = match (outdated.as_slice(), primary) {
        ([], _) => (
            true,
            Reason::UpToDate,
            "every pod is built from the current spec".to_string(),
        ),
        ([only], Some(p)) if *only == p.serial && plan.supervised_primary_update => {
            let targets: Vec<String> =
                crate::lifecycle::update_targets(plan, &obs.members, p.serial)
                    .into_iter()
                    .map(name)
                    .collect();
            (
                false,
                Reason::WaitingForSwitchover,
                if targets.is_empty() {
                    format!(
                        "primaryUpdateStrategy is supervised: the primary {} is replaced after a switchover, and no updated replica is ready to take over",
                        name(p.serial)
                    )
                } else {
                    format!(
                        "primaryUpdateStrategy is supervised: the replicas are updated; the primary {} is replaced once spec.switchoverTo names one of {}",
                        name(p.serial),
                        targets.join(", ")
                    )
                },
            )
        }
        (many, _) => (
            false,
            Reason::RollingUpdate,
            format!(
                "to replace one at a time, the primary last: {}",
                many.iter().map(|s| name(*s)).collect::<Vec<_>>().join(", ")
            ),
        ),
    };
    set_condition(
        &mut desired.conditions,
        &prev.conditions,
        condition("PodsUpToDate", ok, reason.as_str(), message, generation),
        now,
    );
}

fn phase(action: &Action, no_primary: bool) -> (Phase, Reason) {
    match action {
        Action::Wait(Wait::Healthy) => (Phase::Healthy, Reason::Healthy),
        Action::Wait(Wait::Paused) => (Phase::Paused, Reason::Paused),
        Action::Wait(Wait::Unready { .. }) if no_primary => (Phase::Creating, Reason::Starting),
        Action::Wait(Wait::Unready { .. }) => (Phase::Scaling, Reason::Starting),
        Action::Wait(Wait::FailoverDelay { .. })
        | Action::Wait(Wait::PrimaryMissed { .. })
        | Action::Wait(Wait::FailoverQuorum { .. })
        | Action::Wait(Wait::PrimaryIsolating { .. }) => (Phase::FailingOver, Reason::PrimaryLost),
        Action::Wait(Wait::PrimaryTerminating { .. }) => {
            (Phase::FailingOver, Reason::PrimaryTerminating)
        }
        Action::Wait(Wait::PrimaryFenced { .. }) => (Phase::Healthy, Reason::Fenced),
        Action::Wait(Wait::PrimaryStarting { .. }) => (Phase::Recovering, Reason::Starting),
        Action::CreateSeed { restore: true, .. } => (Phase::Recovering, Reason::CreatingSeed),
        Action::CreateSeed { .. } => (Phase::Creating, Reason::CreatingSeed),
        Action::AddReplica { .. } => (Phase::Scaling, Reason::AddingReplica),
        Action::RemoveReplica { .. } => (Phase::Scaling, Reason::RemovingReplica),
        Action::SetSynchronous { .. } => (Phase::Scaling, Reason::SettingSynchronous),
        Action::SetParameters { .. } => (Phase::Updating, Reason::SettingParameters),
        Action::RollInstance { .. } => (Phase::Updating, Reason::RollingUpdate),
        Action::StartPod { .. } => (Phase::Recovering, Reason::RestartingInstance),
        Action::RemoveMember { .. } => (Phase::Recovering, Reason::RemovingMember),
        Action::Fence { .. } if no_primary => (Phase::FailingOver, Reason::Fencing),
        Action::Fence { .. } => (Phase::Healthy, Reason::Fencing),
        Action::FencePostgres { .. } => (Phase::FailingOver, Reason::Fencing),
        Action::Unfence { .. } => (Phase::Recovering, Reason::Unfencing),
        Action::BeginSwitchover { .. } => (Phase::SwitchingOver, Reason::SwitchingOver),
        Action::Promote { .. } => (Phase::FailingOver, Reason::Promoting),
        Action::Follow { .. } => (Phase::Recovering, Reason::Rejoining),
        Action::Reclone { .. } => (Phase::Recovering, Reason::Recloning),
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
        Action::Wait(Wait::PrimaryMissed { polls }) => format!(
            "the primary did not answer {polls} poll(s) in a row; failing over after {}",
            crate::lifecycle::FAILOVER_MISSED_POLLS
        ),
        Action::Wait(Wait::FailoverQuorum { have, need }) => format!(
            "the primary is lost, but only {have} of the {need} standbys synchronous replication needs answer: none is sure to hold every acknowledged commit"
        ),
        Action::Wait(Wait::PrimaryIsolating { remaining }) => format!(
            "the primary's pod is gone or stuck terminating and it may still run there; \
             failing over in {}s, once it has fenced itself for want of the operator and its \
             replicas",
            remaining.as_secs()
        ),
        Action::Wait(Wait::PrimaryTerminating { serial }) => format!(
            "{} does not answer and its pod is terminating on a Ready node: its PostgreSQL may \
             still take writes until the kubelet kills it at the end of the grace period; \
             promoting a replica once that pod is gone",
            n(serial)
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
        Action::FencePostgres { serial } => format!(
            "{} does not answer and no kubelet is known to have stopped it (its pod is gone \
             or its node lost): stopping its PostgreSQL at its last address before promoting \
             a replica",
            n(serial)
        ),
        Action::Unfence { serial } => format!("unfencing {}", n(serial)),
        Action::BeginSwitchover { from, to } => {
            format!("switching over from {} to {}", n(from), n(to))
        }
        Action::Promote { serial } => format!("promoting {}", n(serial)),
        Action::Follow { serial, primary } => {
            format!("{} rejoins as a replica of {}", n(serial), n(primary))
        }
        Action::Reclone {
            serial,
            primary,
            why,
        } => format!(
            "re-cloning {} from {}: {why}",
            n(serial),
            n(primary)
        ),
        Action::RemoveReplica { serial } => format!("removing the replica {}", n(serial)),
        Action::SetParameters { serial } => format!(
            "setting {}'s parameters as spec.postgresql.parameters says",
            n(serial)
        ),
        Action::RollInstance { serial } => format!(
            "rolling update: replacing {}'s pod with one of the current spec",
            n(serial)
        ),
        Action::SetSynchronous { serial, n: 0 } => {
            format!("making {}'s commits asynchronous", n(serial))
        }
        Action::SetSynchronous { serial, n: count } => format!(
            "making {}'s commits wait for {count} standby(s)",
            n(serial)
        ),
        Action::Fail(why) => why.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::observe::PodSeen;
    use crate::instance::InstanceState;
    use crate::validate::{plan, Observed};

    fn plan_of() -> Plan {
        let pc = serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "pg", "namespace": "db"}, "spec": {"size": 2},
        }))
        .expect("cluster");
        plan(&pc, &Observed::default()).expect("valid")
    }

    fn state(name: &str, role: StateRole, ready: bool) -> InstanceState {
        InstanceState {
            name: name.into(),
            role,
            ready,
            timeline: Some(1),
            lsn: Some("0/3000000".into()),
            received_lsn: None,
            primary: None,
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
        }
    }

    fn snapshot(states: &[(u32, Option<InstanceState>)]) -> Snapshot {
        let mut s = Snapshot::default();
        for (serial, st) in states {
            s.pods.insert(
                *serial,
                PodSeen {
                    ip: Some(format!("127.0.0.{serial}").parse().expect("ip")),
                    terminating: false,
                    node: None,
                    role_label: None,
                    template: None,
                    uid: None,
                    ever_started: true,
                },
            );
            s.claims.insert(*serial);
            if let Some(st) = st {
                s.states.insert(*serial, st.clone());
            }
        }
        s
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("time")
    }

    fn cluster_at(version: i32) -> crate::api::PostgresCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "pg", "namespace": "db"},
            "spec": {"size": 2, "version": version},
        }))
        .expect("cluster")
    }

    #[test]
    fn the_recorded_major_refuses_a_version_change_until_it_is_set_back() {
        let first = plan(&cluster_at(15), &Observed::default()).expect("valid");
        let seen = snapshot(&[(1, Some(state("pg-1", StateRole::Primary, true)))]);
        let wait = Action::Wait(Wait::Healthy);
        let s = build(&first, Some(1), &Default::default(), &seen, &wait, now());
        assert_eq!(s.version, Some(15));
        // What the next cycle observes of the cluster: the recorded major.
        let observed = Observed::of(Some(&s), None);
        assert_eq!(
            plan(&cluster_at(16), &observed),
            Err(crate::validate::Invalid::MajorVersionChange {
                running: 15,
                wanted: 16
            })
        );
        let back = plan(&cluster_at(15), &observed).expect("set back: valid");
        assert_eq!(back.image, "postgres:15");
        // Kept, never replaced by the spec's.
        let again = build(&back, Some(3), &s, &seen, &wait, now());
        assert_eq!(again.version, Some(15));
    }

    #[test]
    fn a_promotion_is_recorded_as_the_target_before_it_is_done() {
        let prev = PostgresClusterStatus {
            current_primary: Some("pg-1".into()),
            latest_instance: 2,
            ..Default::default()
        };
        let seen = snapshot(&[(2, Some(state("pg-2", StateRole::Replica, false)))]);
        let s = build(
            &plan_of(),
            Some(3),
            &prev,
            &seen,
            &Action::Promote { serial: 2 },
            now(),
        );
        assert_eq!(s.target_primary.as_deref(), Some("pg-2"));
        // Not the current primary until it is seen as one.
        assert_eq!(s.current_primary.as_deref(), Some("pg-1"));
        assert_eq!(s.phase, Some(Phase::FailingOver));
        assert_eq!(
            s.primary_lost_since.as_deref(),
            Some(now().to_string().as_str())
        );
        assert_eq!(s.observed_generation, Some(3));
    }

    #[test]
    fn a_new_serial_is_recorded_before_its_pod_exists() {
        let seen = snapshot(&[(1, Some(state("pg-1", StateRole::Primary, true)))]);
        let s = build(
            &plan_of(),
            Some(1),
            &PostgresClusterStatus::default(),
            &seen,
            &Action::AddReplica { serial: 2 },
            now(),
        );
        assert_eq!(s.latest_instance, 2);
        assert_eq!(s.current_primary.as_deref(), Some("pg-1"));
        assert_eq!(s.primary_lost_since, None);
        assert_eq!(s.phase, Some(Phase::Scaling));
        assert_eq!(s.members.ready, vec!["pg-1".to_string()]);
        assert_eq!(s.instances[0].pod_ip.as_deref(), Some("127.0.0.1"));
    }

    #[test]
    fn the_time_the_primary_was_lost_is_kept_across_cycles() {
        let prev = PostgresClusterStatus {
            primary_lost_since: Some("2027-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        let seen = snapshot(&[(2, None)]);
        let s = build(
            &plan_of(),
            None,
            &prev,
            &seen,
            &Action::Wait(Wait::FailoverDelay {
                remaining: std::time::Duration::from_secs(3),
            }),
            now(),
        );
        assert_eq!(s.primary_lost_since, prev.primary_lost_since);
        assert_eq!(s.instances[0].role, "unknown");
        assert!(!conditions_ready(&s));
    }

    fn conditions_ready(s: &PostgresClusterStatus) -> bool {
        bosun_runtime::conditions::is_true(&s.conditions, "Ready")
    }

    #[test]
    fn healthy_and_every_member_ready_is_ready() {
        let seen = snapshot(&[
            (1, Some(state("pg-1", StateRole::Primary, true))),
            (2, Some(state("pg-2", StateRole::Replica, true))),
        ]);
        let s = build(
            &plan_of(),
            Some(1),
            &PostgresClusterStatus::default(),
            &seen,
            &Action::Wait(Wait::Healthy),
            now(),
        );
        assert!(conditions_ready(&s));
        assert_eq!((s.size, s.ready_instances), (2, 2));
        assert_eq!(s.phase, Some(Phase::Healthy));
    }
}
