//! The VmGroup's condition types, reasons and phases: fixed names a user scripts against.
use bosun_runtime::names;

names!(
    /// The conditions in `status.conditions`.
    ConditionType {
        /// Every VM exists with the wanted shape and is powered on.
        Ready,
        /// Something is wrong that bosun cannot repair by itself (retried with backoff).
        Degraded,
        /// The group's folder holds VMs or other objects this VmGroup did not create; bosun
        /// leaves them alone (never counts, changes or destroys them). The message names them.
        ForeignObjects,
    }
);

names!(
    /// Reasons of the conditions (and of the Warning Events of problems).
    Reason {
        /// The spec passed the schema but cannot work (a name too long for vCenter, say).
        InvalidSpec,
        /// The credentials Secret is missing or lacks VC_USER, VC_PASS or VC_HOST.
        CredentialsMissing,
        /// vCenter refused the user name or password.
        LoginFailed,
        /// vCenter could not be reached.
        VCenterUnreachable,
        /// The TLS handshake or the certificate check failed.
        TlsFailed,
        /// The template named in the spec does not exist.
        TemplateNotFound,
        /// The template lies outside the operator's `BOSUN_VMGROUP_TEMPLATE_ROOTS`: nothing is
        /// cloned.
        TemplateNotAllowed,
        /// The parent folder configured for the operator does not exist.
        ParentFolderNotFound,
        /// An object at the group's folder path (or the folder recorded in the status) does
        /// not carry this VmGroup's ownership mark: bosun touches nothing in it.
        FolderNotOwned,
        /// Objects this VmGroup did not create are in its folder, or hold a name it would
        /// clone: left alone (ForeignObjects=True, and a Warning Event).
        ForeignObjectsLeftAlone,
        /// The group's folder holds nothing this VmGroup did not create.
        NoForeignObjects,
        /// vCenter refused an operation (clone, reconfigure, power, destroy).
        VCenterRefused,
        /// The Kubernetes API server refused a request.
        ApiError,
        // States.
        AllVmsReady,
        VmsNotReady,
        AsExpected,
        Deleting,
    }
);

names!(
    /// Reasons of the Normal Events a VmGroup gets.
    EventReason {
        VmCreated,
        VmRemoved,
        VmReconfigured,
        VmPoweredOn,
        Recovered,
        Deleted,
        /// The seed operator's folder and VMs were taken over ([`crate::migrate`]).
        Adopted,
    }
);

/// `status.phase`, as the seed spells its phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Error,
    Deleting,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "PENDING",
            Phase::Running => "RUNNING",
            Phase::Error => "ERROR",
            Phase::Deleting => "DELETING",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_the_variant_names_and_unique() {
        assert_eq!(Reason::TemplateNotFound.as_str(), "TemplateNotFound");
        let mut all: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), Reason::ALL.len());
        assert_eq!(Phase::Error.as_str(), "ERROR");
    }
}
