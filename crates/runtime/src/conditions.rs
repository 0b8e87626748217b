//! Status conditions, `meta.SetStatusCondition` style: `lastTransitionTime` moves only when
//! the condition's status changes, so an unchanged status serializes to the same bytes and
//! the status write can be skipped.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Builds a condition; `lastTransitionTime` is filled in by [`set_condition`].
pub fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

/// Inserts or updates `new` in `conditions`, keeping the previous transition time when the
/// status did not change. `previous` is the list currently stored on the object.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    previous: &[Condition],
    mut new: Condition,
    now: Timestamp,
) {
    new.last_transition_time = match previous.iter().find(|c| c.type_ == new.type_) {
        Some(old) if old.status == new.status => old.last_transition_time.clone(),
        _ => Time(now),
    };
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(slot) => *slot = new,
        None => conditions.push(new),
    }
}

/// Finds a condition by type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition of that type exists with status "True".
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("valid")
    }

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut first = Vec::new();
        set_condition(
            &mut first,
            &[],
            condition("Ready", false, "Starting", "pods starting", Some(1)),
            ts(100),
        );
        assert_eq!(first[0].last_transition_time, Time(ts(100)));

        // Same status, new reason and message: time stays.
        let mut second = Vec::new();
        set_condition(
            &mut second,
            &first,
            condition("Ready", false, "Waiting", "1/3 ready", Some(2)),
            ts(200),
        );
        assert_eq!(second[0].last_transition_time, Time(ts(100)));
        assert_eq!(second[0].reason, "Waiting");
        assert_eq!(second[0].observed_generation, Some(2));

        // Status flips: time moves.
        let mut third = Vec::new();
        set_condition(
            &mut third,
            &second,
            condition("Ready", true, "AllReady", "3/3 ready", Some(2)),
            ts(300),
        );
        assert_eq!(third[0].last_transition_time, Time(ts(300)));
        assert!(is_true(&third, "Ready"));
        assert!(!is_true(&second, "Ready"));
    }

    #[test]
    fn set_replaces_by_type() {
        let mut c = Vec::new();
        set_condition(&mut c, &[], condition("Ready", true, "A", "", None), ts(1));
        set_condition(
            &mut c,
            &[],
            condition("Degraded", false, "B", "", None),
            ts(1),
        );
        set_condition(&mut c, &[], condition("Ready", false, "C", "", None), ts(2));
        assert_eq!(c.len(), 2);
        assert_eq!(find(&c, "Ready").map(|c| c.reason.as_str()), Some("C"));
    }
}
