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
    Converged {
        current: u32,
        message: String,
        /// The group's folder (a managed object reference's value).
        folder: String,
        /// What the folder holds that the group did not make, and names it could not clone
        /// for a foreign VM holding them (see [`crate::owner`]).
        foreign: Foreign,
    },
    /// Something stands in the way; the VMs counted last time are kept.
    Problem(Problem),
    /// The finalizer could not remove the VMs yet.
    Deleting(Problem),
}

/// Objects in the group's folder that it did not create, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Foreign {
    pub objects: Vec<String>,
    pub blocked: Vec<String>,
}

impl Foreign {
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The ForeignObjects condition's message.
    pub fn message(&self) -> String {
        if self.objects.is_empty() {
            return "the group's folder holds only what this VmGroup created".into();
        }
        let mut m = format!(
            "not created by this VmGroup (no bosun.vmgroup.owner mark with its UID), left alone: {}",
            self.objects.join(", ")
        );
        if !self.blocked.is_empty() {
            m.push_str(&format!(
                "; not cloned because a VM above holds the name: {}",
                self.blocked.join(", ")
            ));
        }
        m
    }
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
    let folder = match outcome {
        Outcome::Converged { folder, .. } => Some(folder.clone()),
        _ => previous.and_then(|s| s.folder.clone()),
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
    // Known only when the folder was read: kept as it was otherwise.
    match outcome {
        Outcome::Converged { foreign, .. } => {
            let reason = if foreign.is_empty() {
                Reason::NoForeignObjects
            } else {
                Reason::ForeignObjectsLeftAlone
            };
            set_condition(
                &mut conditions,
                before,
                condition(
                    ConditionType::ForeignObjects.as_str(),
                    !foreign.is_empty(),
                    reason.as_str(),
                    foreign.message(),
                    generation,
                ),
                now,
            );
        }
        _ => conditions.extend(
            before
                .iter()
                .filter(|c| c.type_ == ConditionType::ForeignObjects.as_str())
                .cloned(),
        ),
    }
    VmGroupStatus {
        phase: phase.as_str().to_string(),
        current_replicas: current,
        desired_replicas: desired,
        last_message: message,
        conditions,
        folder,
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
                folder: "group-v7".into(),
                foreign: Foreign::default(),
            },
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(s.phase, "RUNNING");
        assert_eq!((s.current_replicas, s.desired_replicas), (2, 2));
        assert!(is_true(&s.conditions, "Ready"));
        assert!(!is_true(&s.conditions, "Degraded"));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(s.folder.as_deref(), Some("group-v7"));
        assert!(!is_true(&s.conditions, "ForeignObjects"));
    }

    #[test]
    fn foreign_objects_are_a_condition_that_a_later_problem_keeps() {
        let foreign = Foreign {
            objects: vec!["keep-me".into(), "web-1".into()],
            blocked: vec!["web-1".into()],
        };
        let s = compute(
            Some(1),
            1,
            None,
            &Outcome::Converged {
                current: 0,
                message: "0 of 1".into(),
                folder: "group-v7".into(),
                foreign,
            },
            Timestamp::UNIX_EPOCH,
        );
        let c = find(&s.conditions, "ForeignObjects").expect("ForeignObjects");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "ForeignObjectsLeftAlone")
        );
        assert!(c.message.contains("keep-me, web-1"), "{}", c.message);
        assert!(c.message.contains("holds the name: web-1"), "{}", c.message);
        let p = Problem::new(Reason::VCenterUnreachable, "down");
        let later = compute(
            Some(1),
            1,
            Some(&s),
            &Outcome::Problem(p),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            later.folder.as_deref(),
            Some("group-v7"),
            "the folder is kept"
        );
        assert!(is_true(&later.conditions, "ForeignObjects"));
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
