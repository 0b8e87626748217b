//! The BookStore's condition types, condition reasons and Event reasons: fixed names, the
//! API a user scripts against (`kubectl wait --for=condition=Ready`, alerts on a reason).
use bosun_runtime::names;

names!(
    /// The conditions in `status.conditions`.
    ConditionType {
        /// Every child applied, every replica ready and rolled out, no problem.
        Ready,
        /// A rollout or a volume expansion is under way.
        Progressing,
        /// Something the user must fix or decide.
        Degraded,
    }
);

names!(
    /// Reasons of the conditions.
    Reason {
        // Problems: the spec cannot work as written.
        NameTooLong,
        InvalidName,
        InvalidDbSize,
        InvalidResources,
        InvalidServiceName,
        /// The API server refused a child built from the spec.
        ChildRejected,
        // Problems: bosun refuses to act.
        /// A child's name is held by another owner or by an object bosun did not create.
        NameConflict,
        /// Claims of an earlier BookStore of the same name exist.
        ClaimsFromPreviousOwner,
        /// Claims with the names the StatefulSet would mount exist, not made for it.
        ForeignClaims,
        StorageClassChangeRefused,
        ShrinkRefused,
        ExpansionNotSupported,
        // Problems: the API server refused a request (retried with backoff).
        /// RBAC, or a quota ("exceeded quota").
        Forbidden,
        /// An admission webhook denied a request, or could not be called.
        AdmissionDenied,
        /// Any other refusal, with the API server's message.
        ApiError,
        // States.
        AllReplicasReady,
        ReplicasNotReady,
        Resizing,
        RollingOut,
        Stable,
        AsExpected,
    }
);

names!(
    /// Reasons of the Events a BookStore gets (besides the problems, which are published
    /// with their condition reason).
    EventReason {
        VolumeExpansionStarted,
        ClaimsAdopted,
        PodRestarted,
        DataDeleted,
        Recovered,
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_the_variant_names() {
        assert_eq!(ConditionType::Ready.as_str(), "Ready");
        assert_eq!(Reason::ShrinkRefused.to_string(), "ShrinkRefused");
        let mut all: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), Reason::ALL.len());
    }
}
