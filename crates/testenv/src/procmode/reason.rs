//! The reasons this agent writes, in container states, conditions and Events: the kubelet's
//! own names where it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    ErrImageNeverPull,
    CreateContainerConfigError,
    CrashLoopBackOff,
    FailedMount,
    FailedCreatePodSandBox,
    Failed,
    Unhealthy,
    Killing,
    NodeLost,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::ErrImageNeverPull => "ErrImageNeverPull",
            Reason::CreateContainerConfigError => "CreateContainerConfigError",
            Reason::CrashLoopBackOff => "CrashLoopBackOff",
            Reason::FailedMount => "FailedMount",
            Reason::FailedCreatePodSandBox => "FailedCreatePodSandBox",
            Reason::Failed => "Failed",
            Reason::Unhealthy => "Unhealthy",
            Reason::Killing => "Killing",
            Reason::NodeLost => "NodeLost",
        }
    }
}
