//! The VmGroup's status, computed (purely) from what the reconcile achieved.
use bosun_runtime::conditions::{condition, set_condition};
use k8s_openapi::jiff::Timestamp;

use crate::api::VmGroupStatus;
use crate::error::Problem;
use crate::reason::{ConditionType, Phase, Reason};

/// What the reconcile achieved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The group was read (and changed as needed): `current` VMs count.
    Converged { current: u32, message: String },
    /// Something stands in the way; the VMs counted last time are kept.
    Problem(Problem),
    /// The finalizer could not remove the VMs yet.
    Deleting(Problem),
}

pub fn compute(
    generation: Option<i64>,
    desired: i32,
    previous: Option<&VmGroupStatus>,
    outcome: &Outcome,
    now: Timestamp,
) -> VmGroupStatus {
    let before = previous
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let current = match outcome {
        Outcome::Converged { current, .. } => *current as i32,
        _ => previous.map(|s| s.current_replicas).unwrap_or(0),
    };
    let (phase, message, ready, degraded) = match outcome {
        Outcome::Converged { message, .. } => {
            let done = current == desired;
            let ready = if done {
                (true, Reason::AllVmsReady)
            } else {
                (false, Reason::VmsNotReady)
            };
            let phase = if done { Phase::Running } else { Phase::Pending };
            (phase, message.clone(), ready, (false, Reason::AsExpected))
        }
        Outcome::Problem(p) => (
            Phase::Error,
            p.message.clone(),
            (false, p.reason),
            (true, p.reason),
        ),
        Outcome::Deleting(p) => (
            Phase::Error,
            format!(
                "the VMs cannot be deleted yet, the VmGroup stays until they are: {}",
                p.message
            ),
            (false, Reason::Deleting),
            (true, p.reason),
        ),
    };
    let mut conditions = Vec::new();
    let degraded_message = match outcome {
        Outcome::Converged { .. } => "no problem found".to_string(),
        _ => message.clone(),
    };
    for (type_, (status, reason), m) in [
        (ConditionType::Ready, ready, message.clone()),
        (ConditionType::Degraded, degraded, degraded_message),
    ] {
        set_condition(
            &mut conditions,
            before,
            condition(type_.as_str(), status, reason.as_str(), m, generation),
            now,
        );
    }
    VmGroupStatus {
        phase: phase.as_str().to_string(),
        current_replicas: current,
        desired_replicas: desired,
        last_message: message,
        conditions,
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_runtime::conditions::{find, is_true};

    #[test]
    fn a_full_group_is_running_and_ready() {
        let s = compute(
            Some(2),
            2,
            None,
            &Outcome::Converged {
                current: 2,
                message: "2 of 2 VMs running".into(),
            },
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(s.phase, "RUNNING");
        assert_eq!((s.current_replicas, s.desired_replicas), (2, 2));
        assert!(is_true(&s.conditions, "Ready"));
        assert!(!is_true(&s.conditions, "Degraded"));
        assert_eq!(s.observed_generation, Some(2));
    }

    #[test]
    fn a_problem_is_an_error_phase_with_its_reason_and_keeps_the_count() {
        let prev = VmGroupStatus {
            current_replicas: 1,
            ..Default::default()
        };
        let p = Problem::new(Reason::TemplateNotFound, "no template at /DC0/vm/x");
        let s = compute(
            Some(1),
            2,
            Some(&prev),
            &Outcome::Problem(p),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(s.phase, "ERROR");
        assert_eq!(s.current_replicas, 1);
        assert_eq!(s.last_message, "no template at /DC0/vm/x");
        let d = find(&s.conditions, "Degraded").expect("degraded");
        assert_eq!(
            (d.status.as_str(), d.reason.as_str()),
            ("True", "TemplateNotFound")
        );
        assert!(!is_true(&s.conditions, "Ready"));
    }
}
